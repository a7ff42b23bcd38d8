"""Simulator speed: wall time of one disaggregated run vs request count (one core).

Target (issue #6): 100k requests through a disaggregated configuration in under 10 s.
Run: ``.venv/bin/python benchmarks/bench_simulate.py [--quick]``; prints a Markdown table.
The configuration keeps every pool stable (about 60-70% decode-pool load), so the run exercises
batching, routing and transfers rather than stopping early.
"""

from __future__ import annotations

import argparse
import time

from model.hardware.catalog import get_gpu, get_link
from model.serving.configs import ColocatedConfig, DisaggregatedConfig
from model.sim.simulate import poisson_requests, simulate

MODEL = "llama-3.1-8b"
WORKLOAD = "chat"
RATE_RPS = 40.0


def configs() -> dict[str, ColocatedConfig | DisaggregatedConfig]:
    h100 = get_gpu("h100-sxm")
    return {
        "disaggregated 2P+4D": DisaggregatedConfig(h100, 1, 2, h100, 1, 4, get_link("ib-ndr-400")),
        "colocated 4 replicas": ColocatedConfig(h100, 1, 4),
        "colocated-chunked 4 x 512": ColocatedConfig(h100, 1, 4, chunk_tokens=512),
    }


def time_run(cfg: ColocatedConfig | DisaggregatedConfig, n: int) -> tuple[float, bool]:
    requests = poisson_requests(WORKLOAD, RATE_RPS, n, seed=0)
    t0 = time.perf_counter()
    res = simulate(cfg, MODEL, requests)
    return time.perf_counter() - t0, res.summary.stable


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="only up to 10k requests")
    args = ap.parse_args()
    counts = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    print(f"{MODEL}, {WORKLOAD} workload, Poisson {RATE_RPS:g} req/s, H100-SXM\n")
    print("| configuration | requests | wall time (s) | us per request | stable |")
    print("|---|---:|---:|---:|---|")
    for name, cfg in configs().items():
        for n in counts:
            dt, stable = time_run(cfg, n)
            print(f"| {name} | {n:,} | {dt:.2f} | {dt / n * 1e6:.0f} | {stable} |", flush=True)


if __name__ == "__main__":
    main()
