"""The token-full prefill steps that pass a waiting prompt (model.serving.full_steps, session 12): their
length by composition, draw by draw, and the s^J tilt of the steps that pass (model.queueing.bulk_wait)."""

from __future__ import annotations

import numpy as np
import pytest

from model.queueing.bulk_wait import bulk_wait, passing_step_s
from model.serving.full_steps import _step_weights, draw_indices
from model.serving.packing import _draw_sums, _full_law

A = np.array


def _two_lengths() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """64 sampled prompts, half 3,000 and half 6,000 tokens, under an 8,192-token cap; alone times 1.5 /
    3 s with per-step parts F = 1 / 2 s (v = 0.5 / 1 s)."""
    u = np.repeat(A([3000.0, 6000.0]), 32)
    alone = np.repeat(A([1.5, 3.0]), 32)[None, :]
    fixed = np.repeat(A([1.0, 2.0]), 32)[None, :]
    return u, alone, fixed


def test_full_step_by_composition_by_hand():
    """A 6,000-token head runs alone (J = 1, probability 1/2, S = 3 s); a 3,000-token head takes a second
    3,000 (6,000 <= 8,192; J = 2, probability 1/4, S = F-bar 1 + 2 x 0.5 = 2 s) but not a 6,000 (J = 1,
    probability 1/4, S = 1.5 s): a_1 = 1/2 x 3 + 1/4 x 1.5 = 1.875 s, a_2 = 1/4 x 2 = 0.5 s, E[S_J] =
    2.375 s (F-bar + v-bar E[J] = 1.5 + 0.75 x 1.25 = 2.4375 s). Over the 512 seeded draws (J = 2 in
    a share p_2 near 1/4): a_2 / p_2 = 2 s exactly (every J = 2 step is two 3,000s), a_1 / p_1 = 2.5 s
    and E[S_J] within 5%."""
    u, alone, fixed = _two_lengths()
    counts, probs = _full_law(u.tobytes(), 8192.0)
    np.testing.assert_array_equal(counts, [1.0, 2.0])
    per_f, per_v = _step_weights(u.tobytes(), 8192.0, counts.tobytes())
    a = fixed @ per_f + (alone - fixed) @ per_v
    assert a[0, 1] / probs[1] == pytest.approx(2.0, rel=1e-12)
    assert a[0, 0] / probs[0] == pytest.approx(2.5, rel=0.05)
    assert a.sum() == pytest.approx(2.375, rel=0.05)


def test_draws_are_the_packing_draws():
    """The index draws give exactly model.serving.packing's prefix sums (the same steps as J's law)."""
    u, _, _ = _two_lengths()
    u = u + np.arange(64.0)  # distinct lengths: an index mix-up would show
    np.testing.assert_array_equal(
        np.cumsum(u[draw_indices(u.tobytes(), 8192.0)], axis=1), _draw_sums(u.tobytes(), 8192.0)
    )


def test_passing_step_tilt_by_hand():
    """a = (1.875, 0.5), p = (3/4, 1/4): g(1/2) = (1.875 x 1/2 + 0.5 x 1/4) / (3/4 x 1/2 + 1/4 x 1/4) =
    1.0625 / 0.4375 = 17/7 s; g(1) = E[S_J] = 2.375 s; g(0+) = a_1 / p_1 = 2.5 s (J = 1 steps only)."""
    a, counts, probs = A([[1.875, 0.5]] * 3), A([1.0, 2.0]), A([0.75, 0.25])
    g = passing_step_s(a, counts, probs, A([0.5, 1.0, 1e-12]))
    np.testing.assert_allclose(g, [17.0 / 7.0, 2.375, 2.5], rtol=1e-9)


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
