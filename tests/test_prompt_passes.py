"""Per-prompt passes of the disaggregated prefill queue (model.queueing.bulk_wait, item 4;
model.serving.packing.prompt_room_law): a long prompt has less room beside the prompts ahead of it and is
passed more often. Hand-derived: two prompt lengths, a cap that fits one long prompt or two short ones."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from model.queueing.bulk_wait import bulk_wait
from model.queueing.disaggregated_terms import PackedStep
from model.serving.packing import FILL_DRAWS, _full_law, _room_law

A = np.array
SHORT, LONG, CAP = 1000.0, 2000.0, 2500.0  # one long fits; long + short and three short do not
# By hand, the prompts ahead drawn half short, half long. A short prompt has room 1,500 beside it: one
# prompt ahead fits iff it is short, two never (2,000 > 1,500), so R_short = 1 or 0 with 1/2 each. A long
# prompt has room 500: R_long = 0. A full take T: a long head runs alone (T = 1); a short head takes a
# short second (T = 2, then 3,000 > 2,500) but not a long one (T = 1): T = 2 with 1/4, 1 with 3/4.
ROOM_LAW = A([[0.5, 0.5], [1.0, 0.0]])  # rows: short, long; columns P(R = 0), P(R = 1)
T_LAW = (A([1.0, 2.0]), A([0.75, 0.25]))


def test_room_law_by_hand():
    """The sampled law matches the hand one (the long prompt exactly; the short one's P(R = 1) = 1/2 within
    five binomial standard errors of FILL_DRAWS draws) and T's law too; R_i <= T draw by draw."""
    u = A([SHORT, LONG])
    law = _room_law(u.tobytes(), CAP)
    assert law[1].tolist()[:1] == [1.0] and law[1, 1:].sum() == 0.0
    se = math.sqrt(0.25 / FILL_DRAWS)
    assert law[0, 1] == pytest.approx(0.5, abs=5 * se) and law[0, 0] + law[0, 1] == pytest.approx(1.0)
    counts, probs = _full_law(u.tobytes(), CAP)
    assert counts.tolist() == [1.0, 2.0] and probs[1] == pytest.approx(
        0.25, abs=5 * math.sqrt(0.1875 / FILL_DRAWS)
    )


def _passes(s: float) -> tuple[float, float]:
    """E[free-ups passing] (short, long) by hand: psi_i + omega_0 phi_i / (1 - omega) with psi = E[s^(R + 1)],
    phi = E[s^R], omega = E[s^T] = 3 s / 4 + s^2 / 4, omega_0 = E[s^(T + 1)]."""
    om, om0 = 0.75 * s + 0.25 * s**2, 0.75 * s**2 + 0.25 * s**3
    phi_s, phi_l = 0.5 + 0.5 * s, 1.0
    return s * phi_s + om0 * phi_s / (1.0 - om), s * phi_l + om0 * phi_l / (1.0 - om)


def _two_lengths(lam: float):
    """One instance, deterministic 1 s steps (first free-up 0.5 s), full steps of 1 s, at ``lam``."""
    full = (*T_LAW, ROOM_LAW)
    return bulk_wait(A([lam]), A([1.0]), A([0.0]), A([1.0]), full, A([1.0]), A([lam]))


def test_two_lengths_by_hand():
    """m solves s / (1 - s) / lambda = 0.5 + (E_short + E_long) / 2 (the pool's mean over the prompts);
    prompt i's own wait m_i = 0.5 + E_i, its chance to be passed psi_i = E[s^(R_i + 1)] and the passes given
    one E_i / psi_i (one free-up every 1 s)."""
    lam = 0.6
    s = brentq(lambda x: 0.5 + 0.5 * sum(_passes(x)) - x / (1.0 - x) / lam, 1e-9, 1.0 - 1e-9, xtol=1e-14)
    e_short, e_long = _passes(s)
    m = s / (1.0 - s) / lam
    w = _two_lengths(lam)
    assert w.cond_mean_s[0] == pytest.approx(m, rel=1e-9)
    assert w.own_scale[0].tolist() == pytest.approx([(0.5 + e_short) / m, (0.5 + e_long) / m], rel=1e-9)
    assert w.own_passed[0].tolist() == pytest.approx([0.5 * (s + s * s), s], rel=1e-9)
    assert w.own_pass_s[0, 1] == pytest.approx(e_long / s, rel=1e-9)
    assert e_long > e_short and w.own_scale[0, 1] > 1.0 > w.own_scale[0, 0]  # the long prompt waits longer


def test_room_of_a_full_step_less_one_is_the_population_law():
    """R_i = J - 1 for every prompt with J fixed: psi_i = s^J, phi_i = s^(J - 1), omega = s^J, omega_0 =
    s^(J + 1), so E_i = s^J + s^(2 J) / (1 - s^J) = s^J / (1 - s^J), the population law (item 2); J = 2 on
    deterministic 1 s steps at 1 req/s is tests/test_bulk_wait.py's m = 1 / sqrt(2) s; J = 1 (R = 0) the
    M/D/1 wait 1 s at 0.5 req/s."""
    two = bulk_wait(
        A([1.0]), A([1.0]), A([0.0]), A([1.0]), (A([2.0]), A([1.0]), A([[0.0, 1.0]])), A([1.0]), A([1.0])
    )
    assert two.cond_mean_s[0] == pytest.approx(1.0 / math.sqrt(2.0), rel=1e-9)
    assert two.own_scale[0, 0] == pytest.approx(1.0, rel=1e-12)
    one = bulk_wait(
        A([0.5]), A([1.0]), A([0.0]), A([1.0]), (A([1.0]), A([1.0]), A([[1.0]])), A([1.0]), A([0.5])
    )
    assert one.cond_mean_s[0] == pytest.approx(1.0, rel=1e-9)


def test_per_prompt_wait_enters_the_packed_step_and_the_bounds_bracket_it():
    """PackedStep reads prompt i's wait m x own_scale: with no packing room the one-instance mixture's mean
    P(W > y) integrated over y is m_i per prompt (E[W] = integral of the tail), and the floor / ceiling
    still bracket the law."""
    w = _two_lengths(0.6)
    half = 0.5
    p = PackedStep(
        A([0.6]),
        A([0.1]),
        A([[0.0, 0.0]]),
        A([[0.0, 0.0]]),
        A([2.0 * half]),
        w.own_pass_s,
        A([0.0]),
        A([1.0]),
        w.own_scale,
    )
    y = np.linspace(0.0, 60.0, 120001)
    cdf = np.stack([p.waiting_cdf(np.full((1, 2), t), w.cond_mean_s)[0] for t in y[::100]])
    tail_mean = (1.0 - cdf).sum(axis=0) * (y[100] - y[0])  # Riemann sum of the tail, step 0.05 s
    want = w.cond_mean_s[0] * w.own_scale[0]
    assert tail_mean == pytest.approx(want, rel=0.04)
    packed = PackedStep(
        A([0.6]),
        A([0.1]),
        A([[2.0, 1.0]]),
        A([[0.0, 0.0]]),
        A([1.0]),
        w.own_pass_s,
        A([0.0]),
        A([1.0]),
        w.own_scale,
    )
    ys = A([[0.3, 0.3], [0.9, 0.9], [1.7, 1.7], [3.0, 3.0]])
    for row in ys:
        yy = row[None, :]
        exact = packed.waiting_cdf(yy, w.cond_mean_s)
        assert np.all(packed.waiting_floor(yy, w.cond_mean_s) <= exact + 1e-12)
        assert np.all(exact <= packed.waiting_ceiling(yy, w.cond_mean_s) + 1e-12)
