"""``--concurrency N`` (and ``--think-time``, ``--think``) for ``pdplan plan`` and ``pdplan simulate``:
the fixed-concurrency (closed-loop) load of model.planner.concurrency and model.sim.closed_loop."""

from __future__ import annotations

import argparse
import math
from typing import Any

from model.cli.common import print_json, print_table, to_jsonable
from model.errors import InputError
from model.limits import MAX_CONCURRENCY, MAX_THINK_TIME_S
from model.units import Kind, format_rate, format_time, parse_quantity
from model.workload.concurrency import THINK_DISTRIBUTIONS, Concurrency

__all__ = ["add_concurrency_args", "concurrency_from_args", "print_plan", "run_plan", "simulation_json"]


def add_concurrency_args(p: argparse.ArgumentParser) -> None:
    """The closed-loop options (all default to off: an open-loop run)."""
    p.add_argument(
        "--concurrency",
        default=None,
        metavar="N",
        help=f"fixed number of concurrent users (closed loop, 1 to {MAX_CONCURRENCY}): each sends its next "
        "request when its last one completes",
    )
    p.add_argument(
        "--think-time", default=None, help="mean think time between a user's requests, e.g. 2s (default 0)"
    )
    p.add_argument(
        "--think",
        default="exponential",
        choices=THINK_DISTRIBUTIONS,
        help="think-time distribution (default exponential; the planner uses only the mean)",
    )


def concurrency_from_args(args: argparse.Namespace) -> Concurrency | None:
    """The Concurrency of the parsed options, None without ``--concurrency`` (errors name the flag)."""
    if args.concurrency is None:
        if args.think_time is not None:
            raise InputError("--think-time", args.think_time, "only with --concurrency N")
        return None
    allowed = f"a whole number of users in [1, {MAX_CONCURRENCY}]"
    text = str(args.concurrency).strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 6 and 1 <= int(text) <= MAX_CONCURRENCY):
        raise InputError("--concurrency", args.concurrency, allowed)
    users = int(text)
    think = 0.0
    if args.think_time is not None:
        think = parse_quantity(args.think_time, Kind.TIME, "--think-time", bare_unit="second")
        if not (math.isfinite(think) and 0 <= think <= MAX_THINK_TIME_S):
            raise InputError("--think-time", args.think_time, f"a time in [0, {MAX_THINK_TIME_S:g}] s")
    return Concurrency(users, think, args.think)


def run_plan(args: argparse.Namespace, fields: dict[str, Any], load: Concurrency) -> int:
    """``pdplan plan --concurrency N``: the fixed-concurrency plan (text or ``--json``)."""
    from model.planner.concurrency import concurrency_plan_dict, plan_concurrency

    if fields.get("gpus") is None:
        raise InputError(
            "--gpus", None, "a GPU budget with --concurrency (the target-rate mode is open-loop)"
        )
    if getattr(args, "robustness", None) is not None:
        raise InputError("--robustness", args.robustness, "an open-loop plan (leave out --concurrency)")
    result = plan_concurrency(args.model, args.gpu, concurrency=load, **fields)
    if args.json:
        print_json(concurrency_plan_dict(result))
    else:
        print_plan(result)
    return 0


def print_plan(result: Any) -> None:
    """The verdict, the reasons and one row per style."""
    print(f"verdict: {result.verdict} (fixed concurrency: {result.concurrency.label()})")
    if result.tie:
        print(
            f"tie within the {result.inputs.margin:.0%} margin on users within the SLOs: "
            f"disaggregated {result.gain:+.1%} (needs +{result.inputs.margin:.0%})"
        )
    print()
    for r in result.reasons:
        print(f"- {r}")
    rows = []
    for b in result.best.values():
        p = b.at_users
        rows.append(
            (
                b.style,
                b.label,
                f"{'>= ' if b.capped else ''}{b.max_concurrency}",
                format_rate(p.throughput_rps),
                f"{p.output_tokens_per_s:,.0f}",
                format_time(p.ttft_s.p90),
                format_time(p.tpot_s.p90),
                "yes" if p.meets_slo else "no",
            )
        )
    if not rows:
        return
    n = result.concurrency.users
    print()
    print_table(
        rows,
        (
            "style",
            "configuration",
            "max users in SLO",
            f"req/s @{n}",
            "out tok/s",
            "TTFT p90",
            "TPOT p90",
            "SLO",
        ),
    )


def simulation_json(res: Any) -> dict[str, Any]:
    """The closed-loop figures of a model.sim.closed_loop.ClosedLoopSimResult."""
    return {
        "concurrency": to_jsonable(res.concurrency),
        "closed_loop_throughput_rps": to_jsonable(res.throughput_rps),
        "closed_loop_window_s": to_jsonable(res.window_s),
        "closed_loop_output_tokens_per_s": to_jsonable(res.output_tokens_per_s),
        "response_mean_s": to_jsonable(res.response_mean_s),
    }
