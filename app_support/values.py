"""The app's inputs as values: defaults, allowed choices and ranges, and the checks every source
(widgets, URL parameters, scenario files) goes through.

One table per concept: :data:`DEFAULTS` (a widget per key), :data:`RANGES` (numeric bounds),
:func:`choices` (catalog options), :data:`TEXT_READERS` (how a free-text quantity is read, on top of
``model.units.parse_quantity``). :func:`check_value` and :func:`url_problems` apply them, so a value
is accepted or refused the same way wherever it comes from, and a refused value is named in one line
(:func:`problem_text`). No Streamlit here: ``tests/test_app_hardening.py`` fuzzes these functions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import model
from model.errors import PdplanError
from model.hardware.catalog import unique
from model.hardware.engines import parse_preemption
from model.hardware.formats import FORMATS, format_names
from model.hardware.kv_offload import parse_tier_items
from model.hardware.parallelism import parse_parallelism
from model.physics.speculation import parse_speculation
from model.serving.enumeration import DEFAULT_CHUNK_OPTIONS, DEFAULT_TP_OPTIONS
from model.units import Kind, parse_quantity
from model.workload.plain import length_spec
from model.workload.prefix import parse_hit_rate

SAME = "same as prefill"
CATALOG, CONFIG_UPLOAD = "catalog", "config.json upload"
BUDGET, TARGET = "GPU budget", "target rate"
PRESET, TRACE_UPLOAD, LENGTHS = "preset", "trace upload", "lengths"
CUSTOM_LINK = "custom"
AUTO = "auto"
BIND = "query-params"

DEFAULTS: dict[str, Any] = {
    "model_source": "catalog",
    "model": "llama-3.1-70b",
    "gpu": "h100-sxm",
    "decode_gpu": SAME,
    "link": "ib-ndr-400",
    "link_bw": "25 Gbit/s",
    "link_latency": "10 us",
    "link_eff": 0.9,
    "mode": BUDGET,
    "gpus": 16,
    "target_rate": 20.0,
    "objective": "GPUs",
    "workload_source": "preset",
    "workload": "chat",
    "isl": "2000",
    "osl": "200",
    "rate": 0.0,
    "ttft": "500 ms",
    "tpot": "50 ms",
    "percentile": 90,
    "attainment": 0.9,
    "dtype": "bf16",
    "kv_dtype": AUTO,
    "prefill_mfu": "",
    "decode_mbu": "",
    "price": "",
    "tdp": "",
    "chunks": list(DEFAULT_CHUNK_OPTIONS),
    "tps": list(DEFAULT_TP_OPTIONS),
    "prefill_layout": "",
    "decode_layout": "",
    "speculation": "",
    "kv_offload": "",
    "preemption": "",
    "prefix_hit_rate": "",
    "layerwise": True,
    "margin": 0.10,
}
# Inputs that change what is shown but not the plan (kept out of the plan's cache key).
VIEW_ONLY = ("rate_rps",)
CHUNK_CHOICES = sorted({128, 256, 512, 1024, 2048, 4096, 8192, *DEFAULT_CHUNK_OPTIONS})
TP_CHOICES = sorted({1, 2, 4, 8, 16, *DEFAULT_TP_OPTIONS})
DTYPES = list(format_names())  # the format table's rows and aliases (model/hardware/formats.py)
KV_DTYPES = [AUTO, *(f.name for f in FORMATS if f.kv_cache)]
MAX_GPUS = 256
MAX_PRICE_USD_PER_HOUR = 1000.0  # ~100x an H100's on-demand cloud price; anything above is a typo


@lru_cache(maxsize=1)
def choices() -> dict[str, list[Any]]:
    """Options of every choice widget (catalog names), for the widgets and for validation."""
    catalog = model.load_catalog()
    gpus = [g.name for g in unique(catalog.gpus)]
    return {
        "model_source": [CATALOG, CONFIG_UPLOAD],
        "model": [a.name for a in model.list_models()],
        "gpu": gpus,
        "decode_gpu": [SAME, *gpus],
        "link": [li.name for li in unique(catalog.links)] + [CUSTOM_LINK],
        "mode": [BUDGET, TARGET],
        "objective": ["GPUs", "cost"],
        "workload_source": [PRESET, TRACE_UPLOAD, LENGTHS],
        "workload": model.list_workloads(),
        "dtype": DTYPES,
        "kv_dtype": KV_DTYPES,
        "chunks": CHUNK_CHOICES,
        "tps": TP_CHOICES,
    }


# Allowed range of every numeric widget: the widgets and scenario-file validation both use it.
RANGES: dict[str, tuple[Any, Any]] = {
    "link_eff": (0.1, 1.0),
    "gpus": (1, MAX_GPUS),
    "target_rate": (0.001, 1e5),
    "rate": (0.0, 1e5),
    "percentile": (50, 99),
    "attainment": (0.5, 1.0),
    "margin": (0.0, 0.5),
}


def check_value(key: str, value: Any) -> Any:
    """``value`` converted to the widget's type, or raise ValueError."""
    default = DEFAULTS[key]
    opts = choices().get(key)
    if isinstance(default, list):
        if not isinstance(value, list) or not value or any(v not in opts for v in value):
            raise ValueError(f"a non-empty list from {opts}")
        return [int(v) for v in value]
    if opts is not None:
        if value not in opts:
            raise ValueError(f"one of {', '.join(map(str, opts))}")
        return value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError("true or false")
        return value
    lo, hi = RANGES.get(key, (-math.inf, math.inf))
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ValueError(f"a whole number in [{lo}, {hi}]")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
            raise ValueError(f"a number in [{lo}, {hi}]")  # NaN fails the comparison too
        return float(value)
    if not isinstance(value, str) or len(value) > 100:
        raise ValueError("a short text")
    if key in TEXT_READERS:
        try:
            TEXT_READERS[key](value)
        except PdplanError as err:
            raise ValueError(getattr(err, "allowed", str(err))) from None
    return value


def echo(value: Any, limit: int = 80) -> str:
    """``repr(value)`` for a message: at most ``limit`` characters, lone surrogates escaped."""
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        text = f"<{type(value).__name__}>"
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[:limit] + "..."


def shown(value: Any) -> str:
    """A widget value as people read it in a warning ("500 ms", "256, 512", "blank")."""
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value) if value != "" else "blank"


def problem_text(where: str, key: str, value: Any, reason: str, using: Any) -> str:
    """One line naming an ignored input: ``URL parameter ttft='abc' ignored: ...; using 500 ms``."""
    return f"{where} {key}={echo(value)} ignored: expected {reason}; using {shown(using)}"


def _fraction(text: str, field_name: str) -> float | None:
    if not text.strip():
        return None
    try:
        v = float(text)
    except ValueError:
        raise model.InputError(field_name, text, "a fraction in (0, 1], e.g. 0.6, or blank") from None
    if not 0 < v <= 1:
        raise model.InputError(field_name, text, "a fraction in (0, 1], e.g. 0.6, or blank")
    return v


def _price(text: str) -> float | None:
    if not text.strip():
        return None
    try:
        v = float(text.strip().lstrip("$"))
    except ValueError:
        raise model.InputError("price", text, "US dollars per GPU-hour, e.g. 2.5, or blank") from None
    if not (math.isfinite(v) and 0 <= v <= MAX_PRICE_USD_PER_HOUR):
        raise model.InputError(
            "price", text, f"US dollars per GPU-hour in [0, {MAX_PRICE_USD_PER_HOUR:g}], or blank"
        )
    return v


def _slo(field_name: str) -> Any:
    def read(text: str) -> float:
        value = parse_quantity(text, Kind.TIME, field_name, bare_unit="millisecond")
        if not value > 0:
            raise model.InputError(field_name, text, "a time > 0 such as '500 ms'")
        return value

    return read


def _optional_power(text: str) -> float | None:
    return parse_quantity(text, Kind.POWER, "GPU power", bare_unit="watt") if text.strip() else None


# The free-text inputs and how each is read (raises PdplanError): parse(), scenario files and URL
# parameters all use this table, so a value is accepted or refused the same way everywhere.
def _layout(text: str, field: str) -> str | None:
    """A pool layout such as "dep=32" (model.hardware.parallelism.parse_parallelism); blank = search."""
    if not text.strip():
        return None
    parse_parallelism(field, text)
    return text.strip()


def _speculation(text: str) -> str | None:
    """Speculative decoding as one line (model.physics.speculation.parse_speculation); blank = off."""
    return None if parse_speculation(text, "speculative decoding") is None else " ".join(text.split())


def _kv_offload(text: str) -> str | None:
    """KV offload tiers as one line (model.hardware.kv_offload grammar; the node checks the sizes
    when the plan runs); blank = none."""
    if not text.strip():
        return None
    parse_tier_items(text, "kv_offload")
    return " ".join(text.split())


TEXT_READERS: dict[str, Callable[[str], float | None]] = {
    "link_bw": lambda t: parse_quantity(t, Kind.BANDWIDTH, "link bandwidth"),
    "link_latency": lambda t: parse_quantity(t, Kind.TIME, "link latency", bare_unit="microsecond"),
    "ttft": _slo("TTFT target"),
    "tpot": _slo("TPOT target"),
    "prefill_mfu": lambda t: _fraction(t, "prefill MFU"),
    "decode_mbu": lambda t: _fraction(t, "decode MBU"),
    "price": lambda t: _price(t),
    "tdp": _optional_power,
    "isl": lambda t: length_spec(t, "prompt tokens"),
    "osl": lambda t: length_spec(t, "output tokens"),
    "speculation": lambda t: _speculation(t),
    "kv_offload": lambda t: _kv_offload(t),
    "preemption": lambda t: parse_preemption(t, "preemption"),
    "prefix_hit_rate": lambda t: parse_hit_rate(t, "prefix-cache hit rate"),
    "prefill_layout": lambda t: _layout(t, "prefill_parallelism"),
    "decode_layout": lambda t: _layout(t, "decode_parallelism"),
}


# ---------------------------------------------------------------------------------------------
# URL parameters

_URL_INT = re.compile(r"[+-]?\d{1,9}")
_URL_FLOAT_CHARS = 40


def from_url(key: str, values: list[str]) -> Any:
    """A URL parameter's text(s) as the widget's type (raise ValueError naming what is expected)."""
    default = DEFAULTS[key]
    if isinstance(default, list):
        if not values or not all(_URL_INT.fullmatch(v) for v in values):
            raise ValueError(f"whole numbers from {choices()[key]}")
        return [int(v) for v in values]
    text = values[-1] if values else ""  # Streamlit reads the last of repeated values
    if isinstance(default, bool):
        if text.lower() not in ("true", "false"):
            raise ValueError("true or false")
        return text.lower() == "true"
    if isinstance(default, int) and key not in choices():
        if not _URL_INT.fullmatch(text):
            lo, hi = RANGES[key]
            raise ValueError(f"a whole number in [{lo}, {hi}]")
        return int(text)
    if isinstance(default, float):
        try:
            if len(text) > _URL_FLOAT_CHARS:
                raise ValueError
            return float(text)
        except ValueError:
            lo, hi = RANGES[key]
            raise ValueError(f"a number in [{lo}, {hi}]") from None
    return text


def url_problems(params: dict[str, list[str]]) -> list[tuple[str, str]]:
    """(key, warning) for every known URL parameter whose value cannot be used; the others pass.

    ``params`` maps each parameter to its values (``?chunks=256&chunks=512`` gives two). Unknown
    parameters are left alone (Streamlit and links may carry their own).
    """
    out = []
    for key, values in params.items():
        if key not in DEFAULTS:
            continue
        try:
            check_value(key, from_url(key, list(values)))
        except ValueError as err:
            value = values if isinstance(DEFAULTS[key], list) else (values[-1] if values else "")
            out.append((key, problem_text("URL parameter", key, value, str(err), DEFAULTS[key])))
    return out
