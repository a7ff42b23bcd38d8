"""pdplan's simulator against DistServe's (simdistserve) on the same requests and the same step times.

DistServe (Zhong et al., OSDI 2024) ships a discrete-event simulator, ``simdistserve`` in
github.com/LLMServe/DistServe, written on simpy. This script *calls* it from a checkout (nothing of
it is copied here): point ``DISTSERVE_PATH`` (or ``--distserve``) at a directory holding
``simdistserve/`` and make ``simpy`` importable (e.g. ``pip install --target /tmp/peerpkgs simpy``
and ``PYTHONPATH=/tmp/peerpkgs``). Without them the script prints why and exits 0.

Same requests: pdplan's seeded Poisson arrivals and lengths (``model.sim.requests.poisson_requests``)
go to both. simdistserve counts decode steps after the prefill token, so a request of O output
tokens is given ``output_lens = O - 1`` there; its TTFT (arrival -> first ``wait_decode``) and
TPOT (decode time / ``output_lens``) then match pdplan's definitions (docs/validation.md).

Same step times (mode ``pdplan-steps``): simdistserve's two time functions, looked up by its worker
module, are replaced for the run by pdplan's tabulated roofline (``model.sim.steps.RooflineSteps``:
prefill of the batch's prompts, decode of the batch at its total context), and its per-step "Ray
overhead" (2 ms + 1e-4 ms per token) is set to zero (pdplan's step overhead is inside the roofline).
The ``fitted steps`` runs keep DistServe's fitted A100 coefficients and overhead (OPT-13B/66B only):
its vLLM (2023) fit for the colocated cluster and its own engine's fit for the disaggregated one, as
in the paper; the ``DistServe-engine steps`` runs use its own engine's fit for both styles, which
separates the engine difference from the effect of disaggregation.

Scenarios (A100-80GB SXM, FP16, DistServe-like chatbot lengths): colocated (simdistserve's
VLLMCluster vs pdplan's ColocatedConfig, prefill-first, no chunking) and disaggregated
(DisaggCluster vs DisaggregatedConfig over NVLink; simdistserve has no KV transfer time).
Compared: p50/p90 TTFT and TPOT at fixed rates, SLO attainment, and goodput (highest rate with
attainment >= 90%, bisection to 2% on both sides with the same request set).

Run: ``DISTSERVE_PATH=/tmp/distserve PYTHONPATH=/tmp/peerpkgs .venv/bin/python -m
benchmarks.peer_simulators [--requests N] [--only NAME ...] [--no-goodput] [--steps]`` (about 18
minutes with 500 requests on one shared core; ``--steps`` prints the step-time table only).
Results and their explanation: docs/validation.md, "Peer simulator".
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import model
from model.sim.requests import poisson_requests
from model.sim.simulate import SimOptions, SimRequests, simulate
from model.sim.steps import RooflineSteps
from model.workload.arrivals import scale_to_rate

WARMUP_FRACTION = 0.1
ATTAINMENT = 0.9
BISECT_TOL = 0.02
MIN_RATE_RPS = 0.01  # goodput below this is reported as 0 (the SLO is missed even when idle)
SIM_TIME_LIMIT_S = 60.0  # simulated seconds after the last arrival; requests unfinished by then miss the SLO


@dataclass(frozen=True)
class Scenario:
    """One peer-simulator scenario: model, layouts, workload, SLO and the rates to compare at."""

    name: str
    model: str
    gpu: str
    co_tp: int
    p_tp: int
    d_tp: int
    co_n: int  # colocated replicas
    p_n: int  # prefill instances
    d_n: int  # decode instances
    isl: str
    osl: str
    ttft_slo_s: float
    tpot_slo_s: float
    rates: tuple[float, ...]


CHAT = ("lognormal:mean=700,cv=1.0", "lognormal:mean=250,cv=1.0")
LONG = ("lognormal:mean=1500,cv=0.3", "lognormal:mean=150,cv=0.6")
A100 = "a100-80gb-sxm"
SCENARIOS = (
    Scenario("opt-13b chat", "opt-13b", A100, 1, 2, 1, 1, 1, 1, *CHAT, 0.25, 0.1, (1.0, 2.0, 3.0)),
    Scenario("opt-13b chat, 3 GPUs", "opt-13b", A100, 1, 1, 1, 3, 2, 1, *CHAT, 0.25, 0.1, (3.0, 6.0, 9.0)),
    Scenario("opt-66b chat", "opt-66b", A100, 4, 4, 4, 1, 1, 1, *CHAT, 2.5, 0.15, (1.0, 2.0, 4.0)),
    Scenario("opt-66b long prompts", "opt-66b", A100, 4, 4, 4, 1, 1, 1, *LONG, 15.0, 0.15, (0.5, 1.0, 1.5)),
)  # fmt: skip


# ------------------------------------------------------------------------------------ DistServe


def load_distserve(path: str | None) -> dict[str, Any] | None:
    """simdistserve's modules from a checkout at ``path`` (None: not available, with the reason printed)."""
    if not path or not os.path.isdir(os.path.join(path, "simdistserve")):
        print(f"simdistserve not found (DISTSERVE_PATH / --distserve = {path!r}); skipping.")
        return None
    if path not in sys.path:
        sys.path.insert(0, path)
    try:
        mods = {
            name: importlib.import_module(f"simdistserve.{name}")
            for name in (
                "base.worker",
                "base.request",
                "base.scheduler",
                "clusters.vllm",
                "clusters.disagg",
                "estimators.time_estimator",
            )
        }
        mods["simpy"] = importlib.import_module("simpy")
    except ImportError as exc:  # simpy (or pandas, imported by simdistserve.base) missing
        print(f"simdistserve cannot be imported ({exc}); skipping.")
        return None
    return mods


def _pdplan_step_functions(co_steps: RooflineSteps, p_steps: RooflineSteps, d_steps: RooflineSteps) -> tuple:
    """simdistserve-signature time functions (milliseconds) backed by pdplan's roofline tables.
    simdistserve passes the TP degree of the worker; the table is chosen by it."""
    by_tp_prefill = {co_steps.dep.parallel.tp: co_steps, p_steps.dep.parallel.tp: p_steps}
    by_tp_decode = {co_steps.dep.parallel.tp: co_steps, d_steps.dep.parallel.tp: d_steps}

    def prefill_ms(*_a: Any, TP: int = 1, prefill_len_list: list[int] | None = None, **_k: Any) -> float:
        return 1e3 * by_tp_prefill[TP].prefill_s(list(prefill_len_list or [1]))

    def decode_ms(
        num_requests: int, *_a: Any, TP: int = 1, token_generated_list: list[int] | None = None, **_k: Any
    ) -> float:
        return 1e3 * by_tp_decode[TP].decode_s(int(num_requests), int(sum(token_generated_list or [1])))

    return prefill_ms, decode_ms


def run_distserve(
    mods: dict[str, Any],
    disagg: bool,
    sc: Scenario,
    req: SimRequests,
    steps: tuple | None,
    prefill_cap: int,
    engine: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """TTFT and TPOT (s) of every request from one simdistserve run; ``steps`` None keeps its own
    fitted step times (and Ray overhead), else pdplan's (prefill_ms, decode_ms) with zero overhead."""
    worker_mod, request_mod = mods["base.worker"], mods["base.request"]
    saved = (worker_mod.get_prefill_time, worker_mod.get_decode_time, worker_mod.Worker.add_ray_overhead)
    try:
        if steps is not None:
            worker_mod.get_prefill_time, worker_mod.get_decode_time = steps
            worker_mod.Worker.add_ray_overhead = lambda self, n: 0.0
        env = mods["simpy"].Environment()
        cfg = {
            "model_type": {"opt-13b": "OPT-13B", "opt-66b": "OPT-66B"}[sc.model],
            "TP": sc.p_tp if disagg else sc.co_tp,
            "TP_Prefill": sc.p_tp if disagg else sc.co_tp,
            "TP_Decode": sc.d_tp if disagg else sc.co_tp,
            "prefill_max_tokens": prefill_cap,
            "engine_type": engine or ("distserve" if disagg else "vllm"),
        }
        if disagg:
            cluster = mods["clusters.disagg"].DisaggCluster(
                env=env, N_prefill_instance=sc.p_n, N_decode_instance=sc.d_n, worker_configs=cfg
            )
        else:
            cluster = mods["clusters.vllm"].VLLMCluster(env=env, N_instance=sc.co_n, worker_configs=cfg)
        cluster.run()
        reqs = [
            request_mod.Request(env=env, req_id=i, prefill_length=int(p), output_lens=max(int(o) - 1, 1))
            for i, (p, o) in enumerate(zip(req.prompt_tokens, req.output_tokens, strict=True))
        ]
        gaps_ms = np.diff(np.concatenate([[0.0], req.arrival_s])) * 1e3
        mods["base.scheduler"].put_requests_with_interarrivals(env, cluster.scheduler, gaps_ms.tolist(), reqs)
        env.run(until=(req.arrival_s[-1] + SIM_TIME_LIMIT_S) * 1e3)
    finally:
        worker_mod.get_prefill_time, worker_mod.get_decode_time, worker_mod.Worker.add_ray_overhead = saved
    ttft, tpot = np.full(len(reqs), np.inf), np.full(len(reqs), np.inf)
    for i, r in enumerate(reqs):
        t0 = next((t for t, e, _ in r.log if e == "init"), None)
        t1 = next((t for t, e, _ in r.log if e == "wait_decode"), None)
        t2 = next((t for t, e, _ in r.log if e == "exit_system"), None)
        if t0 is not None and t1 is not None and t2 is not None:
            ttft[i] = (t1 - t0) / 1e3
            tpot[i] = (t2 - t1) / 1e3 / r.output_lens
    return ttft, tpot


# ------------------------------------------------------------------------------------ common


@dataclass(frozen=True)
class Stats:
    """Percentiles and attainment over the measured requests (first WARMUP_FRACTION left out)."""

    ttft_p50: float
    ttft_p90: float
    tpot_p50: float
    tpot_p90: float
    attainment: float


def stats(ttft: np.ndarray, tpot: np.ndarray, sc: Scenario) -> Stats:
    k = int(WARMUP_FRACTION * len(ttft))
    a, b = ttft[k:], tpot[k:]
    ok = float(np.mean((a <= sc.ttft_slo_s) & (b <= sc.tpot_slo_s)))
    q = lambda x, p: float(np.percentile(x, p)) if np.all(np.isfinite(x)) else math.inf  # noqa: E731
    return Stats(q(a, 50), q(a, 90), q(b, 50), q(b, 90), ok)


def run_pdplan(cfg: Any, sc: Scenario, req: SimRequests) -> tuple[np.ndarray, np.ndarray]:
    """TTFT and TPOT (s) of every request from pdplan's simulator (FP16 weights, vLLM engine profile)."""
    res = simulate(
        cfg,
        sc.model,
        req,
        weight_dtype="fp16",
        options=SimOptions(max_sim_time_s=float(req.arrival_s[-1]) + SIM_TIME_LIMIT_S),
    )
    rec = res.records
    ttft = rec.first_token_s - rec.arrival_s
    tpot = (rec.end_s - rec.first_token_s) / np.maximum(rec.output_tokens.astype(float) - 1.0, 1.0)
    return np.nan_to_num(ttft, nan=np.inf), np.nan_to_num(tpot, nan=np.inf)


Run = Callable[[SimRequests], tuple[np.ndarray, np.ndarray]]


def goodput(run: Run, base: SimRequests, sc: Scenario) -> float:
    """Highest rate (req/s) whose attainment is >= ATTAINMENT, by bisection on the same request set."""

    def good(rate: float) -> bool:
        req = SimRequests(scale_to_rate(base.arrival_s, rate), base.prompt_tokens, base.output_tokens)
        return stats(*run(req), sc).attainment >= ATTAINMENT

    lo, hi = 0.0, 0.5
    while good(hi):
        lo, hi = hi, hi * 2.0
        if hi > 1e4:
            return math.inf
    while hi - lo > BISECT_TOL * hi and hi > MIN_RATE_RPS:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if good(mid) else (lo, mid)
    return lo if lo >= MIN_RATE_RPS else 0.0


STEP_POINTS = (
    ("prefill", 1, 512),
    ("prefill", 1, 2048),
    ("decode", 1, 1000),
    ("decode", 32, 1000),
    ("decode", 128, 1000),
)
"""(phase, batch, tokens per sequence) at which the step-time table compares the three sources."""


def step_table(mods: dict[str, Any]) -> None:
    """pdplan's roofline step (ms) next to DistServe's fitted A100 coefficients for its own engine and
    for vLLM (simdistserve/estimators/profile_data), including simdistserve's Ray overhead."""
    te = mods["estimators.time_estimator"]
    overhead = lambda tokens: 2.0 + 1e-4 * tokens  # noqa: E731  (simdistserve Worker.add_ray_overhead)
    gpu = model.get_gpu(A100)
    print(
        "| model | TP | step | pdplan roofline (ms) | DistServe engine, fitted (ms) | "
        "vLLM (2023), fitted (ms) |"
    )
    print("|---|---:|---|---:|---:|---:|")
    for name, key, tp in (("opt-13b", "OPT-13B", 1), ("opt-66b", "OPT-66B", 4)):
        steps = RooflineSteps(model.Deployment(model.get_model(name), gpu, tp, "fp16"))
        for phase, b, n in STEP_POINTS:
            if phase == "prefill":
                ours = 1e3 * steps.prefill_s([n] * b)
                fit = [
                    te.get_prefill_time(model_type=key, TP=tp, prefill_len_list=[n] * b, engine_type=e)
                    for e in ("distserve", "vllm")
                ]
            else:
                ours = 1e3 * steps.decode_s(b, b * n)
                fit = [
                    te.get_decode_time(b, model_type=key, TP=tp, token_generated_list=[n] * b, engine_type=e)
                    for e in ("distserve", "vllm")
                ]
            fit = [f + overhead(b * n) for f in fit]
            label = f"{phase} {b} x {n} tokens"
            print(f"| {name} | {tp} | {label} | {ours:.1f} | {fit[0]:.1f} | {fit[1]:.1f} |")


def runners(mods: dict[str, Any], sc: Scenario, cap: int) -> dict[str, dict[str, Run]]:
    """Per style, the three runs of a request set: pdplan's simulator, simdistserve with pdplan's step
    times, simdistserve with its own fitted step times."""
    gpu = model.get_gpu(sc.gpu)
    arch = model.get_model(sc.model)
    co_s, p_s, d_s = (
        RooflineSteps(model.Deployment(arch, gpu, tp, "fp16")) for tp in (sc.co_tp, sc.p_tp, sc.d_tp)
    )
    fns = _pdplan_step_functions(co_s, p_s, d_s)
    link = model.get_link("nvlink3")
    styles = {
        "colocated": (model.ColocatedConfig(gpu, sc.co_tp, sc.co_n), False),
        "disaggregated": (model.DisaggregatedConfig(gpu, sc.p_tp, sc.p_n, gpu, sc.d_tp, sc.d_n, link), True),
    }
    out: dict[str, dict[str, Run]] = {}
    for style, (cfg, disagg) in styles.items():
        out[style] = {
            "pdplan": lambda r, c=cfg: run_pdplan(c, sc, r),
            "simdistserve (pdplan steps)": lambda r, d=disagg: run_distserve(mods, d, sc, r, fns, cap),
            "simdistserve (its fitted steps)": lambda r, d=disagg: run_distserve(mods, d, sc, r, None, cap),
            "simdistserve (DistServe-engine steps)": lambda r, d=disagg: run_distserve(
                mods, d, sc, r, None, cap, "distserve"
            ),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--distserve", default=os.environ.get("DISTSERVE_PATH"), help="checkout with simdistserve/"
    )
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--no-goodput", action="store_true", help="percentiles at fixed rates only")
    ap.add_argument("--only", nargs="*", default=None, help="scenario names to run")
    ap.add_argument("--steps", action="store_true", help="print the step-time comparison table only")
    args = ap.parse_args()
    mods = load_distserve(args.distserve)
    if mods is None:
        return
    if args.steps:
        step_table(mods)
        return
    t0 = time.perf_counter()
    cap = model.get_engine("vllm").prefill_token_cap
    print(
        "| scenario | style | rate (req/s) | simulator | p50 TTFT (s) | p90 TTFT (s) | p50 TPOT (ms) | "
        "p90 TPOT (ms) | attainment |"
    )
    print("|---|---|---:|---|---:|---:|---:|---:|---:|")
    good_rows = []
    for sc in (s for s in SCENARIOS if not args.only or s.name in args.only):
        wl = model.workload_from_lengths(isl_dist=sc.isl, osl_dist=sc.osl, name=sc.name)
        base = poisson_requests(wl, 1.0, args.requests, seed=0)
        for style, runs in runners(mods, sc, cap).items():
            for rate in sc.rates:
                req = SimRequests(scale_to_rate(base.arrival_s, rate), base.prompt_tokens, base.output_tokens)
                for name, run in runs.items():
                    s = stats(*run(req), sc)
                    print(
                        f"| {sc.name} | {style} | {rate:g} | {name} | {s.ttft_p50:.3f} | {s.ttft_p90:.3f} | "
                        f"{s.tpot_p50 * 1e3:.1f} | {s.tpot_p90 * 1e3:.1f} | {s.attainment:.2f} |",
                        flush=True,
                    )
            if not args.no_goodput:
                good_rows.append((sc, style, {name: goodput(run, base, sc) for name, run in runs.items()}))
    if good_rows:
        print(
            "\n| scenario | SLO TTFT / TPOT | style | pdplan sim | simdistserve, pdplan steps | ratio | "
            "simdistserve, fitted steps (vLLM colocated) | simdistserve, DistServe-engine steps |"
        )
        print("|---|---|---|---:|---:|---:|---:|---:|")
        for sc, style, g in good_rows:
            a, b = g["pdplan"], g["simdistserve (pdplan steps)"]
            c, d = g["simdistserve (its fitted steps)"], g["simdistserve (DistServe-engine steps)"]
            slo = f"{sc.ttft_slo_s:g} s / {sc.tpot_slo_s * 1e3:g} ms"
            ratio = b / a if a else math.nan
            print(f"| {sc.name} | {slo} | {style} | {a:.2f} | {b:.2f} | {ratio:.2f} | {c:.2f} | {d:.2f} |")
    print(f"\n<!-- {time.perf_counter() - t0:.0f} s -->")


if __name__ == "__main__":
    main()
