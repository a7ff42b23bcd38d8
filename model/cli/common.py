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


def to_jsonable(obj: Any) -> Any:
    """Dataclasses, numpy scalars/arrays and infinities to plain JSON values (inf -> "inf")."""
    import numpy as np

    if hasattr(obj, "__dataclass_fields__"):
        return {k: to_jsonable(getattr(obj, k)) for k in obj.__dataclass_fields__}
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
