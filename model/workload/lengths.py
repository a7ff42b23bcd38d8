"""Token-length distributions: integer token counts >= 1 with the raw moments of their law.

A length distribution (:class:`LengthDist`) draws integer token counts >= 1 and reports its raw
moments E[X^k] of the *continuous* law before rounding to integers (rounding moves the mean by at
most 0.5 token). model.workload.presets pairs a prompt and an output distribution into a Workload.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from model.errors import InputError

__all__ = [
    "Empirical",
    "Fixed",
    "LengthDist",
    "LogNormal",
    "Mixture",
    "QuantileTable",
    "Uniform",
    "check_n",
    "check_rng",
    "stratum_levels",
]

_Z90 = float(stats.norm.ppf(0.9))  # 1.2815515655446004, standard normal 90th percentile


def check_rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise InputError("rng", rng, "a numpy.random.Generator, e.g. np.random.default_rng(0)")
    return rng


def check_n(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise InputError("n", n, "an integer >= 0")
    return int(n)


def _to_tokens(x: np.ndarray) -> np.ndarray:
    return np.maximum(np.rint(x), 1).astype(np.int64)


class LengthDist:
    """Base class of token-length distributions (integer samples >= 1)."""

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n integer token counts (np.int64)."""
        return _to_tokens(self._sample_float(check_n(n), check_rng(rng)))

    def _sample_float(self, n: int, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def moment(self, k: int) -> float:
        """Raw moment E[X^k] of the continuous law (k >= 1)."""
        raise NotImplementedError

    def mean(self) -> float:
        """E[X] in tokens."""
        return self.moment(1)

    def variance(self) -> float:
        """Var[X] = E[X^2] - E[X]^2."""
        return max(self.moment(2) - self.moment(1) ** 2, 0.0)

    def scv(self) -> float:
        """Squared coefficient of variation Var[X] / E[X]^2 (0 for a fixed length)."""
        return self.variance() / self.mean() ** 2

    def quantile(self, q: float) -> float:
        """q-quantile of the continuous law (0 < q < 1)."""
        raise NotImplementedError

    def stratified(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n integer token counts, one per probability stratum [i/n, (i+1)/n): each the stratum's mean
        of the quantile function Q (midpoint rule on STRATUM_POINTS sub-levels), in random order. The
        n values keep the law's mean to the quadrature's accuracy (their sum approximates the
        integral of Q over (0, 1), which is E[X]), where n independent draws err by sd / sqrt(n):
        384 of them put the chat preset's mean prompt 10% above the law's. Stratified sampling:
        McKay, Beckman & Conover 1979, Technometrics 21(2) 239-245 (Latin hypercube sampling, here
        with each stratum's conditional mean instead of one draw in it)."""
        n = check_n(n)
        rng = check_rng(rng)
        u = stratum_levels(n).reshape(-1)
        means = self._at_levels_float(u).reshape(n, STRATUM_POINTS).mean(axis=1)
        return _to_tokens(means[rng.permutation(n)])

    def _at_levels_float(self, u: np.ndarray) -> np.ndarray:
        """Q(u) for an array of levels in (0, 1) (a loop over :meth:`quantile` unless overridden)."""
        return np.array([self.quantile(float(q)) for q in u])


STRATUM_POINTS = 32
"""Sub-levels per stratum of :meth:`LengthDist.stratified` (midpoint rule on each stratum's mean)."""


def stratum_levels(n: int) -> np.ndarray:
    """[n, STRATUM_POINTS] levels: row i holds the midpoints of STRATUM_POINTS equal sub-intervals of
    the stratum [i/n, (i+1)/n) (for a pair of lengths drawn together: row i's middle, ``[:, m/2]``)."""
    i = np.arange(n, dtype=float)[:, None]
    j = (np.arange(STRATUM_POINTS, dtype=float)[None, :] + 0.5) / STRATUM_POINTS
    return (i + j) / max(n, 1)


def _check_q(q: float) -> float:
    if not (0.0 < q < 1.0):
        raise InputError("q", q, "a quantile level strictly between 0 and 1")
    return float(q)


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError("k", k, "an integer moment order >= 1")
    return k


def _positive(name: str, value: float) -> float:
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise InputError(name, value, "a finite number of tokens > 0")
    return v


@dataclass(frozen=True)
class Fixed(LengthDist):
    """Every request has exactly ``tokens`` tokens."""

    tokens: int

    def __post_init__(self) -> None:
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int | np.integer) or self.tokens < 1:
            raise InputError("tokens", self.tokens, "an integer >= 1")

    def _sample_float(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.full(n, float(self.tokens))

    def moment(self, k: int) -> float:
        return float(self.tokens) ** _check_k(k)

    def quantile(self, q: float) -> float:
        _check_q(q)
        return float(self.tokens)


@dataclass(frozen=True)
class Uniform(LengthDist):
    """Continuous uniform on [low, high] tokens, rounded: E[X^k] = (h^{k+1} - l^{k+1}) / ((k+1)(h - l))."""

    low: float
    high: float

    def __post_init__(self) -> None:
        _positive("low", self.low)
        if not (math.isfinite(self.high) and self.high > self.low):
            raise InputError("high", self.high, f"a finite number of tokens > low ({self.low})")

    def _sample_float(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(self.low, self.high, n)

    def moment(self, k: int) -> float:
        k = _check_k(k)
        return (self.high ** (k + 1) - self.low ** (k + 1)) / ((k + 1) * (self.high - self.low))

    def quantile(self, q: float) -> float:
        return self.low + _check_q(q) * (self.high - self.low)

    def _at_levels_float(self, u: np.ndarray) -> np.ndarray:
        return self.low + u * (self.high - self.low)


@dataclass(frozen=True)
class LogNormal(LengthDist):
    """ln X ~ Normal(mu, sigma^2), optionally clipped to [min_tokens, max_tokens] (mass piles at the ends).

    Raw moments of the clipped law (Johnson, Kotz & Balakrishnan 1994, *Continuous Univariate
    Distributions* vol. 1, ch. 14, partial moments of the lognormal):
    E[Y^k] = a^k Phi(alpha) + b^k (1 - Phi(beta)) + e^{k mu + k^2 sigma^2 / 2} [Phi(beta - k sigma)
    - Phi(alpha - k sigma)], with alpha = (ln a - mu)/sigma, beta = (ln b - mu)/sigma.
    """

    mu: float
    sigma: float
    min_tokens: float = 1.0
    max_tokens: float = math.inf

    def __post_init__(self) -> None:
        if not math.isfinite(self.mu):
            raise InputError("mu", self.mu, "a finite log-scale location")
        if not (math.isfinite(self.sigma) and self.sigma > 0):
            raise InputError("sigma", self.sigma, "a finite log-scale spread > 0")
        _positive("min_tokens", self.min_tokens)
        if not self.max_tokens > self.min_tokens:
            raise InputError("max_tokens", self.max_tokens, f"> min_tokens ({self.min_tokens})")

    @classmethod
    def fit(
        cls, median: float, p90: float, *, min_tokens: float = 1.0, max_tokens: float = math.inf
    ) -> LogNormal:
        """Fit to a median and a 90th percentile: mu = ln(median), sigma = ln(p90 / median) / z_0.9.

        z_0.9 = 1.28155 is the standard-normal 90th percentile. Needs p90 > median > 0.
        """
        med = _positive("median", median)
        p = _positive("p90", p90)
        if p <= med:
            raise InputError("p90", p90, f"> median ({median}) for a lognormal fit")
        return cls(math.log(med), math.log(p / med) / _Z90, min_tokens, max_tokens)

    @classmethod
    def from_mean_scv(cls, mean: float, scv: float, **bounds: float) -> LogNormal:
        """Fit to a mean and SCV: sigma^2 = ln(1 + scv), mu = ln(mean) - sigma^2 / 2 (unclipped law)."""
        m = _positive("mean", mean)
        s = _positive("scv", scv)
        s2 = math.log1p(s)
        return cls(math.log(m) - s2 / 2.0, math.sqrt(s2), **bounds)

    def _sample_float(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.clip(rng.lognormal(self.mu, self.sigma, n), self.min_tokens, self.max_tokens)

    def moment(self, k: int) -> float:
        k = _check_k(k)
        a, b, mu, s = self.min_tokens, self.max_tokens, self.mu, self.sigma
        alpha = (math.log(a) - mu) / s
        beta = (math.log(b) - mu) / s if math.isfinite(b) else math.inf
        body = math.exp(k * mu + 0.5 * k * k * s * s) * (
            special.ndtr(beta - k * s) - special.ndtr(alpha - k * s)
        )
        upper = b**k * special.ndtr(-beta) if math.isfinite(b) else 0.0
        return float(a**k * special.ndtr(alpha) + upper + body)

    def quantile(self, q: float) -> float:
        x = math.exp(self.mu + self.sigma * float(stats.norm.ppf(_check_q(q))))
        return min(max(x, self.min_tokens), self.max_tokens)

    def _at_levels_float(self, u: np.ndarray) -> np.ndarray:
        return np.clip(np.exp(self.mu + self.sigma * special.ndtri(u)), self.min_tokens, self.max_tokens)


@dataclass(frozen=True, eq=False)
class Empirical(LengthDist):
    """Resample observed token counts (e.g. from a trace); moments are those of the sample."""

    values: np.ndarray

    def __post_init__(self) -> None:
        v = np.asarray(self.values)
        if v.ndim != 1 or v.size == 0:
            raise InputError("values", f"array of shape {v.shape}", "a non-empty 1-D array of token counts")
        if not np.all(np.isfinite(v)) or np.any(v < 1):
            raise InputError("values", float(v[~(np.isfinite(v) & (v >= 1))][0]), "token counts >= 1")
        object.__setattr__(self, "values", np.asarray(v, dtype=np.int64))

    def _sample_float(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.values[rng.integers(0, self.values.size, n)].astype(float)

    def moment(self, k: int) -> float:
        return float(np.mean(self.values.astype(float) ** _check_k(k)))

    def quantile(self, q: float) -> float:
        return float(np.quantile(self.values, _check_q(q)))

    def _at_levels_float(self, u: np.ndarray) -> np.ndarray:
        # the observed values themselves (a stratum of the sorted sample), not interpolated ones
        v = np.sort(self.values)
        return v[np.minimum((u * v.size).astype(np.int64), v.size - 1)].astype(float)


@dataclass(frozen=True)
class QuantileTable(LengthDist):
    """Inverse CDF through (probability, tokens) knots, log-linear between knots.

    Q(p) = exp(interp(p, probs, ln values)); probs must run from 0 to 1. Sampling is Q(U) with
    U ~ Uniform(0, 1) (inverse-transform sampling, Devroye 1986, *Non-Uniform Random Variate
    Generation*, sec. II.2). Raw moments are exact for this law: on a knot segment where
    ln Q is linear from l0 to l1 over a width w, the integral of Q^k is
    w (e^{k l1} - e^{k l0}) / (k (l1 - l0)).
    """

    probs: tuple[float, ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        p = np.asarray(self.probs, dtype=float)
        v = np.asarray(self.values, dtype=float)
        if p.ndim != 1 or p.shape != v.shape or p.size < 2:
            raise InputError("probs", self.probs, "at least two knots, as many as values")
        if p[0] != 0.0 or p[-1] != 1.0 or np.any(np.diff(p) <= 0):
            raise InputError("probs", self.probs, "strictly increasing, from 0 to 1")
        if np.any(v < 1) or np.any(np.diff(v) < 0) or not np.all(np.isfinite(v)):
            raise InputError("values", self.values, "finite, nondecreasing token counts >= 1")
        object.__setattr__(self, "probs", tuple(float(x) for x in p))
        object.__setattr__(self, "values", tuple(float(x) for x in v))

    def _inv(self, u: np.ndarray) -> np.ndarray:
        return np.exp(np.interp(u, self.probs, np.log(self.values)))

    def _sample_float(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self._inv(rng.random(n))

    def moment(self, k: int) -> float:
        k = _check_k(k)
        p = np.asarray(self.probs)
        lv = np.log(np.asarray(self.values))
        w = np.diff(p)
        l0, l1 = lv[:-1], lv[1:]
        d = k * (l1 - l0)
        with np.errstate(divide="ignore", invalid="ignore"):
            seg = np.where(d > 1e-12, np.expm1(d) / d, 1.0) * np.exp(k * l0)
        return float(np.sum(w * seg))

    def quantile(self, q: float) -> float:
        return float(self._inv(np.asarray(_check_q(q))))

    def _at_levels_float(self, u: np.ndarray) -> np.ndarray:
        return self._inv(u)


@dataclass(frozen=True)
class Mixture(LengthDist):
    """With probability weights[i] draw from components[i]; E[X^k] = sum_i w_i E[X_i^k]."""

    weights: tuple[float, ...]
    components: tuple[LengthDist, ...]

    def __post_init__(self) -> None:
        w = np.asarray(self.weights, dtype=float)
        if w.ndim != 1 or w.size == 0 or w.size != len(self.components):
            raise InputError("weights", self.weights, "one weight per component, at least one")
        if np.any(w < 0) or not np.all(np.isfinite(w)) or w.sum() <= 0:
            raise InputError("weights", self.weights, "finite weights >= 0 with a positive sum")
        object.__setattr__(self, "weights", tuple(float(x) for x in w / w.sum()))
        object.__setattr__(self, "components", tuple(self.components))

    def _sample_float(self, n: int, rng: np.random.Generator) -> np.ndarray:
        which = rng.choice(len(self.weights), size=n, p=self.weights)
        out = np.empty(n)
        for i, comp in enumerate(self.components):
            m = which == i
            out[m] = comp._sample_float(int(m.sum()), rng)
        return out

    def moment(self, k: int) -> float:
        return float(sum(w * c.moment(k) for w, c in zip(self.weights, self.components, strict=True)))

    def _at_levels_float(self, u: np.ndarray) -> np.ndarray:
        """The composition method at given levels: the level picks component i when it falls in
        [W_{i-1}, W_i) (cumulative weights) and, rescaled to (u - W_{i-1}) / w_i, is that
        component's level, so stratified levels stay stratified within each component."""
        cum = np.concatenate([[0.0], np.cumsum(self.weights)])
        which = np.minimum(np.searchsorted(cum, u, side="right") - 1, len(self.weights) - 1)
        out = np.empty(u.shape)
        for i, comp in enumerate(self.components):
            m = which == i
            if m.any():
                v = np.clip((u[m] - cum[i]) / max(self.weights[i], 1e-300), 1e-12, 1.0 - 1e-12)
                out[m] = comp._at_levels_float(v)
        return out

    def quantile(self, q: float) -> float:
        """Root of sum_i w_i F_i(x) = q found on the components' quantiles (bisection, 60 steps)."""
        _check_q(q)
        lo = min(c.quantile(1e-9) for c in self.components)
        hi = max(c.quantile(1.0 - 1e-9) for c in self.components)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if self._cdf(mid) < q:
                lo = mid
            else:
                hi = mid
        return hi

    def _cdf(self, x: float) -> float:
        total = 0.0
        for w, c in zip(self.weights, self.components, strict=True):
            total += w * _cdf_by_bisection(c, x)
        return total


def _cdf_by_bisection(d: LengthDist, x: float) -> float:
    if isinstance(d, Fixed):
        return 1.0 if x >= d.tokens else 0.0
    if isinstance(d, Empirical):
        return float(np.mean(d.values <= x))
    lo, hi = 1e-12, 1 - 1e-12
    if x < d.quantile(lo):
        return 0.0
    if x >= d.quantile(hi):
        return 1.0
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if d.quantile(mid) <= x:
            lo = mid
        else:
            hi = mid
    return lo
