"""Prefill-first stalls from the prompts a request's queue wait leaves behind its step
(model.queueing.stall_count; docs/session13/pf15.md)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from model.queueing.latency import LatencyModel
from model.queueing.stall_count import count_law, wait_stall_mean, wait_stall_rate
from model.serving.queued_behind import left_behind


def test_count_law_without_a_wait_is_poisson():
    """mu = 0: P(N = 0) = e^-n, P(N = 1) = n e^-n, E[N; N >= 2] = n - P1 (the old law)."""
    n = np.array([[0.5, 2.0]])
    p0, p1, p2, en, en2 = count_law(n, np.array([0.7]), np.array([0.0]))
    assert p0[0].tolist() == pytest.approx(np.exp(-n[0]).tolist())
    assert p1[0].tolist() == pytest.approx((n[0] * np.exp(-n[0])).tolist())
    assert en[0, 1] == pytest.approx((2.0 - 2.0 * math.exp(-2.0)) / p2[0, 1])
    assert en2[0, 1] == pytest.approx((2.0 + 4.0 - 2.0 * math.exp(-2.0)) / p2[0, 1])


def test_count_law_of_the_wait_alone_by_hand():
    """n = 0, P(W > 0) = p = 1/2, mean count given a wait mu = 1 (theta = 1/2): M = 0 with
    1/2 + 1/2 x 1/2 = 3/4, M = 1 with 1/2 x 1/2 x 1/2 = 1/8, M >= 2 with 1/8. Given M >= 2,
    M = 2 + G with G geometric of mean theta / (1 - theta) = 1 and variance 2: E = 3, E[M^2] = 2 + 9 =
    11."""
    p0, p1, p2, en, en2 = count_law(np.array([[0.0]]), np.array([0.5]), np.array([1.0]))
    assert (p0[0, 0], p1[0, 0], p2[0, 0]) == pytest.approx((0.75, 0.125, 0.125))
    assert (en[0, 0], en2[0, 0]) == pytest.approx((3.0, 11.0))


def test_count_law_against_sampling():
    """N = Poisson(0.7) + Poisson(a W), W = 0 with 0.6, else exponential with a mean count 2.5."""
    rng = np.random.default_rng(1)
    size = 400_000
    w = np.where(rng.random(size) < 0.4, rng.exponential(2.5, size), 0.0)
    m = rng.poisson(0.7, size) + rng.poisson(w)
    p0, p1, p2, en, en2 = count_law(np.array([[0.7]]), np.array([0.4]), np.array([2.5]))
    two = m >= 2
    assert p0[0, 0] == pytest.approx(np.mean(m == 0), abs=3e-3)
    assert p1[0, 0] == pytest.approx(np.mean(m == 1), abs=3e-3)
    assert p2[0, 0] == pytest.approx(np.mean(two), abs=3e-3)
    assert en[0, 0] == pytest.approx(m[two].mean(), rel=1e-2)
    assert en2[0, 0] == pytest.approx((m[two] ** 2).mean(), rel=2e-2)


def test_wait_stall_rate_by_hand():
    """lambda_r = 0.5 req/s: all left behind, one prompt per step: 0.5 stalls per second of wait; a
    router share of 1/4, half left behind and two prompts per step: 0.5 x 0.25 x 0.5 / 2 = 0.03125."""
    rate = wait_stall_rate(
        np.array([0.5, 0.5]), np.array([1.0, 0.25]), np.array([[1.0], [0.5]]), np.array([1.0, 2.0])
    )
    assert rate[:, 0].tolist() == pytest.approx([0.5, 0.03125])


def _scenario(tokens: float, cap: int) -> SimpleNamespace:
    """The fields left_behind reads: 64 sampled prompts of ``tokens``, no cache, the engine's cap."""
    prompts = np.full(64, tokens)
    return SimpleNamespace(
        prompt_tokens=prompts, cached_tokens=np.zeros(64), engine=SimpleNamespace(prefill_token_cap=cap)
    )


def test_left_behind_by_hand():
    """One prompt arrived behind it on average (N geometric of mean 1, P(N >= j) = 2^-j), nobody
    ahead. 5,000-token prompts under an 8,192-token cap: none fits beside it, all are left (phi = 1).
    1,000-token prompts: seven fit beside it (8,000 <= 8,192), E[min(N, 7)] = 1 - 2^-7 of them ride,
    phi = 2^-7 = 0.0078. With one ahead on average too (N_a + N_b geometric of mean 2, q = 2/3):
    E[min(N, 7)] = 2 (1 - (2/3)^7) = 1.8829 less E[min(N_a, 7)] = 0.9922 ride: phi = 1 - 0.8907 =
    0.1093. Nothing arrived behind: phi = 0."""
    one, none = np.array([1.0]), np.array([0.0])
    assert left_behind(_scenario(5000.0, 8192), one, none)[0, 0] == pytest.approx(1.0)
    assert left_behind(_scenario(1000.0, 8192), one, none)[0, 0] == pytest.approx(2.0**-7, abs=1e-9)
    ride = 2.0 * (1.0 - (2.0 / 3.0) ** 7) - (1.0 - 2.0**-7)
    assert left_behind(_scenario(1000.0, 8192), one, one)[0, 0] == pytest.approx(1.0 - ride, abs=2e-3)
    assert left_behind(_scenario(1000.0, 8192), none, one)[0, 0] == 0.0


def test_latency_model_with_wait_stalls_by_hand():
    """One request, 101 tokens at a 10 ms base, no stall in its decode window (n = 0), 40 ms stalls,
    rho = 0.5; its wait: P(W > 0) = 0.4, E[W | W > 0] = 2 s, 1.5 left-behind stalls per second of wait
    (mu = 3). P(TPOT = base) = P(M = 0) = 0.6 + 0.4 / 4 = 0.7; the mean TPOT 10 ms + 0.4 x 3 x 40 ms /
    0.5 / 100 = 10.96 ms (each primary a cluster of mean 80 ms). At 10.8 ms (80 ms absorbable): one
    cluster (M = 1: 0.4 x 3 / 16 = 0.075) fits; two or more (0.225; M given M >= 2 is 2 + a geometric
    of mean 3, variance 12, so E = 5) take the gamma of mean 5 x 80 ms = 0.4 s and variance
    5 x Var[cluster] + 12 x 0.08^2 = 5 x 0.0064 + 0.0768 = 0.1088 s^2 (Var[cluster] = E[s^2] / 0.5^3 -
    0.08^2 = 0.0064): shape 0.16 / 0.1088 = 1.4706, scale 0.272 s, P(<= 0.08 s) = P(1.4706, 0.2941) =
    0.10689; in all 0.7 + 0.075 + 0.225 x 0.10689 = 0.79905."""
    lat = LatencyModel(
        wait_prob=np.array([0.4]),
        wait_cond_mean_s=np.array([2.0]),
        fixed_s=np.array([[0.1]]),
        tpot_base_s=np.array([0.010]),
        stall_events=np.array([[0.0]]),
        stall_sizes_s=np.array([[0.040]]),
        output_tokens=np.array([101.0]),
        stable=np.array([True]),
        stall_load=np.array([0.5]),
        wait_stalls=np.array([[1.5]]),
    )
    assert lat.tpot_cdf(np.array([[0.010 + 1e-9]]))[0, 0] == pytest.approx(0.7)
    assert lat.tpot_cdf(np.array([[0.0108 + 1e-9]]))[0, 0] == pytest.approx(0.79905, abs=1e-5)
    assert lat.mean_tpot_s()[0] == pytest.approx(0.01096)
    assert lat.take(np.array([0, 0])).wait_stalls.tolist() == [[1.5], [1.5]]


def test_wait_stall_mean_edges():
    """No rate: nothing; an unstable wait (inf) adds nothing rather than inf."""
    p, mu = wait_stall_mean(None, np.array([0.3]), np.array([1.0]))
    assert (p[0], mu[0, 0]) == (0.0, 0.0)
    p, mu = wait_stall_mean(np.array([[2.0], [2.0]]), np.array([1.0, 0.5]), np.array([np.inf, 1.0]))
    assert p.tolist() == [0.0, 0.5] and mu.tolist() == [[0.0], [2.0]]
