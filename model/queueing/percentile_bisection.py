"""The percentile search of model.queueing.latency: a bisection on a sample-mean CDF, per candidate,
over all sampled requests or over those of a request mask (e.g. a prompt-length class)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["BISECT_STEPS", "bisect_quantile", "masked_mean", "row_extreme"]

BISECT_STEPS = 32  # bracket / 2**32: far below any reported precision


def row_extreme(values: np.ndarray, masks: np.ndarray | None, pick: Callable[..., np.ndarray]) -> np.ndarray:
    """Row max or min (``pick``) of ``values`` [C, S], over the columns of ``masks[c]`` when given."""
    if masks is None:
        return pick(values, axis=1)
    return np.array(
        [pick(row[m]) for row, m in zip(np.broadcast_to(values, masks.shape), masks, strict=True)]
    )


def masked_mean(cdf: np.ndarray, masks: np.ndarray | None) -> np.ndarray:
    """Row means of ``cdf`` [C, S], over the columns of ``masks[c]`` when given."""
    if masks is None:
        return cdf.mean(axis=1)
    return np.where(masks, cdf, 0.0).sum(axis=1) / masks.sum(axis=1)


def bisect_quantile(
    cdf: Callable[[np.ndarray], np.ndarray],
    lo: np.ndarray,
    hi: np.ndarray,
    q: float | np.ndarray,
    stable: np.ndarray,
) -> np.ndarray:
    """Smallest t with cdf(t) >= q, per candidate, by bisection between lo and hi."""
    lo = np.where(stable, np.asarray(lo, dtype=float), 0.0)
    hi = np.where(stable, np.asarray(hi, dtype=float), 1.0)
    hi = np.maximum(hi, lo)
    for _ in range(BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        ok = cdf(mid) >= q
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    return np.where(stable, hi, np.inf)
