"""The one quantity parser of pdplan and its human-readable formatter, used at the edges only.

Inside the model every quantity is a plain float in SI base units: seconds, bytes, FLOP,
bytes/s, FLOP/s, watts, 1/s. This module reads strings such as ``"3.35 TB/s"``, ``"80 GiB"``,
``"25 Gbit/s"``, ``"989 TFLOPS"`` or ``"500 ms"`` from profile files, the CLI, the UI, URL
parameters and scenario files.

Security: nothing here evaluates input. The grammar is strict: at most :data:`MAX_TEXT_CHARS`
characters, a plain decimal number (an optional sign, so '-5 ms' gets a clear 'not negative')
with an optional exponent of at most three digits
(``12``, ``3.35``, ``.5``, ``1e-3``), then optional spaces, then one unit from a fixed
allow-list for the quantity kind (``Kind.TIME`` knows ``ms``, ``s``, ``minute``...). There is
no arithmetic, so ``"9**9**9 s"`` or ``"(10**400) ms"`` is a one-line error, not minutes of
work (an earlier version handed the text to pint's expression evaluator).

Unit factors are definitions, not measurements: SI prefixes (BIPM, *The International System
of Units*, 9th ed., 2019, Table 7) and IEC 80000-13 binary prefixes (1 GiB = 2**30 bytes); one
byte is 8 bits. ``tests/test_units.py`` checks every factor in the table against pint's own
definitions, so the two cannot drift apart.
"""

from __future__ import annotations

import math
import re
from enum import Enum
from functools import cache

from model.errors import InputError
from model.errors import short as _short

MAX_TEXT_CHARS = 64
"""Longest quantity text accepted; longer input is rejected before any parsing."""

_NUMBER = re.compile(r"[+-]?(?:\d{1,30}(?:\.\d{0,30})?|\.\d{1,30})(?:[eE][+-]?\d{1,3})?")
_SPACES_AROUND_SLASH = re.compile(r"\s*/\s*")
_SPACES = re.compile(r"\s+")

_SI_PREFIXES = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_IEC_PREFIXES = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}


def _byte_units() -> dict[str, float]:
    """Units of information in bytes: B/byte/bytes and bit/bits with SI and IEC prefixes."""
    out: dict[str, float] = {"byte": 1.0, "bytes": 1.0, "bit": 0.125, "bits": 0.125}
    for prefixes in (_SI_PREFIXES, _IEC_PREFIXES):
        for p, f in prefixes.items():
            out[f"{p}B"] = f
            out[f"{p}bit"] = f / 8
    for p, name in (("k", "kilo"), ("M", "mega"), ("G", "giga"), ("T", "tera")):
        out[f"{name}byte"] = out[f"{name}bytes"] = _SI_PREFIXES[p]
        out[f"{name}bit"] = out[f"{name}bits"] = _SI_PREFIXES[p] / 8
    return out


def _per_second(units: dict[str, float]) -> dict[str, float]:
    """``X/s``, ``X/second`` and, for bits, the networking spelling ``Xbps``."""
    out: dict[str, float] = {}
    for u, f in units.items():
        out[f"{u}/s"] = out[f"{u}/second"] = out[f"{u}/sec"] = f
        if u.endswith("bit"):
            out[u[:-3] + "bps"] = f
    return out


def _flops_units() -> dict[str, float]:
    """FLOP/s and integer OP/s with SI prefixes (``TFLOPS``, ``TFLOP/s``, ``TOPS``)."""
    out: dict[str, float] = {}
    for p, f in _SI_PREFIXES.items():
        for base in ("FLOPS", "FLOP/s", "flops", "flop/s", "OPS", "OP/s"):
            out[p + base] = f
    return out


_TIME = {
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "ms": 1e-3, "msec": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "usec": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "ns": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
    "min": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hour": 3600.0, "hours": 3600.0,
}  # fmt: skip
_POWER = {
    "W": 1.0, "watt": 1.0, "watts": 1.0, "mW": 1e-3, "kW": 1e3, "kilowatt": 1e3, "kilowatts": 1e3,
    "MW": 1e6,
}  # fmt: skip


def _rate_units() -> dict[str, float]:
    """Events per unit time: ``/s``, ``1/s``, ``req/s``, ``rps``, ``/min``, ``/hour``..."""
    out: dict[str, float] = {"rps": 1.0, "Hz": 1.0}
    for t, seconds in _TIME.items():
        if seconds < 1.0:
            continue  # "/ms" rates are never meant; reading them would be a 1000x surprise
        for num in ("", "1", "req", "request", "requests"):
            out[f"{num}/{t}"] = 1.0 / seconds
    out["per second"], out["per minute"], out["per hour"] = 1.0, 1 / 60.0, 1 / 3600.0
    return out


class Kind(Enum):
    """A physical kind of quantity: its SI unit and an example users can copy."""

    BYTES = ("byte", "'80 GiB' or '24 GB'")
    BANDWIDTH = ("byte / second", "'3.35 TB/s' or '25 Gbit/s'")
    FLOPS = ("FLOP / second", "'989 TFLOPS'")
    TIME = ("second", "'500 ms' or '2 s'")
    POWER = ("watt", "'700 W'")
    RATE = ("1 / second", "'5 /s' (requests per second)")

    def __init__(self, si_unit: str, example: str) -> None:
        self.si_unit = si_unit
        self.example = example

    @property
    def units(self) -> dict[str, float]:
        """The allow-list: unit spelling -> factor to this kind's SI unit."""
        return _unit_table(self)


@cache
def _unit_table(kind: Kind) -> dict[str, float]:
    """Allowed unit spellings of ``kind`` and their SI factors (built once)."""
    if kind is Kind.BYTES:
        return _byte_units()
    if kind is Kind.BANDWIDTH:
        return _per_second(_byte_units())
    if kind is Kind.FLOPS:
        return _flops_units()
    if kind is Kind.TIME:
        return dict(_TIME)
    if kind is Kind.POWER:
        return dict(_POWER)
    return _rate_units()


def _normalise_unit(text: str) -> str:
    """Canonical spelling for lookup: no spaces around '/', single spaces elsewhere."""
    return _SPACES.sub(" ", _SPACES_AROUND_SLASH.sub("/", text.strip()))


def _unit_factor(unit_text: str, kind: Kind, bare_unit: str | None) -> float | None:
    """SI factor of ``unit_text`` for ``kind``; an empty unit uses ``bare_unit``; None if unknown."""
    table = _unit_table(kind)
    unit = _normalise_unit(unit_text)
    if not unit:
        if bare_unit is None:
            return None
        unit = _normalise_unit(bare_unit)
    return table.get(unit)


def parse_quantity(text: object, kind: Kind, field: str, *, bare_unit: str | None = None) -> float:
    """Parse ``text`` (str or number) as a non-negative quantity of ``kind``; return SI base units.

    Grammar (no evaluation): ``NUMBER [UNIT]`` with NUMBER a plain decimal with an optional
    exponent of at most three digits and UNIT from ``kind.units``. ``bare_unit`` is the unit a
    bare number is read in (e.g. ``"second"`` for CLI times); without it a bare number is an
    error. A result that is not a finite float (``1e400 s``) is an error. Raises
    :class:`InputError` naming ``field``.
    """
    allowed = f"a {kind.name.lower()} such as {kind.example}"
    if isinstance(text, bool):
        raise InputError(field, text, allowed)
    if isinstance(text, int | float):
        factor = _unit_factor("", kind, bare_unit)
        if factor is None:
            raise InputError(field, text, allowed + " (a number needs a unit)")
        try:
            number = float(text)
        except OverflowError:
            raise InputError(field, _short(text), allowed + " (number too large)") from None
    elif isinstance(text, str):
        if len(text) > MAX_TEXT_CHARS:
            raise InputError(field, _short(text), allowed + f" (at most {MAX_TEXT_CHARS} characters)")
        s = text.strip()
        match = _NUMBER.match(s)
        if match is None:
            raise InputError(field, text, allowed + " (a plain number, then a unit)")
        unit_text = s[match.end() :]
        factor = _unit_factor(unit_text, kind, bare_unit)
        if factor is None:
            hint = " (a number needs a unit)" if not unit_text.strip() else ""
            raise InputError(field, text, allowed + hint)
        number = float(match.group())
    else:
        raise InputError(field, _short(text), allowed)
    value = number * factor
    if not math.isfinite(value):
        raise InputError(field, _short(text), allowed + " (a finite value)")
    if value < 0:
        raise InputError(field, text, allowed + " (not negative)")
    return value + 0.0  # no negative zero


def format_quantity(value_si: float, kind: Kind, unit: str, digits: int = 3) -> str:
    """Format an SI float for people, e.g. ``format_quantity(3.35e12, Kind.BANDWIDTH, "TB/s")``."""
    factor = _unit_table(kind).get(_normalise_unit(unit))
    if factor is None:
        raise InputError("unit", unit, f"one of {kind.name.lower()}'s units, e.g. {kind.example}")
    return f"{value_si / factor:.{digits}g} {unit}"


# ---------------------------------------------------------------------------------------------
# Human-readable numbers: the one formatting family of pdplan (reasons, CLI tables, the app).
# Each function takes a plain SI float and picks the prefix that keeps 1 <= mantissa < 1000,
# rounds to ``digits`` significant figures (moving up a prefix when rounding reaches 1000), and
# says "unbounded" / "n/a" instead of printing inf or NaN.

_UP = (("k", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12), ("P", 1e15), ("E", 1e18))
_DOWN = (("m", 1e-3), ("µ", 1e-6), ("n", 1e-9))


def _sig(x: float, digits: int) -> str:
    """``x`` to ``digits`` significant figures, without an exponent below 1000 ("100", not "1e+02")."""
    text = f"{x:.{digits}g}"
    if "e+" in text and abs(x) < 999.5:
        text = f"{x:.0f}"
    return text


def _rounds_below(x: float, limit: float, digits: int) -> bool:
    return abs(float(f"{x:.{digits}g}")) < limit


def _prefixed(value: float, digits: int, small: bool) -> tuple[str, str]:
    """(mantissa text, SI prefix) of a finite ``value`` with 1 <= |mantissa| < 1000 after rounding."""
    mag = abs(value)
    if small and mag > 0 and _rounds_below(mag, 1.0, digits):
        for prefix, factor in _DOWN:
            if not _rounds_below(mag / factor, 1.0, digits) or prefix == _DOWN[-1][0]:
                return _sig(value / factor, digits), prefix
    if _rounds_below(mag, 1000.0, digits):
        return _sig(value, digits), ""
    for prefix, factor in _UP:
        if _rounds_below(mag / factor, 1000.0, digits) or prefix == _UP[-1][0]:
            return _sig(value / factor, digits), prefix
    raise AssertionError("unreachable")  # pragma: no cover


def _not_finite(value: float) -> str | None:
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "unbounded" if value > 0 else "-unbounded"
    return None


def format_si(value: float, unit: str, digits: int = 3, *, small: bool = False) -> str:
    """``value`` with an SI prefix on ``unit``: ``format_si(1.13e12, "B") == "1.13 TB"``.

    Prefixes k..E above 1000; with ``small`` also m, µ, n below 1. Infinity gives "unbounded",
    NaN "n/a".
    """
    bad = _not_finite(value)
    if bad is not None:
        return bad
    number, prefix = _prefixed(value, digits, small)
    return f"{number} {prefix}{unit}"


def format_time(seconds: float, digits: int = 3) -> str:
    """A duration: "850 µs", "12.3 ms", "150 ms", "1.5 s", "16.7 min", "2.5 h"; inf is "unbounded"."""
    if math.isfinite(seconds) and abs(seconds) >= 999.5:
        minutes = seconds / 60.0
        if abs(minutes) < 99.95:
            return f"{_sig(minutes, digits)} min"
        return f"{_sig(seconds / 3600.0, digits)} h"
    if seconds == 0:
        return "0 s"
    return format_si(seconds, "s", digits, small=True)


def format_bytes(n_bytes: float, digits: int = 3) -> str:
    """A size in decimal SI bytes (the unit GPU datasheets use): "164 MB", "140 GB", "1.13 TB"."""
    return format_si(n_bytes, "B", digits)


def format_bandwidth(bytes_per_s: float, digits: int = 3) -> str:
    """A link speed in bits per second, as networks are sold: "25 Gbit/s", "4 Pbit/s"."""
    return format_si(bytes_per_s * 8.0, "bit/s", digits)


def format_rate(per_s: float, unit: str = "req/s", digits: int = 3) -> str:
    """A rate: "0.05 req/s", "12.3 req/s", "1.5k tok/s" (a prefix above 1000 only, on the number)."""
    bad = _not_finite(per_s)
    if bad is not None:
        return bad
    number, prefix = _prefixed(per_s, digits, small=False)
    return f"{number}{prefix} {unit}"


def format_count(n: float, unit: str, plural: str | None = None) -> str:
    """A count with a unit that agrees in number: "1 GPU", "2 GPUs", "1,024 tokens", "1.5 copies"."""
    if not math.isfinite(n):
        return f"{_not_finite(n)} {plural or unit + 's'}"
    whole = float(n).is_integer()
    shown = f"{int(n):,}" if whole else (f"{n:,.0f}" if abs(n) >= 100 else f"{n:.3g}")
    word = unit if whole and abs(n) == 1 else (plural or unit + "s")
    return f"{shown} {word}"


def format_money(usd: float | None, per: str = "") -> str:
    """US dollars: "$2.50", "$0.0123", "$1,250", "$2.5M"; None, NaN or inf is "n/a" (never "$inf").

    ``per`` is appended as "/per" ("$2.50/h").
    """
    if usd is None or not math.isfinite(usd):
        return "n/a"
    mag = abs(usd)
    if mag >= 1e6:
        body = "".join(_prefixed(usd, 3, small=False))
    elif mag >= 1000:
        body = f"{usd:,.0f}"
    elif mag >= 0.1 or mag == 0:
        body = f"{usd:.2f}"
    else:
        body = _sig(usd, 3)
    sign = "-" if body.startswith("-") else ""
    return f"{sign}${body.lstrip('-')}" + (f"/{per}" if per else "")
