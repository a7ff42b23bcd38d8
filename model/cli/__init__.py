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

# Subcommands in the order `pdplan --help` lists them: (module that registers it, one-line help).
# Only the module of the command being run is imported, so `pdplan list gpus` never loads numpy's
# planner stack (start-up figures in docs/architecture.md); the others appear in --help as stubs.
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("list_show", "list built-in (and --profile-dir) GPUs, links, nodes, engines or models"),
    "show": ("list_show", "every field of one profile or model, with its source"),
    "estimate": ("estimate", "roofline estimate of prefill, decode, TPOT and memory fit"),
    "plan": ("plan", "recommend colocated, colocated-chunked or disaggregated serving, and why"),
    "compare": ("compare", "two scenarios side by side: GPUs, goodput, cost, energy and verdict"),
    "deploy": (
        "deploy",
        "plan, then write launch recipes (vLLM, SGLang, TensorRT-LLM, Dynamo, llm-d) with node placement",
    ),
    "frontier": (
        "frontier",
        "output tokens/s per GPU against tokens/s per user, per style (Pareto frontier)",
    ),
    "simulate": ("simulate", "discrete-event replay of a workload or trace through one configuration"),
    "schedule": (
        "schedule",
        "pool sizes over a day of traffic (rate curve) and GPU-hours autoscaled vs static for the peak",
    ),
    "sweep": ("sweep", "evaluate a grid of scenarios (models x GPUs x workloads x SLOs x budgets) to CSV"),
    "calibrate": (
        "calibrate",
        "fit prefill MFU, decode MBU and step overhead to measurements; write a calibrated GPU profile",
    ),
}
COMMAND_MODULES = tuple(dict.fromkeys(module for module, _ in COMMANDS.values()))

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


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with ``argv``, only the module of the command named in it is imported (the
    other commands are help-only stubs), without it every command is registered in full."""
    parser = Parser(
        prog="pdplan",
        description="Capacity planning for LLM serving: colocated vs disaggregated prefill/decode.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    command = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    wanted = (
        {COMMANDS[command][0]} if command in COMMANDS else set(COMMAND_MODULES) if argv is None else set()
    )
    registered: set[str] = set()
    for name, (module, help_text) in COMMANDS.items():
        if name in registered:
            continue
        if module in wanted:
            before = set(sub.choices)
            importlib.import_module(f"model.cli.{module}").register(sub)
            registered |= set(sub.choices) - before
        else:
            sub.add_parser(name, help=help_text, add_help=False)
            registered.add(name)
    return parser


def _one_line(text: object) -> str:
    """The message on one line, echoed input already cut by the error types; overall cap 400 chars."""
    line = " ".join(str(text).split())
    return line if len(line) <= 400 else line[:400] + "..."


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pdplan`` console script; returns the process exit code."""
    try:
        args_list = list(sys.argv[1:] if argv is None else argv)
        parser = build_parser(args_list)
        try:
            args = parser.parse_args(args_list)
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
