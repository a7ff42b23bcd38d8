"""The prefill queue in a slow environment (model.queueing.environment) and the session cache's hit
probability per level of the live footprint (model.workload.session_levels), against hand-derived
values (docs/model.md, "Misses in bursts")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from model.queueing.environment import environment_waits, level_weights
from model.queueing.latency import LatencyModel
from model.queueing.mgc import mgc_wait
from model.serving.session_cache import pool_miss_levels
from model.workload.lengths import Fixed
from model.workload.presets import get_workload
from model.workload.scenario import Scenario
from model.workload.session_levels import history_hit_levels
from model.workload.sessions import SessionShape, history_hit_probability
from model.workload.slo import SLO


def _latency(fixed: np.ndarray, prob: float, cond: float, levels=None) -> LatencyModel:
    """One candidate whose TTFT is a queue wait plus ``fixed`` [S] (no TPOT parts)."""
    s = len(fixed)
    return LatencyModel(
        np.array([prob]),
        np.array([cond]),
        np.asarray(fixed, dtype=float)[None, :],
        np.array([0.01]),
        np.zeros((1, s)),
        np.zeros((1, 1)),
        np.full(s, 100.0),
        np.array([True]),
        levels=levels,
    )


def test_two_level_prefill_queue_written_out():
    """Four sampled prompts, one a whole-history miss (m = 1/4): a hit's prefill 0.1 s, the miss's
    0.5 s, 2 req/s on one instance. Level 1 misses never (m_1 = 0), level 2 half the time
    (m_2 = 1/2; mean 1/4 = m). Weights: level 1 hits 1 / (3/4) = 4/3, the miss 0; level 2 hits
    (1/2) / (3/4) = 2/3, the miss (1/2) / (1/4) = 2. Pollaczek-Khinchine per level (M/G/1,
    W = lambda E[S^2] / (2 (1 - rho)), P(W > 0) = rho): level 1 E[S] = 0.1, E[S^2] = 0.01, rho = 0.2,
    E[W] = 0.02 / 1.6 = 0.0125, E[W | W > 0] = 0.0625; level 2 E[S] = 0.3, E[S^2] = 0.13, rho = 0.6,
    E[W] = 0.26 / 0.8 = 0.325, E[W | W > 0] = 0.5417. A request's P(TTFT <= 1 s) is the levels'
    average of its weight x (1 - rho_k exp(-(1 - t_own) / E[W_k | W_k > 0]))."""
    missed = np.array([False, True, False, False])
    share = np.array([[0.1, 0.5, 0.1, 0.1]])
    w = level_weights(missed, np.array([[0.0, 0.5]]))
    assert w[0, 0] == pytest.approx([4 / 3, 0.0, 4 / 3, 4 / 3])
    assert w[0, 1] == pytest.approx([2 / 3, 2.0, 2 / 3, 2 / 3])
    lv = environment_waits(np.array([2.0]), share, w, np.array([1.0]), 1.0)
    assert lv.prob[0] == pytest.approx([0.2, 0.6])
    assert lv.cond_mean_s[0] == pytest.approx([0.0125 / 0.2, 0.325 / 0.6])
    assert lv.mean_wait_s[0] == pytest.approx((0.0125 + 0.325) / 2)
    lat = _latency(share[0], 0.0, 0.0, lv)
    cdf = lat.ttft_cdf(np.array([[1.0]]))[0]

    def level(weight: float, rho: float, cond: float, own: float) -> float:
        return weight * (1.0 - rho * math.exp(-(1.0 - own) / cond))

    hit = (level(4 / 3, 0.2, 0.0625, 0.1) + level(2 / 3, 0.6, 0.325 / 0.6, 0.1)) / 2
    miss = (level(0.0, 0.2, 0.0625, 0.5) + level(2.0, 0.6, 0.325 / 0.6, 0.5)) / 2
    assert cdf == pytest.approx([hit, miss, hit, hit], rel=1e-12)
    # the stationary queue on the mixture's moments (E[S] = 0.2, E[S^2] = 0.07, rho = 0.4) is kinder
    # to the tail: its P(TTFT > 1 s) is below the levels' average
    one = mgc_wait(2.0, 0.2, 0.07 / 0.04 - 1.0, 1, 1.0)
    flat = _latency(share[0], float(one.prob_wait), float(one.cond_mean_wait_s)).ttft_cdf(np.array([[1.0]]))
    assert float(flat.mean()) > float(cdf.mean())


def test_an_unstable_level_fails_its_requests():
    """A level at utilisation >= 1 (fluid limit: its work piles up for the level's whole life) has
    P(W > 0) = 1 and an unbounded wait: its requests never meet a TTFT target."""
    missed = np.array([False, True])
    w = level_weights(missed, np.array([[0.0, 1.0]]))
    lv = environment_waits(np.array([2.0]), np.array([[0.1, 0.6]]), w, np.array([1.0]), 1.0)
    assert lv.prob[0, 1] == 1.0 and np.isinf(lv.cond_mean_s[0, 1])
    cdf = _latency(np.array([0.1, 0.6]), 0.0, 0.0, lv).ttft_cdf(np.array([[5.0]]))[0]
    # level 1 (rho = 0.2) holds the hit only, with weight 2: half the mass; level 2 contributes 0
    assert float(cdf.mean()) == pytest.approx(0.5 * (1.0 - 0.2 * math.exp(-4.9 / 0.05)), rel=1e-12)


def test_equal_levels_are_the_single_stationary_queue():
    """Levels with the same miss probability weigh every request 1: each level's queue is the M/G/c
    queue on the mixture's moments, and the TTFT law is the single queue's."""
    rng = np.random.default_rng(3)
    missed = np.arange(40) % 5 == 0  # m = 0.2
    share = np.where(missed, 0.4, 0.05) * rng.uniform(0.8, 1.2, 40)
    w = level_weights(missed, np.full((1, 3), 0.2))
    assert np.allclose(w, 1.0)
    lv = environment_waits(np.array([6.0]), share[None, :], w, np.array([2.0]), 1.0)
    es, scv = share.mean(), share.var() / share.mean() ** 2
    one = mgc_wait(6.0, es, scv, 2, 1.0)
    assert np.allclose(lv.prob, one.prob_wait) and np.allclose(lv.cond_mean_s, one.cond_mean_wait_s)
    t = np.array([[0.3]])
    flat = _latency(share, float(one.prob_wait), float(one.cond_mean_wait_s)).ttft_cdf(t)
    assert np.allclose(_latency(share, 0.0, 0.0, lv).ttft_cdf(t), flat, rtol=1e-12)


def test_level_weights_match_the_samples_split():
    """Levels whose mean differs from the sample's miss share m are matched to it: each level's weights
    average to 1 over the sample, the matched levels average to m, and their order is kept."""
    missed = np.arange(10) < 3  # m = 0.3
    for raw in ([0.05, 0.15, 0.4], [0.3, 0.6, 0.9]):  # mean 0.2 < m (hits scaled); 0.6 > m (misses)
        w = level_weights(missed, np.array([raw]))
        assert np.allclose(w.mean(axis=2), 1.0)
        mk = w[0, :, 0] * 0.3  # a miss's weight is m_k / m
        assert mk.mean() == pytest.approx(0.3) and np.all(np.diff(mk) > 0) and np.all(mk <= 1.0)


def test_one_turn_sessions_have_no_slow_footprint():
    """One-turn sessions have no live session between turns, so the slow part Y is 0 and every level
    is the marginal law: P(4.8, 5) for the 1,600-token sessions of test_session_footprint."""
    shape = SessionShape(0, Fixed(1600), Fixed(1600), Fixed(16), 1.0, 0.0)
    lv = history_hit_levels(shape, np.array([10.0]), np.array([8000.0]), False, 4)
    s = float(history_hit_probability(shape, np.array([10.0]), np.array([8000.0]), False)[0])
    assert lv[0] == pytest.approx([s] * 4, rel=1e-9)
    assert np.all(history_hit_levels(shape, np.array([0.0]), np.array([8000.0]), False, 4) == 1.0)


def test_agentic_levels_spread_around_the_marginal_hit_probability():
    """Agentic sessions on a 401k-token prefill instance at 4 req/s: the hit probability falls level
    by level as the live footprint rises (misses concentrate in the high levels), and the levels'
    mean (slow gamma x fast gamma) stays within 0.01 of the single-gamma marginal law (0.914)."""
    shape = get_workload("agentic").sessions
    lv = history_hit_levels(shape, np.array([4.0]), np.array([401056.0]), False, 8)[0]
    s = float(history_hit_probability(shape, np.array([4.0]), np.array([401056.0]), False)[0])
    assert np.all(np.diff(lv) < 0)
    assert lv[0] > 0.98 and lv[-1] < 0.75
    assert lv.mean() == pytest.approx(s, abs=0.01)


def test_a_pool_of_instances_averages_independent_levels():
    """n_p prefill instances hold their own sessions: the pool's miss share is the mean of n_p
    independent levels, variance / n_p, so the levels contract toward their mean by 1 / sqrt(n_p)
    (4 instances: half the spread) and keep their mean."""
    scn = Scenario.build("llama-3.1-8b", get_workload("agentic"), SLO(2.0, 0.03))
    rate, cap = np.array([4.0, 4.0]), np.array([401056.0, 401056.0])
    m = pool_miss_levels(scn, rate, cap, np.array([1.0, 4.0]))
    assert m[1].mean() == pytest.approx(m[0].mean(), rel=1e-12)
    assert m[1] - m[1].mean() == pytest.approx((m[0] - m[0].mean()) / 2.0, abs=1e-12)
    s = history_hit_levels(scn.workload.sessions, rate[:1], cap[:1], False, len(m[0]))[0]
    assert m[0] == pytest.approx(1.0 - s, rel=1e-12)
