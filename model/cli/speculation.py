"""CLI options for speculative decoding, shared by ``plan`` and ``simulate`` (model.physics.speculation)."""

from __future__ import annotations

import argparse

from model.errors import InputError
from model.physics.speculation import MAX_SPEC_TOKENS, METHODS, Speculation


def add_speculation_args(p: argparse.ArgumentParser, *, search: bool = False) -> None:
    """--spec METHOD, --spec-tokens K (a list with ``search``), --spec-acceptance, --spec-accepted-length,
    --draft-model."""
    p.add_argument("--spec", choices=METHODS, help="speculative decoding method (default: off)")
    p.add_argument(
        "--spec-tokens",
        default="3",
        help="drafted tokens per step k" + (" (a list such as 1,2,3,4 searches them)" if search else ""),
    )
    acc = p.add_mutually_exclusive_group()
    acc.add_argument("--spec-acceptance", help="acceptance rate in [0, 1], or one per position (0.9,0.8,0.7)")
    acc.add_argument(
        "--spec-accepted-length", help="mean tokens per step tau in [1, k + 1] (engines' acceptance length)"
    )
    p.add_argument("--draft-model", help="draft model (catalog name or config.json) with --spec draft")


def _number(text: str, field: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(field, text, "a number") from None


def spec_tokens(args: argparse.Namespace) -> list[int]:
    """The --spec-tokens values (one or, when searching, several), each in [1, MAX_SPEC_TOKENS]."""
    out = []
    for part in str(args.spec_tokens).split(","):
        try:
            k = int(part)
        except ValueError:
            raise InputError(
                "--spec-tokens", args.spec_tokens, "whole numbers such as 3 or 1,2,3,4"
            ) from None
        if not 1 <= k <= MAX_SPEC_TOKENS:
            raise InputError("--spec-tokens", k, f"drafted tokens in [1, {MAX_SPEC_TOKENS}]")
        out.append(k)
    if len(set(out)) != len(out):
        raise InputError("--spec-tokens", args.spec_tokens, "distinct values")
    return out


def speculation_for(args: argparse.Namespace, tokens: int) -> Speculation | None:
    """The Speculation of the --spec options at ``tokens`` drafted tokens (None without --spec).
    Per-position rates beyond the given ones are refused; one rate applies to every position."""
    if args.spec is None:
        for flag, value in (
            ("--spec-acceptance", args.spec_acceptance),
            ("--spec-accepted-length", args.spec_accepted_length),
            ("--draft-model", args.draft_model),
        ):
            if value is not None:
                raise InputError(flag, value, "only with --spec METHOD")
        return None
    draft = None
    if args.draft_model is not None:
        from model.llm.catalog import get_model

        draft = get_model(args.draft_model)
    if args.spec_accepted_length is not None:
        tau = _number(args.spec_accepted_length, "--spec-accepted-length")
        return Speculation.from_accepted_length(args.spec, tokens, tau, draft)
    if args.spec_acceptance is None:
        raise InputError(
            "--spec-acceptance", None, "an acceptance rate (or --spec-accepted-length) with --spec"
        )
    rates = tuple(_number(x, "--spec-acceptance") for x in args.spec_acceptance.split(","))
    if len(rates) > 1:
        if len(rates) < tokens:
            raise InputError(
                "--spec-acceptance", args.spec_acceptance, f"one rate, or at least {tokens} rates"
            )
        rates = rates[:tokens]
    return Speculation(args.spec, tokens, rates, draft)
