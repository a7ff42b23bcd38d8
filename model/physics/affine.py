"""Step times that are the max of two affine lines: the one kink-splitting function.

A step's compute time and memory time are each affine in one variable when everything else is held
fixed (decode: the context, attention FLOPs and KV bytes grow linearly with it; chunked prefill: the
chunk's prefix length), while communication and overhead do not depend on it. So the roofline time
max(compute, memory) + fixed has at most one kink. :func:`affine_terms` reads the two lines off two
step costs; :func:`affine_max_sum` sums max of two lines over a range of integer indices exactly,
splitting at the kink into two arithmetic series (used by whole-request decode sums, the planner's
chunked-prefill tables and, pointwise via :func:`affine_terms`, the simulator's step tables).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class AffineTerms(NamedTuple):
    """time(x) = max(c0 + c1 x, m0 + m1 x) + fixed."""

    c0: np.ndarray
    c1: np.ndarray
    m0: np.ndarray
    m1: np.ndarray
    fixed: np.ndarray


def affine_terms(cost_a, cost_b, x_a: float | np.ndarray, x_b: float | np.ndarray) -> AffineTerms:
    """The lines through two step costs (objects with compute_s, memory_s, comm_s, overhead_s and an
    optional draft_s) taken at x_a != x_b of the affine variable; ``fixed`` = comm + overhead of
    ``cost_a``. A speculative drafting time (``draft_s``, model.physics.speculation) is added to both
    lines, which keeps max(compute, memory) + draft exact at the two points and affine in between."""
    dx = np.asarray(x_b, dtype=float) - np.asarray(x_a, dtype=float)
    ca, cb = cost_a.compute_s + _draft(cost_a), cost_b.compute_s + _draft(cost_b)
    ma, mb = cost_a.memory_s + _draft(cost_a), cost_b.memory_s + _draft(cost_b)
    c1 = (cb - ca) / dx
    m1 = (mb - ma) / dx
    return AffineTerms(ca - c1 * x_a, c1, ma - m1 * x_a, m1, cost_a.comm_s + cost_a.overhead_s)


def _draft(cost) -> np.ndarray | float:
    return getattr(cost, "draft_s", 0.0)


def series_sum(lo: np.ndarray, hi: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum over integers i in [lo, hi] of (a + b i); 0 for an empty range."""
    count = np.maximum(hi - lo + 1.0, 0.0)
    return count * a + b * count * (lo + hi) / 2.0


def affine_max_sum(
    c0: np.ndarray, c1: np.ndarray, m0: np.ndarray, m1: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """Exact sum over integers i in [lo, hi] of max(c0 + c1 i, m0 + m1 i); 0 for an empty range.

    = sum of the memory line + sum of d(i) = (c0 - m0) + (c1 - m1) i over the indices where d > 0;
    those indices form one run ending or starting at the crossing i* = -(c0 - m0) / (c1 - m1).
    Vectorised; O(1) per element.
    """
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    da, db = c0 - m0, c1 - m1
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        cross = np.where(db != 0, -da / np.where(db != 0, db, 1.0), np.inf)
    # Only where the crossing falls relative to [lo, hi] matters: clipping keeps it finite when a
    # nearly flat difference (|c1 - m1| ~ 1e-309) overflows the division, which left 0 x inf = NaN.
    cross = np.clip(cross, lo - 1.0, hi + 1.0)
    lo_c = np.where(db > 0, np.maximum(np.floor(cross) + 1.0, lo), lo)
    hi_c = np.where(db < 0, np.minimum(np.ceil(cross) - 1.0, hi), hi)
    lo_c = np.where((db == 0) & ~(da > 0), hi + 1.0, lo_c)  # flat and compute not larger: none
    return series_sum(lo, hi, m0, m1) + series_sum(lo_c, np.maximum(hi_c, lo_c - 1.0), da, db)
