"""Monotonicity properties of the roofline (hypothesis)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from model.hardware.catalog import get_gpu
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.generation import mean_tpot_s
from model.physics.steps import decode_step_cost, prefill_cost

MODELS = ["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "qwen2.5-7b", "deepseek-v3"]
GPUS = ["h100-sxm", "a100-80gb-sxm", "l40s", "rtx-4090", "mi300x"]
TPS = [1, 2, 4, 8]
FAST = settings(max_examples=40, deadline=None)


def _dep(model: str, gpu: str, tp: int) -> Deployment:
    arch = get_model(model)
    while arch.num_heads % tp:
        tp //= 2
    return Deployment(arch, get_gpu(gpu), parallel=tp)


combo = st.tuples(st.sampled_from(MODELS), st.sampled_from(GPUS), st.sampled_from(TPS))


@FAST
@given(combo, st.integers(1, 32768), st.integers(1, 4096), st.integers(0, 4096), st.integers(1, 8))
def test_prefill_time_never_falls_as_prompt_grows(c, n, extra, cached, batch) -> None:
    d = _dep(*c)
    a = prefill_cost(d, n, cached_tokens=cached, batch=batch).time_s
    b = prefill_cost(d, n + extra, cached_tokens=cached, batch=batch).time_s
    assert b >= a


@FAST
@given(combo, st.integers(1, 512), st.integers(1, 512), st.integers(1, 65536))
def test_decode_step_never_falls_as_batch_grows(c, batch, extra, ctx) -> None:
    d = _dep(*c)
    assert decode_step_cost(d, batch + extra, ctx).time_s >= decode_step_cost(d, batch, ctx).time_s


@FAST
@given(combo, st.floats(1.01, 10.0), st.integers(1, 64), st.integers(1, 8192), st.integers(2, 512))
def test_more_bandwidth_never_slows_anything(c, factor, batch, isl, osl) -> None:
    d = _dep(*c)
    gpu = dataclasses.replace(d.gpu, memory_bandwidth_bytes_per_s=d.gpu.memory_bandwidth_bytes_per_s * factor)
    link = d.tp_link_resolved
    faster_link = dataclasses.replace(link, bandwidth_bytes_per_s=link.bandwidth_bytes_per_s * factor)
    f = dataclasses.replace(d, gpu=gpu, tp_link=faster_link)
    assert prefill_cost(f, isl, batch=batch).time_s <= prefill_cost(d, isl, batch=batch).time_s
    assert decode_step_cost(f, batch, isl).time_s <= decode_step_cost(d, batch, isl).time_s
    assert mean_tpot_s(f, batch, isl, osl) <= mean_tpot_s(d, batch, isl, osl) * (1 + 1e-12)


@FAST
@given(st.sampled_from(MODELS), st.sampled_from(GPUS), st.integers(1, 4096))
def test_tp_never_raises_per_gpu_weight_bytes(model, gpu, ctx) -> None:
    arch = get_model(model)
    tps = [t for t in TPS if arch.num_heads % t == 0]
    held = [Deployment(arch, get_gpu(gpu), parallel=t).weight_bytes_per_gpu for t in tps]
    read = [
        float(decode_step_cost(Deployment(arch, get_gpu(gpu), parallel=t), 1, ctx).weight_bytes) for t in tps
    ]
    assert all(b <= a for a, b in itertools.pairwise(held))
    assert all(b <= a for a, b in itertools.pairwise(read))


coef = st.floats(-10.0, 10.0, allow_nan=False)


@FAST
@given(coef, coef, coef, coef, st.integers(0, 30), st.integers(-1, 40))
def test_affine_max_sum_equals_the_loop(c0, c1, m0, m1, lo, hi) -> None:
    # The one kink-splitting sum (roofline decode sums, planner chunk tables) against a plain loop.
    from model.physics.affine import affine_max_sum

    expected = sum(max(c0 + c1 * i, m0 + m1 * i) for i in range(lo, hi + 1))
    got = float(affine_max_sum(np.float64(c0), np.float64(c1), np.float64(m0), np.float64(m1), lo, hi))
    assert math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-6)


@FAST
@given(combo, st.integers(1, 64), st.integers(1, 4000), st.integers(2, 300))
def test_tpot_sum_equals_step_by_step(c, batch, isl, osl) -> None:
    # mean_tpot_s sums decode steps in closed form; the step-by-step sum over contexts isl + 1 + j.
    dep = _dep(*c)
    ctx = np.arange(osl - 1) + isl + 1.0
    expected = float(decode_step_cost(dep, batch, ctx).time_s.sum()) / (osl - 1)
    assert math.isclose(float(mean_tpot_s(dep, batch, isl, osl)), expected, rel_tol=1e-9)


def test_affine_max_sum_nearly_flat_difference():
    """A difference slope of -2.2e-309 (hypothesis found it) overflowed the crossing to inf and gave
    0 x inf = NaN; 11 indices of max(1, 0.5 - tiny i) sum to 11."""
    from model.physics.affine import affine_max_sum

    one = np.array([1.0])
    got = affine_max_sum(one, np.array([0.0]), one * 0.5, np.array([-2.2e-309]), np.array([0.0]), one * 10)
    assert got.tolist() == [11.0]
