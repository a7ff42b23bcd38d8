"""Start-up benchmark: wall time of `pdplan list gpus` and of `import model` in fresh processes.

Targets (issue 12): `pdplan list gpus` <= 0.3 s and `import model` <= 0.5 s on one core. Each
figure is the best and the median of N fresh interpreter runs, pinned to one CPU where the OS
allows it (``os.sched_setaffinity``), so imports cannot hide behind a second core.

Run: .venv/bin/python benchmarks/bench_startup.py   (figures are recorded in docs/architecture.md)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

RUNS = 7
CASES = {
    "import model": [sys.executable, "-c", "import model"],
    "import model; model.plan (first use)": [sys.executable, "-c", "import model; model.plan"],
    "pdplan list gpus": [sys.executable, "-m", "model", "list", "gpus"],
    "pdplan --help": [sys.executable, "-m", "model", "--help"],
}


def _one_core() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def time_case(argv: list[str]) -> list[float]:
    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, preexec_fn=_one_core, timeout=120)
        times.append(time.perf_counter() - t)
    return times


def main() -> None:
    print(f"{'case':42s} {'best s':>8s} {'median s':>9s}")
    for name, argv in CASES.items():
        times = time_case(argv)
        print(f"{name:42s} {min(times):8.3f} {statistics.median(times):9.3f}")


if __name__ == "__main__":
    main()
