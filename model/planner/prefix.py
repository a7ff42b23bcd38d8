"""Prefix caching in the planner: which hit rate a plan uses, and the reason line it adds.

The hit rate comes from, in order: the request's ``prefix_hit_rate``; a trace's block hashes
(Mooncake ``hash_ids``), replayed through an LRU cache the size of one instance's free KV memory
(model.workload.prefix.replay_prefix_cache); or the workload's own (a preset's session structure,
model.workload.sessions, or 0). The replay uses one instance of the smallest layout that fits
(its KV memory after weights, model.physics.memory): with cache-aware routing each prefix stays on
the instance that holds it, so one instance's capacity is a lower bound on what a fleet keeps; the
simulator checks it with one LRU cache per instance (model.sim.prefix_cache).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from model.hardware.engines import Engine
from model.hardware.gpus import GPU
from model.llm.arch import LLMArch
from model.physics.deployment import Deployment
from model.physics.memory import memory_fit
from model.planner.types import BestConfig
from model.serving.registry import style_of
from model.workload.prefix import MOONCAKE_BLOCK_TOKENS, check_hit_rate, check_routing, replay_prefix_cache
from model.workload.presets import Workload
from model.workload.scenario import Scenario


def instance_cache_tokens(
    arch: LLMArch,
    gpu: GPU,
    engine: Engine,
    tp_options: list[int],
    dtypes: tuple[str, str | None] = ("bf16", None),
) -> float:
    """KV tokens one instance can cache: the free KV memory of the smallest TP option that fits
    (model.physics.memory.memory_fit at the engine's prefill token cap); 0 when none fits."""
    for tp in sorted(tp_options):
        dep = Deployment(
            arch,
            gpu,
            parallel=tp,
            weight_dtype=dtypes[0],
            kv_dtype=dtypes[1],
            step_overhead_s=engine.step_overhead_s(gpu),
        )
        fit = memory_fit(dep, max_batched_tokens=engine.prefill_token_cap)
        if bool(fit.fits):
            return float(fit.kv_capacity_tokens)
    return 0.0


def with_prefix_hit_rate(
    wl: Workload, request: Any, arch: LLMArch, gpu: GPU, engine: Engine, tp_options: list[int]
) -> Workload:
    """``wl`` with the hit rate the plan uses (see the module docstring); errors name the field."""
    routing = check_routing(request.prefix_routing, "prefix_routing")
    if request.prefix_hit_rate is not None:
        h = check_hit_rate(request.prefix_hit_rate, "prefix_hit_rate")
        # A given rate holds wherever prefill runs; decode instances hold nothing (as the simulator's
        # fixed-rate mode, model.sim.prefix_cache).
        return replace(wl, prefix_cache_hit_rate=h, prefill_pool_hit_rate=None, decode_prefix_hit_rate=0.0)
    if wl.block_hashes is None:
        return wl
    prompt = wl.pairs[:, 0] if wl.pairs is not None else None
    if prompt is None or len(prompt) != len(wl.block_hashes):
        return wl
    cap = instance_cache_tokens(arch, gpu, engine, tp_options, (request.dtype, request.kv_dtype))
    rep = replay_prefix_cache(wl.block_hashes, prompt, cap, 1, routing, MOONCAKE_BLOCK_TOKENS)
    return replace(wl, prefix_cache_hit_rate=rep.hit_rate)


def prefix_reason(scn: Scenario, best: BestConfig) -> str | None:
    """One sentence on prefix caching in the recommended configuration (None when the hit rate is 0):
    the prompt tokens prefill computes, where the two styles' hit rates differ (a disaggregated
    prefill instance holds earlier prompts but not the answers decoded elsewhere) and, disaggregated,
    how much KV the decode instance already holds."""
    wl = scn.workload
    h = wl.prefix_cache_hit_rate
    pool = wl.prefill_pool_hit_rate
    if not (h > 0 or (pool or 0.0) > 0):
        return None
    dis = style_of(best.config).family == "disaggregated"
    cached = scn.prefill_pool_cached_tokens if dis else scn.cached_tokens
    here = pool if dis and pool is not None else h
    computed = float(np.mean(scn.prompt_tokens - cached))
    line = (
        f"Prefix caching in {best.label}: {here:.0%} of prompt tokens are found in the cache, so prefill "
        f"computes {computed:,.0f} of the {scn.mean_prompt_tokens:,.0f} tokens of a mean prompt "
        "(attention still reads the cached prefix)"
    )
    if pool is not None and abs(pool - h) >= 0.005:
        line += (
            f"; a colocated replica finds {h:.0%} and a disaggregated prefill instance {pool:.0%} "
            "(it holds earlier prompts, not the answers decoded elsewhere)"
        )
    if dis:
        hd = wl.decode_prefix_hit_rate
        line += (
            f"; the decode instance already holds {hd:.0%} of each prompt's KV and receives only the rest"
            if hd > 0
            else "; the decode instance still receives each prompt's whole KV"
        )
    return line + "."
