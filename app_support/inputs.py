"""The sidebar: every input widget, its default, its URL binding, and parsing into plain values.

Widgets keep their value in ``st.session_state`` under the keys of :data:`DEFAULTS` (also their
defaults) and sit in one form applied by its *Apply* button. A session's first run reads the URL
query string (:func:`check_url`); each applied value other than the default is written back as
``?key=value`` (:func:`sync_url`), so a link reproduces the view. A scenario file
(:func:`scenario_json`, :func:`apply_scenario`) holds the same keys plus any uploaded config.json
or trace, so it restores every input. :func:`parse` turns the widget values into a :class:`Spec`
of plain SI values (times in seconds, bandwidth in bytes/s) read through the strict grammar of
``model.units``; the cached calls in ``app_support.compute`` are keyed on it. The defaults, ranges
and value checks shared with URL parameters and scenario files live in ``app_support.values``.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import streamlit as st

import model
from model.errors import PdplanError

from . import advanced, features, uploads, widgets
from .values import (  # noqa: F401  (re-exported: app.py and the tests read them from here)
    AUTO,
    BIND,  # the view tabs' binding (app.py); the inputs are written to the URL by sync_url
    BUDGET,
    CATALOG,
    CONFIG_UPLOAD,
    CUSTOM_LINK,
    DEFAULTS,
    LENGTHS,
    PRESET,
    RANGES,
    SAME,
    TARGET,
    TEXT_READERS,
    TRACE_UPLOAD,
    VIEW_ONLY,
    check_value,
    choices,
    echo,
    from_url,
    problem_text,
    url_problems,
)
from .widgets import RESTORED_KEYS

# ---------------------------------------------------------------------------------------------
# scenario files

# Session key set once the URL query string has been read (on the session's first run).
URL_READ = "_url_read"


def apply_scenario(obj: dict[str, Any], state: Any = None) -> list[str]:
    """Set the widgets (and the stored uploads) from a scenario file; return problems found.

    ``state`` is where the values go (default the session state); every value that cannot be used
    is left out and named in one of the returned lines."""
    state = st.session_state if state is None else state
    problems = []
    inputs = obj.get("inputs", {})
    if not isinstance(inputs, dict):
        return ["Scenario file: 'inputs' is not an object; no input was changed"]
    for key, value in inputs.items():
        if key not in DEFAULTS:
            problems.append(f"Scenario file: unknown input {echo(key)} ignored")
            continue
        try:
            state[key] = check_value(key, value)
            state.setdefault(RESTORED_KEYS, set()).add(key)
        except ValueError as err:
            current = state.get(key, DEFAULTS[key])
            problems.append(problem_text("Scenario file:", key, value, str(err), current))
    for kind in ("config", "trace"):
        item = obj.get(kind)
        state.pop(f"restored_{kind}", None)
        if item is None:
            continue
        if not (
            isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("text"), str)
        ):
            problems.append(f"Scenario file: {kind} ignored: expected {{'name': ..., 'text': ...}}")
            continue
        try:
            state[f"restored_{kind}"] = (item["name"][:200].encode().decode(), item["text"].encode("utf-8"))
        except UnicodeEncodeError:
            problems.append(f"Scenario file: {kind} ignored: its text is not valid Unicode")
    return problems


def scenario_json(spec: Spec, state: Any = None) -> str:
    """A scenario file: every widget value (from ``state``, default the session) plus the uploaded
    config.json / trace the spec used."""
    state = st.session_state if state is None else state
    inputs = {k: state.get(k, v) for k, v in DEFAULTS.items()}
    out: dict[str, Any] = {"format": uploads.SCENARIO_FORMAT, "inputs": inputs, "config": None, "trace": None}
    if spec.values.get("config_text") is not None:
        out["config"] = {"name": spec.values["config_name"], "text": spec.values["config_text"]}
    if spec.trace_bytes is not None:
        out["trace"] = {"name": spec.values["trace_name"], "text": spec.trace_bytes.decode("utf-8-sig")}
    return json.dumps(out, indent=1)


def _restore_widget() -> None:
    f = st.file_uploader(
        "Restore a scenario file (.json)",
        type=["json"],
        key="scenario_upload",
        max_upload_size=math.ceil(uploads.MAX_SCENARIO_BYTES / 1e6),
        help="A file saved with 'Download scenario' restores every input, uploads included.",
    )
    if f is None:
        st.session_state.pop("scenario_applied", None)
        return
    if st.session_state.get("scenario_applied") == f.file_id:
        st.caption(f"Restored from {f.name}.")
        return
    st.session_state["scenario_applied"] = f.file_id
    try:
        problems = apply_scenario(uploads.parse_scenario(f.name, f.getvalue()))
    except uploads.UploadError as err:
        st.error(str(err))
        return
    st.success(f"Restored inputs from {f.name}.")
    for p in problems:
        st.warning(p)


# ---------------------------------------------------------------------------------------------
# widgets


@dataclass
class Raw:
    """Widget values plus the uploads in effect (name, bytes) and upload errors."""

    values: dict[str, Any]
    config: tuple[str, bytes] | None = None
    trace: tuple[str, bytes] | None = None
    errors: list[str] = field(default_factory=list)


def _upload(
    label: str, key: str, types: list[str], limit: int, help_text: str, errors: list[str]
) -> tuple[str, bytes] | None:
    f = st.file_uploader(label, type=types, key=key, max_upload_size=math.ceil(limit / 1e6), help=help_text)
    if f is not None:
        try:  # the size is known before the bytes are read
            uploads.check_size_only(f.name, f.size, limit, label)
        except uploads.UploadError as err:
            errors.append(str(err))
            return None
        return f.name, f.getvalue()
    return st.session_state.get(f"restored_{key.removesuffix('_upload')}")


def _fields(c: dict[str, list[Any]], raw_uploads: dict[str, Any], upload_errors: list[str]) -> None:
    """The form's fields; the uploads in effect go into ``raw_uploads``."""
    st.subheader("Model")
    widgets.radio("Model from", "model_source", c["model_source"])
    widgets.select("Model (catalog)", "model", c["model"])
    with st.expander("Hugging Face config.json (used when *Model from* is the upload)"):
        raw_uploads["config"] = _upload(
            "Hugging Face config.json",
            "config_upload",
            ["json"],
            uploads.MAX_CONFIG_BYTES,
            "The model's config.json (read as JSON, never executed).",
            upload_errors,
        )

    st.subheader("Hardware")
    widgets.select("GPU (prefill pool, and colocated replicas)", "gpu", c["gpu"])
    widgets.select("GPU (decode pool)", "decode_gpu", c["decode_gpu"])
    widgets.select("KV link between the pools", "link", c["link"])
    with st.expander("Custom link (used when the link is 'custom')"):
        widgets.text(
            "Link bandwidth (per direction)",
            "link_bw",
            help="Any unit pint reads: '25 Gbit/s', '3.2 GB/s', '400 Gb/s'.",
        )
        widgets.text("Link latency", "link_latency", help="e.g. '10 us', '0.05 ms' (bare numbers: us)")
        widgets.slider("Link efficiency (achieved / line rate)", "link_eff", step=0.01)

    st.subheader("Size")
    widgets.radio("Plan for", "mode", c["mode"])
    lo, hi = RANGES["gpus"]
    widgets.number(f"GPU budget ({lo}-{hi}; used when planning for a budget)", "gpus", step=1)
    widgets.number("Target rate (req/s; used when planning for a rate)", "target_rate")
    widgets.radio("Minimise (for a target rate)", "objective", c["objective"])

    st.subheader("Workload")
    widgets.radio("Workload from", "workload_source", c["workload_source"])
    widgets.select("Workload preset", "workload", c["workload"])
    widgets.text("Prompt tokens (*Workload from* lengths): 4000, or lognormal:mean=2000,cv=1", "isl")
    widgets.text("Output tokens (*Workload from* lengths): 500, or uniform:low=100,high=900", "osl")
    with st.expander("Request trace (used when *Workload from* is the upload)"):
        raw_uploads["trace"] = _upload(
            "Request trace",
            "trace_upload",
            ["csv", "jsonl", "json", "txt"],
            uploads.MAX_TRACE_BYTES,
            "Azure LLM trace or BurstGPT CSV, or Mooncake JSON lines.",
            upload_errors,
        )
    widgets.number(
        "Request rate to inspect (req/s; 0 = each style at its goodput; for a target rate: the target)",
        "rate",
        step=0.5,
    )

    st.subheader("SLOs")
    widgets.text("TTFT target", "ttft", help="e.g. '500 ms' or '0.5 s' (bare numbers: ms)")
    widgets.text("TPOT target", "tpot", help="e.g. '50 ms' (bare numbers: ms)")
    widgets.slider("Percentile", "percentile")
    widgets.slider("Attainment target (fraction of requests meeting both)", "attainment", step=0.01)

    if advanced.shown():
        advanced.draw(c)
    else:
        advanced.hidden_note()


def sidebar() -> Raw:
    """Draw the inputs in the sidebar, in one form applied by its *Apply* button (defaults from
    DEFAULTS; the URL changes on Apply only); return the applied values.

    Every field of the form is drawn on every run (a choice such as *Model from* decides which of
    its fields is used), so no field appears only after an Apply; the advanced fields are drawn
    only while the *Advanced inputs* toggle below the form is on (app_support.advanced), and keep
    their values while hidden."""
    c = choices()
    raw_uploads: dict[str, tuple[str, bytes] | None] = {"config": None, "trace": None}
    upload_errors: list[str] = []
    check_url()
    with st.sidebar:
        st.header("Inputs")
        with st.expander("Scenario file"):
            _restore_widget()
        with st.form("inputs", border=False, enter_to_submit=True):
            st.form_submit_button(
                "Apply", type="primary", key="apply", width="stretch", help="Plan with the inputs below."
            )
            _fields(c, raw_uploads, upload_errors)
            st.form_submit_button("Apply", key="apply_bottom", width="stretch")
        advanced.toggle()
    st.session_state.pop(RESTORED_KEYS, None)
    if not advanced.shown():
        advanced.keep(st.session_state, st.session_state.setdefault(RESTORED_KEYS, set()))
    values = {k: copy.deepcopy(st.session_state.get(k, v)) for k, v in DEFAULTS.items()}
    sync_url(values)
    return Raw(values, raw_uploads["config"], raw_uploads["trace"], upload_errors)


# ---------------------------------------------------------------------------------------------
# parsing


@st.cache_resource(max_entries=16, show_spinner=False)
def _config_result(name: str, text: str) -> tuple[model.LLMArch | None, str]:
    try:
        return uploads.parse_config(name, text), ""
    except uploads.UploadError as err:
        return None, str(err)


def cached_config(name: str, text: str) -> model.LLMArch:
    """The uploaded architecture (parsed once per content; raises UploadError)."""
    arch, error = _config_result(name, text)
    if arch is None:
        raise uploads.UploadError(error)
    return arch


@st.cache_resource(max_entries=8, show_spinner="Reading the trace...")
def _trace_result(digest: str, name: str, _data: bytes) -> tuple[Any, str]:
    try:
        return uploads.parse_trace(name, _data), ""
    except uploads.UploadError as err:
        return None, str(err)


def cached_trace(digest: str, name: str, data: bytes) -> Any:
    """The uploaded trace (parsed once per content digest; raises UploadError)."""
    trace, error = _trace_result(digest, name, data)
    if trace is None:
        raise uploads.UploadError(error)
    return trace


@dataclass(frozen=True, eq=False)
class Spec:
    """Plain, JSON-able inputs of one view (SI units) plus the trace bytes, if any."""

    values: dict[str, Any]
    trace_bytes: bytes | None = None

    @cached_property
    def key(self) -> str:
        """Cache key of the plan: every value except the view-only ones."""
        return json.dumps({k: v for k, v in self.values.items() if k not in VIEW_ONLY}, sort_keys=True)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]


# ---------------------------------------------------------------------------------------------
# URL parameters


def check_url() -> None:
    """On a session's first run, set the inputs from the URL query string: every usable parameter
    becomes its widget's value; every unusable one is named in a warning (its default is used).

    The widgets are not bound to the URL (Streamlit's ``bind`` would rewrite it as soon as a field
    in the form is edited); :func:`sync_url` writes the applied values instead."""
    if st.session_state.get(URL_READ):
        return
    st.session_state[URL_READ] = True
    params = {k: st.query_params.get_all(k) for k in st.query_params}
    problems = dict(url_problems(params))
    for key, values in params.items():
        if key in DEFAULTS and key not in problems:
            st.session_state[key] = check_value(key, from_url(key, list(values)))
            st.session_state.setdefault(RESTORED_KEYS, set()).add(key)
    for text in problems.values():
        st.warning(text)


def url_text(value: Any) -> str | list[str]:
    """A widget value as URL parameter text (read back by ``values.from_url``)."""
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def sync_url(values: dict[str, Any]) -> None:
    """Put every applied value that differs from its default in the URL (and drop the others), so
    a link reproduces the view; runs after each Apply, never on a mere edit in the form."""
    for key, default in DEFAULTS.items():
        if values.get(key, default) != default:
            text = url_text(values[key])
            if st.query_params.get_all(key) != (text if isinstance(text, list) else [text]):
                st.query_params[key] = text
        elif key in st.query_params:
            del st.query_params[key]


FIELD_NAMES = {"gpus": "GPU budget", "target_rate": "target rate (req/s)", "rate": "request rate to inspect"}


def _in_range(key: str, value: Any) -> Any:
    """A number field's value checked against RANGES (the browser fields have no bounds)."""
    try:
        return check_value(key, value)
    except ValueError as err:
        raise model.InputError(FIELD_NAMES[key], value, str(err)) from None


def parse(raw: Raw) -> tuple[Spec | None, list[str]]:
    """Read the widget values (pint for quantities); return the Spec or the error messages."""
    v = raw.values
    errors: list[str] = list(raw.errors)
    out: dict[str, Any] = {}

    def attempt(fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (PdplanError, uploads.UploadError) as err:
            errors.append(str(err))
            return None

    if v["model_source"] == CONFIG_UPLOAD:
        if raw.config is None:
            if not raw.errors:
                errors.append("Upload a Hugging Face config.json (or pick a catalog model).")
        else:
            name, data = raw.config
            text = attempt(
                lambda: uploads.decode_text(
                    name, uploads.check_size(name, data, uploads.MAX_CONFIG_BYTES, "config.json")
                )
            )
            if text is not None and attempt(cached_config, name, text) is not None:
                out.update(model=None, config_name=name, config_text=text)
    else:
        out.update(model=v["model"], config_name=None, config_text=None)
    out["gpu"] = v["gpu"]
    out["decode_gpu"] = None if v["decode_gpu"] == SAME else v["decode_gpu"]
    if v["link"] == CUSTOM_LINK:
        bw = attempt(TEXT_READERS["link_bw"], v["link_bw"])
        lat = attempt(TEXT_READERS["link_latency"], v["link_latency"])
        out["link"] = {"bandwidth_bytes_per_s": bw, "latency_s": lat, "efficiency": float(v["link_eff"])}
    else:
        out["link"] = v["link"]
    if v["mode"] == BUDGET:
        out.update(gpus=attempt(_in_range, "gpus", v["gpus"]), target_rate_rps=None, objective="gpus")
    else:
        objective = {"GPUs": "gpus", "cost": "cost"}[v["objective"]]
        rate = attempt(_in_range, "target_rate", v["target_rate"])
        out.update(gpus=None, target_rate_rps=rate, objective=objective)
    trace_bytes = None
    out.update(isl=None, osl=None)
    if v["workload_source"] == TRACE_UPLOAD:
        if raw.trace is None:
            if not raw.errors:
                errors.append("Upload a request trace (or pick a workload preset).")
        else:
            name, data = raw.trace
            ok = attempt(uploads.check_size, name, data, uploads.MAX_TRACE_BYTES, "trace") is not None
            digest = uploads.digest(data) if ok else ""
            if ok and attempt(cached_trace, digest, name, data) is not None:
                trace_bytes = data
                out.update(workload=None, trace_name=name, trace_digest=digest)
    elif v["workload_source"] == LENGTHS:
        isl, osl = attempt(TEXT_READERS["isl"], v["isl"]), attempt(TEXT_READERS["osl"], v["osl"])
        out.update(workload=None, trace_name=None, trace_digest=None, isl=isl, osl=osl)
    else:
        out.update(workload=v["workload"], trace_name=None, trace_digest=None)
    out["rate_rps"] = attempt(_in_range, "rate", v["rate"])
    if out["target_rate_rps"] is not None:  # planning for a rate: every view is at that rate
        out["rate_rps"] = out["target_rate_rps"]
    out["ttft_slo_s"] = attempt(TEXT_READERS["ttft"], v["ttft"])
    out["tpot_slo_s"] = attempt(TEXT_READERS["tpot"], v["tpot"])
    out["percentile"] = float(v["percentile"])
    out["attainment"] = float(v["attainment"])
    out["dtype"] = v["dtype"]
    out["kv_dtype"] = None if v["kv_dtype"] == AUTO else v["kv_dtype"]
    out["prefill_mfu"] = attempt(TEXT_READERS["prefill_mfu"], v["prefill_mfu"])
    out["decode_mbu"] = attempt(TEXT_READERS["decode_mbu"], v["decode_mbu"])
    out["price"] = attempt(TEXT_READERS["price"], v["price"])
    out["tdp_w"] = attempt(TEXT_READERS["tdp"], v["tdp"])
    if not v["chunks"]:
        errors.append("Chunk sizes: pick at least one.")
    if not v["tps"]:
        errors.append("Tensor-parallel degrees: pick at least one.")
    out["chunk_options"] = sorted(int(x) for x in v["chunks"])
    out["tp_options"] = sorted(int(x) for x in v["tps"])
    out["prefill_parallelism"] = attempt(TEXT_READERS["prefill_layout"], v["prefill_layout"])
    out["decode_parallelism"] = attempt(TEXT_READERS["decode_layout"], v["decode_layout"])
    out.update({key: attempt(TEXT_READERS[key], v[key]) for key in features.KEYS})
    out["layerwise"] = bool(v["layerwise"])
    out["margin"] = float(v["margin"])
    if errors:
        return None, errors
    return Spec(out, trace_bytes), []
