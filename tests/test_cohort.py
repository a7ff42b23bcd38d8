"""The prefill-first decode cohort (model.queueing.colocated_base.cohort_spread), against hand values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from model.queueing.colocated_base import cluster_dispersion, cohort_spread, overlap_weight
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
    equal outputs); the other requests' batch clustered with index 1 + c = 1.25 (cluster_dispersion),
    so the shrink is sqrt((0.7 x 0.25 x 1.25 + 0.25) / (0.25 + 0.25)) = sqrt(0.9375)."""
    # time law p with n p(n) / t(n) equal at n = 1, 2: p(2) / p(1) = t(2) / (2 t(1)) = 6 / 8
    occ = _occ([1.0, 2.0], [8.0 / 14.0, 6.0 / 14.0])
    law = cohort_spread(occ, np.array([0.25]), GRID, TABLE, np.array([10.0, 10.0]))
    assert law.shrink[0] == pytest.approx([math.sqrt(0.9375)] * 2, rel=2e-3)
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


def test_overlap_weight_by_hand() -> None:
    """colocated_base.overlap_weight on outputs 2, 4, 11 (decode steps D = 1, 3, 10): the nine ordered
    pairs' minima 1, 1, 1 / 1, 3, 3 / 1, 3, 10 sum to 24, so E[min(D, D')] = 24 / 9 against E[D] = 14 / 3:
    w = (24 / 9) / (14 / 3) = 4 / 7. Equal outputs keep every member for the whole window (1), and so
    does a sample without decode steps (O = 1)."""
    from model.queueing.colocated_base import overlap_weight

    assert overlap_weight(np.array([2.0, 4.0, 11.0])) == pytest.approx(4.0 / 7.0, rel=1e-12)
    assert overlap_weight(np.array([11.0, 2.0, 4.0])) == pytest.approx(4.0 / 7.0, rel=1e-12)
    assert overlap_weight(np.full(5, 400.0)) == pytest.approx(1.0, rel=1e-12)
    assert overlap_weight(np.ones(3)) == 1.0
    # against the brute-force mean over all ordered pairs of a longer sample
    d = np.array([3.0, 17.0, 5.0, 5.0, 90.0, 41.0, 2.0]) - 1.0
    brute = np.minimum(d[:, None], d[None, :]).mean() / d.mean()
    assert overlap_weight(d + 1.0) == pytest.approx(brute, rel=1e-12)


def test_chunked_cohort_mean_by_hand() -> None:
    """The chunked cohort c (colocated_base.cohort_mean with frozen_share) on a hand case: lambda_r =
    0.3 req/s on 2 replicas behind the least-loaded router (share 1 / 4), wait W = 0.05 s, chunked
    prefill S_c = 0.2 s, decode step 5 ms and mixed iteration 25 ms (frozen share 1 - 5 / 25 = 0.8),
    outputs 2, 4, 11 (w = 4 / 7): c = 0.3 x 0.25 x (0.05 + 2 x 0.2) x 0.8 x 4 / 7 = 0.0154286. A
    prefill-first step freezes the batch (frozen 1); a mixed iteration no longer than the decode step,
    or no mixed iteration, none (0)."""
    from model.hardware.engines import Router
    from model.queueing.colocated_base import cohort_mean, frozen_share
    from model.queueing.routing import cohort_exposure

    rate = 0.3 * cohort_exposure(Router("least-loaded", 4), np.array([2.0]))
    frozen = frozen_share(np.array([5e-3, 5e-3, 5e-3]), np.array([25e-3, 4e-3, 0.0]))
    assert frozen == pytest.approx([0.8, 0.0, 0.0])
    c = cohort_mean(rate, np.array([0.05]), np.array([0.2]), frozen[:1], np.array([2.0, 4.0, 11.0]))
    assert c == pytest.approx([0.3 * 0.25 * 0.45 * 0.8 * 4.0 / 7.0], rel=1e-12)
    # an unstable queue's infinite wait counts as none; prefill-first (frozen 1) with equal outputs
    c = cohort_mean(np.array([0.5, 0.5]), np.array([np.inf, 0.1]), np.array([0.2, 0.2]), 1.0, np.full(3, 9.0))
    assert c == pytest.approx([0.5 * 0.4, 0.5 * 0.5], rel=1e-12)


def test_whole_batch_read_of_the_cohort() -> None:
    """``whole``: the step at N + j read at whole batches (decode_batch.whole_rows), as the chunked
    replica_split reads it. On a grid 0, 1, 1.5, 2.25, 3.375 whose table holds t(ceil g) (4, 4, 6, 7,
    8 ms: t(2) = 6, t(3) = 7, t(4) = 8 ms), a lone request with a cohort of mean 1/2 reads t(2) = 6 ms
    at batch 2 (whole) where the linear read gives 6.67 ms (between 1.5 and 2.25), so the mean is
    sum_j P(j) t(1 + j) with t = 4, 6, 7, 8, 8 ms (batch 5 past the grid: its last point)."""
    grid = np.array([0.0, 1.0, 1.5, 2.25, 3.375])
    table = np.array([[4.0, 4.0, 6.0, 7.0, 8.0]]) * 1e-3
    occ = Occupancy(np.array([[1.0]]), np.array([[1.0]]), np.array([[4e-3]]), np.array([0.0]))
    law = cohort_spread(occ, np.array([0.5]), grid, table, np.array([50.0]), whole=True)
    p = [math.exp(-0.5) * 0.5**j / math.factorial(j) for j in range(4)]
    p.append(1.0 - sum(p))
    mean = sum(pj * t for pj, t in zip(p, [4e-3, 6e-3, 7e-3, 8e-3, 8e-3], strict=True))
    assert law.mean_s[0] == pytest.approx(mean, rel=1e-9)
    linear = cohort_spread(occ, np.array([0.5]), grid, table, np.array([50.0]))
    assert linear.mean_s[0] > mean + 1e-5


def test_cluster_dispersion_against_a_batch_arrival_simulation() -> None:
    """M^X/M/inf, clusters of 1 or 2 (P(2) = 0.2) at rate 2 per mean service, exponential services:
    a random member has E[X (X - 1)] / E[X] = 0.4 / 1.2 = 1/3 cluster companions, the overlap weight
    of exponential services is E[min(S, S')] / E[S] = 1/2, so c = 1/6 and Var N / E[N] = 7/6
    (Liu & Templeton 1993), against a seeded simulation of the number in system (200,000 draws)."""
    rng = np.random.default_rng(5)
    runs, horizon, rate = 200_000, 12.0, 2.0
    clusters = rng.poisson(rate * horizon, runs)
    ages = rng.uniform(0.0, horizon, clusters.sum())  # each cluster's age at the sampling time
    sizes = 1 + (rng.uniform(size=ages.size) < 0.2)
    present = (rng.exponential(1.0, ages.size) > ages).astype(int)
    present += (sizes == 2) & (rng.exponential(1.0, ages.size) > ages)
    n = np.bincount(np.repeat(np.arange(runs), clusters), weights=present, minlength=runs)
    w = overlap_weight(1.0 + rng.exponential(1000.0, 100_000))  # D = O - 1 exponential: w = 1/2
    assert w == pytest.approx(0.5, abs=0.01)
    c = (0.4 / 1.2) * 0.5
    assert float(cluster_dispersion(np.array([c]))[0]) == pytest.approx(7.0 / 6.0, rel=1e-12)
    assert n.var() / n.mean() == pytest.approx(7.0 / 6.0, rel=0.015)
    # without the clusters' sharing (members independent) the index would be 1
    assert n.var() / n.mean() > 1.1


def test_mixed_strata_at_the_band_centroid_by_hand() -> None:
    """decode_spread.TpotSpread.strata_at on a two-atom law, D = -1 ms (0.8) or +4 ms (0.2), mean 0, at
    the chunked law's edges 0, 1/2, 3/4, 7/8, 15/16, 1: the band [3/4, 7/8] holds 0.05 of the lower
    atom and 0.075 of the upper, so its level is (-0.05 + 0.3) / 0.125 = 2 ms (its middle quantile,
    at 0.8125, was +4 ms and jumps to -1 ms once P(D = -1) passes 0.8125); the others -1, -1, 4, 4;
    the weighted levels keep E[D] = 0."""
    from model.queueing.decode_spread import TpotSpread

    one = np.ones((1, 1))
    law = TpotSpread(
        np.array([5e-3]), np.array([[-1e-3, 4e-3]]), np.array([[0.8, 1.0]]), one, one, np.array([1e-5]), one
    )
    w, d, z = law.strata_at((0.0, 0.5, 0.75, 0.875, 0.9375, 1.0))
    assert w == pytest.approx([0.5, 0.25, 0.125, 0.0625, 0.0625])
    assert d[:, 0] == pytest.approx([-1e-3, -1e-3, 2e-3, 4e-3, 4e-3], rel=1e-12)
    assert float(w @ d[:, 0]) == pytest.approx(0.0, abs=1e-15)
    assert float(w @ z[:, 0] ** 2) == pytest.approx(1.0, rel=1e-12)
