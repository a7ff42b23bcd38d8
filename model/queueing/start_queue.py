"""The prompts queued at a chunked request's first token: a second common cause of its mixed share F
and its batch (issue 17, session 14; derived in docs/session14/chov14.md).

model.queueing.mixed_share takes F and the request's window-average batch correlated through the
prompts N that reach the replica DURING the window (corr r = rho_D rho_F, the law of total
covariance with E[Cov[D, F | N]] = 0). That leaves out the prompts already on the replica at the
window's start that have not prefilled yet: under FCFS chunked prefill (Sarathi-Serve, Agrawal et al.
OSDI 2024, sec. 4.2) the Q prompts that arrived during the request's own wait W and prefill S are
all behind it at its first token. Each then runs its prefill's mixed iterations at the window's start
(raising F) and joins the batch right after (raising the batch): Q is independent of N (Poisson
arrivals in disjoint intervals; Kingman 1993, ch. 2) and both F and the batch are linear in it, so
the law of total covariance adds Cov_Q = Var[Q] a_F a_D, with

- Q Poisson given the request's sojourn W + S (arrivals at lambda), W and S independent (FCFS):
  E[Q] = lambda (E[W] + E[S]) (the M/G/1 number a departure leaves behind, = L by Little and level
  crossing; Kleinrock 1975, vol. 1, sec. 5.6), Var[Q] = E[Q] + lambda^2 (Var[W] + Var[S]) (law of
  total variance of a mixed Poisson count; Feller vol. 1, sec. XII.1); W = 0 w.p. 1 - P and
  exponential of mean m w.p. P (the planner's wait law, model.serving.common.wait_tail), so
  Var[W] = P m^2 (2 - P);
- a_F = min(p, n) / n: each queued prompt's p = E[S] / T_mix mixed iterations in the window of n
  iterations (they run first, at its start);
- a_D = E[min(O', (T - p e)+)] / T: the window share a member of output O' decodes beside the
  request once it joins, after its own p mixed iterations (e tokens each; window T = O - 1 tokens;
  the others' outputs the sample's quantiles).

The same delay applies to the N prompts arriving during the window: one arriving with u tokens of
the window left joins after its d = p e tokens of prefill and covers min((u - d)+, O'), so its
coverage is c_p = E[int_0^(T-d)+ min(v, O') dv] / T^2 = H((T - d)+) / T^2 in place of
model.queueing.overlap.arrival_correlation's c = H(T) / T^2 (H the integral of G(L) = E[min(O', L)],
a_D = G((T - d)+) / T; both tabulated once per output sample). With the M/G/inf window average's sd
c sqrt(mu) / rho_D (arrival_correlation: Cov[D, N] = c mu undelayed, mu = E[N]; the delay shifts the
joins, not the stationary count) and the N term's Cov[F, N] = b mu
(model.queueing.mixed_share.arrival_share_correlation), the whole correlation is

    r = rho_D rho_F (c_p + Var[Q] a_F a_D / (b mu)) / c,

the same thinning sqrt(p) for R > 1 (Q, like N, counts the replica's share of the pool's arrivals).
Without a queue and without a delay the factor is 1 (the session-13 law). For long equal outputs
and short prefills (c_p = c = 1/2, a_D = 1, b = a_F) it is 1 + 2 Var[Q] / mu; a prefill longer than
the window leaves no coverage (factor 0: the prompts join after the request has left).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from model.queueing.overlap import OTHER_POINTS

__all__ = ["start_coverage", "start_queue_gain", "start_queue_moments"]


def start_queue_moments(
    rate_per_replica: np.ndarray,
    wait_prob: np.ndarray,
    wait_cond_mean_s: np.ndarray,
    share_moments_s: tuple[np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """(E[Q], Var[Q]) [C]: the prompts that reach the replica during the request's wait W and prefill
    S (module docstring): E[Q] = lambda (E[W] + E[S]), Var[Q] = E[Q] + lambda^2 (Var[W] + Var[S]),
    W = 0 w.p. 1 - P else exponential of mean m. Non-finite waits (unstable candidates) read 0."""
    lam = np.asarray(rate_per_replica, dtype=float)
    p = np.clip(np.asarray(wait_prob, dtype=float), 0.0, 1.0)
    m = np.asarray(wait_cond_mean_s, dtype=float)
    m = np.where(np.isfinite(m), m, 0.0)
    es, es2 = (np.asarray(v, dtype=float) for v in share_moments_s)
    mean_w, var_w = p * m, p * m * m * (2.0 - p)
    var_s = np.maximum(es2 - es * es, 0.0)
    mean_q = lam * (mean_w + es)
    return mean_q, mean_q + lam * lam * (var_w + var_s)


def start_coverage(output_tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(grid [K], G [K], P [K], H [K]) of the others' outputs O' (OTHER_POINTS quantiles of the
    sample, 0 first): G(L) = E[min(O', L)], P(L) = P(O' > L) on [grid_k, grid_k+1) (G's slope) and
    H(L) = int_0^L G(v) dv at the grid points. Between them G is linear and H quadratic (min(O', v)
    is linear in v between the O' values), past the last G = E[O'] and H grows linearly."""
    return _start_coverage(np.ascontiguousarray(output_tokens, dtype=float).tobytes())


@lru_cache(maxsize=64)
def _start_coverage(output_bytes: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    out = np.frombuffer(output_bytes, dtype=float)
    o = np.quantile(out, (np.arange(OTHER_POINTS) + 0.5) / OTHER_POINTS)
    grid = np.concatenate([[0.0], o])
    big = np.minimum(o[None, :], grid[:, None]).mean(axis=1)
    slope = (grid[:, None] < o[None, :]).mean(axis=1)
    area = np.concatenate([[0.0], np.cumsum(np.diff(grid) * (big[:-1] + big[1:]) / 2.0)])
    for v in (grid, big, slope, area):
        v.flags.writeable = False
    return grid, big, slope, area


def _read(table: tuple[np.ndarray, ...], length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(G(L), H(L)) at lengths L >= 0 (:func:`start_coverage`)."""
    grid, big, slope, area = table
    k = np.clip(np.searchsorted(grid, length, side="right") - 1, 0, len(grid) - 1)
    d = length - grid[k]
    g = big[k] + slope[k] * d
    return g, area[k] + big[k] * d + slope[k] * d * d / 2.0


def start_queue_gain(
    var_q: np.ndarray,
    prompt_iterations: np.ndarray,
    arrivals_per_iteration: tuple[np.ndarray, np.ndarray],
    emitted: np.ndarray,
    mean_f: np.ndarray,
    output_tokens: np.ndarray,
) -> np.ndarray:
    """The factor [C, S] on r = rho_D rho_F: (c_p + Var[Q] a_F a_D / (b mu)) / c (module docstring):
    ``var_q`` [C], a prompt's mixed iterations p [C], the arrivals per decode-only and per mixed
    iteration (lambda T_dec, lambda T_mix) [C], the tokens per iteration e [C], E[F] [C, S] and the
    sampled outputs O [S]. Window T = O - 1 tokens, n = T / e iterations; b = phi(p / n) and
    mu = n (E[F] lambda T_mix + (1 - E[F]) lambda T_dec) as in arrival_share_correlation;
    a_F = min(p / n, 1). A prompt joins the batch after its p mixed iterations (d = p e tokens): one
    queued at the start covers a_D = G((T - d)+) / T of the window, one arriving during it
    c_p = H((T - d)+) / T^2, against c = H(T) / T^2 without the delay (rho_D's). 1 where b mu or c
    is 0."""
    out = np.asarray(output_tokens, dtype=float)
    table = start_coverage(out)
    e = np.asarray(emitted, dtype=float)[:, None]
    t = np.maximum(out - 1.0, 1e-9)[None, :]
    n = t / e
    p = np.asarray(prompt_iterations, dtype=float)[:, None]
    a_dec, a_mix = (np.asarray(v, dtype=float)[:, None] for v in arrivals_per_iteration)
    x = p / n
    b = np.where(x < 1.0, x - x * x / 2.0, 0.5)
    a_f = np.minimum(x, 1.0)
    g_d, h_d = _read(table, np.maximum(t - p * e, 0.0))
    h_t = _read(table, t[0])[1][None, :]
    mu = n * (mean_f * a_mix + (1.0 - mean_f) * a_dec)
    with np.errstate(divide="ignore", invalid="ignore"):
        queued = np.asarray(var_q, dtype=float)[:, None] * a_f * (g_d / t) / (b * mu)
        factor = (h_d + np.where(np.isfinite(queued), queued, 0.0) * t * t) / h_t
    return np.where(np.isfinite(factor) & (h_t > 0), factor, 1.0)
