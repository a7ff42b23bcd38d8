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


def one(rate: float, v: float, room: float, step: float, pass_s: float, full: float = 0.0) -> PackedStep:
    """One candidate, one sampled request, on one instance: deterministic steps of length ``step``
    (c_S^2 = 0), the passes' mean ``pass_s`` given one, full steps of ``full``."""
    return PackedStep(A([rate]), A([v]), A([[room]]), A([[0.0]]), A([step]), A([pass_s]), A([0.0]), A([full]))


def test_unpassed_wait_is_bounded_by_the_step():
    """Deterministic steps of D = 1 s, nothing packed (room 0): a Poisson arrival that finds the step
    in progress waits its residual, uniform on [0, D] (Kleinrock 1975, vol. 1, sec. 5.2: density
    (1 - F(r)) / E[S] = 1 / D on [0, D]). So P(W <= 0.25 | W > 0) = 0.25, and the wait is bounded by
    the step: P(W <= 1) = P(W <= 1.5) = 1 (the exponential law of the same mean 1/2 gives 1 - e^-2 =
    0.865 and 1 - e^-3 = 0.950)."""
    p = one(rate=0.5, v=0.3, room=0.0, step=1.0, pass_s=1.0)
    got = p.unpassed_cdf(A([[0.25, 1.0, 1.5, -0.1]]), A([1.0]))[0]
    assert got == pytest.approx([0.25, 1.0, 1.0, 0.0], abs=1e-12)
    # through the mixture with psi = 0 and m = D / 2
    assert p.waiting_cdf(A([[0.25, 1.0]]), A([0.5]))[0] == pytest.approx([0.25, 1.0], abs=1e-12)


def test_unpassed_packed_by_hand():
    """D = 1 s, lambda = 0.5 req/s, E[v] = 0.3 s, room for one more prompt. The prompts in its step are
    the others that arrived during the step in progress, K ~ Poisson(lambda D) = Poisson(0.5),
    independent of the residual R (given the step's length the arrival's position in it is uniform).
    P(R + 0.3 min(K, 1) <= 0.8) = e^-0.5 x 0.8 + (1 - e^-0.5) x 0.5 = 0.681965..."""
    p = one(rate=0.5, v=0.3, room=1.0, step=1.0, pass_s=1.0)
    by_hand = math.exp(-0.5) * 0.8 + (1.0 - math.exp(-0.5)) * 0.5
    assert p.unpassed_cdf(A([[0.8]]), A([1.0]))[0, 0] == pytest.approx(by_hand, rel=1e-12)
    # room for two: P(K = 0) 0.8 + P(K = 1) 0.5 + P(K >= 2) 0.2
    p2 = one(rate=0.5, v=0.3, room=2.0, step=1.0, pass_s=1.0)
    e = math.exp(-0.5)
    by_hand2 = e * 0.8 + 0.5 * e * 0.5 + (1.0 - e - 0.5 * e) * 0.2
    assert p2.unpassed_cdf(A([[0.8]]), A([1.0]))[0, 0] == pytest.approx(by_hand2, rel=1e-12)


def test_passed_prompts_carry_the_tail_and_the_mean_is_kept():
    """D = 1 s, full steps g_J = 0.9 s and psi = 0.1, so the passes given one take G = g_J / (1 - psi) =
    1 s and bulk_wait's mean is m = D / 2 + g_J psi / (1 - psi) = 0.6 s; room 0. Unpassed (1 - psi =
    0.9): uniform on [0, 1]; passed (0.1 = (m - D / 2) / G): the first full step 0.9 s, then an
    exponential of mean m_p - 0.9 = 0.6 s (m_p = D / 2 + G = 1.5 s); the mixture's mean 0.9 x 0.5 + 0.1
    x 1.5 = 0.6 = m. P(W > 2 | W > 0) = 0.1 e^(-(2 - 0.9) / 0.6); P(W <= 0.25 | W > 0) = 0.9 x 0.25 (no
    passed prompt waits less than a full step); P(W <= 1 | W > 0) = 0.9 + 0.1 (1 - e^(-0.1 / 0.6))."""
    p = one(rate=0.5, v=0.3, room=0.0, step=1.0, pass_s=1.0, full=0.9)
    got = p.waiting_cdf(A([[0.25, 2.0, 1.0]]), A([0.6]))[0]
    assert got[0] == pytest.approx(0.9 * 0.25, rel=1e-12)
    assert 1.0 - got[1] == pytest.approx(0.1 * math.exp(-1.1 / 0.6), rel=1e-9)
    assert got[2] == pytest.approx(0.9 + 0.1 * (1.0 - math.exp(-0.1 / 0.6)), rel=1e-12)
    y = np.linspace(0.0, 40.0, 400_001)
    tail = 1.0 - p.waiting_cdf(y[None, :], A([0.6]))[0]
    assert np.trapezoid(tail, y) == pytest.approx(0.6, rel=1e-4)


def test_several_instances_keep_the_exponential_law():
    """step_len_s = 0 (n_p >= 2): the exponential law of mean m as before (room 0: 1 - e^(-y / m))."""
    p = one(rate=0.5, v=0.3, room=0.0, step=0.0, pass_s=0.3)
    assert p.waiting_cdf(A([[0.2]]), A([0.1]))[0, 0] == pytest.approx(1.0 - math.exp(-2.0), rel=1e-12)


def test_bursty_arrivals_weight_the_passed_branch():
    """Kingman's factor lengthens m past the Poisson fixed point: D = 1 s, G = 1 s, m = 1.3 s gives the
    passed branch the weight (1.3 - 0.5) / 1 = 0.8 (mean 0.2 x 0.5 + 0.8 x 1.5 = 1.3; full steps 0.9 s:
    P(W <= 1.2) = 0.2 + 0.8 (1 - e^(-0.3 / 0.6))); m = 2 s (the passes alone 1.5 s > G) is the
    unshifted exponential law of mean 2 s."""
    p = one(rate=0.5, v=0.3, room=0.0, step=1.0, pass_s=1.0, full=0.9)
    got = p.waiting_cdf(A([[1.2]]), A([1.3]))[0, 0]
    assert got == pytest.approx(0.2 + 0.8 * (1.0 - math.exp(-0.3 / 0.6)), rel=1e-12)
    assert p.waiting_cdf(A([[0.25]]), A([2.0]))[0, 0] == pytest.approx(1.0 - math.exp(-0.125), rel=1e-12)


def test_bounds_bracket_the_one_instance_law():
    """The planner decides clear rows on PackedStep.waiting_floor / waiting_ceiling (model.serving.common):
    on one instance they must bracket the mixture law too. D = 1 s, psi = 0.1 (as above), room for two
    prompts of E[v] = 0.3 s: the ceiling is the wait alone, P(W <= y) (0.9 x y on [0, 0.9), nothing
    packed), the floor the wait at y - 0.6 (both packed prompts in the step)."""
    p = one(rate=0.5, v=0.3, room=2.0, step=1.0, pass_s=1.0, full=0.9)
    y = A([[-0.1, 0.1, 0.5, 0.8, 1.2, 2.0, 4.0]])
    m = A([0.6])
    exact, lo, hi = p.waiting_cdf(y, m), p.waiting_floor(y, m), p.waiting_ceiling(y, m)
    assert np.all(lo <= exact + 1e-12) and np.all(exact <= hi + 1e-12)
    assert hi[0, 2] == pytest.approx(0.9 * 0.5, abs=1e-12)  # the wait alone, unpassed branch
    assert lo[0, 1] == 0.0 and lo[0, 3] == pytest.approx(0.9 * 0.2, abs=1e-12)  # y - 0.6 = 0.2
