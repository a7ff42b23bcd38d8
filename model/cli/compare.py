"""``pdplan compare``: two scenarios side by side (model.planner.compare)."""

from __future__ import annotations

import argparse
from typing import Any

from model.cli import COMMANDS
from model.cli.common import print_json, print_table
from model.planner.compare import compare, comparison_rows


def register(sub: Any) -> None:
    p = sub.add_parser("compare", help=COMMANDS["compare"][1])
    p.add_argument("a", help="app scenario file (.json, re-planned) or `pdplan plan --json` output")
    p.add_argument("b", help="the second file, compared against the first (differences are b - a)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    result = compare(args.a, args.b)
    if args.json:
        print_json(result)
        return 0
    rows, header = comparison_rows(result)
    print_table(rows, header)
    return 0
