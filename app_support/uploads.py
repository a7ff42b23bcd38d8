"""Safe reading of user uploads: size limits, text decoding, and parsing through ``model`` only.

Nothing here unpickles or evaluates anything: a Hugging Face config.json is read with ``json`` by
``model.hf_config``; a trace is written to a private temporary file and read by
``model.workload.traces.load_trace`` (CSV / JSON lines); a scenario file is plain JSON. Every failure becomes
an :class:`UploadError` whose one-line message the app shows with ``st.error``.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import model
from model.errors import PdplanError
from model.llm import hf_config
from model.units import format_bytes
from model.workload import traces

MAX_CONFIG_BYTES = 1_000_000  # a config.json is a few kB; DeepSeek-V3's is 2 kB
MAX_TRACE_BYTES = 20_000_000  # ~1 M requests of the Azure CSV format
MAX_SCENARIO_BYTES = MAX_CONFIG_BYTES + MAX_TRACE_BYTES + 200_000  # a scenario may embed both
TRACE_SUFFIXES = (".csv", ".jsonl", ".json", ".txt")


class UploadError(ValueError):
    """An upload that cannot be used; ``str(err)`` is a one-line message for people."""


# What a loader may raise on a hostile file (numbers too large for a float, nesting too deep,
# a CSV field over the csv module's limit, ...): each becomes an UploadError naming the file.
# Anything else is a bug and reaches the page guard (app_support.guard), which logs it.
PARSE_ERRORS = (
    PdplanError,
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    UnicodeError,
    csv.Error,
    OSError,
    RecursionError,
    OverflowError,
    MemoryError,
)


def check_size_only(name: str, size: int, limit: int, what: str) -> None:
    """Refuse a file of ``size`` bytes above ``limit`` (called before its bytes are read)."""
    if size > limit:
        raise UploadError(
            f"{_name(name)}: {format_bytes(size)} is too large for a {what} (limit {format_bytes(limit)})"
        )


def check_size(name: str, data: bytes, limit: int, what: str) -> bytes:
    """``data`` unless it is empty or larger than ``limit`` bytes."""
    check_size_only(name, len(data), limit, what)
    if not data.strip():
        raise UploadError(f"{_name(name)}: the file is empty")
    return data


def decode_text(name: str, data: bytes) -> str:
    """UTF-8 text (a leading BOM is dropped); a clear error for binary files."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UploadError(f"{_name(name)}: not UTF-8 text (byte {err.start}); expected a text file") from None


def digest(data: bytes) -> str:
    """Short content hash: the cache key of an upload."""
    return hashlib.sha256(data).hexdigest()[:16]


def parse_config(name: str, text: str) -> model.LLMArch:
    """An LLMArch from a Hugging Face config.json text (raises UploadError)."""
    check_size(name, text.encode("utf-8"), MAX_CONFIG_BYTES, "config.json")
    try:
        return hf_config.parse_hf_config_text(text, where=name or "config.json")
    except PARSE_ERRORS as err:
        raise UploadError(_one_line(err, name)) from None


def parse_trace(name: str, data: bytes) -> traces.Trace:
    """A Trace from uploaded bytes (Azure / BurstGPT CSV, Mooncake JSON lines; raises UploadError).

    The loader takes a path, so the bytes go to a private temporary file that is removed afterwards.
    """
    check_size(name, data, MAX_TRACE_BYTES, "trace")
    decode_text(name, data)  # binary files fail here with a clear message
    suffix = Path(name).suffix.lower()
    if suffix not in TRACE_SUFFIXES:
        suffix = ".txt"
    fd, tmp = tempfile.mkstemp(prefix="pdplan-trace-", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        trace = traces.load_trace(tmp)
    except PARSE_ERRORS as err:
        raise UploadError(_one_line(err, name, {tmp: name, Path(tmp).name: name})) from None
    finally:
        Path(tmp).unlink(missing_ok=True)
    return trace


def parse_scenario(name: str, data: bytes) -> dict[str, Any]:
    """The JSON object of a scenario file (raises UploadError)."""
    check_size(name, data, MAX_SCENARIO_BYTES, "scenario file")
    try:
        obj = json.loads(decode_text(name, data))
    except (ValueError, RecursionError) as err:
        raise UploadError(f"{_name(name)}: not valid JSON ({_one_line(err, '')})") from None
    if not isinstance(obj, dict) or obj.get("format") != SCENARIO_FORMAT:
        raise UploadError(
            f'{_name(name)}: not a pdplan scenario file (expected "format": "{SCENARIO_FORMAT}")'
        )
    try:  # JSON may escape a lone surrogate ("\\ud800"), which no later step can encode
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise UploadError(f"{_name(name)}: holds text that is not valid Unicode (a lone surrogate)") from None
    except (ValueError, RecursionError) as err:
        raise UploadError(f"{_name(name)}: cannot be read ({_one_line(err, '')})") from None
    return obj


SCENARIO_FORMAT = "pdplan-scenario/1"


def _name(name: str) -> str:
    """A file name fit for a message: one line, at most 100 characters, valid UTF-8."""
    text = " ".join(str(name).split())[:100]
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _one_line(err: BaseException, name: str, replace: dict[str, str] | None = None) -> str:
    """``err`` as one line starting with the file name; ``replace`` hides temporary paths."""
    text = str(err)
    for old, new in (replace or {}).items():
        text = text.replace(old, new)
    text = " ".join(text.split()) or type(err).__name__
    name = _name(name)
    if name and not text.startswith(name):
        text = f"{name}: {text}"
    return text[:500].encode("utf-8", "backslashreplace").decode("utf-8")
