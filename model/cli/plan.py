"""``pdplan plan``: the verdict and the best configuration of each serving style."""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict
from typing import Any

import numpy as np

from model.cli import COMMANDS
from model.cli.common import (
    add_profile_dir,
    add_workload_source,
    lengths_workload,
    print_json,
    print_table,
)
from model.cli.concurrency import add_concurrency_args, concurrency_from_args, run_plan
from model.cli.prefix import add_prefix_args, prefix_hit_rate
from model.cli.speculation import add_speculation_args, spec_tokens, speculation_for
from model.errors import InputError
from model.hardware.catalog import get_engine
from model.hardware.engines import PREEMPTIONS, with_preemption
from model.limits import MAX_OPTIONS
from model.planner.plan import plan, plan_request
from model.planner.report import plan_dict
from model.planner.types import Alternatives
from model.units import Kind, format_money, format_rate, parse_quantity
from model.workload.presets import Workload
from model.workload.traces import load_trace


def _int_list(text: str, field: str) -> tuple[int, ...]:
    parts = [x for x in text.split(",") if x.strip()]
    if len(parts) > MAX_OPTIONS:
        raise InputError(
            field, text, f"at most {MAX_OPTIONS} values (the planner evaluates every combination)"
        )
    try:
        values = tuple(int(x) for x in parts)
    except ValueError:
        raise InputError(field, text, "comma-separated whole numbers, e.g. 1,2,4,8") from None
    if not values:
        raise InputError(field, text, "at least one value")
    return values


def _float(text: str, field: str, allowed: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(field, text, allowed) from None
    if not math.isfinite(value):
        raise InputError(field, text, allowed + " (a finite number)")
    return value


def _name(text: str | None, field: str) -> str | None:
    """An optional name flag: None when absent, an error when given but blank."""
    if text is not None and not text.strip():
        raise InputError(field, text, "a non-empty name (or leave the option out)")
    return text


def add_preemption_arg(p: argparse.ArgumentParser) -> None:
    """``--preemption``: replaces the engine profile's pre-emption policy (docs/model.md)."""
    p.add_argument(
        "--preemption",
        choices=PREEMPTIONS,
        default=None,
        help="what the engine does when its KV cache runs out (default: the engine profile's; "
        "recompute: vLLM V1; swap needs --kv-offload cpu:SIZE; none: whole-KV admission)",
    )


def engine_with_preemption(args: argparse.Namespace) -> Any:
    """``--engine`` with ``--preemption`` applied (the name alone when no policy is given)."""
    if getattr(args, "preemption", None) is None:
        return args.engine
    return with_preemption(get_engine(args.engine, args.profile_dir or None), args.preemption)


def add_scenario_args(p: argparse.ArgumentParser, engine_flag: bool = True) -> None:
    """Options shared by commands that take a model, GPUs, a workload and SLOs (``engine_flag``:
    whether ``--engine`` names the serving-engine profile; ``pdplan deploy`` uses it otherwise)."""
    p.add_argument("--model", required=True, help="catalog name or a Hugging Face config.json path")
    p.add_argument("--gpu", required=True, help="GPU profile name or .toml path (prefill pool / colocated)")
    p.add_argument("--decode-gpu", help="GPU kind of the decode pool (default: --gpu)")
    p.add_argument("--link", default="ib-ndr-400", help="link between pools (default ib-ndr-400)")
    p.add_argument("--node", help="node profile: pools that fit in one node use its intra-node link")
    add_workload_source(
        p,
        "workload preset: chat, code, summarization, rag, short, mixed, multiturn-chat, agentic",
        "request trace file (Azure CSV, Mooncake JSONL, BurstGPT CSV)",
    )
    p.add_argument("--ttft-slo", required=True, help="TTFT target, e.g. 500ms (a bare number is seconds)")
    p.add_argument("--tpot-slo", required=True, help="TPOT target, e.g. 50ms")
    p.add_argument("--percentile", default="90", help="percentile the targets apply to (default 90)")
    p.add_argument(
        "--attainment", default="0.9", help="fraction of requests that must meet both (default 0.9)"
    )
    p.add_argument("--dtype", default="bf16", help="weight dtype: bf16, fp16, fp8, int8, fp4, int4")
    p.add_argument("--kv-dtype", help="KV-cache dtype (default: the weight dtype, or bf16)")
    if engine_flag:
        p.add_argument("--engine", default="vllm", help="serving-engine profile (see `pdplan list engines`)")
        add_preemption_arg(p)
    p.add_argument(
        "--arrival-cv",
        help="coefficient of variation of inter-arrival gaps (default: 1 = Poisson, or the trace's)",
    )
    add_profile_dir(p)


def scenario_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    lengths = lengths_workload(args)  # first: an --osl beside --workload/--trace is an error
    trace = load_trace(args.trace) if args.trace else None
    workload = Workload.from_trace(trace) if trace is not None else lengths or args.workload
    if args.arrival_cv is not None:
        cv = _float(args.arrival_cv, "arrival_cv", "a coefficient of variation in (0, 100] (1 = Poisson)")
        if not 0 < cv <= 100:
            raise InputError(
                "arrival_cv", args.arrival_cv, "a coefficient of variation in (0, 100] (1 = Poisson)"
            )
        arrival_scv = cv * cv
    elif trace is not None and np.isfinite(trace.interarrival_scv):
        arrival_scv = max(trace.interarrival_scv, 1e-3)  # the trace's own burstiness
    else:
        arrival_scv = 1.0
    return {
        "workload": workload,
        "ttft_slo_s": parse_quantity(args.ttft_slo, Kind.TIME, "ttft_slo", bare_unit="second"),
        "tpot_slo_s": parse_quantity(args.tpot_slo, Kind.TIME, "tpot_slo", bare_unit="second"),
        "percentile": _float(args.percentile, "percentile", "a number in (0, 100)"),
        "attainment": _float(args.attainment, "attainment", "a fraction in (0, 1]"),
        "link": _name(args.link, "--link"),
        "decode_gpu": _name(args.decode_gpu, "--decode-gpu"),
        "node": _name(args.node, "--node"),
        "dtype": args.dtype,
        "kv_dtype": _name(args.kv_dtype, "--kv-dtype"),
        "profile_dirs": args.profile_dir or None,
        "arrival_scv": arrival_scv,
        "engine": engine_with_preemption(args),
    }


def register(sub: Any) -> None:
    p = sub.add_parser("plan", help=COMMANDS["plan"][1])
    add_scenario_args(p)
    add_plan_args(p)
    p.add_argument(
        "--robustness",
        nargs="?",
        const="128",
        default=None,
        metavar="DRAWS",
        help="also sample the verdict over the model's measured error (default 128 worlds)",
    )
    add_speculation_args(p, search=True)
    add_concurrency_args(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def add_plan_args(p: argparse.ArgumentParser) -> None:
    """The plan's size and search options (shared with ``pdplan deploy``)."""
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument("--gpus", type=str, help="GPU budget: maximise goodput with at most this many GPUs")
    size.add_argument(
        "--target-rate", type=str, help="request rate (req/s) to serve with the fewest GPUs/cost"
    )
    p.add_argument("--tp", default="1,2,4,8", help="TP degrees to consider (default 1,2,4,8)")
    p.add_argument("--ep", help="EP degrees to consider (default: 1 and TP x DP, i.e. TP, TEP, DEP)")
    p.add_argument(
        "--dp-attention", help="attention-DP degrees to consider (default for MoE: DEP 2..64 with TP1)"
    )
    p.add_argument("--pp", default="1", help="pipeline-parallel degrees to consider (default 1)")
    p.add_argument("--prefill-parallelism", help='fixed prefill-pool layout, e.g. "tep=8" or "tp=8"')
    p.add_argument("--decode-parallelism", help='fixed decode-pool layout, e.g. "dep=32"')
    p.add_argument("--chunks", default="256,512,1024,2048,4096", help="chunked-prefill token budgets")
    p.add_argument("--objective", default="gpus", choices=["gpus", "cost"], help="target-rate mode objective")
    p.add_argument(
        "--margin", default="0.1", help="gain disaggregation must show to be recommended (0.1 = 10%%)"
    )
    p.add_argument("--max-gpus", default="256", help="largest pool search in target-rate mode")
    p.add_argument(
        "--whole-request-transfer", action="store_true", help="send KV after prefill, not layer-wise"
    )
    p.add_argument("--no-thresholds", action="store_true", help="skip the flip-threshold searches (faster)")
    p.add_argument(
        "--kv-offload",
        help="KV offload tiers per node and the prefix working set, e.g. 'cpu:1TB,nvme:8TB,working-set:50M'",
    )
    p.add_argument(
        "--top", default="5", help="alternatives listed overall and per style (1 to 50, default 5)"
    )
    add_prefix_args(p)


def _search_rows(searched: Any) -> list[dict[str, Any]]:
    """One row per speculation option: its label, verdict and the recommended goodput."""
    rows = []
    for i, (opt, p) in enumerate(zip(searched.options, searched.plans, strict=True)):
        b = p.best.get(p.verdict)
        rows.append(
            {
                "speculation": "off" if opt is None else opt.label,
                "verdict": p.verdict,
                "goodput": "no configuration"
                if b is None
                else f"{b.goodput_rps:.3g} req/s on {b.n_gpus} GPUs",
                "chosen": i == searched.best,
            }
        )
    return rows


def _whole(text: str | None, field: str) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise InputError(field, text, "a whole number") from None


def plan_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The PlanRequest fields of the parsed ``plan`` options (size, search and scenario)."""
    return dict(
        gpus=_whole(args.gpus, "gpus"),
        target_rate_rps=None
        if args.target_rate is None
        else _float(args.target_rate, "target_rate", "req/s > 0"),
        tp_options=_int_list(args.tp, "tp"),
        ep_options=_int_list(args.ep, "ep") if args.ep is not None else None,
        dp_attention_options=_int_list(args.dp_attention, "dp_attention")
        if args.dp_attention is not None
        else None,
        pp_options=_int_list(args.pp, "pp"),
        prefill_parallelism=_name(args.prefill_parallelism, "--prefill-parallelism"),
        decode_parallelism=_name(args.decode_parallelism, "--decode-parallelism"),
        chunk_options=_int_list(args.chunks, "chunks"),
        objective=args.objective,
        margin=_float(args.margin, "margin", "a fraction in [0, 1)"),
        max_gpus=_whole(args.max_gpus, "max_gpus"),
        layerwise=not args.whole_request_transfer,
        kv_offload=_name(args.kv_offload, "--kv-offload"),
        prefix_hit_rate=prefix_hit_rate(args),
        prefix_routing=args.prefix_routing or "cache-aware",
        **scenario_kwargs(args),
    )


def plan_from_args(args: argparse.Namespace, **overrides: Any) -> Any:
    """The plan of the parsed ``plan`` options (``overrides`` replace scenario fields)."""
    fields = plan_fields(args) | overrides
    return plan(args.model, args.gpu, thresholds=not args.no_thresholds, top=_top(args), **fields)


def _top(args: argparse.Namespace) -> int:
    return _whole(getattr(args, "top", "5"), "top")


def run(args: argparse.Namespace) -> int:
    ks = spec_tokens(args)
    fields = plan_fields(args)
    load = concurrency_from_args(args)
    if load is not None:  # fixed concurrency (closed loop): model.planner.concurrency
        if len(ks) > 1:
            raise InputError("--spec-tokens", args.spec_tokens, "one value with --concurrency")
        return run_plan(args, fields | {"speculation": speculation_for(args, ks[0])}, load)
    searched = None
    if args.spec is not None and len(ks) > 1:
        from model.planner.speculative import search_speculation

        searched = search_speculation(
            plan_request(args.model, args.gpu, **fields),
            [speculation_for(args, k) for k in ks],
            thresholds=not args.no_thresholds,
            top=_top(args),
        )
        result = searched.plan
    else:
        spec = speculation_for(args, ks[0])
        result = plan(
            args.model,
            args.gpu,
            thresholds=not args.no_thresholds,
            top=_top(args),
            speculation=spec,
            **fields,
        )
    sure = None
    if args.robustness is not None:
        from model.limits import check_int
        from model.planner.robustness import MAX_DRAWS, robustness

        draws = check_int("robustness", _whole(args.robustness, "robustness"), 2, MAX_DRAWS, "worlds to draw")
        sure = robustness(result, draws=draws)
    if args.json:
        out = plan_dict(result)
        if searched is not None:
            out["speculation_search"] = _search_rows(searched)
        if sure is not None:
            out["robustness"] = asdict(sure)
        print_json(out)
        return 0
    print(f"verdict: {result.verdict}")
    if searched is not None:
        for row in _search_rows(searched):
            mark = " (chosen)" if row["chosen"] else ""
            print(f"  speculation {row['speculation']}: verdict {row['verdict']}, {row['goodput']}{mark}")
    if sure is not None:
        print(f"robustness: {sure.summary}")
    if result.tie:
        print(
            f"tie within the {result.inputs.margin:.0%} margin: "
            f"disaggregated {result.gain:+.1%} (needs +{result.inputs.margin:.0%})"
        )
    if result.colocated_note:
        print(result.colocated_note)
    print()
    for r in result.reasons:
        print(f"- {r}")
    if result.flip_thresholds:
        print("\nwhat would work:" if result.verdict == "none" else "\nflip thresholds:")
        for f in result.flip_thresholds:
            print(f"- {f.text}")
    if result.alternatives is not None:
        print_alternatives(result.alternatives)
    return 0


def print_alternatives(alts: Alternatives) -> None:
    """The top-N tables: overall, then per style (ranked by the plan's objective)."""
    header = ("#", "style", "configuration", "GPUs", "goodput", "per GPU", "cost", "per M out tok", "binding")
    groups = [("overall", alts.overall)] + [(s, a) for s, a in alts.by_style.items()]
    for title, rows in groups:
        print(f"\ntop {len(rows)} {title} (ranked by {alts.ranked_by}):")
        print_table(
            [
                (
                    k + 1,
                    a.style,
                    a.label,
                    a.n_gpus,
                    format_rate(a.goodput_rps),
                    format_rate(a.goodput_rps_per_gpu),
                    format_money(a.cost_usd_per_hour, "h"),
                    format_money(a.cost_usd_per_million_output_tokens),
                    a.binding,
                )
                for k, a in enumerate(rows)
            ],
            header,
        )
