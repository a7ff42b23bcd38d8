"""Session hit rates under the cache-capacity limit, per candidate and request rate.

A session workload's hit rates (model.workload.sessions.implied_hit_rates) hold for a cache that
keeps every session between its turns. An instance's LRU cache holds only its KV capacity, so past
some rate per instance the sessions' working set outgrows it and the rate falls
(model.workload.sessions.capacity_hit_rates, Che et al. 2002): a plan near that limit would be
optimistic with the implied rates (docs/validation.md, "Prefix caching and multi-turn sessions").
The candidate sets (model.serving.candidates) therefore evaluate a session workload at the hit rates
each candidate's own caches reach at the trial rate: a colocated replica's at lambda / R with its KV
capacity; a disaggregated prefill instance's (it holds earlier prompts) at lambda / n_p and a
decode instance's (it holds the turns it decoded) at lambda / n_d, each with its own capacity. So the
goodput search sees a hit rate that falls as its trial rate rises, and its answer is the fixed point
"the highest rate that meets the SLOs at the hit rate that rate leaves".

Rates are floored to steps of HIT_RATE_STEP (a conservative rounding of at most that much; coarser
steps build fewer tables) and the candidates of each step evaluated together with tables for that
step's hit rates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, is_dataclass, replace
from functools import lru_cache

import numpy as np

from model.serving.common import StyleResult
from model.workload.scenario import Scenario
from model.workload.sessions import cached_implied_hit_rates, capacity_hit_rates

HIT_RATE_STEP = 0.02
# Arrays shared by every candidate (axis = sampled requests), not stacked over candidates.
_SHARED_FIELDS = ("output_tokens",)


def capacity_limited(scn: Scenario) -> bool:
    """Whether ``scn`` is a session workload at its implied hit rates (a hit rate given by the user,
    model.planner.prefix.with_prefix_hit_rate, holds as given)."""
    shape = scn.workload.sessions
    if shape is None:
        return False
    implied = cached_implied_hit_rates(shape)
    return abs(scn.workload.prefix_cache_hit_rate - implied.colocated) < 1e-9


def floored(h: np.ndarray) -> np.ndarray:
    """Hit rates floored to HIT_RATE_STEP (never above the rate they stand for)."""
    return np.floor(np.asarray(h, dtype=float) / HIT_RATE_STEP + 1e-9) * HIT_RATE_STEP


def limited_rates(scn: Scenario, rate_per_instance_rps: np.ndarray, capacity_tokens: np.ndarray, kind: str):
    """Floored capacity-limited hit rates [C] of ``kind`` "colocated", "prefill_pool" or "decode"."""
    implied = getattr(cached_implied_hit_rates(scn.workload.sessions), kind)
    h = capacity_hit_rates(scn.workload.sessions, rate_per_instance_rps, capacity_tokens, implied)
    return np.minimum(floored(h), implied)


@lru_cache(maxsize=512)
def at_hit_rates(scn: Scenario, colocated: float, prefill_pool: float, decode: float) -> Scenario:
    """``scn`` with its workload's three hit rates replaced (one scenario per level, cached so the
    phase tables of a level are built once)."""
    wl = replace(
        scn.workload,
        prefix_cache_hit_rate=colocated,
        prefill_pool_hit_rate=prefill_pool,
        decode_prefix_hit_rate=decode,
    )
    return replace(scn, workload=wl)


def by_level(levels: np.ndarray, run: Callable[[tuple[float, ...], np.ndarray], StyleResult]) -> StyleResult:
    """Evaluate candidates grouped by their row of ``levels`` [C, m] (``run(level, indices)`` gives
    the result of those candidates) and put the rows back in candidate order."""
    keys, inverse = np.unique(np.round(levels, 9), axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    parts = []
    for j, key in enumerate(keys):
        idx = np.nonzero(inverse == j)[0]
        parts.append((idx, run(tuple(float(x) for x in key), idx)))
    if len(parts) == 1:
        return parts[0][1]
    return _merge(len(levels), parts)


def _merge(n: int, parts: list[tuple[np.ndarray, object]]) -> object:
    """One dataclass of arrays over n candidates from parts over disjoint index sets."""
    first = parts[0][1]
    values = {}
    for f in fields(first):
        vals = [getattr(p, f.name) for _, p in parts]
        v0 = vals[0]
        if is_dataclass(v0):
            values[f.name] = _merge(n, [(idx, v) for (idx, _), v in zip(parts, vals, strict=True)])
        elif isinstance(v0, np.ndarray) and v0.ndim >= 1 and f.name not in _SHARED_FIELDS:
            out = np.empty((n, *v0.shape[1:]), dtype=v0.dtype)
            for (idx, _), v in zip(parts, vals, strict=True):
                out[idx] = v
            values[f.name] = out
        else:
            values[f.name] = v0
    return type(first)(**values)
