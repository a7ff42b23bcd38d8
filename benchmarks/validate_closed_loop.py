"""Fixed-concurrency (closed-loop) planner vs simulator on a grid (issue 17, "closed-loop part").

Per cell (model, GPU, workload, style, users N, think time Z): the planner's closed-loop throughput
X, mean response R and p90 TTFT / TPOT at N users (model.evaluate_concurrency: MVA over the
open-loop model) against the simulator's closed-loop run (model.simulate_concurrency: N users, the
same think-time mean, exponential). Prints a Markdown table and the share of cells whose simulated
throughput is within 10% of the planner's (docs/planner.md, "Fixed concurrency").

Run: ``.venv/bin/python benchmarks/validate_closed_loop.py [--quick] [--all-gpus] [--json FILE]``
(60 cells on H100 by default; ``--all-gpus`` adds the A100).

Choices: 4 instances per style at the model's TP (colocated R = 4, chunked with a 2,048-token budget,
disaggregated 2 prefill + 2 decode over InfiniBand NDR 400); users 4, 32, 128 and 512 with Z = 0
(back-to-back, as benchmark clients run) and 64 users with Z = 5 s; the simulator runs
max(1,500, 12 N) requests, the first 2N left out as warm-up; SLO TTFT 1 s, TPOT 100 ms (it enters
only the maximum concurrency, reported for reference).
"""

from __future__ import annotations

import argparse
import json
import time

from model.hardware.catalog import get_gpu, get_link
from model.planner.concurrency import evaluate_concurrency
from model.serving.configs import ColocatedConfig, DisaggregatedConfig
from model.sim.closed_loop import simulate_concurrency
from model.workload.concurrency import Concurrency
from model.workload.scenario import Scenario
from model.workload.slo import SLO

MODELS = {"llama-3.1-8b": 1, "llama-3.1-70b": 4}  # model -> TP
GPUS = ("h100-sxm", "a100-80gb-sxm")
WORKLOADS = ("chat", "code")
LOADS = ((4, 0.0), (32, 0.0), (128, 0.0), (512, 0.0), (64, 5.0))
SLO_ = SLO(1.0, 0.1)
CHUNK = 2048


def configs(gpu_name: str, tp: int) -> dict[str, object]:
    gpu = get_gpu(gpu_name)
    return {
        "colocated": ColocatedConfig(gpu, tp, 4),
        "colocated-chunked": ColocatedConfig(gpu, tp, 4, CHUNK),
        "disaggregated": DisaggregatedConfig(gpu, tp, 2, gpu, tp, 2, get_link("ib-ndr-400")),
    }


def cell(model: str, gpu: str, workload: str, style: str, cfg: object, users: int, think: float) -> dict:
    scn = Scenario.build(model, workload, SLO_)
    ev = evaluate_concurrency(cfg, scn, users, think)
    n = max(1500, 12 * users)
    sim = simulate_concurrency(cfg, model, workload, Concurrency(users, think), requests=n, slo=SLO_)
    p = ev.at_users
    return {
        "model": model,
        "gpu": gpu,
        "workload": workload,
        "style": style,
        "users": users,
        "think_s": think,
        "plan_rps": p.throughput_rps,
        "sim_rps": sim.throughput_rps,
        "ratio": sim.throughput_rps / p.throughput_rps,
        "plan_response_s": p.response_mean_s,
        "sim_response_s": sim.response_mean_s,
        "plan_ttft_p90_s": p.ttft_s.p90,
        "sim_ttft_p90_s": sim.summary.ttft_s[1],
        "plan_tpot_p90_s": p.tpot_s.p90,
        "sim_tpot_p90_s": sim.summary.tpot_s[1],
        "max_users_in_slo": ev.max_concurrency,
    }


def row_text(r: dict) -> str:
    """One Markdown table row of a cell."""
    return (
        f"| {r['model']} | {r['gpu']} | {r['workload']} | {r['style']} | {r['users']} | "
        f"{r['think_s']:g} | {r['plan_rps']:.3g} | {r['sim_rps']:.3g} | {r['ratio']:.2f} | "
        f"{r['plan_response_s']:.3g} | {r['sim_response_s']:.3g} | {r['plan_ttft_p90_s']:.3g} | "
        f"{r['sim_ttft_p90_s']:.3g} | {r['plan_tpot_p90_s'] * 1e3:.3g} ms | "
        f"{r['sim_tpot_p90_s'] * 1e3:.3g} ms |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one model, one GPU, one workload")
    ap.add_argument("--all-gpus", action="store_true", help=f"every GPU of {GPUS} (default: the first)")
    ap.add_argument("--json", help="write the cells to this JSON file")
    args = ap.parse_args()
    models = dict(list(MODELS.items())[:1]) if args.quick else MODELS
    gpus = GPUS if args.all_gpus and not args.quick else GPUS[:1]
    workloads = WORKLOADS[:1] if args.quick else WORKLOADS
    rows = []
    start = time.perf_counter()
    print(
        "| model | GPU | workload | style | N | Z s | X plan | X sim | sim/plan | R plan | R sim | "
        "TTFT p90 plan | sim | TPOT p90 plan | sim |"
    )
    print("|" + "---|" * 15, flush=True)
    for model, tp in models.items():
        for gpu in gpus:
            for workload in workloads:
                for style, cfg in configs(gpu, tp).items():
                    for users, think in LOADS:
                        r = cell(model, gpu, workload, style, cfg, users, think)
                        rows.append(r)
                        print(row_text(r), flush=True)
    within = sum(0.9 <= r["ratio"] <= 1.1 for r in rows)
    print(f"\n{within} of {len(rows)} cells within 10% ({time.perf_counter() - start:.0f} s)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
