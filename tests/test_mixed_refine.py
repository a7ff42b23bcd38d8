"""The chunked TPOT law's exact rows in stages (model.queueing.mixed_refine): the unimodal tail bound
by hand and against the exact Beta CDF, and the staged CDF against MixedTpot.cdf entry for entry."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import betainc

from model.queueing.mixed_refine import REFINE_SHARES, StagedCdf, unimodal_tail_bound
from model.queueing.mixed_share import MixedShare, MixedTpot


def test_unimodal_tail_bound_hand_values() -> None:
    """l^2 = 0: 1. l^2 = 5/3, where the two branches meet: 4 / (9 x 8/3) = (3 - 5/3) / 8 = 1/6 (Cantelli
    3/8). l^2 = 8: 4 / 81 (Cantelli 1/9). Not unimodal: Cantelli's."""
    lam2 = np.array([0.0, 5.0 / 3.0, 8.0])
    assert unimodal_tail_bound(lam2, np.ones(3, dtype=bool)) == pytest.approx([1.0, 1.0 / 6.0, 4.0 / 81.0])
    assert unimodal_tail_bound(lam2, np.zeros(3, dtype=bool)) == pytest.approx([1.0, 3.0 / 8.0, 1.0 / 9.0])


def test_unimodal_tail_bound_holds_for_beta_laws() -> None:
    """Both tails of Beta laws (alpha or beta at least 1: unimodal, J-shaped included) stay within the
    bound at every point of a grid; the exponential-like Beta(1, 200) comes close (the bound is sharp
    for a uniform-plus-atom law, not for a Beta, so the check is not vacuous: it is within 3x)."""
    worst = 0.0
    for a in (1.0, 1.5, 3.0, 20.0, 200.0):
        for b in (0.3, 1.0, 2.0, 50.0, 200.0):
            mu, n = a / (a + b), a + b
            sd = np.sqrt(mu * (1.0 - mu) / (n + 1.0))
            x = np.linspace(0.0, 1.0, 2001)
            lam2 = ((x - mu) / sd) ** 2
            bound = unimodal_tail_bound(lam2, np.ones_like(x, dtype=bool))
            cdf = betainc(a, b, x)
            upper, lower = x > mu, x < mu
            assert np.all(1.0 - cdf[upper] <= bound[upper] + 1e-12)  # P(X >= x) above the mean
            assert np.all(cdf[lower] <= bound[lower] + 1e-12)  # P(X <= x) below it
            worst = max(worst, float(np.max((1.0 - cdf[upper]) / bound[upper])))
    assert worst > 1.0 / 3.0


def _law(seed: int, strata: int = 3, cands: int = 5, reqs: int = 12) -> MixedTpot:
    rng = np.random.default_rng(seed)
    outputs = rng.integers(0, 5, reqs)  # repeated request columns, as equal outputs give
    mean = rng.uniform(0.05, 0.6, (cands, 5))[:, outputs]
    conc = rng.uniform(0.5, 80.0, (cands, 5))[:, outputs]
    per_token = (np.full(cands, 0.01), np.full(cands, 0.02), np.full(cands, 0.03))
    share = MixedShare.build(mean, mean * conc, (1.0 - mean) * conc, per_token, 0.4 * np.ones((cands, reqs)))
    z = np.sort(rng.normal(size=(strata, cands)), axis=0)
    y = np.broadcast_to(rng.uniform(-0.001, 0.02, (cands, 1)), (cands, reqs))
    shift = rng.uniform(-0.003, 0.003, (strata, cands, 1)) * np.ones((1, 1, reqs))
    stable = np.array([True] * (cands - 1) + [False])
    weights = rng.dirichlet(np.ones(strata))
    return MixedTpot.at(share, y, shift, stable, (weights, share.given(z)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_staged_cdf_is_the_exact_law(seed: int) -> None:
    """At every stage the bounds hold the exact CDF (MixedTpot.cdf); after any stages, and after
    dropping a candidate, the staged CDF is MixedTpot.cdf of those rows entry for entry."""
    law = _law(seed)
    rows = np.array([0, 1, 2, 3])
    exact = law.cdf(rows)
    staged = StagedCdf.build(law, rows)
    for step in REFINE_SHARES:
        staged, lo, hi = staged.bounds(step)
        assert np.all(lo <= exact + 1e-12) and np.all(exact <= hi + 1e-12)
    assert np.array_equal(StagedCdf.build(law, rows).cdf(), exact)  # nothing computed before
    keep = np.array([True, False, True, True])
    assert np.array_equal(staged.take(keep).cdf(), law.cdf(rows[keep]))  # part computed before
    _, lo, hi = StagedCdf.build(law, rows).bounds(1.0)  # every entry exact: the bounds are the CDF
    assert np.allclose(lo, exact, rtol=0, atol=1e-12) and np.allclose(hi, exact, rtol=0, atol=1e-12)


def test_staged_bounds_tighten_where_widest() -> None:
    """The first stage computes the widest weighted entries: the bounds' total width falls by more
    than the share computed (a uniform pick would remove about that share)."""
    law = _law(5, strata=4, cands=6, reqs=30)
    rows = np.arange(5)
    staged = StagedCdf.build(law, rows)
    staged, lo0, hi0 = staged.bounds(0.0)
    staged, lo1, hi1 = staged.bounds(0.2)
    assert np.all(lo1 >= lo0 - 1e-15) and np.all(hi1 <= hi0 + 1e-15)
    assert (hi1 - lo1).sum() < 0.8 * (hi0 - lo0).sum()
