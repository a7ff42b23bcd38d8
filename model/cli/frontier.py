"""``pdplan frontier``: output tokens/s per GPU against tokens/s per user (1 / TPOT) for each
serving style over a range of request rates, its Pareto frontier, and the SLO region."""

from __future__ import annotations

import argparse
from typing import Any

from model.cli import COMMANDS
from model.cli.common import print_json, print_table
from model.cli.plan import _float, _int_list, _whole, add_scenario_args, scenario_kwargs
from model.errors import InputError
from model.planner.frontier import MAX_RATES, frontier, frontier_dict
from model.units import format_rate, format_time


def register(sub: Any) -> None:
    p = sub.add_parser("frontier", help=COMMANDS["frontier"][1])
    add_scenario_args(p)
    p.add_argument("--gpus", required=True, help="GPU budget: every configuration of each style up to it")
    p.add_argument("--tp", default="1,2,4,8", help="TP degrees to consider (default 1,2,4,8)")
    p.add_argument("--chunks", default="256,512,1024,2048,4096", help="chunked-prefill token budgets")
    p.add_argument(
        "--rates",
        help="comma-separated request rates in req/s (default: 2%% to 98%% of each configuration's "
        "stability limit)",
    )
    p.add_argument(
        "--whole-request-transfer", action="store_true", help="send KV after prefill, not layer-wise"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def _rates(text: str | None) -> tuple[float, ...] | None:
    if text is None:
        return None
    parts = [x for x in text.split(",") if x.strip()]
    if not 1 <= len(parts) <= MAX_RATES:
        raise InputError("rates", text, f"1 to {MAX_RATES} comma-separated request rates (req/s)")
    return tuple(_float(x, "rates", "request rates > 0 req/s, e.g. 1,2,5") for x in parts)


def run(args: argparse.Namespace) -> int:
    result = frontier(
        args.model,
        args.gpu,
        gpus=_whole(args.gpus, "gpus"),
        rates_rps=_rates(args.rates),
        tp_options=_int_list(args.tp, "tp"),
        chunk_options=_int_list(args.chunks, "chunks"),
        layerwise=not args.whole_request_transfer,
        **scenario_kwargs(args),
    )
    if args.json:
        print_json(frontier_dict(result))
        return 0
    p = f"p{result.percentile:g}"
    print(
        f"SLO region: >= {result.min_tokens_per_s_per_user:.3g} tokens/s per user "
        f"({p} TPOT <= {format_time(result.tpot_slo_s)}); 'SLO' marks points also meeting "
        f"{p} TTFT <= {format_time(result.ttft_slo_s)} and the attainment target"
    )
    for name, s in result.styles.items():
        order = s.frontier_order()
        print(f"\n{name}: {len(order)} frontier points of {len(s.rate_rps)} evaluated")
        print_table(
            [
                (
                    f"{s.output_tokens_per_s_per_user[i]:.4g}",
                    f"{s.output_tokens_per_s_per_gpu[i]:.4g}",
                    format_rate(s.rate_rps[i]),
                    format_time(s.ttft_s[i]),
                    format_time(s.tpot_s[i]),
                    "SLO" if s.meets_slo[i] else "",
                    s.labels[int(s.config_index[i])],
                )
                for i in order
            ],
            ("tok/s/user", "tok/s/GPU", "rate", f"{p} TTFT", f"{p} TPOT", "meets", "configuration"),
        )
    return 0
