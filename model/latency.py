"""Per-request latency distributions, percentiles and SLO attainment from analytical components.

Each candidate configuration c is described by
- a random queue wait W_c shared by all its requests: P(W > t) = p_c exp(-t / m_c) (the
  exponential-tail form of model.queueing, exact for M/M/c), and a fixed latency d_ci per sampled
  request i (prefill compute, exposed KV transfer, link and admission waits), so
  TTFT_ci = W_c + d_ci;
- a TPOT made of a base step time b_c plus stalls: during its O_i - 1 token gaps a request meets a
  Poisson number of stall events (mean n_ci) of random length (moments s1_c, s2_c): prefills that
  pre-empt decodes in colocated serving, or mixed prefill iterations with chunking. Given at least
  one event the stall total is approximated by a gamma distribution with the compound-Poisson
  moments (Ross, "Introduction to Probability Models", sec. 5.3.3: E = n s1, Var = n s2),
  conditioned on N >= 1; the gamma keeps the total positive, as stalls are.

Attainment is the sample mean of P(TTFT_ci <= T) P(TPOT_ci <= P) (TTFT and TPOT treated as
independent); a percentile is found by bisection on the sample-mean CDF.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammainc

_BISECT_STEPS = 48


@dataclass(frozen=True, eq=False)
class LatencyModel:
    """Arrays over candidates (leading axis C) and sampled requests (axis S)."""

    wait_prob: np.ndarray  # [C] P(W > 0); 1 where unstable
    wait_cond_mean_s: np.ndarray  # [C] E[W | W > 0]; inf where unstable
    fixed_s: np.ndarray  # [C, S] deterministic TTFT part per request
    tpot_base_s: np.ndarray  # [C]
    stall_events: np.ndarray  # [C, S] expected stall events during the request's decode
    stall_m1_s: np.ndarray  # [C] mean stall length
    stall_m2_s2: np.ndarray  # [C] second moment of stall length
    output_tokens: np.ndarray  # [S]
    stable: np.ndarray  # [C] bool

    def ttft_cdf(self, t_s: np.ndarray) -> np.ndarray:
        """P(TTFT_ci <= t) for t broadcast against [C, S]."""
        slack = np.asarray(t_s) - self.fixed_s
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            tail = np.where(
                self.wait_cond_mean_s[:, None] > 0,
                np.exp(-np.maximum(slack, 0.0) / self.wait_cond_mean_s[:, None]),
                0.0,
            )
        exceed = self.wait_prob[:, None] * tail
        cdf = np.where(slack >= 0, 1.0 - exceed, 0.0)
        return np.where(self.stable[:, None], cdf, 0.0)

    def tpot_cdf(self, x_s: np.ndarray) -> np.ndarray:
        """P(TPOT_ci <= x): no-stall atom plus a gamma for the stalled case (module docstring)."""
        gaps = np.maximum(self.output_tokens - 1.0, 1.0)[None, :]
        n = self.stall_events
        p0 = np.exp(-n)
        base = self.tpot_base_s[:, None]
        x = np.asarray(x_s)
        atom = np.where(x >= base, 1.0, 0.0)
        if not np.any(n > 0):  # no stalls (disaggregated): TPOT is the base step time
            return np.where(self.stable[:, None], np.broadcast_to(atom, n.shape), 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            cond_mean = n * self.stall_m1_s[:, None] / np.maximum(1.0 - p0, 1e-300)
            cond_m2 = (n * self.stall_m2_s2[:, None] + (n * self.stall_m1_s[:, None]) ** 2) / np.maximum(
                1.0 - p0, 1e-300
            )
            cond_var = np.maximum(cond_m2 - cond_mean**2, 0.0)
            # Gamma with the conditional mean and variance: shape k = m^2 / v, scale = v / m.
            shape = np.where(cond_var > 0, cond_mean**2 / cond_var, np.inf)
            scale = np.where(cond_mean > 0, cond_var / cond_mean, 0.0)
            extra = np.maximum((x - base) * gaps, 0.0)  # stall time the request can absorb
            z = np.where(scale > 0, extra / scale, np.inf)
            stalled = np.where(
                np.isfinite(shape) & (scale > 0),
                gammainc(np.where(np.isfinite(shape), shape, 1.0), z),
                (extra >= cond_mean).astype(float),
            )
        stalled = np.where(x >= base, stalled, 0.0)
        cdf = p0 * atom + (1.0 - p0) * np.where(n > 0, stalled, atom)
        return np.where(self.stable[:, None], cdf, 0.0)

    def mean_tpot_s(self) -> np.ndarray:
        """Sample-mean TPOT per candidate: base + E[stall total] / (O - 1)."""
        gaps = np.maximum(self.output_tokens - 1.0, 1.0)[None, :]
        per = self.tpot_base_s[:, None] + self.stall_events * self.stall_m1_s[:, None] / gaps
        return np.where(self.stable, per.mean(axis=1), np.inf)

    def attainment(self, ttft_slo_s: float | np.ndarray, tpot_slo_s: float | np.ndarray) -> np.ndarray:
        """Fraction of requests meeting both targets, per candidate."""
        ttft = np.broadcast_to(np.asarray(ttft_slo_s, dtype=float), self.stable.shape)[:, None]
        tpot = np.broadcast_to(np.asarray(tpot_slo_s, dtype=float), self.stable.shape)[:, None]
        both = self.ttft_cdf(ttft) * self.tpot_cdf(tpot)
        return np.where(self.stable, both.mean(axis=1), 0.0)

    def ttft_percentile_s(self, q: float) -> np.ndarray:
        """q-quantile (0 < q < 1) of TTFT over requests, per candidate; inf where unstable."""
        hi = np.max(self.fixed_s, axis=1) + np.where(
            np.isfinite(self.wait_cond_mean_s), self.wait_cond_mean_s * (np.log(1.0 / (1.0 - q)) + 5.0), 0.0
        )
        lo = np.min(self.fixed_s, axis=1)
        return _bisect(lambda t: self.ttft_cdf(t[:, None]).mean(axis=1), lo, hi, q, self.stable)

    def tpot_percentile_s(self, q: float) -> np.ndarray:
        """q-quantile of TPOT over requests, per candidate; inf where unstable."""
        gaps = np.maximum(self.output_tokens - 1.0, 1.0)[None, :]
        worst = self.stall_events * self.stall_m1_s[:, None] + 6.0 * np.sqrt(
            np.maximum(self.stall_events, 1.0) * self.stall_m2_s2[:, None]
        )
        hi = self.tpot_base_s + np.max(worst / gaps, axis=1)
        return _bisect(lambda x: self.tpot_cdf(x[:, None]).mean(axis=1), self.tpot_base_s, hi, q, self.stable)


def _bisect(cdf, lo: np.ndarray, hi: np.ndarray, q: float, stable: np.ndarray) -> np.ndarray:
    """Smallest t with cdf(t) >= q, per candidate, by bisection between lo and hi."""
    lo = np.where(stable, np.asarray(lo, dtype=float), 0.0)
    hi = np.where(stable, np.asarray(hi, dtype=float), 1.0)
    hi = np.maximum(hi, lo)
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        ok = cdf(mid) >= q
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    return np.where(stable, hi, np.inf)
