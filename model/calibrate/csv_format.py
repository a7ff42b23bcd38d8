"""Measurements from a simple CSV (columns listed in model.calibrate.measurements.CSV_COLUMNS and
docs/calibration.md)."""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping

from model.calibrate.measurements import (
    CSV_COLUMNS,
    CSV_REQUIRED,
    DEFAULT_CSV_ENGINE,
    DEFAULT_DTYPE,
    DEFAULT_PP,
    DEFAULT_TP,
    MEASURED_COLUMNS,
    MS,
    Measurement,
    RowDefaults,
    merge_field,
    number_field,
    row_identity,
    running_requests,
    text_field,
    whole_field,
)
from model.errors import InputError, short
from model.limits import MAX_CSV_FIELD_CHARS, MAX_MEASUREMENT_ROWS

__all__ = ["parse_csv"]


def parse_csv(
    text: str, *, name: str = "measurements.csv", defaults: RowDefaults | None = None
) -> tuple[Measurement, ...]:
    """Measurements from CSV text (header row, columns :data:`CSV_COLUMNS`, case-insensitive).

    Lines starting with ``#`` and blank lines are skipped. Blank cells are "not given"; CLI
    ``defaults`` fill them. Rows are named by their line number in the file ("bench.csv row 7").
    """
    d = defaults or RowDefaults()
    # Comment lines become empty lines so that the reader's line numbers stay the file's.
    lines = ["" if ln.lstrip().startswith("#") else ln for ln in text.splitlines()]
    rows = _csv_rows(lines, name)
    first = next(rows, None)
    if first is None:
        raise InputError(f"{name}, header", "", "a header row naming the columns: " + ", ".join(CSV_COLUMNS))
    header = [h.strip().lower() for h in first[1]]
    unknown = [h for h in header if h not in CSV_COLUMNS]
    if unknown:
        raise InputError(f"{name}, header", unknown[0], "one of " + ", ".join(CSV_COLUMNS))
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise InputError(f"{name}, header", dupes[0], "each column once")
    for col in CSV_REQUIRED:
        if col not in header:
            raise InputError(f"{name}, header", ",".join(header), f"a {col!r} column")
    if not any(c in header for c in ("batch", "concurrency", "request_rate")):
        raise InputError(f"{name}, header", ",".join(header), "a batch, concurrency or request_rate column")
    if not any(c in header for c in MEASURED_COLUMNS):
        raise InputError(
            f"{name}, header", ",".join(header), "at least one of " + ", ".join(MEASURED_COLUMNS)
        )
    out: list[Measurement] = []
    for n, cells in rows:
        if len(out) >= MAX_MEASUREMENT_ROWS:
            raise InputError(name, f"row {n}", f"at most {MAX_MEASUREMENT_ROWS:,} measurement rows")
        if len(cells) != len(header):
            raise InputError(f"{name} row {n}", ",".join(cells), f"{len(header)} cells, like the header")
        row = {h: c.strip() for h, c in zip(header, cells, strict=True)}
        out.append(_csv_row(row, f"{name} row {n}", name, d))
    if not out:
        raise InputError(f"{name}", "(no rows)", "at least one measurement row")
    return tuple(out)


def _csv_rows(lines: list[str], name: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, cells) of each non-blank CSV row; over-long fields and csv errors are InputErrors."""
    reader = csv.reader(lines)
    try:
        for cells in reader:
            if any(len(c) > MAX_CSV_FIELD_CHARS for c in cells):
                raise InputError(
                    f"{name} row {reader.line_num}",
                    "(long field)",
                    f"fields of at most {MAX_CSV_FIELD_CHARS} characters",
                )
            if any(c.strip() for c in cells):
                yield reader.line_num, cells
    except csv.Error as err:
        raise InputError(
            f"{name} row {reader.line_num}", "(row)", f"readable CSV ({short(str(err))})"
        ) from None


def _opt_ms(where: str, row: Mapping[str, str], col: str) -> float | None:
    raw = row.get(col, "")
    return None if raw == "" else number_field(where, col, raw) * MS


def _csv_row(row: Mapping[str, str], where: str, name: str, d: RowDefaults) -> Measurement:
    if row.get("id"):
        where = f"{where} ({row['id']})"
    model = merge_field(where, "model", row.get("model"), d.model)
    gpu = merge_field(where, "gpu", row.get("gpu"), d.gpu)
    if model is None:
        raise InputError(f"{where}, model", "", "a model name (column 'model' or --model)")
    if gpu is None:
        raise InputError(f"{where}, gpu", "", "a GPU name (column 'gpu' or --gpu)")
    tp = whole_field(where, "tp", merge_field(where, "tp", row.get("tp"), d.tp) or DEFAULT_TP)
    pp = whole_field(where, "pp", merge_field(where, "pp", row.get("pp"), d.pp) or DEFAULT_PP)
    dtype = text_field(
        where, "dtype", merge_field(where, "dtype", row.get("dtype"), d.dtype) or DEFAULT_DTYPE
    ).lower()
    kv = merge_field(where, "kv_dtype", row.get("kv_dtype"), d.kv_dtype)
    engine = text_field(
        where, "engine", merge_field(where, "engine", row.get("engine"), d.engine) or DEFAULT_CSV_ENGINE
    )
    isl = number_field(where, "isl", row.get("isl", ""), minimum=1.0, strict=False)
    osl = number_field(where, "osl", row.get("osl", ""), minimum=1.0, strict=False)
    given = [c for c in ("batch", "concurrency", "request_rate") if row.get(c, "")]
    if len(given) != 1:
        raise InputError(
            f"{where}, batch/concurrency/request_rate", given or "(none)", "exactly one of the three per row"
        )
    prefill_s = _opt_ms(where, row, "prefill_ms")
    ttft_s = _opt_ms(where, row, "ttft_ms")
    tpot_s = _opt_ms(where, row, "tpot_ms")
    itl_s = _opt_ms(where, row, "itl_ms")
    tpot_s = tpot_s if tpot_s is not None else itl_s
    tput = row.get("output_throughput", "")
    out_tps = None if tput == "" else number_field(where, "output_throughput", tput)
    if all(v is None for v in (prefill_s, ttft_s, tpot_s, out_tps)):
        raise InputError(
            f"{where}, measurements", "(all empty)", "at least one of " + ", ".join(MEASURED_COLUMNS)
        )
    rate: float | None = None
    if given[0] == "batch":
        load, batch = "batch", float(whole_field(where, "batch", row["batch"]))
    elif given[0] == "concurrency":
        load, batch = "concurrency", float(whole_field(where, "concurrency", row["concurrency"]))
    else:
        load = "rate"
        rate = number_field(where, "request_rate", row["request_rate"])
        if ttft_s is None or tpot_s is None:
            raise InputError(
                f"{where}, request_rate",
                row["request_rate"],
                "a request_rate row also needs ttft_ms and tpot_ms (or itl_ms): the running batch comes "
                "from Little's law, rate x (TTFT + (osl - 1) x TPOT)",
            )
        batch = max(1.0, running_requests(rate, ttft_s, tpot_s, osl))
    return Measurement(
        source=where,
        **row_identity(model, gpu, kv),
        tp=tp,
        pp=pp,
        dtype=dtype,
        engine=engine,
        isl=isl,
        osl=osl,
        load=load,
        batch=batch,
        request_rate_rps=rate,
        prefill_s=prefill_s,
        ttft_s=ttft_s,
        tpot_s=tpot_s,
        output_tokens_per_s=out_tps,
        file=name,
    )
