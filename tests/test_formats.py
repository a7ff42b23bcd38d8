"""The numeric-format table, per-component precision and tokens per decode step: hand-derived
bytes per parameter (block scales included), which GPU peak a format's math runs at, refusals, and
that one function decides the tokens a decode step yields (roofline TPOT and simulator agree)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import model
from model.errors import InputError
from model.hardware import formats
from model.hardware.catalog import get_gpu
from model.hardware.formats import FORMATS, NumericFormat, Precision, bytes_per_element, get_format
from model.llm.arch import total_params, weight_bytes, weight_params_by_component
from model.llm.catalog import get_model
from model.physics import decode_tokens
from model.physics.decode_tokens import DecodeTokens, decode_steps
from model.physics.deployment import Deployment
from model.physics.generation import mean_tpot_s
from model.physics.steps import decode_step_cost
from model.sim.engine import InstanceSpec, SimRequests
from model.sim.simulate import simulate_colocated
from model.sim.steps import RooflineSteps
from model.workload.scenario import Scenario
from model.workload.slo import SLO

LLAMA_8B = get_model("llama-3.1-8b")


# ------------------------------------------------------------------------------- the table


@pytest.mark.parametrize(
    ("name", "bits"),
    [
        ("bf16", 16.0),
        ("fp16", 16.0),
        ("fp8", 8.0),  # per-tensor scale: one number per tensor
        ("fp8_block", 8.0 + 32.0 / (128 * 128)),  # DeepSeek-V3: fp32 scale per 128x128 block
        ("int8", 8.0),
        ("nvfp4", 4.0 + 8.0 / 16.0),  # E2M1 + FP8 E4M3 scale per 16 = 4.5
        ("mxfp4", 4.0 + 8.0 / 32.0),  # E2M1 + E8M0 scale per 32 = 4.25
        ("int4_g128", 4.0 + (16.0 + 4.0) / 128.0),  # AWQ/GPTQ: fp16 scale + 4-bit zero per 128
        ("q4_0", 18 * 8 / 32),  # ggml block_q4_0: 18 bytes per 32 weights = 4.5
        ("q8_0", 34 * 8 / 32),  # ggml block_q8_0: 34 bytes per 32 weights = 8.5
        ("q4_k_m", 4.58 * 2**30 * 8 / 8.030e9),  # llama.cpp: 4.58 GiB for Llama-3-8B ~ 4.90
    ],
)
def test_bits_per_element_include_block_scales(name: str, bits: float) -> None:
    assert get_format(name).bits_per_element == pytest.approx(bits, rel=1e-4)
    assert bytes_per_element(name) == pytest.approx(bits / 8.0, rel=1e-4)


def test_hand_derived_bytes_per_parameter() -> None:
    assert bytes_per_element("nvfp4") == 0.5625  # 4.5 / 8
    assert bytes_per_element("mxfp4") == 0.53125  # 4.25 / 8
    assert bytes_per_element("int4") == 0.51953125  # (4 + 20 / 128) / 8
    assert bytes_per_element("fp4") == bytes_per_element("nvfp4")  # the old name is NVFP4
    assert bytes_per_element("Q8-0") == 1.0625  # case and dash tolerant
    assert all(f.source for f in FORMATS)  # every row cites its layout


def test_llama_31_8b_weight_bytes_at_nvfp4() -> None:
    # Llama-3.1-8B: embeddings 2 x 128256 x 4096 (untied) = 1,050,673,152; attention 32 x 41,943,040
    # = 1,342,177,280; MLP 32 x 3 x 4096 x 14336 = 5,637,144,576; total 8,029,995,008 weights.
    total = 2 * 128256 * 4096 + 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024) + 32 * 3 * 4096 * 14336
    assert total == 8_029_995_008 == total_params(LLAMA_8B)
    assert weight_bytes(LLAMA_8B, "nvfp4") == pytest.approx(8_029_995_008 * 0.5625)  # 4.517 GB
    assert weight_bytes(LLAMA_8B, "nvfp4") == pytest.approx(4_516_872_192, abs=1)
    dep = Deployment(LLAMA_8B, get_gpu("b200"), weight_dtype="nvfp4")
    assert dep.weight_bytes_per_gpu == pytest.approx(4_516_872_192, abs=1)


def test_mixed_precision_weight_bytes_by_component() -> None:
    # Mixtral-8x7B, routed experts in MXFP4, the rest bf16: 32 x 8 experts x 3 x 4096 x 14336 expert
    # weights at 0.53125 B + attention and everything else at 2 B.
    arch = get_model("mixtral-8x7b")
    parts = weight_params_by_component(arch)
    assert parts["experts"] == 32 * 8 * 3 * 4096 * 14336
    assert sum(parts.values()) == total_params(arch)
    prec = Precision(attention="bf16", mlp="bf16", experts="mxfp4", kv_cache="bf16")
    expected = parts["experts"] * 0.53125 + (parts["attention"] + parts["mlp"]) * 2.0
    assert weight_bytes(arch, prec) == pytest.approx(expected, rel=1e-15)
    dep = Deployment(arch, get_gpu("b200"), parallel=2, precision=prec)
    assert dep.weight_bytes_per_gpu == pytest.approx(expected / 2, rel=1e-15)
    # decode streams the touched experts in MXFP4 and the rest in bf16
    assert float(decode_step_cost(dep, 1, 100).weight_bytes) < float(
        decode_step_cost(Deployment(arch, get_gpu("b200"), parallel=2), 1, 100).weight_bytes
    )


# ------------------------------------------------------------------------------- which peak


def test_fp8_gemm_peak_h100_and_refused_on_a100() -> None:
    h100 = Deployment(LLAMA_8B, get_gpu("h100-sxm"), weight_dtype="fp8")
    assert h100.peak_flops_per_s == 1978.9e12  # H100 SXM FP8 dense peak
    # MFU x LARGE_GEMM_MFU_FACTOR x FP8 ratio
    assert h100.gemm_flops_per_s("mlp") == pytest.approx(1978.9e12 * 0.6 * 1.15 * 0.7)
    assert h100.attention_peak_flops_per_s == 989.4e12  # attention stays on the bf16 path
    # No FP8 tensor cores on Ampere: refused (as before the table), naming what the A100 can run.
    with pytest.raises(InputError) as err:
        Deployment(LLAMA_8B, get_gpu("a100-80gb-sxm"), weight_dtype="fp8")
    assert err.value.field == "dtype"
    assert "fp8 tensor-core math" in str(err.value) and "int4_g128" in str(err.value)


def test_weight_only_formats_compute_at_16_bit_peak() -> None:
    a100 = Deployment(LLAMA_8B, get_gpu("a100-80gb-sxm"), weight_dtype="int4")
    assert a100.peak_flops_per_s == 312e12 and a100.gemm_mfu == pytest.approx(0.6 * 1.15)
    assert get_format("q4_k_m").weight_only and get_format("q4_k_m").math == "fp16"
    # T_ridge (hand): 312e12 x 0.6 x 1.15 x 0.51953125 / (2 x 2039e9 x 0.8)
    gpu = get_gpu("a100-80gb-sxm")
    ridge = 312e12 * 0.6 * 1.15 * 0.51953125 / (2 * gpu.memory_bandwidth_bytes_per_s * gpu.decode_mbu)
    assert a100.gemm_ridge_tokens == pytest.approx(ridge, rel=1e-12)


def test_fp4_runs_on_blackwell_only() -> None:
    b200 = Deployment(LLAMA_8B, get_gpu("b200"), weight_dtype="mxfp4")
    assert b200.peak_flops_per_s == 9000e12
    with pytest.raises(InputError, match="fp4 tensor-core math"):
        Deployment(LLAMA_8B, get_gpu("h100-sxm"), weight_dtype="nvfp4")


# ------------------------------------------------------------------------------- precision and KV


@pytest.mark.parametrize(
    ("dtype", "kv"),
    [("bf16", "bf16"), ("fp16", "fp16"), ("fp8", "fp8"), ("int4", "bf16"), ("fp4", "bf16"), ("q8_0", "bf16")],
)
def test_default_kv_decided_once(dtype: str, kv: str) -> None:
    assert Precision.from_dtypes(dtype).kv_cache == kv
    scn = Scenario.build("llama-3.1-8b", "chat", SLO(1.0, 0.1), dtype=dtype)
    assert scn.kv_dtype_resolved == kv
    gpu = get_gpu("b200")
    assert Deployment(LLAMA_8B, gpu, weight_dtype=dtype).kv_dtype_resolved == kv


def test_bad_formats_are_one_clear_error() -> None:
    with pytest.raises(InputError) as err:
        Precision.from_dtypes("bf16", "mxfp4")  # engines do not store KV in MXFP4
    assert err.value.field == "kv_dtype"
    with pytest.raises(InputError) as err:
        Deployment(LLAMA_8B, get_gpu("h100-sxm"), weight_dtype="fp5")
    assert err.value.field == "dtype"
    with pytest.raises(InputError, match="precision"):
        Deployment(LLAMA_8B, get_gpu("h100-sxm"), precision="fp8")  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    st.floats(1, 32),
    st.floats(0, 32),
    st.sampled_from([None, 16, 32, 64, 128, 256]),
    st.floats(0, 8),
    st.floats(0, 16),
)
def test_more_bits_never_fewer_bytes(element: float, scale: float, block, extra_e: float, extra_s: float):
    lo = NumericFormat("a", element, scale, block, "bf16", True, False, "test")
    hi = NumericFormat("b", element + extra_e, scale + extra_s, block, "bf16", True, False, "test")
    assert hi.bytes_per_element >= lo.bytes_per_element
    # and the table, ordered by bits, orders the whole-model weight bytes the same way
    rows = sorted(FORMATS, key=lambda f: f.bits_per_element)
    sizes = [weight_bytes(LLAMA_8B, f.name) for f in rows]
    assert sizes == sorted(sizes)


# ------------------------------------------------------------------------------- tokens per step


def test_tokens_per_step_is_one_today() -> None:
    assert decode_tokens.tokens_per_decode_step() == DecodeTokens(1.0, 1.0)
    assert decode_steps(9, DecodeTokens(1.0, 1.0)) == 8.0
    np.testing.assert_array_equal(decode_steps(np.array([1.0, 2.0, 9.0]), DecodeTokens(2.0, 3.0)), [0, 1, 4])


def test_tokens_per_step_is_the_only_place(monkeypatch: pytest.MonkeyPatch) -> None:
    # Patch the one function to (emit 2, verify 3) per sequence per step; the roofline step, the
    # TPOT sum and the simulator must all follow. Hand derivation for prompt P = 500, output O = 9:
    # decode steps = ceil((9 - 1) / 2) = 4, at contexts P + 1, P + 3, P + 5, P + 7 (two tokens added
    # per step), each running 3 tokens; TPOT = (sum of the 4 step times) / (O - 1).
    dep = Deployment(LLAMA_8B, get_gpu("h100-sxm"))
    plain_3 = decode_step_cost(dep, 3, 700)  # 3 sequences of one token each, before patching
    plain_1 = decode_step_cost(dep, 1, 700)
    monkeypatch.setattr(decode_tokens, "tokens_per_decode_step", lambda dep=None: DecodeTokens(2.0, 3.0))
    wide = decode_step_cost(dep, 1, 700)
    assert float(wide.flops) == pytest.approx(float(plain_3.flops), rel=1e-12)  # 3 tokens of math
    assert float(wide.kv_read_bytes) == pytest.approx(float(plain_1.kv_read_bytes))  # one sequence's KV
    assert float(wide.kv_write_bytes) == pytest.approx(3 * float(plain_1.kv_write_bytes))
    steps = [float(decode_step_cost(dep, 1, 500 + 1 + 2 * j).time_s) for j in range(4)]
    expected_tpot = sum(steps) / 8
    assert float(mean_tpot_s(dep, 1, 500, 9)) == pytest.approx(expected_tpot, rel=1e-12)
    spec = InstanceSpec(RooflineSteps(dep), 10**9, 10**9)
    res = simulate_colocated(spec, 1, SimRequests(np.array([0.0]), np.array([500]), np.array([9])))
    assert float(res.records.tpot_s[0]) == pytest.approx(expected_tpot, rel=1e-9)


def test_formats_module_exposes_one_row_per_name() -> None:
    names = [f.name for f in FORMATS]
    assert len(names) == len(set(names))
    assert set(formats.ALIASES.values()) <= set(names)


def test_dense_model_ignores_the_expert_format() -> None:
    # A dense model has no routed experts: their format is neither checked nor used.
    prec = Precision(attention="fp8", mlp="fp8", experts="nvfp4", kv_cache="fp8")
    dep = Deployment(LLAMA_8B, get_gpu("h100-sxm"), precision=prec)
    same = Deployment(LLAMA_8B, get_gpu("h100-sxm"), weight_dtype="fp8")
    assert float(decode_step_cost(dep, 4, 512).time_s) == float(decode_step_cost(same, 4, 512).time_s)


def test_every_math_key_is_a_gpu_peak_key() -> None:
    from model.hardware.gpus import DTYPES_WITH_PEAK

    assert {f.math for f in FORMATS} <= set(DTYPES_WITH_PEAK)


def test_nvfp4_kv_cache_bytes_and_blackwell_only() -> None:
    """NVFP4 KV: 4 + 8 / 16 = 4.5 bits = 0.5625 bytes per element. Llama-3.1-8B: 2 (K, V) x 32 layers
    x 8 KV heads x 128 = 65,536 elements per token -> 36,864 bytes (bf16: 131,072; fp8: 65,536).
    Blackwell reads it (NVIDIA NVFP4 KV cache blog, 2025); an H100 refuses it naming kv_dtype, while
    an FP8 KV cache stays accepted on an A100 (dequantised in the attention kernel, vLLM PR #2279)."""
    b200 = Deployment(LLAMA_8B, get_gpu("b200"), kv_dtype="nvfp4")
    assert b200.kv_bytes_per_token == 65_536 * 0.5625 == 36_864
    assert Deployment(LLAMA_8B, get_gpu("b200"), kv_dtype="fp8").kv_bytes_per_token == 65_536
    with pytest.raises(InputError) as err:
        Deployment(LLAMA_8B, get_gpu("h100-sxm"), kv_dtype="nvfp4")
    assert err.value.field == "kv_dtype" and "fp4 tensor cores" in str(err.value)
    assert Deployment(LLAMA_8B, get_gpu("a100-80gb-sxm"), kv_dtype="fp8").kv_bytes_per_token == 65_536
    with pytest.raises(InputError) as err:
        model.plan(
            "llama-3.1-8b",
            "h100-sxm",
            gpus=2,
            workload="chat",
            ttft_slo_s=1,
            tpot_slo_s=0.05,
            kv_dtype="nvfp4",
        )
    assert err.value.field == "kv_dtype"
