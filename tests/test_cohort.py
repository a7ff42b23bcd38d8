"""The prefill-first decode cohort (model.queueing.colocated_base.cohort_spread), against hand values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from model.queueing.colocated_base import cohort_spread
from model.queueing.decode_spread import Occupancy, tpot_spread

# integer batch grid, so the table reads t(n) exactly: t = 4, 6, 7, 8, 9, 10, 11, 12 ms at n = 1 .. 8
GRID = np.arange(0.0, 9.0)
TABLE = np.array([[4.0, 4.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]]) * 1e-3


def _occ(batch: list[float], prob: list[float]) -> Occupancy:
    b = np.array([batch])
    tau = np.interp(np.maximum(b, 1.0), GRID, TABLE[0])
    return Occupancy(b, np.array([prob]), tau, np.array([0.0]))


def test_no_cohort_is_the_birth_death_law() -> None:
    """c = 0: the law of decode_spread.tpot_spread itself (mean, CDF at every support step, shrink)."""
    occ = _occ([0.0, 1.0, 2.0, 3.0], [0.5, 0.3, 0.15, 0.05])
    out = np.array([5.0, 20.0, 80.0])
    old = tpot_spread(occ, out)
    new = cohort_spread(occ, np.array([0.0]), GRID, TABLE, out)
    assert new.mean_s[0] == pytest.approx(old.mean_s[0], rel=1e-12)
    assert new.shrink == pytest.approx(old.shrink, rel=1e-12)
    x = np.array([[-1.5e-3, -0.2e-3, 0.5e-3, 2.1e-3, 4e-3]]).T  # [5, 1]: one excess per "candidate" row
    rows = np.zeros(5, dtype=int)
    assert new.take(rows).excess_cdf(x) == pytest.approx(old.take(rows).excess_cdf(x), abs=2e-3)


def test_lone_request_with_a_poisson_cohort_by_hand() -> None:
    """A replica that holds only the request (N = 1, V = 0) and a cohort of mean c = 1/2: its batch is
    1 + C, C ~ Poisson(1/2), for its whole window (no averaging: shrink 1), so its base is t(1 + C):
    P(4 ms) = e^-0.5 = 0.6065, P(<= 6 ms) = 1.5 e^-0.5 = 0.9098, mean sum_j P(j) t(1 + j) (the tail
    above 4 companions at t(5))."""
    occ = _occ([1.0], [1.0])
    law = cohort_spread(occ, np.array([0.5]), GRID, TABLE, np.array([50.0, 400.0]))
    assert law.shrink[0] == pytest.approx([1.0, 1.0])
    p = [math.exp(-0.5) * 0.5**j / math.factorial(j) for j in range(4)]
    p.append(1.0 - sum(p))
    mean = sum(pj * t for pj, t in zip(p, [4e-3, 6e-3, 7e-3, 8e-3, 9e-3], strict=True))
    assert law.mean_s[0] == pytest.approx(mean, rel=1e-9)
    # read 10 us above the atoms: the uniform table puts a support point's mass on the first of its
    # 1024 points at or above it (step (9 - 4) / 1023 ms)
    at = np.array([[4e-3 + 1e-5 - mean], [6e-3 + 1e-5 - mean]])
    cdf = law.take(np.array([0, 0])).excess_cdf(at)
    assert cdf[0] == pytest.approx([0.6065307, 0.6065307], abs=1e-6)
    assert cdf[1] == pytest.approx([0.9097960, 0.9097960], abs=1e-6)


def test_shrink_adds_the_cohort_variance_unaveraged() -> None:
    """Per-token batch law 1 or 2 with probability 1/2 each (V = 1/4) and c = 1/4; equal outputs O = 10,
    window T = 9 tokens: the M/G/inf variance factor g(9) = 1 - 9 / 30 = 0.7 (decode_spread item 3,
    equal outputs), so the shrink is sqrt((0.7 x 0.25 + 0.25) / (0.25 + 0.25)) = sqrt(0.85)."""
    # time law p with n p(n) / t(n) equal at n = 1, 2: p(2) / p(1) = t(2) / (2 t(1)) = 6 / 8
    occ = _occ([1.0, 2.0], [8.0 / 14.0, 6.0 / 14.0])
    law = cohort_spread(occ, np.array([0.25]), GRID, TABLE, np.array([10.0, 10.0]))
    assert law.shrink[0] == pytest.approx([math.sqrt(0.85)] * 2, rel=2e-3)
    assert tpot_spread(occ, np.array([10.0])).shrink[0, 0] == pytest.approx(math.sqrt(0.7), rel=2e-3)


def test_cohort_exposure_by_router() -> None:
    """routing.cohort_exposure: one replica or a router that does not level, the Poisson share (1); a
    levelling router over R replicas, 1 / R^2 (the fleet level after the request joins, 1 / R, and the
    tie to its replica, 1 / R): 1/4 on two replicas, 1/16 on four."""
    from model.hardware.engines import Router
    from model.queueing.routing import cohort_exposure

    r = np.array([1.0, 2.0, 4.0])
    assert cohort_exposure(Router("random"), r) == pytest.approx([1.0, 1.0, 1.0])
    assert cohort_exposure(Router("round-robin"), r) == pytest.approx([1.0, 1.0, 1.0])
    assert cohort_exposure(Router("least-loaded", 4), r) == pytest.approx([1.0, 0.25, 0.0625])
