"""Simulator: hand-traceable cases with injected step times, invariants, determinism, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.errors import InputError
from model.hardware.catalog import get_gpu, get_link
from model.queueing.mgc import md1_wait
from model.serving.configs import ColocatedConfig, DisaggregatedConfig
from model.sim.simulate import (
    CallableSteps,
    InstanceSpec,
    SimOptions,
    SimRequests,
    goodput,
    poisson_requests,
    simulate,
    simulate_colocated,
    simulate_disaggregated,
)
from model.workload.slo import SLO

BIG = 10**9


def req(arrivals, prompts, outputs):
    return SimRequests(np.array(arrivals, float), np.array(prompts), np.array(outputs))


def colo_spec(prefill, decode, mixed=None, kv=BIG, budget=BIG, max_num_seqs=None):
    return InstanceSpec(CallableSteps(prefill, decode, mixed), kv, budget, max_num_seqs)


# ------------------------------------------------------------------------------- colocated, by hand


def test_colocated_prefill_first_by_hand():
    # prefill = 0.1 s per prompt in the batch; decode = 0.01 + 0.001 b.
    # A (t=0, out 3): prefill 0 -> 0.1. B (t=0.05, out 2) waits; prefill-first: B's prefill runs
    # 0.1 -> 0.2 while A stalls. Decode b=2: 0.2 -> 0.212 (A tok2, B tok2: B ends).
    # Decode b=1: 0.212 -> 0.223 (A tok3, ends).
    spec = colo_spec(lambda p: 0.1 * len(p), lambda b, ctx: 0.01 + 0.001 * b)
    res = simulate_colocated(spec, 1, req([0.0, 0.05], [10, 10], [3, 2]))
    r = res.records
    np.testing.assert_allclose(r.ttft_s, [0.1, 0.15])
    np.testing.assert_allclose(r.end_s, [0.223, 0.212])
    np.testing.assert_allclose(r.tpot_s, [(0.223 - 0.1) / 2, 0.012])
    np.testing.assert_allclose(r.max_itl_s, [0.112, 0.012])  # A's first gap holds B's prefill
    np.testing.assert_allclose(r.queue_wait_s, [0.0, 0.05])
    assert res.summary.completed == 2 and res.summary.stable


def test_colocated_batches_waiting_prompts_up_to_token_cap():
    # Three prompts of 10 arrive at 0; cap 20 tokens: [A, B] in one prefill (0.2 s), then C alone.
    spec = colo_spec(lambda p: 0.1 * len(p), lambda b, ctx: 0.01, budget=20)
    r = simulate_colocated(spec, 1, req([0, 0, 0], [10, 10, 10], [1, 1, 1])).records
    np.testing.assert_allclose(r.first_token_s, [0.2, 0.2, 0.3])
    np.testing.assert_allclose(r.end_s, [0.2, 0.2, 0.3])  # one output token: done at prefill


def test_colocated_kv_capacity_queues_admission():
    # KV 25 tokens; each request reserves 10 + 5 = 15, so B waits until A has finished.
    # A: prefill 0 -> 0.1, 4 decodes of 0.01 -> end 0.14. B: prefill 0.14 -> 0.24, end 0.28.
    spec = colo_spec(lambda p: 0.1, lambda b, ctx: 0.01, kv=25)
    res = simulate_colocated(spec, 1, req([0, 0], [10, 10], [5, 5]))
    np.testing.assert_allclose(res.records.end_s, [0.14, 0.28])
    np.testing.assert_allclose(res.records.ttft_s, [0.1, 0.24])
    assert res.summary.pools[0].kv_high_water_tokens == 15


def test_colocated_decode_context_passed_to_step_time():
    seen = []

    def decode(b, ctx):
        seen.append((b, ctx))
        return 0.01

    spec = colo_spec(lambda p: 0.1, decode)
    simulate_colocated(spec, 1, req([0], [7], [4]))
    # prompt 7: decode steps attend to 8, 9, 10 keys (the new token's own KV included).
    assert seen == [(1, 8), (1, 9), (1, 10)]


def test_colocated_routes_to_least_loaded_replica():
    spec = colo_spec(lambda p: 1.0, lambda b, ctx: 0.01, budget=5)  # one prompt per prefill
    r = simulate_colocated(spec, 2, req([0, 0, 0], [5, 5, 5], [1, 1, 1])).records
    assert r.instance.tolist() == [0, 1, 0]
    np.testing.assert_allclose(r.first_token_s, [1.0, 1.0, 2.0])


def test_chunked_prefill_by_hand():
    # Budget 8 tokens. mixed = 0.01 chunk + 0.001 prefix + 0.005 decode_batch; decode = 0.004 b.
    # A (t=0, prompt 10, out 2): chunk 8 (0 -> 0.08), chunk 2 at prefix 8 (0.028: -> 0.108) = tok1.
    # B (t=0.09, prompt 7, out 2): budget 8 - 1 decode = 7: B's whole prompt + A's decode,
    # 0.07 + 0.005 = 0.075 -> 0.183: A tok2 (ends), B tok1. Then decode b=1: 0.004 -> 0.187.
    calls = []

    def mixed(c, pre, db, ctx):
        calls.append((c, pre, db, ctx))
        return 0.01 * c + 0.001 * pre + 0.005 * db

    spec = colo_spec(lambda p: 0.0, lambda b, ctx: 0.004 * b, mixed, budget=8)
    res = simulate_colocated(spec, 1, req([0.0, 0.09], [10, 7], [2, 2]), chunked=True)
    r = res.records
    np.testing.assert_allclose(r.first_token_s, [0.108, 0.183])
    np.testing.assert_allclose(r.end_s, [0.183, 0.187])
    np.testing.assert_allclose(r.ttft_s, [0.108, 0.093])
    np.testing.assert_allclose(r.tpot_s, [0.075, 0.004])
    np.testing.assert_allclose(r.prefill_start_s, [0.0, 0.108])
    assert calls == [(8, 0.0, 0, 0), (2, 8.0, 0, 0), (7, 0.0, 1, 11)]


# ------------------------------------------------------------------------------- disaggregated


def disagg(requests, layerwise, *, d_kv=BIG, n_prefill=1, n_decode=1, p_budget=BIG, p_seqs=None):
    p = InstanceSpec(CallableSteps(lambda ps: 0.001 * sum(ps), lambda b, c: 0.0), BIG, p_budget, p_seqs)
    d = InstanceSpec(CallableSteps(lambda ps: 0.0, lambda b, c: 0.01), d_kv, BIG)
    return simulate_disaggregated(
        p, n_prefill, d, n_decode, lambda n: (0.05, 0.01), requests, layerwise=layerwise
    )


def test_receiving_lanes_carry_one_transfer_at_a_time():
    # Two prefill instances, prompts of 100 tokens arriving at 0 and 1 ms: prefills 0 -> 0.1 and
    # 0.001 -> 0.101 (1 ms a token), transfers (50 ms) on separate sending links. Into one decode
    # instance the receiving lanes take them in turn: 0.1 -> 0.15, then the second, ready at 0.101,
    # 0.15 -> 0.2 (it waits 49 ms). Into two decode instances (routed by load) they overlap.
    two = req([0.0, 0.001], [100, 100], [2, 2])
    one = disagg(two, layerwise=False, n_prefill=2, n_decode=1).records
    np.testing.assert_allclose(one.prefill_end_s, [0.1, 0.101])
    np.testing.assert_allclose(one.transfer_start_s, [0.1, 0.15])
    np.testing.assert_allclose(one.transfer_end_s, [0.15, 0.2])
    apart = disagg(two, layerwise=False, n_prefill=2, n_decode=2).records
    np.testing.assert_allclose(apart.transfer_end_s, [0.15, 0.151])


def test_receiving_lanes_are_an_md1_queue():
    # Poisson arrivals, no prefill time, 60 prefill instances (so the sending links never queue), one
    # decode instance receiving transfers of D = 20 ms: its lanes are an M/D/1 queue, E[W] = rho D /
    # (2 (1 - rho)) = 0.5 x 0.02 / 1 = 10 ms at lambda = 25 / s (Pollaczek-Khinchine).
    n = 8000
    rng = np.random.default_rng(5)
    arrivals = np.cumsum(rng.exponential(1.0 / 25.0, n))
    requests = SimRequests(arrivals, np.full(n, 10), np.ones(n, dtype=int))
    p = InstanceSpec(CallableSteps(lambda ps: 0.0, lambda b, c: 0.0), BIG, BIG)
    d = InstanceSpec(CallableSteps(lambda ps: 0.0, lambda b, c: 0.0), BIG, BIG)
    res = simulate_disaggregated(
        p, 60, d, 1, lambda n: (0.02, 0.0), requests, layerwise=False, options=SimOptions(warmup_requests=800)
    )
    r = res.records
    wait = (r.transfer_start_s - r.prefill_end_s)[r.measured]
    assert float(md1_wait(25.0, 0.02).mean_wait_s) == pytest.approx(0.01)
    assert wait.mean() == pytest.approx(0.01, rel=0.1)
    assert (wait > 1e-12).mean() == pytest.approx(0.5, abs=0.03)  # P(W > 0) = rho


def test_disaggregated_by_hand_whole_kv():
    # Prefill 1 ms/token; transfer 50 ms (last layer 10 ms); decode step 10 ms.
    # A (0, prompt 100, out 3): prefill 0 -> 0.1, transfer 0.1 -> 0.15 = tok1; decodes -> 0.16, 0.17.
    # B (0.02, prompt 50, out 2): queued to 0.1, prefill -> 0.15, link free at 0.15 -> 0.2 = tok1,
    # decode 0.2 -> 0.21.
    r = disagg(req([0.0, 0.02], [100, 50], [3, 2]), layerwise=False).records
    np.testing.assert_allclose(r.prefill_start_s, [0.0, 0.1])
    np.testing.assert_allclose(r.transfer_start_s, [0.1, 0.15])
    np.testing.assert_allclose(r.ttft_s, [0.15, 0.18])
    np.testing.assert_allclose(r.end_s, [0.17, 0.21])
    np.testing.assert_allclose(r.tpot_s, [0.01, 0.01])
    np.testing.assert_allclose(r.transfer_exposed_s, [0.05, 0.05])


def test_disaggregated_by_hand_layerwise():
    # Layer-wise: A's transfer starts with its prefill at 0; ends max(0 + 0.05, 0.1 + 0.01) = 0.11.
    # B: prefill 0.1 -> 0.15, link free at 0.11: ends max(0.11 + 0.05, 0.15 + 0.01) = 0.16.
    r = disagg(req([0.0, 0.02], [100, 50], [3, 2]), layerwise=True).records
    np.testing.assert_allclose(r.transfer_start_s, [0.0, 0.11])
    np.testing.assert_allclose(r.first_token_s, [0.11, 0.16])
    np.testing.assert_allclose(r.end_s, [0.13, 0.17])


def test_disaggregated_decode_admission_wait():
    # Decode KV 110 tokens: A reserves 100 + 3; B (50 + 2) must wait until A ends at 0.17,
    # then its transfer runs 0.17 -> 0.22 and it decodes 0.22 -> 0.23.
    res = disagg(req([0.0, 0.02], [100, 50], [3, 2]), layerwise=False, d_kv=110)
    r = res.records
    np.testing.assert_allclose(r.decode_admit_s, [0.1, 0.17])
    np.testing.assert_allclose(r.decode_admission_wait_s, [0.0, 0.02])
    np.testing.assert_allclose(r.first_token_s, [0.15, 0.22])
    np.testing.assert_allclose(r.end_s, [0.17, 0.23])
    assert res.summary.pools[1].kv_high_water_tokens == 103


def test_prefill_pool_is_a_shared_fcfs_queue():
    # Two prefill instances, three 100-token prompts at t=0, one per batch: A, B on 0.0-0.1, C 0.1-0.2.
    r = disagg(req([0, 0, 0], [100, 100, 100], [1, 1, 1]), False, n_prefill=2, p_seqs=1).records
    np.testing.assert_allclose(r.prefill_start_s, [0.0, 0.0, 0.1])
    assert r.prefill_instance.tolist() == [0, 1, 0]


# ------------------------------------------------------------------------------- invariants


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 0.5), st.integers(1, 40), st.integers(1, 12)), min_size=1, max_size=25),
    st.sampled_from(["plain", "chunked", "disagg"]),
    st.integers(1, 3),
)
def test_invariants_and_itl_against_brute_force(rows, mode, k):
    gaps, prompts, outputs = (list(x) for x in zip(*rows, strict=True))
    t = np.cumsum(gaps)
    requests = req(t, prompts, outputs)
    kv = 60
    steps = CallableSteps(
        lambda ps: 0.01 * len(ps) + 0.001 * sum(ps),
        lambda b, c: 0.005 + 0.001 * b + 1e-5 * c,
        lambda c, pre, db, ctx: 0.002 + 0.001 * c + 1e-5 * pre + 0.001 * db,
    )
    spec = InstanceSpec(steps, kv, 16)
    if mode == "disagg":
        res = simulate_disaggregated(spec, k, spec, k, lambda n: (0.001 * n, 0.0001 * n), requests)
    else:
        res = simulate_colocated(spec, k, requests, chunked=mode == "chunked")
    r = res.records
    fits = (r.prompt_tokens + r.output_tokens) <= kv
    assert np.array_equal(r.rejected, ~fits)
    assert np.all(np.isfinite(r.end_s[fits]))
    f = fits
    assert np.all(r.prefill_start_s[f] >= r.arrival_s[f] - 1e-12)
    assert np.all(r.prefill_end_s[f] >= r.prefill_start_s[f])
    assert np.all(r.first_token_s[f] >= r.prefill_end_s[f] - 1e-12)
    assert np.all(r.end_s[f] >= r.first_token_s[f])
    multi = f & (r.output_tokens > 1)
    assert np.all(r.max_itl_s[multi] >= r.tpot_s[multi] - 1e-12)
    assert all(p.kv_high_water_tokens <= kv for p in res.summary.pools)


def test_max_itl_matches_every_token_time():
    # Brute force: with constant decode steps the token times of a lone request are known exactly.
    spec = colo_spec(lambda p: 0.5, lambda b, ctx: 0.01 * b)
    # A decodes alone at 0.01/step until B's prefill (arrives 0.53) stalls it for 0.5 s.
    r = simulate_colocated(spec, 1, req([0.0, 0.53], [4, 4], [10, 2])).records
    # A: tok1 0.5; tok2..4 at 0.51, 0.52, 0.53; B's prefill 0.53 -> 1.03; tok5 at 1.05 (b=2), ...
    assert r.max_itl_s[0] == pytest.approx(1.05 - 0.53)


# ------------------------------------------------------------------------------- determinism, bounds


H100 = get_gpu("h100-sxm")
CONFIGS = [
    ColocatedConfig(H100, 1, 2),
    ColocatedConfig(H100, 1, 2, chunk_tokens=512),
    DisaggregatedConfig(H100, 1, 1, H100, 1, 1, get_link("ib-ndr-400")),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.architecture)
def test_deterministic_for_a_seed(cfg):
    a = simulate(cfg, "llama-3.1-8b", poisson_requests("chat", 8.0, 400, seed=3)).records
    b = simulate(cfg, "llama-3.1-8b", poisson_requests("chat", 8.0, 400, seed=3)).records
    c = simulate(cfg, "llama-3.1-8b", poisson_requests("chat", 8.0, 400, seed=4)).records
    np.testing.assert_array_equal(a.end_s, b.end_s)
    assert not np.array_equal(a.end_s, c.end_s)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.architecture)
def test_overload_stops_unstable_with_bounded_queue(cfg):
    requests = poisson_requests("chat", 2000.0, 50_000, seed=0)
    res = simulate(
        cfg, "llama-3.1-8b", requests, slo=SLO(1.0, 0.05), options=SimOptions(max_queued_requests=500)
    )
    s = res.summary
    assert not s.stable and "unstable" in s.stop_reason
    assert s.completed < 5000
    assert s.meets_slo is False


def test_max_sim_time_stops_run():
    res = simulate(
        CONFIGS[0],
        "llama-3.1-8b",
        poisson_requests("chat", 5.0, 500, seed=0),
        options=SimOptions(max_sim_time_s=10.0),
    )
    assert not res.summary.stable and "max_sim_time_s" in res.summary.stop_reason


def test_light_load_ttft_is_prefill_time():
    # One request alone: TTFT = roofline prefill time + the engine's per-request client overhead;
    # TPOT = mean decode step over its contexts (with the default engine's overheads).
    from model.hardware.catalog import get_engine
    from model.llm.catalog import get_model
    from model.physics.deployment import Deployment
    from model.physics.generation import mean_tpot_s
    from model.physics.steps import prefill_cost

    overheads = get_engine().overheads(H100)
    dep = Deployment(get_model("llama-3.1-8b"), H100, overheads=overheads)
    r = simulate(CONFIGS[0], "llama-3.1-8b", req([0.0], [1000], [50])).records
    ttft = float(prefill_cost(dep, 1000).time_s) + overheads.request_s
    assert r.ttft_s[0] == pytest.approx(ttft)
    assert r.tpot_s[0] == pytest.approx(float(mean_tpot_s(dep, 1, 1000, 50)), rel=1e-9)


# ------------------------------------------------------------------------------- bad input


def test_empty_requests_rejected():
    with pytest.raises(InputError, match="requests"):
        req([], [], [])


def test_unsorted_or_bad_lengths_rejected():
    with pytest.raises(InputError, match="arrival_s"):
        req([1.0, 0.5], [1, 1], [1, 1])
    with pytest.raises(InputError, match="output_tokens"):
        req([0.0], [1], [0])


def test_config_that_does_not_fit():
    cfg = ColocatedConfig(get_gpu("rtx-4090"), 1, 1)
    with pytest.raises(InputError, match="config.*fits in memory"):
        simulate(cfg, "llama-3.1-70b", req([0.0], [10], [10]))
    g = goodput(cfg, "llama-3.1-70b", req([0.0, 1.0], [10, 10], [10, 10]), SLO(1.0, 0.1))
    assert g.rate_rps == 0.0 and "fits in memory" in g.reason


def test_request_longer_than_kv_is_rejected_and_missed():
    spec = colo_spec(lambda p: 0.1, lambda b, c: 0.01, kv=50)
    res = simulate_colocated(spec, 1, req([0, 0], [10, 45], [5, 10]), slo=SLO(1.0, 1.0))
    assert res.records.rejected.tolist() == [False, True]
    assert res.summary.attainment == 0.5


def test_bad_options():
    with pytest.raises(InputError, match="max_queued_requests"):
        SimOptions(max_queued_requests=0)
    with pytest.raises(InputError, match="replicas"):
        simulate_colocated(colo_spec(lambda p: 1, lambda b, c: 1), 0, req([0], [1], [1]))


# ------------------------------------------------------------------------------- goodput


def test_goodput_brackets_the_slo_boundary():
    requests = poisson_requests("chat", 1.0, 600, seed=2)
    slo = SLO(0.5, 0.015)
    g = goodput(CONFIGS[0], "llama-3.1-8b", requests, slo, start_rps=4.0)
    assert g.rate_rps > 0 and g.upper_rps / g.rate_rps - 1 <= 0.02 + 1e-9
    assert g.per_gpu_rps == pytest.approx(g.rate_rps / 2)
    assert g.attainment_at_rate >= 0.9
    from model.workload.arrivals import scale_to_rate

    above = SimRequests(
        scale_to_rate(requests.arrival_s, g.upper_rps), requests.prompt_tokens, requests.output_tokens
    )
    assert simulate(CONFIGS[0], "llama-3.1-8b", above, slo=slo).summary.meets_slo is False
    assert math.isfinite(g.rate_rps)
