"""``pdplan simulate``: replay one arrival sequence through a colocated or disaggregated configuration."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from model.cli.common import add_profile_dir, print_json, print_table, to_jsonable
from model.errors import InputError
from model.hardware.profiles import get_gpu, get_link
from model.limits import MAX_SIM_REQUESTS
from model.serving.configs import ARCHITECTURES, ColocatedConfig, DisaggregatedConfig
from model.sim.simulate import SimOptions, SimResult, poisson_requests, simulate, trace_requests
from model.units import Kind, parse_quantity
from model.workload.slo import SLO
from model.workload.traces import load_trace

# Largest run the CLI accepts (model.limits.MAX_SIM_REQUESTS: ~10 s per 100k requests, bounded memory).
MAX_REQUESTS = MAX_SIM_REQUESTS

DEFAULT_REQUESTS = 2000
DEFAULT_CHUNK_TOKENS = (
    512  # Sarathi-Serve's chunk size for its headline results (Agrawal et al. 2024, sec. 5)
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "simulate", help="discrete-event replay of a workload or trace through one configuration"
    )
    p.add_argument("--model", required=True, help="model name (see `pdplan list models`)")
    p.add_argument(
        "--gpu", required=True, help="GPU name (colocated, and the prefill pool when disaggregated)"
    )
    p.add_argument("--architecture", required=True, choices=ARCHITECTURES)
    p.add_argument("--replicas", type=int, default=None, help="colocated replicas (default 1)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree per instance (default 1)")
    p.add_argument(
        "--chunk",
        type=int,
        default=None,
        help=f"chunked-prefill token budget (colocated-chunked; default {DEFAULT_CHUNK_TOKENS})",
    )
    p.add_argument("--prefill", type=int, default=None, help="prefill instances (disaggregated; default 1)")
    p.add_argument("--prefill-tp", type=int, default=None, help="prefill TP (default --tp)")
    p.add_argument("--decode", type=int, default=None, help="decode instances (disaggregated; default 1)")
    p.add_argument("--decode-tp", type=int, default=None, help="decode TP (default --tp)")
    p.add_argument("--decode-gpu", default=None, help="decode GPU (default --gpu)")
    p.add_argument("--link", default=None, help="KV link between the pools (disaggregated; required)")
    p.add_argument("--no-layerwise", action="store_true", help="send the KV after the prefill, not per layer")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--workload", help="workload preset (chat, code, summarization, rag, short, mixed)")
    src.add_argument("--trace", help="trace file (Azure, BurstGPT CSV or Mooncake JSONL)")
    p.add_argument(
        "--rate",
        default=None,
        help="arrival rate, req/s (required with --workload; rescales a --trace in time)",
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
    p.add_argument("--warmup", type=int, default=0, help="first N requests left out of the statistics")
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


def _config(args: argparse.Namespace) -> ColocatedConfig | DisaggregatedConfig:
    dirs = args.profile_dir or None
    for flag, value in (
        ("--decode-gpu", args.decode_gpu),
        ("--kv-dtype", args.kv_dtype),
        ("--link", args.link),
    ):
        if value is not None and not value.strip():
            raise InputError(flag, value, "a non-empty name (or leave the option out)")
    gpu = get_gpu(args.gpu, dirs)
    if args.architecture == "disaggregated":
        for flag, value in (("--chunk", args.chunk), ("--replicas", args.replicas)):
            if value is not None:
                raise InputError(flag, value, "only with a colocated architecture (use --prefill/--decode)")
        if args.link is None:
            raise InputError("--link", None, "a link name for the KV transfer (see `pdplan list links`)")
        return DisaggregatedConfig(
            gpu,
            args.tp if args.prefill_tp is None else args.prefill_tp,
            1 if args.prefill is None else args.prefill,
            get_gpu(args.decode_gpu, dirs) if args.decode_gpu else gpu,
            args.tp if args.decode_tp is None else args.decode_tp,
            1 if args.decode is None else args.decode,
            get_link(args.link, dirs),
            layerwise=not args.no_layerwise,
        )
    for flag, value in (
        ("--prefill", args.prefill),
        ("--decode", args.decode),
        ("--prefill-tp", args.prefill_tp),
        ("--decode-tp", args.decode_tp),
        ("--link", args.link),
    ):
        if value is not None:
            raise InputError(flag, value, "only with --architecture disaggregated")
    chunk = None
    if args.architecture == "colocated-chunked":
        chunk = args.chunk if args.chunk is not None else DEFAULT_CHUNK_TOKENS
    elif args.chunk is not None:
        raise InputError("--chunk", args.chunk, "only with --architecture colocated-chunked")
    return ColocatedConfig(gpu, args.tp, 1 if args.replicas is None else args.replicas, chunk)


def _slo(args: argparse.Namespace) -> SLO | None:
    if args.ttft_slo is None and args.tpot_slo is None:
        return None
    if args.ttft_slo is None or args.tpot_slo is None:
        raise InputError("--ttft-slo/--tpot-slo", None, "both targets, or neither")
    return SLO(
        parse_quantity(args.ttft_slo, Kind.TIME, "--ttft-slo", bare_unit="second"),
        parse_quantity(args.tpot_slo, Kind.TIME, "--tpot-slo", bare_unit="second"),
    )


def _ms(x: float) -> str:
    return f"{x * 1e3:.1f}"


def _print(res: SimResult) -> None:
    s = res.summary
    print(f"{s.architecture}: {s.config}")
    print(
        f"  requests {s.requests} ({s.measured} measured, {s.completed} completed, {s.rejected} rejected); "
        f"offered {s.offered_rate_rps:.3g} req/s, served {s.throughput_rps:.3g} req/s, "
        f"{s.output_tokens_per_s:,.0f} output tokens/s over {s.makespan_s:.4g} s"
    )
    if not s.stable:
        print(f"  UNSTABLE: {s.stop_reason}")
    rows = [
        ["TTFT", *(_ms(v) for v in s.ttft_s)],
        ["TPOT", *(_ms(v) for v in s.tpot_s)],
        ["max ITL", *(_ms(v) for v in s.max_itl_s)],
    ]
    print_table(rows, ["ms", "p50", "p90", "p99"])
    print(
        f"  TTFT parts (mean): queue {_ms(s.mean_queue_wait_s)} ms, prefill {_ms(s.mean_prefill_s)} ms",
        end="",
    )
    if s.architecture == "disaggregated":
        print(
            f", decode admission {_ms(s.mean_decode_admission_wait_s)} ms, "
            f"exposed transfer {_ms(s.mean_transfer_exposed_s)} ms; link utilisation {s.link_utilisation:.1%}"
        )
    else:
        print()
    for p in s.pools:
        print(
            f"  {p.name} pool: {p.instances} instance(s), utilisation {p.utilisation:.1%}, KV high-water "
            f"{p.kv_high_water_tokens:,} tokens ({p.kv_high_water_fraction:.1%} of {p.kv_capacity_tokens:,})"
        )
    if s.slo is not None:
        verdict = "meets" if s.meets_slo else "misses"
        print(
            f"  SLO TTFT <= {_ms(s.slo.ttft_s)} ms, TPOT <= {_ms(s.slo.tpot_s)} ms: attainment "
            f"{s.attainment:.1%} -> {verdict} the target ({s.slo.attainment:.0%} at p{s.slo.percentile:g})"
        )


def _summary_json(res: SimResult) -> dict[str, Any]:
    s = res.summary
    out = to_jsonable(s)
    for key in ("ttft_s", "tpot_s", "max_itl_s"):
        out[key] = dict(zip(("p50", "p90", "p99"), to_jsonable(getattr(s, key)), strict=True))
    out["pools"] = [{**to_jsonable(p), "kv_high_water_fraction": p.kv_high_water_fraction} for p in s.pools]
    return out


def run(args: argparse.Namespace) -> int:
    config = _config(args)
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
    if args.warmup < 0:
        raise InputError("--warmup", args.warmup, "a whole number >= 0")
    if args.per_request is not None and not args.per_request.strip():
        raise InputError("--per-request", args.per_request, "a CSV file path")
    if args.seed < 0:
        raise InputError("--seed", args.seed, "a whole number >= 0")
    if args.trace:
        requests = trace_requests(load_trace(args.trace), n=args.requests, rate_rps=rate)
    else:
        if rate is None:
            raise InputError("--rate", None, "an arrival rate in req/s (required with --workload)")
        requests = poisson_requests(args.workload, rate, args.requests or DEFAULT_REQUESTS, seed=args.seed)
    show = args.progress or sys.stderr.isatty()
    options = SimOptions(warmup_requests=args.warmup, progress=_progress_bar() if show else None)
    res = simulate(
        config,
        args.model,
        requests,
        slo=slo,
        weight_dtype=args.dtype,
        kv_dtype=args.kv_dtype,
        options=options,
    )
    if args.per_request:
        res.records.write_csv(args.per_request)
    if args.json:
        print_json(_summary_json(res))
    else:
        _print(res)
    return 0
