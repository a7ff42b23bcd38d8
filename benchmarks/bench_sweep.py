"""Sweep benchmark: 500 scenarios (5 models x 2 GPUs x 5 workloads x 2 SLO tiers x 5 GPU budgets)
through `model.fleet.sweep.run_sweep` on the local process pool, one worker per core.

Run: .venv/bin/python benchmarks/bench_sweep.py [WORKERS]   (figures are recorded in docs/sweeps.md)
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from model.fleet.grid import parse_grid
from model.fleet.sweep import run_sweep

GRID = """
models = ["llama-3.1-8b", "qwen2.5-7b", "mistral-7b", "llama-2-7b", "llama-2-13b"]
gpus = ["a100-80gb-sxm", "h100-sxm"]
workloads = ["chat", "code", "short", "summarization", "mixed"]
budgets = [1, 2, 4, 8, 16]

[[slo]]
name = "interactive"
ttft = "500ms"
tpot = "50ms"

[[slo]]
name = "relaxed"
ttft = "2s"
tpot = "100ms"
"""


def main() -> None:
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else (os.cpu_count() or 1)
    grid = parse_grid(GRID, "bench")
    with tempfile.TemporaryDirectory() as tmp:
        res = run_sweep(grid, Path(tmp) / "out.csv", workers=workers)
    print(
        f"cores visible: {os.cpu_count()}, workers: {workers}; {res.scenarios_run} scenarios, "
        f"{res.rows_written} rows in {res.seconds:.1f} s = {res.scenarios_per_s:.2f} scenarios/s"
    )


if __name__ == "__main__":
    main()
