"""Re-plan the grid's chunked cells and set the new planned goodput against a stored grid's simulator goodput.

    PYTHONPATH=. python -m benchmarks.chunk_replan GRID.json [INDEX,...] [--json OUT]

For each scenario (all of GRID's by default) the planner's best "colocated-chunked" configuration and
goodput; where the configuration is the stored one, the ratio stored simulated / new planned goodput (the
simulator is unchanged by a planner change; its run length follows the planned goodput only weakly).
A planner-only estimate of the cells' ratios, to be confirmed with benchmarks.validate_grid.cell_ratio.
"""

from __future__ import annotations

import json
import sys

from benchmarks.validate_grid import plan_for, sample_scenario

STYLE = "colocated-chunked"


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out_path = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    if out_path in args:
        args.remove(out_path)
    with open(args[0]) as f:
        grid = json.load(f)
    only = {int(i) for i in args[1].split(",")} if len(args) > 1 else None
    rows = []
    for r in grid["results"]:
        idx = r["scenario"]["index"]
        cell = next((c for c in r.get("cells", []) if c["style"] == STYLE), None)
        if cell is None or (only is not None and idx not in only):
            continue
        best = plan_for(sample_scenario(grid["seed"], idx)).best.get(STYLE)
        if best is None:
            continue
        same = best.config.label() == cell["config"]
        row = {
            "index": idx,
            "config": best.config.label(),
            "same_config": same,
            "planned_before": cell["goodput_planner"],
            "planned": best.goodput_rps,
            "sim": cell["goodput_sim"],
            "ratio_before": cell["goodput_sim"] / cell["goodput_planner"],
            "ratio": cell["goodput_sim"] / best.goodput_rps if same else None,
        }
        rows.append(row)
        ratio = f"{row['ratio']:.3f}" if same else "config changed"
        print(f"{idx:4d} {row['config']:45s} {row['ratio_before']:.3f} -> {ratio}", flush=True)
    if out_path:
        with open(out_path, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
