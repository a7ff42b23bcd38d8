"""The chunked replicas' mixed-share law (model.queueing.mixed_share): hand-derived limits and a
small Monte Carlo of the prefill busy / idle alternation in iterations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from model.queueing.mixed_share import MixedShare, alternation, mixed_share, window_variance_factor

# Hand example: lambda_r = 1 /s, exponential shares E[S] = 0.5 s (E[S^2] = 2 x 0.25), T_dec = T_mix
# = 0.1 s. u = 0.5; busy period E[B] = 0.5 / 0.5 = 1 s = 10 iterations, E[B^2] = 0.5 / 0.5^3 = 4 s^2
# = 400 it^2 (var 300); idle exponential, 1 s = 10 iterations (var 100); Fbar = 10 / 20 = 0.5;
# theta = (10^2 x 300 + 10^2 x 10^2) / (2 x 20 x 10 x 10) = 10 iterations.
HAND = dict(
    rate=np.array([1.0]), moments=(np.array([0.5]), np.array([0.5])), t=(np.array([0.1]), np.array([0.1]))
)


def _alt(rate=HAND["rate"], moments=HAND["moments"], t=HAND["t"]):
    return alternation(rate, moments, *t)


def test_alternation_hand_values() -> None:
    alt = _alt()
    assert alt.u[0] == pytest.approx(0.5)
    assert alt.fbar[0] == pytest.approx(0.5)
    assert alt.theta[0] == pytest.approx(10.0)


def test_window_factor_limits() -> None:
    # g = 2 (x - 1 + e^-x) / x^2: 1 at x = 0, 2 e^-1 at x = 1, 2 / x for long windows
    g = window_variance_factor(np.array([0.0, 1e-5, 10.0, 1e4]), np.array([10.0, 10.0, 10.0, 10.0]))
    assert g[0] == pytest.approx(1.0)
    assert g[1] == pytest.approx(1.0, abs=1e-6)
    assert g[2] == pytest.approx(2.0 * math.exp(-1.0))
    assert g[3] == pytest.approx(2.0 / 1e3, rel=2e-3)


def test_long_window_variance_is_the_renewal_limit() -> None:
    # Var[F] -> (m_I^2 s_B^2 + m_B^2 s_I^2) / ((m_B + m_I)^3 n) = (100 x 300 + 100 x 100) / (8000 n) = 5 / n
    n = 1e5
    mean, a, b, _r = mixed_share(_alt(), np.array([n]))
    var = mean * (1 - mean) / (a + b + 1)
    assert mean[0, 0] == pytest.approx(0.5, abs=1e-3)  # the start's weight h ~ theta / n is gone
    assert var[0, 0] == pytest.approx(5.0 / n, rel=1e-3)


def test_short_window_is_bernoulli_of_the_wall_utilisation() -> None:
    # T_mix = 4 T_dec: u = 0.5 in wall time, Fbar = (0.5 / 4) / (0.5 / 4 + 0.5) = 0.2 in iterations;
    # a one-iteration window starts in a busy period with probability u: F ~ Bernoulli(0.5)
    alt = _alt(t=(np.array([0.1]), np.array([0.4])))
    assert alt.fbar[0] == pytest.approx(0.2)
    mean, a, b, _r = mixed_share(alt, np.array([1e-6]))
    assert mean[0, 0] == pytest.approx(0.5, abs=1e-5)
    share = MixedShare.build(mean, a, b, (np.array([0.01]), np.array([0.04]), np.array([0.04])))
    # half the requests see no mixed iteration, half only mixed ones: P(excess <= 0.5 x 0.03) = 1/2
    assert share.excess_cdf(np.array([[0.015]]))[0, 0] == pytest.approx(0.5, abs=1e-3)
    assert share.excess_cdf(np.array([[1e-9]]))[0, 0] == pytest.approx(0.5, abs=1e-3)


def test_utilisation_limits() -> None:
    # rho_p -> 0: no mixed iterations, the plain step; rho_p -> 1: (almost) all mixed
    low = _alt(rate=np.array([1e-9]))
    mean, _a, _b, _r = mixed_share(low, np.array([50.0]))
    assert mean[0, 0] < 1e-8
    high = _alt(rate=np.array([1.9999]))
    mean, _a, _b, _r = mixed_share(high, np.array([50.0]))
    assert high.u[0] == pytest.approx(0.999)
    assert mean[0, 0] > 0.99


def test_quadratic_excess_inverts_exactly() -> None:
    # excess(F) = F (lin + quad (F - E[F])) is increasing; P(excess <= excess(f0)) = I_f0(alpha, beta)
    from scipy.special import betainc

    mean, a, b = np.array([[0.3]]), np.array([[1.2]]), np.array([[2.8]])
    share = MixedShare.build(mean, a, b, (np.array([0.01]), np.array([0.03]), np.array([0.05])))
    assert share.lin_s[0, 0] == pytest.approx(0.02)
    assert share.quad_s[0, 0] == pytest.approx(0.02 / 0.7)
    for f0 in (0.05, 0.3, 0.8, 0.99):
        y = share.excess_s(np.array([[f0]]))
        assert share.excess_cdf(y)[0, 0] == pytest.approx(betainc(1.2, 2.8, f0), abs=1e-9)
    # at F = 1 the mixed iterations are full ones: excess(1) = t_full - t_dec
    assert share.excess_s(np.ones((1, 1)))[0, 0] == pytest.approx(0.04)
    # E[excess] = E[F] lin + quad Var[F], Var = m (1 - m) / (a + b + 1) = 0.21 / 5
    assert share.mean_extra_s()[0, 0] == pytest.approx(0.3 * 0.02 + 0.02 / 0.7 * 0.21 / 5)


def _simulate_alternation(rng, lam, t_dec, t_mix, iterations, share):
    """Mixed indicator per iteration and the iterations at which a prompt's prefill ends: Poisson
    arrivals at ``lam``; queued prefill work is served t_mix per (mixed) iteration, FCFS."""
    mixed = np.zeros(iterations, dtype=bool)
    ends: list[int] = []
    work: list[float] = []  # remaining work of each queued prompt
    t = 0.0
    next_arrival = rng.exponential(1 / lam)
    for k in range(iterations):
        dt = t_mix if work else t_dec
        mixed[k] = bool(work)
        left = dt if work else 0.0
        while work and left > 0:
            used = min(work[0], left)
            work[0] -= used
            left -= used
            if work[0] <= 1e-12:
                work.pop(0)
                ends.append(k + 1)  # its decode starts with the next iteration
        t += dt
        while next_arrival <= t:
            work.append(share(rng))
            next_arrival += rng.exponential(1 / lam)
    return mixed, np.array(ends)


def test_monte_carlo_of_the_alternation() -> None:
    """Mean and spread of F over windows that start at prefill ends, against a simulation of the
    busy / idle alternation: shares of a geometric number of whole mixed iterations (p = 0.4, so
    E[S] = T_mix / p, E[S^2] = T_mix^2 (2 - p) / p^2), T_mix = 3 T_dec, u = 0.6, Fbar = 1/3."""
    rng = np.random.default_rng(7)
    t_dec, t_mix, p = 0.02, 0.06, 0.4
    es = t_mix / p
    lam = 0.6 / es
    mixed, ends = _simulate_alternation(rng, lam, t_dec, t_mix, 200_000, lambda r: t_mix * r.geometric(p))
    moments = (np.array([es]), np.array([t_mix * t_mix * (2 - p) / p**2]))
    alt = alternation(np.array([lam]), moments, np.array([t_dec]), np.array([t_mix]))
    assert alt.fbar[0] == pytest.approx(1 / 3)
    assert mixed.mean() == pytest.approx(1 / 3, abs=0.01)
    assert mixed[ends[ends < len(mixed)]].mean() == pytest.approx(0.6, abs=0.03)  # starts busy w.p. u
    cum = np.concatenate([[0], np.cumsum(mixed)])
    for n in (1, 3, 10, 30, 100, 300):
        starts = ends[ends + n <= len(mixed)]
        f = (cum[starts + n] - cum[starts]) / n
        mean, a, b, _r = mixed_share(alt, np.array([float(n)]))
        sd = math.sqrt(mean[0, 0] * (1 - mean[0, 0]) / (a[0, 0] + b[0, 0] + 1))
        assert f.mean() == pytest.approx(mean[0, 0], abs=0.03), n
        assert f.std() == pytest.approx(sd, rel=0.1), n


def test_planner_tpot_percentiles_match_the_simulator() -> None:
    """Llama-3.1-70B on 1 x TP4 H100, chunk 2048, EAGLE k = 3 (the speculation cell traced in
    docs/validation.md, session 9), 2,000 Poisson chat requests: the planner's p50 / p90 TPOT within
    8% of the simulator's at 5 and 7 req/s (prefill wall utilisation ~0.45 and ~0.65). Simulated
    p50 / p90 12.3 / 18.0 and 17.9 / 30.8 ms; planned 11.9 / 17.9 and 16.8 / 29.5 ms (with the stall
    clusters it replaced: 11.8 / 16.6 and 16.4 / 24.9, the p90 at 7 req/s 19% low)."""
    import dataclasses

    from model.hardware.catalog import get_gpu
    from model.physics.speculation import Speculation
    from model.planner.goodput import build_set
    from model.serving.configs import ColocatedConfig
    from model.sim.simulate import SimOptions, SimRequests, poisson_requests, simulate
    from model.workload.arrivals import scale_to_rate
    from model.workload.scenario import Scenario
    from model.workload.slo import SLO

    eagle = Speculation("eagle", 3, (0.8,))
    cfg = ColocatedConfig(get_gpu("h100-sxm"), 4, 1, 2048)
    scn = dataclasses.replace(Scenario.build("llama-3.1-70b", "chat", SLO(1.0, 0.03)), speculation=eagle)
    base = poisson_requests("chat", 1.0, 2000, seed=0)
    for rate in (5.0, 7.0):
        _, planned = build_set(scn, [cfg]).evaluate(np.array([rate])).latency.percentiles_s((0.5, 0.9))
        req = SimRequests(scale_to_rate(base.arrival_s, rate), base.prompt_tokens, base.output_tokens)
        rec = simulate(
            cfg, "llama-3.1-70b", req, options=SimOptions(warmup_requests=500), speculation=eagle
        ).records
        done = rec.measured & rec.completed & (rec.output_tokens >= 2)
        simulated = np.percentile(rec.tpot_s[done], [50, 90])
        assert planned == pytest.approx(simulated, rel=0.08), rate


def test_cantelli_bounds_hold_the_beta_cdf() -> None:
    """MixedShare.bounds_at brackets the exact Beta CDF (cdf_at) at every root, and is exact where
    the root is outside (0, 1). Hand value: Beta(2, 2) (mean 1/2, variance 1/20) at F* = 0.9 has
    Cantelli's lower bound 1 - 0.05 / (0.05 + 0.16) = 16/21, below the exact 0.972."""
    rng = np.random.default_rng(3)
    a, b = rng.uniform(0.05, 60.0, (6, 40)), rng.uniform(0.05, 60.0, (6, 40))
    share = MixedShare(a / (a + b), a, b, np.ones((6, 40)), np.zeros((6, 40)), np.zeros((6, 40)))
    f = np.concatenate([rng.uniform(-0.2, 1.2, (6, 35)), np.array([[0.0, 1.0, -1.0, 0.5, 1e-9]] * 6)], axis=1)
    want = (f > 0.0) & (f < 1.0)
    exact = share.cdf_at(f, want)
    lo, hi = share.bounds_at(f, want)
    assert np.all(lo <= exact + 1e-12) and np.all(exact <= hi + 1e-12)
    outside = (f >= 1.0) | (f < 0.0)
    assert np.array_equal(lo[outside], exact[outside]) and np.array_equal(hi[outside], exact[outside])
    hand = MixedShare(
        np.array([[0.5]]),
        np.array([[2.0]]),
        np.array([[2.0]]),
        np.ones((1, 1)),
        np.zeros((1, 1)),
        np.zeros((1, 1)),
    )
    lo, hi = hand.bounds_at(np.array([[0.9]]), np.array([[True]]))
    assert lo[0, 0] == pytest.approx(16.0 / 21.0) and hi[0, 0] == 1.0
    assert hand.cdf_at(np.array([[0.9]]), np.array([[True]]))[0, 0] == pytest.approx(0.972)


def test_distinct_columns_reconstruct_exactly() -> None:
    """distinct_columns: repeated columns are found, every array is its distinct columns spread back
    entry for entry, and no repeat (or a repeat in one array only) gives None."""
    from model.queueing.mixed_share import distinct_columns

    base = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, np.inf]])
    x = base[:, [0, 1, 0, 2, 1]]
    y = np.array([[7.0, 8.0, 7.0, 9.0, 8.0]])
    first, inverse = distinct_columns(x, y)
    assert len(first) == 3
    for arr in (x, y):
        assert np.array_equal(arr[:, first][:, inverse], arr)
    assert distinct_columns(base) is None
    y_other = np.array([[7.0, 8.0, 6.0, 9.0, 8.0]])  # column 2 differs from column 0 here
    cols = distinct_columns(x, y_other)
    assert cols is not None and len(cols[0]) == 4


def test_arrival_correlations_hand_values() -> None:
    """rho_D for equal outputs O = 401 (window T = 400 tokens): c = 1/2 (every arrival stays to the
    window's end), g(T) = 1 - T / (3 O) (item 3's closed form for O >= T), so
    rho_D^2 = T c^2 / (O g) = 100 / (401 - 400 / 3) = 0.373599. rho_F: arrivals 0.01 / 0.02 per
    decode / mixed iteration, prompts of 2 mixed iterations, window n = 100, E[F] = 0.1,
    Var[F] = 0.001: b = phi(0.02) = 0.0198, mu = 100 (0.1 x 0.02 + 0.9 x 0.01) = 1.1,
    rho_F^2 = 0.0198^2 x 1.1 / 0.001 = 0.431244."""
    from model.queueing.mixed_share import Alternation, arrival_share_correlation
    from model.queueing.overlap import arrival_correlation

    rho_d = arrival_correlation(np.full(8, 401.0))
    assert rho_d[0] ** 2 == pytest.approx(100.0 / (401.0 - 400.0 / 3.0), rel=1e-9)
    assert arrival_correlation(np.array([1.0, 400.0]))[0] == pytest.approx(0.0, abs=1e-3)  # T = 0
    one = np.array([1.0])
    alt = Alternation(one, one, one, (np.array([0.01]), np.array([0.02])), np.array([2.0]))
    rho_f = arrival_share_correlation(alt, np.array([[100.0]]), np.array([[0.1]]), np.array([[0.001]]))
    assert rho_f[0, 0] ** 2 == pytest.approx(0.431244, rel=1e-9)


def test_share_given_the_batch_two_point_law() -> None:
    """F given D (MixedShare.given) on a two-point D (z = -1, +1, probability 1/2 each) by hand:
    F ~ Beta(2, 8) (mean 0.2, Var = 0.16 / 11), r = 0.5: given z the mean is 0.2 + 0.5 sd z and the
    variance 0.75 Var, Beta(m c, (1 - m) c) with c = m (1 - m) / (0.75 Var) - 1. The two-stratum law
    averages the conditional Beta CDFs; with r = 0 it is the independent convolution (the old law)
    entry for entry, and a positive r moves mass to where D and F are high together: at a target the
    high-D stratum barely meets, the CDF falls."""
    from scipy.special import betainc

    from model.queueing.mixed_share import MixedTpot

    var = 0.16 / 11.0
    sd = math.sqrt(var)
    hand = []
    for z in (-1.0, 1.0):
        m = 0.2 + 0.5 * sd * z
        c = m * (1 - m) / (0.75 * var) - 1.0
        hand.append((m * c, (1 - m) * c))
    per_token = (np.array([0.01]), np.array([0.02]), np.array([0.02]))
    one = np.ones((1, 1))
    share = MixedShare.build(0.2 * one, 2.0 * one, 8.0 * one, per_token, 0.5 * one)
    a, b = share.given(np.array([[-1.0], [1.0]]))
    for k in range(2):
        assert (a[k, 0, 0], b[k, 0, 0]) == pytest.approx(hand[k], rel=1e-9)
    # TPOT excess y = 0.003 over the plain step, D shifts -/+ 0.001: F* = (y -/+ 0.001) / 0.01
    y, shift = np.array([[0.003]]), np.array([[[-0.001]], [[0.001]]])
    law = MixedTpot.at(
        share, y, shift, np.array([True]), (np.array([0.5, 0.5]), share.given(np.array([[-1.0], [1.0]])))
    )
    expect = 0.5 * (betainc(*hand[0], 0.4) + betainc(*hand[1], 0.2))
    assert law.cdf()[0, 0] == pytest.approx(expect, rel=1e-9)
    lo, hi = law.bounds()
    assert lo[0, 0] <= expect <= hi[0, 0]
    indep = MixedShare.build(0.2 * one, 2.0 * one, 8.0 * one, per_token, 0.0 * one)
    old = MixedTpot.at(indep, y, shift, np.array([True]))
    new = MixedTpot.at(
        indep, y, shift, np.array([True]), (np.array([0.5, 0.5]), indep.given(np.array([[-1.0], [1.0]])))
    )
    assert new.cdf()[0, 0] == pytest.approx(old.cdf()[0, 0], rel=1e-9)
    assert old.cdf()[0, 0] == pytest.approx(0.5 * (betainc(2.0, 8.0, 0.4) + betainc(2.0, 8.0, 0.2)), rel=1e-9)
    assert law.cdf()[0, 0] < old.cdf()[0, 0]


def test_law_on_distinct_requests_equals_the_full_law() -> None:
    """Requests 0 / 2 and 1 / 3 share every mixed-share field and shrink: distinct_requests finds the
    two, and the law held on them (MixedTpot ``columns``) gives the full law's CDF and bounds entry
    for entry at targets per candidate (two strata, F given D). ``requests``: the Beta CDF only
    where asked (or where a twin is), the same values there; a request not asked reads 0."""
    from model.queueing.mixed_share import MixedTpot, distinct_requests

    mean = np.array([[0.2, 0.3, 0.2, 0.3, 0.25], [0.1, 0.4, 0.1, 0.4, 0.2]])
    conc = np.array([[10.0, 6.0, 10.0, 6.0, 8.0], [12.0, 5.0, 12.0, 5.0, 9.0]])
    per_token = (np.array([0.01, 0.012]), np.array([0.02, 0.03]), np.array([0.025, 0.04]))
    share = MixedShare.build(mean, mean * conc, (1 - mean) * conc, per_token, 0.3 * np.ones_like(mean))
    shrink = np.array([[0.5, 0.7, 0.5, 0.7, 0.6], [0.4, 0.8, 0.4, 0.8, 0.9]])
    first, inverse = distinct_requests(share, shrink)
    assert sorted(first) == [0, 1, 4] and np.array_equal(first[inverse], [0, 1, 0, 1, 4])
    z = np.array([[-1.0, -0.5], [1.0, 0.5]])  # [M, C]
    shift = np.array([[-0.002], [0.002]])[:, :, None] * shrink[None]  # [M, C, S]
    weights = np.array([0.5, 0.5])
    y = np.broadcast_to(np.array([[0.004], [0.006]]), mean.shape)
    full = MixedTpot.at(share, y, shift, np.array([True, True]), (weights, share.given(z)))
    a, b = share.given(z)
    held = MixedTpot.at(
        share.requests(first),
        y[:, first],
        shift[..., first],
        np.array([True, True]),
        (weights, (a[..., first], b[..., first])),
        inverse,
    )
    assert np.array_equal(held.cdf(), full.cdf())
    assert all(np.array_equal(u, v) for u, v in zip(held.bounds(), full.bounds(), strict=True))
    asked = np.array([[True, False, False, False, True], [False, False, True, True, False]])
    part = held.cdf(requests=asked)
    assert np.array_equal(part[asked], full.cdf()[asked])
    full_cdf = full.cdf()
    assert part[0, 1] == 0.0 < full_cdf[0, 1]  # request 1 (and 3, its twin) not asked on row 0
    assert part[0, 2] == full_cdf[0, 2]  # request 2 stands with request 0, asked
