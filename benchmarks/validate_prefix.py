"""Planner vs simulator goodput with prefix caching (issue 15): a fixed hit rate (every request finds
that share of its prompt cached) and multi-turn sessions (the simulator's LRU block caches per
instance against the hit rates the session structure implies). Prints the table in
docs/validation.md ("Prefix caching and multi-turn sessions").

Run from the repository root: ``python -m benchmarks.validate_prefix`` (a few minutes on 2 cores;
``--planner-only`` skips the simulator).
"""

from __future__ import annotations

import dataclasses
import sys

from benchmarks.steady import STEADY_REQUESTS
from model.hardware.catalog import get_gpu, get_link
from model.planner.goodput import config_goodput
from model.serving.configs import ColocatedConfig, DisaggregatedConfig
from model.sim.prefix_cache import session_or_poisson_requests
from model.sim.simulate import SimOptions, goodput
from model.workload.presets import get_workload
from model.workload.scenario import Scenario
from model.workload.slo import SLO

H100 = get_gpu("h100-sxm")
IB = get_link("ib-ndr-400")
COL = ColocatedConfig(H100, 1, 2, 2048)
COL_PLAIN = ColocatedConfig(H100, 1, 2)
DIS = DisaggregatedConfig(H100, 1, 1, H100, 1, 1, IB)
COL_TP2 = ColocatedConfig(H100, 2, 1, 2048)
DIS_TP2 = DisaggregatedConfig(H100, 2, 1, H100, 2, 1, IB)


def cells():
    """(label, workload, SLO, config) of the validation grid (Llama-3.1-8B on H100)."""
    chat = get_workload("chat")
    for h in (0.0, 0.5, 0.8):
        wl = dataclasses.replace(chat, prefix_cache_hit_rate=h)
        yield f"chat, hit {h:.1f}", wl, SLO(0.5, 0.02), COL
        yield f"chat, hit {h:.1f}", wl, SLO(0.5, 0.02), COL_PLAIN
        yield f"chat, hit {h:.1f}", wl, SLO(0.5, 0.015), DIS
    wl = get_workload("multiturn-chat")
    fixed = dataclasses.replace(wl, prefix_cache_hit_rate=0.8, sessions=None, prefill_pool_hit_rate=None)
    yield "multiturn-chat, fixed hit 0.8 (no sessions)", fixed, SLO(0.5, 0.02), COL
    yield "multiturn-chat (sessions)", wl, SLO(0.5, 0.02), COL
    yield "multiturn-chat (sessions)", wl, SLO(0.5, 0.015), DIS
    wl = get_workload("agentic")
    for cfg in (COL, DIS, COL_TP2, DIS_TP2):
        yield "agentic (sessions)", wl, SLO(2.0, 0.03), cfg


def compare(
    label: str, wl, slo: SLO, cfg, requests: int = STEADY_REQUESTS, seed: int = 0
) -> tuple[float, float]:
    """(planner goodput, simulator goodput), req/s. Sessions are regenerated at each trial rate (think
    times do not shrink with the load) with a third of the run as warm-up (the caches start empty)."""
    scn = Scenario.build("llama-3.1-8b", wl, slo)
    g_plan = config_goodput(scn, cfg)
    if wl.sessions is not None:
        n = requests

        def base(rate: float):
            return session_or_poisson_requests(wl, rate, n, seed=seed)

        warmup = n // 3  # the caches start empty too
    else:
        base = session_or_poisson_requests(wl, 1.0, requests, seed=seed)
        warmup = requests // 4
    g_sim = goodput(
        cfg,
        "llama-3.1-8b",
        base,
        slo,
        start_rps=max(g_plan, 0.1),
        options=SimOptions(warmup_requests=warmup),
        rel_tol=0.03,
    ).rate_rps
    return g_plan, g_sim


def main() -> int:
    print("| workload | SLO (TTFT / TPOT) | configuration | planner | simulator | ratio |")
    print("|---|---|---|---|---|---|")
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    only = args[0] if args else ""
    simulate = "--planner-only" not in sys.argv
    # --seeds=0,1,2,3: session cells simulated on each trace seed, the simulator column their mean (an
    # instance's cache holds a few tens of agent histories: one seed's goodput is a noisy draw,
    # docs/validation.md "Session 9: the session cache over the live histories")
    seeds = [int(x) for a in sys.argv if a.startswith("--seeds=") for x in a[8:].split(",")] or [0]
    for label, wl, slo, cfg in cells():
        if only not in label:
            continue
        if simulate:
            runs = [compare(label, wl, slo, cfg, seed=k) for k in (seeds if wl.sessions else [0])]
            g_plan, g_sim = runs[0][0], sum(r[1] for r in runs) / len(runs)
            if len(runs) > 1:
                print(f"<!-- {label}, {cfg.label()}: seeds {seeds}: {[round(r[1], 2) for r in runs]} -->")
        else:
            g_plan, g_sim = config_goodput(Scenario.build("llama-3.1-8b", wl, slo), cfg), float("nan")
        ratio = g_plan / g_sim if g_sim > 0 else float("nan")
        print(
            f"| {label} | {slo.ttft_s * 1e3:.0f} ms / {slo.tpot_s * 1e3:.0f} ms | {cfg.label()} | "
            f"{g_plan:.2f} | {g_sim:.2f} | {ratio:.2f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
