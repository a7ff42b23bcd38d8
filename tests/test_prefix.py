"""Prefix caching and multi-turn sessions (issue 15): the hit-rate effect on prefill, the LRU block
cache and routing, trace hash ids and session ids, the simulator's per-instance caches, the verdict
and bad input. Planner-vs-simulator agreement is in tests/test_prefix_validation.py."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import numpy as np
import pytest

import model
from model.errors import InputError, PdplanError
from model.hardware.catalog import get_gpu, get_link
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.steps import prefill_cost
from model.planner.plan import resolve_inputs
from model.serving.configs import ColocatedConfig, DisaggregatedConfig
from model.serving.phase_tables import instance_tables
from model.sim.engine import CallableSteps, InstanceSpec, SimRequests
from model.sim.prefix_cache import session_requests, with_hit_rate
from model.sim.simulate import SimOptions, simulate, simulate_colocated, simulate_disaggregated
from model.workload.lengths import Fixed
from model.workload.prefix import BlockCache, parse_hit_rate, replay_prefix_cache
from model.workload.presets import Workload, get_workload
from model.workload.scenario import Scenario
from model.workload.sessions import SessionShape, capacity_hit_rate, implied_hit_rates, session_trace
from model.workload.slo import SLO
from model.workload.traces import TraceFormatError, load_trace
from tests.fuzz_common import cli_text

H100 = get_gpu("h100-sxm")

# -- the hit-rate effect on prefill FLOPs, by hand -------------------------------------------------

# Llama-3.1-8B: 32 layers, 32 query heads of 128 (d_qk = d_v = 128), hidden 4096, 8 KV heads (K and V
# projections 4096 x 1024), MLP 14336 (gate, up, down), vocabulary 128,256.
N_LIN = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)  # 6,979,321,856
ATTN = 2 * 32 * 32 * (128 + 128)  # 2 n_h L (d_qk + d_v) = 524,288 FLOP per query-key pair
LOGITS = 2 * 128256 * 4096  # the last token's logits


def _prefill_flops(new: int, cached: int) -> float:
    """2 N_lin n + 2 n_h L (d_qk + d_v) (n c + n (n + 1) / 2) + 2 V h (model.physics.steps.prefill_cost)."""
    return 2 * N_LIN * new + ATTN * (new * cached + new * (new + 1) / 2) + LOGITS


def test_hit_rate_effect_on_prefill_flops_by_hand():
    """A 2048-token prompt at hit rate 0.5: 1024 tokens cached, 1024 computed. Linear-layer FLOPs halve;
    attention still covers the whole context (each new token attends to the 1024 cached keys)."""
    dep = Deployment(get_model("llama-3.1-8b"), H100, parallel=1)
    full = float(prefill_cost(dep, 2048).flops)
    half = float(prefill_cost(dep, 1024, cached_tokens=1024).flops)
    assert full == pytest.approx(_prefill_flops(2048, 0), rel=1e-12)  # 29,688,401,494,016
    assert half == pytest.approx(_prefill_flops(1024, 1024), rel=1e-12)  # 15,119,603,990,528
    # saved: the linear layers of 1024 tokens and the cached tokens' own causal attention
    saved = 2 * N_LIN * 1024 + ATTN * (1024 * 1025 / 2)
    assert full - half == pytest.approx(saved, rel=1e-12)
    assert half / full == pytest.approx(0.50927, abs=1e-5)


def test_planner_prefill_table_uses_the_hit_rate():
    """The planner's per-request prefill time is prefill_cost(prompt - cached, cached_tokens=cached)."""
    wl = dataclasses.replace(get_workload("chat"), prefix_cache_hit_rate=0.5)
    scn = Scenario(get_model("llama-3.1-8b"), wl, SLO(1.0, 0.05), samples=32)
    t = instance_tables(scn, H100, 1, None, "colocated")
    p, c = scn.prompt_tokens, scn.cached_tokens
    assert np.array_equal(c, np.minimum(np.floor(p * 0.5), p - 1))
    expect = prefill_cost(t.dep, p - c, cached_tokens=c).time_s
    assert np.allclose(t.prefill_s, expect, rtol=1e-12)


# -- the LRU cache and routing --------------------------------------------------------------------

# Four requests of 4-token blocks (Mooncake-style ids: equal id = same prefix block).
IDS = [(1, 2, 3), (1, 2, 4), (5, 6), (1, 2, 3)]
PROMPTS = [12, 12, 8, 12]


def test_lru_replay_by_hand():
    """Capacity 5 blocks, one instance:
    r0 (1,2,3) misses; r1 (1,2,4) hits 1,2 = 8 tokens, cache 3,1,2,4; r2 (5,6) misses and evicts 3
    (least recently used) -> 1,2,4,5,6; r3 (1,2,3) hits 1,2 only = 8 tokens. 16 of 44 prompt tokens.
    Unbounded: r3 hits all three blocks, 12 tokens, capped at prompt - 1 = 11: 19 of 44."""
    small = replay_prefix_cache(IDS, PROMPTS, capacity_tokens=20, block_tokens=4)
    assert small.cached_tokens.tolist() == [0, 8, 0, 8]
    assert small.hit_rate == pytest.approx(16 / 44)
    big = replay_prefix_cache(IDS, PROMPTS, capacity_tokens=1e6, block_tokens=4)
    assert big.cached_tokens.tolist() == [0, 8, 0, 11]
    assert big.hit_rate == pytest.approx(19 / 44)


def test_routing_by_hand():
    """Two instances, unbounded caches. least-loaded alternates 0, 1, 0, 1: r1 and r3 land where
    nothing / only (1,2,4) is cached -> r3 hits 8 tokens: 8 / 44. cache-aware sends r1 and r3 to
    instance 0 (longest match) and r2 (no match anywhere) to the less loaded instance 1: 19 / 44."""
    ll = replay_prefix_cache(IDS, PROMPTS, 1e6, instances=2, routing="least-loaded", block_tokens=4)
    assert ll.instance.tolist() == [0, 1, 0, 1] and ll.cached_tokens.tolist() == [0, 0, 0, 8]
    ca = replay_prefix_cache(IDS, PROMPTS, 1e6, instances=2, routing="cache-aware", block_tokens=4)
    assert ca.instance.tolist() == [0, 0, 1, 0] and ca.hit_rate == pytest.approx(19 / 44)
    rnd = replay_prefix_cache(IDS, PROMPTS, 1e6, instances=2, routing="random", block_tokens=4)
    assert rnd.hit_rate <= ca.hit_rate


def test_block_cache_match_is_an_unbroken_prefix():
    c = BlockCache(10)
    c.insert((1, 3))
    assert c.match((1, 2, 3)) == 1  # block 3 is cached, but not after a hit on 2


# -- sessions -------------------------------------------------------------------------------------


def test_session_hit_rate_single_turn_by_hand():
    """One turn per session: only the shared system prompt's full blocks hit. System 40 tokens in
    16-token blocks: 32 cached of 40 + 16 = 56 prompt tokens."""
    shape = SessionShape(40, Fixed(16), Fixed(16), Fixed(16), turns_mean=1.0, think_time_s=1.0)
    h = implied_hit_rates(shape, sessions=50)
    assert h.colocated == pytest.approx(32 / 56) and h.prefill_pool == pytest.approx(32 / 56)


def test_session_trace_turns_grow_and_reuse():
    """Turn t + 1's prompt = turn t's prompt + its answer + a new message; its block ids start with
    all of turn t's full blocks (so a cache holding turn t hits them)."""
    shape = SessionShape(32, Fixed(16), Fixed(20), Fixed(24), turns_mean=4.0, think_time_s=1.0)
    tr = session_trace(shape, 2.0, 200, seed=3)
    by: dict = {}
    for i, s in enumerate(tr.session_ids.tolist()):
        by.setdefault(s, []).append(i)
    checked = 0
    for rows in by.values():
        for a, b in itertools.pairwise(rows):
            assert tr.prompt_tokens[b] == tr.prompt_tokens[a] + tr.output_tokens[a] + 20
            full = (tr.prompt_tokens[a] + tr.output_tokens[a]) // 16
            assert tr.hash_ids[b][:full] == tr.hash_ids[a][:full]
            checked += 1
    assert checked > 50
    h = implied_hit_rates(shape)
    assert 0 < h.prefill_pool < h.colocated < 1


def test_presets_carry_their_session_hit_rates():
    for name in ("multiturn-chat", "agentic"):
        wl = get_workload(name)
        assert wl.sessions is not None and wl.source
        assert wl.prefill_pool_hit_rate < wl.prefix_cache_hit_rate == wl.decode_prefix_hit_rate
    assert "multiturn-chat" in model.list_workloads()


# -- traces with hash ids and session ids ---------------------------------------------------------


def _jsonl(tmp_path, rows, name="t.jsonl"):
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return p


def _mooncake_rows():
    return [
        {"timestamp": 2000, "input_length": 1000, "output_length": 10, "hash_ids": [1, 2], "session_id": "b"},
        {"timestamp": 0, "input_length": 1024, "output_length": 10, "hash_ids": [1, 3], "session_id": "a"},
        {
            "timestamp": 1000,
            "input_length": 1500,
            "output_length": 10,
            "hash_ids": [1, 3, 4],
            "session_id": "a",
        },
    ]


def test_mooncake_trace_keeps_hash_ids_and_sessions_in_arrival_order(tmp_path):
    tr = load_trace(_jsonl(tmp_path, _mooncake_rows()))
    assert tr.hash_ids == ((1, 3), (1, 3, 4), (1, 2))
    assert tr.session_ids.tolist() == ["a", "a", "b"]
    assert tr.prefix_reuse_fraction == pytest.approx(3 / 7)
    # replay with room for everything: request 2 hits blocks 1, 3 (1024 tokens), request 3 block 1 (512)
    rep = replay_prefix_cache(tr.hash_ids, tr.prompt_tokens, 1e9)
    assert rep.cached_tokens.tolist() == [0, 1024, 512]


@pytest.mark.parametrize(
    "bad, column",
    [
        ({"hash_ids": "1,2"}, "hash_ids"),
        ({"hash_ids": [1, True]}, "hash_ids"),
        ({"hash_ids": []}, "hash_ids"),
        ({"hash_ids": [1.5]}, "hash_ids"),
        ({"session_id": [1]}, "session_id"),
        ({"session_id": True}, "session_id"),
        ({"session_id": ""}, "session_id"),
    ],
)
def test_malformed_hash_ids_and_session_ids_name_the_field(tmp_path, bad, column):
    rows = _mooncake_rows()
    rows[1] = {**rows[1], **bad}
    with pytest.raises(TraceFormatError) as err:
        load_trace(_jsonl(tmp_path, rows))
    assert err.value.column == column and err.value.line == 2


def test_hash_ids_on_some_rows_only_is_an_error(tmp_path):
    rows = _mooncake_rows()
    del rows[2]["hash_ids"]
    with pytest.raises(TraceFormatError, match="hash_ids.*missing"):
        load_trace(_jsonl(tmp_path, rows))


def test_plan_derives_the_hit_rate_from_a_trace(tmp_path):
    """A trace whose 40 requests share a 3-block prefix: the planner replays it (one instance's cache
    holds everything), so each later request finds its 1536 shared tokens cached."""
    rows = [
        {"timestamp": 100 * i, "input_length": 2048, "output_length": 64, "hash_ids": [7, 8, 9, 100 + i]}
        for i in range(40)
    ]
    tr = load_trace(_jsonl(tmp_path, rows))
    wl = Workload.from_trace(tr)
    inp = resolve_inputs(
        model.PlanRequest("llama-3.1-8b", "h100-sxm", wl, ttft_slo_s=1.0, tpot_slo_s=0.05, gpus=2)
    )
    assert inp.scenario.workload.prefix_cache_hit_rate == pytest.approx(39 * 1536 / (40 * 2048))


# -- the simulator's caches ------------------------------------------------------------------------


def _ms_per_token_steps() -> CallableSteps:
    return CallableSteps(prefill=lambda ps: 1e-3 * sum(ps), decode=lambda b, ctx: 1e-3, mixed=None)


def test_colocated_sim_prefills_only_the_uncached_part():
    """Two requests with the same first two 4-token blocks, far apart: the second computes 12 - 8 = 4
    tokens (1 ms per token: TTFT 4 ms against 12 ms), and the replica then caches its blocks."""
    spec = InstanceSpec(_ms_per_token_steps(), 1000, 1000)
    req = SimRequests(
        np.array([0.0, 10.0]),
        np.array([12, 12]),
        np.array([2, 2]),
        hash_ids=((1, 2, 3), (1, 2, 4)),
        block_tokens=4,
    )
    res = simulate_colocated(spec, 1, req)
    assert res.records.ttft_s.tolist() == pytest.approx([0.012, 0.004])
    assert res.records.cached_tokens.tolist() == [0, 8]
    assert res.records.prefix_hit_rate == pytest.approx(8 / 24)


def test_disaggregated_sim_skips_what_the_decode_instance_holds():
    """Turn 1: prompt 8 (blocks a, b), answer 4 (block c). Turn 2: prompt 16 (a, b, c, d). The prefill
    instance holds a, b (the prompt it computed): 8 cached, 8 computed. The decode instance holds
    a, b, c (it decoded turn 1): only 16 - 12 = 4 tokens cross the link."""
    sent: list[int] = []

    def transfer(tokens: int) -> tuple[float, float]:
        sent.append(tokens)
        return 1e-3 * tokens, 0.0

    spec = InstanceSpec(_ms_per_token_steps(), 1000, 1000)
    req = SimRequests(
        np.array([0.0, 10.0]),
        np.array([8, 16]),
        np.array([4, 2]),
        hash_ids=(("a", "b", "c"), ("a", "b", "c", "d")),
        block_tokens=4,
        session_ids=np.array(["s", "s"], dtype=object),
    )
    res = simulate_disaggregated(spec, 1, spec, 1, transfer, req, layerwise=False)
    assert sent == [8, 4]
    assert res.records.cached_tokens.tolist() == [0, 8]
    assert res.records.decode_held_tokens.tolist() == [0, 12]
    assert res.records.prefill_s.tolist() == pytest.approx([0.008, 0.008])


def test_fixed_hit_rate_requests_and_steady_session_traces():
    req = SimRequests(np.array([0.0, 1.0, 2.0]), np.array([100, 10, 1]), np.array([5, 5, 5]))
    assert with_hit_rate(req, 0.5).cached_tokens.tolist() == [50, 5, 0]
    # the session trace starts in steady state: later turns from its first seconds, rate as asked
    sess = session_requests(get_workload("multiturn-chat"), 4.0, 2000)
    first = sess.arrival_s < sess.span_s / 4
    assert np.mean(session_trace_turns(sess)[first] > 0) > 0.3
    assert (len(sess) - 1) / sess.span_s == pytest.approx(4.0, rel=0.15)


def session_trace_turns(req: SimRequests) -> np.ndarray:
    """Turn index of each request within its session (0 = first turn seen in the trace)."""
    seen: dict = {}
    out = []
    for s in req.session_ids.tolist():
        out.append(seen.get(s, 0))
        seen[s] = seen.get(s, 0) + 1
    return np.array(out)


def test_simulated_session_hit_rates_match_the_implied_ones():
    """multiturn-chat on Llama-3.1-8B / H100 (caches far larger than the working set): the simulator's
    LRU caches reach the hit rates the session structure implies (colocated: earlier prompts and answers;
    disaggregated prefill: earlier prompts only)."""
    wl = get_workload("multiturn-chat")
    req = session_requests(wl, 5.0, 2000)
    warm = SimOptions(warmup_requests=600)  # the caches start empty: about rate x a session's span
    col = simulate(ColocatedConfig(H100, 1, 1, 2048), "llama-3.1-8b", req, options=warm)
    dis = simulate(
        DisaggregatedConfig(H100, 1, 1, H100, 1, 1, get_link("ib-ndr-400")), "llama-3.1-8b", req, options=warm
    )
    assert col.records.prefix_hit_rate == pytest.approx(wl.prefix_cache_hit_rate, abs=0.03)
    assert dis.records.prefix_hit_rate == pytest.approx(wl.prefill_pool_hit_rate, abs=0.03)
    m = dis.records.measured
    held = dis.records.decode_held_tokens[m].sum() / dis.records.prompt_tokens[m].sum()
    assert held == pytest.approx(wl.decode_prefix_hit_rate, abs=0.05)


def test_capacity_hit_rate_follows_the_simulated_lru():
    """multiturn-chat on 2 x Llama-3.1-8B / H100 replicas (444,992 KV tokens each): at 60 req/s the
    sessions' working set (rate x 36 s between turns x ~1,000 tokens) outgrows the caches and the
    simulator's LRU hit rate falls from the implied 91% to about 78%; the characteristic-time
    estimate follows it within 0.04."""
    wl = get_workload("multiturn-chat")
    cfg = ColocatedConfig(H100, 1, 2, 2048)
    for rate in (40.0, 60.0):
        req = session_requests(wl, rate, 4500)
        res = simulate(cfg, "llama-3.1-8b", req, options=SimOptions(warmup_requests=1500))
        est = capacity_hit_rate(wl.sessions, rate / 2, 444992)
        assert est == pytest.approx(res.records.prefix_hit_rate, abs=0.04)
        assert est < wl.prefix_cache_hit_rate - 0.03


# -- the verdict ------------------------------------------------------------------------------------

KW = dict(gpus=16, node="hgx-h100-8", ttft_slo_s=0.5, tpot_slo_s=0.04, thresholds=False)


def test_session_caching_flips_the_verdict_and_says_why():
    """Llama-3.1-70B, multi-turn chat, 16 x H100, 500 ms / 40 ms. Without prefix caching colocated is
    slowed by prefill interference and disaggregation wins clearly. With the cache the sessions imply,
    a colocated replica finds 91% of each prompt cached (earlier prompts and answers) but a
    disaggregated prefill instance only 79% (the answers were decoded elsewhere): prefill shrinks
    most where it interferes, and colocated-chunked wins."""
    wl = get_workload("multiturn-chat")
    off = model.plan("llama-3.1-70b", "h100-sxm", workload=wl, prefix_hit_rate=0.0, **KW)
    on = model.plan("llama-3.1-70b", "h100-sxm", workload=wl, **KW)
    assert off.verdict == "disaggregated"
    assert on.verdict == "colocated-chunked"
    line = next(r for r in on.reasons if r.startswith("Prefix caching"))
    assert "91% of prompt tokens are found in the cache" in line
    assert "a disaggregated prefill instance 79%" in line
    assert not any(r.startswith("Prefix caching") for r in off.reasons)


# -- bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize("h", [1.5, -0.1, math.nan, True, "0.5"])
def test_api_bad_hit_rate(h):
    with pytest.raises(InputError) as err:
        model.plan(
            "llama-3.1-8b",
            "h100-sxm",
            workload="chat",
            ttft_slo_s=1,
            tpot_slo_s=0.05,
            gpus=2,
            prefix_hit_rate=h,
        )
    assert "prefix_hit_rate" in str(err.value)


def test_bad_routing_and_text():
    with pytest.raises(InputError, match="prefix_routing"):
        model.plan(
            "llama-3.1-8b",
            "h100-sxm",
            workload="chat",
            ttft_slo_s=1,
            tpot_slo_s=0.05,
            gpus=2,
            prefix_routing="x",
        )
    assert parse_hit_rate("60%") == pytest.approx(0.6) and parse_hit_rate(" ") is None
    for text in ("1.01", "-1", "abc", "inf", "150%"):
        with pytest.raises(InputError, match="hit rate"):
            parse_hit_rate(text, "prefix-cache hit rate")


@pytest.mark.parametrize(
    "cmd", ["plan --gpus 2", "simulate --style colocated --replicas 1 --rate 1 --requests 10"]
)
@pytest.mark.parametrize("value", ["1.5", "-0.2", "abc"])
def test_cli_bad_hit_rate_one_line(cmd, value):
    sub, rest = cmd.split(" ", 1)
    code, _out, err = cli_text(
        f"{sub} --model llama-3.1-8b --gpu h100-sxm --workload chat --ttft-slo 1s --tpot-slo 50ms "
        f"{rest} --prefix-hit-rate {value}"
    )
    assert code == 2 and "--prefix-hit-rate" in err and "[0, 1]" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cli_plan_and_simulate_with_hit_rate():
    code, out, _ = cli_text(
        "plan --model llama-3.1-8b --gpu h100-sxm --workload chat --ttft-slo 1s --tpot-slo 50ms --gpus 2 "
        "--no-thresholds --prefix-hit-rate 0.6 --json"
    )
    assert code == 0 and any(r.startswith("Prefix caching") for r in json.loads(out)["reasons"])
    code, out, _ = cli_text(
        "simulate --model llama-3.1-8b --gpu h100-sxm --style colocated --replicas 1 --workload chat "
        "--rate 2 --requests 50 --prefix-hit-rate 60% --json"
    )
    assert code == 0 and json.loads(out)["prefix_hit_rate"] == pytest.approx(0.6, abs=0.01)


def test_bad_sim_requests_name_the_field():
    for kwargs, field in (
        ({"cached_tokens": np.array([5])}, "cached_tokens"),  # >= prompt
        ({"hash_ids": ((1,), (2,))}, "hash_ids"),  # two lists for one request
        ({"session_ids": np.array([1, 2])}, "session_ids"),
        ({"block_tokens": 0}, "block_tokens"),
    ):
        with pytest.raises(PdplanError, match=field):
            SimRequests(np.array([0.0]), np.array([5]), np.array([1]), **kwargs)


def test_simulator_cached_prefill_step_matches_the_roofline():
    """RooflineSteps prices k prompts after cached prefixes from lines in the mean cached prefix: exact
    against prefill_cost(dep, T / k, cached_tokens=C / k, batch=k) for a full-attention model."""
    from model.sim.steps import RooflineSteps

    dep = Deployment(get_model("llama-3.1-8b"), H100, parallel=1)
    steps = RooflineSteps(dep)
    got = steps.prefill_s([600, 400], [300, 100])
    want = float(prefill_cost(dep, 500.0, cached_tokens=200.0, batch=2).time_s)
    assert got == pytest.approx(want, rel=1e-9)
    assert steps.prefill_s([700]) == pytest.approx(float(prefill_cost(dep, 700).time_s), rel=1e-12)


def test_simulate_cli_replays_a_trace_with_hash_ids(tmp_path):
    rows = [
        {"timestamp": 500 * i, "input_length": 2048, "output_length": 16, "hash_ids": [1, 2, 3, 100 + i]}
        for i in range(30)
    ]
    path = _jsonl(tmp_path, rows)
    base = (
        f"simulate --model llama-3.1-8b --gpu h100-sxm --style colocated --replicas 2 --trace {path} --json"
    )
    # cache-aware: every request after the first finds 3 of its 4 blocks on the replica holding them
    code, out, _ = cli_text(base)
    assert code == 0 and json.loads(out)["prefix_hit_rate"] == pytest.approx(29 * 1536 / (30 * 2048))
    # 1 ms apart, least-loaded alternates the replicas while the first prefills run: each replica
    # misses once, and the requests queued behind its first prefill hit
    fast = _jsonl(tmp_path, [{**r, "timestamp": i} for i, r in enumerate(rows)], "fast.jsonl")
    code, out, _ = cli_text(base.replace(str(path), str(fast)) + " --prefix-routing least-loaded")
    assert code == 0 and json.loads(out)["prefix_hit_rate"] == pytest.approx(28 * 1536 / (30 * 2048))


def test_cache_aware_routing_falls_back_to_least_loaded_when_unbalanced():
    """SGLang's cache-aware router sends a request to the cache holder unless the load is badly
    unbalanced (max - min > 64 requests and max > 1.5 x min: its default thresholds), then to the
    least loaded; the simulator's live loads use that rule (the replay's cumulative counts do not)."""
    from model.workload.prefix import BlockCache, route

    holder, other = BlockCache(100), BlockCache(100)
    holder.insert([1, 2, 3])
    caches, ids = [holder, other], [1, 2, 3, 4]
    never = lambda n: 0  # noqa: E731 - random routing is not used here
    assert route(caches, ids, [100.0, 10.0], "cache-aware", never) == 0  # no balance: the holder
    assert route(caches, ids, [100.0, 10.0], "cache-aware", never, balance=True) == 1  # 90 > 64, 100 > 15
    assert route(caches, ids, [70.0, 10.0], "cache-aware", never, balance=True) == 0  # 60 <= 64
    assert route(caches, ids, [200.0, 140.0], "cache-aware", never, balance=True) == 0  # 200 <= 1.5 x 140
