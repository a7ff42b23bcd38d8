"""The light-batch overlap law (model.queueing.overlap, model.queueing.decode_spread item 4): a
two-request case by hand, a Monte Carlo of the M/G/inf overlaps, and the blend's limits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from model.queueing.decode_spread import occupancy, tpot_spread
from model.queueing.overlap import overlap_law
from model.serving.phase_tables import BATCH_GRID


def test_one_overlap_of_two_equal_requests_by_hand():
    # Outputs of 101 tokens: the window is T = 100 gaps, the other's sojourn S = 101. The other's start
    # a ranges over (-101, 100), 201 tokens; the overlap is uniform on (0, 100) over 2 x 100 of it and
    # 100 over the remaining 1: P(L <= 50) = 100 / 201, E[L] = S T / (S + T) = 101 x 100 / 201,
    # E[L^2] = (2 x 100^3 / 3 + 1 x 100^2) / 201.
    law = overlap_law(np.array([101.0, 101.0]))
    assert law.one_cdf(np.array([[0.5, 0.5]]), np.arange(2))[0, 0] == pytest.approx(100.0 / 201.0, rel=1e-12)
    assert law.one_cdf(np.array([[0.999, 1.0]]), np.arange(2))[0, 1] == pytest.approx(1.0)
    assert law.mean_f[0] == pytest.approx(101.0 / 201.0, rel=1e-12)
    assert law.m2_f[0] == pytest.approx((2e6 / 3.0 + 1e4) / 201.0 / 1e4, rel=1e-12)
    assert law.power[0] == pytest.approx(1.0 + 100.0 / 101.0, rel=1e-12)


def test_monte_carlo_of_the_mgi_overlaps():
    # Others arrive at 0.004 per token time with sojourns drawn from the sample; the tagged request's
    # window is T = O - 1 = 299. P(no overlap) = exp(-lambda (E[S] + T)), E[shared time] = lambda E[S] T,
    # and one overlap's fraction follows one_cdf.
    rng = np.random.default_rng(7)
    outputs = np.array([40.0, 120.0, 300.0, 900.0])
    lam, t, reach = 0.004, 299.0, 1000.0
    law = overlap_law(outputs)
    trials = 40_000
    counts = rng.poisson(lam * (reach + t), trials)
    starts = rng.uniform(-reach, t, counts.sum())
    sizes = rng.choice(outputs, counts.sum())
    overlap = np.clip(np.minimum(starts + sizes, t) - np.maximum(starts, 0.0), 0.0, None)
    owner = np.repeat(np.arange(trials), counts)
    hits = np.bincount(owner, weights=overlap > 0, minlength=trials)
    shared = np.bincount(owner, weights=overlap, minlength=trials)
    es = outputs.mean()
    assert np.mean(hits == 0) == pytest.approx(math.exp(-lam * (es + t)), abs=0.01)
    assert shared.mean() == pytest.approx(lam * es * t, rel=0.03)
    one = overlap[overlap > 0] / t
    i = 2  # the 300-token request: T = 299
    for f in (0.1, 0.3, 0.6):
        assert np.mean(one <= f) == pytest.approx(
            float(law.one_cdf(np.full((1, 4), f), np.arange(4))[0, i]), abs=0.01
        )
    assert one.mean() == pytest.approx(law.mean_f[i], rel=0.02)


def _light_case(outputs: np.ndarray):
    # tau(n) = 10 + 5 max(n, 1) ms (a MoE-like jump), lambda E[O] = 8 tokens/s: a light batch
    tau = (0.010 + 0.005 * np.maximum(BATCH_GRID, 1.0))[None, :]
    occ = occupancy(np.array([8.0]), BATCH_GRID, tau, np.array([256.0]), np.array([0.13]))
    levels = (0.010 + 0.005 * np.arange(1.0, 17.0))[None, :]
    return tpot_spread(occ, outputs, levels), tpot_spread(occ, outputs)


def test_atom_at_never_shared_and_the_mean():
    outputs = np.array([50.0, 200.0, 400.0, 800.0])
    light, plain = _light_case(outputs)
    alpha = float(light.alone[0])
    assert 0.8 < alpha < 0.95
    lo = float(light.dev_s[0, 0])
    # Just above the alone step: item 3's law (shrink < 1) has nothing there, the overlap law its atom
    # P0 = alpha^(1 + (O - 1) / E[O]), weighted by alpha.
    at = light.excess_cdf(np.array([[lo + 1e-12]]))[0]
    p0 = alpha ** (1.0 + (outputs - 1.0) / outputs.mean())
    assert plain.excess_cdf(np.array([[lo + 1e-12]]))[0] == pytest.approx(np.zeros(4))
    assert at == pytest.approx(
        alpha * p0, rel=1e-6
    )  # (the K >= 2 gamma, by its cube-root normal, ~1e-8 there)
    # The overlap law is the step at 1 + c F others, F of mean m = -ln alpha, c = (E_q[tau] - tau(1)) /
    # (m (tau(2) - tau(1))); the step is linear here (5 ms per sequence), so its mean deviation is
    # lo + 5 ms x c m = 0. Integrating 1 - F over the support (step 1 us), the blend's mean is
    # (1 - alpha) x item 3's own (its table read at or below a point, conservative by up to one table
    # step, here 1.2 ms: a bias of item 3's law). Within 5 us: the one-overlap table is read linearly
    # between 1/64 points of f.
    x = np.arange(lo - 1e-6, 0.05, 1e-6)
    rows = np.zeros(len(x), dtype=int)
    means = [
        x[0] + ((1.0 - s.take(rows).excess_cdf(x[:, None])[:-1]) * 1e-6).sum(axis=0) for s in (light, plain)
    ]
    assert means[0] == pytest.approx((1.0 - alpha) * means[1], abs=5e-6)


def test_heavy_batch_is_item_3_law():
    # no token decodes alone (the window starts above batch 1): alpha = 0, the law is item 3's exactly
    tau = (0.010 + 0.0001 * np.maximum(BATCH_GRID, 1.0))[None, :]
    occ = occupancy(np.array([4000.0]), BATCH_GRID, tau, np.array([1024.0]), np.array([40.0]))
    outputs = np.array([50.0, 200.0, 400.0])
    levels = (0.010 + 0.0001 * np.arange(1.0, 17.0))[None, :]
    light, plain = tpot_spread(occ, outputs, levels), tpot_spread(occ, outputs)
    assert float(light.alone[0]) == 0.0
    x = np.array([[-1e-4], [0.0], [2e-5], [1e-4]])
    rows = np.zeros(4, dtype=int)
    assert light.take(rows).excess_cdf(x) == pytest.approx(plain.take(rows).excess_cdf(x))


def test_light_levels_are_whole_batch_steps():
    """A one-instance table tabulated as the physics does, t(ceil(g)) on BATCH_GRID with t(n) = 6, 9,
    10, 10.5, .. ms (t(n) = 6 + 3 (1 + ..) concave): the light law's step at n others + 1 is t(n + 1)
    exactly (levels 6, 9, 10 ms), not the linear read between the grid points around 2 (1.92 -> t(2),
    2.11 -> t(3)), which gives 9 + (2 - 1.9244) / (2.1131 - 1.9244) x 1 = 9.40 ms; and the per-token
    law's support at batch 2 is t(2) = 9 ms too (so Little's count c stays about 1 on one instance)."""
    whole = {1: 6.0, 2: 9.0, 3: 10.0}
    t_ms = np.array(
        [whole.get(math.ceil(max(g, 1.0) - 1e-12), 10.0 + 0.5 * (math.ceil(g) - 3)) for g in BATCH_GRID]
    )
    per_token = (t_ms * 1e-3)[None, :]
    lam_eo = np.array([0.1 / 6e-3])  # a mean batch of about 0.1
    from model.queueing.decode_spread import decode_tpot_spread

    out = np.full(64, 200.0)
    sp = decode_tpot_spread(lam_eo, BATCH_GRID, per_token, np.array([64.0]), np.array([0.1]), out)
    steps_ms = (sp.levels[0, :3] + sp.mean_s[0]) * 1e3
    assert steps_ms == pytest.approx([6.0, 9.0, 10.0], abs=1e-9)
    k = int(np.searchsorted(BATCH_GRID, 2.0))
    linear = 9.0 + (2.0 - BATCH_GRID[k - 1]) / (BATCH_GRID[k] - BATCH_GRID[k - 1]) * 1.0
    assert linear == pytest.approx(9.40, abs=0.01)  # the read this replaces
    occ_levels = np.unique(np.round((sp.dev_s[0] + sp.mean_s[0]) * 1e3, 9))
    assert 9.0 in occ_levels and not np.any((occ_levels > 9.0) & (occ_levels < 10.0))
    assert sp._light.count[0, 0] == pytest.approx(1.0, abs=0.05)  # Little to first order in m
