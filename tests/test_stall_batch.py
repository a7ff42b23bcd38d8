"""Prefill-first stalls with the batch deviation given the stall count (model.queueing.stall_batch):
the independence limit is the independent convolution, and a correlated two-point case by hand."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.special import gammainc

from model.queueing.decode_spread import Occupancy, tpot_spread
from model.queueing.latency import LatencyModel


def _two_point(corr: np.ndarray | None) -> LatencyModel:
    """Batches 1 and 2 at 10 / 20 ms, p = 1/2 each: D = -5 or +5 ms with probability 1/2 (weights
    n p(n) / tau(n) = 50 and 50), shrink 1; one request of 11 tokens (10 gaps) expecting one stall of
    100 ms, no feedback (tests/test_decode_spread.py's colocated case)."""
    occ = Occupancy(np.array([[1.0, 2.0]]), np.array([[0.5, 0.5]]), np.array([[0.010, 0.020]]), np.zeros(1))
    spread = tpot_spread(occ, np.array([11.0]))
    spread = replace(spread, shrink=np.ones((1, 1)), inv_shrink=np.ones((1, 1)))
    return LatencyModel(
        wait_prob=np.array([0.0]),
        wait_cond_mean_s=np.array([0.0]),
        fixed_s=np.array([[0.1]]),
        tpot_base_s=spread.mean_s,
        stall_events=np.array([[1.0]]),
        stall_sizes_s=np.array([[0.100]]),
        output_tokens=np.array([11.0]),
        stable=np.array([True]),
        spread=spread,
        stall_corr=corr,
    )


def test_independence_limit_is_the_independent_convolution():
    xs = (0.012, 0.017, 0.021, 0.030, 0.060)
    independent = [_two_point(None).tpot_cdf(np.array([[x]]))[0, 0] for x in xs]
    assert [_two_point(np.zeros((1, 1))).tpot_cdf(np.array([[x]]))[0, 0] for x in xs] == independent
    e = math.exp(-1.0)  # at 17 ms: no stall at the lower batch only; one stall never (>= 20 ms)
    assert independent[1] == pytest.approx(0.5 * e + (1.0 - 2.0 * e) * _two(0.020, 0.0), rel=1e-9)


def _two(y_s: float, r: float) -> float:
    """The two-or-more-stall gamma at absorbable stall time y for n = 1, sd(D) = 5 ms, 10 gaps and
    correlation r, by hand: E[N | N >= 2] = (1 - e^-1) / (1 - 2 e^-1), E[N^2 | N >= 2] =
    (2 - e^-1) / (1 - 2 e^-1); z_2 = r (E[N | N >= 2] - 1), kappa = r, g = 10 x 5 ms;
    mean 0.1 E[N | N >= 2] + g z_2, variance 0.01 Var[N | N >= 2] + g^2 (1 - r^2 + r^2 Var[N | N >= 2])
    + 2 g r Var[N | N >= 2] 0.1."""
    e = math.exp(-1.0)
    p2 = 1.0 - 2.0 * e
    en, en2 = (1.0 - e) / p2, (2.0 - e) / p2
    var_n, g = en2 - en * en, 0.05
    mean = 0.1 * en + g * r * (en - 1.0)
    var = 0.01 * var_n + g * g * (1.0 - r * r + r * r * var_n) + 2.0 * g * r * var_n * 0.1
    return float(gammainc(mean * mean / var, y_s / (var / mean)))


def test_correlated_two_point_case_by_hand():
    # r = 1/2, n = 1: z_0 = -r sqrt(n) = -1/2, z_1 = 0, z_2 = r (E[N | N >= 2] - 1) (inside the
    # quadrature's z range [-1, 1]: D's strata are -5 and +5 ms, sd 5 ms).
    # At 17 ms (2 ms over the mean): no stall reads D' <= (2 + 2.5) / sqrt(3/4) = 5.2 ms: all of it
    # (independent: half); one stall moves D to +-5 sqrt(3/4) ms, 10 gaps: 20 -+ 43.3 ms of room
    # for a 100 ms stall: never.
    lat = _two_point(np.array([[0.5]]))
    e = math.exp(-1.0)
    p2 = 1.0 - 2.0 * e
    assert lat.tpot_cdf(np.array([[0.017]]))[0, 0] == pytest.approx(e + p2 * _two(0.020, 0.5), rel=1e-9)
    # At 12 ms (3 ms below the mean): no stall needs D' <= (-3 + 2.5) / sqrt(3/4) = -0.58 ms: the
    # lower point, half of it
    assert lat.tpot_cdf(np.array([[0.012]]))[0, 0] == pytest.approx(0.5 * e, rel=1e-9)
    # the conditional means of D average back to its mean: P0 z_0 + P1 z_1 + P2 z_2 = 0
    en = (1.0 - e) / p2
    assert e * -0.5 + p2 * 0.5 * (en - 1.0) == pytest.approx(0.0, abs=1e-12)


def test_start_coverage_ratio_by_hand():
    # equal outputs O = 401 (T = 400): an arrival at the window's start decodes through it (1), one
    # inside it covers half of it on average: k = 2. Outputs 101 and 401: for the 101-token request
    # (T = 100) every other output covers its window, k = 2 again; for T = 400 an output o < T covers
    # o / T from the start and o / T - o^2 / (2 T^2) from inside, a ratio 1 / (1 - o / (2 T)) in
    # (1, 2): one output of 101 alone gives 1 / (1 - 101 / 800).
    from model.queueing.overlap import start_coverage_ratio

    assert start_coverage_ratio(np.array([401.0, 401.0])) == pytest.approx([2.0, 2.0])
    k = start_coverage_ratio(np.array([101.0, 401.0]))
    assert k[0] == pytest.approx(2.0) and 1.0 < k[1] < 2.0
    assert start_coverage_ratio(np.array([101.0]))[0] == pytest.approx(2.0)
