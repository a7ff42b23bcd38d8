"""Reading one measurement file for ``pdplan calibrate``: the format from ``fmt`` or the extension."""

from __future__ import annotations

from pathlib import Path

from model.calibrate.csv_format import parse_csv
from model.calibrate.measurements import FORMATS, Measurement, RowDefaults
from model.calibrate.vllm_format import parse_vllm_json
from model.errors import InputError, short
from model.limits import check_file_size

__all__ = ["load_measurements"]


def load_measurements(
    path: str | Path, fmt: str | None = None, *, defaults: RowDefaults | None = None
) -> tuple[Measurement, ...]:
    """Read one measurement file; ``fmt`` None guesses from the extension (.csv / .json / .jsonl)."""
    if not isinstance(path, str | Path) or not str(path).strip():
        raise InputError("measurements", short(path), "a measurement file path (str or Path)")
    if fmt is not None and fmt not in FORMATS:
        raise InputError("format", short(fmt), " or ".join(FORMATS))
    if defaults is not None and not isinstance(defaults, RowDefaults):
        raise InputError("defaults", type(defaults).__name__, "a RowDefaults or None")
    p = Path(path)
    check_file_size(p, "measurements")
    if fmt is None:
        suffix = p.suffix.lower()
        fmt = "csv" if suffix == ".csv" else "vllm-json" if suffix in (".json", ".jsonl") else None
        if fmt is None:
            raise InputError(
                "format", p.name, "csv or vllm-json (give --format, or name the file .csv/.json)"
            )
    if fmt not in FORMATS:
        raise InputError("format", fmt, " or ".join(FORMATS))
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(
            "measurements", short(str(p)), f"a readable UTF-8 file ({short(str(err))})"
        ) from None
    parse = parse_csv if fmt == "csv" else parse_vllm_json
    return parse(text, name=p.name, defaults=defaults)
