"""Analytical planner vs discrete-event simulator on a grid of scenarios (issue #6 acceptance).

Grid: 3 models x 2 GPU kinds x 3 workloads x 3 serving styles; per cell the planner's goodput and the
simulator's goodput (same configuration, same SLO), and p90 TTFT / TPOT from both at 4 rates
(25%, 50%, 75%, 100% of the planner's goodput). Prints Markdown tables for docs/validation.md.

Run: ``.venv/bin/python benchmarks/validate_simulator.py [--quick] [--requests N] [--json FILE]``
(about 3-6 minutes on one core with the defaults; --quick runs one model and one GPU).

Choices (all in one place, stated in docs/validation.md):
- configurations: 4 instances per style at the model's TP; colocated R = 4, chunked with a 512-token
  budget, disaggregated 2 prefill + 2 decode instances over InfiniBand NDR (400 Gbit/s per lane);
- SLO per (model, GPU, workload), derived from the roofline so it binds at a meaningful load:
  TTFT target = TTFT_FACTOR x the prefill time of the workload's 90th-percentile prompt (at least
  TTFT_FLOOR_S), TPOT target = TPOT_FACTOR x the batch-1 decode step at a 2,000-token context;
  p90 and 90% attainment;
- simulator: REQUESTS Poisson arrivals (seeded), the first WARMUP_FRACTION left out of the statistics;
  goodput by bisection to 2% (model.sim.simulate.goodput).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass

import numpy as np

from model.hardware.catalog import get_gpu, get_link
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.steps import decode_step_cost, prefill_cost
from model.serving.configs import ColocatedConfig, DisaggregatedConfig
from model.sim.simulate import SimOptions, SimRequests, goodput, poisson_requests, simulate
from model.workload.arrivals import scale_to_rate
from model.workload.presets import get_workload
from model.workload.slo import SLO

MODELS = {"llama-3.1-8b": 1, "qwen2.5-32b": 2, "llama-3.1-70b": 4}  # model -> TP
GPUS = ("h100-sxm", "a100-80gb-sxm")
WORKLOADS = ("chat", "code", "summarization")
RATE_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
LINK = "ib-ndr-400"
CHUNK = 512
TTFT_FACTOR = 5.0
TTFT_FLOOR_S = 0.25
TPOT_FACTOR = 2.5
REQUESTS = 2000
WARMUP_FRACTION = 0.1
TOLERANCE = 0.15  # acceptance: |analytical / simulated goodput - 1| <= 15% in >= 80% of cells


def slo_for(model: str, gpu: str, tp: int, workload: str) -> SLO:
    dep = Deployment(get_model(model), get_gpu(gpu), parallel=tp)
    p90 = get_workload(workload).prompt_tokens.quantile(0.9)
    ttft = max(TTFT_FACTOR * float(prefill_cost(dep, p90).time_s), TTFT_FLOOR_S)
    tpot = TPOT_FACTOR * float(decode_step_cost(dep, 1, 2000).time_s)
    return SLO(round(ttft, 3), round(tpot, 4))


def configs(gpu: str, tp: int) -> dict[str, ColocatedConfig | DisaggregatedConfig]:
    g = get_gpu(gpu)
    return {
        "colocated": ColocatedConfig(g, tp, 4),
        "colocated-chunked": ColocatedConfig(g, tp, 4, chunk_tokens=CHUNK),
        "disaggregated": DisaggregatedConfig(g, tp, 2, g, tp, 2, get_link(LINK)),
    }


@dataclass
class Cell:
    model: str
    gpu: str
    workload: str
    style: str
    slo: SLO
    goodput_planner: float
    goodput_sim: float
    rows: list[dict]

    @property
    def goodput_error(self) -> float:
        if self.goodput_sim == 0:
            return math.inf if self.goodput_planner > 0 else 0.0
        return self.goodput_planner / self.goodput_sim - 1.0


def run_cell(model: str, gpu: str, tp: int, workload: str, style: str, cfg, n: int) -> Cell:
    from model.planner.goodput import config_goodput
    from model.serving.evaluation import evaluate
    from model.workload.scenario import Scenario

    slo = slo_for(model, gpu, tp, workload)
    scn = Scenario.build(model, workload, slo)
    g_plan = config_goodput(scn, cfg)
    base = poisson_requests(workload, 1.0, n, seed=0)
    opts = SimOptions(warmup_requests=int(WARMUP_FRACTION * n))
    start = g_plan if g_plan > 0 else 1.0
    g_sim = goodput(cfg, model, base, slo, start_rps=start, options=opts).rate_rps
    rows = []
    for f in RATE_FRACTIONS:
        rate = f * g_plan if g_plan > 0 else f * g_sim
        if rate <= 0:
            continue
        ev = evaluate(cfg, scn, rate)
        req = SimRequests(scale_to_rate(base.arrival_s, rate), base.prompt_tokens, base.output_tokens)
        s = simulate(cfg, model, req, slo=slo, options=opts).summary
        rows.append(
            {
                "fraction": f,
                "rate_rps": rate,
                "ttft_p90_planner": ev.ttft_s.p90,
                "ttft_p90_sim": s.ttft_s[1],
                "tpot_p90_planner": ev.tpot_s.p90,
                "tpot_p90_sim": s.tpot_s[1],
                "attain_planner": ev.slo_attainment,
                "attain_sim": s.attainment,
                "sim_stable": s.stable,
            }
        )
    return Cell(model, gpu, workload, style, slo, g_plan, g_sim, rows)


def rel(a: float, b: float) -> float:
    return a / b - 1.0 if b and math.isfinite(a) and math.isfinite(b) else math.nan


def fmt_pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:+.0%}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--requests", type=int, default=REQUESTS)
    ap.add_argument("--json", default=None, help="also write all numbers to this JSON file")
    args = ap.parse_args()
    models = dict(list(MODELS.items())[:1]) if args.quick else MODELS
    gpus = GPUS[:1] if args.quick else GPUS
    t0 = time.perf_counter()
    cells: list[Cell] = []
    for model, tp in models.items():
        for gpu in gpus:
            for wl in WORKLOADS:
                for style, cfg in configs(gpu, tp).items():
                    c = run_cell(model, gpu, tp, wl, style, cfg, args.requests)
                    cells.append(c)
                    print(
                        f"<!-- {model} {gpu} {wl} {style}: planner {c.goodput_planner:.3g}, "
                        f"sim {c.goodput_sim:.3g} req/s ({fmt_pct(c.goodput_error)}) -->",
                        flush=True,
                    )
    wall = time.perf_counter() - t0

    print("\n#### Goodput per cell (req/s)\n")
    print("| model | GPU | workload | style | SLO TTFT / TPOT | planner | simulator | error |")
    print("|---|---|---|---|---|---:|---:|---:|")
    for c in cells:
        print(
            f"| {c.model} | {c.gpu} | {c.workload} | {c.style} | {c.slo.ttft_s * 1e3:.0f} ms / "
            f"{c.slo.tpot_s * 1e3:.1f} ms | {c.goodput_planner:.2f} | {c.goodput_sim:.2f} | "
            f"{fmt_pct(c.goodput_error)} |"
        )
    errs = np.array([c.goodput_error for c in cells])
    within = np.abs(errs) <= TOLERANCE
    print(
        f"\nGoodput within {TOLERANCE:.0%}: {int(within.sum())} of {len(cells)} cells ({within.mean():.0%}); "
        f"median |error| {np.median(np.abs(errs)):.0%}."
    )
    for style in ("colocated", "colocated-chunked", "disaggregated"):
        e = np.array([c.goodput_error for c in cells if c.style == style])
        print(
            f"- {style}: within {TOLERANCE:.0%} in {int((np.abs(e) <= TOLERANCE).sum())} of {e.size}; "
            f"median error {np.median(e):+.0%}, range {e.min():+.0%} .. {e.max():+.0%}"
        )

    print(
        "\n#### p90 TTFT and p90 TPOT errors (planner / simulator - 1), by load fraction of planner goodput\n"
    )
    print(
        "| style | load | p90 TTFT median error | p90 TTFT error range | p90 TPOT median error | "
        "p90 TPOT error range | sim unstable |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for style in ("colocated", "colocated-chunked", "disaggregated"):
        for f in RATE_FRACTIONS:
            rows = [r for c in cells if c.style == style for r in c.rows if r["fraction"] == f]
            if not rows:
                continue
            et = np.array([rel(r["ttft_p90_planner"], r["ttft_p90_sim"]) for r in rows if r["sim_stable"]])
            ep = np.array([rel(r["tpot_p90_planner"], r["tpot_p90_sim"]) for r in rows if r["sim_stable"]])
            et, ep = et[np.isfinite(et)], ep[np.isfinite(ep)]
            unstable = sum(not r["sim_stable"] for r in rows)
            print(
                f"| {style} | {f:.0%} | {fmt_pct(np.median(et)) if et.size else 'n/a'} | "
                f"{fmt_pct(et.min()) if et.size else ''} .. {fmt_pct(et.max()) if et.size else ''} | "
                f"{fmt_pct(np.median(ep)) if ep.size else 'n/a'} | "
                f"{fmt_pct(ep.min()) if ep.size else ''} .. {fmt_pct(ep.max()) if ep.size else ''} | "
                f"{unstable} of {len(rows)} |"
            )
    print(f"\n({len(cells)} cells, {args.requests} requests per simulation, wall time {wall:.0f} s)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump([{**c.__dict__, "slo": [c.slo.ttft_s, c.slo.tpot_s]} for c in cells], fh, indent=1)


if __name__ == "__main__":
    main()
