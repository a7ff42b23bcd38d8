"""``pdplan sweep GRID.toml``: plan every scenario of a grid into one tidy CSV (or Parquet)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from model.cli import COMMANDS
from model.cli.plan import _whole
from model.fleet.grid import load_grid
from model.fleet.sweep import run_sweep


def register(sub: Any) -> None:
    p = sub.add_parser("sweep", help=COMMANDS["sweep"][1])
    p.add_argument(
        "grid", help="grid file (TOML: models, gpus, workloads, [[slo]] tiers, budgets; docs/sweeps.md)"
    )
    p.add_argument(
        "--out",
        "-o",
        help="output .csv or .parquet (default: the grid's name with .csv); rows already "
        "there are kept and their scenarios skipped (resume)",
    )
    p.add_argument("--workers", default="1", help="local worker processes (default 1)")
    p.add_argument(
        "--ray", metavar="ADDRESS", help="run on the Ray cluster at ADDRESS ('auto', 'local', ray://...)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    grid = load_grid(args.grid)
    out = Path(args.out) if args.out else Path(Path(args.grid).stem + ".csv")
    result = run_sweep(
        grid,
        out,
        workers=_whole(args.workers, "workers"),
        ray_address=args.ray,
        progress=None if args.quiet else sys.stderr,
    )
    print(
        f"{result.path}: {result.scenarios_run} scenarios run ({result.rows_written} rows), "
        f"{result.scenarios_skipped} already there; {result.seconds:.1f} s, "
        f"{result.scenarios_per_s:.2f} scenarios/s"
    )
    return 0
