"""Prefix caching: the hit rate a prefix cache reaches, from a parameter or from a trace's block hashes.

A prefix cache keeps the KV of prompt blocks an instance has already computed, so a later prompt
that starts with the same blocks skips their prefill compute (attention over them still runs:
model.physics.steps.prefill_cost, ``cached_tokens``). Sources:

- vLLM automatic prefix caching (docs.vllm.ai, "Automatic Prefix Caching", design notes): KV blocks
  are identified by a hash of the block's tokens and of every token before it, so a hit on block i
  implies hits on blocks 0 .. i - 1; only full blocks are cached; unused cached blocks stay in the
  free pool and are evicted least recently used first when memory is needed.
- SGLang RadixAttention (Zheng et al., "SGLang: Efficient execution of structured language model
  programs", NeurIPS 2024, sec. 3): the same reuse kept in a radix tree with LRU eviction, and
  cache-aware scheduling / routing that sends a request where its longest prefix is cached.
- Mooncake (Qin et al., "Mooncake: a KVCache-centric disaggregated architecture for LLM serving",
  FAST 2025, sec. 4 and its public traces): per-request ``hash_ids``, one id per 512-token block,
  equal ids = same prefix block; the prefill pool holds the cache and a KV-cache-aware scheduler
  picks the prefill instance with the longest cached prefix.
- NVIDIA Dynamo KV-aware router (docs.nvidia.com/dynamo, "KV Cache Routing"): routes by the overlap
  of a request's blocks with each worker's cached blocks, weighed against the worker's load.

This module is the one place the LRU block cache and the routing rules live; the simulator
(model.sim.prefix_cache) keeps one such cache per instance during a run, and
:func:`replay_prefix_cache` replays a trace through them without timing (arrival order only) to
give the hit rate the analytical planner uses.
"""

from __future__ import annotations

import math
import numbers
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from model.errors import InputError

__all__ = [
    "MOONCAKE_BLOCK_TOKENS",
    "ROUTINGS",
    "BlockCache",
    "PrefixReplay",
    "cached_from_blocks",
    "check_hit_rate",
    "parse_hit_rate",
    "replay_prefix_cache",
]

# Tokens per hash block in the Mooncake traces (Qin et al. FAST 2025, sec. 4; trace README).
MOONCAKE_BLOCK_TOKENS = 512
# Routing rules for a request among instances that each keep their own prefix cache.
ROUTINGS = ("random", "least-loaded", "cache-aware")


def check_hit_rate(value: object, field: str = "prefix_hit_rate") -> float:
    """``value`` as a fraction in [0, 1], or InputError naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (0.0 <= float(value) <= 1.0):
        raise InputError(field, value, "a fraction of prompt tokens in [0, 1] (e.g. 0.5)")
    return float(value)


def check_routing(value: object, field: str = "routing") -> str:
    """One of :data:`ROUTINGS`, or InputError naming ``field``."""
    if value not in ROUTINGS:
        raise InputError(field, value, "one of " + ", ".join(ROUTINGS))
    return str(value)


def cached_from_blocks(matched_blocks: int, prompt_tokens: int, block_tokens: int) -> int:
    """Prompt tokens served from the cache: the matched blocks' tokens, at most prompt - 1 (the last
    prompt token is always computed, to produce the first token's logits; vLLM does the same)."""
    return max(min(matched_blocks * block_tokens, prompt_tokens - 1), 0)


class BlockCache:
    """One instance's prefix cache: block hash ids, least recently used first, at most
    ``capacity_blocks`` of them (vLLM's free-block LRU eviction; SGLang's LRU radix-tree leaves)."""

    __slots__ = ("_blocks", "capacity_blocks")

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity_blocks = max(int(capacity_blocks), 0)
        self._blocks: OrderedDict[Hashable, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def match(self, ids: Sequence[Hashable]) -> int:
        """Blocks of ``ids`` cached as an unbroken prefix (a block's hash covers all before it)."""
        blocks = self._blocks
        n = 0
        for h in ids:
            if h not in blocks:
                break
            n += 1
        return n

    def insert(self, ids: Sequence[Hashable]) -> None:
        """Mark ``ids`` most recently used (adding the missing ones), evicting the least recently used."""
        if self.capacity_blocks == 0:
            return
        blocks = self._blocks
        for h in ids:
            if h in blocks:
                blocks.move_to_end(h)
            else:
                blocks[h] = None
        while len(blocks) > self.capacity_blocks:
            blocks.popitem(last=False)


# SGLang's cache-aware router falls back to the least-loaded worker when the load is badly unbalanced:
# max - min > balance_abs_threshold and max > balance_rel_threshold x min (sgl-router / SMG
# `--balance-abs-threshold` 64, `--balance-rel-threshold` 1.5, their defaults; docs "Load Balancing",
# cache_aware policy). Without it one replica that caches a shared system prompt takes every request.
BALANCE_ABS_REQUESTS = 64.0
BALANCE_REL = 1.5


def route(
    caches: Sequence[BlockCache],
    ids: Sequence[Hashable],
    loads: Sequence[float],
    routing: str,
    draw,
    balance: bool = False,
) -> int:
    """The instance a request goes to.

    ``random``: uniform (``draw(n)`` returns an index); ``least-loaded``: the smallest load, lowest
    index on ties; ``cache-aware``: the longest cached prefix, ties (and no hit anywhere) by the
    least load: SGLang's cache-aware router and Dynamo's KV router, with the load weight set so that
    any overlap wins (their default thresholds send a request to the cache holder unless the load is
    badly unbalanced). ``balance`` (``loads`` are live request counts, as in the simulator): when they
    are badly unbalanced (BALANCE_ABS_REQUESTS, BALANCE_REL) cache-aware routing takes the least
    loaded instead, as SGLang's router does.
    """
    n = len(caches)
    if n == 1:
        return 0
    if routing == "random":
        return int(draw(n))
    if routing == "cache-aware" and balance:
        lo, hi = min(loads), max(loads)
        if hi - lo > BALANCE_ABS_REQUESTS and hi > BALANCE_REL * lo:
            return min(range(n), key=lambda i: (loads[i], i))
    if routing == "cache-aware":
        best, key = 0, None
        for i, c in enumerate(caches):
            k = (-c.match(ids), loads[i], i)
            if key is None or k < key:
                best, key = i, k
        return best
    return min(range(n), key=lambda i: (loads[i], i))


@dataclass(frozen=True, eq=False)
class PrefixReplay:
    """A trace replayed through per-instance LRU prefix caches (arrival order, no timing).

    ``hit_rate``: cached prompt tokens / all prompt tokens; ``cached_tokens`` and ``instance`` per
    request."""

    hit_rate: float
    cached_tokens: np.ndarray
    instance: np.ndarray
    capacity_tokens: float
    instances: int
    routing: str


def replay_prefix_cache(
    hash_ids: Sequence[Sequence[Hashable]],
    prompt_tokens: Sequence[int] | np.ndarray,
    capacity_tokens: float,
    instances: int = 1,
    routing: str = "cache-aware",
    block_tokens: int = MOONCAKE_BLOCK_TOKENS,
    seed: int = 0,
) -> PrefixReplay:
    """Prefix-cache hit rate of a trace with block hashes on ``instances`` instances that each cache
    ``capacity_tokens`` tokens (e.g. the KV memory left after weights, model.physics.memory), routed by
    ``routing`` (:data:`ROUTINGS`; least-loaded counts the requests routed so far, since the replay
    has no service times). Each request looks up its blocks (hit = unbroken cached prefix, at most
    prompt - 1 tokens), then the instance caches all of them (LRU).

    More instances split the traffic: with random or least-loaded routing each instance must see a
    prefix once before it can hit, so the hit rate falls with the instance count; cache-aware routing
    keeps each prefix where it is cached (the per-replica reuse of a colocated fleet, or of a
    disaggregated prefill pool).
    """
    prompts = np.asarray(prompt_tokens, dtype=np.int64)
    if len(hash_ids) != len(prompts):
        raise InputError("hash_ids", f"{len(hash_ids)} lists", f"one list per request ({len(prompts)})")
    if isinstance(capacity_tokens, bool) or not (
        isinstance(capacity_tokens, numbers.Real) and math.isfinite(capacity_tokens) and capacity_tokens >= 0
    ):
        raise InputError("capacity_tokens", capacity_tokens, "a number of KV tokens >= 0")
    if (
        isinstance(instances, bool)
        or not isinstance(instances, numbers.Integral)
        or not 1 <= instances <= 4096
    ):
        raise InputError("instances", instances, "a whole number in [1, 4096]")
    if isinstance(block_tokens, bool) or not isinstance(block_tokens, numbers.Integral) or block_tokens < 1:
        raise InputError("block_tokens", block_tokens, "a whole number of tokens >= 1")
    routing = check_routing(routing)
    caches = [BlockCache(int(capacity_tokens // block_tokens)) for _ in range(int(instances))]
    loads = [0.0] * int(instances)
    rng = np.random.default_rng(seed)
    cached = np.zeros(len(prompts), dtype=np.int64)
    where = np.zeros(len(prompts), dtype=np.int64)
    for r, ids in enumerate(hash_ids):
        i = route(caches, ids, loads, routing, lambda n: rng.integers(0, n))
        cached[r] = cached_from_blocks(caches[i].match(ids), int(prompts[r]), int(block_tokens))
        caches[i].insert(ids)
        loads[i] += 1.0
        where[r] = i
    total = float(prompts.sum())
    hit = float(cached.sum()) / total if total > 0 else 0.0
    return PrefixReplay(hit, cached, where, float(capacity_tokens), int(instances), routing)


def parse_hit_rate(text: object, field: str = "prefix_hit_rate") -> float | None:
    """A hit rate written as "0.5" or "50%" (blank: None, the workload's own); InputError naming
    ``field`` otherwise. The one reader of a typed hit rate (CLI, app, scenario files)."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    if not isinstance(text, str):
        return check_hit_rate(text, field)
    t = text.strip()
    scale = 100.0 if t.endswith("%") else 1.0
    try:
        value = float(t.rstrip("%").strip()) / scale
    except ValueError:
        raise InputError(field, text, "a fraction of prompt tokens in [0, 1] (e.g. 0.5 or 50%)") from None
    if not math.isfinite(value):
        raise InputError(field, text, "a fraction of prompt tokens in [0, 1] (e.g. 0.5 or 50%)")
    return check_hit_rate(value, field)
