"""Queueing layer: a queue whose service law moves with a slow random environment.

A disaggregated prefill pool serving session turns sees whole-history misses in bursts: a turn misses
when the live sessions' histories outgrow the cache (model.workload.sessions.history_hit_levels), and
that footprint changes on the scale of a session's life (tens of turns, minutes), while the queue
relaxes in a few service times (seconds). So the arrivals meet an environment of K equiprobable
levels, level k with its own miss probability m_k and hence its own service law (the hit / miss
mixture at m_k), each level lasting far longer than the queue's relaxation.

Pointwise stationary approximation (PSA; Green and Kolesar, "The pointwise stationary approximation
for queues with nonstationary arrivals", Management Science 37(1), 1991; its limit for a slowly
changing environment: Choudhury, Mandelbaum, Reiman and Whitt, "Fluid and diffusion limits for queues
in slowly changing environments", Stochastic Models 13(1), 1997): the wait law is the environment's
average of the stationary wait laws of each level,

    P(W > t) = (1 / K) sum_k P(W_k > t),

W_k the M/G/c wait (model.queueing.mgc) with the level's service moments; a level whose utilisation
reaches 1 accumulates work for its whole duration (the fluid limit), so its waits are taken as
unbounded. A request's own service is correlated with its level (it misses with probability m_k
there), so its TTFT law is averaged per level with the level's weight on it: the sampled requests
carry the marginal split (a share m of misses, model.workload.sessions.history_split_missed), and in
level k a miss counts m_k / m and a hit (1 - m_k) / (1 - m) (:func:`level_weights`; each level's
weights average to 1 over the sample, so E_k over the sampled requests is the level's mixture).
One level, or equal m_k, give the single stationary queue on the mixture's moments.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from model.queueing.mgc import mgc_wait


@dataclass(frozen=True, eq=False)
class WaitLevels:
    """The queue wait per environment level (equiprobable): ``prob`` [C, K] P(W_k > 0) (1 where the
    level is unstable), ``cond_mean_s`` [C, K] E[W_k | W_k > 0] (inf there), ``weight`` [C, K, S]
    each sampled request's weight in level k (:func:`level_weights`)."""

    prob: np.ndarray
    cond_mean_s: np.ndarray
    weight: np.ndarray

    @property
    def mean_wait_s(self) -> np.ndarray:
        """E[W] [C] over the levels (inf when a level is unstable)."""
        with np.errstate(invalid="ignore"):
            return np.mean(np.where(self.prob > 0, self.prob * self.cond_mean_s, 0.0), axis=1)

    def mix(self, cdf_given: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
        """(1 / K) sum_k weight_k x cdf_given(prob_k, cond_mean_k) [C, S]: a per-request CDF whose mean
        over the sampled requests is the level average (module docstring)."""
        k = self.prob.shape[1]
        out = 0.0
        for j in range(k):
            out = out + self.weight[:, j, :] * cdf_given(self.prob[:, j], self.cond_mean_s[:, j])
        return out / k

    def scaled(self, factor: np.ndarray) -> WaitLevels:
        """Each level's conditional wait times ``factor`` [C] (a correction of the pool's wait law
        applied to every level alike, e.g. the bulk-service wait over the share queue's)."""
        return WaitLevels(self.prob, self.cond_mean_s * np.asarray(factor, dtype=float)[:, None], self.weight)

    def take(self, idx: np.ndarray) -> WaitLevels:
        """The levels of candidates ``idx``."""
        return WaitLevels(self.prob[idx], self.cond_mean_s[idx], self.weight[idx])

    def requests(self, mask: np.ndarray) -> WaitLevels:
        """The same levels restricted to the sampled requests ``mask``."""
        return WaitLevels(self.prob, self.cond_mean_s, self.weight[:, :, mask])


def level_weights(missed: np.ndarray, miss_levels: np.ndarray) -> np.ndarray:
    """[C, K, S] weights of the sampled requests per level: m_k / m for a miss, (1 - m_k) / (1 - m)
    for a hit, m the sample's miss share (``missed`` [S] bool), m_k ``miss_levels`` [C, K] (module
    docstring) first matched to m (the sample's split rounds the hit rate: where m is above the
    levels' mean the hit levels are scaled by (1 - m) / (1 - mean), else the miss levels by
    m / mean, so each stays in [0, 1] and their mean is m). Needs 0 < m < 1."""
    miss = np.asarray(missed, dtype=bool)
    m = float(miss.mean())
    mk = np.clip(np.asarray(miss_levels, dtype=float), 0.0, 1.0)
    mean = mk.mean(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        hits_scaled = 1.0 - (1.0 - mk) * (1.0 - m) / np.where(mean < 1.0, 1.0 - mean, 1.0)
        misses_scaled = mk * m / np.where(mean > 0.0, mean, 1.0)
    mk = np.where(mean > 0.0, np.where(m >= mean, hits_scaled, misses_scaled), m)[:, :, None]
    return np.where(miss[None, None, :], mk / m, (1.0 - mk) / (1.0 - m))


def environment_waits(
    rate_rps: np.ndarray,
    share_s: np.ndarray,
    weight: np.ndarray,
    servers: np.ndarray,
    arrival_scv: float,
) -> WaitLevels:
    """The M/G/c wait of each level (PSA, module docstring): service moments of ``share_s`` [C, S]
    (each sampled request's service) under the level's ``weight`` [C, K, S], arrivals ``rate_rps``
    [C] on ``servers`` [C]."""
    x = np.asarray(share_s, dtype=float)[:, None, :]
    es = np.maximum(np.mean(weight * x, axis=2), 1e-12)
    es2 = np.mean(weight * x * x, axis=2)
    scv = np.maximum(es2 / (es * es) - 1.0, 0.0)
    rate = np.asarray(rate_rps, dtype=float)[:, None]
    res = mgc_wait(rate, es, scv, np.asarray(servers, dtype=float)[:, None], arrival_scv)
    prob = np.where(res.stable, res.prob_wait, 1.0)
    cond = np.where(res.stable, res.cond_mean_wait_s, np.inf)
    return WaitLevels(prob, cond, np.asarray(weight, dtype=float))
