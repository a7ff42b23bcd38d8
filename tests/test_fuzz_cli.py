"""Fuzzing the command line in-process: every generated argv ends in exit 0 with clean output, or
exit 2 with exactly one line on stderr (never a traceback), within a per-case time bound.

Each case starts from a valid invocation of one subcommand and mutates it: one flag's value
replaced by a hostile string, a required flag dropped, or an unknown flag added.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz_common import check_cli_contract, fuzz_settings, hostile_text

_MODEL = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm"]
_SCENARIO = ["--workload", "chat", "--ttft-slo", "2s", "--tpot-slo", "100ms"]

# Valid, cheap base invocations (small budgets, few requests, no threshold searches).
BASES: dict[str, list[str]] = {
    "list": ["list", "gpus", "--json"],
    "show": ["show", "gpu", "h100-sxm", "--json"],
    "estimate": ["estimate", *_MODEL, "--isl", "512", "--osl", "64", "--json"],
    "plan": [
        "plan",
        *_MODEL,
        *_SCENARIO,
        "--gpus",
        "2",
        "--tp",
        "1",
        "--chunks",
        "512",
        "--no-thresholds",
        "--json",
    ],
    "frontier": [
        "frontier",
        *_MODEL,
        *_SCENARIO,
        "--gpus",
        "2",
        "--tp",
        "1",
        "--chunks",
        "512",
        "--rates",
        "1,2",
        "--json",
    ],
    "simulate": [
        "simulate",
        *_MODEL,
        "--architecture",
        "colocated",
        "--workload",
        "chat",
        "--rate",
        "2",
        "--requests",
        "20",
        "--json",
    ],
    "schedule": [
        "schedule",
        *_MODEL,
        *_SCENARIO,
        "--diurnal",
        "2",
        "--tp",
        "1",
        "--chunks",
        "512",
        "--resolution",
        "1h",
        "--max-gpus",
        "8",
        "--json",
    ],
    "simulate-disagg": [
        "simulate",
        *_MODEL,
        "--architecture",
        "disaggregated",
        "--link",
        "ib-ndr-400",
        "--workload",
        "short",
        "--rate",
        "2",
        "--requests",
        "20",
        "--json",
    ],
}

# Flags whose values are worth attacking, per base (added when absent).
EXTRA_FLAGS: dict[str, list[str]] = {
    "list": ["--profile-dir"],
    "show": ["--profile-dir"],
    "estimate": ["--tp", "--pp", "--batch", "--dtype", "--kv-dtype", "--profile-dir"],
    "plan": [
        "--percentile",
        "--attainment",
        "--arrival-cv",
        "--margin",
        "--max-gpus",
        "--decode-gpu",
        "--link",
        "--node",
        "--kv-dtype",
        "--dtype",
        "--target-rate",
        "--top",
    ],
    "frontier": ["--rates", "--gpus", "--percentile", "--arrival-cv", "--link", "--dtype"],
    "simulate": [
        "--replicas",
        "--tp",
        "--chunk",
        "--seed",
        "--warmup",
        "--ttft-slo",
        "--tpot-slo",
        "--kv-dtype",
        "--prefill",
        "--decode",
        "--decode-gpu",
    ],
    "schedule": [
        "--curve",
        "--curve-trace",
        "--bin",
        "--trough-fraction",
        "--hold",
        "--engine-start",
        "--reaction",
        "--node",
        "--objective",
    ],
    "simulate-disagg": [
        "--prefill",
        "--decode",
        "--prefill-tp",
        "--decode-tp",
        "--replicas",
        "--chunk",
        "--warmup",
    ],
}


def _value_slots(argv: list[str]) -> list[int]:
    """Indexes of flag values in ``argv`` (the token after each ``--flag`` that takes one)."""
    return [i + 1 for i, a in enumerate(argv[:-1]) if a.startswith("--") and not argv[i + 1].startswith("--")]


@st.composite
def mutated_argv(draw: st.DrawFn) -> list[str]:
    name = draw(st.sampled_from(sorted(BASES)))
    argv = list(BASES[name])
    how = draw(st.sampled_from(["value", "value", "extra", "extra", "drop", "unknown", "positional"]))
    if how in ("value", "drop") and not _value_slots(argv):
        how = "extra"
    if how == "value":
        slot = draw(st.sampled_from(_value_slots(argv)))
        argv[slot] = draw(hostile_text)
    elif how == "extra":
        flag = draw(st.sampled_from(EXTRA_FLAGS[name]))
        argv += [flag, draw(hostile_text)]
    elif how == "drop":
        slot = draw(st.sampled_from(_value_slots(argv)))
        del argv[slot - 1 : slot + 1]
    elif how == "unknown":
        argv += [draw(st.sampled_from(["--bogus", "-x", "--json=1", "--gpus"]))]
    else:
        argv.insert(draw(st.integers(0, len(argv))), draw(hostile_text))
    return argv


@fuzz_settings(fast=60, full=1200)
@given(mutated_argv())
def test_cli_mutations_keep_the_error_contract(argv: list[str]) -> None:
    check_cli_contract(argv)


@fuzz_settings(fast=15, full=300)
@given(st.lists(hostile_text, max_size=6))
def test_cli_random_argv_keeps_the_error_contract(argv: list[str]) -> None:
    code, _ = check_cli_contract(argv)
    assert code in (0, 2)


def test_each_base_invocation_is_valid() -> None:
    """The fuzz bases themselves succeed, so mutations start from a working command."""
    for argv in BASES.values():
        code, _ = check_cli_contract(argv)
        assert code == 0, argv
