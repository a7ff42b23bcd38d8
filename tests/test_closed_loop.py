"""Fixed-concurrency (closed-loop) mode: the MVA solver against exact finite-source queues, the
simulator's closed-loop source against the same, planner against simulator, properties, bad input.

Exact results used (Kleinrock 1975, *Queueing Systems* vol. 1, sec. 3.8-3.10; Gross & Harris,
*Fundamentals of Queueing Theory*, sec. 2.8, the machine-repairman / finite-source model): N users,
each thinking an exponential time of mean Z (rate lambda = 1/Z), c exponential servers of rate mu.
With r = lambda / mu the number at the servers has

    p_n = p_0 C(N, n) r^n                           for n <= c,
    p_n = p_0 C(N, n) n! / (c! c^(n - c)) r^n         for n >= c,

throughput X = sum_n min(n, c) mu p_n and mean response R = N / X - Z (response-time law).
"""

from __future__ import annotations

import json
import math
import shlex
from functools import cache
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import model
from model.cli.common import to_jsonable
from model.errors import InputError
from model.limits import MAX_CONCURRENCY
from model.planner.concurrency import response_curve
from model.planner.goodput import stability_limit_rps
from model.queueing.closed_loop import EXACT_USERS, ResponseCurve, closed_loop_mva, open_rate_grid
from model.queueing.mgc import erlang_c
from model.serving.registry import build_set
from model.sim.closed_loop import ClosedLoop, closed_loop_throughput
from model.sim.engine import CallableSteps, InstanceSpec, SimOptions, SimRequests
from model.sim.simulate import simulate_colocated
from model.workload.concurrency import Concurrency
from tests.fuzz_common import (
    call_api,
    check_cli_contract,
    check_json,
    cli_text,
    fuzz_settings,
    hostile_text,
    hostile_value,
)


def finite_source(users: int, think_s: float, mu: float, servers: int = 1) -> tuple[float, float]:
    """(X, R) of M/M/c//N by the formula in the module docstring."""
    r = 1.0 / (think_s * mu)
    weights = []
    for n in range(users + 1):
        w = math.comb(users, n) * r**n
        if n > servers:
            w *= math.factorial(n) / (math.factorial(servers) * servers ** (n - servers))
        weights.append(w)
    total = sum(weights)
    x = sum(min(n, servers) * mu * w / total for n, w in enumerate(weights))
    return x, users / x - think_s


def mmc_curve(mu: float, servers: int) -> ResponseCurve:
    """The open M/M/c mean response 1/mu + C(c, a) / (c mu - lambda) on the planner's rate grid."""
    rates = open_rate_grid(np.array([servers * mu]))
    resp = 1.0 / mu + erlang_c(servers, rates / mu) / (servers * mu - rates)
    return ResponseCurve.build(rates, resp, np.array([servers * mu]))


# ------------------------------------------------------------------------------ exact results


def test_machine_repairman_hand_numbers() -> None:
    """N = 5, Z = 2 s, mu = 1/s, one server: r = 1/2, the weights N!/(N-n)! r^n are
    1, 2.5, 5, 7.5, 7.5, 3.75 (sum 27.25), so p_0 = 4/109, X = mu (1 - p_0) = 105/109 req/s and
    R = 5 / X - 2 = 67/21 s."""
    x, r = finite_source(5, 2.0, 1.0)
    assert x == pytest.approx(105 / 109, rel=1e-12)
    assert r == pytest.approx(67 / 21, rel=1e-12)
    # M/M/2//3 with Z = 1, mu = 1 (r = 1): weights 1, 3, 3, 3!/(2! 2) = 1.5 (sum 8.5);
    # X = (3 + 2 x 3 + 2 x 1.5) / 8.5 = 24/17, R = 3 / X - 1 = 9/8.
    x2, r2 = finite_source(3, 1.0, 1.0, servers=2)
    assert x2 == pytest.approx(24 / 17, rel=1e-12)
    assert r2 == pytest.approx(9 / 8, rel=1e-12)


def test_mva_is_exact_for_one_exponential_server() -> None:
    """The open M/M/1 response 1/(mu - lambda) turned into the closed loop gives the exact
    machine-repairman throughput and response at every N (R(n) = (1 + Q(n-1)) / mu)."""
    curve = mmc_curve(1.0, 1)
    levels = [1, 2, 5, 10, 40]
    for think in (0.5, 2.0, 10.0):
        res = closed_loop_mva(curve, think, levels)
        for j, n in enumerate(levels):
            x, r = finite_source(n, think, 1.0)
            assert res.levels.throughput_rps[0, j] == pytest.approx(x, rel=1e-9)
            assert res.levels.response_s[0, j] == pytest.approx(r, rel=1e-9)
    five = closed_loop_mva(curve, 2.0, [5])
    assert five.levels.throughput_rps[0, 0] == pytest.approx(105 / 109, rel=1e-9)
    assert five.levels.response_s[0, 0] == pytest.approx(67 / 21, rel=1e-9)


def test_mva_with_open_mmc_is_close_to_the_exact_multi_server_result() -> None:
    """For c = 3 servers the open-model MVA is an approximation: exact at N = 1, throughput within
    8% below and response within 12% above the exact M/M/3//N (docs/planner.md)."""
    curve = mmc_curve(1.0, 3)
    levels = [1, 2, 3, 5, 8, 12, 20, 40]
    for think in (0.5, 2.0, 10.0):
        res = closed_loop_mva(curve, think, levels)
        for j, n in enumerate(levels):
            x, r = finite_source(n, think, 1.0, servers=3)
            ratio_x = res.levels.throughput_rps[0, j] / x
            ratio_r = res.levels.response_s[0, j] / r
            if n == 1:
                assert ratio_x == pytest.approx(1.0, rel=1e-9)
            assert 0.92 <= ratio_x <= 1.0 + 1e-9, (think, n, ratio_x)
            assert 1.0 - 1e-9 <= ratio_r <= 1.12, (think, n, ratio_r)


def _mm1_run(think: str, n: int = 20_000) -> tuple[float, float]:
    """The simulator as an M/M/1 server: one replica, one prompt per prefill (token cap 1), output 1
    token, prefill time 1 ms per token and geometric prompts of mean 1,000 (an exponential service
    of mean 1 s to within SCV 0.999); 5 users thinking 2 s."""
    rng = np.random.default_rng(1)
    prompts = rng.geometric(1 / 1000, n)
    req = SimRequests(np.zeros(n), prompts, np.ones(n, dtype=int))
    spec = InstanceSpec(CallableSteps(lambda ps: 1e-3 * sum(ps), lambda b, c: 0.01), 10**9, 1)
    warmup = 100
    opts = SimOptions(warmup_requests=warmup, closed_loop=ClosedLoop(Concurrency(5, 2.0, think), seed=3))
    res = simulate_colocated(spec, 1, req, options=opts)
    x, _ = closed_loop_throughput(res.records, warmup, 5)
    rec = res.records
    m = rec.measured
    return x, float(np.mean((rec.end_s - rec.arrival_s)[m]))


@pytest.mark.parametrize("think", ["exponential", "fixed"])
def test_simulator_closed_loop_matches_the_machine_repairman(think: str) -> None:
    """X = 105/109 req/s and R = 67/21 s (hand numbers above); fixed think times give the same
    means (the finite-source queue with exponential service is insensitive to the think-time
    distribution). 20,000 requests: sampling error about 1%."""
    x, r = _mm1_run(think)
    assert x == pytest.approx(105 / 109, rel=0.03)
    assert r == pytest.approx(67 / 21, rel=0.04)


def test_closed_loop_run_keeps_n_users() -> None:
    """At any instant at most N requests are in the system, and each user's next request arrives
    after its previous one ended (zero think time: at the same instant)."""
    n = 400
    req = SimRequests(np.zeros(n), np.full(n, 500), np.full(n, 20))
    steps = CallableSteps(lambda ps: 1e-4 * sum(ps), lambda b, c: 0.01 + 1e-3 * b)
    opts = SimOptions(closed_loop=ClosedLoop(Concurrency(7)))
    rec = simulate_colocated(InstanceSpec(steps, 10**9, 4096), 2, req, options=opts).records
    assert np.all(np.isfinite(rec.end_s))
    events = sorted(
        [(t, 1) for t in rec.arrival_s] + [(t, -1) for t in rec.end_s], key=lambda e: (e[0], e[1])
    )
    inside = np.cumsum([d for _, d in events])
    assert inside.max() == 7
    assert np.all(rec.arrival_s[:7] == 0.0)
    # every later arrival coincides with an earlier completion (think time 0)
    ends = set(rec.end_s.tolist())
    assert all(t in ends for t in rec.arrival_s[7:])


def test_large_populations_join_the_exact_recursion_without_a_step() -> None:
    """Past EXACT_USERS the approximate MVA continues the exact recursion: throughput and response
    still rise with N, throughput stays within the capacity c mu, and the maximum concurrency found
    by bisection there is where the equivalent rate crosses the limit."""
    curve = mmc_curve(1.0, 8)
    n0 = EXACT_USERS
    levels = [n0 - 1, n0, n0 + 1, n0 + 2, 2 * n0, 5000]
    for think in (0.0, 100.0, 2000.0):
        res = closed_loop_mva(curve, think, levels)
        x, r = res.levels.throughput_rps[0], res.levels.response_s[0]
        assert np.all(np.diff(x) >= -1e-9 * x[1:]) and np.all(np.diff(r) >= -1e-9 * r[1:]), (think, x, r)
        assert np.all(x <= 8.0 * (1 + 1e-3))
    limit = np.array([7.9])  # reached near N = Z c mu = 2000 x 8 users with Z = 2000 s
    found = closed_loop_mva(curve, 2000.0, [1], limit_rps=limit)
    top = int(found.max_users[0])
    assert n0 < top < MAX_CONCURRENCY and not found.capped[0]
    around = closed_loop_mva(curve, 2000.0, [top, top + 1])
    assert around.levels.rate_rps[0, 0] <= 7.9 < around.levels.rate_rps[0, 1]
    assert found.at_max.throughput_rps[0] == pytest.approx(around.levels.throughput_rps[0, 0], rel=1e-9)


# ------------------------------------------------------------------------------ properties


@settings(max_examples=60, deadline=None)
@given(
    mu=st.floats(0.1, 50.0),
    servers=st.integers(1, 8),
    think=st.floats(0.0, 30.0),
    top=st.integers(2, 300),
)
def test_mva_throughput_and_response_are_monotone_and_bounded(
    mu: float, servers: int, think: float, top: int
) -> None:
    """X(N) nondecreasing, R(N) nondecreasing, X(N) <= N / (Z + R_min) and X(N) <= c mu (the
    asymptotic bounds, Lazowska et al. 1984, sec. 5.2), up to the extrapolation's 1/L_K."""
    curve = mmc_curve(mu, servers)
    levels = sorted({1, 2, top // 3 + 1, top // 2 + 1, top})
    res = closed_loop_mva(curve, think, levels)
    x = res.levels.throughput_rps[0]
    r = res.levels.response_s[0]
    assert np.all(np.diff(x) >= -1e-9 * x[1:])
    assert np.all(np.diff(r) >= -1e-9 * r[1:])
    r_min = 1.0 / mu
    assert np.all(x <= np.array(levels) / (think + r_min) * (1 + 1e-9))
    assert np.all(x <= servers * mu * (1 + 1e-3))


# ------------------------------------------------------------------------------ the real model


@pytest.fixture(scope="module")
def scenario() -> model.Scenario:
    return model.Scenario.build("llama-3.1-8b", "chat", model.SLO(0.5, 0.05), samples=512)


def _configs() -> dict[str, object]:
    gpu = model.get_gpu("h100-sxm")
    return {
        "colocated": model.ColocatedConfig(gpu, 1, 2),
        "chunked": model.ColocatedConfig(gpu, 1, 2, 2048),
        "disaggregated": model.DisaggregatedConfig(gpu, 1, 1, gpu, 1, 1, model.get_link("ib-ndr-400")),
    }


def test_planner_curve_is_monotone_on_a_real_configuration(scenario: model.Scenario) -> None:
    """On 2 x TP1 H100 chat: throughput and mean response nondecreasing in N, throughput at most
    N / (Z + R(1)), and the maximum concurrency where the SLO test turns."""
    cfg = _configs()["colocated"]
    levels = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    pts = model.concurrency_curve(cfg, scenario, levels, 1.0)
    x = np.array([p.throughput_rps for p in pts])
    r = np.array([p.response_mean_s for p in pts])
    assert np.all(np.diff(x) >= -1e-9) and np.all(np.diff(r) >= -1e-9)
    assert np.all(x <= np.array(levels) / (1.0 + r[0]) * (1 + 1e-9))
    ev = model.evaluate_concurrency(cfg, scenario, 64, 1.0)
    assert ev.at_users.throughput_rps == pytest.approx(pts[6].throughput_rps, rel=1e-9)
    top = ev.max_concurrency
    assert top >= 1 and ev.at_max is not None and ev.at_max.meets_slo
    beyond = model.concurrency_curve(cfg, scenario, [top + 1], 1.0)[0]
    assert beyond.equivalent_rate_rps > ev.goodput_rps or not beyond.meets_slo


@cache
def _real_curve(name: str) -> tuple[ResponseCurve, float]:
    """The response curve of one real configuration (Llama-3.1-8B chat, H100) and its stability limit."""
    scn = model.Scenario.build("llama-3.1-8b", "chat", model.SLO(0.5, 0.05), samples=512)
    cands = build_set(scn, [_configs()[name]])
    limit = stability_limit_rps(cands)
    return response_curve(cands, limit), float(limit[0])


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(["colocated", "chunked", "disaggregated"]),
    think=st.floats(0.0, 120.0),
    levels=st.lists(st.integers(1, 3000), min_size=2, max_size=6, unique=True),
)
def test_real_configurations_rise_with_users_within_their_bounds(
    name: str, think: float, levels: list
) -> None:
    """On the planner's own response curves: X(N) and R(N) nondecreasing in N, X(N) <= N / (Z +
    R(1)) and X(N) <= the open-loop stability limit (up to the approximations' 1e-3)."""
    curve, limit = _real_curve(name)
    levels = sorted(levels)
    res = closed_loop_mva(curve, think, levels)
    x, r = res.levels.throughput_rps[0], res.levels.response_s[0]
    assert np.all(np.diff(x) >= -1e-9 * x[1:]) and np.all(np.diff(r) >= -1e-9 * r[1:])
    r_min = closed_loop_mva(curve, think, [1]).levels.response_s[0, 0]
    assert np.all(x <= np.array(levels) / (think + r_min) * (1 + 1e-9))
    assert np.all(x <= limit * (1 + 1e-3))


@pytest.mark.parametrize(
    ("name", "users", "think_s"), [("colocated", 64, 0.0), ("chunked", 8, 0.0), ("disaggregated", 64, 5.0)]
)
def test_planner_throughput_within_ten_percent_of_the_simulator(
    scenario: model.Scenario, name: str, users: int, think_s: float
) -> None:
    """Llama-3.1-8B chat on H100: the planner's closed-loop throughput and the simulator's agree
    within 10% (docs/planner.md, "Fixed concurrency", lists more cases)."""
    cfg = _configs()[name]
    ev = model.evaluate_concurrency(cfg, scenario, users, think_s)
    sim = model.simulate_concurrency(
        cfg, "llama-3.1-8b", "chat", model.Concurrency(users, think_s), slo=scenario.slo, requests=1500
    )
    assert sim.throughput_rps == pytest.approx(ev.at_users.throughput_rps, rel=0.10)
    assert sim.response_mean_s == pytest.approx(ev.at_users.response_mean_s, rel=0.15)


def test_plan_concurrency_verdict_is_on_max_users() -> None:
    p = model.plan_concurrency(
        "llama-3.1-8b", "h100-sxm", concurrency=32, gpus=2, workload="chat", ttft_slo_s=0.5, tpot_slo_s=0.05
    )
    assert p.mode == "concurrency" and p.concurrency.users == 32
    assert set(p.best) >= {"colocated", "disaggregated"}
    dis = p.best["disaggregated"].max_concurrency
    col = max(b.max_concurrency for s, b in p.best.items() if s != "disaggregated")
    assert p.gain == pytest.approx(dis / col - 1.0)
    if p.gain >= p.inputs.margin:
        assert p.verdict == "disaggregated"
    else:
        assert p.verdict in ("colocated", "colocated-chunked")
    data = model.concurrency_plan_dict(p)
    assert data["mode"] == "concurrency" and data["verdict"] == p.verdict
    assert data["best"]["disaggregated"]["max_concurrency"] == dis


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"users": 0}, "concurrency"),
        ({"users": 20_001}, "concurrency"),
        ({"users": 2.5}, "concurrency"),
        ({"users": 4, "think_time_s": -1.0}, "think_time"),
        ({"users": 4, "think_time_s": math.inf}, "think_time"),
        ({"users": 4, "think": "gamma"}, "think"),
    ],
)
def test_bad_concurrency_is_one_clear_error(kwargs: dict, field: str) -> None:
    with pytest.raises(InputError) as err:
        model.Concurrency(**kwargs)
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_plan_concurrency_none_names_why() -> None:
    """Llama-3.1-70B on 2 x L40S (48 GB): nothing fits, so the verdict is "none" with the memory
    reasons (141 GB of BF16 weights on one GPU, 70.6 GB per GPU at TP2)."""
    p = model.plan_concurrency(
        "llama-3.1-70b", "l40s", concurrency=8, gpus=2, workload="chat", ttft_slo_s=1.0, tpot_slo_s=0.1
    )
    assert p.verdict == "none" and not p.best and p.gain is None
    assert any("weights per GPU" in r for r in p.reasons)


def test_plan_concurrency_needs_a_budget_and_a_valid_count() -> None:
    common = {"workload": "chat", "ttft_slo_s": 0.5, "tpot_slo_s": 0.05}
    with pytest.raises(InputError, match="gpus"):
        model.plan_concurrency("llama-3.1-8b", "h100-sxm", concurrency=8, target_rate_rps=2.0, **common)
    with pytest.raises(InputError, match="concurrency"):
        model.plan_concurrency("llama-3.1-8b", "h100-sxm", concurrency=0, gpus=2, **common)
    with pytest.raises(InputError, match="think_time"):
        model.plan_concurrency("llama-3.1-8b", "h100-sxm", concurrency=8, think_time_s=-2.0, gpus=2, **common)


# ------------------------------------------------------------------------------ the CLI

PLAN = "plan --model llama-3.1-8b --gpu h100-sxm --workload chat --ttft-slo 500ms --tpot-slo 50ms"
SIM = "simulate --model llama-3.1-8b --gpu h100-sxm --style colocated --replicas 1 --workload chat"


def test_cli_plan_concurrency_json_matches_the_api() -> None:
    code, out, err = cli_text(f"{PLAN} --gpus 2 --tp 1 --chunks 512 --concurrency 16 --think-time 1s --json")
    assert code == 0, err
    data = json.loads(out)
    api = model.plan_concurrency(
        "llama-3.1-8b",
        "h100-sxm",
        concurrency=model.Concurrency(16, 1.0),
        gpus=2,
        workload="chat",
        ttft_slo_s=0.5,
        tpot_slo_s=0.05,
        tp_options=(1,),
        chunk_options=(512,),
    )
    assert data["mode"] == "concurrency" and data["verdict"] == api.verdict
    assert data["concurrency"] == {"users": 16, "think_time_s": 1.0, "think": "exponential"}
    for name, b in api.best.items():
        assert data["best"][name]["max_concurrency"] == b.max_concurrency
        assert data["best"][name]["at_users"]["throughput_rps"] == pytest.approx(b.at_users.throughput_rps)


def test_cli_simulate_concurrency_reports_the_closed_loop_throughput() -> None:
    code, out, err = cli_text(f"{SIM} --concurrency 8 --requests 400 --ttft-slo 1s --tpot-slo 100ms --json")
    assert code == 0, err
    data = json.loads(out)
    assert data["concurrency"]["users"] == 8
    assert data["closed_loop_throughput_rps"] > 0 and data["measured"] == 400 - 16
    code, out, _ = cli_text(f"{SIM} --concurrency 8 --requests 400")
    assert code == 0 and "closed loop, 8 users" in out


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (f"{PLAN} --gpus 2 --concurrency 0", "--concurrency"),
        (f"{PLAN} --gpus 2 --concurrency 20001", "--concurrency"),
        (f"{PLAN} --gpus 2 --concurrency many", "--concurrency"),
        (f"{PLAN} --gpus 2 --concurrency 4 --think-time=-1s", "--think-time"),
        (f"{PLAN} --gpus 2 --think-time 2s", "--think-time"),
        (f"{PLAN} --target-rate 2 --concurrency 4", "--gpus"),
        (f"{SIM} --concurrency 0", "--concurrency"),
        (f"{SIM} --concurrency 4 --rate 2", "--rate"),
        (f"{SIM} --concurrency 50 --requests 40", "requests"),
    ],
)
def test_cli_bad_concurrency_is_one_error_line(args: str, flag: str) -> None:
    code, out, err = cli_text(args)
    assert code == 2 and not out
    assert err.count("\n") == 1 and flag in err and "Traceback" not in err


# ------------------------------------------------------------------------------ hostile input


@cache
def _fuzz_calls() -> dict[str, tuple[Any, dict[str, Any]]]:
    arch = model.get_model("llama-3.1-8b")
    gpu = model.get_gpu("h100-sxm")
    scn = model.Scenario(arch, model.get_workload("short"), model.SLO(2.0, 0.1), samples=64)
    cfg = model.ColocatedConfig(gpu, 1, 1)
    return {
        "Concurrency": (model.Concurrency, {"users": 4, "think_time_s": 1.0, "think": "fixed"}),
        "evaluate_concurrency": (
            model.evaluate_concurrency,
            {"config": cfg, "scenario": scn, "concurrency": 4, "think_time_s": 0.5, "think": "exponential"},
        ),
        "concurrency_curve": (
            model.concurrency_curve,
            {"config": cfg, "scenario": scn, "levels": [1, 4], "think_time_s": 0.0},
        ),
        "simulate_concurrency": (
            model.simulate_concurrency,
            {"config": cfg, "model": arch, "workload": "short", "concurrency": 3, "requests": 30, "seed": 1},
        ),
    }


@fuzz_settings(fast=40, full=400)
@given(st.sampled_from(sorted(_fuzz_calls())), st.data())
def test_closed_loop_api_with_one_hostile_argument(name: str, data: st.DataObject) -> None:
    """Only pdplan's own one-line errors escape, and a result's latencies and rates are finite and
    non-negative."""
    fn, kwargs = _fuzz_calls()[name]
    arg = data.draw(st.sampled_from(sorted(kwargs)), label="argument")
    value = data.draw(hostile_value, label="value")
    result = call_api(fn, **{**kwargs, arg: value})
    if isinstance(result, model.ConcurrencyEvaluation):
        check_json(to_jsonable(result.at_users))
    elif isinstance(result, model.ClosedLoopSimResult):
        assert result.throughput_rps >= 0 and result.window_s >= 0


@fuzz_settings(fast=25, full=300)
@given(
    base=st.sampled_from(["plan", "simulate"]),
    flag=st.sampled_from(["--concurrency", "--think-time"]),
    value=hostile_text,
)
def test_cli_concurrency_flags_keep_the_error_contract(base: str, flag: str, value: str) -> None:
    """A hostile --concurrency or --think-time: exit 0 with clean JSON, or one error line."""
    argv = [*shlex.split(PLAN if base == "plan" else SIM), "--json"]
    argv += ["--gpus", "2", "--tp", "1", "--chunks", "512"] if base == "plan" else ["--requests", "60"]
    argv += (
        ["--concurrency", value] if flag == "--concurrency" else ["--concurrency", "3", "--think-time", value]
    )
    check_cli_contract(argv)
