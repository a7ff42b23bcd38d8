"""Reading measurements for ``pdplan calibrate``: a simple CSV, or vLLM serving-benchmark result JSON.

Every row becomes one :class:`Measurement` (SI units inside: seconds, requests/s, tokens/s).
Malformed input raises :class:`model.errors.InputError` whose field names the file, the row and
the column, e.g. ``bench.csv row 3, tpot_ms: got 'abc'; allowed: a number > 0``.

The exact columns and JSON keys read are listed in docs/calibration.md.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.errors import InputError, short
from model.limits import (
    MAX_BATCH,
    MAX_CSV_FIELD_CHARS,
    MAX_MEASUREMENT_ROWS,
    MAX_PARALLEL,
    MAX_TOKENS,
    check_file_size,
    check_int,
    parse_json,
)

FORMATS = ("csv", "vllm-json")
LOADS = ("batch", "concurrency", "rate")
MS = 1e-3

# CSV columns (lower case). Exactly one of batch / concurrency / request_rate per row; at least one
# measured latency or throughput column per row.
CSV_COLUMNS = (
    "id",
    "model",
    "gpu",
    "tp",
    "pp",
    "dtype",
    "kv_dtype",
    "engine",
    "isl",
    "osl",
    "batch",
    "concurrency",
    "request_rate",
    "prefill_ms",
    "ttft_ms",
    "tpot_ms",
    "itl_ms",
    "output_throughput",
    "note",
)
CSV_REQUIRED = ("isl", "osl")
MEASURED_COLUMNS = ("prefill_ms", "ttft_ms", "tpot_ms", "itl_ms", "output_throughput")

# Defaults when neither the file nor the caller says (documented in docs/calibration.md).
DEFAULT_TP = 1
DEFAULT_PP = 1
DEFAULT_DTYPE = "bf16"
DEFAULT_CSV_ENGINE = "custom"
DEFAULT_VLLM_ENGINE = "vllm"


# Plausible ranges of measured values: denormal or absurd numbers (1e-320 s) would make the
# least-squares fit divide by ~0 and return NaN, so they are refused at the edge instead.
_TIME_RANGE = (1e-7, 1e5)  # 100 ns (below any GPU kernel) to ~28 hours
_MEASURED_RANGES = (
    ("prefill_s", _TIME_RANGE, "s"),
    ("ttft_s", _TIME_RANGE, "s"),
    ("tpot_s", _TIME_RANGE, "s"),
    ("output_tokens_per_s", (1e-6, 1e9), "tokens/s"),
)
_RATE_RANGE = (1e-6, 1e6)


@dataclass(frozen=True)
class Measurement:
    """One measured operating point of one model instance (``tp`` x ``pp`` GPUs of kind ``gpu``).

    ``load`` says how the requests were offered:

    - ``"batch"``: a static batch of ``batch`` requests started together (e.g. vLLM
      ``benchmark_latency``); TTFT is the prefill of the whole batch.
    - ``"concurrency"``: a closed loop keeping ``batch`` requests in flight (``--max-concurrency``).
    - ``"rate"``: an open loop at ``request_rate_rps`` (Poisson, or gamma with ``burstiness``);
      ``batch`` is the mean number of running requests, from Little's law on the measured data.

    Measured values are means in seconds (``output_tokens_per_s`` in tokens/s); None = not measured.
    ``burst``: every request was sent at once (vLLM ``request_rate`` inf, no concurrency cap);
    ``request_rate_rps`` is then the measured completion rate. ``file``: the file it came from.
    """

    source: str
    model: str
    gpu: str
    tp: int
    pp: int
    dtype: str
    kv_dtype: str | None
    engine: str
    isl: float
    osl: float
    load: str
    batch: float
    request_rate_rps: float | None = None
    burstiness: float = 1.0
    prefill_s: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    output_tokens_per_s: float | None = None
    burst: bool = False
    file: str = ""

    def __post_init__(self) -> None:
        where = self.source
        if self.load not in LOADS:
            raise InputError(f"{where}, load", self.load, " / ".join(LOADS))
        for name, maximum in (("isl", MAX_TOKENS), ("osl", MAX_TOKENS), ("batch", MAX_BATCH)):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and 1 <= value <= maximum):
                raise InputError(f"{where}, {name}", value, f"a number in [1, {maximum:g}]")
        if self.load == "rate" and not (
            isinstance(self.request_rate_rps, int | float)
            and math.isfinite(self.request_rate_rps)
            and _RATE_RANGE[0] <= self.request_rate_rps <= _RATE_RANGE[1]
        ):
            raise InputError(
                f"{where}, request_rate", self.request_rate_rps, "a rate in [1e-06, 1e+06] req/s"
            )
        for name, (low, high), unit in _MEASURED_RANGES:
            value = getattr(self, name)
            if value is not None and not (
                isinstance(value, int | float) and math.isfinite(value) and low <= value <= high
            ):
                raise InputError(f"{where}, {name}", value, f"a value in [{low:g}, {high:g}] {unit}, or None")
        if all(getattr(self, n) is None for n in ("prefill_s", "ttft_s", "tpot_s", "output_tokens_per_s")):
            raise InputError(
                f"{where}, measurements", None, "at least one of prefill, TTFT, TPOT/ITL or output throughput"
            )

    @property
    def prefills_per_step(self) -> float:
        """Mean number of *other* requests' prompts carried by each decode step of a request.

        Static batch: 0 (all prefills happen before decoding). Closed loop of C requests: each
        other slot starts one request per ~osl steps, so (C - 1) / osl. Open loop at rate lambda:
        lambda x TPOT arrivals per step, times (B - 1) / B, the share that lands while this request
        is decoding (B = mean running requests). First-order continuous-batching model
        (Orca, Yu et al. 2022; Sarathi-Serve, Agrawal et al. 2024, sec. 2: prefills stall decodes).
        """
        if self.load == "batch":
            return 0.0
        if self.load == "concurrency":
            return (self.batch - 1.0) / self.osl
        tpot = self.tpot_s if self.tpot_s is not None else 0.0
        return float(self.request_rate_rps or 0.0) * tpot * (self.batch - 1.0) / self.batch


# ---------------------------------------------------------------------------------------------
# Shared helpers


def running_requests(rate_rps: float, ttft_s: float, tpot_s: float, output_tokens: float) -> float:
    """Requests in flight by Little's law: rate x time in system, TTFT + (osl - 1) x TPOT
    (Little 1961, Oper. Res. 9(3)); the running batch of a server measured at that rate."""
    return rate_rps * (ttft_s + (output_tokens - 1.0) * tpot_s)


def _identity(model: object, gpu: object, kv: object) -> dict[str, object]:
    """The model / GPU / KV-dtype fields of a row, normalised the same way for every input format."""
    return {
        "model": str(model).strip(),
        "gpu": str(gpu).strip(),
        "kv_dtype": str(kv).strip().lower() if kv else None,
    }


def _number(where: str, field: str, raw: Any, *, minimum: float = 0.0, strict: bool = True) -> float:
    """A finite number > minimum (or >= minimum when ``strict`` is False); errors name row and field."""
    bad = f"a number {'>' if strict else '>='} {minimum:g}"
    if isinstance(raw, bool) or raw is None:
        raise InputError(f"{where}, {field}", raw, bad)
    try:
        value = float(raw.strip()) if isinstance(raw, str) else float(raw)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{where}, {field}", short(raw), bad) from None
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        raise InputError(f"{where}, {field}", raw, bad)
    return value


def _whole(where: str, field: str, raw: Any) -> int:
    value = _number(where, field, raw, minimum=1.0, strict=False)
    if value != int(value):
        raise InputError(f"{where}, {field}", raw, "a whole number >= 1")
    return int(value)


def _text(where: str, field: str, raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise InputError(f"{where}, {field}", raw, "a non-empty name")
    return raw.strip()


def _merge(where: str, field: str, from_file: Any, from_caller: Any) -> Any:
    """The caller's value fills a field the file leaves empty; a disagreement is an error."""
    if from_file is None or (isinstance(from_file, str) and not from_file.strip()):
        return from_caller
    if from_caller is not None and str(from_caller).strip().lower() != str(from_file).strip().lower():
        raise InputError(
            f"{where}, {field}",
            from_file,
            f"the value given on the command line ({from_caller!r}) or no value",
        )
    return from_file


def classify_ttft(m: Measurement, max_utilisation: float) -> tuple[bool, str]:
    """Whether a measured TTFT was taken at light load (usable to fit prefill efficiency), and if not why.

    - static batch: always (TTFT = prefill of the batch; nothing queues);
    - closed loop: only at concurrency 1 (at C > 1 prompts contend with each other and with decodes);
    - open loop at rate lambda: only when lambda x TTFT <= ``max_utilisation``. TTFT >= prefill time,
      so lambda x TTFT bounds the prefill utilisation from above using the data alone; at <= 0.5 the
      M/D/1 queue wait the fit adds is at most half a prefill (Kleinrock 1975, vol. 1, sec. 5.7);
    - all requests sent at once (request rate "inf" without a concurrency cap): never.
    """
    if m.ttft_s is None or m.load == "batch":
        return True, ""
    if m.load == "concurrency":
        if m.batch <= 1.0:
            return True, ""
        return False, f"TTFT at concurrency {m.batch:g} > 1 includes contention between prompts"
    if m.burst:
        return False, "all requests sent at once (request rate inf, no concurrency cap): TTFT is queueing"
    rho = float(m.request_rate_rps or 0.0) * m.ttft_s
    if rho <= max_utilisation:
        return True, ""
    return (
        False,
        f"request_rate x TTFT = {rho:.3g} > {max_utilisation:g} (heavy load: TTFT is mostly queueing)",
    )


# ---------------------------------------------------------------------------------------------
# CSV


@dataclass(frozen=True)
class RowDefaults:
    """Values the caller (CLI flags) supplies for fields a file leaves out."""

    model: str | None = None
    gpu: str | None = None
    tp: int | None = None
    pp: int | None = None
    dtype: str | None = None
    kv_dtype: str | None = None
    engine: str | None = None

    def __post_init__(self) -> None:
        for name in ("tp", "pp"):
            value = getattr(self, name)
            if value is not None:
                check_int(name, value, 1, MAX_PARALLEL, "a parallel degree")
        for name in ("model", "gpu", "dtype", "kv_dtype", "engine"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InputError(name, short(value), "a non-empty name, or None")


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
    return None if raw == "" else _number(where, col, raw) * MS


def _csv_row(row: Mapping[str, str], where: str, name: str, d: RowDefaults) -> Measurement:
    if row.get("id"):
        where = f"{where} ({row['id']})"
    model = _merge(where, "model", row.get("model"), d.model)
    gpu = _merge(where, "gpu", row.get("gpu"), d.gpu)
    if model is None:
        raise InputError(f"{where}, model", "", "a model name (column 'model' or --model)")
    if gpu is None:
        raise InputError(f"{where}, gpu", "", "a GPU name (column 'gpu' or --gpu)")
    tp = _whole(where, "tp", _merge(where, "tp", row.get("tp"), d.tp) or DEFAULT_TP)
    pp = _whole(where, "pp", _merge(where, "pp", row.get("pp"), d.pp) or DEFAULT_PP)
    dtype = _text(where, "dtype", _merge(where, "dtype", row.get("dtype"), d.dtype) or DEFAULT_DTYPE).lower()
    kv = _merge(where, "kv_dtype", row.get("kv_dtype"), d.kv_dtype)
    engine = _text(
        where, "engine", _merge(where, "engine", row.get("engine"), d.engine) or DEFAULT_CSV_ENGINE
    )
    isl = _number(where, "isl", row.get("isl", ""), minimum=1.0, strict=False)
    osl = _number(where, "osl", row.get("osl", ""), minimum=1.0, strict=False)
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
    out_tps = None if tput == "" else _number(where, "output_throughput", tput)
    if all(v is None for v in (prefill_s, ttft_s, tpot_s, out_tps)):
        raise InputError(
            f"{where}, measurements", "(all empty)", "at least one of " + ", ".join(MEASURED_COLUMNS)
        )
    rate: float | None = None
    if given[0] == "batch":
        load, batch = "batch", float(_whole(where, "batch", row["batch"]))
    elif given[0] == "concurrency":
        load, batch = "concurrency", float(_whole(where, "concurrency", row["concurrency"]))
    else:
        load = "rate"
        rate = _number(where, "request_rate", row["request_rate"])
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
        **_identity(model, gpu, kv),
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


# ---------------------------------------------------------------------------------------------
# vLLM serving-benchmark result JSON


def _json_objects(text: str, name: str) -> list[tuple[str, Any]]:
    """One JSON object, a JSON list of objects, or JSON Lines (``vllm bench serve --append-result``)."""
    stripped = text.strip()
    if not stripped:
        raise InputError(f"{name}", "(empty file)", "a vLLM benchmark result JSON object")
    try:  # one document; depth, integer digits and NaN limited (model.limits.parse_json)
        data = parse_json(stripped, name)
    except InputError as whole:
        if whole.value != "(text)":  # valid JSON that breaks a limit
            raise
        objs: list[tuple[str, Any]] = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            if len(objs) >= MAX_MEASUREMENT_ROWS:
                raise InputError(name, f"{n} lines", f"at most {MAX_MEASUREMENT_ROWS:,} results") from None
            try:
                objs.append((f"{name} line {n}", parse_json(line, f"{name} line {n}")))
            except InputError as err:
                raise InputError(f"{name} line {n}", line[:60], err.allowed) from None
        return objs
    if isinstance(data, list):
        return [(f"{name} [{i}]", obj) for i, obj in enumerate(data)]
    return [(name, data)]


def _get(obj: Mapping[str, Any], where: str, key: str, *, required: bool = True) -> Any:
    if key in obj and obj[key] is not None:
        return obj[key]
    if required:
        raise InputError(f"{where}, {key}", None, "present (vLLM benchmark result key)")
    return None


def _opt_json_ms(obj: Mapping[str, Any], where: str, key: str) -> float | None:
    raw = _get(obj, where, key, required=False)
    if raw is None:
        return None
    value = _number(where, key, raw, minimum=0.0, strict=False)
    return value * MS if value > 0 else None  # vLLM writes 0 when a metric had no samples


def parse_vllm_json(
    text: str, *, name: str = "result.json", defaults: RowDefaults | None = None
) -> tuple[Measurement, ...]:
    """Measurements from vLLM ``benchmark_serving.py`` / ``vllm bench serve --save-result`` output.

    Keys read (vLLM benchmarks/benchmark_serving.py and vllm/benchmarks/serve.py, ``result_json``):
    ``completed``, ``total_input_tokens``, ``total_output_tokens``, ``request_rate`` (number or
    "inf"), ``burstiness``, ``max_concurrency``, ``request_throughput``, ``output_throughput``,
    ``mean_ttft_ms``, ``mean_tpot_ms``, ``mean_itl_ms``, ``mean_e2el_ms``; ``model_id`` and the
    ``--metadata`` keys ``gpu``, ``tp``, ``pp``, ``dtype``, ``kv_dtype``, ``engine`` when present.
    """
    d = defaults or RowDefaults()
    out = []
    for where, obj in _json_objects(text, name):
        if not isinstance(obj, dict):
            raise InputError(where, type(obj).__name__, "a JSON object (one benchmark result)")
        out.append(_vllm_row(obj, where, name, d))
    if not out:
        raise InputError(name, "(no results)", "at least one benchmark result")
    return tuple(out)


def _vllm_row(obj: Mapping[str, Any], where: str, name: str, d: RowDefaults) -> Measurement:
    model_id = obj.get("model_id")
    model = d.model if d.model is not None else model_id
    if not model:
        raise InputError(f"{where}, model_id", model_id, "a model name (the file's model_id or --model)")
    gpu = _merge(where, "gpu", obj.get("gpu"), d.gpu)
    if gpu is None:
        raise InputError(f"{where}, gpu", None, "a GPU name (--gpu, or --metadata gpu=... when benchmarking)")
    tp = _whole(where, "tp", _merge(where, "tp", obj.get("tp"), d.tp) or DEFAULT_TP)
    pp = _whole(where, "pp", _merge(where, "pp", obj.get("pp"), d.pp) or DEFAULT_PP)
    dtype = _text(where, "dtype", _merge(where, "dtype", obj.get("dtype"), d.dtype) or DEFAULT_DTYPE).lower()
    kv = _merge(where, "kv_dtype", obj.get("kv_dtype"), d.kv_dtype)
    engine = _text(
        where, "engine", _merge(where, "engine", obj.get("engine"), d.engine) or DEFAULT_VLLM_ENGINE
    )

    completed = _whole(where, "completed", _get(obj, where, "completed"))
    isl = _number(where, "total_input_tokens", _get(obj, where, "total_input_tokens")) / completed
    osl = _number(where, "total_output_tokens", _get(obj, where, "total_output_tokens")) / completed
    if isl < 1 or osl < 1:
        raise InputError(
            f"{where}, total_input_tokens/total_output_tokens", (isl, osl), ">= 1 token per request"
        )
    raw_rate = _get(obj, where, "request_rate")
    infinite = isinstance(raw_rate, str) and raw_rate.strip().lower() in ("inf", "infinity")
    rate = None if infinite else _number(where, "request_rate", raw_rate)
    raw_b = obj.get("burstiness")
    burstiness = 1.0 if raw_b is None else _number(where, "burstiness", raw_b)
    raw_c = obj.get("max_concurrency")
    cap = None if raw_c is None else float(_whole(where, "max_concurrency", raw_c))

    ttft_s = _opt_json_ms(obj, where, "mean_ttft_ms")
    tpot_s = _opt_json_ms(obj, where, "mean_tpot_ms")
    itl_s = _opt_json_ms(obj, where, "mean_itl_ms")
    tpot_s = tpot_s if tpot_s is not None else itl_s
    e2e_s = _opt_json_ms(obj, where, "mean_e2el_ms")
    raw_out = obj.get("output_throughput")
    out_tps = None if raw_out is None else _number(where, "output_throughput", raw_out, strict=False) or None
    if ttft_s is None and tpot_s is None:
        raise InputError(f"{where}, mean_ttft_ms/mean_tpot_ms", None, "a TTFT or TPOT/ITL statistic")

    limit = float(min(cap, completed)) if cap is not None else float(completed)
    if rate is None and cap is not None:
        load, batch, lam = "concurrency", limit, None
    else:
        load = "rate"
        if rate is None:  # every request sent at once: arrival rate = measured completions per second
            lam = _number(where, "request_throughput", _get(obj, where, "request_throughput"))
        else:
            lam = rate
        if out_tps is not None and tpot_s is not None:
            running = out_tps * tpot_s  # tokens/s x s/token per request = requests decoding (Little)
        elif e2e_s is not None:
            running = lam * e2e_s
        elif ttft_s is not None and tpot_s is not None:
            running = running_requests(lam, ttft_s, tpot_s, osl)
        else:
            raise InputError(f"{where}, output_throughput", None, "present (to know the running batch)")
        batch = min(max(1.0, running), limit)
    return Measurement(
        source=where,
        **_identity(model, gpu, kv),
        tp=tp,
        pp=pp,
        dtype=dtype,
        engine=engine,
        isl=isl,
        osl=osl,
        load=load,
        batch=batch,
        request_rate_rps=lam,
        burstiness=burstiness,
        ttft_s=ttft_s,
        tpot_s=tpot_s,
        output_tokens_per_s=out_tps,
        burst=rate is None and load == "rate",
        file=name,
    )


# ---------------------------------------------------------------------------------------------
# Files


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
