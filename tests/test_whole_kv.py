"""Whole-KV admission (engine policy "none", TensorRT-LLM's GUARANTEED_NO_EVICT) in the planner: the
decode-batch cap from the reserved prompt + output, hand-derived; the KV-admission wait's tail in
the TTFT law on tiny cases; the planner against the simulator (docs/model.md, "KV offload tiers")."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.hardware.catalog import get_engine, get_gpu
from model.hardware.engines import with_preemption
from model.queueing.decode_batch import admission_queue, two_wait_exceedance
from model.queueing.latency import LatencyModel
from model.serving.configs import ColocatedConfig
from model.serving.phase_tables import instance_tables
from model.workload.plain import workload_from_lengths
from model.workload.scenario import Scenario
from model.workload.slo import SLO
from tests.goodput_pair import planned_and_simulated

TIGHT = workload_from_lengths(isl_dist="uniform:low=500,high=1500", osl_dist="uniform:low=800,high=2400")


def _scenario(policy: str) -> Scenario:
    return Scenario.build(
        "llama-3.1-8b", TIGHT, SLO(2.0, 0.05), engine=with_preemption(get_engine("vllm"), policy)
    )


def test_whole_kv_cap_by_hand() -> None:
    """P ~ U(500, 1500), O ~ U(800, 2400). Reserved per running sequence (length-biased by O):
    E[O (P + O)] / E[O] = E[P] + E[O^2] / E[O] = 1000 + (1600^2 + 1600^2 / 12) / 1600 = 2733.3;
    held under incremental allocation E[P] + E[O^2] / (2 E[O]) = 1000 + 866.7 = 1866.7.
    One RTX 4090 chunk 2048: its cache of C tokens is floor(C / 16) blocks (39,440 tokens: 2465);
    whole-KV: ceil(2736.5 / 16) = 172 blocks a sequence (the sample's mean) -> 2465 / 172 = 14.33
    reservations on average (not rounded down: reservations of varying sizes share the tokens);
    incremental: ceil(1869.9 / 16) = 117 blocks -> floor(2465 / 117) = 21 sequences.
    A saturated cache under FCFS head-of-line admission keeps the renewal age E[s^2] / (2 E[s]) of the
    head sizes free (model.queueing.decode_batch.head_of_line_room): whole-KV s = P + O, E[s] = 2600,
    Var[s] = 1000^2 / 12 + 1600^2 / 12 = 296,667, age 7,056,667 / 5200 = 1357.1 tokens, usable
    1 - 1357.1 / 39,440 = 0.96559; incremental s = P, E[P^2] = 1,083,333, age 541.7, usable 0.98627."""
    none, rec = _scenario("none"), _scenario("recompute")
    assert none.reserved_context_tokens == pytest.approx(1000 + (1600**2 + 1600**2 / 12) / 1600, rel=0.005)
    assert rec.decode_context_tokens == pytest.approx(1000 + (1600**2 + 1600**2 / 12) / 3200, rel=0.005)
    g = get_gpu("rtx-4090")
    t_none = instance_tables(none, g, 1, 2048, "colocated")
    t_rec = instance_tables(rec, g, 1, 2048, "colocated")
    assert t_none.kv_capacity_tokens == t_rec.kv_capacity_tokens == 39440
    assert t_none.max_batch == pytest.approx(2465 / 172)
    assert t_rec.max_batch == 21
    assert t_none.saturated_batch == pytest.approx(2465 / 172 * 0.96559, rel=0.002)
    assert t_rec.saturated_batch == pytest.approx(21 * 0.98627, rel=0.002)
    # a disaggregated decode instance keeps the incremental cap (the brief's scope: colocated replicas)
    assert (
        instance_tables(none, g, 1, None, "decode").max_batch
        == instance_tables(rec, g, 1, None, "decode").max_batch
    )


def test_two_waits_by_hand() -> None:
    """W: P(W > 0) = 0.5, mean 1 given W > 0; A: 0.4, mean 2. At t = 1:
    0.5 x 0.6 e^-1 + 0.4 x 0.5 e^-0.5 + 0.2 (1 e^-1 - 2 e^-0.5) / (1 - 2)
    = 0.110364 + 0.121306 + 0.169037 = 0.400707. Equal means 1, both certain: (1 + t) e^-t = 0.735759.
    t < 0: 1; no second wait (q = 0): the first's own tail 0.5 e^-1."""
    assert float(two_wait_exceedance(1.0, 0.5, 1.0, 0.4, 2.0)) == pytest.approx(0.400707, abs=1e-6)
    assert float(two_wait_exceedance(1.0, 1.0, 1.0, 1.0, 1.0)) == pytest.approx(2 * math.exp(-1), abs=1e-9)
    assert float(two_wait_exceedance(-0.1, 0.5, 1.0, 0.4, 2.0)) == 1.0
    assert float(two_wait_exceedance(1.0, 0.5, 1.0, 0.0, 0.0)) == pytest.approx(0.5 * math.exp(-1))
    # a Monte Carlo of the two waits agrees
    rng = np.random.default_rng(0)
    n = 200_000
    w = np.where(rng.random(n) < 0.5, rng.exponential(1.0, n), 0.0)
    a = np.where(rng.random(n) < 0.4, rng.exponential(2.0, n), 0.0)
    for t in (0.5, 2.0, 5.0):
        assert float(np.mean(w + a > t)) == pytest.approx(
            float(two_wait_exceedance(t, 0.5, 1.0, 0.4, 2.0)), abs=0.004
        )


@settings(max_examples=60, deadline=None)
@given(
    p=st.floats(0.0, 1.0),
    m=st.floats(0.01, 100.0),
    q=st.floats(0.0, 1.0),
    a=st.floats(0.01, 100.0),
    t=st.floats(0.0, 500.0),
)
def test_two_waits_bounds(p: float, m: float, q: float, a: float, t: float) -> None:
    """The sum exceeds t at least as often as either wait alone and at most as often as the union
    bound of each exceeding t, and its tail never rises with t (an exceedance probability)."""
    both = float(two_wait_exceedance(t, p, m, q, a))
    one_w, one_a = p * math.exp(-t / m), q * math.exp(-t / a)
    assert both >= max(one_w, one_a) - 1e-9
    # W + A > t needs W > t/2 or A > t/2
    assert both <= p * math.exp(-t / 2 / m) + q * math.exp(-t / 2 / a) + 1e-9
    assert float(two_wait_exceedance(t + 1.0, p, m, q, a)) <= both + 1e-9


def test_admission_tail_in_ttft_by_hand() -> None:
    """One KV slot (M/M/1: output SCV 1), lambda = 0.5 /s, service E[O] tau = 100 x 0.01 = 1 s:
    P(wait) = rho = 0.5, E[wait | wait] = 1 / (1 - 0.5) = 2 s, mean 1 s. In the TTFT law with no
    prefill queue and no fixed part, p90 solves 0.5 e^{-t / 2} = 0.1: t = 2 ln 5 = 3.219 s (the
    mean alone would have given 1 s)."""
    adm = admission_queue(np.array([0.5]), 100.0, 1.0, np.array([1.0]), np.array([0.01]))
    assert float(adm.prob[0]) == pytest.approx(0.5)
    assert float(adm.cond_mean_s[0]) == pytest.approx(2.0)
    assert float(adm.mean_s[0]) == pytest.approx(1.0)
    one = np.ones(1)
    lat = LatencyModel(
        wait_prob=np.zeros(1),
        wait_cond_mean_s=np.zeros(1),
        fixed_s=np.zeros((1, 1)),
        tpot_base_s=one * 0.01,
        stall_events=np.zeros((1, 1)),
        stall_sizes_s=np.zeros((1, 1)),
        output_tokens=np.array([100.0]),
        stable=np.array([True]),
        admit_prob=adm.prob,
        admit_cond_mean_s=adm.cond_mean_s,
    )
    assert float(lat.ttft_percentile_s(0.9)[0]) == pytest.approx(2 * math.log(5), rel=1e-6)
    assert float(lat.admit_mean_s[0]) == pytest.approx(1.0)


def test_fractional_slots_by_hand() -> None:
    """Jagerman's continuous Erlang B at c = 1.5, a = 1: B = a^c e^-a / (Gamma(2.5) Q(2.5, 1)) with
    Gamma(2.5) = 1.329340, Q(2.5, 1) = 0.849145 -> B = 0.367879 / 1.128801 = 0.325902; Erlang C =
    B / ((c - a) / c + (a / c) B) = 0.325902 / (0.333333 + 0.217268) = 0.591902 (M/M/c, SCV 1); whole
    slot counts give the integer queue (c = 1: P(wait) = rho)."""
    adm = admission_queue(np.array([1.0, 0.5]), 100.0, 1.0, np.array([1.5, 1.0]), np.array([0.01, 0.01]))
    assert float(adm.prob[0]) == pytest.approx(0.591902, abs=1e-6)
    assert float(adm.cond_mean_s[0]) == pytest.approx(1.0 / (1.5 - 1.0))
    assert float(adm.prob[1]) == pytest.approx(0.5)


def test_planner_agrees_with_simulator_under_whole_kv() -> None:
    """Whole-KV admission on a tight cache (one RTX 4090, chunk 2048): planner and simulator
    goodputs within 10% (before the reserved-KV cap the planner was 48% optimistic)."""
    scn = _scenario("none")
    cfg = ColocatedConfig(get_gpu("rtx-4090"), 1, 1, 2048)
    g_plan, g_sim = planned_and_simulated(scn, cfg, TIGHT, 600)
    assert g_plan == pytest.approx(g_sim, rel=0.10)
