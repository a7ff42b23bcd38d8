"""Session-cache hits per level of the live sessions' footprint, a slow environment of the prefill
queue (its whole-history misses come in bursts; model.queueing.environment).

The footprint F(G) of the histories referenced within a turn's gap G
(model.workload.sessions.history_hit_probability) has a slow and a fast part. A live session (one
with a turn still to come) holds its current history H_j and is in F(G) iff its last turn came
within G: between its turns (gaps G' = its answer's streaming + Exp(theta)) that has probability
q_j(G) = E[min(G', G)] / E[G'], the backward recurrence time's law of a renewal process (Kleinrock,
"Queueing Systems" vol. 1, 1975, sec. 5.2). So given the live set L,
E[F(G) | L] = Y(G) + (the ended sessions' part), Y(G) = sum_j q_j(G) H_j, and what is left is the
fast noise of where each session is in its gap and of the sessions just ended. The live set changes
only as sessions start and end (a session lives tens of gaps: minutes for the agentic preset, where
the prefill queue relaxes in seconds), so Y is the slow environment. The live sessions are a Poisson
population (sessions start as a Poisson process, an M/G/infinity system: Kleinrock 1975, vol. 1,
sec. 4.4), each turn with a successor live for its whole gap G', so by Campbell's theorem (Kingman,
"Poisson Processes", 1993, sec. 3.2) Y(G) has mean lambda E[S D(G); live] and variance
lambda E[S^2 D(G)^2 / E[G']; live] (D(G) = E[min(G', G)] = q E[G'];
model.workload.sessions.footprint_moments), and the fast part F(G) - Y(G) the rest of F's mean and
variance (by the law of total variance; gamma-distributed as F is).

Levels: K equiprobable strata of Y's law, at the same quantile for every G (one live set makes every
Y(G)), each averaged over LEVEL_POINTS midpoint quantiles u; Y(G) at u by the Wilson-Hilferty
gamma quantile (Wilson and Hilferty, "The distribution of chi-square", PNAS 17, 1931:
Q(u) = a b (1 - 1 / (9 a) + z / (3 sqrt(a)))^3, z = Phi^-1(u), a = mean^2 / var, b = var / mean);
given u a turn finds its history with probability E_G[P(F_fast(G) <= C - S_sys - Y_u(G))].
Without live sessions (one-turn sessions) every level is the same and equals the marginal law.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammainc, ndtri

from model.workload.sessions import SessionShape, footprint_moments

__all__ = ["LEVEL_POINTS", "history_hit_levels"]

LEVEL_POINTS = 4
"""Midpoint quantiles of the slow footprint's law per level (a quadrature of the stratum's mean hit
probability; not fitted)."""


def history_hit_levels(
    shape: SessionShape,
    rate_per_instance_rps: np.ndarray,
    capacity_tokens: np.ndarray,
    holds_output: bool,
    levels: int,
) -> np.ndarray:
    """P(a turn finds its history | the live footprint's level) [..., levels], lowest footprint
    first, 1 at a rate of 0 (module docstring)."""
    lam, cap = np.broadcast_arrays(
        np.asarray(rate_per_instance_rps, dtype=float), np.asarray(capacity_tokens, dtype=float)
    )
    m1, m2, y1, y2 = footprint_moments(shape, holds_output)
    sys_cached = float((shape.system_tokens // shape.block_tokens) * shape.block_tokens)
    room = (cap - sys_cached)[..., None, None]
    rate = lam[..., None, None]
    n = int(levels) * LEVEL_POINTS
    z = ndtri((np.arange(n) + 0.5) / n)[:, None]  # [n, 1], lowest footprint first
    y_mean, y_var = rate * y1, np.maximum(rate * y2, 1e-300)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv9a = np.where(y_mean > 0, y_var / (9.0 * y_mean * y_mean), 0.0)
        y = np.maximum(y_mean * (1.0 - inv9a + z * np.sqrt(inv9a)) ** 3, 0.0)  # [..., n, G]
    f_mean, f_var = rate * np.maximum(m1 - y1, 0.0), np.maximum(rate * (m2 - y2), 1e-300)
    left = room - y
    with np.errstate(divide="ignore", invalid="ignore"):
        fast = gammainc(f_mean * f_mean / f_var, np.maximum(left, 0.0) * f_mean / f_var)
    p = np.where(f_mean > 0, fast, 1.0)
    p = np.where(left > 0, p, 0.0)
    s = p.mean(axis=-1).reshape(*lam.shape, int(levels), LEVEL_POINTS).mean(axis=-1)
    return np.where(lam[..., None] > 0, s, 1.0)
