"""The one pint registry of pdplan and the parsers used at its edges.

Inside the model every quantity is a plain float in SI base units: seconds, bytes, FLOP,
bytes/s, FLOP/s, watts. pint is used only here, to read strings such as ``"3.35 TB/s"``,
``"80 GiB"``, ``"25 Gbit/s"``, ``"989 TFLOPS"`` or ``"500 ms"`` from profile files, the CLI
and the UI, and to format numbers for people.

Decimal prefixes are SI (1 GB = 1e9 bytes, 1 TB/s = 1e12 bytes/s); binary prefixes are
IEC (1 GiB = 2**30 bytes), as pint defines them.
"""

from __future__ import annotations

import math
from enum import Enum

import pint

from model.errors import InputError

ureg = pint.UnitRegistry()
ureg.define("FLOP = [computation] = flop = OP = op")
ureg.define("FLOPS = FLOP / second = flops = OPS")
Q_ = ureg.Quantity


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


def _is_information(q: pint.Quantity) -> bool:
    """pint treats bits and bytes as dimensionless; tell them apart from plain numbers."""
    root = q.to_root_units().units
    return "bit" in str(root)


def parse_quantity(text: object, kind: Kind, field: str, *, bare_unit: str | None = None) -> float:
    """Parse ``text`` (str or number) as a quantity of ``kind`` and return it in SI base units.

    ``bare_unit`` is the unit a bare number is read in (e.g. ``"second"`` for CLI times);
    without it a bare number is an error. Raises :class:`InputError` naming ``field``.
    """
    allowed = f"a {kind.name.lower()} such as {kind.example}"
    if isinstance(text, bool):
        raise InputError(field, text, allowed)
    if isinstance(text, int | float):
        if bare_unit is None:
            raise InputError(field, text, allowed + " (a number needs a unit)")
        q = Q_(float(text), bare_unit)
    elif isinstance(text, str):
        s = text.strip()
        if not s:
            raise InputError(field, text, allowed)
        try:
            q = Q_(s)
        except Exception:  # pint raises many different exception types on garbage
            raise InputError(field, text, allowed) from None
        if not isinstance(q, pint.Quantity):
            q = Q_(float(q), "")
        if q.unitless:
            if bare_unit is None:
                raise InputError(field, text, allowed + " (a number needs a unit)")
            q = Q_(q.magnitude, bare_unit)
    else:
        raise InputError(field, text, allowed)
    want_info = kind in (Kind.BYTES, Kind.BANDWIDTH)
    try:
        value = float(q.to(kind.si_unit).magnitude)
    except (pint.DimensionalityError, OverflowError, ValueError):
        raise InputError(field, text, allowed) from None
    if want_info != _is_information(q):
        raise InputError(field, text, allowed)
    if kind is Kind.RATE and str(q.to_root_units().units) != "1 / second":
        raise InputError(field, text, allowed)  # e.g. "5 rpm" (radians/s) or "10 Gbit/s"
    if math.isnan(value):
        raise InputError(field, text, allowed)
    return value


def format_quantity(value_si: float, kind: Kind, unit: str, digits: int = 3) -> str:
    """Format an SI float for people, e.g. ``format_quantity(3.35e12, Kind.BANDWIDTH, "TB/s")``."""
    q = Q_(value_si, kind.si_unit).to(unit)
    return f"{q.magnitude:.{digits}g} {unit}"
