"""The disaggregated prefill pool's wait, planner against simulator, at one rate (issue 17, session 13,
branch dis15).

For a grid scenario (or the golden ``mixtral``: plan_mixtral_h200_mixed), plans it, takes the best
disaggregated configuration and, at its planned goodput (or ``--rate``), prints the planner's bulk
queue (model.queueing.bulk_wait: P(W > 0), E[W | W > 0] = m, the queue ratio s, lambda m, g_J) and the
simulator's per-request prefill waits (prefill start - arrival, measured requests of
``validate_grid.cell_records_at``): P(W > 0), E[W | W > 0], lambda E[W | W > 0] (E[Q | W > 0] by
Little), W | W > 0's p50 / p90 / p99, the TTFT p90, and the planner's TTFT p90.

Usage: ``PYTHONPATH=. python -m benchmarks.trace_prefill_wait 62,98 [--rate 1.0] [--seed 7]
[--no-sim]``.
"""

from __future__ import annotations

import argparse

import numpy as np

import model.serving.disaggregated as dis
from benchmarks.validate_grid import SEED, cell_requests, plan_for, sample_scenario
from model.planner.types import BestConfig
from model.queueing.bulk_wait import BulkWait
from model.workload.scenario import Scenario

CALLS: list[tuple[tuple, dict, BulkWait]] = []
_orig = dis.bulk_wait


def _spy(*a: object, **k: object) -> BulkWait:
    out = _orig(*a, **k)
    CALLS.append((a, k, out))
    return out


def planned(index: str) -> tuple[Scenario, BestConfig, int]:
    """(scenario, BestConfig, plan index for seeding) of a grid index or the Mixtral golden."""
    if index == "mixtral":
        import model

        p = model.plan(
            "mixtral-8x7b",
            "h200",
            gpus=8,
            workload="mixed",
            ttft_slo_s=1.0,
            tpot_slo_s=0.05,
            thresholds=False,
        )
        return p.inputs.scenario, p.best["disaggregated"], 0
    s = sample_scenario(SEED, int(index))
    p = plan_for(s)
    return p.inputs.scenario, p.best["disaggregated"], int(index)


def planner_queue(scn: Scenario, b: BestConfig, rate: float) -> dict:
    """The planner's bulk queue for configuration ``b`` at ``rate`` (one evaluation, spied)."""
    from model.serving.evaluation import evaluate

    CALLS.clear()
    dis.bulk_wait = _spy
    try:
        ev = evaluate(b.config, scn, rate)
    finally:
        dis.bulk_wait = _orig
    a, _, out = CALLS[-1]
    lam = float(np.asarray(a[0]).reshape(-1)[0])
    m = float(out.cond_mean_s[0])
    return {
        "rate": lam,
        "n_p": float(np.asarray(a[3]).reshape(-1)[0]),
        "m": m,
        "lam_m": lam * m,
        "first": float(out.first_s[0]),
        "g_J": float(out.full_s[0]),
        "mean_wait": ev.queue_wait_s,
        "ttft_p90": ev.ttft_s.p90,
        "ttft_slo": scn.slo.ttft_s if hasattr(scn, "slo") else float("nan"),
    }


def simulated_queue(scn: Scenario, b: BestConfig, index: int, rate: float, seed: int | None) -> dict:
    """The simulator's per-request prefill waits at ``rate``."""
    from model.sim.simulate import simulate
    from model.workload.arrivals import scale_to_rate

    base, kw = cell_requests(scn, b, index, seed=seed)
    r = simulate(b.config, scn.arch, base.at_times(scale_to_rate(base.arrival_s, rate)), **kw).records
    ok = r.measured & np.isfinite(r.prefill_start_s)
    w = (r.prefill_start_s - r.arrival_s)[ok]
    waited = w[w > 1e-9]
    ttft = (r.first_token_s - r.arrival_s)[ok]
    q = np.quantile(waited, [0.5, 0.9, 0.99]) if len(waited) else [np.nan] * 3
    return {
        "p_wait": len(waited) / max(len(w), 1),
        "m": float(waited.mean()) if len(waited) else 0.0,
        "lam_m": rate * float(waited.mean()) if len(waited) else 0.0,
        "mean_wait": float(w.mean()),
        "w50": q[0],
        "w90": q[1],
        "w99": q[2],
        "ttft_p90": float(np.quantile(ttft, 0.9)),
        "n": int(ok.sum()),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cells")
    ap.add_argument("--rate", type=float, default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--no-sim", action="store_true")
    args = ap.parse_args()
    for index in args.cells.split(","):
        scn, b, idx = planned(index)
        rate = args.rate or b.goodput_rps
        pq = planner_queue(scn, b, rate)
        print(f"cell {index}: {b.config.label()} planned {b.goodput_rps:.4g} req/s, at {rate:.4g}")
        print("  planner  " + " ".join(f"{k}={v:.4g}" for k, v in pq.items()))
        if not args.no_sim:
            sq = simulated_queue(scn, b, idx, rate, args.seed if index != "mixtral" else (args.seed or 7))
            print("  simulator " + " ".join(f"{k}={v:.4g}" for k, v in sq.items()))


if __name__ == "__main__":
    main()
