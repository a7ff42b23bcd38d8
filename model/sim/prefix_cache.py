"""Prefix caches in the simulator: one LRU block cache per instance, the routing rule that reads
them, and the request generators that carry cache information.

Each colocated replica, each prefill instance and each decode instance keeps a
:class:`model.workload.prefix.BlockCache` of ``kv_capacity_tokens / block_tokens`` blocks (vLLM's
automatic prefix caching keeps cached blocks in the free KV pool and evicts them LRU; SGLang's
RadixAttention likewise, Zheng et al. NeurIPS 2024, sec. 3). When a prefill starts, the request's
prompt blocks are looked up (hit = unbroken cached prefix, at most prompt - 1 tokens) and only the
rest is computed; when the prefill ends its prompt blocks are cached; when the request ends, the
instance that decoded it caches its prompt and output blocks (so the next turn of a session can hit
them). A decode instance that already holds a prefix receives only the rest of the KV (vLLM's KV
connectors and Dynamo pull only the blocks the decode worker lacks).

KV offload tiers below HBM (``tiers``: each tier's capacity in tokens and reload time): each
instance also keeps an LRU of HBM + the first tier, HBM + the first two, and so on. Under the same
reference stream an LRU of c blocks holds the c most recently used (the stack property, Mattson et
al., IBM Systems Journal 9(2), 1970), so the blocks the HBM cache lacks but the next level holds are
exactly those in that tier: a prompt's cached prefix is the longest match over the levels, and the
part beyond each smaller level's match is reloaded from its tier (:attr:`PoolCaches.reload_s`).

Requests carry either ``hash_ids`` (per-request block ids: a Mooncake trace, or
:func:`session_requests`) or fixed ``cached_tokens`` (a hit rate given as a parameter: every
request finds that share of its prompt cached wherever it runs, and decode instances hold nothing).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from model.errors import InputError
from model.sim.engine import Recorder, SimRequests
from model.sim.requests import poisson_requests
from model.workload.prefix import BlockCache, cached_from_blocks, check_hit_rate, check_routing, route
from model.workload.presets import Workload
from model.workload.scenario import cached_prompt_tokens
from model.workload.sessions import session_trace

__all__ = [
    "PoolCaches",
    "session_or_poisson_requests",
    "session_requests",
    "with_hit_rate",
]


class PoolCaches:
    """The prefix caches of one pool's ``n`` instances during a run (inactive without hash ids, where
    :meth:`cached` returns the requests' fixed ``cached_tokens``, or 0 for a decode pool)."""

    def __init__(
        self,
        rec: Recorder,
        n: int,
        capacity_tokens: int,
        routing: str,
        decode: bool = False,
        tiers: tuple[tuple[float, Callable[[float], float]], ...] = (),
    ) -> None:
        self.rec = rec
        self.routing = check_routing(routing, "prefix_routing")
        self.active = rec.hash_ids is not None
        self.decode = decode
        b = rec.block_tokens
        self.caches = [BlockCache(capacity_tokens // b) for _ in range(n)] if self.active else []
        # offload tiers: LRUs of HBM + the tiers down to each (module docstring) and their reloads
        self.reloads = [fn for _, fn in tiers] if self.active else []
        tops = np.cumsum([capacity_tokens] + [c for c, _ in tiers])[1:]
        self.levels = [[BlockCache(int(t) // b) for t in tops] for _ in range(n)] if self.reloads else []
        self.reload_s: dict[int, float] = {}  # request -> reload time of its tier hits (popped by users)
        self._rng = np.random.default_rng(0)

    def _prompt_ids(self, r: int) -> tuple:
        ids = self.rec.hash_ids[r]
        return ids[: math.ceil(self.rec.prompt[r] / self.rec.block_tokens)]

    def cached(self, i: int, r: int) -> int:
        """Prompt tokens of request ``r`` found in instance ``i``'s cache."""
        if not self.active:
            fixed = self.rec.fixed_cached
            return 0 if fixed is None or self.decode else fixed[r]
        ids = self._prompt_ids(r)
        m = self.caches[i].match(ids)
        prompt, b = self.rec.prompt[r], self.rec.block_tokens
        hit = cached_from_blocks(m, prompt, b)
        if self.levels:
            reload = 0.0
            for cache, fn in zip(self.levels[i], self.reloads, strict=True):
                deeper = cached_from_blocks(cache.match(ids), prompt, b)
                if deeper > hit:
                    reload += fn(deeper - hit)
                    hit = deeper
            self.reload_s[r] = reload
        return hit

    def pick(self, r: int, loads: list[float], balance: bool = False) -> int | None:
        """The instance for request ``r`` by the routing rule; None when inactive (keep the pool's own).
        ``balance``: ``loads`` are live request counts (model.workload.prefix.route)."""
        if not self.active:
            return None
        ids = self._prompt_ids(r)
        return route(self.caches, ids, loads, self.routing, lambda n: self._rng.integers(0, n), balance)

    def store_prompt(self, i: int, r: int) -> None:
        """Cache request ``r``'s prompt blocks on instance ``i`` (its prefill has ended)."""
        if self.active:
            ids = self._prompt_ids(r)
            self.caches[i].insert(ids)
            for cache in self.levels[i] if self.levels else ():
                cache.insert(ids)

    def store_all(self, i: int, r: int) -> None:
        """Cache request ``r``'s prompt and output blocks on instance ``i`` (it has ended)."""
        if self.active:
            ids = self.rec.hash_ids[r]
            self.caches[i].insert(ids)
            for cache in self.levels[i] if self.levels else ():
                cache.insert(ids)


def with_hit_rate(requests: SimRequests, hit_rate: float | None) -> SimRequests:
    """``requests`` with a fixed prefix hit rate (cached = floor(h x prompt), at most prompt - 1),
    replacing any block ids; unchanged when ``hit_rate`` is None."""
    if hit_rate is None:
        return requests
    h = check_hit_rate(hit_rate, "prefix_hit_rate")
    cached = cached_prompt_tokens(requests.prompt_tokens, h).astype(np.int64)
    return dataclasses.replace(requests, cached_tokens=cached if h > 0 else None, hash_ids=None)


def session_requests(workload: Workload, rate_rps: float, n: int, seed: int = 0) -> SimRequests:
    """``n`` requests of the workload's multi-turn sessions (model.workload.sessions) arriving at
    ``rate_rps`` on average, with per-request block ids over each session's growing context."""
    if workload.sessions is None:
        raise InputError(
            "workload", workload.name, "a workload with sessions (e.g. 'multiturn-chat', 'agentic')"
        )
    t = session_trace(workload.sessions, rate_rps, n, seed)
    return SimRequests(
        t.arrival_s,
        t.prompt_tokens,
        t.output_tokens,
        source=f"{workload.name} sessions @ {rate_rps:g}/s",
        hash_ids=t.hash_ids,
        block_tokens=t.block_tokens,
        session_ids=t.session_ids,
    )


def session_or_poisson_requests(workload: Workload, rate_rps: float, n: int, seed: int = 0) -> SimRequests:
    """Session requests for a workload with sessions, else Poisson arrivals of independent requests
    (model.sim.requests.poisson_requests, carrying the workload's fixed hit rate). A session preset
    given a hit rate of its own (``replace(wl, prefix_cache_hit_rate=h, sessions=None)``, as
    ``pdplan simulate --prefix-hit-rate`` does) is replayed as independent requests."""
    if workload.sessions is not None:
        return session_requests(workload, rate_rps, n, seed)
    return poisson_requests(workload, rate_rps, n, seed)
