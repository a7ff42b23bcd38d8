"""The overlap law of a light decode batch: how much of a request's decode other requests share.

At a batch of a few sequences a decoding request runs alone except while another request's decode
overlaps its own. The other requests form an M/G/inf process: Poisson arrivals at rate lambda,
sojourns S from the output law (S_j = O_j tokens of the instance's step). Those that overlap a
window [0, T] are the intervals [a, a + S] with a in (-S, T): a Poisson number K of mean
mu = lambda (E[S] + T) (the coverage count of a Boolean model on the line: Hall, "Introduction to the
Theory of Coverage Processes", 1988, sec. 3.1; the M/G/inf count of customers present during an
interval, Takacs, "Introduction to the Theory of Queues", 1962, ch. 3), each with its own S drawn
size-biased by S + T (an interval of length S meets the window over a range S + T of starts), and
its start uniform over that range. Its overlap L = min(a + S, T) - max(a, 0) is then, with
m = min(S, T), uniform on (0, m) with probability 2 m / (S + T) and equal to m otherwise (the two
ramps of the overlap against the start, and the plateau of length |S - T|), so

    P(L <= y) = sum_j [2 min(y, m_j) + |S_j - T| 1(y >= m_j)] / sum_j (S_j + T),
    E[L] = sum_j S_j T / sum_j (S_j + T),   E[L^2] = sum_j (2 m_j^3 / 3 + |S_j - T| m_j^2) / sum_j (S_j + T)

(int L da = S T over the range of starts). The request's shared time is the compound Poisson
Y = L_1 + .. + L_K (int_0^T N_others(t) dt, exact for the M/G/inf count), with P(K = 0) = e^{-mu},
the atom at "never shared". Fractions f = L / T are tabulated here per sampled output, in tokens: the
scale (the step) cancels. model.queueing.decode_spread (item 4) turns them into the TPOT law.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np
from scipy.special import ndtr

FRACTION_POINTS = 65
"""Uniform points f = 0, 1/64, .., 1 on which each request's one-overlap CDF P(L / T <= f) is tabulated
(read by linear interpolation: the law is piecewise linear in f between its atoms)."""
OTHER_POINTS = 256
"""The other requests' sojourns are the output sample's quantiles at this many midpoints (the sums
above over j), bounding the table's cost at S x OTHER_POINTS x FRACTION_POINTS."""


@dataclass(frozen=True, eq=False)
class OverlapLaw:
    """Per sampled request i (axis S): ``power`` = mu_i / m = 1 + T_i / E[O] (m the M/G/inf mean of the
    others, so mu_i = m power_i); one overlap's fraction f = L / T_i: its mean ``mean_f``, second
    moment ``m2_f`` and CDF ``table`` [S, FRACTION_POINTS] on the uniform grid of f in [0, 1]."""

    power: np.ndarray
    mean_f: np.ndarray
    m2_f: np.ndarray
    table: np.ndarray

    def requests(self, mask: np.ndarray) -> OverlapLaw:
        """The sampled requests selected by ``mask``."""
        return OverlapLaw(self.power[mask], self.mean_f[mask], self.m2_f[mask], self.table[mask])

    @cached_property
    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """(first request of each distinct output, each request's distinct output): the law depends on
        O_i alone, so item 4 of model.queueing.decode_spread is evaluated once per distinct output."""
        _, first, inverse = np.unique(self.power, return_index=True, return_inverse=True)
        return first, inverse.ravel()

    def one_cdf(self, f: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """P(L / T_i <= f) for f [R, len(cols)], request i = cols[k] along the last axis, linear in the
        table."""
        pos = np.clip(np.asarray(f, dtype=float), 0.0, 1.0) * (FRACTION_POINTS - 1)
        lo = np.minimum(pos.astype(np.intp), FRACTION_POINTS - 2)
        w = pos - lo
        req = np.asarray(cols)[None, :]
        left, right = self.table[req, lo], self.table[req, lo + 1]
        return np.where(np.asarray(f) < 0, 0.0, left + w * (right - left))


def overlap_law(output_tokens: np.ndarray) -> OverlapLaw:
    """The :class:`OverlapLaw` of these sampled outputs (cached per sample)."""
    o = np.ascontiguousarray(output_tokens, dtype=float)
    return _overlap_law(o.tobytes())


@lru_cache(maxsize=64)
def _overlap_law(output_bytes: bytes) -> OverlapLaw:
    """Module docstring's sums, per distinct window T = max(O_i - 1, 1) tokens, against the others'
    sojourns S_j = O_j (OTHER_POINTS quantiles of the sample)."""
    out = np.frombuffer(output_bytes, dtype=float)
    eo = max(float(out.mean()), 1.0)
    windows, inverse = np.unique(np.maximum(out - 1.0, 1.0), return_inverse=True)
    u = (np.arange(OTHER_POINTS) + 0.5) / OTHER_POINTS
    others = np.quantile(out, u) if len(out) > OTHER_POINTS else out
    t = windows[:, None]  # [W, 1]
    s = others[None, :]  # [1, J]
    m = np.minimum(s, t)
    plateau = np.abs(s - t)
    total = (s + t).sum(axis=1)  # [W]
    mean_f = (s * t).sum(axis=1) / total / windows
    m2_f = (2.0 * m**3 / 3.0 + plateau * m * m).sum(axis=1) / total / windows**2
    cdf = np.empty((len(windows), FRACTION_POINTS))
    for k, f in enumerate(np.linspace(0.0, 1.0, FRACTION_POINTS)):  # [W, J] per point: bounded memory
        y = f * t
        cdf[:, k] = (2.0 * np.minimum(y, m) + plateau * (y >= m - 1e-9)).sum(axis=1) / total
    table = np.minimum(cdf, 1.0)[inverse]
    law = OverlapLaw(1.0 + windows[inverse] / eo, mean_f[inverse], m2_f[inverse], table)
    for arr in (law.power, law.mean_f, law.m2_f, law.table):
        arr.flags.writeable = False
    return law


@dataclass(frozen=True, eq=False)
class LightLaw:
    """The light-batch TPOT law (model.queueing.decode_spread, item 4) of the candidates ``rows`` with
    alpha > 0: alpha [R, 1], the count's scale c [R, 1], the step at per-instance batches 1, 2, ..
    minus the mean ``levels`` [R, B], and per distinct output (OverlapLaw.columns) P(K = 0), P(K = 1),
    P(K >= 2) and the gamma shape and 1 / mean of F given K >= 2 [R, U]."""

    rows: np.ndarray
    alpha: np.ndarray
    count: np.ndarray
    levels: np.ndarray
    overlap: OverlapLaw
    p0: np.ndarray
    p1: np.ndarray
    p2: np.ndarray
    shape: np.ndarray
    inv_mean: np.ndarray

    def cdf(self, excess_s: np.ndarray, by_output: bool = False) -> np.ndarray:
        """P(tau(1 + c F) - mean <= excess) [R, S] for excess [R, 1] or [R, S] (``by_output``: varying
        with O_i only, unchecked; otherwise checked, and else every request computed)."""
        first, inverse = self.overlap.columns  # the law is computed once per distinct output O_i
        e, cols = excess_s, first
        p0, p1, p2, shape, inv_mean = self.p0, self.p1, self.p2, self.shape, self.inv_mean
        if e.shape[1] > 1:
            e_first = e[:, first]
            if by_output or np.array_equal(e_first[:, inverse], e):
                e = e_first
            else:
                p0, p1, p2, shape, inv_mean = (a[:, inverse] for a in (p0, p1, p2, shape, inv_mean))
                cols, inverse = first[inverse], None
        u = np.broadcast_to(self._others_within(e) / self.count, p0.shape)  # F <= u <=> TPOT <= x
        with np.errstate(divide="ignore", invalid="ignore"):
            # the gamma CDF by the Wilson-Hilferty cube root: (F / mean)^(1/3) ~ normal with mean
            # 1 - 1 / (9 k), variance 1 / (9 k) (Johnson, Kotz & Balakrishnan, "Continuous Univariate
            # Distributions" vol. 1, 2nd ed., sec. 17.5; CDF error < 0.01 for k >= 0.5, times P(K >= 2))
            ratio = np.maximum(u, 0.0) * inv_mean  # F over its mean given K >= 2
            wh = ndtr((np.cbrt(ratio) - 1.0 + 1.0 / (9.0 * shape)) * np.sqrt(9.0 * shape))
            two = np.where(shape > 0, wh, (ratio >= 1.0).astype(float))
        one = self.overlap.one_cdf(np.minimum(u, 2.0), cols)
        law = np.minimum(np.where(u >= 0, p0 + p1 * one + p2 * two, 0.0), 1.0)
        return law if inverse is None else law[:, inverse]

    def _others_within(self, excess_s: np.ndarray) -> np.ndarray:
        """u [R, X]: the largest time-average count of others F whose step tau(1 + F) (the per-instance
        step at integer batches, linear between them) is within ``excess_s`` [R, X] of the mean; -1
        below the alone step, inf at or above the top level."""
        dev = self.levels  # [R, B], nondecreasing
        k = (dev[:, None, :] <= excess_s[:, :, None]).sum(axis=2) - 1  # last level at or below
        top = dev.shape[1] - 1
        kk = np.clip(k, 0, top - 1)
        d0, d1 = np.take_along_axis(dev, kk, axis=1), np.take_along_axis(dev, kk + 1, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(d1 > d0, np.clip((excess_s - d0) / (d1 - d0), 0.0, 1.0), 0.0)
        return np.where(k < 0, -1.0, np.where(k >= top, np.inf, kk + frac))


def light_law(alone: np.ndarray, levels: np.ndarray, overlap: OverlapLaw) -> LightLaw | None:
    """:class:`LightLaw` of the candidates with alpha = ``alone`` > 0 (None without any).

    m = -ln alpha (the M/G/inf mean of the others a running request sees), mu_i = m power_i; the
    time-average count F = sum of K ~ Poisson(mu_i) one-overlap fractions has mean m. Given K >= 2
    the gamma takes the compound Poisson's conditional moments (E[F; K >= 2] = (mu - P1) E[f],
    E[F^2; K >= 2] = mu E[f^2] + mu^2 E[f]^2 - P1 E[f^2]; Ross, "Introduction to Probability Models",
    sec. 5.3.3, as the stall totals of model.queueing.latency). The count's scale c makes tau(1 + c F)
    keep Little's mean E_q[tau] to first order: c = (E_q[tau] - tau(1)) / (m (tau(2) - tau(1))), 1 on
    one instance at light batch, below 1 on a levelled pool (its per-token law's shared tokens sit at
    the pool's average batch N / R)."""
    rows = np.nonzero(alone > 0)[0]
    if len(rows) == 0:
        return None
    alpha = alone[rows][:, None]
    log_alpha = np.log(np.minimum(alpha, 1.0))
    first, _ = overlap.columns
    mu = -log_alpha * overlap.power[None, first]
    p0 = np.exp(-mu)
    p1 = mu * p0
    p2 = np.where(mu < 1e-4, mu * mu / 2.0, np.maximum(1.0 - p0 - p1, 0.0))
    ef, ef2 = overlap.mean_f[None, first], overlap.m2_f[None, first]
    with np.errstate(divide="ignore", invalid="ignore"):
        some = p2 > 0
        mean2 = np.where(some, (mu - p1) * ef / np.where(some, p2, 1.0), 2.0 * ef)
        sq2 = np.where(some, (mu * ef2 + mu * mu * ef * ef - p1 * ef2) / np.where(some, p2, 1.0), 0.0)
        sq2 = np.where(some & (mu >= 1e-4), sq2, 2.0 * ef2 + 2.0 * ef * ef)  # K = 2 as mu -> 0
        var = np.maximum(sq2 - mean2 * mean2, 0.0)
        shape = np.where(var > 0, mean2 * mean2 / np.where(var > 0, var, 1.0), 0.0)  # 0: a point
        inv_mean = np.where(mean2 > 0, 1.0 / np.where(mean2 > 0, mean2, 1.0), np.inf)
        lv = levels[rows]
        count = -lv[:, :1] / (-log_alpha * (lv[:, 1:2] - lv[:, :1]))
    count = np.where(np.isfinite(count) & (count > 0), count, 1.0)
    return LightLaw(rows, alpha, count, lv, overlap, p0, p1, p2, shape, inv_mean)


def arrival_correlation(output_tokens: np.ndarray) -> np.ndarray:
    """[S] rho_D: the correlation of request i's window-average batch with the number N of arrivals
    in its own decode window of T = O_i - 1 tokens, for the M/G/inf count (sojourns the sampled
    outputs O, in tokens; model.queueing.decode_spread item 3). The count over the window is the
    sequences present at its start (independent of N: Poisson arrivals in disjoint intervals,
    Kingman 1993, *Poisson Processes*, ch. 2) plus the window's own arrivals, each at a uniform
    time with u ~ U(0, T) of the window left and present for min(u, O) of it (the coverage above).
    So E[window average | N] = const + c N, c = E[min(U, O)] / T = E[1/2 if O >= T else
    O / T - O^2 / (2 T^2)], and Cov = c Var[N] = c lambda T; the window average's variance is
    (2 lambda / T^2) E[int_0^T (T - t)(O - t)+ dt] (Eick, Massey and Whitt 1993; the integral
    T^2 O / 2 - T^3 / 6 for O >= T, T O^2 / 2 - O^3 / 6 otherwise), so
    rho_D^2 = c^2 T^3 / (2 E[integral]): 0 at T = 0, T / (4 (O - T / 3)) for equal outputs O >= T,
    E[O]^2 / E[O^2] for long windows. The per-token time is taken linear in the count (the
    spread's linearisation), so rho_D is the per-token deviation's correlation too."""
    return _arrival_correlation(np.ascontiguousarray(output_tokens, dtype=float).tobytes())


@lru_cache(maxsize=64)
def _arrival_correlation(output_bytes: bytes) -> np.ndarray:
    """:func:`arrival_correlation`, cached per sample (the others at OTHER_POINTS quantiles)."""
    out = np.frombuffer(output_bytes, dtype=float)
    o = np.quantile(out, (np.arange(OTHER_POINTS) + 0.5) / OTHER_POINTS)[None, :]
    t = np.maximum(out - 1.0, 1e-9)[:, None]
    long = o >= t
    c = np.where(long, 0.5, o / t - o * o / (2.0 * t * t)).mean(axis=1)
    inner = np.where(long, t * t * o / 2.0 - t**3 / 6.0, t * o * o / 2.0 - o**3 / 6.0).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho2 = c * c * t[:, 0] ** 3 / (2.0 * inner)
    rho = np.sqrt(np.clip(np.where(np.isfinite(rho2), rho2, 0.0), 0.0, 1.0))
    rho.flags.writeable = False
    return rho
