"""The ``pdplan`` command line: a thin front end over the model package (no modelling here).

Each subcommand lives in its own module with ``register(subparsers)``. The error contract
(docs/reliability.md): every failure is exactly one line on stderr and exit code 2, never a
traceback: bad input (the project's errors, OSError), usage errors from argparse (with a pointer
to ``--help``) and, as a last resort, any unexpected exception ("internal error: ...; please
report"). Echoed input is cut to :data:`model.errors.MAX_ECHO_CHARS` characters.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from model.errors import MAX_ECHO_CHARS, PdplanError, short

# Subcommand modules, in the order they appear in `pdplan --help`.
COMMAND_MODULES = ("list_show", "estimate", "plan", "simulate", "calibrate")

EXIT_ERROR = 2
"""Exit code of every failure: bad input, usage errors and internal errors alike."""


# A quoted value in an argparse message longer than the echo limit, e.g. invalid int value: 'xxx...'.
_LONG_QUOTE = re.compile("'([^']{" + str(MAX_ECHO_CHARS) + "})[^']+'")


class UsageError(Exception):
    """argparse found bad command-line syntax; carries the one-line message and the program name."""

    def __init__(self, prog: str, message: str) -> None:
        self.prog = prog
        super().__init__(message)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors raise :class:`UsageError` instead of printing usage."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, _LONG_QUOTE.sub(lambda m: f"'{m.group(1)}...'", message))


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="pdplan",
        description="Capacity planning for LLM serving: colocated vs disaggregated prefill/decode.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"model.cli.{name}").register(sub)
    return parser


def _one_line(text: object) -> str:
    """The message on one line, echoed input already cut by the error types; overall cap 400 chars."""
    line = " ".join(str(text).split())
    return line if len(line) <= 400 else line[:400] + "..."


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pdplan`` console script; returns the process exit code."""
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except UsageError as err:
            msg = f"{err.prog}: usage error: {err} (see `{err.prog} --help`)"
            print(_one_line(msg), file=sys.stderr)
            return EXIT_ERROR
        except SystemExit as exc:  # --help / --version printed and asked to exit
            return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_ERROR
        return int(args.handler(args) or 0)
    except PdplanError as err:
        print(_one_line(f"pdplan: error: {err}"), file=sys.stderr)
    except OSError as err:
        name = f" {short(err.filename)!r}" if err.filename else ""
        print(_one_line(f"pdplan: error:{name} {err.strerror or err}"), file=sys.stderr)
    except KeyboardInterrupt:
        print("pdplan: error: interrupted", file=sys.stderr)
    except Exception as err:
        print(
            _one_line(f"pdplan: internal error: {type(err).__name__}: {short(str(err))}; please report"),
            file=sys.stderr,
        )
    return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
