"""Helpers shared by CLI subcommands: output, tables and common options."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any


def _directory(text: str) -> str:
    """A ``--profile-dir`` value: blank is an error (it would otherwise mean the current directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a directory path, got an empty string")
    return text


def add_profile_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile-dir",
        action="append",
        default=[],
        type=_directory,
        metavar="DIR",
        help="extra directory of GPU/link/node .toml profiles (repeatable; overrides built-in names)",
    )


def add_workload_source(parser: argparse.ArgumentParser, workload_help: str, trace_help: str) -> None:
    """The request-length source: a preset, a trace, or plain lengths (``--isl``/``--isl-dist`` with
    ``--osl``/``--osl-dist``); exactly one source, checked by argparse and :func:`lengths_workload`."""
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--workload", help=workload_help)
    src.add_argument("--trace", help=trace_help)
    src.add_argument("--isl", metavar="N", help="fixed prompt length in tokens (with --osl or --osl-dist)")
    src.add_argument(
        "--isl-dist",
        metavar="SPEC",
        help="prompt-length distribution: fixed:N, lognormal:mean=M,cv=C or uniform:low=A,high=B",
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--osl", metavar="N", help="fixed output length in tokens (with --isl or --isl-dist)")
    out.add_argument("--osl-dist", metavar="SPEC", help="output-length distribution (forms as --isl-dist)")


def lengths_workload(args: argparse.Namespace) -> Any:
    """The Workload of ``--isl/--isl-dist`` + ``--osl/--osl-dist``, or None when neither is given."""
    from model.errors import InputError
    from model.workload.lengths import Fixed
    from model.workload.plain import parse_length_spec, parse_tokens, workload_from_lengths

    has_isl = args.isl is not None or args.isl_dist is not None
    has_osl = args.osl is not None or args.osl_dist is not None
    if not has_isl and not has_osl:
        return None
    if not has_isl:
        flag = "--osl" if args.osl is not None else "--osl-dist"
        raise InputError(
            flag, args.osl or args.osl_dist, "only with --isl or --isl-dist (not with --workload/--trace)"
        )
    if not has_osl:
        raise InputError("--osl/--osl-dist", None, "an output length with --isl/--isl-dist, e.g. --osl 500")

    def side(fixed: str | None, spec: str | None, flag: str) -> tuple[Any, str]:
        if fixed is not None:
            n = parse_tokens(fixed, flag)
            return Fixed(n), str(n)
        return parse_length_spec(spec or "", f"{flag}-dist"), (spec or "").strip().lower()

    (isl, isl_text), (osl, osl_text) = (
        side(args.isl, args.isl_dist, "--isl"),
        side(args.osl, args.osl_dist, "--osl"),
    )
    return workload_from_lengths(isl_dist=isl, osl_dist=osl, name=f"isl={isl_text}; osl={osl_text}")


def to_jsonable(obj: Any) -> Any:
    """Dataclasses, numpy scalars/arrays and infinities to plain JSON values (inf -> "inf")."""
    import numpy as np

    if hasattr(obj, "__dataclass_fields__"):  # fields marked metadata={"json": False} are internal
        fields = obj.__dataclass_fields__
        return {k: to_jsonable(getattr(obj, k)) for k, f in fields.items() if f.metadata.get("json", True)}
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return "inf" if obj > 0 else ("-inf" if obj < 0 else None)
    return obj


def print_json(obj: Any) -> None:
    print(json.dumps(to_jsonable(obj), indent=2, allow_nan=False))


def print_table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> None:
    """A plain fixed-width table for terminals."""
    cells = [[str(h) for h in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))
