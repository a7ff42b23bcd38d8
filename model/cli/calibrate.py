"""``pdplan calibrate``: fit a GPU profile's efficiencies to your measurements and write it as a profile."""

from __future__ import annotations

import argparse
import math
from typing import Any

from model.calibrate.fit import DEFAULT_FIT, FITTABLE, calibrate
from model.calibrate.load import load_measurements
from model.calibrate.measurements import FORMATS, RowDefaults
from model.calibrate.profile_toml import write_profiles
from model.calibrate.results import CalibrationResult, GroupFit
from model.cli import COMMANDS
from model.cli.common import add_profile_dir, print_json, print_table


def register(sub: Any) -> None:
    p = sub.add_parser("calibrate", help=COMMANDS["calibrate"][1])
    p.add_argument(
        "--measurements",
        required=True,
        action="append",
        metavar="FILE",
        help="measurement file: CSV or vLLM serving-benchmark result JSON (repeatable)",
    )
    p.add_argument(
        "--format", choices=FORMATS, default=None, help="file format (default: from the extension)"
    )
    p.add_argument("--model", default=None, help="model, for rows/files that do not name one")
    p.add_argument("--gpu", default=None, help="GPU profile name, for rows/files that do not name one")
    p.add_argument("--tp", type=int, default=None, help="tensor-parallel degree (default 1)")
    p.add_argument("--pp", type=int, default=None, help="pipeline-parallel degree (default 1)")
    p.add_argument("--dtype", default=None, help="weight format (default bf16)")
    p.add_argument("--kv-dtype", default=None, help="KV-cache format (default: from the weight format)")
    p.add_argument(
        "--engine", default=None, help="engine label, e.g. vllm-0.8 (default: vllm for JSON, custom for CSV)"
    )
    p.add_argument(
        "--out-dir", required=True, metavar="DIR", help="write DIR/gpus/<gpu>-calibrated-<engine>.toml"
    )
    p.add_argument(
        "--fit",
        default=",".join(DEFAULT_FIT),
        help=f"comma-separated parameters to fit, from {', '.join(FITTABLE)} (default: the first three)",
    )
    p.add_argument(
        "--fit-comm", action="store_true", help="also fit the TP link efficiency (rows with tp > 1)"
    )
    p.add_argument(
        "--max-ttft-utilisation",
        type=float,
        default=0.5,
        metavar="X",
        help="use an open-loop TTFT only when request_rate x TTFT <= X (default 0.5)",
    )
    p.add_argument("--force", action="store_true", help="replace calibrated profiles already in --out-dir")
    p.add_argument("--no-loo", action="store_true", help="skip the leave-one-out refits")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_profile_dir(p)
    p.set_defaults(handler=run)


def _pct(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{x * 100:.1f}%"


def _val(name: str, x: float) -> str:
    if not math.isfinite(x):
        return "-"
    if name in ("kernel_s", "per_sequence_s"):
        return f"{x * 1e6:.2f} us"
    if name == "decode_attention_fixed_tokens":
        return f"{x:.1f} tokens"
    return f"{x * 1e3:.3f} ms" if name in ("step_overhead_s", "request_s") else f"{x:.3f}"


def _print_group(g: GroupFit, path: str) -> None:
    print(f"{g.gpu} / engine {g.engine}: {g.n_rows} rows from {', '.join(g.files) or 'measurements'}")
    print(f"  wrote {path}")
    print()
    print_table(
        [
            (
                p.name,
                _val(p.name, p.base),
                _val(p.name, p.value) if p.fitted else "(kept)",
                _val(p.name, p.std_error) if p.fitted else "",
                "at bound" if p.at_bound else "",
            )
            for p in g.parameters
        ],
        ("parameter", "base", "fitted", "+- std err", ""),
    )
    print()
    print_table(
        [
            (e.metric, e.n, _pct(e.rmse_before), _pct(e.rmse_after), _pct(e.rmse_loo), _pct(e.mape_after))
            for e in g.errors
        ],
        ("metric", "n", "RMSE before", "RMSE after", "RMSE LOO", "MAPE after"),
    )
    for x in g.excluded:
        print(f"  not used: {x.source} {x.metric}: {x.reason}")
    for w in g.warnings:
        print(f"  warning: {w}")
    print()


def run(args: argparse.Namespace) -> int:
    defaults = RowDefaults(
        model=args.model,
        gpu=args.gpu,
        tp=args.tp,
        pp=args.pp,
        dtype=args.dtype,
        kv_dtype=args.kv_dtype,
        engine=args.engine,
    )
    rows = []
    for f in args.measurements:
        rows += load_measurements(f, args.format, defaults=defaults)
    fit = tuple(s.strip() for s in args.fit.split(",") if s.strip())
    result: CalibrationResult = calibrate(
        rows,
        profile_dirs=args.profile_dir or None,
        fit=fit,
        fit_comm=args.fit_comm,
        max_ttft_utilisation=args.max_ttft_utilisation,
        loo=not args.no_loo,
    )
    paths = write_profiles(result, args.out_dir, force=args.force)
    if args.json:
        out = result.to_dict()
        for g, path in zip(out["groups"], paths, strict=True):
            g["profile_path"] = str(path)
        print_json(out)
        return 0
    for g, path in zip(result.groups, paths, strict=True):
        _print_group(g, str(path))
    names = ", ".join(g.profile_name for g in result.groups)
    print(
        f"Use it: pdplan estimate --profile-dir {args.out_dir} --gpu {result.groups[0].profile_name} ..."
        f"  ({names})"
    )
    return 0
