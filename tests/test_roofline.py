"""Roofline phase costs: hand-derived FLOPs and bytes, TPOT over a growing context, chunked prefill,
pipeline parallelism, errors, and the validation MdAPE against published measurements."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from model.errors import InputError, PdplanError
from model.hardware.catalog import get_gpu
from model.hardware.parallelism import Parallelism
from model.llm.catalog import get_model
from model.llm.moe import expected_experts_touched
from model.physics import deployment
from model.physics.deployment import Deployment
from model.physics.generation import (
    chunked_prefill_overhead,
    chunked_prefill_time_s,
    generation_time_s,
    mean_tpot_s,
)
from model.physics.steps import decode_step_cost, gemm_mfu_at, mixed_step_cost, prefill_cost


def dep(
    model: str = "llama-3.1-8b", gpu: str = "h100-sxm", tp: int = 1, pp: int = 1, **kw: object
) -> Deployment:
    return Deployment(get_model(model), get_gpu(gpu), parallel=Parallelism(tp=tp, pp=pp), **kw)


def test_prefill_flops_llama31_8b_2048_tokens() -> None:
    # Llama-3.1-8B: h = 4096, L = 32, n_h = 32, n_kv = 8, d = 128, I = 14336, V = 128256.
    attn = 4096 * 32 * 128 + 2 * 4096 * 8 * 128 + 32 * 128 * 4096  # Q + K,V + O = 41,943,040
    mlp = 3 * 4096 * 14336  # gate, up, down = 176,160,768
    linear = 2 * 32 * (attn + mlp) * 2048  # 2 FLOP per weight per token
    lm_head = 2 * 128256 * 4096 * 1  # logits for the last token only
    causal_pairs = 2048 * 2049 / 2  # token i attends to i keys
    attention = 2 * 32 * 32 * (128 + 128) * causal_pairs  # 2 n_h L (d_qk + d_v) x pairs
    expected = linear + lm_head + attention  # = 29,688,401,494,016 FLOP (~29.7 TFLOP)
    cost = prefill_cost(dep(), 2048)
    assert float(cost.flops) == pytest.approx(expected, rel=1e-12)
    assert float(cost.flops) == pytest.approx(29.688e12, rel=1e-4)
    assert str(cost.bound) == "compute"


def test_decode_bytes_llama31_70b_tp4_batch_1_and_64() -> None:
    # Llama-3.1-70B: h = 8192, L = 80, n_h = 64, n_kv = 8, d = 128, I = 28672, V = 128256, bf16.
    attn = 8192 * 64 * 128 + 2 * 8192 * 8 * 128 + 64 * 128 * 8192  # 150,994,944 per layer
    mlp = 3 * 8192 * 28672  # 704,643,072 per layer
    streamed = 80 * (attn + mlp) + 128256 * 8192  # + LM head; embedding rows are gathered
    weight_bytes_per_gpu = streamed * 2 / 4  # bf16, split over TP 4 = 34,750,857,216 B
    kv_per_token_per_gpu = 2 * 80 * (8 / 4) * 128 * 2  # K and V, 2 KV heads per rank: 81,920 B
    d = dep("llama-3.1-70b", tp=4)
    cost = decode_step_cost(d, np.array([1, 64]), 1024)
    np.testing.assert_allclose(cost.weight_bytes, [weight_bytes_per_gpu] * 2, rtol=1e-12)
    np.testing.assert_allclose(
        cost.kv_read_bytes, [1 * 1024 * kv_per_token_per_gpu, 64 * 1024 * kv_per_token_per_gpu]
    )
    np.testing.assert_allclose(cost.kv_write_bytes, [1 * kv_per_token_per_gpu, 64 * kv_per_token_per_gpu])
    assert list(cost.bound) == ["memory", "memory"]
    # time = max(compute, memory) + comm + overhead, element by element
    np.testing.assert_allclose(
        cost.time_s, np.maximum(cost.compute_s, cost.memory_s) + cost.comm_s + cost.overhead_s
    )
    # 2 all-reduces x 80 layers of a 1 x 8192 x 2-byte message over NVLink 4 (450 GB/s x 0.83, 3 us),
    # one-shot (the engines' custom kernel at 16 kB): 3 us + 3 peers x 16384 B / 373.5 GB/s
    one = 3e-6 + 3 * (8192 * 2) / (450e9 * 0.83)
    assert float(cost.comm_s[0]) == pytest.approx(2 * 80 * one, rel=1e-9)


def test_moe_decode_reads_expected_distinct_experts() -> None:
    # Mixtral 8x7B: E = 8, k = 2: one token touches 2 experts, two tokens 8 (1 - (6/8)^2) = 3.5.
    np.testing.assert_allclose(expected_experts_touched(8, 2, [1, 2, 1000]), [2.0, 3.5, 8.0])
    d = dep("mixtral-8x7b", tp=2)
    w = decode_step_cost(d, np.array([1, 2, 64]), 512).weight_bytes
    assert w[0] < w[1] < w[2]
    arch = d.arch
    expert = 3 * arch.hidden_size * arch.moe_intermediate_size  # one SwiGLU expert
    extra = (3.5 - 2.0) * expert * arch.num_layers * 2 / 2  # bf16 / TP 2
    assert float(w[1] - w[0]) == pytest.approx(extra, rel=1e-9)


def test_tpot_uses_growing_context_exactly() -> None:
    # Brute force: sum the step times at contexts isl+1 .. isl+osl-1, for a memory-bound and a
    # large-batch case where compute overtakes memory part-way (the kink is handled exactly).
    for model, gpu, batch, isl, osl in (
        ("llama-3.1-8b", "h100-sxm", 1, 1000, 200),
        ("llama-3.1-8b", "l4", 256, 100, 900),
    ):
        d = dep(model, gpu)
        ctx = isl + 1 + np.arange(osl - 1)
        steps = decode_step_cost(d, batch, ctx).time_s
        assert float(mean_tpot_s(d, batch, isl, osl)) == pytest.approx(steps.mean(), rel=1e-9)
        total = prefill_cost(d, isl, batch=batch).time_s + steps.sum()
        assert float(generation_time_s(d, batch, isl, osl)) == pytest.approx(float(total), rel=1e-9)
    # final-context step is slower than the mean
    d = dep()
    assert float(mean_tpot_s(d, 8, 4000, 4000)) < float(decode_step_cost(d, 8, 8000).time_s)
    assert float(mean_tpot_s(d, 1, 100, 1)) == 0.0


def test_vectorised_over_batch_and_length() -> None:
    d = dep()
    out = prefill_cost(d, np.array([[128], [4096]]), batch=np.array([1, 4, 16]))
    assert out.time_s.shape == (2, 3)
    assert out.bound.shape == (2, 3)


def test_chunked_prefill_overhead_sarathi_yi34b_tp2() -> None:
    # Sarathi-Serve (Agrawal et al., OSDI 2024) reports ~25% extra prefill time at 512-token chunks
    # for Yi-34B on two A100s and little at 2048, from lower GEMM efficiency at small chunks plus
    # repeated prefix-KV reads. The model charges the token-dependent GEMM efficiency (gemm_mfu_at),
    # the re-read weights and prefix KV, per-iteration overhead and all-reduce latency: see
    # docs/validation.md for the table.
    d = dep("yi-34b", "a100-80gb-sxm", tp=2)
    chunks = np.array([256, 512, 1024, 2048])
    for n in (4096, 16384):
        over = chunked_prefill_overhead(d, n, chunks)
        print(
            f"Yi-34B TP2 A100, {n}-token prompt, overhead by chunk:",
            dict(zip(chunks.tolist(), np.round(over, 4), strict=True)),
        )
        assert np.all(np.diff(over) < 0)  # decreasing in the chunk size
        assert 0.10 < over[1] < 0.40  # the right magnitude at 512
        assert over[3] < 0.10  # small at 2048
        assert over[3] < over[1] / 3
    # one chunk as large as the prompt is the unchunked prefill (same FLOPs, one step)
    whole = chunked_prefill_time_s(d, 4096, 4096)
    assert float(whole) == pytest.approx(float(prefill_cost(d, 4096).time_s), rel=1e-9)


def test_gemm_efficiency_falls_at_few_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    # A100 80GB, bf16: large-M GEMM MFU = 0.60 x 1.15 = 0.69 (LARGE_GEMM_MFU_FACTOR);
    # T_ridge = 312e12 x 0.69 x 2 B / (2 x 2039e9 x 0.80) = 131.98 tokens;
    # T_half = 0.75 x T_ridge = 98.98; MFU(T) = 0.69 x T / (T + 98.98).
    d = dep("llama-3.1-8b", "a100-80gb-sxm")
    t_ridge = 312e12 * 0.69 * 2 / (2 * 2039e9 * 0.80)
    assert d.gemm_ridge_tokens == pytest.approx(t_ridge, rel=1e-12)
    assert d.gemm_half_efficiency_tokens == pytest.approx(0.75 * t_ridge, rel=1e-12)
    t = np.array([64.0, 512.0, 4096.0])
    np.testing.assert_allclose(gemm_mfu_at(d, t), 0.69 * t / (t + 0.75 * t_ridge), rtol=1e-12)
    # cuBLAS FP16 M = 64, N = K = 16384 on A100: 95-100 TFLOP/s published (ml-explore/mlx PR #3315);
    # the train-split kappa gives 84 TFLOP/s, 12-16% under (docs/model.md)
    assert 80e12 < float(gemm_mfu_at(d, 64.0)) * 312e12 < 105e12
    # The step applies it per GEMM: linear compute = ideal + kappa x weight bytes / (bandwidth x MBU),
    # which for T prompt tokens equals the linear FLOPs at MFU(T) (LM head aside: one logits row).
    cost = prefill_cost(d, 512)
    monkeypatch.setattr(deployment, "GEMM_EXPOSED_WEIGHT_FRACTION", 0.0)
    ideal = prefill_cost(d, 512)
    extra = 0.75 * float(cost.weight_bytes) / (2039e9 * 0.80)
    assert float(cost.compute_s - ideal.compute_s) == pytest.approx(extra, rel=1e-12)
    monkeypatch.undo()
    # small-batch decode stays memory-bound (kappa < 1 keeps the extra term below the weight read)
    assert str(decode_step_cost(d, 1, 1024).bound) == "memory"
    assert str(decode_step_cost(dep("llama-2-7b", "rtx-4090", weight_dtype="int4"), 1, 64).bound) == "memory"


def test_chunked_prefill_equals_sum_of_mixed_steps() -> None:
    d = dep()
    n, c, db, ctx = 1000, 384, 8, 700
    expected = sum(
        float(
            mixed_step_cost(
                d,
                chunk_tokens=min(c, n - i),
                chunk_prefix_tokens=i,
                decode_batch=db,
                decode_context_tokens=ctx,
            ).time_s
        )
        for i in range(0, n, c)
    )
    got = chunked_prefill_time_s(d, n, c, decode_batch=db, decode_context_tokens=ctx)
    assert float(got) == pytest.approx(expected, rel=1e-12)


def test_pipeline_parallel_split_and_bubble() -> None:
    one = dep("llama-3.1-70b", tp=2)
    two = dep("llama-3.1-70b", tp=2, pp=2)
    assert two.weight_bytes_per_gpu == pytest.approx(one.weight_bytes_per_gpu / 2)
    a, b = decode_step_cost(one, 1, 1000), decode_step_cost(two, 1, 1000)
    # batch 1 still passes every layer: same roofline, plus one activation hop; half the stages idle
    assert float(b.memory_s) == pytest.approx(float(a.memory_s), rel=1e-12)
    assert float(b.time_s) > float(a.time_s)
    assert float(b.pp_bubble_fraction) == 0.5
    assert float(decode_step_cost(two, 8, 1000).pp_bubble_fraction) == 0.0


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: prefill_cost(dep(), 0), "prompt_tokens"),
        (lambda: prefill_cost(dep(), -5), "prompt_tokens"),
        (lambda: prefill_cost(dep(), 10, cached_tokens=-1), "cached_tokens"),
        (lambda: decode_step_cost(dep(), 0, 10), "batch"),
        (lambda: decode_step_cost(dep(), 1, np.array([10, 0])), "context_tokens"),
        (lambda: dep("llama-3.1-70b", tp=3), "tp"),
        (lambda: dep(weight_dtype="fp7"), "dtype"),
        (lambda: dep(gpu="a100-80gb-sxm", weight_dtype="fp8"), "dtype"),
        (lambda: dep(kv_dtype="int4"), "kv_dtype"),
        (lambda: dep(pp=3), "pp"),
        (lambda: dep(prefill_mfu=1.5), "prefill_mfu"),
        (lambda: mean_tpot_s(dep(), 1, 100, 0), "output_tokens"),
    ],
)
def test_bad_input_names_the_field(call: object, field: str) -> None:
    with pytest.raises(InputError) as err:
        call()  # type: ignore[operator]
    assert err.value.field == field
    assert isinstance(err.value, PdplanError)


def test_validation_mdape_within_target() -> None:
    # Recompute the docs/validation.md table from tests/data/published_measurements.csv.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import validate_roofline as v

    rows = v.load()
    assert len({(r.model, r.gpu, r.tp) for r in rows if r.set == "core"}) >= 12
    print(v.markdown(rows))
    # The 20% target holds on the 23 batch-1 "core" rows it was set on; the rows added for issues
    # 14/16 (large batch, MoE, FP8/FP4, new GPUs) are reported, not asserted (docs/validation.md).
    assert v.count(rows, "prefill", "core") == 16
    assert v.mdape(rows, "prefill", "core") <= 20.0


def test_validation_decode_mdape_within_target() -> None:
    # Held since issue 16's collectives by algorithm and engine overheads (per-kernel floor,
    # per-sequence cost): 20.8% -> under 13% on the core rows (docs/validation.md).
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import validate_roofline as v

    assert v.mdape(v.load(), "decode", "core") <= 20.0
