"""MoE kernel terms of issue 14, hand-derived: DeepEP's normal (high-throughput) all-to-all against its
low-latency one and the choice between them by phase, two-micro-batch overlap of the all-to-all with
compute, and grouped-GEMM efficiency at few tokens per expert (with DeepEP's and DeepGEMM's published
tables as the checks)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.errors import InputError
from model.hardware.catalog import get_engine, get_gpu, get_link
from model.hardware.parallelism import Parallelism
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.expert_parallel import (
    EPGroup,
    grouped_gemm_rows,
    moe_comm_time_s,
    moe_dispatch_combine_s,
    node_limit,
    normal_copies_per_token,
    overlapped_layer_s,
)
from model.physics.steps import decode_step_cost, grouped_gemm_mfu_at, prefill_cost

DSV3 = get_model("deepseek-v3")
H800 = get_gpu("h800")
NV_H800, NDR = get_link("nvlink4-h800"), get_link("ib-ndr-400")


def test_normal_kernel_copies_per_token_at_ep32_with_node_limited_routing() -> None:
    """DeepSeek-V3 (k = 8, n_group 8, topk_group 4) at EP32 over 4 nodes of 8 GPUs.

    Node limit: min(4 nodes, 4 x max(1, 4 / 8)) = 4 (not binding). Destination nodes per token
    D = 4 (1 - 0.75^8) = 4 x 0.899887084960937 = 3.599548339843750, remote 3/4 of them: 2.699661254882812
    RDMA copies (the low-latency kernels send 8 x 24/32 = 6). Distinct GPUs 32 (1 - (31/32)^8) =
    7.177717..., NVLink copies x 7/8 = 6.280503.... Dispatch bytes over RDMA per token: 7168 x
    1.03125 x 2.699661 = 19,955.9 B (low-latency: 44,352 B).
    At EP64 over 8 nodes the limit binds: 4 nodes of 8, D = 3.599548 (8 (1 - (7/8)^8) = 5.251 without
    it), RDMA copies D x 7/8 = 3.149605.
    """
    ep32 = EPGroup(32, 8, NV_H800, NDR)
    assert (ep32.nodes, ep32.local) == (4, 8) and node_limit(DSV3, 4) == 4.0
    rdma, nvl = normal_copies_per_token(DSV3, ep32)
    d = 4 * (1 - 0.75**8)
    assert d == pytest.approx(3.59954833984375, rel=1e-15)
    assert rdma == pytest.approx(2.6996612548828125, rel=1e-14)
    assert nvl == pytest.approx(32 * (1 - (31 / 32) ** 8) * 7 / 8, rel=1e-14)
    assert nvl == pytest.approx(6.2805, abs=1e-4)
    assert 7168 * 1.03125 * rdma == pytest.approx(19_955.9, abs=0.1)
    assert 7168 * 1.03125 * 8 * 24 / 32 == 44_352
    ep64 = EPGroup(64, 8, NV_H800, NDR)
    assert node_limit(DSV3, 8) == 4.0
    assert normal_copies_per_token(DSV3, ep64)[0] == pytest.approx(d * 7 / 8, rel=1e-14)
    kimi = get_model("kimi-k2")  # n_group 1: no node limit
    assert node_limit(kimi, 8) == 8.0
    assert normal_copies_per_token(kimi, ep64)[0] == pytest.approx(8 * (1 - (7 / 8) ** 8) * 7 / 8, rel=1e-14)


def test_normal_kernel_matches_deepep_published_bandwidth() -> None:
    """DeepEP docs/legacy.md, normal kernels on H800 + CX7 400G, 4,096 tokens, top-4 groups, top-8:
    internode EP32 dispatch 58 GB/s, combine 57 GB/s; EP64 51 / 50 GB/s (RDMA "bottleneck bandwidth",
    counted as tokens x destination nodes x bytes, own node included: tests/test_internode.py
    num_rdma_token_sent). The model is RDMA-bound there (NVLink copies / 166 GB/s < RDMA copies /
    42.5 GB/s) and gives logical bandwidth = 42.5 GB/s x n / (n - 1) less the 5 us latency:
    EP32 56.5 GB/s (-3%), EP64 48.5 GB/s (-5%)."""
    tokens = 4096.0
    for ep, measured in ((32, 58e9), (64, 51e9)):
        group = EPGroup(ep, 8, NV_H800, NDR)
        rdma, nvl = normal_copies_per_token(DSV3, group)
        assert nvl / NV_H800.effective_bandwidth_bytes_per_s < rdma / NDR.effective_bandwidth_bytes_per_s
        arch = DSV3
        dispatch, _ = moe_dispatch_combine_s(np.array(tokens), arch, group, normal=True)
        per_layer = float(dispatch) / arch.num_moe_layers
        dest = rdma * group.nodes / (group.nodes - 1)
        logical = tokens * dest * 7168 * 1.03125 / per_layer
        assert abs(logical / measured - 1) < 0.06, (ep, logical)


def test_kernel_chosen_by_phase() -> None:
    """SGLang --deepep-mode auto: a step with prompt tokens runs the normal kernels, a decode step the
    low-latency ones. DEP32 on 4 H800 nodes, TP1, 4,096 tokens on the hottest GPU each way: the
    prefill step's all-to-all is exactly moe_comm_time_s(normal=True), the decode step's
    normal=False, and per byte the normal kernels move 2.70 / 6 of the RDMA copies."""
    dep = Deployment(DSV3, H800, Parallelism(dp_attention=32, ep=32, nodes=4), weight_dtype="fp8_block")
    group = EPGroup(32, 8, dep.intra_link, dep.scale_out_link_resolved)
    tokens = 32 * 4096  # 32 prompts of 4,096, one per rank; decode: 4,096 sequences per rank
    sent = 1.2 * tokens / 32  # the hottest GPU receives f x the mean
    prefill = prefill_cost(dep, 4096, batch=32)
    normal = moe_comm_time_s(np.array(sent), DSV3, group, normal=True)
    assert float(prefill.comm_s) == pytest.approx(float(normal), rel=1e-12)
    decode = decode_step_cost(dep, tokens, 2048)
    low_latency = moe_comm_time_s(np.array(sent), DSV3, group, normal=False)
    assert float(decode.comm_s) == pytest.approx(float(low_latency), rel=1e-12)
    assert float(normal) < 0.5 * float(low_latency)


def test_overlapped_layer_by_hand() -> None:
    """Two micro-batches, per micro-batch per layer: attention side a = 3, experts e = 1, dispatch
    d = 2, combine c = 4 (ms). Pairs: max(2, 3) + max(2, 1) + max(4, 1) + max(4, 3) = 3 + 2 + 4 + 4
    = 13 ms, against 8 + 12 = 20 without overlap and max(8, 12) = 12 with perfect hiding."""
    assert float(overlapped_layer_s(3.0, 1.0, 2.0, 4.0)) == 13.0
    assert float(overlapped_layer_s(3.0, 1.0, 0.0, 0.0)) == 8.0  # no communication: both micro-batches
    assert float(overlapped_layer_s(0.0, 0.0, 2.0, 4.0)) == 12.0


def test_overlap_is_an_engine_and_deployment_option() -> None:
    """Off in every engine profile by default (SGLang --enable-two-batch-overlap, vLLM --enable-dbo
    default False); the Deployment override turns it on. SGLang's EP32 prefill row (16,384 tokens per
    H100): with overlap the step is between max(compute, comm) and the serial sum."""
    for name in ("sglang", "vllm", "trtllm"):
        eng = get_engine(name)
        assert eng.ep_overlap == "none" and not eng.overheads(None).micro_batch_overlap
        assert eng.source("overheads.ep_overlap")
    par = Parallelism(dp_attention=32, ep=32, nodes=4)
    kw = {"weight_dtype": "fp8_block", "redundant_experts": 32}
    h100 = get_gpu("h100-sxm")
    off = Deployment(DSV3, h100, par, overheads=get_engine("sglang").overheads(h100), **kw)
    on = Deployment(DSV3, h100, par, micro_batch_overlap=True, **kw)
    assert not off.overlaps_micro_batches and on.overlaps_micro_batches
    serial = prefill_cost(Deployment(DSV3, h100, par, **kw), 4096, batch=128)
    over = prefill_cost(on, 4096, batch=128)
    work = np.maximum(serial.compute_s, serial.memory_s)
    assert float(np.maximum(work, serial.comm_s)) < float(over.time_s) < float(serial.time_s)
    # one sequence cannot be split in two micro-batches: no overlap
    assert float(prefill_cost(on, 4096, batch=1).time_s) == float(
        prefill_cost(Deployment(DSV3, h100, par, **kw), 4096, batch=1).time_s
    )
    with pytest.raises(InputError, match="micro_batch_overlap"):
        Deployment(DSV3, h100, par, micro_batch_overlap="yes", **kw)


def test_grouped_gemm_efficiency_at_few_tokens_per_expert() -> None:
    """DeepSeek-V3 FP8 block weights on H800: expert GEMM rate 1978.9 x 0.69 x 0.7 = 955.81 TFLOP/s
    (MFU 0.483 of the FP8 peak), ridge 955.81e12 x 1.000244 / (2 x 3.35e12 x 0.8) = 178.37 rows,
    T_half = 0.75 x 178.37 = 133.77. At m = 8 rows per expert: padded 8 + 64 x 8/128 = 12 rows,
    MFU = 0.483 x 8 / (12 + 133.77) = 0.02651; at m = 576 (a wide-EP decode): 640 rows,
    0.483 x 576 / 773.77 = 0.35955.
    Checked against DeepGEMM's grouped FP8 GEMMs (README 2025-03-25, H800, N x K = 4096 x 7168 and
    7168 x 2048): at exact multiples of 128 rows (no padding) the model's efficiency relative to 4,096
    rows, m / (m + T_half) x (4096 + T_half) / 4096, is 0.679 / 0.820 / 0.913 at 256 / 512 / 1024
    rows per group, against DeepGEMM's 0.692-0.671 / 0.773-0.755 / 0.916-0.762 (masked over
    contiguous-4096 TFLOPS: 932/1346, 815/1214; 1040/1346, 916/1214; 1233/1346, 925/1214)."""
    dep = Deployment(DSV3, H800, 1, weight_dtype="fp8_block")
    mfu = 0.6 * 1.15 * 0.7
    ridge = 1978.9e12 * mfu * dep.weight_bytes_per_element("experts") / (2 * 3.35e12 * 0.8)
    assert ridge == pytest.approx(178.366, abs=1e-3)
    half = 0.75 * ridge
    assert float(grouped_gemm_rows(8.0)) == 12.0 and float(grouped_gemm_rows(576.0)) == 640.0
    assert float(grouped_gemm_mfu_at(dep, 8.0)) == pytest.approx(mfu * 8 / (12 + half), rel=1e-12)
    assert float(grouped_gemm_mfu_at(dep, 8.0)) == pytest.approx(0.02651, abs=1e-5)
    assert float(grouped_gemm_mfu_at(dep, 576.0)) == pytest.approx(0.35955, abs=1e-5)
    deepgemm = {
        256: (932 / 1346, 815 / 1214),
        512: (1040 / 1346, 916 / 1214),
        1024: (1233 / 1346, 925 / 1214),
    }
    for m, published in deepgemm.items():
        relative = m / (m + half) * (4096 + half) / 4096
        assert min(published) - 0.02 <= relative <= max(published) + 0.07, (m, relative)


@settings(max_examples=60, deadline=None)
@given(
    st.floats(1.0, 1e6, allow_nan=False, allow_infinity=False),
    st.floats(1.0, 1e6, allow_nan=False, allow_infinity=False),
)
def test_more_tokens_per_expert_never_lower_efficiency(m: float, extra: float) -> None:
    dep = Deployment(DSV3, H800, 1, weight_dtype="fp8_block")
    low, high = grouped_gemm_mfu_at(dep, np.array([m, m + extra]))
    assert high >= low * (1 - 1e-12)


@settings(max_examples=100, deadline=None)
@given(*[st.floats(0.0, 10.0, allow_nan=False, allow_infinity=False) for _ in range(4)])
def test_overlap_never_beats_max_of_compute_and_comm(a: float, e: float, d: float, c: float) -> None:
    """The overlapped layer is never shorter than the longer of the two micro-batches' compute (2a + 2e)
    and communication (2d + 2c), nor longer than their sum."""
    layer = float(overlapped_layer_s(a, e, d, c))
    compute, comm = 2 * (a + e), 2 * (d + c)
    assert max(compute, comm) * (1 - 1e-12) <= layer <= (compute + comm) * (1 + 1e-12)
    assert math.isfinite(layer)


def test_bad_overlap_setting_is_one_clear_error() -> None:
    """An engine profile's ``overheads.ep_overlap`` must name a known mode."""
    import dataclasses

    with pytest.raises(InputError, match=r"ep_overlap.*two-micro-batch"):
        dataclasses.replace(get_engine("sglang"), ep_overlap="always")
    on = dataclasses.replace(get_engine("sglang"), ep_overlap="two-micro-batch")
    assert on.overheads(None).micro_batch_overlap
    par = Parallelism(dp_attention=32, ep=32, nodes=4)
    dep = Deployment(DSV3, H800, par, weight_dtype="fp8_block", overheads=on.overheads(H800))
    assert dep.overlaps_micro_batches
