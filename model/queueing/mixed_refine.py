"""The chunked TPOT law's exact rows computed in stages: bounds tightened by exact Beta CDFs where
they are widest, so a candidate whose SLO test they already settle skips the rest.

:class:`model.queueing.mixed_share.MixedTpot` gives each candidate's TPOT CDF at the target, per
request, as a stratum-weighted sum of Beta CDFs (one per stratum of the batch deviation D and
request), and cheap bounds on each entry (:meth:`MixedShare.bounds_at`: Cantelli). The SLO test
reads the CDF only through means over the requests (model.serving.common), which are monotone in
every entry, so the exact test is decided once the means' bounds clear its targets. Each entry's
true value lies in its interval; an entry computed exactly is its own interval. :class:`StagedCdf`
computes the exact Beta CDF first where an entry's interval, weighted by its stratum's probability
and its request count, is widest, ``share`` of the entries at a time, and the full exact CDF
(:meth:`StagedCdf.cdf`) is entry for entry :meth:`MixedTpot.cdf`'s (the same elementwise Beta CDF of
the same parameters, assembled and averaged by the same code).

The entries' bounds add to Cantelli's (Cantelli 1928; one-sided Chebyshev, P(X - mu >= l sigma) <=
1 / (1 + l^2)) the one-sided Vysochanskij-Petunin inequality for unimodal laws,
P(X - mu >= l sigma) <= max(4 / (9 (1 + l^2)), (3 - l^2) / (3 (1 + l^2))) (Mercadier and Strobel
2021, "A one-sided Vysochanskii-Petunin inequality with financial applications", Eur. J. Oper. Res.
295; Ion, Klaassen and van den Heuvel 2023, Test 32, the unimodal class), which a Beta(alpha, beta)
is unless both alpha and beta are below 1 (U-shaped; Johnson, Kotz and Balakrishnan, *Continuous
Univariate Distributions* vol. 2, ch. 25).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.special import betainc

from model.queueing.mixed_share import MixedTpot, beta_cdf_bounds, distinct_columns

__all__ = ["REFINE_SHARES", "StagedCdf", "unimodal_tail_bound"]

REFINE_SHARES = (0.15, 0.15, 0.2, 0.25)
"""Shares of each candidate's Beta CDF entries computed exactly before each check of the bounds
(cumulative 15, 30, 50, 75%; then all of them). Only the work per candidate depends on these, never
a result."""


def unimodal_tail_bound(lam2: np.ndarray, unimodal: np.ndarray) -> np.ndarray:
    """Upper bound on P(X - mu >= l sigma) (and on P(X - mu <= -l sigma)) at ``lam2`` = l^2: Cantelli's
    1 / (1 + l^2), and where ``unimodal`` the one-sided Vysochanskij-Petunin bound (module docstring)
    when it is lower."""
    lam2 = np.asarray(lam2, dtype=float)
    cantelli = 1.0 / (1.0 + lam2)
    vp = np.maximum(4.0 / (9.0 * (1.0 + lam2)), (3.0 - lam2) / (3.0 * (1.0 + lam2)))
    return np.where(unimodal, np.minimum(cantelli, vp), cantelli)


@dataclass(frozen=True, eq=False)
class StagedCdf:
    """The exact rows of a :class:`MixedTpot` being computed. Per candidate [R, N], its N = M x K
    entries (stratum-major: stratum j's K distinct request columns at j K ... j K + K - 1): the Beta
    parameters ``a``, ``b``, root ``x``, ``want`` (Beta CDF needed), the bounds ``lo`` / ``hi`` (the
    exact value once computed) and ``order``, the entries by decreasing weighted interval; ``roots``
    [M x R, S'] the law's roots of these candidates, ``inverse`` [S'] the distinct column of each of
    the law's requests (None: K = S'), ``held`` the law's own request columns when it is held on its
    distinct requests (a ``columns`` field; None: its requests are the sample's), ``weights`` [M] the
    strata's probabilities, ``done`` how many entries of ``order`` are computed, ``live`` the
    candidates still asked about, ``law`` and ``rows`` the candidates of the law these are."""

    law: MixedTpot
    rows: np.ndarray
    roots: np.ndarray
    inverse: np.ndarray | None
    held: np.ndarray | None
    a: np.ndarray
    b: np.ndarray
    x: np.ndarray
    want: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    order: np.ndarray
    weights: np.ndarray
    done: int = 0
    live: np.ndarray | None = None

    @classmethod
    def build(cls, law: MixedTpot, rows: np.ndarray) -> StagedCdf:
        """The candidates ``rows`` of ``law``, nothing computed yet (bounds on every entry)."""
        n, m = len(law.stable), law._strata
        pick = (np.arange(m)[:, None] * n + rows[None, :]).ravel()
        share = law.share.take(rows)
        alpha, beta = (share.alpha, share.beta) if law.params is None else (v[:, rows] for v in law.params)
        f, want = law.roots[pick], law.want[pick]
        cols = distinct_columns(alpha, beta, f)
        k = f.shape[1] if cols is None else len(cols[0])
        first = slice(None) if cols is None else cols[0]
        inverse = None if cols is None else cols[1]
        held = law.columns  # a law held on its distinct requests: their columns
        per = np.ones(f.shape[1]) if held is None else np.bincount(held, minlength=f.shape[1]).astype(float)
        counts = per if cols is None else np.bincount(inverse, weights=per, minlength=k)
        r = len(rows)
        shape = (m, r, k)

        def flat(v: np.ndarray) -> np.ndarray:  # [M, R, K] -> [R, M x K]
            return np.ascontiguousarray(np.broadcast_to(v, shape).transpose(1, 0, 2)).reshape(r, m * k)

        a, b = flat(alpha[..., first]), flat(beta[..., first])
        x, w = flat(f[:, first].reshape(shape)), flat(want[:, first].reshape(shape))
        unimodal = (a >= 1.0) | (b >= 1.0)
        lo, hi = beta_cdf_bounds(a, b, x, w, lambda var, d: unimodal_tail_bound(d * d / var, unimodal))
        weights = np.full(m, 1.0 / m) if law.weights is None else np.asarray(law.weights, dtype=float)
        score = (hi - lo) * np.repeat(weights, k)[None, :] * np.tile(counts, m)[None, :]
        order = np.argsort(-score, axis=1)
        return cls(law, rows, f, inverse, held, a, b, x, w, lo, hi, order, weights, 0, np.arange(r))

    def bounds(self, step: float) -> tuple[StagedCdf, np.ndarray, np.ndarray]:
        """(these with ``step`` of each live candidate's entries more computed exactly, in ``order``
        (the widest weighted intervals first), lower and upper bounds [R, S] on its CDF)."""
        n = self.a.shape[1]
        end = min(self.done + int(np.ceil(step * n)), n)
        self._compute(self.done, end)
        staged = replace(self, done=end)
        r, m = len(self.live), len(self.weights)
        lo, hi = (
            np.minimum(np.tensordot(v[self.live].reshape(r, m, -1), self.weights, axes=([1], [0])), 1.0)
            for v in (self.lo, self.hi)
        )
        return staged, staged._spread(lo), staged._spread(hi)

    def take(self, keep: np.ndarray) -> StagedCdf:
        """The live candidates ``keep`` [R] bool of these."""
        return replace(self, live=self.live[keep])

    def cdf(self) -> np.ndarray:
        """The exact CDF [R, S] of the live candidates, entry for entry :meth:`MixedTpot.cdf`'s."""
        self._compute(self.done, self.a.shape[1])
        m, r = len(self.weights), len(self.live)
        inside = np.where(self.want[self.live], self.lo[self.live], 0.0)  # lo: the exact values now
        inside = inside.reshape(r, m, -1).transpose(1, 0, 2).reshape(m * r, -1)
        if self.inverse is not None:
            inside = inside[:, self.inverse]
        n = len(self.rows)
        f = self.roots[(np.arange(m)[:, None] * n + self.live[None, :]).ravel()]
        cdf = np.where(f >= 1.0, 1.0, np.where(f < 0.0, 0.0, inside))
        if self.held is not None:
            cdf = np.ascontiguousarray(cdf[:, self.held])
        return self.law._average(cdf, self.law.stable[self.rows[self.live]])

    def _compute(self, start: int, end: int) -> None:
        """The exact Beta CDF of the live candidates' entries ``order[start:end]``, written into
        ``lo`` and ``hi`` (in place: the arrays are this computation's own)."""
        if end <= start or not len(self.live):
            return
        rr = self.live[:, None]
        cc = self.order[self.live, start:end]
        need = self.want[rr, cc]
        ri, ci = np.broadcast_to(rr, cc.shape)[need], cc[need]
        val = betainc(self.a[ri, ci], self.b[ri, ci], np.clip(self.x[ri, ci], 0.0, 1.0))
        self.lo[ri, ci] = val
        self.hi[ri, ci] = val

    def _spread(self, v: np.ndarray) -> np.ndarray:
        """Per-request values [R, S] from those of the distinct columns [R, K]."""
        v = v if self.inverse is None else v[:, self.inverse]
        return v if self.held is None else v[:, self.held]
