"""Profile TOML reading: a small declarative schema per file kind, so unknown keys, missing sources,
wrong types and wrong units are caught at load time with a one-line error naming file and field.

Every quantity is an inline table ``{ value = "3.35 TB/s", source = "..." }`` whose value the strict
quantity parser (model.units.parse_quantity) reads into an SI float; the source is kept beside it.
Used by the GPU, link, node and engine loaders (model.hardware.gpus, links, nodes, engines).
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from model.errors import InputError, ProfileError, short
from model.limits import MAX_NESTING_DEPTH, MAX_PROFILE_BYTES, check_depth, check_file_size
from model.units import Kind, parse_quantity

Sources = tuple[tuple[str, str], ...]
# (section, key) -> (type, Kind or None, required); section "" is the top level.
Schema = Mapping[tuple[str, str], tuple[str, Kind | None, bool]]

QUANTITY = "quantity"  # a value with a unit, > 0
QUANTITY0 = "quantity>=0"  # a value with a unit, >= 0 (e.g. an added overhead that may be zero)
NUMBER = "number"
TEXT = "text"
INT = "int"
LIST = "list"  # list of strings, lower-cased (aliases, keywords)
NAMES = "names"  # list of strings kept as written (e.g. connector class names)

_T = TypeVar("_T")

# Achieved fractions of peak (MFU, MBU, link efficiency): below 1% is a unit slip, not a measurement.
MIN_EFFICIENCY = 0.01
# A profile name: a plain file stem, never a path (no '/', '\\', '..' or leading dot).
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")


def positive(name: str, value: float, owner: str) -> None:
    """InputError unless ``value`` is a finite number > 0."""
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise InputError(f"{owner}.{name}", value, "a finite number > 0")


def fraction(name: str, value: float, owner: str) -> None:
    """InputError unless ``value`` is an achieved fraction of peak in [MIN_EFFICIENCY, 1]."""
    if not (isinstance(value, int | float) and MIN_EFFICIENCY <= value <= 1):
        raise InputError(
            f"{owner}.{name}", value, f"a fraction of peak in [{MIN_EFFICIENCY:g}, 1] (dimensionless)"
        )


def source_of(sources: Sources, key: str) -> str:
    """The citation recorded for ``key`` ("" if none)."""
    return dict(sources).get(key, "")


def read_toml(path: Path, text: str | None = None) -> dict[str, Any]:
    """Parse a TOML file (or ``text`` read from it) within the limits of model.limits (file size,
    nesting depth); errors become ProfileErrors naming the file."""
    try:
        if text is None:
            check_file_size(path, path.name, MAX_PROFILE_BYTES)
            text = path.read_text(encoding="utf-8")
        if len(text) > MAX_PROFILE_BYTES:
            raise ProfileError(path.name, "(file)", f"larger than {MAX_PROFILE_BYTES:,} characters")
        check_depth(text, path.name)
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ProfileError(path.name, "(file)", f"not valid TOML: {short(str(err))}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ProfileError(path.name, "(file)", f"cannot read: {short(str(err))}") from None
    except InputError as err:
        raise ProfileError(path.name, "(file)", f"expected {err.allowed}") from None
    except RecursionError:
        raise ProfileError(path.name, "(file)", f"at most {MAX_NESTING_DEPTH} levels of nesting") from None


def _flatten(data: Mapping[str, Any]) -> dict[tuple[str, str], Any]:
    """Top-level keys become ("", key); one level of tables becomes (table, key)."""
    flat: dict[tuple[str, str], Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and not ("value" in value and "source" in value):
            for sub, subvalue in value.items():
                flat[(key, sub)] = subvalue
        else:
            flat[("", key)] = value
    return flat


def _dotted(section: str, key: str) -> str:
    return f"{section}.{key}" if section else key


def validate(
    path: Path, data: Mapping[str, Any], schema: Schema, *, sourced_sections: bool = False
) -> tuple[dict[str, Any], Sources]:
    """Check keys, types and units against ``schema``; return {dotted key: value} and the sources.

    Quantities and numbers always carry ``{ value, source }``; with ``sourced_sections`` every key
    inside a table (e.g. ``[batching]``) must, whatever its type (engine profiles).
    """
    where = path.name
    flat = _flatten(data)
    unknown = [k for k in flat if k not in schema]
    if unknown:
        allowed = sorted({_dotted(*k) for k in schema})
        raise ProfileError(where, _dotted(*unknown[0]), f"unknown key; allowed keys: {', '.join(allowed)}")
    values: dict[str, Any] = {}
    sources: list[tuple[str, str]] = []
    for key, (typ, kind, required) in schema.items():
        dotted = _dotted(*key)
        if key not in flat:
            if required:
                raise ProfileError(where, dotted, "missing (required)")
            continue
        raw = flat[key]
        must_cite = typ in (QUANTITY, QUANTITY0, NUMBER) or (sourced_sections and key[0] != "")
        if must_cite or (typ in (INT, TEXT) and isinstance(raw, dict)):
            if not isinstance(raw, dict) or "value" not in raw or "source" not in raw:
                raise ProfileError(where, dotted, 'expected { value = ..., source = "..." }')
            extra = set(raw) - {"value", "source", "as_of"}
            if extra:
                raise ProfileError(
                    where, dotted, f"unknown key {sorted(extra)[0]!r} (allowed: value, source)"
                )
            source = raw["source"]
            if not isinstance(source, str) or not source.strip():
                raise ProfileError(where, f"{dotted}.source", "a non-empty citation is required")
            sources.append((dotted, source))
            if "as_of" in raw:
                values[f"{dotted}.as_of"] = str(raw["as_of"])
            raw = raw["value"]
        values[dotted] = _typed(where, dotted, typ, kind, raw)
    if values.get("schema") != 1:
        raise ProfileError(
            where, "schema", f"unsupported schema version {values.get('schema')!r} (allowed: 1)"
        )
    if not isinstance(values["name"], str) or not _NAME.fullmatch(values["name"]):
        raise ProfileError(
            where, "name", f"letters, digits, '.', '_' or '-' (not path-like), got {short(values['name'])!r}"
        )
    if values["name"] != path.stem and path.suffix.lower() == ".toml":
        raise ProfileError(
            where, "name", f"must equal the file name stem {path.stem!r}, got {short(values['name'])!r}"
        )
    return values, tuple(sources)


def _typed(where: str, dotted: str, typ: str, kind: Kind | None, raw: Any) -> Any:
    """One raw TOML value checked and converted for ``typ``."""
    if typ in (QUANTITY, QUANTITY0):
        try:
            value: Any = parse_quantity(raw, kind, dotted) if kind else raw
        except InputError as err:
            raise ProfileError(where, dotted, f"expected {err.allowed}, got {raw!r}") from None
        if typ == QUANTITY and not value > 0:
            raise ProfileError(where, dotted, f"must be > 0, got {raw!r}")
        return value
    if typ == NUMBER:
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
            raise ProfileError(where, dotted, f"expected a number, got {raw!r}")
        if raw < 0:
            raise ProfileError(where, dotted, f"must be >= 0, got {raw!r}")
        return float(raw)
    if typ == INT:
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
            raise ProfileError(where, dotted, f"expected a whole number >= 1, got {raw!r}")
        return raw
    if typ in (LIST, NAMES):
        if not isinstance(raw, list) or not all(isinstance(x, str) and x.strip() for x in raw):
            raise ProfileError(where, dotted, "expected a list of non-empty strings")
        return tuple(x.lower() for x in raw) if typ == LIST else tuple(raw)
    if not isinstance(raw, str) or not raw.strip():
        raise ProfileError(where, dotted, f"expected a non-empty string, got {raw!r}")
    return raw


def wrap(path: Path, build: Callable[[], _T]) -> _T:
    """Re-raise dataclass range errors as ProfileErrors naming the file."""
    try:
        return build()
    except InputError as err:
        raise ProfileError(
            path.name, err.field.split(".", 1)[-1], f"got {err.value!r}; allowed: {err.allowed}"
        ) from None
