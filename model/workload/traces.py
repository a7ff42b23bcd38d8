"""Request traces: one loader per public format, each returning a :class:`Trace`.

A trace is a list of requests with an arrival time, a prompt length and an output length. Times
are rebased so the first arrival is at 0 s and requests are sorted by arrival (stable, so ties keep
file order). A malformed row raises :class:`TraceFormatError` naming the file, the line number
(1-based, the header is line 1) and the column; an empty trace is an error too.

Formats
-------
* Azure LLM inference trace 2023 (Patel et al., Splitwise, ISCA 2024): CSV
  ``TIMESTAMP,ContextTokens,GeneratedTokens`` with ``YYYY-MM-DD HH:MM:SS.fffffff`` timestamps.
* Mooncake (Qin et al., "Mooncake: a KVCache-centric disaggregated architecture for LLM serving",
  FAST 2025; trace in the kvcache-ai/Mooncake repository): JSON lines with ``timestamp`` (ms since
  the first request), ``input_length``, ``output_length`` and ``hash_ids`` (one id per KV block;
  equal ids mean a shared prefix block), and optionally ``session_id`` (requests of one multi-turn
  conversation or agent loop share it; model.workload.sessions).
* BurstGPT (Wang et al., "BurstGPT: a real-world workload dataset to optimize LLM serving
  systems", 2024): CSV with ``Timestamp`` (s), ``Request tokens``, ``Response tokens``; rows with
  0 response tokens are failed requests, dropped and counted in ``dropped_rows``.
* Any CSV with a column mapping (:func:`load_csv`).
"""

from __future__ import annotations

import csv
import functools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np

from model.errors import InputError, PdplanError, short
from model.limits import MAX_CSV_FIELD_CHARS, MAX_TRACE_ROWS, check_file_size, is_file, parse_json

__all__ = [
    "Trace",
    "TraceFormatError",
    "load_azure_csv",
    "load_burstgpt_csv",
    "load_csv",
    "load_mooncake_jsonl",
    "load_trace",
]

TIME_UNITS_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


class TraceFormatError(PdplanError):
    """A trace file is malformed: names the file, the 1-based line and the column."""

    def __init__(self, path: str | Path, line: int | None, column: str | None, problem: str) -> None:
        self.path = str(path)
        self.line = line
        self.column = column
        where = self.path + (f":{line}" if line is not None else "")
        col = f" column {column!r}:" if column is not None else ""
        super().__init__(f"{where}:{col} {problem}")


@dataclass(frozen=True, eq=False)
class Trace:
    """Requests of a trace, sorted by arrival, first arrival at 0 s.

    ``dropped_rows`` counts rows the loader skipped on purpose (e.g. BurstGPT failures).
    ``prefix_reuse_fraction`` is, when the format says which KV blocks repeat (Mooncake
    ``hash_ids``), the fraction of prompt blocks seen earlier in the trace: the prefix-cache hit
    rate an unbounded cache would reach; None otherwise. ``hash_ids`` keeps the block ids of each
    request (a tuple per request, in arrival order; None without them): the simulator's per-instance
    LRU caches and model.workload.prefix.replay_prefix_cache read them. ``session_ids`` (an object
    array, None without them) groups requests into sessions.
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    source: str
    dropped_rows: int = 0
    prefix_reuse_fraction: float | None = None
    hash_ids: tuple[tuple, ...] | None = None
    session_ids: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    @property
    def duration_s(self) -> float:
        """Time from first to last arrival."""
        return float(self.arrival_s[-1])

    @property
    def mean_rate_rps(self) -> float:
        """(n - 1) / duration: arrivals per second between the first and the last (inf if duration 0)."""
        d = self.duration_s
        return (len(self) - 1) / d if d > 0 else math.inf

    @property
    def interarrival_scv(self) -> float:
        """Squared coefficient of variation of the gaps between consecutive arrivals (nan if < 3 rows)."""
        gaps = np.diff(self.arrival_s)
        if gaps.size < 2 or gaps.mean() == 0:
            return math.nan
        return float(gaps.var() / gaps.mean() ** 2)


def _make_trace(
    path: Path,
    times_s: list[float],
    prompts: list[int],
    outputs: list[int],
    dropped: int,
    reuse: float | None = None,
    hash_ids: list[tuple] | None = None,
    sessions: list | None = None,
) -> Trace:
    if not times_s:
        raise TraceFormatError(path, None, None, f"no requests in the trace ({dropped} rows dropped)")
    t = np.asarray(times_s, dtype=float)
    order = np.argsort(t, kind="stable")
    t = t[order] - t[order[0]]
    return Trace(
        arrival_s=t,
        prompt_tokens=np.asarray(prompts, dtype=np.int64)[order],
        output_tokens=np.asarray(outputs, dtype=np.int64)[order],
        source=path.name,
        dropped_rows=dropped,
        prefix_reuse_fraction=reuse,
        hash_ids=tuple(hash_ids[i] for i in order) if hash_ids is not None else None,
        session_ids=np.array([sessions[i] for i in order], dtype=object) if sessions is not None else None,
    )


# Longest prompt or output a trace row may carry: far beyond any model's context window, small
# enough that token counts stay exact int64 values.
MAX_TRACE_TOKENS = 100_000_000


def _int_field(path: Path, line: int, column: str, text: object, minimum: int) -> int:
    if isinstance(text, bool):
        raise TraceFormatError(path, line, column, f"expected an integer >= {minimum}, got {text!r}")
    try:
        if isinstance(text, int):
            v = text
        elif isinstance(text, float) and text.is_integer():
            v = int(text)
        else:
            s = str(text).strip()
            v = int(float(s)) if re.fullmatch(r"[+-]?\d+(\.0*)?", s) else int(s)
    except (TypeError, ValueError, OverflowError):
        raise TraceFormatError(
            path, line, column, f"expected an integer >= {minimum}, got {str(text)[:40]!r}"
        ) from None
    if v < minimum or v > MAX_TRACE_TOKENS:
        raise TraceFormatError(
            path, line, column, f"expected an integer in [{minimum}, {MAX_TRACE_TOKENS}], got {str(v)[:40]}"
        )
    return v


def _float_field(path: Path, line: int, column: str, text: object) -> float:
    try:
        v = float(text) if not isinstance(text, bool) else math.nan
    except (TypeError, ValueError, OverflowError):
        v = math.nan
    if not math.isfinite(v) or v < 0:
        raise TraceFormatError(path, line, column, f"expected a finite time >= 0, got {short(text)!r}")
    return v


_DT = re.compile(r"^\s*(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?\s*$")


def _datetime_ns(path: Path, line: int, column: str, text: str) -> int:
    """Integer ns since 0001-01-01 of ``YYYY-MM-DD HH:MM:SS[.fffffffff]`` (no time zone; exact)."""
    m = _DT.match(text)
    if m is None:
        raise TraceFormatError(
            path, line, column, f"expected a timestamp like '2023-11-16 18:17:03.9799600', got {text!r}"
        )
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    frac = m.group(7) or "0"
    try:
        day = date(y, mo, d).toordinal()
    except ValueError as exc:
        raise TraceFormatError(path, line, column, f"invalid date in {text!r}: {exc}") from None
    if h > 23 or mi > 59 or s > 60:
        raise TraceFormatError(path, line, column, f"invalid time of day in {text!r}")
    return (day * 86400 + h * 3600 + mi * 60 + s) * 10**9 + int(frac) * 10 ** (9 - len(frac))


def _open_csv(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row dict) for each data row; header checked by the caller via fieldnames."""
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        try:
            if reader.fieldnames is None:
                raise TraceFormatError(path, 1, None, "empty file: expected a header line")
            _check_fields(path, 1, reader.fieldnames)
            yield 1, {name: name for name in reader.fieldnames}
            for n, row in enumerate(reader, start=1):
                if None in row or any(v is None for v in row.values()):
                    raise TraceFormatError(
                        path,
                        reader.line_num,
                        None,
                        f"expected {len(reader.fieldnames)} fields, got a different count",
                    )
                _check_rows(path, reader.line_num, n)
                _check_fields(path, reader.line_num, row.values())
                yield reader.line_num, row
        except csv.Error as err:  # e.g. a field over the csv module's own limit, a NUL byte
            raise TraceFormatError(
                path, reader.line_num, None, f"not readable CSV: {short(str(err))}"
            ) from None


def _check_fields(path: Path, line: int, fields: Iterable[str]) -> None:
    """Refuse a CSV field longer than MAX_CSV_FIELD_CHARS (numbers and timestamps are short)."""
    for f in fields:
        if len(f) > MAX_CSV_FIELD_CHARS:
            raise TraceFormatError(
                path, line, None, f"a field of {len(f):,} characters (at most {MAX_CSV_FIELD_CHARS:,})"
            )


def _check_rows(path: Path, line: int, rows: int) -> None:
    """Refuse a trace with more than MAX_TRACE_ROWS requests (memory while loading)."""
    if rows > MAX_TRACE_ROWS:
        raise TraceFormatError(
            path,
            line,
            None,
            f"more than {MAX_TRACE_ROWS:,} requests; load a slice (the loader holds every row in memory)",
        )


def _require_columns(path: Path, header: Iterable[str], needed: Iterable[str]) -> None:
    have = list(header)
    missing = [c for c in needed if c not in have]
    if missing:
        raise TraceFormatError(path, 1, missing[0], f"missing column; header has {have}")


def _as_path(path: str | Path) -> Path:
    if not isinstance(path, str | Path) or not str(path).strip():
        raise InputError("path", short(path), "a trace file path (str or Path)")
    p = Path(path)
    if not is_file(p):
        raise InputError("path", short(str(path)), "an existing trace file")
    check_file_size(p, "path")
    return p


def load_csv(
    path: str | Path,
    columns: dict[str, str] | None = None,
    time_unit: str = "s",
    *,
    drop_zero_output: bool = False,
) -> Trace:
    """Load any CSV given ``columns={"time": ..., "prompt": ..., "output": ...}`` (header names).

    ``time_unit`` is one of s, ms, us, ns (numbers) or "datetime" (``YYYY-MM-DD HH:MM:SS.f``).
    Prompt lengths must be >= 1; output lengths >= 1, or rows with 0 output are dropped and
    counted when ``drop_zero_output`` is set.
    """
    p = _as_path(path)
    if columns is not None and not (
        isinstance(columns, Mapping) and all(isinstance(v, str) for v in columns.values())
    ):
        raise InputError("columns", short(columns), "a mapping of 'time', 'prompt', 'output' to header names")
    cols = dict(columns or {"time": "time", "prompt": "prompt", "output": "output"})
    if set(cols) != {"time", "prompt", "output"}:
        raise InputError("columns", columns, "a mapping with exactly the keys 'time', 'prompt', 'output'")
    if not isinstance(time_unit, str) or (time_unit != "datetime" and time_unit not in TIME_UNITS_S):
        raise InputError("time_unit", time_unit, "one of " + ", ".join([*TIME_UNITS_S, "datetime"]))
    scale = TIME_UNITS_S.get(time_unit, 1.0)
    times: list[float] = []
    times_ns: list[int] = []
    prompts: list[int] = []
    outputs: list[int] = []
    dropped = 0
    rows = _open_csv(p)
    _, header = next(rows)
    _require_columns(p, header, cols.values())
    tc, pc, oc = cols["time"], cols["prompt"], cols["output"]
    for line, row in rows:
        out = _int_field(p, line, oc, row[oc], 0)
        if out == 0:
            if drop_zero_output:
                dropped += 1
                continue
            raise TraceFormatError(p, line, oc, "expected an integer >= 1, got 0")
        if time_unit == "datetime":
            times_ns.append(_datetime_ns(p, line, tc, row[tc]))
        else:
            times.append(_float_field(p, line, tc, row[tc]) * scale)
        prompts.append(_int_field(p, line, pc, row[pc], 1))
        outputs.append(out)
    if times_ns:  # subtract the first instant in exact integers, then convert: keeps 100 ns digits
        t0 = min(times_ns)
        times = [(t - t0) * 1e-9 for t in times_ns]
    return _make_trace(p, times, prompts, outputs, dropped)


def load_azure_csv(path: str | Path) -> Trace:
    """Azure LLM inference trace 2023 CSV (``TIMESTAMP,ContextTokens,GeneratedTokens``)."""
    cols = {"time": "TIMESTAMP", "prompt": "ContextTokens", "output": "GeneratedTokens"}
    return load_csv(path, cols, time_unit="datetime")


def load_burstgpt_csv(path: str | Path) -> Trace:
    """BurstGPT CSV (``Timestamp`` s, ``Request tokens``, ``Response tokens``); failures dropped, counted."""
    cols = {"time": "Timestamp", "prompt": "Request tokens", "output": "Response tokens"}
    return load_csv(path, cols, time_unit="s", drop_zero_output=True)


def load_mooncake_jsonl(path: str | Path, block_tokens: int = 512) -> Trace:
    """Mooncake JSONL trace; also estimates prefix reuse from ``hash_ids`` (if present).

    ``prefix_reuse_fraction`` = (prompt blocks whose hash id appeared in an earlier request) /
    (all prompt blocks), the hit rate of an unbounded prefix cache at ``block_tokens`` per block
    (Mooncake's traces use 512-token blocks, Qin et al. FAST 2025, sec. 4).
    """
    p = _as_path(path)
    times: list[float] = []
    prompts: list[int] = []
    outputs: list[int] = []
    seen: set[int] = set()
    blocks_total = 0
    blocks_reused = 0
    has_hashes = False
    hashes: list[tuple] = []
    sessions: list | None = None
    with p.open(encoding="utf-8") as fh:
        for line_no, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            _check_rows(p, line_no, len(times) + 1)
            try:
                rec = parse_json(raw, "line")
            except InputError as exc:
                raise TraceFormatError(p, line_no, None, f"not valid JSON: expected {exc.allowed}") from None
            if not isinstance(rec, dict):
                raise TraceFormatError(p, line_no, None, "expected a JSON object per line")
            for key in ("timestamp", "input_length", "output_length"):
                if key not in rec:
                    raise TraceFormatError(p, line_no, key, "missing field")
            times.append(_float_field(p, line_no, "timestamp", rec["timestamp"]) * 1e-3)
            prompts.append(_int_field(p, line_no, "input_length", rec["input_length"], 1))
            outputs.append(_int_field(p, line_no, "output_length", rec["output_length"], 1))
            ids = _hash_ids(p, line_no, rec.get("hash_ids"), len(times) == 1, has_hashes)
            if ids is not None:
                has_hashes = True
                hashes.append(ids)
                blocks_total += len(ids)
                blocks_reused += sum(1 for h in ids if h in seen)
                seen.update(ids)
            sid = _session_id(p, line_no, rec.get("session_id"), len(times) == 1, sessions is not None)
            if sid is not None:
                sessions = sessions if sessions is not None else []
                sessions.append(sid)
    reuse = blocks_reused / blocks_total if has_hashes and blocks_total else None
    return _make_trace(p, times, prompts, outputs, 0, reuse, hashes if has_hashes else None, sessions)


# Most block ids one request may carry (a 100M-token prompt in 512-token blocks would need ~200k).
MAX_HASH_IDS = 1 << 18


def _hash_ids(path: Path, line: int, ids: object, first: bool, seen_any: bool) -> tuple | None:
    """A row's ``hash_ids`` as a tuple (ints or strings); every row has them or none does."""
    if ids is None:
        if seen_any:
            raise TraceFormatError(path, line, "hash_ids", "missing (earlier rows have block hash ids)")
        return None
    if not first and not seen_any:
        raise TraceFormatError(path, line, "hash_ids", "present here but missing on earlier rows")
    if (
        not isinstance(ids, list)
        or not ids
        or len(ids) > MAX_HASH_IDS
        or not all(isinstance(h, int | str) and not isinstance(h, bool) for h in ids)
    ):
        raise TraceFormatError(
            path,
            line,
            "hash_ids",
            f"expected a non-empty list of at most {MAX_HASH_IDS:,} integer (or string) block ids, "
            f"got {str(ids)[:60]}",
        )
    return tuple(ids)


def _session_id(path: Path, line: int, sid: object, first: bool, seen_any: bool) -> object:
    """A row's ``session_id`` (an integer or a short string); every row has one or none does."""
    if sid is None:
        if seen_any:
            raise TraceFormatError(path, line, "session_id", "missing (earlier rows have session ids)")
        return None
    if not first and not seen_any:
        raise TraceFormatError(path, line, "session_id", "present here but missing on earlier rows")
    if isinstance(sid, bool) or not (isinstance(sid, int) or (isinstance(sid, str) and 0 < len(sid) <= 200)):
        raise TraceFormatError(
            path,
            line,
            "session_id",
            f"expected an integer or a string of 1 to 200 characters, got {str(sid)[:60]!r}",
        )
    return sid


def load_trace(path: str | Path, format: str = "auto") -> Trace:
    """Load a trace, choosing the loader from ``format`` or, with "auto", from the file's first line.

    Formats: "azure", "mooncake", "burstgpt", "auto". A CSV with other headers needs :func:`load_csv`.
    """
    loaders = {"azure": load_azure_csv, "mooncake": load_mooncake_jsonl, "burstgpt": load_burstgpt_csv}
    if not isinstance(format, str):
        raise InputError("format", short(format), "one of " + ", ".join([*loaders, "auto"]))
    if format != "auto":
        if format not in loaders:
            raise InputError("format", format, "one of " + ", ".join([*loaders, "auto"]))
        return loaders[format](path)
    p = _as_path(path)
    with p.open(encoding="utf-8-sig") as fh:
        first = fh.readline(MAX_CSV_FIELD_CHARS * 8).strip()
    if first.startswith("{"):
        return load_mooncake_jsonl(p)
    header = [h.strip() for h in first.split(",")]
    if {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} <= set(header):
        return load_azure_csv(p)
    if {"Timestamp", "Request tokens", "Response tokens"} <= set(header):
        return load_burstgpt_csv(p)
    raise TraceFormatError(
        p,
        1,
        None,
        "unrecognised trace format (expected Azure, BurstGPT CSV headers or Mooncake JSON lines); "
        "use load_csv(path, columns={...}) for other CSVs",
    )


def _text_only(loader):
    """Turn a non-UTF-8 file into a TraceFormatError naming the file (the loaders read text)."""

    @functools.wraps(loader)
    def wrapper(path, *args, **kwargs):
        try:
            return loader(path, *args, **kwargs)
        except UnicodeDecodeError as exc:
            raise TraceFormatError(
                path, None, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None

    return wrapper


load_csv = _text_only(load_csv)
load_azure_csv = _text_only(load_azure_csv)
load_burstgpt_csv = _text_only(load_burstgpt_csv)
load_mooncake_jsonl = _text_only(load_mooncake_jsonl)
load_trace = _text_only(load_trace)
