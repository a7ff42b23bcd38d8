"""p90 TPOT of disaggregated cells: the planner's decode-batch fluctuation model against the step at
the mean batch (the model before it) and against the simulator, at the same configuration and rate.

For each broad-grid scenario index (benchmarks/validate_grid.py, seed 17) the planner's best
disaggregated configuration is evaluated at its planned goodput: the planner's p90 TPOT with the
fluctuation (model.queueing.decode_spread), the per-token time at the mean decode batch (the old
p90: no spread), and the simulator's p90 TPOT over Poisson requests at the same rate (first 10% left
out). Figures are recorded in docs/validation.md ("Decode-batch fluctuation").

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/tpot_fluctuation.py --indices 4 26 32 33 35``
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def one(index: int, requests: int) -> dict:
    import model
    from benchmarks.validate_grid import SEED, WARMUP_FRACTION, plan_for, sample_scenario
    from model.serving.phase_tables import BATCH_GRID, instance_tables
    from model.sim.simulate import SimOptions, SimRequests, poisson_requests, scenario_options, simulate
    from model.workload.arrivals import scale_to_rate

    t0 = time.perf_counter()
    s = sample_scenario(SEED, index)
    p = plan_for(s)
    scn = p.inputs.scenario
    b = p.best.get("disaggregated")
    if b is None:
        return {"index": index, "error": "no disaggregated plan"}
    cfg, rate = b.config, b.goodput_rps
    ev = model.evaluate(cfg, scn, rate)
    tables = instance_tables(scn, cfg.decode_gpu, cfg.decode_parallel, None, "decode")
    old = float(np.interp(ev.decode_batch, BATCH_GRID, tables.decode_token_s))
    base = poisson_requests(scn.workload, 1.0, requests, seed=s.index)
    req = SimRequests(scale_to_rate(base.arrival_s, rate), base.prompt_tokens, base.output_tokens)
    opts = SimOptions(warmup_requests=int(WARMUP_FRACTION * requests))
    run = simulate(cfg, scn.arch, req, options=opts, **scenario_options(scn))
    sm, rec = run.summary, run.records
    done = np.isfinite(rec.tpot_s) & (rec.output_tokens > 1)
    decode_s = float(np.sum(rec.tpot_s[done] * (rec.output_tokens[done] - 1)))
    span_s = float(req.arrival_s.max() - req.arrival_s.min())
    return {
        "index": index,
        "scenario": f"{s.model} {s.gpu} {s.dtype} {s.workload}",
        "config": cfg.label(),
        "rate_rps": rate,
        "batch": ev.decode_batch,
        "max_batch": ev.max_batch,
        "tpot_slo_s": scn.slo.tpot_s,
        "tpot_p90_sim_s": float(sm.tpot_s[1]),
        "tpot_p50_sim_s": float(sm.tpot_s[0]),
        "tpot_p50_new_s": ev.tpot_s.p50,
        "tpot_mean_new_s": ev.tpot_mean_s,
        # Little's law on the simulated decode pool: decode time of all requests / arrival span / n_d
        "batch_sim": decode_s / span_s / cfg.n_decode,
        "tpot_p90_old_s": old,
        "tpot_p90_new_s": ev.tpot_s.p90,
        "wall_s": time.perf_counter() - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--indices", type=int, nargs="+", required=True)
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    rows = []
    cols = ("#", "scenario", "disaggregated configuration", "rate", "batch", "sim p90", "old p90", "new p90")
    print("| " + " | ".join(cols) + " |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for i in args.indices:
        r = one(i, args.requests)
        rows.append(r)
        if "error" in r:
            print(f"| {i} | {r['error']} |")
            continue
        sim, old, new = r["tpot_p90_sim_s"], r["tpot_p90_old_s"], r["tpot_p90_new_s"]
        print(
            f"| {i} | {r['scenario']} | {r['config']} | {r['rate_rps']:.2f} | {r['batch']:.1f} "
            f"| {sim * 1e3:.2f} ms | {old * 1e3:.2f} ms ({old / sim - 1:+.0%}) "
            f"| {new * 1e3:.2f} ms ({new / sim - 1:+.0%}) |",
            flush=True,
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
