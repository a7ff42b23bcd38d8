"""Request-rate curves over time: the load a day of traffic puts on a deployment.

A :class:`RateCurve` is piecewise constant: row i holds ``rate_rps[i]`` from ``start_s[i]`` until the
next row's start (the last row until ``end_s``). Curves come from a CSV of (time, rate) rows, from a
trace's arrival timestamps (requests per bin / bin width), or from the diurnal preset. Every bad row
is refused with one error naming the row and the field (model.errors.InputError).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from model.errors import InputError, short
from model.limits import (
    MAX_ARRIVAL_S,
    MAX_CSV_FIELD_CHARS,
    MAX_CURVE_ROWS,
    MAX_SCHEDULE_BINS,
    check_file_size,
    check_real,
    is_file,
)
from model.workload.traces import Trace

__all__ = ["DiurnalShape", "RateCurve", "curve_from_trace", "diurnal_curve", "load_curve_csv", "rate_curve"]

MAX_RATE_RPS = 1e7
"""Largest request rate a curve row may carry (the same bound as model.evaluate's rate)."""

TIME_COLUMNS = ("time_s", "time")
RATE_COLUMNS = ("rate_rps", "rate")


@dataclass(frozen=True, eq=False)
class RateCurve:
    """A piecewise-constant request rate: ``rate_rps[i]`` on [start_s[i], start_s[i+1]) (the last row
    until ``end_s``). Times in seconds from the curve's start, rates in requests per second."""

    start_s: np.ndarray
    rate_rps: np.ndarray
    end_s: float
    source: str = ""

    @property
    def duration_s(self) -> float:
        """From the first row's start to ``end_s``."""
        return float(self.end_s - self.start_s[0])

    @property
    def peak_rps(self) -> float:
        """The highest rate of any row."""
        return float(self.rate_rps.max())

    @property
    def mean_rps(self) -> float:
        """Time-weighted mean rate: sum(rate_i x width_i) / duration."""
        return float(np.sum(self.rate_rps * np.diff(np.append(self.start_s, self.end_s))) / self.duration_s)

    def bins(self, resolution_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start_s, end_s, rate_rps) of the rows, each split into equal bins of at most ``resolution_s``
        (the rate is exact in every bin: bins never straddle a row boundary)."""
        resolution_s = check_real("resolution_s", resolution_s, 1e-3, MAX_ARRIVAL_S)
        ends = np.append(self.start_s[1:], self.end_s)
        widths = ends - self.start_s
        pieces_f = np.maximum(1.0, np.ceil(widths / resolution_s - 1e-9))
        if pieces_f.sum() > MAX_SCHEDULE_BINS:
            raise InputError(
                "resolution_s",
                resolution_s,
                f"a resolution giving at most {MAX_SCHEDULE_BINS:,} bins over {self.duration_s:g} s "
                "(model.limits.MAX_SCHEDULE_BINS)",
            )
        pieces = pieces_f.astype(np.int64)
        row = np.repeat(np.arange(len(widths)), pieces)
        k = np.arange(row.size) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        step = widths[row] / pieces[row]
        start = self.start_s[row] + k * step
        end = np.where(k == pieces[row] - 1, ends[row], start + step)
        return start, end, self.rate_rps[row]


def _row_field(source: str, row: int, name: str) -> str:
    return f"{source} row {row} {name}" if source else f"row {row} {name}"


def rate_curve(start_s: object, rate_rps: object, end_s: float | None = None, source: str = "") -> RateCurve:
    """A validated :class:`RateCurve` from row start times (s, strictly increasing) and rates (req/s,
    >= 0). ``end_s`` is when the last row stops; None gives the last row the width of the one before
    (so at least two rows are then needed). Errors name the row (1-based) and the field."""
    try:
        t = np.asarray(start_s, dtype=float).reshape(-1)
        r = np.asarray(rate_rps, dtype=float).reshape(-1)
    except (TypeError, ValueError, OverflowError):
        raise InputError(
            "curve", short(start_s), "sequences of numbers: start times (s) and rates (req/s)"
        ) from None
    if t.size == 0:
        raise InputError("curve", "empty", "at least one row of (time_s, rate_rps)")
    if t.size != r.size:
        raise InputError("curve", f"{t.size} times, {r.size} rates", "as many rates as start times")
    if t.size > MAX_CURVE_ROWS:
        raise InputError(
            "curve", f"{t.size} rows", f"at most {MAX_CURVE_ROWS:,} rows (model.limits.MAX_CURVE_ROWS)"
        )
    bad_t = np.nonzero(~np.isfinite(t) | (t < 0) | (t > MAX_ARRIVAL_S))[0]
    if bad_t.size:
        i = int(bad_t[0])
        raise InputError(_row_field(source, i + 1, "time_s"), t[i], f"a time in [0, {MAX_ARRIVAL_S:g}] s")
    back = np.nonzero(np.diff(t) <= 0)[0]
    if back.size:
        i = int(back[0]) + 1
        raise InputError(
            _row_field(source, i + 1, "time_s"),
            t[i],
            f"a time after the previous row's {t[i - 1]:g} s (times must increase strictly)",
        )
    bad_r = np.nonzero(~np.isfinite(r) | (r < 0) | (r > MAX_RATE_RPS))[0]
    if bad_r.size:
        i = int(bad_r[0])
        raise InputError(
            _row_field(source, i + 1, "rate_rps"), r[i], f"a rate in [0, {MAX_RATE_RPS:g}] req/s"
        )
    if end_s is None:
        if t.size < 2:
            raise InputError("curve", "one row", "at least two rows, or an end time (the last row's end)")
        end = float(t[-1] + (t[-1] - t[-2]))
    else:
        end = check_real("curve end_s", end_s, 0.0, MAX_ARRIVAL_S)
        if end <= t[-1]:
            raise InputError("curve end_s", end, f"a time after the last row's start {t[-1]:g} s")
    if not r.max() > 0:
        raise InputError("curve rate_rps", 0, "at least one row with a rate > 0 req/s")
    return RateCurve(t, r, end, source)


def _number(text: str, source: str, row: int, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(_row_field(source, row, name), short(text), "a number") from None
    if not math.isfinite(value):
        raise InputError(_row_field(source, row, name), text, "a finite number")
    return value


def load_curve_csv(path: str | Path, text: str | None = None) -> RateCurve:
    """A rate curve from a CSV with a header ``time_s,rate_rps`` (or ``time,rate``; times in seconds
    from any origin, rates in req/s); the last row takes the width of the one before. ``text``:
    the file's content when already read (app uploads). Errors name the file, row and field."""
    p = Path(path)
    name = p.name
    if text is None:
        if not is_file(p):
            raise InputError(name, short(str(path)), "an existing CSV file of time_s,rate_rps")
        check_file_size(p, name)
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InputError(name, "(file)", "UTF-8 text: a CSV of time_s,rate_rps") from None
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        raise InputError(name, "empty file", "a header line time_s,rate_rps and at least one row") from None
    except csv.Error as err:
        raise InputError(f"{name} row 1", short(str(err)), "CSV text") from None
    t_col = next((header.index(c) for c in TIME_COLUMNS if c in header), None)
    r_col = next((header.index(c) for c in RATE_COLUMNS if c in header), None)
    if t_col is None or r_col is None:
        raise InputError(f"{name} header", short(",".join(header)), "columns time_s and rate_rps")
    times: list[float] = []
    rates: list[float] = []
    try:
        for n, row in enumerate(reader, start=1):
            if not any(c.strip() for c in row):
                continue
            if len(times) >= MAX_CURVE_ROWS:
                raise InputError(
                    name, f"more than {MAX_CURVE_ROWS:,} rows", "at most MAX_CURVE_ROWS rows (model.limits)"
                )
            if len(row) <= max(t_col, r_col):
                raise InputError(
                    f"{name} row {n}", short(",".join(row)), f"{len(header)} fields like the header"
                )
            if any(len(c) > MAX_CSV_FIELD_CHARS for c in row):
                raise InputError(
                    f"{name} row {n}", "(long field)", f"fields of at most {MAX_CSV_FIELD_CHARS} characters"
                )
            times.append(_number(row[t_col], name, n, "time_s"))
            rates.append(_number(row[r_col], name, n, "rate_rps"))
    except csv.Error as err:
        raise InputError(f"{name} row {reader.line_num}", short(str(err)), "CSV text") from None
    if not times:
        raise InputError(name, "no rows", "at least two rows of time_s,rate_rps")
    t = np.asarray(times)
    return rate_curve(t - t[0], rates, None, name)


def curve_from_trace(trace: Trace, bin_s: float = 60.0) -> RateCurve:
    """The arrival rate of a trace: requests arriving in each ``bin_s``-second bin / ``bin_s``."""
    if not isinstance(trace, Trace):
        raise InputError("trace", type(trace).__name__, "a Trace (model.workload.traces.load_trace)")
    bin_s = check_real("bin_s", bin_s, 1e-3, 1e7)
    n_bins = max(1, math.ceil(trace.duration_s / bin_s - 1e-12))
    if n_bins > MAX_CURVE_ROWS:
        raise InputError(
            "bin_s",
            bin_s,
            f"a bin giving at most {MAX_CURVE_ROWS:,} rows over the trace's {trace.duration_s:g} s",
        )
    counts = np.bincount(np.minimum((trace.arrival_s / bin_s).astype(np.int64), n_bins - 1), minlength=n_bins)
    return rate_curve(np.arange(n_bins) * bin_s, counts / bin_s, n_bins * bin_s, trace.source)


@dataclass(frozen=True)
class DiurnalShape:
    """A day of traffic: a sinusoid with its trough at ``trough_hour`` plus a Gaussian peak at
    ``peak_hour`` (``peak_width_h`` standard deviation, ``peak_weight`` of the swing), scaled so the
    highest rate is the curve's peak and the lowest is about ``trough_fraction`` of it.

    The shape follows the daily cycle of production LLM traffic: a night trough, a daytime rise and
    an afternoon peak, as in the week-long Azure LLM inference trace 2024 (Stojkovic et al.,
    "DynamoLLM", HPCA 2025: conversation and coding load follow a diurnal pattern) and BurstGPT
    (Wang et al. 2024: periodic daily pattern of ChatGPT and GPT-4 requests on Azure OpenAI). The
    default numbers are illustrative, not fitted to either trace: fit them to your traffic, or load
    your own curve (``load_curve_csv``, ``curve_from_trace``).
    """

    trough_fraction: float = 0.3
    trough_hour: float = 4.0
    peak_hour: float = 14.0
    peak_width_h: float = 1.5
    peak_weight: float = 0.3
    step_s: float = 300.0
    days: int = 1


def diurnal_curve(peak_rps: float, shape: DiurnalShape | None = None) -> RateCurve:
    """The diurnal preset: rate(h) = peak x raw(h) / max raw, with
    raw(h) = f + (1 - f) x [(1 - a) x (1 - cos(2 pi (h - h_trough) / 24)) / 2
                            + a x exp(-d(h, h_peak)^2 / 2w^2)]
    (f trough fraction, a peak weight, w peak width, d the circular distance in hours), sampled
    every ``step_s`` seconds for ``days`` days (see :class:`DiurnalShape` for the sources)."""
    s = DiurnalShape() if shape is None else shape
    if not isinstance(s, DiurnalShape):
        raise InputError("shape", type(s).__name__, "a DiurnalShape")
    peak = check_real("peak_rps", peak_rps, 0.0, MAX_RATE_RPS, low_open=True)
    f = check_real("trough_fraction", s.trough_fraction, 0.0, 1.0)
    a = check_real("peak_weight", s.peak_weight, 0.0, 1.0)
    w = check_real("peak_width_h", s.peak_width_h, 0.01, 24.0)
    check_real("trough_hour", s.trough_hour, 0.0, 24.0)
    check_real("peak_hour", s.peak_hour, 0.0, 24.0)
    step = check_real("step_s", s.step_s, 1.0, 86400.0)
    if isinstance(s.days, bool) or not isinstance(s.days, int) or not 1 <= s.days <= 366:
        raise InputError("days", s.days, "a whole number of days in [1, 366]")
    n = math.ceil(s.days * 86400.0 / step)
    if n > MAX_CURVE_ROWS:
        raise InputError("step_s", step, f"a step giving at most {MAX_CURVE_ROWS:,} rows over {s.days} days")
    t = np.arange(n) * step
    h = (t + step / 2) / 3600.0 % 24.0  # each row's rate at its midpoint
    d = np.abs((h - s.peak_hour + 12.0) % 24.0 - 12.0)
    wave = (1.0 - np.cos(2 * np.pi * (h - s.trough_hour) / 24.0)) / 2.0
    raw = f + (1.0 - f) * ((1.0 - a) * wave + a * np.exp(-(d**2) / (2 * w * w)))
    return rate_curve(t, peak * raw / raw.max(), s.days * 86400.0, "diurnal preset")
