"""``pdplan schedule``: pool sizes over a day of traffic, GPU-hours autoscaled vs static for the peak."""

from __future__ import annotations

import argparse
from typing import Any

from model.cli import COMMANDS
from model.cli.common import print_json, print_table
from model.cli.plan import _float, _int_list, _whole, add_scenario_args, scenario_kwargs
from model.errors import InputError
from model.fleet.curve import DiurnalShape, RateCurve, curve_from_trace, diurnal_curve, load_curve_csv
from model.fleet.schedule import ENGINE_START_S, HOLD_S, Schedule, ScheduleOptions, schedule, schedule_rows
from model.units import Kind, parse_quantity
from model.workload.traces import load_trace


def register(sub: Any) -> None:
    p = sub.add_parser("schedule", help=COMMANDS["schedule"][1])
    add_scenario_args(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--curve", metavar="CSV", help="rate curve: CSV with columns time_s,rate_rps")
    src.add_argument("--curve-trace", metavar="TRACE", help="rate curve from a trace's arrival times")
    src.add_argument(
        "--diurnal", metavar="PEAK_RPS", help="the diurnal preset with this peak rate (docs/schedule.md)"
    )
    p.add_argument("--bin", default="60s", help="bin width of --curve-trace (default 60s)")
    p.add_argument(
        "--trough-fraction", default="0.3", help="--diurnal: lowest rate / peak rate (default 0.3)"
    )
    p.add_argument("--resolution", default="60s", help="longest time bin of the schedule (default 60s)")
    p.add_argument(
        "--hold", default=f"{HOLD_S:g}s", help=f"scale-down hold time (default {HOLD_S:g}s, Kubernetes HPA)"
    )
    p.add_argument(
        "--engine-start",
        default=f"{ENGINE_START_S:g}s",
        help=f"engine start-up besides loading weights (default {ENGINE_START_S:g}s)",
    )
    p.add_argument("--reaction", help="override the scaling reaction time (default: computed)")
    p.add_argument("--tp", default="1,2,4,8", help="TP degrees to consider (default 1,2,4,8)")
    p.add_argument("--chunks", default="256,512,1024,2048,4096", help="chunked-prefill token budgets")
    p.add_argument(
        "--objective", default="gpus", choices=["gpus", "cost"], help="what the peak plan minimises"
    )
    p.add_argument("--max-gpus", default="256", help="largest pool search of the peak plan")
    p.add_argument("--json", action="store_true", help="machine-readable output, with every bin")
    p.set_defaults(handler=run)


def _time(text: str, field: str) -> float:
    return parse_quantity(text, Kind.TIME, field, bare_unit="second")


def curve_of(args: argparse.Namespace) -> RateCurve:
    """The rate curve named on the command line."""
    if args.curve:
        return load_curve_csv(args.curve)
    if args.curve_trace:
        return curve_from_trace(load_trace(args.curve_trace), _time(args.bin, "bin"))
    peak = _float(args.diurnal, "diurnal", "a peak request rate > 0 req/s")
    trough = _float(args.trough_fraction, "trough_fraction", "a fraction in [0, 1]")
    return diurnal_curve(peak, DiurnalShape(trough_fraction=trough))


def schedule_dict(result: Schedule) -> dict[str, Any]:
    """The JSON form: summary rows, the style needing the fewest GPU-hours, and every bin."""
    return {
        "curve": {
            "source": result.curve.source,
            "duration_s": result.curve.duration_s,
            "peak_rps": result.curve.peak_rps,
            "mean_rps": result.curve.mean_rps,
        },
        "fewest_gpu_hours": result.fewest_gpu_hours,
        "styles": schedule_rows(result),
        "skipped": result.skipped,
        "bins": {
            "start_s": result.start_s,
            "end_s": result.end_s,
            "rate_rps": result.rate_rps,
            **{
                f"{name}.{pool}": s.provisioned[:, j]
                for name, s in result.styles.items()
                for j, pool in enumerate(s.pools)
            },
            **{f"{name}.n_gpus": s.n_gpus for name, s in result.styles.items()},
        },
    }


def run(args: argparse.Namespace) -> int:
    curve = curve_of(args)
    reaction = None if args.reaction is None else _time(args.reaction, "reaction")
    options = ScheduleOptions(
        resolution_s=_time(args.resolution, "resolution"),
        hold_s=_time(args.hold, "hold"),
        engine_start_s=_time(args.engine_start, "engine_start"),
        reaction_s=reaction,
    )
    result = schedule(
        curve,
        args.model,
        args.gpu,
        options=options,
        tp_options=_int_list(args.tp, "tp"),
        chunk_options=_int_list(args.chunks, "chunks"),
        objective=args.objective,
        max_gpus=_whole(args.max_gpus, "max_gpus"),
        **scenario_kwargs(args),
    )
    if args.json:
        print_json(schedule_dict(result))
        return 0
    if not result.styles:
        raise InputError("curve", f"peak {curve.peak_rps:.3g} req/s", "a peak some style can serve")
    c = result.curve
    print(
        f"curve: {c.source}, {c.duration_s / 3600:.3g} h, peak {c.peak_rps:.3g} req/s, "
        f"mean {c.mean_rps:.3g} req/s; {len(result.rate_rps)} bins"
    )
    rows = [
        (
            r["style"],
            r["peak_config"],
            f"{r['min_gpus_autoscaled']}-{r['peak_gpus_autoscaled']}",
            f"{r['gpu_hours']:.1f}",
            f"{r['static_gpu_hours']:.1f}",
            f"{r['savings_fraction'] if abs(r['savings_fraction']) >= 5e-3 else 0.0:.0%}",
            f"{r['cost_usd']:.0f}",
            f"{r['static_cost_usd']:.0f}",
            f"{r['reaction_s']:.0f}s",
        )
        for r in schedule_rows(result)
    ]
    header = (
        "style",
        "at the peak",
        "GPUs",
        "GPU-h",
        "static GPU-h",
        "saved",
        "USD",
        "static USD",
        "reaction",
    )
    print_table(rows, header)
    for name, why in result.skipped.items():
        print(f"- {name}: not scheduled ({why})")
    print(f"\nfewest GPU-hours over the curve: {result.fewest_gpu_hours}")
    return 0
