"""The full fuzzing run (issue 13): the tests/test_fuzz_*.py properties at their full budgets.

Run: ``.venv/bin/python benchmarks/fuzz_full.py`` (or ``make fuzz``). Sets
``PDPLAN_FUZZ_EXAMPLES=full``, runs pytest on the fuzz files (and the bad-input invariants of
tests/test_edges.py) with hypothesis statistics, and prints the number of generated cases, the
parametrised corpus cases, the wall time and the result; docs/reliability.md records the figures.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = [
    "tests/test_fuzz_cli.py",
    "tests/test_fuzz_api.py",
    "tests/test_fuzz_loaders.py",
    "tests/test_edges.py",
]


def main() -> int:
    env = {**os.environ, "PDPLAN_FUZZ_EXAMPLES": "full"}
    # pyproject's addopts already pass -q; a second -q would hide the pass/fail summary line.
    cmd = [sys.executable, "-m", "pytest", "--hypothesis-show-statistics", *FILES]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    out = proc.stdout + proc.stderr
    generated = sum(int(a) + int(b) for a, b in re.findall(r"(\d+) passing, (\d+) failing", out))
    tests = re.search(r"(\d+) passed", out)
    failed = re.search(r"(\d+) failed", out)
    print(out[-3000:] if proc.returncode else "")
    print(f"hypothesis cases (all phases): {generated}")
    print(
        f"pytest tests passed: {tests.group(1) if tests else 0}, failed: {failed.group(1) if failed else 0}"
    )
    print(f"wall time: {seconds:.0f} s; exit code {proc.returncode}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
