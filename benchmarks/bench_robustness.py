"""Verdict-robustness benchmark: what ``model.robustness`` (128 Latin-hypercube worlds) adds to a
16-GPU plan, for three workloads of Llama-3.1-70B on H100 (issue 17: <= 1 s added).

Reports wall time and process CPU time (``time.process_time``, less sensitive to other load on
the machine) as the best of three runs. Figures are recorded in docs/planner.md.

Run: .venv/bin/python benchmarks/bench_robustness.py
"""

from __future__ import annotations

import time
from functools import partial

import model

CASES = (("chat", 0.5, 0.05), ("code", 1.5, 0.04), ("summarization", 2.0, 0.05))


def timed(fn):
    """(wall s, cpu s, result) of one call."""
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w, time.process_time() - c, out


def main() -> None:
    for workload, ttft_s, tpot_s in CASES:
        plan = partial(
            model.plan,
            "llama-3.1-70b",
            "h100-sxm",
            workload=workload,
            ttft_slo_s=ttft_s,
            tpot_slo_s=tpot_s,
            gpus=16,
        )
        p = plan()
        plan_runs = [timed(plan)[:2] for _ in range(3)]
        rob_runs = [timed(partial(model.robustness, p)) for _ in range(3)]
        pw, pc = min(r[0] for r in plan_runs), min(r[1] for r in plan_runs)
        rw, rc = min(r[0] for r in rob_runs), min(r[1] for r in rob_runs)
        print(
            f"{workload:14s} plan {pw * 1e3:6.0f} ms wall {pc * 1e3:6.0f} ms cpu | "
            f"robustness(128) adds {rw * 1e3:6.0f} ms wall {rc * 1e3:6.0f} ms cpu | {rob_runs[0][2].summary}"
        )


if __name__ == "__main__":
    main()
