"""Re-plan a stored grid's scenarios on the current model, against the stored simulations (issue 17).

A model change moves planned goodputs; where a cell's best configuration is unchanged, its stored
simulated goodput still stands (the simulation depends on the configuration, the seed and the run
length; the run length moves only through the planner's request lifetime, see
``validate_grid._lifetime_s``), so simulated / new planned goodput is the cell's new ratio without a
simulation. Cells whose configuration changed need one: ``--simulate`` runs
``validate_grid.simulate_cell`` on them. Reports each moved cell, the in-band count before and after,
and the style verdicts (``validate_grid.rule_verdicts``) read from the new planned goodputs.

A screening tool for model changes, not the grid: the grid's figures come from
``benchmarks/validate_grid.py``. Usage: ``PYTHONPATH=. python benchmarks/grid_replan.py
[--grid benchmarks/results/grid_session14.json] [--only 1,9,17] [--simulate] [--workers 2]``.
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from benchmarks.validate_grid import BAND, SEED, plan_for, rule_verdicts, sample_scenario, simulate_cell

GRID = Path(__file__).parent / "results" / "grid_session14.json"


def in_band(ratio: float) -> bool:
    """Whether a simulated / planned ratio lies in the grid's band."""
    return BAND[0] <= ratio <= BAND[1]


def replan(args: tuple[dict, bool, int]) -> dict:
    """One stored scenario re-planned: per cell the old and new planned goodput, the configuration
    (old, new), the stored simulated goodput and, with ``simulate``, a new one where the
    configuration changed (at the stored grid's request floor ``floor``)."""
    stored, simulate, floor = args
    index = stored["scenario"]["index"]
    s = sample_scenario(SEED, index)
    p = plan_for(s)
    old = {c["style"]: c for c in stored["cells"]}
    cells = []
    for style, b in p.best.items():
        o = old.get(style)
        same = o is not None and o["config"] == b.config.label()
        sim = o["goodput_sim"] if same else None
        if not same and simulate:
            g, _, _ = simulate_cell(p.inputs.scenario, b, index, floor)
            sim = g.rate_rps
        cells.append(
            {
                "style": style,
                "config": b.config.label(),
                "old_config": o["config"] if o else "",
                "planned_old": o["goodput_planner"] if o else 0.0,
                "planned_new": b.goodput_rps,
                "sim": sim,
                "sim_old": o["goodput_sim"] if o else None,
            }
        )
    new = {
        **stored,
        "verdict_planner": p.verdict,
        "cells": [
            {"style": c["style"], "goodput_planner": c["planned_new"], "goodput_sim": c["sim"] or 0.0}
            for c in cells
        ],
    }
    verdict_sim = rule_verdicts(new)[1] if all(c["sim"] is not None for c in cells) else "?"
    return {
        "index": index,
        "verdict_planner": p.verdict,
        "verdict_sim": verdict_sim,
        "verdict_old": (stored["verdict_planner"], stored["verdict_sim"]),
        "cells": cells,
    }


def print_move(index: int, c: dict) -> None:
    """One line for a cell whose planned goodput or configuration moved."""
    same = c["config"] == c["old_config"]
    if same and abs(c["planned_new"] / max(c["planned_old"], 1e-12) - 1) <= 1e-9:
        return
    old = c["sim_old"] / c["planned_old"] if c["planned_old"] > 0 and c["sim_old"] else float("nan")
    was = "" if same else f"  (was {c['old_config']})"
    print(f"{index:4d} {c['style']:18s} {old:.3f} -> {c['sim'] / c['planned_new']:.3f}  {c['config']}{was}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", default=str(GRID))
    ap.add_argument("--only", default="", help="comma-separated scenario indices (default: all)")
    ap.add_argument("--simulate", action="store_true", help="simulate cells whose configuration changed")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", default="", help="write the per-scenario rows here")
    a = ap.parse_args()
    blob = json.loads(Path(a.grid).read_text())
    only = {int(i) for i in a.only.split(",") if i.strip()}
    todo = [r for r in blob["results"] if not r.get("error") and (not only or r["scenario"]["index"] in only)]
    with ProcessPoolExecutor(a.workers) as pool:
        rows = list(pool.map(replan, [(r, a.simulate, blob["requests"]) for r in todo]))
    before = after = unknown = n = 0
    for row in rows:
        for c in row["cells"]:
            if c["planned_old"] > 0 and c["sim_old"] is not None:
                n += 1
                before += in_band(c["sim_old"] / c["planned_old"])
            if c["sim"] is None or c["planned_new"] <= 0:
                unknown += c["planned_new"] > 0
                continue
            after += in_band(c["sim"] / c["planned_new"])
            print_move(row["index"], c)
        vp, vs = row["verdict_old"]
        if row["verdict_planner"] != vp or row["verdict_sim"] not in ("?", vs):
            print(f"{row['index']:4d} verdict planner {vp} -> {row['verdict_planner']}, ", end="")
            print(f"simulator {vs} -> {row['verdict_sim']}")
    print(f"cells in band: {before} / {n} stored -> {after} (+ {unknown} with a new configuration, ", end="")
    print("not simulated)")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
