"""The ``pdplan`` command line: a thin front end over the model package (no modelling here).

Each subcommand lives in its own module with ``register(subparsers)``; errors from bad input are
printed as one line on stderr with exit code 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from model.errors import PdplanError

# Subcommand modules, in the order they appear in `pdplan --help`.
COMMAND_MODULES = ("list_show", "estimate", "plan", "simulate", "calibrate")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pdplan",
        description="Capacity planning for LLM serving: colocated vs disaggregated prefill/decode.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"model.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pdplan`` console script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except PdplanError as err:
        print(f"pdplan: error: {err}", file=sys.stderr)
        return 2
    except (OSError, KeyboardInterrupt) as err:
        print(f"pdplan: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
