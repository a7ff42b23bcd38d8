"""KV offload tiers raise the sessions' hit rate (docs/model.md, KV offload tiers): the simulator's
prefix caches by the LRU stack property, and the planner's session capacity limit over HBM + tiers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from model.hardware.catalog import get_gpu
from model.hardware.kv_offload import node_for_gpu, parse_kv_offload
from model.planner.goodput import build_set, config_goodput
from model.serving.configs import ColocatedConfig
from model.serving.session_cache import limited_rates, session_tier_tokens, tiered_levels
from model.sim.engine import Recorder, SimRequests
from model.sim.prefix_cache import PoolCaches
from model.workload.presets import get_workload
from model.workload.scenario import Scenario
from model.workload.slo import SLO


def test_tier_hit_reloads_the_part_hbm_lacks() -> None:
    """16-token blocks; HBM holds 2 blocks, the cpu tier 4 more (reload 1 ms per token). After a
    64-token prompt (blocks 1-4) is cached, HBM keeps blocks 3, 4 (its most recent) and HBM + cpu all
    four. The next prompt (blocks 1-5, 80 tokens) misses in HBM (block 1 is gone, and a prefix match
    needs it) and finds 64 tokens at the cpu level: 64 cached tokens, 64 ms of reload."""
    req = SimRequests(
        np.array([0.0, 1.0]),
        np.array([64, 80]),
        np.array([1, 1]),
        hash_ids=((1, 2, 3, 4), (1, 2, 3, 4, 5)),
        block_tokens=16,
    )
    caches = PoolCaches(Recorder(req), 1, 32, "cache-aware", tiers=((64.0, lambda n: 0.001 * n),))
    caches.store_prompt(0, 0)
    assert caches.caches[0].match((1,)) == 0 and caches.caches[0].match((3, 4)) == 2
    assert caches.cached(0, 1) == 64
    assert caches.reload_s[1] == pytest.approx(0.064)
    no_tier = PoolCaches(Recorder(req), 1, 32, "cache-aware")
    no_tier.store_prompt(0, 0)
    assert no_tier.cached(0, 1) == 0


def test_tiers_raise_the_planners_session_hit_rate_and_goodput() -> None:
    """Llama-3.1-8B on one RTX 4090, multi-turn chat: a 96 GB cpu tier holds the sessions HBM cannot,
    so the capacity-limited hit rate at 5 req/s rises (0.68 -> 0.90 floored), part of the hits pay a
    reload (working set > HBM), and the goodput rises (3.84 -> 4.23 req/s when recorded)."""
    gpu = get_gpu("rtx-4090")
    cfg = ColocatedConfig(gpu, 1, 1)
    base = Scenario.build("llama-3.1-8b", get_workload("multiturn-chat"), SLO(0.5, 0.05))
    tiered = dataclasses.replace(base, kv_offload=parse_kv_offload("cpu:96GB", node_for_gpu("rtx-4090")))
    cs = build_set(tiered, [cfg])
    cap = np.array([t.kv_capacity_tokens for t in cs.tables])[cs.table_index]
    tiers = session_tier_tokens(tiered, cs.tables, cs.table_index)
    assert tiers[0] > 5 * cap[0]  # 48 GB per GPU of the 2-GPU node at 131 kB per token: 366k tokens
    h, w = tiered_levels(tiered, np.array([5.0]), cap, tiers, "colocated")
    assert h[0] > limited_rates(tiered, np.array([5.0]), cap, "colocated")[0]
    assert cap[0] < w[0] <= cap[0] + tiers[0]
    assert config_goodput(tiered, cfg) > 1.05 * config_goodput(base, cfg)
