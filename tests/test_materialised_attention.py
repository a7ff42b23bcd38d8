"""Attention without FlashAttention (llama.cpp's default until 2025): the score matrix is written to
HBM and passed through five kernels (model.physics.materialised_attention), and the masked half is
computed. Hand-derived values; the early-engine profiles and the closed-loop TPOT of the validation."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from model.errors import InputError
from model.hardware.catalog import get_engine, get_gpu
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.generation import chunked_prefill_time_s, mean_tpot_s
from model.physics.materialised_attention import SCORE_BYTES_PER_ELEMENT
from model.physics.steps import decode_step_cost, prefill_cost

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import validate_roofline as v

# Llama-3.1-8B: 32 layers x 32 query heads of 128 dims (QK^T and PV: d_qk + d_v = 256).
LAYERS, HEADS, DIMS = 32, 32, 256


def rtx4090(kernel: str = "fused") -> Deployment:
    return Deployment(
        get_model("llama-3.1-8b"),
        get_gpu("rtx-4090"),
        weight_dtype="fp16",
        gemm_accumulate="fp16",
        attention_kernel=kernel,
    )


def test_score_bytes_are_the_five_passes() -> None:
    # KQ writes FP16 (2), to_fp32 reads 2 writes 4, soft_max reads 4 writes 4, to_fp16 reads 4 writes 2,
    # KQV reads FP16 (2)
    assert SCORE_BYTES_PER_ELEMENT == 2 + (2 + 4) + (4 + 4) + (4 + 2) + 2 == 24


def test_prefill_512_tokens_by_hand() -> None:
    fused, mat = prefill_cost(rtx4090(), 512), prefill_cost(rtx4090("materialised"), 512)
    dep = rtx4090()
    # score elements: 32 layers x 32 heads x 512 x 512 (every query against all 512 keys) = 268,435,456
    elements = LAYERS * HEADS * 512 * 512
    assert elements == 268_435_456
    score_s = elements * 24 / dep.decode_kv_bandwidth  # 6.44 GB at 0.95 x 1008 GB/s = 6.73 ms
    assert score_s == pytest.approx(6.44e9 / (0.95 * 1008e9), rel=1e-3)
    # masked pairs computed on top: 2 x 32 heads x 32 layers x 256 x 512 x 511 / 2
    masked = 2 * HEADS * LAYERS * DIMS * 512 * 511 / 2
    masked_s = masked / (dep.attention_peak_flops_per_s * dep.mfu)
    assert float(mat.compute_s - fused.compute_s) == pytest.approx(score_s + masked_s, rel=1e-9)
    assert float(mat.flops - fused.flops) == pytest.approx(masked, rel=1e-9)
    assert float(mat.memory_s) == float(fused.memory_s)  # the reported bytes stay those of the model


def test_decode_step_scores_every_cached_key() -> None:
    fused, mat = decode_step_cost(rtx4090(), 1, 4096), decode_step_cost(rtx4090("materialised"), 1, 4096)
    elements = LAYERS * HEADS * 4096
    extra = float(mat.compute_s - fused.compute_s)
    assert extra == pytest.approx(elements * 24 / rtx4090().decode_kv_bandwidth, rel=1e-9)  # 3.3 ms


def test_chunked_prompt_scores_each_chunk_against_its_prefix() -> None:
    # 1024 tokens in micro-batches of 512: 512 x 512 + 512 x 1024 score elements per head and layer
    mat, fused = rtx4090("materialised"), rtx4090()
    extra = float(chunked_prefill_time_s(mat, 1024, 512) - chunked_prefill_time_s(fused, 1024, 512))
    elements = LAYERS * HEADS * (512 * 512 + 512 * 1024)
    masked = 2 * HEADS * LAYERS * DIMS * 2 * 512 * 511 / 2  # each chunk's own upper triangle
    expected = elements * 24 / fused.decode_kv_bandwidth + masked / (
        fused.attention_peak_flops_per_s * fused.mfu
    )
    assert extra == pytest.approx(expected, rel=1e-9)


def test_attention_kernel_is_checked() -> None:
    with pytest.raises(InputError, match="attention_kernel"):
        replace(rtx4090(), attention_kernel="paged")


def test_llama_cpp_rows_map_to_materialised_attention_and_ubatches() -> None:
    r = {
        "engine": "llama.cpp (May 2024, CUDA 12.1.1, llama-bench defaults)",
        "model": "llama-3.1-8b",
        "gpu": "rtx-4090",
    }
    r |= {"tp": "1", "pp": "1", "dtype": "fp16", "kv_dtype": "fp16", "batch": "1", "isl": "8192", "osl": "1"}
    r |= {"metric": "prefill_s", "id": "x"}
    dep = v.deployment(r)
    assert (dep.attention_kernel, dep.gemm_accumulate) == ("materialised", "fp16")
    assert v.predict(r) == pytest.approx(float(chunked_prefill_time_s(dep, 8192, 512)), rel=1e-12)


def test_early_deepseek_engine_profiles() -> None:
    gpu = get_gpu("h200")
    for name, current in (("vllm-0.7", "vllm"), ("sglang-0.4", "sglang")):
        early, now = get_engine(name), get_engine(current)
        # 30.29 tok/s at batch 1 (sgl-project/sglang PR #2643) = 33.01 ms; pdplan's step 5.63 ms
        assert early.step_overhead_extra_s == pytest.approx(1 / 30.29 - 5.63e-3, abs=0.05e-3)
        assert early.overheads(gpu).step_s == pytest.approx(now.overheads(gpu).step_s + 27.4e-3)
        # ... and in the GEMM generation: no FP8 ratio of their own (Triton block-FP8 GEMMs); now 0.875
        assert (early.low_precision_gemm_ratio, now.low_precision_gemm_ratio) == (None, 0.875)
        same = {"step_s": 0, "low_precision_gemm_ratio": None}
        assert replace(early.overheads(gpu), **same) == replace(now.overheads(gpu), **same)
    assert v.engine_profile("vLLM 0.7.4.dev (FlashMLA)") == "vllm-0.7"
    assert v.engine_profile("SGLang 0.4.2.post4 (ROCm 6.3)") == "sglang-0.4"
    assert v.engine_profile("SGLang 0.5.8.post1") == "sglang"
    assert v.engine_profile("vLLM 0.16.0") == "vllm"
    assert v.engine_profile("TensorRT-LLM 0.6.1") == "trtllm-0.5"
    assert v.engine_profile("TensorRT-LLM 1.2.0rc1") == "trtllm"
    assert v.engine_profile("NIM 1.8.0 (TensorRT-LLM)") == "trtllm"


def test_pdplan_step_of_the_sglang_release_measurement() -> None:
    # the 5.63 ms the early profiles subtract: DeepSeek-V3 FP8 block-scaled, TP8 on H200, 128 / 256
    gpu = get_gpu("h200")
    dep = Deployment(
        get_model("deepseek-v3"),
        gpu,
        parallel=8,
        weight_dtype="fp8_block",
        kv_dtype="bf16",
        overheads=get_engine("sglang").overheads(gpu),
    )
    assert float(mean_tpot_s(dep, 1, 128, 256)) == pytest.approx(5.63e-3, abs=0.01e-3)


def test_closed_loop_tpot_by_hand() -> None:
    # NIM Llama-3.3-70B FP8 TP2 on H100, concurrency 50, 5000 in / 500 out: each decode step also
    # waits for 49 / (499 + 1) of a prompt's prefill, less the step overhead it pays anyway
    r = {
        "engine": "NIM 1.8.0 (TensorRT-LLM)",
        "model": "llama-3.1-70b",
        "gpu": "h100-sxm",
        "tp": "2",
        "pp": "1",
    }
    r |= {
        "dtype": "fp8",
        "kv_dtype": "fp8",
        "batch": "50",
        "isl": "5000",
        "osl": "500",
        "metric": "tpot_s",
        "id": "x",
    }
    dep = v.deployment(r)
    stall = float(prefill_cost(dep, 5000).time_s) - dep.overhead_s
    expected = float(mean_tpot_s(dep, 50, 5000, 500)) + 49 / 500 * stall
    assert v.predict(r) == pytest.approx(expected, rel=1e-12)
    assert v.closed_loop_tpot_s(dep, 1, 5000, 500) == pytest.approx(float(mean_tpot_s(dep, 1, 5000, 500)))
