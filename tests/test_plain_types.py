"""Scalar calls of the public API return plain Python numbers and strings; vectorised calls arrays.

Walks every field of each result recursively (dataclasses, tuples, lists, dicts) and fails on any
numpy scalar or 0-d array, naming the path, e.g. ``Estimate.prefill.bound: ndarray``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

import model
from model.scalars import plain, plain_fields


def _numpy_leaves(obj: Any, path: str, depth: int = 0) -> list[str]:
    """Paths of numpy scalars / 0-d arrays inside ``obj`` (profiles and architectures are inputs, skipped)."""
    if isinstance(obj, np.generic) or (isinstance(obj, np.ndarray) and obj.ndim == 0):
        return [f"{path}: {type(obj).__name__}"]
    if depth > 6 or isinstance(obj, model.GPU | model.Link | model.LLMArch | model.Scenario):
        return []
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [
            leaf
            for f in dataclasses.fields(obj)
            for leaf in _numpy_leaves(getattr(obj, f.name), f"{path}.{f.name}", depth + 1)
        ]
    if isinstance(obj, list | tuple):
        return [leaf for i, v in enumerate(obj) for leaf in _numpy_leaves(v, f"{path}[{i}]", depth + 1)]
    if isinstance(obj, dict):
        return [leaf for k, v in obj.items() for leaf in _numpy_leaves(v, f"{path}[{k!r}]", depth + 1)]
    return []


def _assert_plain(obj: Any, name: str) -> None:
    leaves = _numpy_leaves(obj, name)
    assert not leaves, "numpy values in a scalar call's result: " + ", ".join(leaves)


@pytest.fixture(scope="module")
def small_plan() -> model.Plan:
    return model.plan("llama-3.1-8b", "h100-sxm", workload="chat", ttft_slo_s=0.5, tpot_slo_s=0.05, gpus=4)


def test_the_walker_finds_numpy_values() -> None:
    """The check can fail: a 0-d string array and a numpy float inside a nested dataclass are found."""

    @dataclasses.dataclass(frozen=True)
    class Inner:
        bound: Any
        values: Any

    @dataclasses.dataclass(frozen=True)
    class Outer:
        inner: Inner
        x: Any

    bad = Outer(Inner(np.array("compute"), np.arange(3.0)), np.float64(1.5))
    assert _numpy_leaves(bad, "Outer") == ["Outer.inner.bound: ndarray", "Outer.x: float64"]
    good = plain_fields(bad)
    assert good.x == 1.5 and type(good.x) is float
    assert isinstance(good.inner.values, np.ndarray)  # arrays stay arrays; only the top level changes


def test_plain_converts_scalars_and_keeps_arrays() -> None:
    assert type(plain(np.float64(2.0))) is float
    assert type(plain(np.int64(3))) is int
    assert type(plain(np.bool_(True))) is bool
    assert plain(np.array("memory")) == "memory" and type(plain(np.array("memory"))) is str
    arr = np.array([1.0, 2.0])
    assert plain(arr) is arr


def test_estimate_is_plain() -> None:
    e = model.estimate("llama-3.1-8b", "h100-sxm", isl=1024, osl=256, tp=2)
    _assert_plain(e, "Estimate")
    assert type(e.prefill.bound) is str and e.prefill.bound in ("compute", "memory")
    assert type(e.decode.time_s) is float and type(e.memory.fits) is bool
    assert type(e.max_batch) is int and type(e.prefill_bound) is str


def test_memory_fit_scalar_and_vectorised() -> None:
    dep = model.Deployment(model.get_model("llama-3.1-8b"), model.get_gpu("h100-sxm"))
    fit = model.memory_fit(dep)
    _assert_plain(fit, "MemoryFit")
    assert type(fit.kv_capacity_tokens) is float and type(fit.fits) is bool
    assert type(fit.max_batch(2048)) is float
    vec = model.memory_fit(dep, max_batched_tokens=np.array([2048.0, 8192.0]))
    assert isinstance(vec.kv_capacity_tokens, np.ndarray) and vec.kv_capacity_tokens.shape == (2,)
    assert isinstance(vec.max_batch(np.array([1024.0, 4096.0])), np.ndarray)


def test_collectives_scalar_and_vectorised() -> None:
    link = model.get_link("ib-ndr-400")
    # alpha + M / (bw x efficiency), from the profile's own numbers
    t = model.transfer_time_s(1e9, link)
    assert type(t) is float
    assert t == pytest.approx(link.latency_s + 1e9 / link.effective_bandwidth_bytes_per_s, rel=1e-12)
    assert isinstance(model.transfer_time_s(np.array([1e6, 1e9]), link), np.ndarray)
    assert model.transfer_time_s(1e9, model.get_link("same-gpu")) == 0.0  # nothing crosses it
    assert type(model.transfer_time_s(1e9, model.get_link("same-gpu"))) is float
    # ring all-reduce of 1 MB over 4 GPUs at 100 GB/s, 1 us: 2 x 3 x (1e-6 + 0.25e6 / 1e11) = 2.1e-5 s
    ar = model.allreduce_time_s(1e6, 4, 1e11, 1e-6)
    assert type(ar) is float and ar == pytest.approx(2.1e-5, rel=1e-12)
    assert isinstance(model.allreduce_time_s(np.array([1e6, 2e6]), 4, 1e11, 1e-6), np.ndarray)


def test_kv_bytes_per_token_is_plain() -> None:
    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 dims x 2 (K, V) x 2 bytes = 131072 B
    kv = model.kv_bytes_per_token(model.get_model("llama-3.1-8b"))
    assert type(kv) in (float, int) and kv == 131072


def test_plan_best_configs_and_goodput_are_plain(small_plan: model.Plan) -> None:
    assert small_plan.best, "the plan found no feasible configuration"
    for style, best in small_plan.best.items():
        _assert_plain(best, f"BestConfig[{style}]")
        g = model.config_goodput(small_plan.inputs.scenario, best.config)
        assert type(g) is float


def test_evaluate_is_plain(small_plan: model.Plan) -> None:
    best = next(iter(small_plan.best.values()))
    ev = model.evaluate(best.config, small_plan.inputs.scenario, 1.0)
    _assert_plain(ev, "Evaluation")
