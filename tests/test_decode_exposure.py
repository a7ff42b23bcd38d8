"""model.serving.decode_exposure: the prefill-first stall window at the per-token base, the gain a
slow window draws, the joiners' covariance, and the amplified base spread (values by hand,
docs/session14/col1_14.md)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.col1_joiner_covariance import cluster_joint_moment, joiner_covariance_s2, overlap_kernel
from model.queueing.decode_spread import TpotSpread
from model.serving.decode_exposure import amplified_spread, plain_decode_s, stall_gain


def test_plain_decode_at_the_per_token_base():
    # (O - 1) x E_q[tau]: 0, 10 and 100 gaps at 10 and 20 ms
    got = plain_decode_s(np.array([0.01, 0.02]), np.array([1, 11, 101]))
    np.testing.assert_allclose(got, [[0.0, 0.1, 1.0], [0.0, 0.2, 2.0]])


def test_stall_gain_is_stall_seconds_per_plain_second():
    # 0.5 s of stalls over a 1 s window; an empty window draws nothing
    np.testing.assert_allclose(stall_gain(np.array([[0.5, 1.0]]), np.array([[1.0, 0.0]])), [[0.5, 0.0]])


def test_overlap_kernel_by_hand():
    # gaps 0, 2, 4. T = 2: m = (0, 2, 2), T m - m^2 / 2 = (0, 2, 2), mean 4/3 (= int_0^2 2y/3 dy);
    # T = 4: m = (0, 2, 4), (0, 6, 8), mean 14/3; T = 0: 0
    np.testing.assert_allclose(overlap_kernel(np.array([1, 3, 5])), [0.0, 4.0 / 3.0, 14.0 / 3.0])


def test_cluster_joint_moment_by_hand():
    # deterministic s = 1 at rho = 1/2: 4 + 4 = 8 = s / (1 - rho)^3 = s E[N^2];
    # exponential (m2 = 2): 4 + 8 = 12 (a 200,000-period Monte Carlo gives 11.83 +- 0.3)
    got = cluster_joint_moment(np.array([1.0, 1.0]), np.array([1.0, 2.0]), np.array([0.5, 0.5]))
    np.testing.assert_allclose(got, [8.0, 12.0])
    # no load: E[N B] = E[s] (one stall, N = 1)
    np.testing.assert_allclose(cluster_joint_moment(np.array([0.3]), np.array([0.2]), np.array([0.0])), [0.3])


def test_cluster_joint_moment_sampled():
    # the busy period of Poisson(rho / m1) arrivals over uniform(0, 2) stalls at rho = 0.4, sampled
    rng = np.random.default_rng(3)
    lam, total = 0.4, []
    for _ in range(40_000):
        n, b, queue = 0, 0.0, 1
        while queue:
            s = rng.uniform(0.0, 2.0)
            queue += rng.poisson(lam * s) - 1
            n, b = n + 1, b + s
        total.append(n * b)
    law = cluster_joint_moment(np.array([1.0]), np.array([4.0 / 3.0]), np.array([0.4]))[0]
    # 1 / 0.36 + 0.4 (4/3) / 0.216 = 2.7778 + 2.4691 = 5.2469
    assert law == pytest.approx(5.2469, abs=1e-4)
    assert np.mean(total) == pytest.approx(law, rel=0.05)


def test_joiner_covariance_by_hand():
    # lambda_p 2 / s, tau 10 ms, tau' 1 ms, k 1, E[NB] 8 s, K 100 steps^2: 2 x 0.01 x 0.001 x 8 x 100
    got = joiner_covariance_s2(
        np.array([[2.0]]),
        np.array([0.01]),
        np.array([0.001]),
        np.array([1.0]),
        np.array([8.0]),
        np.array([100.0]),
    )
    np.testing.assert_allclose(got, [[0.016]])


def _spread(shrink: float) -> TpotSpread:
    dev = np.array([[-1e-3, 1e-3]])
    cdf = np.array([[0.5, 1.0]])
    table = np.array([[0.0, 0.5, 0.5, 1.0]])
    return TpotSpread(
        mean_s=np.array([0.01]),
        dev_s=dev,
        cdf=cdf,
        shrink=np.array([[shrink]]),
        inv_shrink=np.array([[1.0 / shrink]]),
        step_s=np.array([1e-3]),
        table=table,
    )


def test_amplified_spread_by_hand():
    sp = _spread(0.5)  # Var[D] = 1e-6 s^2, s^2 Var[D] = 2.5e-7
    # r = 1: the deviation enters twice
    g = amplified_spread(sp, np.array([[1.0]]))
    np.testing.assert_allclose(g.shrink * g.dev_s[:, -1:], [[1e-3]])  # 0.5 x 1e-3 x 2
    np.testing.assert_allclose(g.shrink, [[0.5]])  # the support scales by 2, the shrink stays <= 1
    np.testing.assert_allclose(g.dev_s, [[-2e-3, 2e-3]])
    # + Cov_A / T^2 = 6.25e-7: (1 + r)^2 + 2 x 6.25e-7 / 2.5e-7 = 4 + 5 = 9, factor 3
    g = amplified_spread(sp, np.array([[1.0]]), np.array([[6.25e-7]]))
    np.testing.assert_allclose(g.shrink * g.dev_s, [[-1.5e-3, 1.5e-3]])
    np.testing.assert_allclose(g.step_s, [3e-3])
    assert g.mean_s[0] == sp.mean_s[0]  # the mean is untouched
    # P(s D <= x) read through the table: 1.5 ms is the top of the scaled law, 1.4 ms below it
    np.testing.assert_allclose(g.shape_cdf(np.array([[1.5e-3]])), [[1.0]])
    np.testing.assert_allclose(g.shape_cdf(np.array([[1.4e-3]])), [[0.5]])


def test_amplified_spread_keeps_shrink_at_most_one_per_request():
    # two requests, factors 2 and 4: the support scales by 4, the shrinks by 1/2 and 1
    sp = _spread(0.5)
    sp2 = TpotSpread(
        sp.mean_s, sp.dev_s, sp.cdf, np.array([[0.5, 0.5]]), np.array([[2.0, 2.0]]), sp.step_s, sp.table
    )
    g = amplified_spread(sp2, np.array([[1.0, 3.0]]))
    np.testing.assert_allclose(g.shrink, [[0.25, 0.5]])
    np.testing.assert_allclose(g.shrink * g.dev_s[:, -1:], [[1e-3, 2e-3]])
