"""The web app's scenario files (``"format": "pdplan-scenario/1"``, saved by its Download tab) read
as a :class:`~model.planner.plan.PlanRequest`, so ``pdplan compare`` and ``model.compare`` re-plan
them exactly as the app would.

A scenario file holds the app's widget values under ``"inputs"`` (their names and words are
app_support/values.py's DEFAULTS and choices) plus any uploaded config.json or trace text. Reading
is bounded like every other input (model.limits: file size, JSON nesting, integer digits, no
NaN); each bad value is a one-line InputError naming the file and the key. Values are checked by
the model's own validators (units grammar, profile checks, PlanRequest's ranges).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Any

from model.errors import InputError, short
from model.hardware.catalog import load_catalog
from model.hardware.engines import parse_preemption
from model.hardware.links import Link
from model.limits import MAX_OPTIONS, check_file_size, parse_json
from model.llm.hf_config import parse_hf_config_text
from model.physics.speculation import parse_speculation
from model.planner.plan import PlanRequest
from model.units import Kind, parse_quantity
from model.workload.plain import length_spec, workload_from_lengths
from model.workload.prefix import parse_hit_rate
from model.workload.presets import Workload
from model.workload.traces import load_trace

SCENARIO_FORMAT = "pdplan-scenario/1"
# The app's words for its choices (app_support/values.py), as they appear in scenario files.
SAME_GPU, AUTO_KV, CUSTOM_LINK = "same as prefill", "auto", "custom"
CONFIG_UPLOAD, TRACE_UPLOAD, TARGET_MODE = "config.json upload", "trace upload", "target rate"
LENGTHS = "lengths"  # the app's "Workload from: lengths" (app_support/values.py)
# A scenario may embed a config.json (<= 1 MB in the app) and a trace (<= 20 MB): app_support.uploads.
MAX_SCENARIO_BYTES = 21_200_000


def is_scenario(obj: Any) -> bool:
    """Whether a parsed JSON value is a scenario file (its "format" key)."""
    return isinstance(obj, dict) and obj.get("format") == SCENARIO_FORMAT


def read_json(path: str | Path, field: str) -> Any:
    """A JSON file within the limits (size, nesting, integer digits, finite numbers)."""
    p = Path(path)
    check_file_size(p, field, MAX_SCENARIO_BYTES)
    try:
        text = p.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(field, short(str(path)), f"UTF-8 JSON text (bad byte at {err.start})") from None
    return parse_json(text, field)


def _get(inputs: dict, key: str, kind: type | tuple, where: str, default: Any = None) -> Any:
    value = inputs.get(key, default)
    if value is None and default is None:
        raise InputError(f"{where}: inputs.{key}", None, "a value (the key is missing)")
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise InputError(f"{where}: inputs.{key}", short(value), f"a {names}")
    return value


def _optional_fraction(text: str, key: str, where: str) -> float | None:
    if not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise InputError(f"{where}: inputs.{key}", short(text), "a fraction in (0, 1], or blank")
    return value


def _gpu(name: str, inputs: dict, where: str) -> Any:
    """The catalog GPU with the scenario's overrides (MFU, MBU, price, power), checked by GPU itself."""
    gpu = load_catalog().gpu(name)
    changes: dict[str, float] = {}
    for key, fld in (("prefill_mfu", "prefill_mfu"), ("decode_mbu", "decode_mbu")):
        value = _optional_fraction(_get(inputs, key, str, where, ""), key, where)
        if value is not None:
            changes[fld] = value
    price = _get(inputs, "price", str, where, "").strip().lstrip("$")
    if price:
        try:
            changes["price_usd_per_hour"] = float(price)
        except ValueError:
            raise InputError(f"{where}: inputs.price", short(price), "US dollars per GPU-hour") from None
    tdp = _get(inputs, "tdp", str, where, "")
    if tdp.strip():
        changes["tdp_w"] = parse_quantity(tdp, Kind.POWER, f"{where}: inputs.tdp", bare_unit="watt")
    return dataclasses.replace(gpu, **changes) if changes else gpu


def _link(inputs: dict, where: str) -> str | Link:
    name = _get(inputs, "link", str, where, "ib-ndr-400")
    if name != CUSTOM_LINK:
        return name
    bw = parse_quantity(_get(inputs, "link_bw", str, where), Kind.BANDWIDTH, f"{where}: inputs.link_bw")
    lat_text = _get(inputs, "link_latency", str, where)
    lat = parse_quantity(lat_text, Kind.TIME, f"{where}: inputs.link_latency", bare_unit="microsecond")
    eff = float(_get(inputs, "link_eff", (int, float), where, 0.9))
    return Link("custom", "custom link", "network", bw, lat, eff)


def _embedded(obj: dict, kind: str, where: str) -> tuple[str, str]:
    item = obj.get(kind)
    if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in ("name", "text")):
        raise InputError(f"{where}: {kind}", "(missing)", "an embedded {'name': ..., 'text': ...} object")
    return item["name"][:200], item["text"]


def _trace_workload(obj: dict, where: str) -> Workload:
    """The embedded trace, read by the trace loader from a private temporary file."""
    name, text = _embedded(obj, "trace", where)
    suffix = Path(name).suffix.lower() if Path(name).suffix.lower() in (".csv", ".jsonl", ".json") else ".txt"
    fd, tmp = tempfile.mkstemp(prefix="pdplan-trace-", suffix=suffix)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        trace = load_trace(tmp)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return Workload.from_trace(trace, name=f"trace:{name}")


def _int_list(inputs: dict, key: str, where: str) -> tuple[int, ...] | None:
    value = inputs.get(key)
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or not 1 <= len(value) <= MAX_OPTIONS
        or any(isinstance(v, bool) or not isinstance(v, int) for v in value)
    ):
        allowed = f"a list of 1 to {MAX_OPTIONS} whole numbers"
        raise InputError(f"{where}: inputs.{key}", short(value), allowed)
    return tuple(value)


def scenario_request(obj: Any, where: str = "scenario file") -> PlanRequest:
    """A PlanRequest from a parsed scenario file (``where`` names it in errors)."""
    if not is_scenario(obj):
        raise InputError(where, "(file)", f'a pdplan scenario file ("format": "{SCENARIO_FORMAT}")')
    inputs = obj.get("inputs")
    if not isinstance(inputs, dict):
        raise InputError(f"{where}: inputs", short(inputs), "an object of input values")
    if _get(inputs, "model_source", str, where, "catalog") == CONFIG_UPLOAD:
        name, text = _embedded(obj, "config", where)
        arch: Any = parse_hf_config_text(text, where=f"{where}: {name}")
    else:
        arch = _get(inputs, "model", str, where)
    gpu = _gpu(_get(inputs, "gpu", str, where), inputs, where)
    decode = _get(inputs, "decode_gpu", str, where, SAME_GPU)
    source = _get(inputs, "workload_source", str, where, "preset")
    if source == TRACE_UPLOAD:
        workload: Any = _trace_workload(obj, where)
    elif source == LENGTHS:
        workload = workload_from_lengths(
            isl_dist=length_spec(_get(inputs, "isl", str, where), f"{where}: inputs.isl"),
            osl_dist=length_spec(_get(inputs, "osl", str, where), f"{where}: inputs.osl"),
        )
    else:
        workload = _get(inputs, "workload", str, where)
    kwargs: dict[str, Any] = {
        "ttft_slo_s": parse_quantity(
            _get(inputs, "ttft", str, where), Kind.TIME, f"{where}: inputs.ttft", bare_unit="millisecond"
        ),
        "tpot_slo_s": parse_quantity(
            _get(inputs, "tpot", str, where), Kind.TIME, f"{where}: inputs.tpot", bare_unit="millisecond"
        ),
        "percentile": float(_get(inputs, "percentile", (int, float), where, 90)),
        "attainment": float(_get(inputs, "attainment", (int, float), where, 0.9)),
        "link": _link(inputs, where),
        "decode_gpu": None if decode == SAME_GPU else _gpu(decode, inputs, where),
        "dtype": _get(inputs, "dtype", str, where, "bf16"),
        "layerwise": _get(inputs, "layerwise", bool, where, True),
        "margin": float(_get(inputs, "margin", (int, float), where, 0.1)),
        "speculation": parse_speculation(
            _get(inputs, "speculation", str, where, ""), f"{where}: inputs.speculation"
        ),
        "prefix_hit_rate": parse_hit_rate(
            _get(inputs, "prefix_hit_rate", str, where, ""), f"{where}: inputs.prefix_hit_rate"
        ),
    }
    kwargs["kv_offload"] = _get(inputs, "kv_offload", str, where, "").strip() or None  # tier spec line
    kwargs["preemption"] = parse_preemption(
        _get(inputs, "preemption", str, where, ""), f"{where}: inputs.preemption"
    )
    kv = _get(inputs, "kv_dtype", str, where, AUTO_KV)
    kwargs["kv_dtype"] = None if kv == AUTO_KV else kv
    for key, fld in (("chunks", "chunk_options"), ("tps", "tp_options")):
        options = _int_list(inputs, key, where)
        if options is not None:
            kwargs[fld] = options
    if _get(inputs, "mode", str, where, "GPU budget") == TARGET_MODE:
        kwargs["target_rate_rps"] = float(_get(inputs, "target_rate", (int, float), where))
        kwargs["objective"] = "cost" if _get(inputs, "objective", str, where, "GPUs") == "cost" else "gpus"
    else:
        kwargs["gpus"] = _get(inputs, "gpus", int, where)
    return PlanRequest(arch, gpu, workload, **kwargs)
