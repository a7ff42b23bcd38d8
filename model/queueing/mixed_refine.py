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

from model.queueing.mixed_share import MixedTpot, distinct_columns

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
    """The exact rows of a :class:`MixedTpot` being computed: per stratum, candidate and distinct
    request column [M, R, K] the Beta parameters ``a``, ``b``, root ``x``, ``want`` (Beta CDF needed),
    the entry bounds ``lo`` / ``hi`` and the exact values ``val`` where ``done``; ``roots`` [M x R, S]
    the law's roots, ``inverse`` the column of each of the law's requests (None: K of them), ``held``
    the law's own request columns when it is held on its distinct requests (a ``columns`` field;
    None: the law's requests are the sample's), ``counts`` [K] the requests each column stands for,
    ``law`` and ``rows`` the candidates of the law these are."""

    law: MixedTpot
    rows: np.ndarray
    roots: np.ndarray
    inverse: np.ndarray | None
    held: np.ndarray | None
    counts: np.ndarray
    a: np.ndarray
    b: np.ndarray
    x: np.ndarray
    want: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    val: np.ndarray
    done: np.ndarray

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
        held = getattr(law, "columns", None)  # a law held on its distinct requests: their columns
        per = np.ones(f.shape[1]) if held is None else np.bincount(held, minlength=f.shape[1]).astype(float)
        counts = per if cols is None else np.bincount(inverse, weights=per, minlength=k)
        shape = (m, len(rows), k)
        a = np.broadcast_to(alpha[..., first], shape)
        b = np.broadcast_to(beta[..., first], shape)
        x, w = f[:, first].reshape(shape), want[:, first].reshape(shape)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            conc = a + b
            mu = a / conc
            var = mu * (1.0 - mu) / (conc + 1.0)
            d = x - mu
            tail = unimodal_tail_bound(d * d / var, (a >= 1.0) | (b >= 1.0))
            # NaN parameters compare False both ways: the trivial bounds 0 and 1
            lo = np.where(d > 0, 1.0 - tail, 0.0)
            hi = np.where(d < 0, tail, 1.0)
        exact = (x >= 1.0).astype(float)  # outside (0, 1): the CDF's 0 or 1
        lo, hi = np.where(w, lo, exact), np.where(w, hi, exact)
        return cls(law, rows, f, inverse, held, counts, a, b, x, w, lo, hi, exact, ~w)

    def bounds(self, step: float) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) bounds [R, S] on the CDF after computing exactly, per candidate, ``step`` of
        its entries more: those whose intervals, weighted by the stratum's probability and the
        request count, are widest."""
        m, r, k = self.a.shape
        weights = self._weights()
        take = min(int(np.ceil(step * m * k)), m * k)
        if take and r:
            gap = np.where(self.done, -1.0, (self.hi - self.lo) * weights[:, None, None] * self.counts)
            flat = gap.transpose(1, 0, 2).reshape(r, m * k)
            pick = np.ones((r, m * k), dtype=bool)
            if take < m * k:
                pick[:] = False
                top = np.argpartition(-flat, take - 1, axis=1)[:, :take]
                np.put_along_axis(pick, top, True, axis=1)
            self._compute(pick.reshape(r, m, k).transpose(1, 0, 2) & ~self.done)
        lo = np.where(self.done, self.val, self.lo)
        hi = np.where(self.done, self.val, self.hi)
        return self._spread(self._mix(lo, weights)), self._spread(self._mix(hi, weights))

    def take(self, keep: np.ndarray) -> StagedCdf:
        """The candidates ``keep`` [R] bool of these."""
        m = self.a.shape[0]
        full = np.tile(keep, m)
        fields = {f: getattr(self, f)[:, keep] for f in ("a", "b", "x", "want", "lo", "hi", "val", "done")}
        return replace(self, rows=self.rows[keep], roots=self.roots[full], **fields)

    def cdf(self) -> np.ndarray:
        """The exact CDF [R, S], entry for entry :meth:`MixedTpot.cdf` of these candidates."""
        self._compute(~self.done)
        m, r, _ = self.a.shape
        inside = np.where(self.want, self.val, 0.0).reshape(m * r, -1)
        if self.inverse is not None:
            inside = inside[:, self.inverse]
        f = self.roots
        cdf = np.where(f >= 1.0, 1.0, np.where(f < 0.0, 0.0, inside))
        if self.held is not None:
            cdf = np.ascontiguousarray(cdf[:, self.held])
        return self.law._average(cdf, self.law.stable[self.rows])

    def _compute(self, pick: np.ndarray) -> None:
        """The exact Beta CDF of the entries ``pick`` [M, R, K] (in place: the arrays are this
        computation's own)."""
        need = pick & self.want
        self.val[need] = betainc(self.a[need], self.b[need], np.clip(self.x[need], 0.0, 1.0))
        self.done[pick] = True

    def _weights(self) -> np.ndarray:
        m = self.a.shape[0]
        return np.full(m, 1.0 / m) if self.law.weights is None else self.law.weights

    def _mix(self, v: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Stratum-weighted sum [R, K], capped at 1."""
        return np.minimum(np.tensordot(weights, v, axes=1), 1.0)

    def _spread(self, v: np.ndarray) -> np.ndarray:
        """Per-request values [R, S] from those of the distinct columns [R, K]."""
        v = v if self.inverse is None else v[:, self.inverse]
        return v if self.held is None else v[:, self.held]
