"""Planner benchmark: a full plan for a 64-GPU budget (every split x TP in {1, 2, 4, 8} x chunk
options) for three workloads, with and without the flip-threshold searches; and a 64-GPU
DeepSeek-V3 plan with the EP options (TP, TEP, DEP up to 64 GPUs across 8 HGX H200 nodes).

Run: .venv/bin/python benchmarks/bench_planner.py [--scenario all|moe|dense]   (figures are recorded in
docs/planner.md). Each line gives the best wall time (time.perf_counter) and the best process CPU
time (time.process_time) of its rounds: on a machine shared with other jobs the CPU time is the
steadier figure. Pin to one core with ``taskset -c 0`` and ``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import model
from model.serving.phase_tables import clear_table_caches

WORKLOADS = ("chat", "code", "summarization")


def one(workload: str, thresholds: bool, tpot_slo_s: float | None = None) -> tuple[float, float, model.Plan]:
    """A 64-GPU Llama-3.1-70B plan on H100. Cold (``tpot_slo_s`` None): tables rebuilt. Warm: the
    tables of an earlier plan with other targets are reused (model.serving.phase_tables.table_scenario),
    as on the web app's Apply after a target or slider change."""
    if tpot_slo_s is None:
        clear_table_caches()  # time the cold path: tables are rebuilt for every plan
    t, c = time.perf_counter(), time.process_time()
    p = model.plan(
        "llama-3.1-70b",
        "h100-sxm",
        workload=workload,
        ttft_slo_s=1.0,
        tpot_slo_s=0.05 if tpot_slo_s is None else tpot_slo_s,
        gpus=64,
        link="ib-ndr-400",
        thresholds=thresholds,
    )
    return time.perf_counter() - t, time.process_time() - c, p


def moe() -> tuple[float, float, model.Plan]:
    """DeepSeek-V3 FP8 on 64 x H200 (8 HGX nodes), chat, TP/TEP/DEP layouts, no thresholds, cold."""
    clear_table_caches()
    t, c = time.perf_counter(), time.process_time()
    p = model.plan(
        "deepseek-v3",
        "h200",
        workload="chat",
        ttft_slo_s=2.0,
        tpot_slo_s=0.1,
        gpus=64,
        dtype="fp8",
        node="hgx-h200-8",
        thresholds=False,
    )
    return time.perf_counter() - t, time.process_time() - c, p


def best_of(run, rounds: int) -> tuple[float, float, model.Plan]:
    """Best wall and best CPU time over ``rounds`` runs, and the last plan."""
    runs = [run() for _ in range(rounds)]
    return min(r[0] for r in runs), min(r[1] for r in runs), runs[-1][2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", choices=("all", "moe", "dense"), default="all")
    ap.add_argument("--rounds", type=int, default=3, choices=range(1, 21), metavar="1..20")
    args = ap.parse_args()
    print(f"cores visible: {os.cpu_count()}; numpy threads as set in the environment")
    one("chat", False)  # warm imports
    if args.scenario in ("all", "moe"):
        wall, cpu, p = best_of(moe, args.rounds)
        print(
            f"deepseek-v3 EP 64 x h200 wall {wall * 1e3:7.0f} ms  cpu {cpu * 1e3:7.0f} ms"
            f"  candidates={p.candidates_evaluated}  verdict={p.verdict}"
        )
    if args.scenario == "moe":
        return
    for thresholds in (False, True):
        for wl in WORKLOADS:
            wall, cpu, p = best_of(lambda wl=wl, th=thresholds: one(wl, th), args.rounds)
            print(
                f"{wl:14s} thresholds={thresholds!s:5s} wall {wall * 1e3:7.0f} ms  cpu {cpu * 1e3:7.0f} ms"
                f"  candidates={p.candidates_evaluated}  verdict={p.verdict}"
            )
    for wl in WORKLOADS:  # warm: each round a new TPOT target on the tables of the plan before
        one(wl, False, 0.05)
        slos = iter(0.05 + 0.001 * np.arange(1, args.rounds + 1))
        wall, cpu, p = best_of(lambda wl=wl, s=slos: one(wl, False, float(next(s))), args.rounds)
        print(f"{wl:14s} warm tables      wall {wall * 1e3:7.0f} ms  cpu {cpu * 1e3:7.0f} ms  {p.verdict}")


if __name__ == "__main__":
    main()
