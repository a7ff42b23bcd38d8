"""Every size, depth and work cap pdplan enforces on input, in one place (see docs/reliability.md).

Each cap is a named constant with the reason for its value. Loaders, the CLI and the Python API
import these (this module sits in the lowest layer, beside :mod:`model.errors`), and report a
breach as a one-line :class:`~model.errors.InputError` that states the limit and why, so bad or
hostile input is refused before any unbounded work or allocation starts.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from model.errors import InputError, short

# --- files ------------------------------------------------------------------------------------
MAX_FILE_BYTES = 512 * 2**20
"""Largest trace / measurement / config file read (512 MiB): the biggest public traces (Azure
2023 code+conversation, BurstGPT) are under 200 MB; larger files would exhaust memory in lists."""

MAX_PROFILE_BYTES = 1 * 2**20
"""Largest TOML profile or config.json (1 MiB): real ones are a few kB."""

MAX_NESTING_DEPTH = 64
"""Deepest [ / { nesting in JSON or TOML: real files nest at most 4 deep; the JSON and TOML
parsers recurse per level, so thousands of levels would raise RecursionError."""

MAX_CSV_FIELD_CHARS = 4096
"""Longest CSV field (csv module's own limit is 131,072): trace fields are numbers and timestamps."""

MAX_TRACE_ROWS = 2_000_000
"""Most requests in one trace: the Azure 2023 traces have ~28k, BurstGPT ~5.3M over 121 days
(load a slice); each row costs ~100 bytes in lists while loading, so 2M rows stay under 0.5 GB."""

MAX_JSON_INT_DIGITS = 30
"""Longest integer literal accepted in JSON input: 30 digits is past any token count or time;
Python refuses int() of more than 4,300 digits with a ValueError."""

MAX_MEASUREMENT_ROWS = 100_000
"""Most calibration measurement rows: a fit needs tens; the least-squares Jacobian is rows x 4."""

# --- work -------------------------------------------------------------------------------------
MAX_SIM_REQUESTS = 500_000
"""Most requests one simulation replays: ~10 s per 100k requests on one core (issue 6's target),
so a run stays under about a minute and ~0.5 GB of per-request records (~1 kB each)."""

MAX_ARRIVAL_S = 1e9
"""Latest arrival time a simulation accepts (~32 years): float64 keeps sub-microsecond resolution
of event times up to here; at 1e300 s a 50 ms step would vanish in rounding (TTFT would read 0)."""

MAX_INSTANCES = 4096
"""Most replicas / prefill or decode instances in one simulation: the event loop and the per-
instance state are linear in instances; 4,096 GPUs-groups is past the largest serving fleets."""

MAX_PLAN_GPUS = 1024
"""Largest GPU budget or pool search in ``plan``: the pool-split grid grows with the budget
(a 1,024-GPU budget sweep takes ~30 s on one core, 4,096 over a minute); plan larger fleets
per cluster of at most this size."""

MAX_TOKENS = 10_000_000
"""Longest prompt, output, chunk or sequence length accepted (10M tokens): past any model's
context window (the longest today is ~10M), and keeps token products exact in float64."""

MAX_BATCH = 1_000_000
"""Largest batch size accepted by the estimators: past any KV budget."""

MAX_OPTIONS = 64
"""Most values in a list option (``--tp``, ``--chunks``): the planner evaluates every
combination, so 20,000 chunk sizes would multiply the search by 4,000 for no new information."""

MAX_CURVE_ROWS = 100_000
"""Most rows in a rate curve (``pdplan schedule --curve``): a week at one-minute steps is ~10k;
each row is one interval the schedule sizes (a few numpy passes over the rows)."""

MAX_SCHEDULE_BINS = 1_000_000
"""Most time bins a schedule evaluates (the curve's intervals split to the resolution): a year at
one-minute resolution is ~526k; each bin costs a few numbers in a handful of arrays."""

MAX_SWEEP_SCENARIOS = 100_000
"""Most scenarios one ``pdplan sweep`` grid may expand to: the local pool runs a few scenarios per
second per core (docs/sweeps.md), so 100k is about a day on one 8-core machine; split larger grids
or run them on a Ray cluster in parts."""

MAX_PARALLEL = 1024
"""Largest TP / PP / EP degree: past any NVLink domain (GB200 NVL72) and any pipeline depth."""

MAX_CONCURRENCY = 20_000
"""Most concurrent users in a closed-loop (fixed-concurrency) plan or simulation: benchmark
clients (vLLM bench, genai-perf) run at most a few thousand; the mean-value recursion of
model.queueing.closed_loop takes one vectorised step per user, so 20k stays well under a second."""

MAX_THINK_TIME_S = 86_400.0
"""Longest mean think time between a user's requests (one day): past any interactive session."""


def check_int(field: str, value: object, low: int, high: int, why: str = "") -> int:
    """``value`` as an int in [low, high] (bool and non-integers refused); InputError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(field, short(value), f"a whole number in [{low}, {high}]")
    if not low <= value <= high:
        raise InputError(
            field, short(value), f"a whole number in [{low}, {high}]" + (f" ({why})" if why else "")
        )
    return value


def check_real(field: str, value: object, low: float, high: float, *, low_open: bool = False) -> float:
    """``value`` as a finite float in [low, high] (or (low, high]); InputError otherwise."""
    lo = "(" if low_open else "["
    allowed = f"a finite number in {lo}{low:g}, {high:g}]"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(field, short(value), allowed)
    try:
        x = float(value)
    except OverflowError:
        raise InputError(field, short(value), allowed) from None
    if not math.isfinite(x) or x > high or x < low or (low_open and x == low):
        raise InputError(field, short(value), allowed)
    return x


def is_file(path: Path) -> bool:
    """``path.is_file()``, False instead of OSError for names the OS refuses (too long, ...)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def is_dir(path: Path) -> bool:
    """``path.is_dir()``, False instead of OSError for names the OS refuses (too long, ...)."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def check_file_size(path: Path, field: str, limit: int = MAX_FILE_BYTES) -> None:
    """Refuse a file larger than ``limit`` bytes before reading it."""
    try:
        size = path.stat().st_size
    except OSError as err:
        raise InputError(field, short(str(path)), f"a readable file ({err.strerror})") from None
    if size > limit:
        raise InputError(
            field,
            short(str(path)),
            f"a file of at most {limit:,} bytes (got {size:,}; see docs/reliability.md)",
        )


def nesting_depth(text: str) -> int:
    """Deepest ``[``/``{`` nesting outside quoted strings (JSON and TOML; ``#`` comments skipped).

    A linear scan, so a hostile file is measured without recursion before any parser sees it.
    """
    depth = deepest = 0
    quote = ""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
        i += 1
    return deepest


def check_depth(text: str, field: str, limit: int = MAX_NESTING_DEPTH) -> None:
    """Refuse JSON/TOML text nested deeper than ``limit`` (before parsing)."""
    if nesting_depth(text) > limit:
        raise InputError(field, "(nested text)", f"at most {limit} levels of [ or {{ nesting")


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_JSON_INT_DIGITS:
        raise ValueError(f"an integer of at most {MAX_JSON_INT_DIGITS} digits")
    return int(text)


def _json_float(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise ValueError("a finite number")
    return x


def _json_constant(text: str) -> float:
    raise ValueError(f"a finite number, not {text}")


def parse_json(text: str, field: str) -> Any:
    """``json.loads`` with the limits: nesting depth, integer digits, no NaN/Infinity.

    Raises :class:`InputError` naming ``field`` (the file) for invalid JSON or a breached limit.
    """
    check_depth(text, field)
    try:
        return json.loads(text, parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant)
    except json.JSONDecodeError as err:
        raise InputError(field, "(text)", f"valid JSON ({err.msg} at line {err.lineno})") from None
    except RecursionError:
        raise InputError(field, "(nested text)", f"at most {MAX_NESTING_DEPTH} levels of nesting") from None
    except ValueError as err:
        raise InputError(field, "(number)", f"JSON numbers that are {err}") from None


# --- the public API's argument check ----------------------------------------------------------
MAX_ARRAY_ELEMENTS = 10_000_000
"""Largest array argument of a public function (80 MB of float64): sweeps use thousands."""


def _matches(value: object, hint: Any) -> bool:
    """Whether ``value`` fits the resolved annotation ``hint`` (unknown forms are accepted)."""
    import types
    import typing

    import numpy as np

    if hint is typing.Any:  # a class since Python 3.11, but never an isinstance target
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        members = typing.get_args(hint)
        if np.ndarray in members and not isinstance(value, bool):
            return _array_ok(value)
        return any(_matches(value, m) for m in members)
    if hint is type(None):
        return value is None
    if hint is float:
        return not isinstance(value, bool) and isinstance(value, int | float | np.integer | np.floating)
    if hint is int:
        return not isinstance(value, bool) and isinstance(value, int | np.integer)
    if hint is np.ndarray:
        return _array_ok(value)
    if origin is not None:
        return not isinstance(origin, type) or isinstance(value, origin)
    if isinstance(hint, type) and hint is not object:
        return isinstance(value, hint)
    return True


def _array_ok(value: object) -> bool:
    """An SI quantity or a non-empty array of them: numeric, finite, >= 0 and not huge."""
    import numpy as np

    if isinstance(value, str | bytes | bool) or value is None:
        return False
    if isinstance(value, list | tuple) and len(value) > MAX_ARRAY_ELEMENTS:
        return False
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError):
        return False
    if not 1 <= arr.size <= MAX_ARRAY_ELEMENTS:
        return False
    return bool(np.all(np.isfinite(arr)) and np.all(arr >= 0))


def _describe(hint: Any) -> str:
    """``str | model.llm.arch.LLMArch`` -> ``str | LLMArch``: the type names a user knows."""
    import re

    text = str(hint).replace("<class '", "").replace("'>", "").replace("NoneType", "None")
    return re.sub(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)", r"\1", text)


_NUMERIC_NOTE = " (numbers finite; array quantities >= 0)"


def checked(fn: Any) -> Any:
    """Wrap a public function so an argument of the wrong type is an InputError naming it.

    The annotations are the contract: each passed argument must fit its (resolved) type hint;
    numbers must be finite, and array-valued SI quantities (hints that include ``np.ndarray``)
    finite, >= 0 and at most :data:`MAX_ARRAY_ELEMENTS` long. Used by ``model.__getattr__`` on
    every exported function, so ``model.total_params(None)`` says which argument is wrong instead
    of raising AttributeError deep inside.
    """
    import contextlib
    import functools
    import inspect
    import typing

    sig = inspect.signature(fn)
    hints: dict[str, Any] = {}

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not hints:
            with contextlib.suppress(Exception):  # an unresolvable hint only disables the check
                hints.update(typing.get_type_hints(fn))
            hints["__resolved__"] = True
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as err:
            raise InputError(fn.__name__, "(arguments)", f"{fn.__name__}'s parameters ({err})") from None
        for name, value in bound.arguments.items():
            param = sig.parameters[name]
            if param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL) or name not in hints:
                continue
            hint = hints[name]
            ok = _matches(value, hint)
            if ok and isinstance(value, int | float) and not isinstance(value, bool):
                try:  # finite, and integers within int64 (numpy's range)
                    ok = math.isfinite(float(value)) and not (isinstance(value, int) and abs(value) >= 2**63)
                except OverflowError:  # a 5,000-digit integer
                    ok = False
            if not ok:
                shown = type(value).__name__ if not isinstance(value, int | float | str) else short(value)
                raise InputError(f"{fn.__name__}: {name}", shown, f"{_describe(hint)}{_NUMERIC_NOTE}")
        return fn(*args, **kwargs)

    return wrapper
