"""The share of a request's decode iterations that carry prefill work on a chunked-prefill replica.

With chunked prefill (Sarathi-Serve, Agrawal et al. OSDI 2024) a running request never stops: each
iteration is either decode-only (per emitted token t_dec) or mixed, carrying prompt chunks too (per
emitted token t_mix). Its TPOT is therefore

    TPOT = t_dec + F (t_mix - t_dec),

F the fraction of its decode iterations that are mixed (docs/model.md, "Chunked TPOT: the mixed
share"). The replica alternates between prefill busy periods (mixed iterations) and idle periods
(decode-only), and F is the *occupation fraction* of the busy state over the request's window of
n = (O - 1) / e iterations (e tokens per iteration: speculative decoding). Counted in iterations:

- busy periods of the M/G/1 prefill queue (Poisson arrivals at lambda_r, service the prompt's share
  S): mean E[S] / (1 - u) and second moment E[S^2] / (1 - u)^3 in wall time (Kleinrock 1975,
  *Queueing Systems* vol. 1, sec. 5.8; u = lambda_r E[S], the prefill wall utilisation), i.e.
  / T_mix (T_mix = e t_mix per mixed iteration) in iterations;
- idle periods exponential with mean 1 / lambda_r (memoryless arrivals), / T_dec in iterations.

So the mean of F is m_B / (m_B + m_I) = (u / t_mix) / (u / t_mix + (1 - u) / t_dec): the iteration
share whose mean TPOT is the harmonic per-token time tau of model.queueing.interference (the same
mean as before). Its variance over a window of n iterations started at a random time:

- long windows: the renewal-reward central limit theorem for an alternating renewal process gives
  Var[F] ~ (m_I^2 s_B^2 + m_B^2 s_I^2) / ((m_B + m_I)^3 n) (Takacs 1957, Acta Math. Acad. Sci.
  Hungar. 8, "On certain sojourn time problems"; Cox 1962, *Renewal Theory*, sec. 7.4);
- the window's variance factor g(n) = 2 (x - 1 + e^-x) / x^2, x = n / theta, the exact variance of
  the time average of a two-state Markov (exponential on / off) process (Pedler 1971, "Occupation
  times for two state Markov chains", J. Appl. Prob. 8, 381-390; Papoulis, sec. 9-5, with the
  correlation e^-t/theta), theta set so that the long-window limit 2 theta / n matches the renewal
  variance above: theta = (m_I^2 s_B^2 + m_B^2 s_I^2) / (2 (m_B + m_I) m_B m_I) (for exponential
  busy periods, the Markov chain's own 1 / (1 / m_B + 1 / m_I));
- the window does not start at a random time: it starts when the request's own prefill ends, and an
  M/G/1 departure leaves a non-empty queue with the probability an arrival finds one, u (PASTA and
  level crossing: Kleinrock 1975, vol. 1, sec. 5.6), so the first iteration is mixed with probability
  u (wall utilisation), not Fbar. The start's weight in the window's mean decays as in the two-state
  chain, E[F] = Fbar + (u - Fbar) h(n), h = (1 - e^-x) / x (Papoulis sec. 9-5 with the same
  correlation);
- Var[F] = E[F] (1 - E[F]) g(n) (an approximation for the departure start, exact at both ends):
  Bernoulli(u) for windows much shorter than a period (the request
  decodes wholly inside a busy or an idle period, the all-mixed or the plain TPOT), Fbar for long ones.

F is taken Beta with that mean and variance (a moment match on [0, 1]: alpha + beta = 1 / g - 1).

The mixed iterations a request sees are not all the mean one: a window with a high F lies inside
long busy periods, where each prompt's partial last chunk is packed with the next queued prompts,
so its mixed iterations approach a busy period's iteration (t_full per token: the prompts in system
given busy, up to the chunk's room; model.serving.colocated). :class:`MixedShare` takes their mean
time linear in F, t_mix at F = E[F] and t_full at F = 1 (an interpolation, traced on the simulator:
docs/model.md, "Chunked TPOT: the mixed share"), so the TPOT above the plain step is
F (t_mix - t_dec + q (F - E[F])), q = (t_full - t_mix) / (1 - E[F]).

Batch and mixed share together. The request's batch deviation D (model.queueing.decode_spread) and
F both grow with the number N of prompts that arrive at its replica during its window: each arrival
joins its batch for the rest of the window and runs its prefill's mixed iterations in it. N is
Poisson, and the rest of each (the sequences already running at the window's start, the busy period
it starts in) is independent of N (Poisson arrivals in disjoint intervals; Kingman 1993, *Poisson
Processes*, ch. 2). With both linear in N (each arrival's coverage of the window, Takacs 1962,
ch. 3: model.queueing.overlap.arrival_correlation, :func:`arrival_share_correlation`), the law of
total covariance, Cov[D, F] = Cov[E[D | N], E[F | N]] + E[Cov[D, F | N]] with the second term 0,
gives corr(D, F) = r = rho_D rho_F (rho_X the correlation of X with N; times sqrt(p_R) where D
counts the pool's arrivals and F the replica's, a Poisson thinning: model.serving.colocated.
_mixed_share). F is taken given D by the
linear regression, mean E[F] + r sd(F) z and variance (1 - r^2) Var[F] at D = E[D] + z sd(D) (exact
for the bivariate normal limit of many arrivals, and the two moments of F exact for any law whose
regression on D is linear; Papoulis, sec. 6-4), a Beta of those moments (:meth:`MixedShare.given`).
The strata of D are standardised over the quadrature itself, so the strata's conditional laws
average back to F's mean and variance; r = 0 is the independent convolution.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import betainc

__all__ = [
    "Alternation",
    "MixedShare",
    "MixedTpot",
    "alternation",
    "beta_cdf_bounds",
    "distinct_columns",
    "distinct_requests",
    "mixed_share",
    "window_variance_factor",
]

_MIN_CONCENTRATION = 1e-6  # alpha + beta floor: a Beta this concentrated is Bernoulli to 1e-6


def _window_factors(window: np.ndarray, corr_time: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(h, g) at x = window / corr_time: h = (1 - e^-x) / x, the weight of the start state in the
    window's mean, and g = 2 (x - 1 + e^-x) / x^2, the variance factor (module docstring). Both 1
    at x = 0; 1 / x and 2 / x for long windows. Series below x = 1e-3."""
    w = np.asarray(window, dtype=float)
    th = np.asarray(corr_time, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = np.where(th > 0, w / np.where(th > 0, th, 1.0), np.inf)
        e = np.exp(-np.minimum(x, 700.0))
        h_big, g_big = (1.0 - e) / x, 2.0 * (x - 1.0 + e) / (x * x)
    small = x < 1e-3
    finite = np.isfinite(x)
    xs = np.where(small, x, 0.0)
    h = np.where(small, 1.0 - xs / 2.0 + xs * xs / 6.0, np.where(finite, h_big, 0.0))
    g = np.where(small, 1.0 - xs / 3.0 + xs * xs / 12.0, np.where(finite, g_big, 0.0))
    return np.clip(h, 0.0, 1.0), np.clip(g, 0.0, 1.0)


def distinct_columns(*arrays: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(first, inverse) such that every array equals ``array[:, first][:, inverse]`` entry for entry
    (columns = sampled requests; two requests with equal outputs have equal columns in a chunked
    replica's mixed-share law), or None when no column repeats. The columns are grouped by a
    weighted sum of their entries and each group checked entry by entry against its first column,
    so an elementwise function computed on the distinct columns and spread back is exactly the
    function on all of them (any collision of the sums falls back to None)."""
    mats = [np.asarray(a, dtype=float).reshape(-1, np.shape(a)[-1]) for a in arrays]
    key = np.zeros(mats[0].shape[1])
    start = 1.0
    with np.errstate(invalid="ignore", over="ignore"):
        for m in mats:  # fixed, incommensurate weights per row
            key += np.sin(np.arange(start, start + len(m))) @ np.where(np.isfinite(m), m, 0.0)
            start += len(m)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if len(first) == len(key):
        return None
    inverse = inverse.reshape(-1)
    rep = first[inverse]
    if not all(np.array_equal(m[:, rep], m, equal_nan=True) for m in mats):
        return None
    return first, inverse


def distinct_requests(share: MixedShare, *per_request: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(first, inverse) of the requests whose columns of ``share`` and of the other ``per_request``
    arrays [C, S] (e.g. the batch deviation's shrink) all repeat another request's
    (:func:`distinct_columns`), or None when none repeats. Such requests have the same mixed-share
    TPOT law at any target per candidate, so it is computed once per distinct request."""
    return distinct_columns(*share._fields(), *per_request)


def beta_cdf_bounds(
    alpha: np.ndarray,
    beta: np.ndarray,
    x: np.ndarray,
    want: np.ndarray,
    tail: Callable[[np.ndarray, np.ndarray], np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) bounds on the Beta(alpha, beta) CDF at ``x`` from its mean m = alpha / (alpha +
    beta) and variance s^2 = m (1 - m) / (alpha + beta + 1) (Johnson, Kotz and Balakrishnan,
    *Continuous Univariate Distributions* vol. 2, ch. 25): ``tail(s^2, d)`` bounds the one-sided tail
    beyond x = m + d, so the CDF is >= 1 - tail above the mean and <= tail below it. Where ``want`` is
    False (x outside (0, 1), or not asked for) both bounds are the CDF's exact 0 or 1 (1 iff x >= 1)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        conc = alpha + beta
        m = alpha / conc
        var = m * (1.0 - m) / (conc + 1.0)
        d = x - m
        t = tail(var, d)
        # NaN parameters compare False both ways: the trivial bounds 0 and 1
        lo = np.where(d > 0, 1.0 - t, 0.0)
        hi = np.where(d < 0, t, 1.0)
    exact = (x >= 1.0).astype(float)
    return np.where(want, lo, exact), np.where(want, hi, exact)


def _cantelli_tail(var: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Cantelli's one-sided bound s^2 / (s^2 + d^2) on P(X - m >= |d|) (:meth:`MixedShare.bounds_at`)."""
    return var / (var + d * d)


def window_variance_factor(window: np.ndarray, corr_time: np.ndarray) -> np.ndarray:
    """g = 2 (x - 1 + e^-x) / x^2, x = window / corr_time: the variance of a window average of a
    stationary process with correlation e^-t/theta, relative to its pointwise variance (module
    docstring; 1 at x = 0, 2 / x for long windows)."""
    return _window_factors(window, corr_time)[1]


@dataclass(frozen=True, eq=False)
class MixedShare:
    """F_ci ~ Beta(alpha_ci, beta_ci), the mixed share of request i's iterations on candidate c, and
    its TPOT above the plain decode base, excess(F) = F (lin + quad (F - E[F])) per emitted token:
    ``lin_s`` [C] = t_mix - t_dec (the mean mixed iteration), ``quad_s`` [C] = (t_full - t_mix) /
    (1 - E[F]) the rise of the mixed iterations towards full ones with F (module docstring), capped
    at lin / E[F] so excess(F) increases on [0, 1]."""

    mean: np.ndarray  # [C, S] E[F] over request i's window
    alpha: np.ndarray  # [C, S]
    beta: np.ndarray  # [C, S]
    lin_s: np.ndarray  # [C, S]
    quad_s: np.ndarray  # [C, S]
    corr: np.ndarray  # [C, S] r: the correlation of F with the request's batch deviation D

    @classmethod
    def build(
        cls,
        mean: np.ndarray,
        alpha: np.ndarray,
        beta: np.ndarray,
        per_token_s: tuple[np.ndarray, ...],
        corr: np.ndarray | None = None,
    ) -> MixedShare:
        """From the per-token times (t_dec, t_mix, t_full) [C] (t_mix at least t_dec, t_full at least
        t_mix) and the correlation ``corr`` of F with D (None: independent)."""
        t_dec, t_mix, t_full = (np.asarray(v, dtype=float)[:, None] for v in per_token_s)
        lin = np.maximum(t_mix - t_dec, 0.0) + 0.0 * mean
        with np.errstate(divide="ignore", invalid="ignore"):
            quad = np.maximum(t_full - t_mix, 0.0) / np.maximum(1.0 - mean, 1e-12)
            quad = np.minimum(quad, np.where(mean > 0, lin / np.where(mean > 0, mean, 1.0), np.inf))
        r = np.zeros_like(mean) if corr is None else np.clip(np.broadcast_to(corr, mean.shape), -0.999, 0.999)
        return cls(mean, alpha, beta, lin, np.where(np.isfinite(quad), quad, 0.0), r)

    def given(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(alpha, beta) [M, C, S] of F given the batch deviation D at ``z`` [M, C] standard deviations
        from its mean: mean E[F] + r sd(F) z and variance (1 - r^2) Var[F] (the linear regression on D;
        module docstring, "Batch and mixed share together"), a Beta of those moments (concentration
        floored at _MIN_CONCENTRATION: the conditional mean held inside (0, 1))."""
        conc = self.alpha + self.beta
        var = self.mean * (1.0 - self.mean) / (conc + 1.0)
        r = self.corr[None]
        m = np.clip(self.mean[None] + r * np.sqrt(var)[None] * np.asarray(z)[:, :, None], 1e-9, 1.0 - 1e-9)
        with np.errstate(divide="ignore", invalid="ignore"):
            c = m * (1.0 - m) / np.maximum((1.0 - r * r) * var[None], 1e-300) - 1.0
        c = np.clip(np.where(np.isfinite(c), c, 1e12), _MIN_CONCENTRATION, 1e12)
        return m * c, (1.0 - m) * c

    def excess_s(self, f: np.ndarray) -> np.ndarray:
        """excess(F) = F (lin + quad (F - E[F])) at shares ``f`` [C, S]."""
        return f * (self.lin_s + self.quad_s * (f - self.mean))

    def excess_cdf(
        self, excess_s: np.ndarray, repeats: int = 1, rows: np.ndarray | None = None
    ) -> np.ndarray:
        """P(excess(F) <= y) for ``excess_s`` y [repeats x C, S] (rows stacked ``repeats`` times): the
        Beta CDF at the root F* of quad F^2 + (lin - quad E[F]) F = y in [0, 1]. ``rows`` [C] bool:
        only those candidates are computed (the others read 0: an unstable candidate's CDF is 0)."""
        return self.cdf_at(*self.roots(excess_s, repeats, rows), repeats)

    def roots(
        self, excess_s: np.ndarray, repeats: int = 1, rows: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(F*, where the Beta CDF is needed) [repeats x C, S] for :meth:`excess_cdf`: F* the root in
        [0, 1] (1 above excess(1), -1 below 0), needed where 0 < F* < 1 on the ``rows`` asked for."""
        y = np.asarray(excess_s, dtype=float)
        q = np.tile(self.quad_s, (repeats, 1))
        p = np.tile(self.lin_s, (repeats, 1)) - q * np.tile(self.mean, (repeats, 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            disc = np.sqrt(np.maximum(p * p + 4.0 * q * np.maximum(y, 0.0), 0.0))
            root_q = 2.0 * np.maximum(y, 0.0) / (p + disc)  # the stable form of (-p + disc) / (2 q)
            f = np.where(p + disc > 0, root_q, np.where(y >= 0, 1.0, -1.0))
        f = np.where(y < 0, -1.0, f)
        want = (f > 0.0) & (f < 1.0)
        if rows is not None:
            want &= np.tile(np.asarray(rows, dtype=bool), repeats)[:, None]
        return f, want

    def cdf_at(
        self,
        f: np.ndarray,
        want: np.ndarray,
        repeats: int = 1,
        params: tuple | None = None,
        dedupe: bool = True,
    ) -> np.ndarray:
        """:meth:`excess_cdf` from its :meth:`roots`: P(F <= F*), the Beta CDF where ``want``, of
        parameters ``params`` ((alpha, beta) [C, S] or per stratum [repeats, C, S]; None: this
        share's). Requests whose (alpha, beta, F*) columns repeat another's (equal outputs: the same
        window and shrink) take that column's values, computed once (:func:`distinct_columns`; not
        sought when ``dedupe`` is False: the columns are distinct requests already)."""
        alpha, beta = (self.alpha, self.beta) if params is None else params
        cols = distinct_columns(alpha, beta, f) if dedupe else None
        pick = slice(None) if cols is None else cols[0]
        a, b = alpha[..., pick], beta[..., pick]  # broadcast over the strata
        shape = (repeats, *a.shape[-2:])
        fc, wc = f[:, pick].reshape(shape), want[:, pick].reshape(shape)
        inside = betainc(a, b, np.clip(fc, 0.0, 1.0), out=np.zeros(shape), where=wc).reshape(len(f), -1)
        if cols is not None:
            inside = inside[:, cols[1]]
        return np.where(f >= 1.0, 1.0, np.where(f < 0.0, 0.0, inside))

    def bounds_at(
        self, f: np.ndarray, want: np.ndarray, repeats: int = 1, params: tuple | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) bounds on :meth:`cdf_at` without the Beta CDF: exact where F* is outside
        (0, 1), and inside it Cantelli's one-sided Chebyshev inequality on F (mean
        m = alpha / (alpha + beta), variance s^2 = m (1 - m) / (alpha + beta + 1)):
        P(F <= F*) >= 1 - s^2 / (s^2 + d^2) for F* = m + d above the mean and <= s^2 / (s^2 + d^2)
        below it (Cantelli 1928; Grimmett and Stirzaker, *Probability and Random Processes*, 3rd ed.,
        sec. 7.11, problem 9). The goodput search decides a candidate from these when they already
        settle its SLO test (model.serving.common.slo_ok). ``params`` as for :meth:`cdf_at`."""
        alpha, beta = (self.alpha, self.beta) if params is None else params
        shape = (repeats, *self.alpha.shape)  # the strata broadcast against [C, S]
        lo, hi = beta_cdf_bounds(alpha, beta, f.reshape(shape), want.reshape(shape), _cantelli_tail)
        return lo.reshape(f.shape), hi.reshape(f.shape)

    def mean_extra_s(self) -> np.ndarray:
        """E[excess(F)] = E[F] lin + quad Var[F] per candidate and request [C, S]."""
        var = self.mean * (1.0 - self.mean) / (self.alpha + self.beta + 1.0)
        return self.mean * self.lin_s + self.quad_s * var

    def top_s(self) -> np.ndarray:
        """The largest excess, excess(1), per candidate [C]."""
        return self.excess_s(np.ones_like(self.mean)).max(axis=1)

    def requests(self, mask: np.ndarray) -> MixedShare:
        """The same candidates restricted to the sampled requests ``mask``."""
        return MixedShare(*(v[:, mask] for v in self._fields()))

    def take(self, idx: np.ndarray) -> MixedShare:
        """Candidates ``idx`` along the leading axis."""
        return MixedShare(*(v[idx] for v in self._fields()))

    def _fields(self) -> tuple[np.ndarray, ...]:
        return (self.mean, self.alpha, self.beta, self.lin_s, self.quad_s, self.corr)


@dataclass(frozen=True, eq=False)
class MixedTpot:
    """A chunked replica's TPOT law at one target per candidate, P(b + s D + excess(F) <= x)
    (model.queueing.latency): the roots F* (:meth:`MixedShare.roots`) of every stratum of D, stacked
    along the rows [M x C, S], the candidates' ``stable`` [C], the strata's probabilities ``weights``
    [M] (None: 1 / M each) and F's Beta law given each stratum, ``params`` (alpha, beta) [M, C, S]
    (:meth:`MixedShare.given`; None: F independent of D). ``columns`` [S] (optional): the law is held
    on the distinct requests only (:func:`distinct_requests`), request i's values those of column
    ``columns[i]``, spread back before the strata are averaged (so entry for entry the same CDF)."""

    share: MixedShare
    roots: np.ndarray
    want: np.ndarray
    stable: np.ndarray
    weights: np.ndarray | None = None
    params: tuple[np.ndarray, np.ndarray] | None = None
    columns: np.ndarray | None = None

    @classmethod
    def at(
        cls,
        share: MixedShare,
        y: np.ndarray,
        shift: np.ndarray | None,
        stable: np.ndarray,
        strata: tuple | None = None,
        columns: np.ndarray | None = None,
    ) -> MixedTpot:
        """At excess ``y`` [C, S] over the plain step, less each stratum's ``shift`` [M, C, S] of D;
        ``strata`` = (probabilities [M], F's (alpha, beta) given each stratum [M, C, S]:
        :meth:`MixedShare.given`) (None: equiprobable, F independent of D); ``columns`` as the
        field (every [., S] argument then on the distinct requests)."""
        if shift is None:
            return cls(share, *share.roots(y, 1, stable), stable, columns=columns)
        roots = share.roots((y[None] - shift).reshape(-1, y.shape[1]), len(shift), stable)
        if strata is None:
            return cls(share, *roots, stable, columns=columns)
        weights, params = strata
        return cls(share, *roots, stable, np.asarray(weights, dtype=float), params, columns)

    def cdf(self, rows: np.ndarray | None = None, requests: np.ndarray | None = None) -> np.ndarray:
        """The exact CDF [C, S] (of candidates ``rows`` only when given: entry for entry the same).
        ``requests`` [C, S] bool (optional, without ``rows``): the Beta CDF only where True, the
        other entries read as if F* were outside (0, 1) (for a mean over those requests alone)."""
        if rows is None:
            want = self.want if requests is None else self.want & self._wanted(requests)
            cdf = self.share.cdf_at(self.roots, want, self._strata, self.params, self.columns is None)
            return self._average(self._spread(cdf), self.stable)
        n, m = len(self.stable), self._strata
        pick = (np.arange(m)[:, None] * n + rows[None, :]).ravel()
        params = None if self.params is None else tuple(v[:, rows] for v in self.params)
        cdf = self.share.take(rows).cdf_at(self.roots[pick], self.want[pick], m, params, self.columns is None)
        return self._average(self._spread(cdf), self.stable[rows])

    def bounds(self) -> tuple[np.ndarray, ...]:
        """(lower, upper) bounds on :meth:`cdf` (:meth:`MixedShare.bounds_at`), no Beta CDF."""
        lo_hi = self.share.bounds_at(self.roots, self.want, self._strata, self.params)
        return tuple(self._average(self._spread(v), self.stable) for v in lo_hi)

    def _spread(self, values: np.ndarray) -> np.ndarray:
        """Per-request values [rows, S] from those of the distinct requests (as is without ``columns``)."""
        return values if self.columns is None else np.ascontiguousarray(values[:, self.columns])

    def _wanted(self, requests: np.ndarray) -> np.ndarray:
        """``requests`` [C, S] on the rows of :attr:`roots`: a distinct request is wanted when any of
        the requests it stands for is."""
        mask = np.asarray(requests, dtype=bool)
        if self.columns is not None:
            held = np.zeros((self.want.shape[1], len(mask)), dtype=bool)
            np.logical_or.at(held, self.columns, mask.T)
            mask = held.T
        return np.tile(mask, (self._strata, 1))

    @property
    def _strata(self) -> int:
        return len(self.roots) // len(self.stable)

    def _average(self, cdf: np.ndarray, stable: np.ndarray) -> np.ndarray:
        """The strata averaged with their probabilities (a quadrature over D), capped at 1, 0 where
        not ``stable``."""
        if self._strata > 1:
            cdf = cdf.reshape(self._strata, len(stable), -1)
            cdf = cdf.mean(axis=0) if self.weights is None else np.tensordot(self.weights, cdf, axes=1)
        return np.where(stable[:, None], np.minimum(cdf, 1.0), 0.0)


@dataclass(frozen=True)
class Alternation:
    """The prefill busy / idle alternation of C replicas, in iterations (module docstring): mean
    occupation ``fbar``, start probability ``u`` (the wall utilisation) and correlation time
    ``theta`` [C each]."""

    fbar: np.ndarray
    u: np.ndarray
    theta: np.ndarray
    arrivals: tuple[np.ndarray, np.ndarray] | None = None  # lambda T_dec, lambda T_mix per iteration
    prompt_iterations: np.ndarray | None = None  # E[S] / T_mix: a prompt's mixed iterations


def alternation(
    rate_per_replica: np.ndarray,
    share_moments_s: tuple[np.ndarray, np.ndarray],
    decode_iteration_s: np.ndarray,
    mixed_iteration_s: np.ndarray,
    follow_on: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Alternation:
    """The alternation from the arrival rate per replica, a prompt's share (E[S], E[S^2]) [C] and
    the per-iteration times T_dec, T_mix [C] (module docstring). ``follow_on`` maps the prefill busy
    fraction u [C] to the busy period's follow-on load u_v [C] (None: u, Poisson joins;
    model.queueing.routing.chunked_follow_on_load behind a levelling router).

    With joins at lambda_b = u_v / E[S] while busy (and lambda_i while idle, set by flow balance so
    the wall busy fraction stays u = lambda E[S]: each prompt brings E[S] of work whatever routes it),
    the busy period is the M/G/1 one at load u_v, mean E[S] / (1 - u_v) and second moment
    E[S^2] / (1 - u_v)^3 (Kleinrock 1975, vol. 1, sec. 5.8) and the idle period exponential of mean
    E[S] (1 - u) / (u (1 - u_v)) (the cycle's busy share u): shorter cycles, a shorter correlation
    time theta. As the prefill-first clusters' follow-on load (model.queueing.routing.follow_on_load)
    u_v moves the variance only: the mean occupation Fbar is the same for any u_v, and the window's
    start keeps probability u (the share of joins finding the replica busy would be lambda_b u /
    lambda = u_v by level crossing, Kleinrock 1975, vol. 1, sec. 5.6; taken, it moved in-band cells
    out of the band: docs/session13/chov16.md, "not kept"). u_v = u is the Poisson alternation."""
    lam = np.asarray(rate_per_replica, dtype=float)
    m1, m2 = (np.asarray(v, dtype=float) for v in share_moments_s)
    t_dec = np.maximum(np.asarray(decode_iteration_s, dtype=float), 1e-12)
    t_mix = np.maximum(np.asarray(mixed_iteration_s, dtype=float), t_dec)
    u = np.clip(lam * m1, 0.0, 0.999)
    u_v = u if follow_on is None else np.clip(np.minimum(follow_on(u), u), 0.0, 0.999)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        busy_s = m1 / (1.0 - u_v)  # busy period, wall
        m_b = busy_s / t_mix  # in iterations
        var_b = np.maximum(m2 / (1.0 - u_v) ** 3 / t_mix**2 - m_b * m_b, 0.0)
        # idle period (exponential), in iterations: busy_s (1 - u) / u wall (1 / lambda at u_v = u)
        m_i = busy_s * (1.0 - u) / np.maximum(u, 1e-300) / t_dec
        cycle = m_b + m_i
        fbar = np.where((lam > 0) & (m1 > 0), m_b / cycle, 0.0)
        theta = (m_i * m_i * var_b + m_b * m_b * m_i * m_i) / (2.0 * cycle * m_b * m_i)
        theta = np.where(np.isfinite(theta) & (fbar > 0), theta, 0.0)
    return Alternation(fbar, np.where(fbar > 0, u, 0.0), theta, (lam * t_dec, lam * t_mix), m1 / t_mix)


def mixed_share(alt: Alternation, window_iterations: np.ndarray) -> tuple[np.ndarray, ...]:
    """(E[F], alpha, beta, rho_F) [C, S] of the mixed share over each request's window of n
    iterations ([S] or [C, S]), which starts in a busy period with probability u (module docstring);
    rho_F the correlation of F with the number of prompts arriving in the window
    (:func:`arrival_share_correlation`)."""
    n = np.atleast_2d(np.asarray(window_iterations, dtype=float))
    h, g = _window_factors(n, alt.theta[:, None])
    fbar = alt.fbar[:, None]
    mean = np.where(fbar > 0, fbar + (alt.u[:, None] - fbar) * h, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        conc = np.maximum(np.where(g > 0, 1.0 / g - 1.0, np.inf), _MIN_CONCENTRATION)
    conc = np.minimum(conc, 1e12)
    fb = np.clip(mean, 1e-12, 1.0 - 1e-12)
    rho = arrival_share_correlation(alt, n, mean, mean * (1.0 - mean) / (conc + 1.0))
    return mean, fb * conc, (1.0 - fb) * conc, rho


def arrival_share_correlation(
    alt: Alternation, window_iterations: np.ndarray, mean: np.ndarray, var: np.ndarray
) -> np.ndarray:
    """rho_F [C, S]: the correlation of the mixed share F (mean ``mean``, variance ``var``) with the
    number N of prompts that arrive in the request's window of n iterations. N is Poisson with mean
    mu = n (E[F] lambda T_mix + (1 - E[F]) lambda T_dec) (arrivals per iteration in each state), and
    each arrival, at a uniform point with u ~ U(0, n) iterations of the window left, runs its
    p = E[S] / T_mix mixed iterations, min(u, p) of them inside the window: E[F | N] = const + b N
    with b = E[min(U, p)] / n = phi(p / n), phi(x) = x - x^2 / 2 below 1 and 1/2 above (the
    M/G/inf coverage of the window, Takacs 1962, *Introduction to the Theory of Queues*, ch. 3; Hall
    1988, ch. 1; the prompt's share taken at its mean: exact for equal prompts, and an upper bound
    on b by Jensen as phi is concave). Cov[F, N] = b Var[N] = b mu (Poisson), so
    rho_F^2 = b^2 mu / Var[F], at most 1. For long windows b^2 mu n^2 -> mu E[S]^2 / T_mix^2, the
    mixed iterations' whole variance mu E[S^2] / T_mix^2 times E[S]^2 / E[S^2]; queueing behind a
    busy period shifts an arrival's iterations later (some past the window's end), not counted."""
    if alt.arrivals is None or alt.prompt_iterations is None:
        return np.zeros_like(mean)
    a_dec, a_mix = (v[:, None] for v in alt.arrivals)
    n = np.maximum(window_iterations, 1e-12)
    x = alt.prompt_iterations[:, None] / n
    b = np.where(x < 1.0, x - x * x / 2.0, 0.5)
    mu = n * (mean * a_mix + (1.0 - mean) * a_dec)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho2 = b * b * mu / var
    return np.sqrt(np.clip(np.where(np.isfinite(rho2) & (var > 0), rho2, 0.0), 0.0, 1.0))
