"""The chunked replicas' prefill busy period behind a levelling router (model.queueing.routing
.chunked_follow_on_load and model.queueing.mixed_share.alternation's ``follow_on``;
docs/session13/chov16.md)."""

from __future__ import annotations

import numpy as np
import pytest

from model.hardware.engines import Router
from model.queueing.mixed_share import alternation, mixed_share
from model.queueing.routing import chunked_follow_on_load, follow_on_load

LEAST = Router("least-loaded", 4.0)


def test_chunked_follow_on_load_by_hand():
    """u_v = min(u, u (delta + (1 - delta) / R) / (1 - u (1 - delta))) behind a levelling router.
    (a) u = 0.5, delta = 0, R = 4: 0.5 x 0.25 / 0.5 = 0.25 (the prefill-first law, u / (R (1 - u)));
    (b) u = 0.5, delta = 0.5, R = 4: 0.5 x 0.625 / 0.75 = 5 / 12;
    (c) u = 0.2, delta = 0.25, R = 8: 0.2 x (0.25 + 0.09375) / 0.85 = 0.06875 / 0.85 = 0.0808824;
    (d) u = 0.5, delta = 0.5, R = 2: 0.5 x 0.75 / 0.75 = 0.5 (the cap: no thinning);
    (e) R = 1: u = 0.3 kept (the fleet's Poisson arrivals)."""
    u = np.array([0.5, 0.5, 0.2, 0.5, 0.3])
    delta = np.array([0.0, 0.5, 0.25, 0.5, 0.2])
    r = np.array([4.0, 4.0, 8.0, 2.0, 1.0])
    got = chunked_follow_on_load(LEAST, u, delta, r)
    assert got.tolist() == pytest.approx([0.25, 5.0 / 12.0, 0.06875 / 0.85, 0.5, 0.3])
    # delta = 0 is the prefill-first law of follow_on_load
    assert got[0] == pytest.approx(follow_on_load(LEAST, u[:1], u[:1], r[:1])[0])
    for name in ("random", "round-robin"):
        assert chunked_follow_on_load(Router(name), u, delta, r).tolist() == pytest.approx(u.tolist())


def test_thinned_alternation_by_hand():
    """lambda_r = 1 /s, exponential shares E[S] = 0.5 s (E[S^2] = 0.5 s^2), T_dec = T_mix = 0.1 s, so
    u = 0.5 (tests/test_mixed_share.py: theta = 10 iterations at u_v = u). At u_v = 0.25: the busy
    period E[B] = 0.5 / 0.75 = 2/3 s = 20/3 iterations, E[B^2] = 0.5 / 0.75^3 = 32/27 s^2 = 3200/27
    it^2; the idle period E[B] (1 - u) / u = 20/3 iterations; Fbar = 1/2 (unchanged); theta =
    m_I E[B^2] / (2 (m_B + m_I) m_B) = 3200/27 / (80/3) = 40/9 iterations; the start keeps u = 0.5."""
    rate, moments, t = np.array([1.0]), (np.array([0.5]), np.array([0.5])), (np.array([0.1]), np.array([0.1]))
    plain = alternation(rate, moments, *t)
    thin = alternation(rate, moments, *t, lambda u: 0.5 * u)
    assert plain.theta[0] == pytest.approx(10.0)
    assert thin.fbar[0] == pytest.approx(0.5)
    assert thin.u[0] == pytest.approx(0.5)  # the start keeps u (the variance only moves)
    assert thin.theta[0] == pytest.approx(40.0 / 9.0)
    # a follow-on load above u is capped at u: the Poisson alternation
    same = alternation(rate, moments, *t, lambda u: 2.0 * u)
    assert same.theta[0] == pytest.approx(10.0)
    assert same.u[0] == pytest.approx(0.5)
    # the window's variance falls with theta, its long-window mean stays Fbar
    n = np.array([[1e5]])
    m_plain, a_p, b_p, _ = mixed_share(plain, n)
    m_thin, a_t, b_t, _ = mixed_share(thin, n)
    assert m_thin[0, 0] == pytest.approx(0.5, abs=1e-4)
    var = [m * (1 - m) / (a + b + 1) for m, a, b in ((m_plain, a_p, b_p), (m_thin, a_t, b_t))]
    # long windows: Var = Fbar (1 - Fbar) 2 theta / n, ratio (40/9) / 10
    assert (var[1] / var[0])[0, 0] == pytest.approx(4.0 / 9.0, rel=1e-3)
