"""The token-full prefill steps that pass a waiting prompt (model.serving.full_steps, session 12): consecutive
full steps cut one FCFS sequence (Next-Fit), their length by composition, the s^J tilt of the steps that
pass, and the first free-up's mixture of leftover and fresh heads (model.queueing.bulk_wait, item 5)."""

from __future__ import annotations

import numpy as np
import pytest

from model.queueing.bulk_wait import _own_passes, _PooledTerms, bulk_wait, passing_step_s
from model.serving.full_steps import _segment_law, next_fit_segments

A = np.array


def _two_lengths() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """64 sampled prompts, half 3,000 (a) and half 6,000 (b) tokens, under an 8,192-token cap; alone times
    1.5 / 3 s with per-step parts F = 1 / 2 s (v = 0.5 / 1 s)."""
    u = np.repeat(A([3000.0, 6000.0]), 32)
    alone = np.repeat(A([1.5, 3.0]), 32)[None, :]
    fixed = np.repeat(A([1.0, 2.0]), 32)[None, :]
    return u, alone, fixed


def test_consecutive_full_steps_by_hand():
    """Next-Fit on the two lengths: a b head runs alone and the next prompt is a fresh head; an a head takes
    a second a (6,000 <= 8,192; then the next is fresh) or, with a b next, runs alone and leaves that b as
    the head. Heads: pi_a = pi_a / 4 + pi_b / 2, so pi_a = 0.4, pi_b = 0.6; steps (a, a) 0.2 (S = 1 + 2 x
    0.5 = 2 s), (a) 0.2 (1.5 s), (b) 0.6 (3 s): p_1 = 0.8, a_1 = 0.2 x 1.5 + 0.6 x 3 = 2.1 s, a_2 = 0.4 s
    (a fresh head: p_1 = 0.75, E[S_J] = 2.375 s). R_i from a head: an a prompt (room 5,192) fits one
    a ahead (0.4), none behind a b (0.6); a b prompt (room 2,192) none. Over 2,048 seeded segments:
    a_2 / p_2 = 2 s exactly, the rest within 0.04 or 5%."""
    u, alone, fixed = _two_lengths()
    counts, probs, room, per_f, per_v = _segment_law(u.tobytes(), 8192.0)
    np.testing.assert_array_equal(counts, [1.0, 2.0])
    assert probs[0] == pytest.approx(0.8, abs=0.04)
    a = fixed @ per_f + (alone - fixed) @ per_v
    assert a[0, 1] / probs[1] == pytest.approx(2.0, rel=1e-12)
    assert a[0, 0] / probs[0] == pytest.approx(2.1 / 0.8, rel=0.05)
    assert room[:32, 1].mean() == pytest.approx(0.4, abs=0.04)
    np.testing.assert_allclose(room[32:, 0], 1.0)


def test_segments_tile_the_sequence():
    """Each segment starts where the previous one ended and holds the most prompts that fit (>= 1)."""
    u = np.random.default_rng(3).integers(100, 9000, 200).astype(float)
    idx, heads, held = next_fit_segments(u, 8192.0)
    np.testing.assert_array_equal(heads[:, 1:], heads[:, :-1] + held[:, :-1])
    for d in range(0, idx.shape[0], 37):
        for h, j in zip(heads[d], held[d], strict=True):
            seq = u[idx[d, h : h + j + 1]]
            assert j == 1 or seq[:j].sum() <= 8192.0
            assert seq.sum() > 8192.0


def test_passing_step_tilt_by_hand():
    """a = (1.875, 0.5), p = (3/4, 1/4): g(1/2) = (1.875 x 1/2 + 0.5 x 1/4) / (3/4 x 1/2 + 1/4 x 1/4) =
    1.0625 / 0.4375 = 17/7 s; g(1) = E[S_J] = 2.375 s; g(0+) = a_1 / p_1 = 2.5 s (J = 1 steps only)."""
    a, counts, probs = A([[1.875, 0.5]] * 3), A([1.0, 2.0]), A([0.75, 0.25])
    g = passing_step_s(a, counts, probs, A([0.5, 1.0, 1e-12]))
    np.testing.assert_allclose(g, [17.0 / 7.0, 2.375, 2.5], rtol=1e-9)


def test_leftover_and_fresh_heads_by_hand():
    """After an overflow T = 1, R = 0; at a fresh head T = 2, R = 1; s = 1/2. w = E[s^(T + 1)]: 1/4 leftover,
    1/8 fresh, x = (1/8) / (1 - 1/4 + 1/8) = 1/7. psi = s ((6/7) s + (1/7) 1) = 2/7; omega_0 = s ((6/7)
    s^2 + (1/7) s) = 1/7; E[passes] = 2/7 + (1/7) x 1 / (1 - 1/2) = 4/7."""
    settled = (A([[1.0]]), A([[1.0]]), A([[1.0]]))
    fresh = (A([[2.0]]), A([[1.0]]), A([[0.0, 1.0]]))
    s = A([0.5])
    assert _own_passes(s, settled, fresh, first_only=True)[0, 0] == pytest.approx(2.0 / 7.0, rel=1e-12)
    assert _own_passes(s, settled, fresh)[0, 0] == pytest.approx(4.0 / 7.0, rel=1e-12)


def test_one_law_for_both_heads_is_item_four():
    """Six entries whose fresh law repeats the leftover one give the three-entry wait exactly."""
    counts, probs, room = A([1.0, 2.0]), A([0.75, 0.25]), A([[0.5, 0.5], [1.0, 0.0]])
    args = (A([0.3]), A([1.0]), A([0.5]), A([1.0]))
    three = bulk_wait(*args, (counts, probs, room), A([[1.2, 0.4]]), A([0.5]))
    six = bulk_wait(
        *args, (counts, probs, room, counts.copy(), probs.copy(), room.copy()), A([[1.2, 0.4]]), A([0.5])
    )
    assert six.cond_mean_s[0] == pytest.approx(three.cond_mean_s[0], rel=1e-12)
    np.testing.assert_allclose(six.own_scale, three.own_scale, rtol=1e-12)


def test_flat_step_times_give_the_constant_law():
    """a_j = g p_j (every full step g = 2 s whatever its J) is the constant law: the same wait as
    ``full_step_s`` = 2 s (test_bulk_wait.test_full_steps_space_the_passes: m = 2 s at 0.25 req/s)."""
    counts, probs = A([1.0]), A([1.0])
    args = (A([0.25]), A([1.0]), A([1.0]), A([1.0]), (counts, probs))
    flat = bulk_wait(*args, A([2.0]), A([0.25]))
    tilted = bulk_wait(*args, A([[2.0]]), A([0.25]))
    assert flat.cond_mean_s[0] == pytest.approx(2.0, rel=1e-9)
    assert tilted.cond_mean_s[0] == pytest.approx(2.0, rel=1e-9)
    assert tilted.full_s[0] == pytest.approx(2.0, rel=1e-12)


def test_pooled_table_matches_the_laws():
    """The root search's table of powers (bulk_wait._PooledTerms) gives the pooled passes of _own_passes
    and g(s) of passing_step_s at any s (a speed device: the same polynomials)."""
    rng = np.random.default_rng(1)
    settled = (A([[1.0, 2.0, 4.0]]), A([[0.5, 0.3, 0.2]]), A([[0.6, 0.3, 0.1]]))
    fresh = (A([[2.0, 3.0]]), A([[0.4, 0.6]]), A([[0.2, 0.5, 0.2, 0.1]]))
    a = rng.uniform(0.1, 1.0, (4, 3))
    s = A([1e-6, 0.3, 0.7, 0.95])
    n = A([1.0, 2.0, 3.0, 8.0])
    steps, g, early = _PooledTerms.build((settled, fresh), a)(s, n)
    np.testing.assert_allclose(steps, _own_passes(s, settled, fresh)[:, 0], rtol=1e-12)
    _, own_early = _own_passes(s, settled, fresh, servers=n)
    np.testing.assert_allclose(early, own_early[:, 0], rtol=1e-12)
    assert early[0] == 0.0 and np.all(early <= steps)
    np.testing.assert_allclose(g, passing_step_s(a, settled[0], settled[1], s), rtol=1e-12)
