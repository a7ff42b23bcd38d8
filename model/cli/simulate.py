"""``pdplan simulate``: replay one arrival sequence through a colocated or disaggregated configuration."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from model.cli import COMMANDS
from model.cli.common import (
    add_profile_dir,
    add_workload_source,
    lengths_workload,
    print_json,
    print_table,
    to_jsonable,
)
from model.cli.concurrency import add_concurrency_args, concurrency_from_args, simulation_json
from model.cli.plan import add_preemption_arg, engine_with_preemption
from model.cli.prefix import add_prefix_args, prefix_hit_rate
from model.cli.speculation import add_speculation_args, spec_tokens, speculation_for
from model.errors import InputError
from model.hardware.catalog import get_engine, get_gpu
from model.hardware.engines import Engine
from model.hardware.kv_offload import resolve_kv_offload
from model.limits import MAX_SIM_REQUESTS
from model.serving.registry import get_style, style_names, styles
from model.serving.style import CliFlag
from model.sim.prefix_cache import session_or_poisson_requests, with_hit_rate
from model.sim.simulate import SimOptions, SimResult, simulate, trace_requests
from model.sim.tiers import PrefixReuse
from model.units import Kind, format_rate, format_time, parse_quantity
from model.workload.presets import get_workload
from model.workload.slo import SLO
from model.workload.traces import load_trace

# Largest run the CLI accepts (model.limits.MAX_SIM_REQUESTS: ~10 s per 100k requests, bounded memory).
MAX_REQUESTS = MAX_SIM_REQUESTS

DEFAULT_REQUESTS = 2000
__all__ = ["DEFAULT_REQUESTS", "MAX_REQUESTS", "register", "run"]


def _style_flags() -> dict[str, tuple[CliFlag, list[str]]]:
    """Every registered style's flags (the first declaration of a flag wins) and who reads each."""
    out: dict[str, tuple[CliFlag, list[str]]] = {}
    for style in styles():
        for f in style.cli_flags:
            out.setdefault(f.flag, (f, []))[1].append(style.name)
    return out


def register(sub: Any) -> None:
    p = sub.add_parser("simulate", help=COMMANDS["simulate"][1])
    p.add_argument("--model", required=True, help="model name (see `pdplan list models`)")
    p.add_argument(
        "--gpu", required=True, help="GPU name (colocated, and the prefill pool when disaggregated)"
    )
    p.add_argument(
        "--style",
        "--architecture",
        dest="style",
        required=True,
        choices=style_names(),
        help="serving style (--architecture is the former name of this flag)",
    )
    for flag, (f, owners) in _style_flags().items():
        used_by = "" if len(owners) == len(style_names()) else f" [{', '.join(owners)}]"
        if f.switch:
            p.add_argument(flag, action="store_true", default=None, help=f.help + used_by)
        else:
            p.add_argument(flag, type=f.type, default=None, help=f.help + used_by)
    p.add_argument("--engine", default="vllm", help="serving-engine profile (see `pdplan list engines`)")
    add_preemption_arg(p)
    add_speculation_args(p)
    add_prefix_args(p)
    p.add_argument(
        "--kv-offload",
        default=None,
        help="KV offload tiers per node and the prefix working set, e.g. 'cpu:1TB,nvme:8TB,working-set:50M' "
        "(reused prefixes are found in HBM or a tier and reloaded from it; with --prefix-hit-rate, "
        "sessions or a trace's block hashes)",
    )
    add_workload_source(
        p,
        "workload preset (chat, code, summarization, rag, short, mixed, multiturn-chat, agentic)",
        "trace file (Azure, BurstGPT CSV or Mooncake JSONL)",
    )
    p.add_argument(
        "--rate",
        default=None,
        help="arrival rate, req/s (required with --workload or --isl/--isl-dist; rescales a --trace in time)",
    )
    p.add_argument(
        "--requests",
        type=int,
        default=None,
        help=f"number of requests (default {DEFAULT_REQUESTS}; with --trace: the whole trace)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (workload lengths and Poisson arrivals)")
    p.add_argument("--ttft-slo", default=None, help="TTFT target, e.g. 500ms (bare number = seconds)")
    p.add_argument("--tpot-slo", default=None, help="TPOT target, e.g. 50ms (bare number = seconds)")
    p.add_argument("--dtype", default="bf16", help="weight format (default bf16)")
    p.add_argument("--kv-dtype", default=None, help="KV-cache format (default: from the weight format)")
    p.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="first N requests left out of the statistics (default 0; 2 x users with --concurrency)",
    )
    add_concurrency_args(p)
    p.add_argument("--json", action="store_true", help="machine-readable summary")
    p.add_argument("--per-request", metavar="FILE", default=None, help="write per-request records to a CSV")
    p.add_argument("--progress", action="store_true", help="progress bar on stderr even when it is not a TTY")
    add_profile_dir(p)
    p.set_defaults(handler=run)


def _progress_bar() -> Any:
    def show(done: int, total: int) -> None:
        width = 30
        filled = width * done // total
        sys.stderr.write(f"\rsimulating [{'#' * filled}{'.' * (width - filled)}] {done}/{total} arrivals")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def _config(args: argparse.Namespace, engine: Engine) -> Any:
    """The chosen style's configuration from its flags; a flag of another style is an error.

    A style's ``--chunk`` left unset takes the engine profile's ``chunk_tokens``."""
    style = get_style(args.style)
    own = {f.flag for f in style.cli_flags}
    for flag, (f, owners) in _style_flags().items():
        if flag not in own and getattr(args, f.dest, None) is not None:
            raise InputError(flag, getattr(args, f.dest), f"only with --style {' or '.join(owners)}")
    values = {f.dest: getattr(args, f.dest, None) for f in style.cli_flags}
    if "chunk" in values and values["chunk"] is None:
        values["chunk"] = engine.chunk_tokens
    dirs = args.profile_dir or None
    blank = [
        (f"--{k.replace('_', '-')}", v) for k, v in vars(args).items() if isinstance(v, str) and not v.strip()
    ]
    if blank:
        raise InputError(blank[0][0], blank[0][1], "a non-empty name (or leave the option out)")
    return style.config_from_cli(values, get_gpu(args.gpu, dirs), dirs)


def _slo(args: argparse.Namespace) -> SLO | None:
    if args.ttft_slo is None and args.tpot_slo is None:
        return None
    if args.ttft_slo is None or args.tpot_slo is None:
        raise InputError("--ttft-slo/--tpot-slo", None, "both targets, or neither")
    return SLO(
        parse_quantity(args.ttft_slo, Kind.TIME, "--ttft-slo", bare_unit="second"),
        parse_quantity(args.tpot_slo, Kind.TIME, "--tpot-slo", bare_unit="second"),
    )


def _print(res: SimResult) -> None:
    s = res.summary
    print(f"{s.architecture}: {s.config}")
    print(
        f"  requests {s.requests} ({s.measured} measured, {s.completed} completed, {s.rejected} rejected); "
        f"offered {format_rate(s.offered_rate_rps)}, served {format_rate(s.throughput_rps)}, "
        f"{s.output_tokens_per_s:,.0f} output tokens/s over {s.makespan_s:.4g} s"
    )
    if not s.stable:
        print(f"  UNSTABLE: {s.stop_reason}")
    rows = [
        ["TTFT", *(format_time(v) for v in s.ttft_s)],
        ["TPOT", *(format_time(v) for v in s.tpot_s)],
        ["max ITL", *(format_time(v) for v in s.max_itl_s)],
    ]
    print_table(rows, ["", "p50", "p90", "p99"])
    print(
        f"  TTFT parts (mean): queue {format_time(s.mean_queue_wait_s)}, "
        f"prefill {format_time(s.mean_prefill_s)}",
        end="",
    )
    if get_style(s.architecture).family == "disaggregated":
        print(
            f", decode admission {format_time(s.mean_decode_admission_wait_s)}, "
            f"exposed transfer {format_time(s.mean_transfer_exposed_s)}; "
            f"link utilisation {s.link_utilisation:.1%}"
        )
    else:
        print()
    for p in s.pools:
        print(
            f"  {p.name} pool: {p.instances} instance(s), utilisation {p.utilisation:.1%}, KV high-water "
            f"{p.kv_high_water_tokens:,} tokens ({p.kv_high_water_fraction:.1%} of {p.kv_capacity_tokens:,})"
        )
    if s.preemptions:
        print(f"  pre-emptions: {s.preemptions} (KV cache full; resumed by the engine's policy)")
    if s.slo is not None:
        verdict = "meets" if s.meets_slo else "misses"
        print(
            f"  SLO TTFT <= {format_time(s.slo.ttft_s)}, TPOT <= {format_time(s.slo.tpot_s)}: attainment "
            f"{s.attainment:.1%} -> {verdict} the target ({s.slo.attainment:.0%} at p{s.slo.percentile:g})"
        )


def _summary_json(res: SimResult) -> dict[str, Any]:
    s = res.summary
    out = to_jsonable(s)
    for key in ("ttft_s", "tpot_s", "max_itl_s"):
        out[key] = dict(zip(("p50", "p90", "p99"), to_jsonable(getattr(s, key)), strict=True))
    out["pools"] = [{**to_jsonable(p), "kv_high_water_fraction": p.kv_high_water_fraction} for p in s.pools]
    if not s.preemptions:  # only runs that pre-empt (model.sim.preemption) report the count
        out.pop("preemptions", None)
    if res.records.prefix_hit_rate > 0:  # measured over the run's prefix caches
        out["prefix_hit_rate"] = res.records.prefix_hit_rate
    return out


def _one_k(args: argparse.Namespace) -> int:
    ks = spec_tokens(args)
    if len(ks) > 1:
        raise InputError("--spec-tokens", args.spec_tokens, "one value (`pdplan plan` searches a list)")
    return ks[0]


def run(args: argparse.Namespace) -> int:
    engine = get_engine(engine_with_preemption(args), args.profile_dir or None)
    config = _config(args, engine)
    slo = _slo(args)
    rate = (
        None if args.rate is None else parse_quantity(args.rate, Kind.RATE, "--rate", bare_unit="1 / second")
    )
    if rate is not None and not rate > 0:
        raise InputError("--rate", args.rate, "a rate > 0 req/s")
    if args.requests is not None and not 2 <= args.requests <= MAX_REQUESTS:
        raise InputError(
            "--requests",
            args.requests,
            f"a whole number in [2, {MAX_REQUESTS}] (two arrivals give a rate; the cap bounds run time)",
        )
    if args.warmup is not None and args.warmup < 0:
        raise InputError("--warmup", args.warmup, "a whole number >= 0")
    if args.per_request is not None and not args.per_request.strip():
        raise InputError("--per-request", args.per_request, "a CSV file path")
    if args.seed < 0:
        raise InputError("--seed", args.seed, "a whole number >= 0")
    lengths = lengths_workload(args)  # first: an --osl beside --workload/--trace is an error
    load = concurrency_from_args(args)
    if load is not None:
        if rate is not None:
            raise InputError("--rate", args.rate, "no rate with --concurrency (the users set the rate)")
        return _run_closed(args, config, slo, engine, lengths, load)
    hit = prefix_hit_rate(args)
    if args.trace:
        requests = with_hit_rate(trace_requests(load_trace(args.trace), n=args.requests, rate_rps=rate), hit)
    else:
        if rate is None:
            raise InputError("--rate", None, "an arrival rate in req/s (required with --workload or --isl)")
        wl = get_workload(args.workload) if lengths is None else lengths
        if hit is not None:
            wl = dataclasses.replace(wl, prefix_cache_hit_rate=hit, sessions=None)
        requests = session_or_poisson_requests(wl, rate, args.requests or DEFAULT_REQUESTS, seed=args.seed)
    show = args.progress or sys.stderr.isatty()
    options = SimOptions(
        warmup_requests=args.warmup or 0,
        progress=_progress_bar() if show else None,
        prefix_routing=args.prefix_routing or "cache-aware",
    )
    res = simulate(
        config,
        args.model,
        requests,
        **_run_options(args, config, slo, engine, options),
    )
    if args.per_request:
        res.records.write_csv(args.per_request)
    if args.json:
        print_json(_summary_json(res))
    else:
        _print(res)
    return 0


def _prefix_reuse(args: argparse.Namespace, config: Any, hit: float | None) -> PrefixReuse | None:
    """``--kv-offload``: the tiers (parsed against the node of the configuration's first GPU) where
    reused prefixes are found; the run's cached tokens (the requests' or the LRU caches') say how
    much of each prompt is reused, else ``--prefix-hit-rate`` does."""
    if args.kv_offload is None:
        return None
    gpu = getattr(config, "gpu", None) or config.prefill_gpu
    tiers = resolve_kv_offload(args.kv_offload.strip(), None, gpu.name)
    return PrefixReuse(hit if hit is not None else 0.0, tiers, seed=args.seed)


def _run_options(
    args: argparse.Namespace, config: Any, slo: SLO | None, engine: Engine, options: SimOptions
) -> dict:
    """The keyword arguments an open- and a closed-loop run share (targets, formats, engine, options,
    speculative decoding, KV offload tiers)."""
    return {
        "prefix": _prefix_reuse(args, config, prefix_hit_rate(args)),
        "slo": slo,
        "weight_dtype": args.dtype,
        "kv_dtype": args.kv_dtype,
        "engine": engine,
        "options": options,
        "speculation": speculation_for(args, _one_k(args)),
    }


def _run_closed(
    args: argparse.Namespace, config: Any, slo: SLO | None, engine: Engine, lengths: Any, load: Any
) -> int:
    """``--concurrency N``: the closed-loop run (model.sim.closed_loop); lengths from the workload,
    the --isl/--osl lengths or the trace's length distribution."""
    from model.sim.closed_loop import default_requests, default_warmup, simulate_concurrency
    from model.workload.presets import Workload

    workload = Workload.from_trace(load_trace(args.trace)) if args.trace else lengths or args.workload
    show = args.progress or sys.stderr.isatty()
    n = args.requests if args.requests is not None else default_requests(load)
    warmup = args.warmup if args.warmup is not None else default_warmup(load, n)
    options = SimOptions(warmup_requests=warmup, progress=_progress_bar() if show else None)
    res = simulate_concurrency(
        config,
        args.model,
        workload,
        load,
        requests=n,
        seed=args.seed,
        **_run_options(args, config, slo, engine, options),
    )
    if args.per_request:
        res.records.write_csv(args.per_request)
    if args.json:
        print_json(_summary_json(res) | simulation_json(res))
        return 0
    _print(res)
    print(
        f"  closed loop, {load.label()}: {format_rate(res.throughput_rps)} over the {res.window_s:.4g} s "
        f"with all users active ({res.output_tokens_per_s:,.0f} output tokens/s), mean response "
        f"{format_time(res.response_mean_s)}"
    )
    return 0
