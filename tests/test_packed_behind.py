"""The prompts packed behind a prompt in a disaggregated prefill step (model.queueing.disaggregated_terms,
"Packed behind"): TTFT = d + W + E[v] E[min(N, J) | W], N ~ Poisson(lambda W). Hand-derived values for
lambda = 10 req/s, E[v] = 0.1 s."""

from __future__ import annotations

import math

import numpy as np
import pytest

from model.queueing.disaggregated_terms import packed_wait_s
from model.queueing.latency import LatencyModel

LAM, V = np.array([10.0]), np.array([0.1])


def test_packed_wait_inverts_by_hand() -> None:
    # J = 1: E[min(N, 1)] = P(N >= 1) = 1 - e^{-lambda w}; w = 0.1 s -> y = 0.1 + 0.1 (1 - e^{-1})
    y = 0.1 + 0.1 * (1.0 - math.exp(-1.0))
    assert packed_wait_s(np.array([[y]]), LAM, V, np.array([[1.0]]))[0, 0] == pytest.approx(0.1, rel=1e-9)
    # J = 50 (the cap never binds at lambda w = 1): E[min(N, J)] = lambda w, y = w (1 + lambda E[v]) = 2 w
    assert packed_wait_s(np.array([[0.2]]), LAM, V, np.array([[50.0]]))[0, 0] == pytest.approx(0.1, rel=1e-9)
    # J = 0 (the prompt fills the step alone): nothing behind, w = y; a negative slack stays negative
    assert packed_wait_s(np.array([[0.2]]), LAM, V, np.array([[0.0]]))[0, 0] == pytest.approx(0.2)
    assert packed_wait_s(np.array([[-0.1]]), LAM, V, np.array([[1.0]]))[0, 0] == pytest.approx(-0.1)


def test_packed_behind_ttft_tail_by_hand() -> None:
    # W: 0 w.p. 0.5, else exponential of mean 0.1 s; d = 0.2 s; J = 1. At t = d + 0.1 + 0.1 (1 - e^{-1})
    # the wait must exceed 0.1 s: P(TTFT > t) = 0.5 e^{-1}.
    lat = LatencyModel(
        wait_prob=np.array([0.5]),
        wait_cond_mean_s=np.array([0.1]),
        fixed_s=np.array([[0.2]]),
        tpot_base_s=np.array([0.01]),
        stall_events=np.zeros((1, 1)),
        stall_sizes_s=np.zeros((1, 1)),
        output_tokens=np.array([10.0]),
        stable=np.array([True]),
        behind_rate=LAM,
        behind_v_s=V,
        behind_max=np.array([[1.0]]),
    )
    t = 0.2 + 0.1 + 0.1 * (1.0 - math.exp(-1.0))
    assert float(lat.ttft_cdf(np.array([[t]]))[0, 0]) == pytest.approx(1.0 - 0.5 * math.exp(-1.0), rel=1e-9)
    # the p90 lies above the plain wait's p90 (d + m ln(0.5 / 0.1)) by the packed prompt's expected share
    ttft, _ = lat.percentiles_s((0.9,))
    w90 = 0.1 * math.log(5.0)
    assert ttft[0] == pytest.approx(0.2 + w90 + 0.1 * (1.0 - math.exp(-10.0 * w90)), abs=1e-7)
