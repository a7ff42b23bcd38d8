"""Collectives by algorithm (model.hardware.collective_algorithms): each algorithm's time derived by
hand, the choice by message size and topology, and the engines' published thresholds it reproduces."""

from __future__ import annotations

import math

import numpy as np
import pytest

from model.errors import InputError
from model.hardware.catalog import get_gpu, get_link
from model.hardware.collective_algorithms import (
    CUSTOM_MAX_BYTES,
    Fabric,
    allgather_s,
    allreduce_algorithm_s,
    allreduce_choice,
    allreduce_s,
    reduce_scatter_s,
)
from model.hardware.parallelism import Parallelism
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.steps import decode_step_cost

# NVLink 4 (H100 HGX): 450 GB/s x 0.83 = 373.5 GB/s per GPU port, alpha = 3 us, NVSwitch gen 3.
NV4_B, NV4_A = 450e9 * 0.83, 3e-6
# xGMI (MI300X): 64 GB/s x 0.75 = 48 GB/s per peer link, alpha = 5 us, full mesh of 8.
XGMI_B, XGMI_A = 64e9 * 0.75, 5e-6


def test_fabric_of_links() -> None:
    assert Fabric.of(get_link("nvlink4"), 8) == Fabric("switch-multicast", 8, NV4_B, NV4_A)
    assert Fabric.of(get_link("nvlink3"), 8).topology == "switch"  # A100: NVSwitch gen 2, no NVLS
    assert Fabric.of(get_link("xgmi-mi300x"), 8).topology == "full-mesh"
    assert Fabric.of(get_link("pcie-gen4-x16"), 2).topology == "bus"
    assert Fabric.of(get_link("ib-ndr-400"), 16).topology == "network"


def test_each_algorithm_on_nvswitch_by_hand() -> None:
    f = Fabric.of(get_link("nvlink4"), 8)
    m = 1e6  # 1 MB
    ring = 2 * 7 * (NV4_A + m / 8 / NV4_B)  # 14 steps of M/8: 42 us + 4.69 us = 46.7 us
    one = NV4_A + 7 * m / NV4_B  # every GPU reads 7 peers' buffers through its port: 21.7 us
    two = 2 * NV4_A + 2 * 7 * m / 8 / NV4_B  # reduce-scatter + all-gather, 1.75 M per port: 10.7 us
    nvls = 2 * NV4_A + m / NV4_B  # M into the switch, M back: 8.68 us
    for name, want in (("ring", ring), ("one-shot", one), ("two-shot", two), ("nvls", nvls)):
        assert float(allreduce_algorithm_s(m, f, name)) == pytest.approx(want, rel=1e-12)
    assert ring == pytest.approx(46.69e-6, rel=1e-3) and nvls == pytest.approx(8.677e-6, rel=1e-3)


def test_each_algorithm_on_xgmi_mesh_by_hand() -> None:
    f = Fabric.of(get_link("xgmi-mi300x"), 8)
    m = 1e6
    ring = 2 * 7 * (XGMI_A + m / 8 / (7 * XGMI_B))  # 7 rings, one per link (RCCL): 70 us + 5.2 us
    one = XGMI_A + m / XGMI_B  # each peer's M on its own link, all at once: 25.8 us
    two = 2 * XGMI_A + 2 * m / 8 / XGMI_B  # M/8 per link each phase: 15.2 us
    for name, want in (("ring", ring), ("one-shot", one), ("two-shot", two)):
        assert float(allreduce_algorithm_s(m, f, name)) == pytest.approx(want, rel=1e-12)
    with pytest.raises(InputError, match="algorithm"):
        allreduce_algorithm_s(m, f, "nvls")  # no switch to reduce in


def test_tree_across_nodes_by_hand() -> None:
    link = get_link("ib-ndr-400")  # 50 GB/s x 0.85 = 42.5 GB/s per NIC, 5 us
    b, a = link.effective_bandwidth_bytes_per_s, link.latency_s
    f = Fabric.of(link, 16)
    tree = 2 * math.ceil(math.log2(16)) * a + 2 * 4096 / b  # 8 latencies: 40.2 us
    ring = 2 * 15 * (a + 4096 / 16 / b)  # 30 latencies: 150.2 us
    assert float(allreduce_algorithm_s(4096, f, "tree")) == pytest.approx(tree, rel=1e-12)
    assert float(allreduce_algorithm_s(4096, f, "ring")) == pytest.approx(ring, rel=1e-12)
    t, name = allreduce_choice(np.array([4096.0, 1e9]), f)
    assert list(name) == ["tree", "ring"]  # ring's 1.875 M/B beats the tree's 2 M/B on 1 GB
    assert float(t[0]) == pytest.approx(tree, rel=1e-12)


def test_choice_by_size_reproduces_vllm_thresholds() -> None:
    # One-shot vs two-shot on plain NVSwitch (no NVLS): alpha + (n-1) M/B = 2 alpha + 2 (n-1) M/(n B)
    # -> M* = alpha B / ((n-1) (1 - 2/n)). n = 8: 3e-6 x 373.5e9 / (7 x 0.75) = 213 kB;
    # n = 4: 3e-6 x 373.5e9 / (3 x 0.5) = 747 kB. vLLM switches at 256 KiB (8 GPUs) and 512 KiB
    # (4 GPUs) (csrc/custom_all_reduce.cuh), within a factor 1.5 of both.
    plain_switch = {n: Fabric("switch", n, NV4_B, NV4_A) for n in (4, 8)}
    for n, cross in ((8, NV4_A * NV4_B / (7 * 0.75)), (4, NV4_A * NV4_B / (3 * 0.5))):
        _, below = allreduce_choice(cross * 0.99, plain_switch[n])
        _, above = allreduce_choice(cross * 1.01, plain_switch[n])
        assert (str(below), str(above)) == ("one-shot", "two-shot")
    assert 213e3 < 256 * 1024 < 1.5 * 213e3 and 512 * 1024 < 747e3 < 1.5 * 512 * 1024
    # custom kernels stop at 8 MiB: a 64 MiB all-reduce on A100 NVSwitch goes back to the ring
    _, big = allreduce_choice(8 * CUSTOM_MAX_BYTES, Fabric.of(get_link("nvlink3"), 8))
    assert str(big) == "ring"
    # PCIe offers only the ring
    assert str(allreduce_choice(1e3, Fabric.of(get_link("pcie-gen4-x16"), 2))[1]) == "ring"


def test_choice_on_h100_decode_message_is_one_shot() -> None:
    # One decode token of Llama-3.1-70B: 8192 x 2 bytes = 16 kB over TP 8 on NVLink 4:
    # one-shot 3 us + 7 x 16384 / 373.5e9 = 3.31 us; ring 14 x (3 us + 2048 / 373.5e9) = 42.1 us.
    t, name = allreduce_choice(16384.0, Fabric.of(get_link("nvlink4"), 8))
    assert str(name) == "one-shot"
    assert float(t) == pytest.approx(3e-6 + 7 * 16384 / NV4_B, rel=1e-12)
    assert float(allreduce_s(16384.0, 8, get_link("nvlink4"))) == pytest.approx(float(t), rel=1e-12)


def test_allgather_and_reduce_scatter_by_hand() -> None:
    # All-gather of a 1 MB output over 8 GPUs on NVLink 4: direct = alpha + 7 M / (8 B) = 5.34 us;
    # ring = 7 (alpha + M / (8 B)) = 23.3 us + 2.3 us: the direct one is taken.
    want = NV4_A + 7 * 1e6 / 8 / NV4_B
    assert float(allgather_s(1e6, 8, get_link("nvlink4"))) == pytest.approx(want, rel=1e-12)
    assert float(reduce_scatter_s(1e6, 8, get_link("nvlink4"))) == pytest.approx(want, rel=1e-12)
    pcie = get_link("pcie-gen5-x16")  # ring only: (n-1) (alpha + M / (n B))
    b = pcie.effective_bandwidth_bytes_per_s
    want_ring = 3 * (pcie.latency_s + 1e6 / 4 / b)
    assert float(allgather_s(1e6, 4, pcie)) == pytest.approx(want_ring, rel=1e-12)
    assert float(allgather_s(1e6, 1, pcie)) == 0.0


def test_mi300x_tp8_decode_allreduce_no_longer_dominates() -> None:
    # Llama-3.1-405B on 8 MI300X at batch 1: 126 layers x 2 all-reduces of 16384 x 2 = 32 kB.
    # Ring: 14 x (5 us + 4096 / 48e9) = 71.2 us each -> 17.9 ms per step; one-shot 5 us + 32768 /
    # 48e9 = 5.68 us each -> 1.43 ms per step (the "about 2x too slow" TP8 rows).
    dep = Deployment(get_model("llama-3.1-405b"), get_gpu("mi300x"), Parallelism(tp=8), weight_dtype="fp8")
    comm = float(decode_step_cost(dep, 1, 1024).comm_s)
    assert comm == pytest.approx(2 * 126 * (XGMI_A + 32768 / XGMI_B), rel=1e-9)
    assert comm < 0.1 * 2 * 126 * 14 * (XGMI_A + 4096 / XGMI_B)


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(InputError, match="message_bytes"):
        allreduce_s(-1.0, 8, get_link("nvlink4"))
    with pytest.raises(InputError, match="n_gpus"):
        Fabric.of(get_link("nvlink4"), 0)
