"""Batch deviation and prefill stalls together on a prefill-first replica (session 11).

A prefill-first request's TPOT is b + s D + Y / (O - 1) (model.queueing.latency): D the per-token
deviation of its replica's batch (model.queueing.decode_spread), Y the stalls, the prefill steps of
the N prompts (primary events) that reach its replica in its window. Both grow with the prompts that
arrive in the window: each joins the batch for the rest of the window and stalls it once. As for
the chunked mixed share (model.queueing.mixed_share, "Batch and mixed share together"), N is Poisson
and the rest of D (the sequences running at the window's start) is independent of it (Kingman 1993,
*Poisson Processes*, ch. 2), so corr(D, N) = r = rho_D sqrt(p) sqrt(q): rho_D the correlation of
D with the pool's arrivals in the decode window (model.queueing.overlap.arrival_correlation),
sqrt(p) the replica's Poisson share p of them (colouring theorem, Kingman 1993, ch. 5) and sqrt(q)
that count's correlation with N, which also counts the prompts of the request's own prefill window
(q = the decode window's share of N's mean; corr(A, A + B) = sqrt(E[A] / E[A + B]) for independent
Poisson A, B) (model.serving.colocated.batch_correlation, one function for both styles).

The stall law conditions on N (none, one, two or more), so D is taken given N by its linear
regression on N (Papoulis, *Probability, Random Variables and Stochastic Processes*, sec. 6-4):
E[D | N = k] = r sd(D) (k - n) / sqrt(n), Var[D | N = k] = (1 - r^2) Var[D] (n = E[N]). In
standard deviations of D the conditional mean is z_k = r (k - n) / sqrt(n), held inside the range
of D's quadrature (a deviation beyond D's top stratum is not in D's law; small n with a loose r).
- no stall: P(s D <= e | N = 0) = P(s D' <= (e - s sd z_0) / sqrt(1 - r^2)), D' D's own law
  (the exact law, shifted and narrowed);
- one stall: D at the strata of ``edges`` (model.queueing.decode_spread.TpotSpread.strata_at, the
  tail-refined strata of the chunked law), each d_m moved to d_m + (sqrt(1 - r^2) - 1) dc_m +
  sd z_1 (dc_m centred over the quadrature);
- two or more: the gamma of Y + (O - 1) s D takes the conditional moments given N >= 2, mean
  + (O - 1) s sd z_2 (z_2 at k = E[N | N >= 2]) and variance + ((O - 1) s sd)^2 ((1 - r^2) +
  kappa^2 Var[N | N >= 2]) + 2 (O - 1) s sd kappa Var[N | N >= 2] E[cluster] (Cov[Y, D | N >= 2],
  Y a sum of N clusters), kappa = z_2 / (E[N | N >= 2] - n) the standardised slope.
r = 0 is the independent convolution over the same strata (the law before this module).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.queueing.decode_spread import TpotSpread


@dataclass(frozen=True, eq=False)
class CorrelatedStalls:
    """D given the stall count N for every candidate and request ([C, S] unless noted)."""

    weights: np.ndarray  # [M] the strata's probabilities
    one_shift_s: np.ndarray  # [M x C, S] (O - 1) s D at each stratum given N = 1, strata stacked on rows
    atom_shift_s: np.ndarray  # s sd z_0: E[s D | N = 0]
    narrow: np.ndarray  # sqrt(1 - r^2)
    sd_s: np.ndarray  # (O - 1) s sd(D)
    corr: np.ndarray  # r
    count: np.ndarray  # n = E[N]
    z_range: tuple[np.ndarray, np.ndarray]  # [C, 1] lowest and highest z of the quadrature

    @property
    def strata(self) -> int:
        """Number of strata M."""
        return len(self.weights)

    def z_at(self, k: np.ndarray) -> np.ndarray:
        """z_k = r (k - n) / sqrt(n), clipped to the quadrature's range (module docstring)."""
        n = self.count
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(n > 0, self.corr * (k - n) / np.sqrt(np.where(n > 0, n, 1.0)), 0.0)
        return np.clip(z, *self.z_range)

    def atom_excess(self, excess_s: np.ndarray) -> np.ndarray:
        """The excess at which D's own law is read for P(s D <= excess | N = 0)."""
        if not self.corr.any():
            return excess_s
        return (excess_s - self.atom_shift_s) / self.narrow

    def two_moments(
        self,
        mean_s: np.ndarray,
        var_s2: np.ndarray,
        count_moments: tuple[np.ndarray, ...],
        cluster_s: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(mean, variance) of Y + (O - 1) s D given N >= 2 from the stalls' own (``mean_s``,
        ``var_s2``), ``count_moments`` (E[N | N >= 2], E[N^2 | N >= 2]) and the cluster mean
        ``cluster_s`` (module docstring; r = 0: + ((O - 1) s)^2 Var[D], the independent sum)."""
        en, en2 = count_moments
        var_n = np.maximum(en2 - en * en, 0.0)
        z2 = self.z_at(en)
        with np.errstate(divide="ignore", invalid="ignore"):
            kappa = np.where(en - self.count > 1e-12, z2 / (en - self.count), 0.0)
        g = self.sd_s
        var = var_s2 + g * g * (self.narrow**2 + kappa * kappa * var_n) + 2.0 * g * kappa * var_n * cluster_s
        return mean_s + g * z2, var


def correlated_stalls(
    spread: TpotSpread, corr: np.ndarray | None, count: np.ndarray, gaps: np.ndarray, edges: tuple[float, ...]
) -> CorrelatedStalls:
    """:class:`CorrelatedStalls` of ``spread`` with r = ``corr`` [C, S] (None: 0), the primary stall
    count's mean ``count`` [C, S], the token gaps ``gaps`` [1, S] and the strata ``edges``."""
    w, d, z = spread.strata_at(edges)  # [M], [M, C], [M, C]
    sd = np.sqrt(np.maximum(spread.variance_s2(), 0.0))  # [C]
    dc = d - w @ d
    r = np.zeros_like(count) if corr is None else np.clip(np.broadcast_to(corr, count.shape), 0.0, 0.999)
    narrow = np.sqrt(1.0 - r * r)
    scale = spread.shrink * gaps  # [C, S]
    z_range = (z.min(axis=0)[:, None], z.max(axis=0)[:, None])
    law = CorrelatedStalls(w, np.empty(0), np.zeros_like(r), narrow, scale * sd[:, None], r, count, z_range)
    z1 = law.z_at(np.ones_like(r))
    level = d[:, :, None] + (narrow[None] - 1.0) * dc[:, :, None] + sd[None, :, None] * z1[None]
    one = (level * scale[None]).reshape(-1, r.shape[1])
    atom = spread.shrink * sd[:, None] * law.z_at(np.zeros_like(r))
    return CorrelatedStalls(w, one, atom, narrow, law.sd_s, r, count, z_range)
