"""Generate the accuracy table of docs/queueing.md: model.queueing approximations vs simulation.

``python -m benchmarks.queueing_accuracy [--customers 4000000]`` prints a Markdown table. Errors are
(model - sim) / max(sim, 0.05 E[S]) in percent: relative, except that waits shorter than 5% of a
service time are compared on that absolute scale. E[S] = 1 s throughout.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model.queueing.mgc import mgc_wait
from tests.mgc_sim import det_sampler, gamma_sampler, lognormal_sampler, simulate_mgc

FLOOR = 0.05
SERVICES = {
    "D": (0.0, det_sampler(1.0)),
    "LN(1)": (1.0, lognormal_sampler(1.0, 1.0)),
    "LN(4)": (4.0, lognormal_sampler(1.0, 4.0)),
}


def _err(model: float, sim: float) -> str:
    return f"{100 * (model - sim) / max(sim, FLOOR):+.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--customers", type=int, default=4_000_000)
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(
        "| arrivals | service | c | rho | sim E[W] (±se) | Kimura | A-C | sim p90 | Kimura | A-C "
        "| sim P(W>0) | Erlang C |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    configs = [("M", 1.0, s) for s in SERVICES] + [("G(ca2=4)", 4.0, "LN(1)")]
    for arr, ca2, svc_name in configs:
        scv, svc = SERVICES[svc_name]
        for c in (1, 2, 8, 32):
            for rho in (0.3, 0.6, 0.8, 0.9, 0.95):
                rate = rho * c
                gaps = None if arr == "M" else gamma_sampler(1.0 / rate, ca2)
                sim = simulate_mgc(rate, svc, c, args.customers, rng, n_chains=64, interarrival=gaps)
                k = mgc_wait(rate, 1.0, scv, c, scv_arrival=ca2, method="kimura")
                a = mgc_wait(rate, 1.0, scv, c, scv_arrival=ca2, method="allen-cunneen")
                sm, sp = sim.mean_wait_s, sim.p90_wait_s
                cells = [
                    arr,
                    svc_name,
                    str(c),
                    str(rho),
                    f"{sm:.4g} (±{sim.mean_wait_se_s:.2g})",
                    _err(float(k.mean_wait_s), sm),
                    _err(float(a.mean_wait_s), sm),
                    f"{sp:.4g}",
                    _err(float(k.p90_wait_s), sp),
                    _err(float(a.p90_wait_s), sp),
                    f"{sim.prob_wait:.3f}",
                    f"{float(k.prob_wait):.3f}",
                ]
                print("| " + " | ".join(cells) + " |")
    print(
        f"\n{args.customers:,} customers per row, 64 chains, 20% warm-up per chain; "
        f"{time.perf_counter() - t0:.0f} s total."
    )


if __name__ == "__main__":
    main()
