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
