"""``pdplan compare``: two scenarios side by side (model.planner.compare)."""

from __future__ import annotations

import argparse
from typing import Any

from model.cli import COMMANDS
from model.cli.common import print_json, print_table
from model.planner.compare import METRICS, Comparison, Difference, compare
from model.units import format_count, format_money, format_rate, format_si


def register(sub: Any) -> None:
    p = sub.add_parser("compare", help=COMMANDS["compare"][1])
    p.add_argument("a", help="app scenario file (.json, re-planned) or `pdplan plan --json` output")
    p.add_argument("b", help="the second file, compared against the first (differences are b - a)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def _shown(metric: str, x: float | None) -> str:
    if x is None:
        return "-"
    if metric == "n_gpus":
        return format_count(x, "GPU")
    if metric == "goodput_rps":
        return format_rate(x)
    if metric == "cost_usd_per_million_output_tokens":
        return format_money(x)
    return format_si(x, "J", small=True)


def _change(metric: str, d: Difference) -> str:
    if d.delta is None:
        return "-"
    sign = "+" if d.delta >= 0 else "-"
    if metric == "cost_usd_per_million_output_tokens":
        text = sign + format_money(abs(d.delta))
    elif metric == "n_gpus":
        text = f"{d.delta:+,.0f}"
    else:
        text = sign + _shown(metric, abs(d.delta))
    return text + (f" ({d.ratio - 1:+.0%})" if d.ratio is not None else "")


def table(c: Comparison) -> tuple[list[list[str]], list[str]]:
    """Rows and header of the side-by-side table (one row per metric, plus verdict and configuration)."""
    rows = [
        ["verdict", c.a.verdict, c.b.verdict, "changed" if c.verdict_changed else "same"],
        ["configuration", c.a.label or "-", c.b.label or "-", ""],
        ["model / GPU", f"{c.a.model} / {c.a.gpu}", f"{c.b.model} / {c.b.gpu}", ""],
        ["workload", c.a.workload, c.b.workload, ""],
    ]
    for metric, label in METRICS:
        d = c.difference(metric)
        rows.append([label, _shown(metric, d.a), _shown(metric, d.b), _change(metric, d)])
    return rows, ["", f"a: {c.a.source}", f"b: {c.b.source}", "b - a"]


def run(args: argparse.Namespace) -> int:
    result = compare(args.a, args.b)
    if args.json:
        print_json(result)
        return 0
    rows, header = table(result)
    print_table(rows, header)
    return 0
