"""One prefill instance: a waiting prompt waits out the step in progress, a residual bounded by the
step, unless a free-up passes it (model.queueing.disaggregated_terms, "One instance"). Hand-derived
values on deterministic steps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from model.queueing.disaggregated_terms import PackedStep


def A(x):
    return np.asarray(x, dtype=float)


def one(rate: float, v: float, room: float, step: float, passed: float) -> PackedStep:
    """One candidate, one sampled request, on one instance with step length ``step``."""
    return PackedStep(A([rate]), A([v]), A([[room]]), A([[0.0]]), A([step]), A([passed]))


def test_unpassed_wait_is_bounded_by_the_step():
    """Deterministic steps of D = 1 s, nothing packed (room 0): a Poisson arrival that finds the step
    in progress waits its residual, uniform on [0, D] (Kleinrock 1975, vol. 1, sec. 5.2: density
    (1 - F(r)) / E[S] = 1 / D on [0, D]). So P(W <= 0.25 | W > 0) = 0.25, and the wait is bounded by
    the step: P(W <= 1) = P(W <= 1.5) = 1 (the exponential law of the same mean 1/2 gives 1 - e^-2 =
    0.865 and 1 - e^-3 = 0.950)."""
    p = one(rate=0.5, v=0.3, room=0.0, step=1.0, passed=0.0)
    got = p.unpassed_cdf(A([[0.25, 1.0, 1.5, -0.1]]), A([1.0]))[0]
    assert got == pytest.approx([0.25, 1.0, 1.0, 0.0], abs=1e-12)
    # through the mixture with psi = 0 and m = D / 2
    assert p.waiting_cdf(A([[0.25, 1.0]]), A([0.5]))[0] == pytest.approx([0.25, 1.0], abs=1e-12)


def test_unpassed_packed_by_hand():
    """D = 1 s, lambda = 0.5 req/s, E[v] = 0.3 s, room for one more prompt. The prompts in its step are
    the others that arrived during the step in progress, K ~ Poisson(lambda D) = Poisson(0.5),
    independent of the residual R (given the step's length the arrival's position in it is uniform).
    P(R + 0.3 min(K, 1) <= 0.8) = e^-0.5 x 0.8 + (1 - e^-0.5) x 0.5 = 0.681965..."""
    p = one(rate=0.5, v=0.3, room=1.0, step=1.0, passed=0.0)
    by_hand = math.exp(-0.5) * 0.8 + (1.0 - math.exp(-0.5)) * 0.5
    assert p.unpassed_cdf(A([[0.8]]), A([1.0]))[0, 0] == pytest.approx(by_hand, rel=1e-12)
    # room for two: P(K = 0) 0.8 + P(K = 1) 0.5 + P(K >= 2) 0.2
    p2 = one(rate=0.5, v=0.3, room=2.0, step=1.0, passed=0.0)
    e = math.exp(-0.5)
    by_hand2 = e * 0.8 + 0.5 * e * 0.5 + (1.0 - e - 0.5 * e) * 0.2
    assert p2.unpassed_cdf(A([[0.8]]), A([1.0]))[0, 0] == pytest.approx(by_hand2, rel=1e-12)


def test_passed_prompts_carry_the_tail_and_the_mean_is_kept():
    """D = 1 s, psi = 0.1, E[W | W > 0] = m = 0.6 s, room 0. Unpassed (0.9): uniform on [0, 1];
    passed (0.1): exponential of mean m_p = D / 2 + (m - D / 2) / psi = 0.5 + 0.1 / 0.1 = 1.5 s, so the
    mixture's mean is 0.9 x 0.5 + 0.1 x 1.5 = 0.6 = m. P(W > 2 | W > 0) = 0.1 e^(-2 / 1.5);
    P(W <= 0.25 | W > 0) = 0.9 x 0.25 + 0.1 (1 - e^(-0.25 / 1.5))."""
    p = one(rate=0.5, v=0.3, room=0.0, step=1.0, passed=0.1)
    got = p.waiting_cdf(A([[0.25, 2.0]]), A([0.6]))[0]
    assert got[0] == pytest.approx(0.9 * 0.25 + 0.1 * (1.0 - math.exp(-0.25 / 1.5)), rel=1e-12)
    assert 1.0 - got[1] == pytest.approx(0.1 * math.exp(-2.0 / 1.5), rel=1e-9)
    y = np.linspace(0.0, 40.0, 400_001)
    tail = 1.0 - p.waiting_cdf(y[None, :], A([0.6]))[0]
    assert np.trapezoid(tail, y) == pytest.approx(0.6, rel=1e-4)


def test_several_instances_keep_the_exponential_law():
    """step_len_s = 0 (n_p >= 2): the exponential law of mean m as before (room 0: 1 - e^(-y / m))."""
    p = one(rate=0.5, v=0.3, room=0.0, step=0.0, passed=0.3)
    assert p.waiting_cdf(A([[0.2]]), A([0.1]))[0, 0] == pytest.approx(1.0 - math.exp(-2.0), rel=1e-12)
