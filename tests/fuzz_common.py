"""Shared pieces of the fuzzing suite (tests/test_fuzz_*.py): example budgets, hostile values,
the in-process CLI runner and the JSON output checks.

Budgets: the default run is a fast subset (a few dozen cases per test, well under a minute in
all); ``PDPLAN_FUZZ_EXAMPLES=full`` (``make fuzz``, benchmarks/fuzz_full.py) runs the full
budget, and a number sets the per-test budget explicitly.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shlex
import time
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from model.cli import main
from model.errors import PdplanError

CASE_TIME_BOUND_S = 10.0
"""Generous per-case bound: catches hangs, not slowness (the machine is shared)."""

_MODE = os.environ.get("PDPLAN_FUZZ_EXAMPLES", "")
FULL = _MODE == "full"


def budget(fast: int, full: int) -> int:
    """Examples for one property: ``fast`` by default, ``full`` in the full run."""
    if _MODE.isdigit():
        return int(_MODE)
    return full if FULL else fast


def fuzz_settings(fast: int, full: int) -> settings:
    return settings(
        max_examples=budget(fast, full),
        deadline=None,  # the per-case bound below is the hang detector
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        derandomize=not FULL,  # the default run is reproducible; the full run explores
    )


# Values a hostile or careless user types: huge, tiny, non-finite, empty, non-ASCII, long,
# expressions the old pint parser evaluated, path-like and control characters.
HOSTILE_TEXT = (
    "",
    " ",
    "0",
    "-1",
    "-0",
    "1e400",
    "-1e400",
    "1e-320",
    "nan",
    "inf",
    "-inf",
    "9" * 400,
    "9**9**9",
    "(10**400) ms",
    "5 ms / s",
    "1,5 ms",
    "2147483648",
    "4294967297",
    "1e9",
    "0x10",
    "1_000",
    "../../etc/passwd",
    "~nouser/x",
    "\x00",
    "\ud800",
    "é" * 100,
    "a" * 5000,
    "{}",
    "[[[[[[",
    "--help",
)

hostile_text = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=40))

hostile_value = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.just(10**5000),
    st.floats(allow_nan=True, allow_infinity=True),
    hostile_text,
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.just(object()),
    st.just(b"bytes"),
)


def run_cli(argv: Sequence[str]) -> tuple[int, str, str, float]:
    """Run ``pdplan argv`` in-process; (exit code, stdout, stderr, seconds). Never raises."""
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - start


def cli_text(args: str) -> tuple[int, str, str]:
    """``pdplan`` with a shell-style argument string, in-process: (exit code, stdout, stderr)."""
    code, out, err, _ = run_cli(shlex.split(args))
    return code or 0, out, err


def check_cli_contract(argv: Sequence[str]) -> tuple[int, str]:
    """Exit 0, or exit 2 with exactly one stderr line and no traceback; bounded time; clean JSON."""
    code, out, err, seconds = run_cli(argv)
    assert seconds < CASE_TIME_BOUND_S, f"{seconds:.1f} s for {argv}"
    if code == 0:
        if "--json" in argv and not {"-h", "--help"} & set(argv):
            check_json(json.loads(out, parse_constant=_refuse_constant))
        return code, out
    assert code == 2, (code, argv, err)
    lines = err.splitlines()
    assert len(lines) == 1, (argv, err)
    assert "Traceback" not in err and "internal error" not in err, (argv, err)
    assert lines[0].startswith("pdplan"), lines[0]
    assert len(lines[0]) <= 800, lines[0]
    return code, err


def _refuse_constant(text: str) -> Any:
    raise AssertionError(f"JSON output holds {text}")


# Keys that are signed by nature (differences, gains, log-ratios); everything else is a count,
# time, size, rate, price or fraction and may not be negative.
_SIGNED = ("gain", "delta", "difference", "change", "margin", "slack", "headroom")


def check_json(obj: Any, key: str = "") -> None:
    """No NaN/inf numbers anywhere, and no negative number under a key that names a quantity."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            check_json(v, str(k))
    elif isinstance(obj, list):
        for v in obj:
            check_json(v, key)
    elif isinstance(obj, float | int) and not isinstance(obj, bool):
        assert math.isfinite(obj), (key, obj)
        if not any(s in key.lower() for s in _SIGNED):
            assert obj >= 0, (key, obj)


def call_api(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn``; only pdplan's own errors may escape; bounded time. Returns the result or the error."""
    start = time.perf_counter()
    try:
        result: Any = fn(*args, **kwargs)
    except PdplanError as err:
        result = err
        assert str(err) and "\n" not in str(err), repr(err)
    assert time.perf_counter() - start < CASE_TIME_BOUND_S, (fn, args, kwargs)
    return result
