"""FP16 vs FP32 accumulation of 16-bit GEMMs (issue 16): the GeForce FP16-accumulate peaks, the
Deployment's ``gemm_accumulate`` and llama.cpp's dequantise-to-FP16 copy, against hand-derived values."""

from __future__ import annotations

import numpy as np
import pytest

from model.errors import InputError
from model.hardware.catalog import get_gpu
from model.llm.catalog import get_model
from model.physics import step_work
from model.physics.deployment import FP16_COPY_ABOVE_TOKENS, LARGE_GEMM_MFU_FACTOR, Deployment
from model.physics.steps import prefill_cost

# Llama-2-7B weights a step streams: attention 32 x 4 x 4096^2; MLP 32 x 3 x 4096 x 11008 plus the
# LM head 32000 x 4096 (counted with the MLP component).
L2_7B_ATTENTION = 32 * 4 * 4096 * 4096  # 2,147,483,648
L2_7B_MLP = 32 * 3 * 4096 * 11008 + 32000 * 4096  # 4,459,593,728


def dep(gpu: str, dtype: str = "fp16", acc: str = "fp32") -> Deployment:
    return Deployment(get_model("llama-2-7b"), get_gpu(gpu), weight_dtype=dtype, gemm_accumulate=acc)


@pytest.mark.parametrize(
    ("gpu", "fp32_acc_tflops", "fp16_acc_tflops"),
    [("rtx-3090", 71.2, 142.4), ("rtx-4090", 165.2, 330.3), ("rtx-5090", 209.5, 419.0)],
)
def test_geforce_profiles_carry_both_accumulate_peaks(
    gpu: str, fp32_acc_tflops: float, fp16_acc_tflops: float
) -> None:
    g = get_gpu(gpu)
    assert g.peak_flops("fp16") == pytest.approx(fp32_acc_tflops * 1e12)
    assert g.fp16_accumulate_peak() == pytest.approx(fp16_acc_tflops * 1e12)
    assert "FP16 Accumulate" in g.source("compute.fp16_accumulate")


def test_data_center_gpu_runs_both_accumulators_at_one_rate() -> None:
    h100 = get_gpu("h100-sxm")
    assert h100.fp16_accumulate_flops_per_s == 0.0
    assert h100.fp16_accumulate_peak() == h100.peak_flops("fp16")
    assert dep("h100-sxm", acc="fp16").gemm_flops_per_s("mlp") == dep("h100-sxm").gemm_flops_per_s("mlp")


def test_fp16_accumulate_gemm_and_attention_rates_on_rtx_4090() -> None:
    # rate = peak x prefill_mfu (0.55) x LARGE_GEMM_MFU_FACTOR: 330.3e12 x 0.55 x 1.15 = 208.9 TFLOP/s
    fast, slow = dep("rtx-4090", acc="fp16"), dep("rtx-4090")
    assert fast.gemm_flops_per_s("mlp") == pytest.approx(330.3e12 * 0.55 * LARGE_GEMM_MFU_FACTOR)
    assert slow.gemm_flops_per_s("mlp") == pytest.approx(165.2e12 * 0.55 * LARGE_GEMM_MFU_FACTOR)
    assert fast.attention_peak_flops_per_s == pytest.approx(330.3e12)
    assert fast.gemm_mfu == pytest.approx(slow.gemm_mfu)  # same MFU, against the faster peak
    # weight-only q4_0 also computes in 16-bit, so it takes the fast peak too
    assert dep("rtx-4090", "q4_0", "fp16").gemm_flops_per_s("attention") == pytest.approx(
        330.3e12 * 0.55 * LARGE_GEMM_MFU_FACTOR
    )
    # 8-bit math is untouched by the 16-bit accumulator choice
    fp8 = dep("rtx-4090", "fp8", "fp16")
    assert fp8.gemm_flops_per_s("mlp") == dep("rtx-4090", "fp8").gemm_flops_per_s("mlp")


def test_fp16_copy_of_q4_0_weights_in_a_long_step(monkeypatch) -> None:
    # 512 tokens > 32: every weight is dequantised: (18/32 B read + 2 B written) / (1008e9 x 0.70)
    q4 = dep("rtx-4090", "q4_0", "fp16")
    weights = L2_7B_ATTENTION + L2_7B_MLP  # 6,607,077,376
    copy_s = weights * (18 / 32 + 2.0) / (1008e9 * 0.70)  # 23.99 ms
    assert copy_s == pytest.approx(0.0239947, rel=1e-5)
    with_copy = prefill_cost(q4, 512).compute_s
    monkeypatch.setattr(step_work, "FP16_COPY_ABOVE_TOKENS", 10**9)  # the copy switched off
    without = prefill_cost(q4, 512).compute_s
    assert float(with_copy - without) == pytest.approx(copy_s, rel=1e-9)
    monkeypatch.undo()
    direct = step_work.fp16_copy_s(q4, {"attention": L2_7B_ATTENTION, "mlp": L2_7B_MLP}, 512)
    assert float(direct) == pytest.approx(copy_s)


def test_no_copy_at_or_below_the_mmq_batch_nor_for_f16_nor_with_fp32_accumulate() -> None:
    q4 = dep("rtx-4090", "q4_0", "fp16")
    same_peak = dep("rtx-4090", "q4_0", "fp16")
    # at FP16_COPY_ABOVE_TOKENS tokens llama.cpp uses its MMQ kernels: no copy, only the faster peak
    n = FP16_COPY_ABOVE_TOKENS
    assert n == 32
    no_copy = prefill_cost(q4, n).compute_s
    with_copy = prefill_cost(same_peak, n + 1).compute_s
    weights = L2_7B_ATTENTION + L2_7B_MLP
    per_token = (with_copy - no_copy) - weights * (18 / 32 + 2.0) / (1008e9 * 0.70)
    assert 0 < float(per_token) < 1e-3  # one more token's FLOPs, far below the 24 ms copy
    f16 = dep("rtx-4090", "fp16", "fp16")
    f16_32 = prefill_cost(f16, 33).compute_s
    f16_31 = prefill_cost(f16, 31).compute_s
    assert float(f16_32 - f16_31) < 1e-3  # F16 weights need no copy
    a = prefill_cost(dep("rtx-4090", "q4_0"), np.array([33.0, 512.0])).compute_s
    b = prefill_cost(dep("rtx-4090", "q4_0"), np.array([31.0, 510.0])).compute_s
    assert np.all(a - b < 1e-3)  # fp32 accumulate: no copy at any size


def test_bad_accumulator_is_refused_with_the_field_name() -> None:
    with pytest.raises(InputError, match="gemm_accumulate"):
        dep("rtx-4090", acc="fp8")
