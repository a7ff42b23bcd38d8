"""Pre-emption under incremental KV allocation (engine policies "recompute" and "swap"): the
simulator's vLLM rule traced by hand, the planner's formulas against hand-derived values, their
invariants, the planner against the simulator, and the bad inputs (docs/model.md, KV offload tiers)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.errors import InputError
from model.hardware.catalog import get_engine, get_gpu
from model.hardware.engines import PREEMPTIONS, with_preemption
from model.hardware.kv_offload import KVTier
from model.planner.goodput import build_set, config_goodput
from model.planner.plan import PlanRequest, plan
from model.queueing.preemption import (
    full_probability,
    held_kv_moments,
    preemptions_per_request,
    preemptions_while_full,
    resume_terms,
)
from model.serving.configs import ColocatedConfig
from model.sim.engine import CallableSteps, InstanceSpec, SimOptions, SimRequests
from model.sim.preemption import PreemptionSpec
from model.sim.requests import poisson_requests
from model.sim.simulate import goodput, simulate, simulate_colocated
from model.workload.plain import workload_from_lengths
from model.workload.scenario import Scenario
from model.workload.slo import SLO

# prefill: 1 ms per token; decode: 10 ms per step whatever the batch (hand-traceable)
STEPS = CallableSteps(prefill=lambda p: 0.001 * sum(p), decode=lambda b, ctx: 0.01)
TWO = SimRequests(np.zeros(2), np.array([10, 10]), np.array([10, 10]))


def _run(preemption: PreemptionSpec | None):
    spec = InstanceSpec(STEPS, kv_capacity_tokens=30, max_batched_tokens=1000, preemption=preemption)
    return simulate_colocated(spec, 1, TWO)


def test_recompute_traced_by_hand() -> None:
    """KV 30 tokens, two requests of 10 + 10 arriving together. Both prompts fit (20): one prefill of
    20 tokens (20 ms) gives both first tokens at 0.02 s, holding 11 each. Four decode steps grow them
    to 15 + 15 = 30; the fifth needs 2 more, so B (admitted last) is pre-empted with 5 tokens
    generated. A decodes alone to its 10th token at 0.11 s; B then re-prefills 10 + 5 = 15 tokens
    (15 ms, its 6th token at 0.125 s) and decodes 4 more steps to 0.165 s. Its largest gap is the
    pause 0.06 -> 0.125 s."""
    res = _run(PreemptionSpec("recompute"))
    r = res.records
    assert res.summary.preemptions == 1
    assert r.preemptions.tolist() == [0, 1]
    assert r.first_token_s.tolist() == pytest.approx([0.02, 0.02])
    assert r.end_s.tolist() == pytest.approx([0.11, 0.165])
    assert r.tpot_s[1] == pytest.approx((0.165 - 0.02) / 9)
    assert r.max_itl_s.tolist() == pytest.approx([0.01, 0.065])


def test_swap_traced_by_hand() -> None:
    """As above with swap to a cpu tier of 1 GB/s per GPU at 1 MB per token and GPU: B's 15 tokens
    take 15 ms each way. The swap-out rides on A's next step (0.06 -> 0.085 s); A ends at 0.125 s;
    B swaps back in on its next step (0.125 -> 0.15 s, token 6) and ends four steps later at 0.19 s.
    Its largest gap: 0.06 -> 0.15 s."""
    tier = KVTier("cpu", 1e12, 1e9, 0.0)
    res = _run(PreemptionSpec("swap", tier, 1e9, 1e6))
    r = res.records
    assert res.summary.preemptions == 1
    assert r.end_s.tolist() == pytest.approx([0.125, 0.19])
    assert r.max_itl_s[1] == pytest.approx(0.09)


def test_whole_kv_admission_traced_by_hand() -> None:
    """Policy "none": B needs its whole 20 tokens next to A's 20 > 30, so it waits for A (prefill
    10 ms, nine steps: end 0.10 s), then runs alone (first token 0.11 s, end 0.20 s); no pre-emption."""
    res = _run(None)
    assert res.summary.preemptions == 0
    assert res.records.preemptions is None
    assert res.records.end_s.tolist() == pytest.approx([0.10, 0.20])


def test_reload_and_recompute_costs_by_hand() -> None:
    """A swap of 1000 tokens of Llama-3.1-8B (32 layers x 8 KV heads x 128 x 2 x 2 bytes = 131072 B
    per token, TP1) over a 25 GB/s cpu tier with 5 us latency: 5 us + 131.072 MB / 25 GB/s =
    5.24788 ms each way."""
    tier = KVTier("cpu", 1e12, 25e9, 5e-6)
    spec = PreemptionSpec("swap", tier, 1e9, 131072.0)
    assert spec.swap_time_s(1000) == pytest.approx(5e-6 + 131.072e6 / 25e9)


def test_held_kv_and_effective_capacity_by_hand() -> None:
    """P = 1000, O = 2000: a running sequence holds 1000 + u 2000, mean 2000, variance 2000^2 / 12.
    A 34,640-token cache runs 34640 / 2000 = 17.3 such sequences on average (whole-KV admission:
    34640 / 3000 = 11.5)."""
    mean, var = held_kv_moments(np.array([1000.0]), np.array([2000.0]))
    assert mean == pytest.approx(2000.0)
    assert var == pytest.approx(2000.0**2 / 12.0)
    assert 34640 / mean == pytest.approx(17.32)


def test_preemptions_while_full_by_hand() -> None:
    """pi = E[O]^2 (1 - exp(-E[P]/E[O])) / E[P]^2: E[P] = E[O] = 1000 -> 1 - 1/e = 0.632; E[O] = 100,
    E[P] = 1000 -> 0.01 (1 - e^-10) ~ 0.01 (the random-walk limit E[O]^2 / E[P]^2); E[O] = 10 E[P]
    -> 100 (1 - e^-0.1) = 9.52 (~ E[O] / E[P])."""
    assert preemptions_while_full(1000, 1000) == pytest.approx(1 - math.exp(-1))
    assert preemptions_while_full(1000, 100) == pytest.approx(0.01 * (1 - math.exp(-10)))
    assert preemptions_while_full(100, 1000) == pytest.approx(100 * (1 - math.exp(-0.1)))


def test_resume_terms_by_hand() -> None:
    """0.1 pre-emptions per request at 0.5 req/s, resume work 0.2 s, base TPOT 30 ms, E[O - 1] = 999:
    pause 1 / 0.5 + 0.2 = 2.2 s; busy 0.5 x 0.1 x 0.2 = 0.01; TPOT + 0.03 x 0.01 / 0.99 +
    0.1 x 2.2 / 999."""
    t = resume_terms(np.array([0.1]), np.array([0.5]), np.array([0.2]), np.array([0.03]), 999.0)
    assert t.pause_s[0] == pytest.approx(2.2)
    assert t.busy[0] == pytest.approx(0.01)
    assert t.tpot_extra_s[0] == pytest.approx(0.03 * 0.01 / 0.99 + 0.1 * 2.2 / 999.0)


@settings(max_examples=50, deadline=None)
@given(
    cap=st.floats(1e3, 1e6),
    more=st.floats(0.0, 1e6),
    p=st.floats(10.0, 1e4),
    o=st.floats(1.0, 1e4),
    n=st.lists(st.integers(0, 64), min_size=1, max_size=8),
)
def test_more_kv_never_adds_preemptions(cap: float, more: float, p: float, o: float, n: list[int]) -> None:
    """The planner's pre-emptions per request never rise with the KV capacity (any occupancy law)."""
    batch = np.array([n], dtype=float)
    prob = np.full_like(batch, 1.0 / len(n))
    held = held_kv_moments(np.array([p]), np.array([o]))
    small = preemptions_per_request(full_probability(batch, prob, np.array([cap]), held, p), p, o)
    big = preemptions_per_request(full_probability(batch, prob, np.array([cap + more]), held, p), p, o)
    assert big[0] <= small[0] + 1e-12
    assert small[0] >= 0.0


# Tight KV: Llama-3.1-8B BF16 on one RTX 4090 (~35k KV tokens) with outputs of 800-2400 tokens.
TIGHT = workload_from_lengths(isl_dist="uniform:low=500,high=1500", osl_dist="uniform:low=800,high=2400")


def test_planner_agrees_with_simulator_under_preemption() -> None:
    """At 0.3 req/s the simulator pre-empts (recompute) and the planner's mean TPOT is within 10% of
    the simulator's; the goodputs agree within 10% too (docs/validation.md records the grid)."""
    slo = SLO(2.0, 0.05)
    cfg = ColocatedConfig(get_gpu("rtx-4090"), 1, 1, 2048)
    eng = with_preemption(get_engine("vllm"), "recompute")
    scn = Scenario.build("llama-3.1-8b", TIGHT, slo, engine=eng)
    n = 400
    opts = SimOptions(warmup_requests=n // 4)
    sim = simulate(
        cfg, "llama-3.1-8b", poisson_requests(TIGHT, 0.3, n, seed=0), slo=slo, engine=eng, options=opts
    )
    assert sim.summary.preemptions > 10
    tpot_sim = float(np.nanmean(sim.records.tpot_s[sim.records.measured]))
    tpot_plan = float(build_set(scn, [cfg]).evaluate(np.array([0.3])).tpot_mean_s[0])
    assert tpot_plan == pytest.approx(tpot_sim, rel=0.10)
    g_plan = config_goodput(scn, cfg)
    g_sim = goodput(
        cfg,
        "llama-3.1-8b",
        poisson_requests(TIGHT, 1.0, n, seed=0),
        slo,
        start_rps=g_plan,
        engine=eng,
        options=opts,
        rel_tol=0.03,
    ).rate_rps
    assert g_plan == pytest.approx(g_sim, rel=0.10)


def test_engine_defaults_and_none() -> None:
    """vLLM and SGLang pre-empt by recompute (their schedulers), TensorRT-LLM never pre-empts
    (GUARANTEED_NO_EVICT); an explicit "none" gives the same simulation as a "none" profile."""
    assert get_engine("vllm").preemption == "recompute"
    assert get_engine("sglang").preemption == "recompute"
    assert get_engine("trtllm").preemption == "none"
    cfg = ColocatedConfig(get_gpu("rtx-4090"), 1, 1)
    req = poisson_requests(TIGHT, 0.3, 60, seed=1)
    none = with_preemption(get_engine("vllm"), "none")
    a = simulate(cfg, "llama-3.1-8b", req, engine=none).records
    b = simulate(cfg, "llama-3.1-8b", req, options=SimOptions(preemption="none")).records
    assert np.array_equal(a.end_s, b.end_s)
    assert a.preemptions is None


def test_bad_inputs_name_the_field() -> None:
    """Swap without a cpu tier, or an unknown policy: one clear error naming ``preemption``."""
    cfg = ColocatedConfig(get_gpu("rtx-4090"), 1, 1)
    req = poisson_requests(TIGHT, 0.3, 10, seed=1)
    with pytest.raises(InputError, match="preemption.*cpu KV offload tier"):
        simulate(cfg, "llama-3.1-8b", req, options=SimOptions(preemption="swap"))
    with pytest.raises(InputError, match="preemption.*cpu KV offload tier"):
        plan(PlanRequest("llama-3.1-8b", "rtx-4090", "chat", SLO(2.0, 0.05), gpus=1, preemption="swap"))
    with pytest.raises(InputError, match="preemption"):
        SimOptions(preemption="evict")
    with pytest.raises(InputError, match="preemption"):
        with_preemption(get_engine("vllm"), "evict")
    with pytest.raises(InputError, match="vllm.preemption"):
        dataclasses.replace(get_engine("vllm"), preemption="pause")
    assert set(PREEMPTIONS) == {"none", "recompute", "swap"}


def test_verdict_reasons_mention_preemptions() -> None:
    """The tight-KV plan (8B on one RTX 4090, long outputs) pre-empts ~0.1 times per request at its
    goodput: the reasons say so, and the JSON carries the figure; with whole-KV admission they do not."""
    from model.planner.report import plan_dict

    req = PlanRequest(
        "llama-3.1-8b", "rtx-4090", TIGHT, SLO(2.0, 0.05), gpus=1, chunk_options=(2048,), tp_options=(1,)
    )
    p = plan(req, thresholds=False)
    assert any("pre-emptions per request" in r and "recompute" in r for r in p.reasons)
    best = plan_dict(p)["best"]["colocated-chunked"]["at_goodput"]
    assert best["preemptions_per_request"] > 0.05
    p_none = plan(dataclasses.replace(req, preemption="none"), thresholds=False)
    assert not any("pre-emption" in r for r in p_none.reasons)
    assert "preemptions_per_request" not in plan_dict(p_none)["best"]["colocated-chunked"]["at_goodput"]
