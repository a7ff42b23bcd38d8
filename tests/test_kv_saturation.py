"""The saturation rule for a colocated replica's KV cache (model.serving.kv_saturation,
model.queueing.decode_batch.head_of_line_room): hand-derived values and a simulated saturated cache."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from model.hardware.catalog import get_engine, get_gpu
from model.hardware.engines import with_preemption
from model.queueing.decode_batch import head_of_line_room
from model.serving.configs import ColocatedConfig
from model.serving.kv_saturation import prefill_held_sequences
from model.workload.plain import workload_from_lengths
from model.workload.scenario import Scenario
from model.workload.slo import SLO
from tests.goodput_pair import planned_and_simulated


def test_head_of_line_room_by_hand() -> None:
    """Sizes 1000 and 3000 (equally likely): E[s] = 2000, E[s^2] = 5e6, age 5e6 / 4000 = 1250, usable
    1 - 1250 / 10,000 = 0.875; equal sizes 2500 in 40,000: 1 - 1250 / 40,000 = 0.96875; no cache: 0."""
    assert head_of_line_room(10_000.0, np.array([1000.0, 3000.0])) == pytest.approx(0.875)
    assert head_of_line_room(40_000.0, np.full(7, 2500.0)) == pytest.approx(0.96875)
    assert head_of_line_room(0.0, np.array([100.0])) == 0.0
    assert head_of_line_room(1000.0, np.array([5000.0])) == 0.0


def _saturated_cache(capacity: float, low: float, high: float, events: int) -> float:
    """Time-averaged sequences held by a cache of ``capacity`` tokens that always has a prompt waiting
    (FCFS, the head admitted when its size fits), sizes U(low, high), exponential(1) holding times."""
    rng = np.random.default_rng(0)
    t, free, held, area = 0.0, capacity, [], 0.0
    head = rng.uniform(low, high)
    for _ in range(events):
        while free >= head:
            free -= head
            heapq.heappush(held, (t + rng.exponential(1.0), head))
            head = rng.uniform(low, high)
        end, size = heapq.heappop(held)
        area += (len(held) + 1) * (end - t)
        t, free = end, free + size
    return area / t


def test_saturated_cache_against_simulation() -> None:
    """Sizes U(500, 4500) in 40,000 tokens: E[s] = 2500, E[s^2] = 2500^2 + 4000^2 / 12 = 7,583,333,
    age 1516.7, so (40,000 - 1516.7) / 2500 = 15.39 sequences, not 40,000 / 2500 = 16 (simulated:
    15.35 over 200,000 completions)."""
    held = _saturated_cache(40_000.0, 500.0, 4500.0, 40_000)
    sizes = np.linspace(500.0, 4500.0, 100_001)
    predicted = 40_000.0 * head_of_line_room(40_000.0, sizes) / 2500.0
    assert predicted == pytest.approx(15.393, abs=0.002)
    assert held == pytest.approx(predicted, rel=0.01)
    assert abs(held - 16.0) > 0.4


def test_prefill_held_sequences_by_hand() -> None:
    """P = 1000, O = 100, every prefill 0.2 s, 2 prompts/s per replica. Incremental allocation: the
    prompt (1000 tokens) held 0.2 s, over the decode context 1000 + 100 / 2 = 1050: 2 x 1000 x 0.2 /
    1050 = 0.380952 sequences; whole-KV: P + O = 1100 over 1100: 0.4."""
    wl = workload_from_lengths(1000, 100, name="fixed-1000-100")
    for policy, expected in (("recompute", 2 * 1000 * 0.2 / 1050), ("none", 0.4)):
        scn = Scenario.build(
            "llama-3.1-8b", wl, SLO(2.0, 0.05), engine=with_preemption(get_engine("vllm"), policy)
        )
        pf = np.full((2, scn.prompt_tokens.size), 0.2)
        got = prefill_held_sequences(scn, np.array([2.0, 1.0]), pf)
        assert got == pytest.approx([expected, expected / 2.0], rel=1e-6)


def test_planner_agrees_with_simulator_on_a_saturated_cache() -> None:
    """Prompts U(200, 8000), outputs U(100, 500), one RTX 4090, chunk 2048, vLLM (recompute), TTFT
    SLO 30 s: the goodput is set by the KV cache (planner's cap 9 sequences). Simulated goodput
    0.543 req/s (1,200 requests); the planner 0.592 with the saturation rule (0.917), 0.606 without
    it (0.896, outside 10%)."""
    wl = workload_from_lengths(isl_dist="uniform:low=200,high=8000", osl_dist="uniform:low=100,high=500")
    scn = Scenario.build(
        "llama-3.1-8b", wl, SLO(30.0, 0.1), engine=with_preemption(get_engine("vllm"), "recompute")
    )
    cfg = ColocatedConfig(get_gpu("rtx-4090"), 1, 1, 2048)
    g_plan, g_sim = planned_and_simulated(scn, cfg, wl, 1200)
    assert g_plan == pytest.approx(0.592, rel=0.01)
    assert g_plan == pytest.approx(g_sim, rel=0.10)
