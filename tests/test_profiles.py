"""Hardware profiles: every built-in file loads, numbers match datasheets, bad files fail clearly."""

from __future__ import annotations

import math
import re
import shutil

import pytest

from model.errors import InputError, ProfileError, UnknownNameError
from model.hardware.catalog import get_gpu, get_link, get_node, load_catalog, unique
from model.hardware.gpus import GPU

REQUIRED_GPUS = [
    "h100-sxm",
    "h100-pcie",
    "h200",
    "b200",
    "a100-80gb-sxm",
    "a100-40gb-sxm",
    "l40s",
    "l4",
    "a10",
    "rtx-4090",
    "rtx-3090",
    "rtx-5090",
    "mi300x",
]
REQUIRED_LINKS = [
    "nvlink4",
    "nvlink5",
    "pcie-gen4-x16",
    "pcie-gen5-x16",
    "ib-hdr-200",
    "ib-ndr-400",
    "roce-100",
    "roce-200",
    "roce-400",
    "eth-100g",
    "eth-25g",
    "eth-10g",
    "eth-2.5g",
    "eth-1g",
    "same-gpu",
]


def test_all_required_profiles_exist_and_cite_sources() -> None:
    cat = load_catalog()
    for name in REQUIRED_GPUS:
        gpu = cat.gpu(name)
        for key in (
            "memory.capacity",
            "memory.bandwidth",
            "power.tdp",
            "price.usd_per_hour",
            "efficiency.prefill_mfu",
            "efficiency.decode_mbu",
            "efficiency.step_overhead",
        ):
            assert gpu.source(key).strip(), f"{name}: {key} has no source"
        assert gpu.price_as_of, f"{name}: price needs its date"
    for name in REQUIRED_LINKS:
        link = cat.link(name)
        if link.kind != "same-gpu":
            assert link.source("bandwidth") and link.source("latency") and link.source("efficiency")
    assert cat.node("hgx-h100-8").gpus_per_node == 8


def test_h100_sxm_datasheet_numbers() -> None:
    gpu = get_gpu("h100-sxm")
    assert gpu.memory_bandwidth_bytes_per_s == pytest.approx(3.35e12)  # "3.35TB/s" (H100 datasheet)
    assert gpu.peak_flops("bf16") == pytest.approx(989.4e12, rel=1e-3)  # 1,979 sparse / 2
    assert gpu.peak_flops("fp8") == pytest.approx(1978.9e12, rel=1e-3)
    assert gpu.tdp_w == 700
    assert get_gpu("H100") is gpu  # alias, case-insensitive


def test_no_sparsity_figures_and_sane_ranges() -> None:
    # Dense bf16 peaks stay below 2.5 PFLOP/s per GPU for every chip in the catalog (B200 dense: 2.25).
    for gpu in unique(load_catalog().gpus):
        assert gpu.peak_flops(gpu.dtypes[0]) < 2.6e15
        assert 0.2 < gpu.prefill_mfu <= 0.8 and 0.4 < gpu.decode_mbu <= 0.9
        assert 0 <= gpu.idle_w < gpu.tdp_w
        # fp8 is exactly twice bf16 where both exist (same tensor cores, half the bytes).
        if "fp8" in gpu.dtypes and "bf16" in gpu.dtypes:
            assert gpu.peak_flops("fp8") == pytest.approx(2 * gpu.peak_flops("bf16"), rel=0.02)


def test_links_bandwidth_units() -> None:
    assert get_link("eth-2.5g").bandwidth_bytes_per_s == pytest.approx(2.5e9 / 8)
    assert get_link("ib-ndr-400").bandwidth_bytes_per_s == pytest.approx(50e9)
    same = get_link("same-gpu")
    assert same.kind == "same-gpu" and math.isinf(same.bandwidth_bytes_per_s) and same.latency_s == 0


def test_dtype_the_gpu_lacks() -> None:
    with pytest.raises(InputError, match="dtype: got 'fp8'.*a100"):
        get_gpu("a100-80gb-sxm").peak_flops("fp8")


def test_unknown_name_suggests() -> None:
    with pytest.raises(UnknownNameError, match="did you mean 'h100-sxm'"):
        get_gpu("h100-sxn")
    with pytest.raises(UnknownNameError, match="unknown link"):
        get_link("token-ring")


GOOD_GPU = load_catalog().gpu("h100-sxm").path


def _user_gpu(tmp_path, text: str, name: str = "my-gpu"):
    d = tmp_path / "profiles" / "gpus"
    d.mkdir(parents=True)
    (d / f"{name}.toml").write_text(text)
    return tmp_path / "profiles"


def _h100_text(name: str = "my-gpu") -> str:
    with open(GOOD_GPU, encoding="utf-8") as f:
        text = f.read()
    return text.replace('name = "h100-sxm"', f'name = "{name}"').replace("aliases = [", 'aliases = ["x-" ,')


def test_user_profile_directory_adds_a_gpu(tmp_path) -> None:
    d = _user_gpu(tmp_path, _h100_text())
    gpu = get_gpu("my-gpu", d)
    assert gpu.memory_bandwidth_bytes_per_s == pytest.approx(3.35e12)
    assert get_gpu(str(d / "gpus" / "my-gpu.toml")).name == "my-gpu"  # a path works too


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'bandwidth = { value = "3.35 TB/s"',
            'bandwidth = { value = "989 TFLOPS"',
            "memory.bandwidth: expected a bandwidth",
        ),
        (
            'capacity = { value = "81559 MiB"',
            'capacity = { value = "-81559 MiB"',
            "memory.capacity: expected a bytes.*not negative",
        ),
        ("[memory]", '[memory]\ncolour = "green"', "memory.colour: unknown key"),
        ('tdp = { value = "700 W"', 'tdp = { value = "700 s"', "power.tdp: expected a power"),
        (
            'step_overhead = { value = "',
            'step_overhead = { value = "0 ms", x = "',
            "efficiency.step_overhead: must be > 0",
        ),
    ],
)
def test_malformed_gpu_files_name_file_and_field(tmp_path, old, new, message) -> None:
    text = _h100_text()
    assert old in text, old
    text = text.replace(old, new, 1)
    text = re.sub(r'x = "[^"]*", ', "", text)  # drop the displaced old value
    d = _user_gpu(tmp_path, text)
    with pytest.raises(ProfileError, match=message) as err:
        load_catalog(d)
    assert str(err.value).startswith("my-gpu.toml: ")


def test_missing_field_and_bad_fraction(tmp_path) -> None:
    text = _h100_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith('bandwidth = { value = "3.35')]
    with pytest.raises(ProfileError, match="memory.bandwidth: missing"):
        load_catalog(_user_gpu(tmp_path, "\n".join(lines)))
    bad = text.replace("prefill_mfu = { value = ", "prefill_mfu = { value = 1", 1)
    with pytest.raises(ProfileError, match="prefill_mfu"):
        load_catalog(_user_gpu(tmp_path / "b", bad))


def test_python_api_validates() -> None:
    with pytest.raises(InputError, match="memory_bandwidth_bytes_per_s"):
        GPU(
            name="x",
            full_name="x",
            memory_bytes=1e9,
            memory_bandwidth_bytes_per_s=-1,
            peak_flops_per_s=(("bf16", 1e14),),
            tdp_w=100,
            idle_w=10,
            price_usd_per_hour=1,
            prefill_mfu=0.5,
            decode_mbu=0.7,
            step_overhead_s=0.003,
        )


def test_node_must_reference_existing_link(tmp_path) -> None:
    d = tmp_path / "p" / "nodes"
    d.mkdir(parents=True)
    src = get_node("hgx-h100-8").path
    shutil.copy(src, d / "hgx-h100-8.toml")
    text = (
        (d / "hgx-h100-8.toml").read_text().replace('nic_link = "ib-ndr-400"', 'nic_link = "carrier-pigeon"')
    )
    (d / "hgx-h100-8.toml").write_text(text)
    with pytest.raises(ProfileError, match="hgx-h100-8.toml: nic_link: unknown link 'carrier-pigeon'"):
        load_catalog(tmp_path / "p")


def test_node_links_must_be_of_the_right_kind(tmp_path) -> None:
    d = tmp_path / "p" / "nodes"
    d.mkdir(parents=True)
    text = open(get_node("hgx-h100-8").path, encoding="utf-8").read()  # noqa: SIM115
    swapped = text.replace('intra_node_link = "nvlink4"', 'intra_node_link = "eth-1g"')
    (d / "hgx-h100-8.toml").write_text(swapped)
    with pytest.raises(ProfileError, match="intra_node_link: eth-1g is a network link"):
        load_catalog(tmp_path / "p")
