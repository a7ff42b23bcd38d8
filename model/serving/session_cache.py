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

KV offload tiers (``scenario.kv_offload`` without a working set): an instance's LRU keeps sessions
in HBM and its share of the tiers below, so the hit rates are those of the HBM + tier capacity
(:func:`session_tier_tokens`); by the LRU stack property (Mattson et al., "Evaluation techniques for
storage hierarchies", IBM Systems Journal 9(2), 1970: an LRU cache of c items holds the c most
recently used, a subset of any larger LRU's content) the hits HBM alone would keep stay in HBM and
the rest are found in the tiers, fastest first. That split is handed to the phase tables as the
prefix working set W = C_hbm / (HBM share of the hits), whose placement
(model.physics.kv_tiers.prefix_placement) puts that share in HBM and the rest in the tiers, each
reloaded at its bandwidth (:func:`tiered_levels`). With a working set given, it decides instead.

Rates are floored to steps of HIT_RATE_STEP (a conservative rounding of at most that much; coarser
steps build fewer tables) and the candidates of each step evaluated together with tables for that
step's hit rates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, is_dataclass, replace
from functools import lru_cache

import numpy as np

from model.physics.kv_tiers import tier_tokens
from model.serving.common import StyleResult
from model.workload.scenario import Scenario
from model.workload.session_levels import history_hit_levels
from model.workload.sessions import cached_implied_hit_rates, capacity_hit_rates

HIT_RATE_STEP = 0.02
ENVIRONMENT_LEVELS = 8
"""Equiprobable levels of the live footprint's law over which a disaggregated prefill pool's queue is
averaged (model.queueing.environment, pointwise stationary approximation). Not fitted: the exact
conditional hit probability is used in each level, so the levels' mean is the marginal hit rate at
any count; the count only resolves the wait's average over the footprint's law (docs/model.md,
"Misses in bursts")."""
# Arrays shared by every candidate (axis = sampled requests), not stacked over candidates.
_SHARED_FIELDS = ("output_tokens", "overlap")  # per sampled request, not per candidate


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
    holds_output = kind != "prefill_pool"  # a prefill instance holds prompts, not answers
    h = capacity_hit_rates(
        scn.workload.sessions, rate_per_instance_rps, capacity_tokens, implied, holds_output
    )
    return np.minimum(floored(h), implied)


def pool_miss_levels(
    scn: Scenario, rate_per_instance_rps: np.ndarray, capacity_tokens: np.ndarray, instances: np.ndarray
) -> np.ndarray:
    """[C, ENVIRONMENT_LEVELS] P(a prefill-pool turn misses its history | footprint level):
    1 - model.workload.sessions' ``history_hit_levels`` at one instance's rate and capacity (HBM +
    tiers). Each of the pool's n_p instances holds its own sessions, so their footprints are
    independent and the pool's miss share is the mean of n_p independent levels: its variance is
    1 / n_p of one instance's (Bienaymé), matched by contracting the levels toward their mean by
    1 / sqrt(n_p) (the first two moments of the pool's share; exact for n_p = 1)."""
    shape = scn.workload.sessions
    m = 1.0 - history_hit_levels(shape, rate_per_instance_rps, capacity_tokens, False, ENVIRONMENT_LEVELS)
    mean = m.mean(axis=-1, keepdims=True)
    return mean + (m - mean) / np.sqrt(np.asarray(instances, dtype=float))[:, None]


def session_tier_tokens(scn: Scenario, tables: list, index: np.ndarray) -> np.ndarray:
    """KV tokens of the offload tiers each candidate's instance keeps sessions in [C] (0 without
    tiers, or when the scenario's own working set places the reused prefixes)."""
    off = scn.kv_offload
    if off is None or off.working_set_tokens is not None or not off.tiers:
        return np.zeros(len(index))
    per_table = np.array([float(sum(tier_tokens(t.dep, off))) for t in tables])
    return per_table[np.asarray(index, dtype=int)]


def tiered_levels(
    scn: Scenario, rate_per_instance_rps: np.ndarray, hbm_tokens: np.ndarray, tiers: np.ndarray, kind: str
) -> tuple[np.ndarray, np.ndarray]:
    """(hit rates [C] at the HBM + tier capacity, working set W [C] that places the HBM share of the
    hits in HBM: C_hbm / share, share = h(C_hbm) / h(C_hbm + tiers) floored to HIT_RATE_STEP
    (conservative: more reloads), at most C_hbm + tiers; 0 where no tier is used)."""
    h = limited_rates(scn, rate_per_instance_rps, hbm_tokens + tiers, kind)
    if not np.any(tiers > 0):
        return h, np.zeros_like(h)
    h_hbm = limited_rates(scn, rate_per_instance_rps, hbm_tokens, kind)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(h > 0, np.minimum(h_hbm / np.where(h > 0, h, 1.0), 1.0), 1.0)
    share = np.maximum(floored(share), HIT_RATE_STEP)
    w = np.minimum(hbm_tokens / share, hbm_tokens + tiers)
    return h, np.where((tiers > 0) & (share < 1.0), np.round(w, -3), 0.0)


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


@lru_cache(maxsize=512)
def at_levels(
    scn: Scenario, colocated: float, prefill_pool: float, decode: float, working_set: float
) -> Scenario:
    """:func:`at_hit_rates`, and the offload tiers' working set ``working_set`` (0: unchanged) that
    places the sessions' hits between HBM and the tiers (:func:`tiered_levels`)."""
    out = at_hit_rates(scn, colocated, prefill_pool, decode)
    if working_set <= 0 or out.kv_offload is None:
        return out
    return replace(out, kv_offload=replace(out.kv_offload, working_set_tokens=float(working_set)))


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
        if f.name in _SHARED_FIELDS:
            values[f.name] = v0
        elif is_dataclass(v0):
            values[f.name] = _merge(n, [(idx, v) for (idx, _), v in zip(parts, vals, strict=True)])
        elif isinstance(v0, np.ndarray) and v0.ndim >= 1 and f.name not in _SHARED_FIELDS:
            out = np.empty((n, *v0.shape[1:]), dtype=v0.dtype)
            for (idx, _), v in zip(parts, vals, strict=True):
                out[idx] = v
            values[f.name] = out
        else:
            values[f.name] = v0
    return type(first)(**values)
