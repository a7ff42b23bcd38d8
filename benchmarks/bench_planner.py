"""Planner benchmark: a full plan for a 64-GPU budget (every split x TP in {1, 2, 4, 8} x chunk
options) for three workloads, with and without the flip-threshold searches; and a 64-GPU
DeepSeek-V3 plan with the EP options (TP, TEP, DEP up to 64 GPUs across 8 HGX H200 nodes).

Run: .venv/bin/python benchmarks/bench_planner.py   (figures are recorded in docs/planner.md)
"""

from __future__ import annotations

import os
import time

import model
from model.serving.phase_tables import instance_tables

WORKLOADS = ("chat", "code", "summarization")


def one(workload: str, thresholds: bool) -> tuple[float, model.Plan]:
    instance_tables.cache_clear()  # time the cold path: tables are rebuilt for every plan
    t = time.perf_counter()
    p = model.plan(
        "llama-3.1-70b",
        "h100-sxm",
        workload=workload,
        ttft_slo_s=1.0,
        tpot_slo_s=0.05,
        gpus=64,
        link="ib-ndr-400",
        thresholds=thresholds,
    )
    return time.perf_counter() - t, p


def moe() -> tuple[float, model.Plan]:
    """DeepSeek-V3 FP8 on 64 x H200 (8 HGX nodes), chat, TP/TEP/DEP layouts, no thresholds, cold."""
    instance_tables.cache_clear()
    t = time.perf_counter()
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
    return time.perf_counter() - t, p


def main() -> None:
    print(f"cores visible: {os.cpu_count()}; numpy threads as set in the environment")
    one("chat", False)  # warm imports
    best = min(moe()[0] for _ in range(3))
    _, p = moe()
    print(
        f"deepseek-v3 EP 64 x h200 {best * 1e3:7.0f} ms"
        f"  candidates={p.candidates_evaluated}  verdict={p.verdict}"
    )
    for thresholds in (False, True):
        for wl in WORKLOADS:
            best = min(one(wl, thresholds)[0] for _ in range(3))
            _, p = one(wl, thresholds)
            print(
                f"{wl:14s} thresholds={thresholds!s:5s} {best * 1e3:7.0f} ms"
                f"  candidates={p.candidates_evaluated}  verdict={p.verdict}"
            )


if __name__ == "__main__":
    main()
