"""One grid cell under each request router: the planner's prompt wait against the simulator's.

    PYTHONPATH=. python -m benchmarks.router_cell INDEX STYLE [ROUTERS]

plans grid scenario INDEX (benchmarks.validate_grid), takes its best STYLE configuration
("colocated" or "colocated-chunked") at the planned goodput and, for each router in ROUTERS
(comma-separated; default least-loaded,ll1,round-robin,random,shared-queue; "ll1" is least-loaded
with waiting weight 1, "least-loaded" keeps the engine's), evaluates the planner with the engine's
router replaced and simulates the cell's requests (the grid's seed and run length) with the same
router. Prints TTFT mean and p90 and the mean wait (planner / simulator) and the simulator's
per-replica arrival statistics: the inter-arrival SCV and the index of dispersion of the counts
over windows of 2, 5 and 10 per-replica mean inter-arrival times. docs/session13/chunk15.md.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np

from benchmarks.validate_grid import SEED, cell_requests, plan_for, sample_scenario
from model.hardware.engines import Router
from model.serving.evaluation import evaluate
from model.sim.report import RequestRecords
from model.sim.simulate import simulate
from model.workload.arrivals import scale_to_rate

DEFAULT = "least-loaded,ll1,round-robin,random,shared-queue"


def arrival_stats(rec: RequestRecords, replicas: int, rate_r: float) -> str:
    """Per-replica inter-arrival SCV and counts' index of dispersion (measured requests)."""
    m = rec.measured
    t0, t1 = float(rec.arrival_s[m].min()), float(rec.arrival_s[m].max())
    scv, idc = [], {k: [] for k in (2, 5, 10)}
    for j in range(replicas):
        a = np.sort(rec.arrival_s[m & (rec.instance == j)])
        d = np.diff(a)
        scv.append(d.var() / d.mean() ** 2)
        for k in idc:
            c = np.histogram(a, bins=np.arange(t0, t1, k / rate_r))[0]
            idc[k].append(c.var() / c.mean())
    return f"arrival SCV {np.mean(scv):.3f}, IDC " + " / ".join(f"{np.mean(v):.2f}" for v in idc.values())


def main() -> None:
    index, style = int(sys.argv[1]), sys.argv[2]
    routers = (sys.argv[3] if len(sys.argv) > 3 else DEFAULT).split(",")
    s = sample_scenario(SEED, index)
    p = plan_for(s)
    b, scn = p.best[style], p.inputs.scenario
    rate, replicas = b.goodput_rps, b.config.replicas
    print(
        f"grid {index} {b.config.label()} at {rate:.4g} req/s; engine router {scn.engine.router.describe()}"
    )
    base, kw = cell_requests(scn, b, index)
    for name in routers:
        policy = "least-loaded" if name == "ll1" else name
        weight = scn.engine.router.waiting_weight if name == "least-loaded" else 1.0
        router = Router(policy, weight)
        ev = evaluate(b.config, replace(scn, engine=replace(scn.engine, router=router)), rate)
        opts = {**kw, "options": replace(kw["options"], router=router)}
        rec = simulate(b.config, scn.arch, base.at_times(scale_to_rate(base.arrival_s, rate)), **opts).records
        m = rec.measured & np.isfinite(rec.first_token_s)
        ttft = (rec.first_token_s - rec.arrival_s)[m]
        wait = (rec.prefill_start_s - rec.arrival_s)[m]
        print(
            f"{name:13s} TTFT mean {ev.queue_wait_s + ev.prefill_s:.3f} / {ttft.mean():.3f} s, p90"
            f" {ev.ttft_s.p90:.3f} / {np.quantile(ttft, 0.9):.3f} s, wait {ev.queue_wait_s:.3f} /"
            f" {wait.mean():.3f} s; {arrival_stats(rec, replicas, rate / replicas)}",
            flush=True,
        )


if __name__ == "__main__":
    main()
