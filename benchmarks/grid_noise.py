"""The simulator's own seed-to-seed noise on the grid's goodputs (issue 17, acceptance 1).

Each grid cell (benchmarks/validate_grid.py) simulates one seeded Poisson request sequence (request
seed = scenario index) and bisects its goodput to SIM_REL_TOL. How much of the band misses is that
one sequence? This draws ``--cells`` cells uniformly (numpy seed DRAW_SEED, all styles, not chosen by
miss status) from a stored grid JSON, re-plans each (same scenario, same planner), and re-runs the
cell's goodput search (validate_grid.simulate_cell: same run-length rule, same tolerance, same start
rate) with ``--seeds`` request seeds: the grid's own (the scenario index) and index + k x SEED_STRIDE.
Cells whose stored run exceeds ``--max-requests`` requests are skipped (listed in the JSON).

Per cell: the goodput per seed, the coefficient of variation (sample SD / mean), the SD of log goodput.
Summary (:func:`summary`): the pooled SD of log goodput, the |log ratio| between seeds, the in-band
share a perfect planner would reach against one seed (measured, and P(log 0.9 < N(0, sd) < log 1.1)),
the grid misses within one SD of a band edge, and the CPU a K-seed grid would cost.

Run: ``PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python benchmarks/grid_noise.py --cells 24 --seeds 3
--json benchmarks/results/grid_noise11.json [--resume]`` (one process; the report is printed).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import numpy as np

from benchmarks.validate_grid import BAND, REQUESTS, SEED, plan_for, sample_scenario, simulate_cell

DRAW_SEED = 11  # numpy seed of the uniform cell draw (session 11)
SEED_STRIDE = 100_000  # request seed k of scenario i: i + k x SEED_STRIDE (k = 0: the grid's own seed)
MAX_REQUESTS = 20_000  # cells with a longer stored run are skipped (CPU on a shared machine)
SHORT_RUN = 1600  # runs shorter than this are (near) the grid's 1,500-request floor
LOG_BAND = (math.log(BAND[0]), math.log(BAND[1]))


def grid_cells(blob: dict) -> list[dict]:
    """Every cell of a stored grid with a planned goodput > 0, with its scenario index and ratio."""
    out = []
    for r in blob["results"]:
        for c in r["cells"]:
            if c["goodput_planner"] > 0:
                ratio = c["goodput_sim"] / c["goodput_planner"]
                out.append({**c, "index": r["scenario"]["index"], "ratio": ratio})
    return out


def draw_cells(cells: list[dict], n: int, draw_seed: int = DRAW_SEED) -> list[dict]:
    """``n`` cells drawn uniformly without replacement (fixed numpy seed), in draw order."""
    rng = np.random.default_rng(draw_seed)
    pick = rng.choice(len(cells), size=min(n, len(cells)), replace=False)
    return [cells[int(i)] for i in pick]


def request_seeds(index: int, k: int) -> list[int]:
    """The ``k`` request seeds of scenario ``index``: its own (the grid's) first."""
    return [index + j * SEED_STRIDE for j in range(k)]


def cell_noise(
    index: int,
    style: str,
    seeds: list[int],
    grid_seed: int = SEED,
    minimum: int = REQUESTS,
    scaled: bool = True,
) -> dict:
    """One cell's goodput search repeated per request seed (validate_grid.simulate_cell, its run
    length rule and tolerance), with the CPU seconds of the plan and of each search."""
    s = sample_scenario(grid_seed, index)
    t0 = time.process_time()
    p = plan_for(s)
    plan_cpu_s = time.process_time() - t0
    b = p.best[style]
    runs = []
    for seed in seeds:
        t0 = time.process_time()
        g, base, _ = simulate_cell(p.inputs.scenario, b, index, minimum, scaled, seed=seed)
        runs.append(
            {
                "seed": int(seed),
                "goodput_sim": float(g.rate_rps),
                "requests": len(base.arrival_s),
                "sim_runs": int(g.runs),
                "cpu_s": time.process_time() - t0,
            }
        )
    gs = np.array([r["goodput_sim"] for r in runs])
    logs = np.log(gs) if bool(np.all(gs > 0)) else np.full(gs.shape, math.nan)
    return {
        "index": index,
        "style": style,
        "config": b.config.label(),
        "goodput_planner": float(b.goodput_rps),
        "plan_cpu_s": plan_cpu_s,
        "runs": runs,
        "mean": float(gs.mean()),
        "cv": float(gs.std(ddof=1) / gs.mean()) if gs.size > 1 and gs.mean() > 0 else math.nan,
        "sd_log": float(logs.std(ddof=1)) if gs.size > 1 else math.nan,
        "max_abs_log_ratio": float(logs.max() - logs.min()),
    }


def p_in_band(sd_log: float) -> float:
    """P(log 0.9 <= X <= log 1.1) for X ~ N(0, sd_log): the in-band chance of one seed's goodput
    against a perfect planner (its goodput = the seed-free median), log goodput taken as normal."""

    def phi(x: float) -> float:
        return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))

    return phi(LOG_BAND[1] / sd_log) - phi(LOG_BAND[0] / sd_log)


def _q(xs: np.ndarray) -> str:
    return (
        f"median {np.median(xs):.4f}, p75 {np.quantile(xs, 0.75):.4f}, p90 {np.quantile(xs, 0.9):.4f}, "
        f"max {xs.max():.4f}"
    )


def _edge_log(ratio: float) -> float:
    """|log distance| of a ratio to the nearer band edge (0.9 or 1.1)."""
    return min(abs(math.log(ratio) - e) for e in LOG_BAND) if ratio > 0 else math.inf


def _pooled(cells: list[dict]) -> float:
    """Pooled SD of log goodput (equal seeds per cell, k - 1 degrees of freedom each); nan if none."""
    return math.sqrt(float(np.mean([c["sd_log"] ** 2 for c in cells]))) if cells else math.nan


def summary(noise: list[dict], grid: list[dict]) -> dict:
    """Pooled noise figures of the measured cells (equal seeds per cell) against the grid's cells.

    Per-cell noise by run length: a sample mean over n requests has SD ~ 1/sqrt(n) (central limit),
    so sd_log(n) = a / sqrt(n) with a^2 = the mean of sd_log^2 x n over the measured cells (n = the
    cell's mean run length); ``*_per_cell`` figures use it for every grid cell's stored run length."""
    ok = [c for c in noise if math.isfinite(c["sd_log"])]
    k = len(ok[0]["runs"])
    sd_log = _pooled(ok)
    n_req = {id(c): float(np.mean([r["requests"] for r in c["runs"]])) for c in ok}
    a = math.sqrt(float(np.mean([c["sd_log"] ** 2 * n_req[id(c)] for c in ok])))
    short = [c for c in ok if n_req[id(c)] < SHORT_RUN]
    long_ = [c for c in ok if n_req[id(c)] >= SHORT_RUN]
    pair_logs, dev_logs = [], []
    for c in ok:
        lg = np.log([r["goodput_sim"] for r in c["runs"]])
        pair_logs += [lg[i] - lg[j] for i in range(k) for j in range(k) if i != j]
        dev_logs += list(lg - lg.mean())  # against the cell's geometric mean (a perfect planner)
    pair_logs_a, dev_a = np.array(pair_logs), np.array(dev_logs)

    def inb(x: np.ndarray) -> float:
        return float(((x >= LOG_BAND[0]) & (x <= LOG_BAND[1])).mean())

    def in_band(ratio: float) -> bool:
        return BAND[0] <= ratio <= BAND[1]

    misses = [g for g in grid if not in_band(g["ratio"])]
    inside = [g for g in grid if in_band(g["ratio"])]

    def sd_cell(g: dict) -> float:
        return a / math.sqrt(g["requests"])

    # CPU of a K-seed grid: the sample's search CPU per simulated request-run (ratio estimator),
    # times every grid cell's stored requests x runs (the skipped long cells included)
    cpu = sum(r["cpu_s"] for c in ok for r in c["runs"])
    req_runs = sum(r["requests"] * r["sim_runs"] for c in ok for r in c["runs"])
    search_cpu = cpu / req_runs * sum(g["requests"] * g["sim_runs"] for g in grid)
    return {
        "cells": len(ok),
        "seeds": k,
        "sd_log_pooled": sd_log,
        f"sd_log_runs_under_{SHORT_RUN}": _pooled(short),
        f"sd_log_runs_over_{SHORT_RUN}": _pooled(long_),
        "cells_under_over": [len(short), len(long_)],
        "a_sd_log_x_sqrt_requests": a,
        "cv": _q(np.array([c["cv"] for c in ok])),
        "abs_log_ratio_pairs": _q(np.abs(pair_logs_a)),
        "pairs_in_band": inb(pair_logs_a),
        "cells_all_pairs_in_band": float(np.mean([c["max_abs_log_ratio"] <= LOG_BAND[1] for c in ok])),
        "sample_in_band_per_seed": [
            sum(in_band(c["runs"][j]["goodput_sim"] / c["goodput_planner"]) for c in ok) for j in range(k)
        ],
        "sample_in_band_seed_mean": sum(in_band(c["mean"] / c["goodput_planner"]) for c in ok),
        "sample_cells_changing_status": sum(
            len({in_band(r["goodput_sim"] / c["goodput_planner"]) for r in c["runs"]}) > 1 for c in ok
        ),
        "perfect_planner_in_band_measured": inb(dev_a * math.sqrt(k / (k - 1))),  # unbiased spread
        "perfect_planner_in_band_normal": p_in_band(sd_log),
        "perfect_planner_in_band_per_cell": float(np.mean([p_in_band(sd_cell(g)) for g in grid])),
        "seed_vs_seed_in_band_normal": p_in_band(math.sqrt(2.0) * sd_log),
        "grid_cells": len(grid),
        "grid_misses": len(misses),
        "misses_within_1sd_of_edge": int(sum(_edge_log(g["ratio"]) <= sd_log for g in misses)),
        "misses_within_2sd_of_edge": int(sum(_edge_log(g["ratio"]) <= 2 * sd_log for g in misses)),
        "misses_within_1sd_per_cell": int(sum(_edge_log(g["ratio"]) <= sd_cell(g) for g in misses)),
        "in_band_within_1sd_of_edge": int(sum(_edge_log(g["ratio"]) <= sd_log for g in inside)),
        "in_band_within_1sd_per_cell": int(sum(_edge_log(g["ratio"]) <= sd_cell(g) for g in inside)),
        "sample_search_cpu_s": cpu,
        "grid_search_cpu_s_one_seed": search_cpu,
        "grid_search_cpu_s_extra_for_k_seeds": (k - 1) * search_cpu,
        "plan_cpu_s_mean": float(np.mean([c["plan_cpu_s"] for c in ok])),
    }


def report(noise: list[dict], grid: list[dict]) -> str:
    lines = [
        "| scenario | style | planned | grid sim | goodput per seed | requests | CV | max abs log ratio |"
    ]
    lines.append("|---:|---|---:|---:|---|---|---:|---:|")
    for c in sorted(noise, key=lambda c: (c["index"], c["style"])):
        gs = ", ".join(f"{r['goodput_sim']:.4g}" for r in c["runs"])
        ns = ", ".join(str(r["requests"]) for r in c["runs"])
        stored = next(g["goodput_sim"] for g in grid if g["index"] == c["index"] and g["style"] == c["style"])
        lines.append(
            f"| {c['index']} | {c['style']} | {c['goodput_planner']:.4g} | {stored:.4g} | {gs} | {ns} | "
            f"{c['cv']:.3f} | {c['max_abs_log_ratio']:.3f} |"
        )
    lines += ["", json.dumps(summary(noise, grid), indent=1)]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", default="benchmarks/results/grid_session10.json", help="stored grid JSON")
    ap.add_argument("--cells", type=int, default=24, help="cells drawn uniformly from the grid")
    ap.add_argument("--seeds", type=int, default=3, help="request seeds per cell (the grid's own first)")
    ap.add_argument("--draw-seed", type=int, default=DRAW_SEED)
    ap.add_argument("--max-requests", type=int, default=MAX_REQUESTS, help="skip cells with longer runs")
    ap.add_argument("--json", default="benchmarks/results/grid_noise.json")
    ap.add_argument("--resume", action="store_true", help="keep the cells already in --json")
    args = ap.parse_args()
    with open(args.grid, encoding="utf-8") as fh:
        blob = json.load(fh)
    grid = grid_cells(blob)
    drawn = draw_cells(grid, args.cells, args.draw_seed)
    done: dict[tuple[int, str], dict] = {}
    if args.resume and os.path.exists(args.json):
        with open(args.json, encoding="utf-8") as fh:
            done = {(c["index"], c["style"]): c for c in json.load(fh)["cells"]}
    skipped = [(d["index"], d["style"], d["requests"]) for d in drawn if d["requests"] > args.max_requests]
    for d in drawn:
        key = (d["index"], d["style"])
        if d["requests"] > args.max_requests or key in done:
            continue
        seeds = request_seeds(d["index"], args.seeds)
        c = cell_noise(
            d["index"], d["style"], seeds, blob["seed"], blob["requests"], blob["run_length"] != "fixed"
        )
        c["grid_goodput_sim"], c["grid_goodput_planner"] = d["goodput_sim"], d["goodput_planner"]
        done[key] = c
        print(
            f"{d['index']:3d} {d['style']:18s} planned {c['goodput_planner']:.4g} "
            + " ".join(f"{r['goodput_sim']:.4g}/{r['requests']}" for r in c["runs"])
            + f" cv {c['cv']:.3f} cpu {sum(r['cpu_s'] for r in c['runs']):.0f} s",
            flush=True,
        )
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as fh:
            out = {"grid": args.grid, "draw_seed": args.draw_seed, "seeds": args.seeds, "skipped": skipped}
            json.dump({**out, "cells": list(done.values())}, fh, indent=1)
    if done:
        with open(args.json, "w", encoding="utf-8") as fh:
            out = {"grid": args.grid, "draw_seed": args.draw_seed, "seeds": args.seeds, "skipped": skipped}
            blob_out = {**out, "summary": summary(list(done.values()), grid), "cells": list(done.values())}
            json.dump(blob_out, fh, indent=1)
    print(f"skipped (stored run > {args.max_requests} requests): {skipped}")
    print(report(list(done.values()), grid))


if __name__ == "__main__":
    main()
