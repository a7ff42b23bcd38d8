"""2026 hardware: GB200, B300, GB300, H20, MI325X, MI355X, RTX PRO 6000 Blackwell, their nodes
(HGX B300, MI355X platform, GB200/GB300 NVL72 racks) and links (ConnectX-8 XDR 800G, MI355X xGMI).
Every expected value is derived by hand from the datasheet figure quoted in the profile's source."""

from __future__ import annotations

import json
import shutil

import pytest

from model.cli import main
from model.errors import InputError, ProfileError
from model.hardware.catalog import get_gpu, get_link, get_node, load_catalog
from model.hardware.nodes import Node

NEW_GPUS = ("gb200", "b300", "gb300", "h20", "h800", "mi325x", "mi355x", "rtx-pro-6000")
WITH_FP4 = ("gb200", "b300", "gb300", "mi355x", "rtx-pro-6000")
MIB = 2**20
GIB = 2**30


@pytest.mark.parametrize("name", NEW_GPUS)
def test_new_gpu_loads_and_every_number_cites_a_source(name: str) -> None:
    gpu = get_gpu(name)
    for key in ("memory.capacity", "memory.bandwidth", "power.tdp", "power.idle", "price.usd_per_hour"):
        assert gpu.source(key).strip(), f"{name}: {key}"
    for dtype in gpu.dtypes:
        assert gpu.source(f"compute.{dtype}").strip(), f"{name}: compute.{dtype}"
    assert gpu.price_as_of == "2026-11"
    assert ("fp4" in gpu.dtypes) == (name in WITH_FP4)


def test_gb200_per_gpu_figures_from_the_nvl72_rack() -> None:
    gpu = get_gpu("gb200")
    # NVL72 spec page: FP4 1,440 PF and FP8 720 PF for 72 GPUs with sparsity -> / 72 / 2.
    assert gpu.peak_flops("fp4") == pytest.approx(1440e15 / 72 / 2)  # 10 PFLOP/s
    assert gpu.peak_flops("fp8") == pytest.approx(720e15 / 72 / 2)  # 5 PFLOP/s
    assert gpu.peak_flops("bf16") == pytest.approx(360e15 / 72 / 2)  # 2.5 PFLOP/s
    assert gpu.memory_bandwidth_bytes_per_s == pytest.approx(576e12 / 72)  # 8 TB/s
    assert gpu.memory_bytes == 189471 * MIB  # nvidia-smi 'NVIDIA GB200'
    assert gpu.interconnect_bandwidth_bytes_per_s == pytest.approx(130e12 / 72 / 2, rel=0.01)  # 1.8 TB/s
    assert gpu.tdp_w == 1200


def test_blackwell_ultra_fp4_and_memory() -> None:
    b300, gb300 = get_gpu("b300"), get_gpu("gb300")
    # HGX B300: FP4 108 PFLOPS dense for 8 GPUs; GB300 NVL72: 1,080 PFLOPS dense for 72 GPUs.
    assert b300.peak_flops("fp4") == pytest.approx(108e15 / 8)  # 13.5 PFLOP/s
    assert gb300.peak_flops("fp4") == pytest.approx(1080e15 / 72)  # 15 PFLOP/s
    # BF16 unchanged from B200 on B300 (36 PF sparse / 8 / 2), FP4 is 6x BF16 there (not 4x as on B200).
    assert b300.peak_flops("bf16") == pytest.approx(36e15 / 8 / 2)
    assert b300.peak_flops("fp4") / b300.peak_flops("bf16") == pytest.approx(6.0)
    assert b300.memory_bytes == 275040 * MIB and gb300.memory_bytes == 284208 * MIB
    assert b300.tdp_w == 1100 and gb300.tdp_w == 1400
    assert b300.peak_flops("int8") < 0.2e15  # Blackwell Ultra cut INT8 tensor throughput


def test_h20_is_bandwidth_rich_and_compute_poor() -> None:
    h20, h100 = get_gpu("h20"), get_gpu("h100-sxm")
    assert h20.memory_bandwidth_bytes_per_s == pytest.approx(4.0e12)
    assert h20.peak_flops("fp8") == pytest.approx(296e12) and h20.peak_flops("bf16") == pytest.approx(148e12)
    assert h20.memory_bytes == 97871 * MIB and h20.tdp_w == 400
    # Ridge point (FLOP per byte): 148e12 / 4e12 = 37 against H100's 989.4e12 / 3.35e12 = 295.
    assert h20.peak_flops("bf16") / h20.memory_bandwidth_bytes_per_s == pytest.approx(37.0)
    assert h100.peak_flops("bf16") / h100.memory_bandwidth_bytes_per_s == pytest.approx(295.3, rel=1e-3)


def test_amd_mi325x_and_mi355x() -> None:
    mi325, mi355 = get_gpu("mi325x"), get_gpu("mi355x")
    assert mi325.peak_flops("fp8") == get_gpu("mi300x").peak_flops("fp8")  # same CDNA 3 compute
    assert mi325.memory_bandwidth_bytes_per_s == pytest.approx(6e12) and mi325.memory_bytes == 256 * GIB
    assert mi325.tdp_w == 1000
    # MI355X: 256 CUs x 8,192 FP8 FLOP per clock x 2.4 GHz; BF16 half of it, MXFP4 twice it.
    fp8 = 256 * 8192 * 2.4e9
    assert mi355.peak_flops("fp8") == pytest.approx(fp8, rel=1e-5)
    assert mi355.peak_flops("bf16") == pytest.approx(fp8 / 2, rel=1e-5)
    assert mi355.peak_flops("fp4") == pytest.approx(2 * fp8, rel=1e-5)
    assert mi355.memory_bytes == 288 * GIB and mi355.memory_bandwidth_bytes_per_s == pytest.approx(8e12)
    # 7 Infinity Fabric links x 153.6 GB/s (both directions) / 2 per direction.
    assert mi355.interconnect_bandwidth_bytes_per_s == pytest.approx(7 * 153.6e9 / 2)
    assert get_link("xgmi-mi355x").bandwidth_bytes_per_s == pytest.approx(153.6e9 / 2)


def test_rtx_pro_6000_blackwell() -> None:
    gpu = get_gpu("rtx-pro-6000")
    assert gpu.memory_bytes == 97887 * MIB and gpu.memory_bandwidth_bytes_per_s == pytest.approx(1792e9)
    # Professional card: FP32-accumulate rate = FP16-accumulate rate; FP4 = 4 x BF16 = 2,015.2 TF,
    # whose 2:4-sparse double is the marketed 4,000 'AI TOPS'.
    assert gpu.peak_flops("fp4") == pytest.approx(4 * 503.8e12)
    assert 2 * gpu.peak_flops("fp4") == pytest.approx(4.03e15, rel=0.01)
    assert gpu.peak_flops("bf16") > 2 * get_gpu("rtx-5090").peak_flops("bf16")
    assert gpu.interconnect_kind == "none" and gpu.tdp_w == 600


def test_xdr_800_link() -> None:
    link = get_link("ib-xdr-800")
    assert link.kind == "network" and link.bandwidth_bytes_per_s == pytest.approx(800e9 / 8)
    assert get_link("connectx-8") is link


def test_nvl72_racks_are_one_nvlink_domain_of_18_trays() -> None:
    for name, gpu, nic in (("gb200-nvl72", "gb200", "ib-ndr-400"), ("gb300-nvl72", "gb300", "ib-xdr-800")):
        node = get_node(name)
        assert (node.gpu, node.gpus_per_node, node.nics_per_node, node.nic_link) == (gpu, 4, 4, nic)
        assert node.domain_gpus == 72 == 18 * node.gpus_per_node
        assert node.intra_node_link == "nvlink5"
        assert node.source("nvlink_domain_gpus")
    # An HGX server is its own NVLink domain (the default).
    for name in ("hgx-b300-8", "hgx-h100-8", "mi355x-8"):
        node = get_node(name)
        assert node.nvlink_domain_gpus is None and node.domain_gpus == node.gpus_per_node == 8
    assert get_node("hgx-b300-8").nic_link == "ib-xdr-800"
    assert get_node("mi355x-8").intra_node_link == "xgmi-mi355x"


def _node(**kw) -> Node:
    base = dict(
        name="n", full_name="n", gpu="gb200", gpus_per_node=4, intra_node_link="nvlink5",
        nic_link="ib-ndr-400", nics_per_node=4,
    )  # fmt: skip
    return Node(**(base | kw))


def test_nvlink_domain_must_be_a_multiple_of_the_node() -> None:
    assert _node(nvlink_domain_gpus=72).domain_gpus == 72
    for bad in (2, 70, 2048, True):
        with pytest.raises(InputError, match="nvlink_domain_gpus.*multiple of gpus_per_node \\(4\\)"):
            _node(nvlink_domain_gpus=bad)


def test_nvlink_domain_in_a_profile_file_names_file_and_field(tmp_path) -> None:
    d = tmp_path / "p" / "nodes"
    d.mkdir(parents=True)
    src = get_node("gb200-nvl72").path
    shutil.copy(src, d / "gb200-nvl72.toml")
    text = (d / "gb200-nvl72.toml").read_text().replace("{ value = 72,", "{ value = 70,")
    (d / "gb200-nvl72.toml").write_text(text)
    with pytest.raises(ProfileError, match="gb200-nvl72.toml: nvlink_domain_gpus: got 70"):
        load_catalog(tmp_path / "p")


def test_cli_lists_the_new_hardware(capsys) -> None:
    assert main(["list", "gpus", "--json"]) == 0
    names = {row["name"] for row in json.loads(capsys.readouterr().out)}
    assert set(NEW_GPUS) <= names
    assert main(["list", "nodes", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["gb300-nvl72"]["nvlink_domain_gpus"] == 72 and rows["hgx-b300-8"]["nvlink_domain_gpus"] == 8


def test_h800_is_an_h100_with_a_cut_nvlink() -> None:
    from model.hardware.collectives import default_tp_link

    h800, h100 = get_gpu("h800"), get_gpu("h100-sxm")
    assert h800.peak_flops("fp8") == h100.peak_flops("fp8")
    assert h800.memory_bandwidth_bytes_per_s == h100.memory_bandwidth_bytes_per_s
    # NVLink 400 GB/s both directions -> 200 GB/s per direction; TP groups all-reduce over that link.
    assert h800.interconnect_bandwidth_bytes_per_s == pytest.approx(400e9 / 2)
    link = default_tp_link(h800, 8)
    assert link.name == "nvlink4-h800" and link.bandwidth_bytes_per_s == pytest.approx(200e9)
    assert default_tp_link(get_gpu("mi355x"), 8).name == "xgmi-mi300x"  # documented: kind 'xGMI'
