"""The colocated interference formula (model.queueing.interference): hand values, its two forms agree,
and the three users (colocated evaluation, calibration, symbolic) go through it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import model.calibrate.problem as problem
import model.serving.chunked_rows as chunked_rows
import model.serving.colocated as colocated
from model.calibrate.fit import calibrate
from model.hardware.catalog import get_gpu
from model.physics.decode_tokens import DecodeTokens, tokens_per_decode_step
from model.queueing.interference import (
    closed_loop_prefills_per_step,
    shared_token_time_s,
    stalled_step_s,
)
from model.serving.configs import ColocatedConfig
from model.serving.evaluation import evaluate
from model.symbolic.formulas import formula
from model.workload.lengths import Fixed
from model.workload.presets import Workload
from model.workload.scenario import Scenario
from model.workload.slo import SLO
from tests.test_calibrate import _row

FIXED = Workload("fixed-1000-100", Fixed(1000), Fixed(100), source="test")


def test_hand_values() -> None:
    # no chunking: 20 ms / (1 - 0.2) = 25 ms
    assert float(shared_token_time_s(0.02, 0.2)) == pytest.approx(0.025, rel=1e-15)
    # chunked: 1 / (0.5 / 50 ms + 0.5 / 20 ms) = 1 / 35 s
    assert float(shared_token_time_s(0.02, 0.5, 0.05)) == pytest.approx(1 / 35, rel=1e-15)
    # decodes starve at u >= 1, with or without mixed iterations
    assert float(shared_token_time_s(0.02, 1.0)) == math.inf
    assert float(shared_token_time_s(0.02, np.inf, np.inf)) == math.inf
    # per step: 20 ms + 0.25 x 100 ms = 45 ms
    assert float(stalled_step_s(0.02, 0.25, 0.1)) == pytest.approx(0.045, rel=1e-15)


def test_closed_loop_prefills_per_step_by_hand() -> None:
    one = tokens_per_decode_step()
    # 16 slots, osl 128: each other slot starts a request every 1 + 127 iterations
    assert float(closed_loop_prefills_per_step(16, 128, one)) == pytest.approx(15 / 128, rel=1e-15)
    assert float(closed_loop_prefills_per_step(1, 128, one)) == 0.0
    # two tokens per step: ceil(127 / 2) = 64 decode steps + 1 prefill iteration per cycle
    assert float(closed_loop_prefills_per_step(16, 128, DecodeTokens(2.0, 3.0))) == pytest.approx(15 / 65)


@settings(max_examples=200, deadline=None)
@given(
    t_dec=st.floats(1e-4, 1.0),
    rate=st.floats(0.0, 100.0),
    service=st.floats(1e-4, 10.0),
    chunks=st.integers(1, 64),
    chunked=st.booleans(),
)
def test_open_loop_form_is_the_fixed_point_of_the_per_step_form(
    t_dec: float, rate: float, service: float, chunks: int, chunked: bool
) -> None:
    """tau = t_dec + k s with k = lambda tau prompts per step: s = S for prefill-only iterations,
    s = S_c - n_c t_dec (the extra over n_c decode steps) when prompts ride in n_c mixed iterations."""
    u = rate * service
    mix = service / chunks if chunked else math.inf
    tau = float(shared_token_time_s(t_dec, u, mix))
    stall = service - chunks * t_dec if chunked else service
    if u >= 1.0:
        assert tau == math.inf
        return
    if not math.isfinite(tau) or tau <= 0:  # the chunked form can also starve (1 - u + u t/t_mix <= 0)
        assert chunked and 1 - u + u * t_dec / mix <= 0
        return
    assert float(stalled_step_s(t_dec, rate * tau, stall)) == pytest.approx(tau, rel=1e-9)
    if not chunked or stall >= 0:
        assert tau >= t_dec * (1 - 1e-12)


def test_symbolic_form_is_the_numeric_function() -> None:
    f = formula("colocated_stall_inflation")
    for t, lam, s in (
        (0.02, 2.0, 0.1),
        (0.005, 0.0, 0.3),
        (0.04, 9.0, 0.1),
        (0.01, 10.0, 0.1),
        (0.1, 3.0, 0.5),
    ):
        got = f.evaluate({"decode_step_s": t, "rate_per_replica_rps": lam, "mean_prefill_s": s})
        assert got == pytest.approx(float(shared_token_time_s(t, lam * s)), rel=1e-12)
    # the colocated TPOT closed form solves B = lambda E[O] tau(B) with tau from the same function
    v = {
        "rate_per_replica_rps": 2.0,
        "mean_prefill_s": 0.1,
        "mean_output_tokens": 200.0,
        "step_time_intercept_s": 0.02,
        "step_time_slope_s": 1e-4,
    }
    tpot = formula("colocated_tpot").evaluate(v)
    b = 2.0 * 200.0 * tpot
    assert float(shared_token_time_s(0.02 + 1e-4 * b, 0.2)) == pytest.approx(tpot, rel=1e-12)


def _counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(module, name)

    def wrapped(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)
    return calls


@pytest.mark.parametrize("chunk", [None, 512])
def test_colocated_evaluation_calls_it(monkeypatch: pytest.MonkeyPatch, chunk: int | None) -> None:
    # prefill-first calls it in colocated.py; chunked reads it per table in chunked_rows.py
    calls = _counting(monkeypatch, colocated if chunk is None else chunked_rows, "shared_token_time_s")
    scn = Scenario.build("llama-3.1-8b", FIXED, SLO(10.0, 1.0), samples=16)
    evaluate(ColocatedConfig(get_gpu("h100-sxm"), 1, 1, chunk_tokens=chunk), scn, 2.0)
    assert calls


def test_calibration_calls_it(monkeypatch: pytest.MonkeyPatch) -> None:
    stalled = _counting(monkeypatch, problem, "stalled_step_s")
    closed = _counting(monkeypatch, problem, "closed_loop_prefills_per_step")
    m = _row(
        source="c",
        gpu="h100-sxm",
        isl=1024.0,
        osl=64.0,
        load="concurrency",
        batch=4.0,
        ttft_s=None,
        tpot_s=0.01,
    )
    calibrate([m], fit=("prefill_mfu",), loo=False)
    assert stalled and closed
