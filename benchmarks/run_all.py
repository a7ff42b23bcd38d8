"""Run every speed benchmark (``benchmarks/bench_*.py``) in turn and print its figures.

``make bench`` calls this. The accuracy and load scripts (``validate_*.py``, ``queueing_accuracy.py``,
``load_app.py``) take minutes and are run on their own; their figures live in docs/validation.md,
docs/queueing.md and docs/reliability.md. Each benchmark runs in a fresh interpreter so imports are
timed cold and one benchmark's caches cannot speed up the next.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"== {script.name}", flush=True)
        t = time.perf_counter()
        done = subprocess.run([sys.executable, str(script)], cwd=HERE.parent, check=False)
        print(f"   ({time.perf_counter() - t:.1f} s, exit {done.returncode})", flush=True)
        if done.returncode:
            failed.append(script.name)
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
