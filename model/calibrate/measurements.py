"""One measurement row for ``pdplan calibrate`` (:class:`Measurement`), the field checks the readers
share, and the light-load test for a measured TTFT.

Readers (model.calibrate.csv_format, model.calibrate.vllm_format, model.calibrate.load) turn a simple
CSV or vLLM serving-benchmark result JSON into rows, in SI units (seconds, requests/s, tokens/s).
Malformed input raises :class:`model.errors.InputError` whose field names the file, the row and the
column, e.g. ``bench.csv row 3, tpot_ms: got 'abc'; allowed: a number > 0``.

The exact columns and JSON keys read are listed in docs/calibration.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from model.errors import InputError, short
from model.hardware.parallelism import Parallelism
from model.limits import MAX_BATCH, MAX_PARALLEL, MAX_TOKENS, check_int

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

    @property
    def parallel(self) -> Parallelism:
        """The measured instance's layout: TP ``tp`` x PP ``pp`` (an InputError for impossible degrees)."""
        return Parallelism(tp=self.tp, pp=self.pp)

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


# ---------------------------------------------------------------------------------------------
# Shared helpers


def running_requests(rate_rps: float, ttft_s: float, tpot_s: float, output_tokens: float) -> float:
    """Requests in flight by Little's law: rate x time in system, TTFT + (osl - 1) x TPOT
    (Little 1961, Oper. Res. 9(3)); the running batch of a server measured at that rate."""
    return rate_rps * (ttft_s + (output_tokens - 1.0) * tpot_s)


def row_identity(model: object, gpu: object, kv: object) -> dict[str, object]:
    """The model / GPU / KV-dtype fields of a row, normalised the same way for every input format."""
    return {
        "model": str(model).strip(),
        "gpu": str(gpu).strip(),
        "kv_dtype": str(kv).strip().lower() if kv else None,
    }


def number_field(where: str, field: str, raw: Any, *, minimum: float = 0.0, strict: bool = True) -> float:
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


def whole_field(where: str, field: str, raw: Any) -> int:
    value = number_field(where, field, raw, minimum=1.0, strict=False)
    if value != int(value):
        raise InputError(f"{where}, {field}", raw, "a whole number >= 1")
    return int(value)


def text_field(where: str, field: str, raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise InputError(f"{where}, {field}", raw, "a non-empty name")
    return raw.strip()


def merge_field(where: str, field: str, from_file: Any, from_caller: Any) -> Any:
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
