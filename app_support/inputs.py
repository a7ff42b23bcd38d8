"""The sidebar: every input widget, its default, its URL binding, and parsing into plain values.

Widgets keep their value in ``st.session_state`` under the keys of :data:`DEFAULTS` (also their
defaults) and are bound to the URL query string (``bind="query-params"``: a value other than the
default appears as ``?key=value``), so a link reproduces the view. A scenario file
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

from . import uploads
from .values import (  # noqa: F401  (re-exported: app.py and the tests read them from here)
    AUTO,
    BIND,
    BUDGET,
    CATALOG,
    CONFIG_UPLOAD,
    CUSTOM_LINK,
    DEFAULTS,
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
    problem_text,
    url_problems,
)

# ---------------------------------------------------------------------------------------------
# scenario files


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


def _select(label: str, key: str, options: list[Any], **kw: Any) -> Any:
    index = options.index(DEFAULTS[key]) if DEFAULTS[key] in options else 0
    return st.selectbox(label, options, index=index, key=key, bind=BIND, **kw)


def _radio(label: str, key: str, options: list[Any], **kw: Any) -> Any:
    return st.radio(
        label, options, index=options.index(DEFAULTS[key]), key=key, horizontal=True, bind=BIND, **kw
    )


def _text(label: str, key: str, **kw: Any) -> str:
    return st.text_input(label, value=DEFAULTS[key], key=key, bind=BIND, **kw)


def _slider(label: str, key: str, **kw: Any) -> Any:
    lo, hi = RANGES[key]
    return st.slider(label, lo, hi, value=DEFAULTS[key], key=key, bind=BIND, **kw)


def _number(label: str, key: str, **kw: Any) -> Any:
    lo, hi = RANGES.get(key, (None, None))
    return st.number_input(label, value=DEFAULTS[key], key=key, bind=BIND, min_value=lo, max_value=hi, **kw)


def sidebar() -> Raw:
    """Draw every input in the sidebar (defaults from DEFAULTS, bound to the URL); return their values."""
    c = choices()
    raw_uploads: dict[str, tuple[str, bytes] | None] = {"config": None, "trace": None}
    upload_errors: list[str] = []
    check_url()
    with st.sidebar:
        st.header("Inputs")
        with st.expander("Scenario file"):
            _restore_widget()

        st.subheader("Model")
        if _radio("Model from", "model_source", c["model_source"]) == CATALOG:
            _select("Model", "model", c["model"])
        else:
            raw_uploads["config"] = _upload(
                "Hugging Face config.json",
                "config_upload",
                ["json"],
                uploads.MAX_CONFIG_BYTES,
                "The model's config.json (read as JSON, never executed).",
                upload_errors,
            )

        st.subheader("Hardware")
        _select("GPU (prefill pool, and colocated replicas)", "gpu", c["gpu"])
        _select("GPU (decode pool)", "decode_gpu", c["decode_gpu"])
        if _select("KV link between the pools", "link", c["link"]) == CUSTOM_LINK:
            _text(
                "Link bandwidth (per direction)",
                "link_bw",
                help="Any unit pint reads: '25 Gbit/s', '3.2 GB/s', '400 Gb/s'.",
            )
            _text("Link latency", "link_latency", help="e.g. '10 us', '0.05 ms' (bare numbers: us)")
            _slider("Link efficiency (achieved / line rate)", "link_eff", step=0.01)

        st.subheader("Size")
        if _radio("Plan for", "mode", c["mode"]) == BUDGET:
            _number("GPU budget", "gpus", step=1)
        else:
            _number("Target rate (req/s)", "target_rate")
            _radio("Minimise", "objective", c["objective"])

        st.subheader("Workload")
        if _radio("Workload from", "workload_source", c["workload_source"]) == PRESET:
            _select("Workload preset", "workload", c["workload"])
        else:
            raw_uploads["trace"] = _upload(
                "Request trace",
                "trace_upload",
                ["csv", "jsonl", "json", "txt"],
                uploads.MAX_TRACE_BYTES,
                "Azure LLM trace or BurstGPT CSV, or Mooncake JSON lines.",
                upload_errors,
            )
        _number(
            "Request rate to inspect (req/s; 0 = each style at its goodput)",
            "rate",
            step=0.5,
        )

        st.subheader("SLOs")
        _text("TTFT target", "ttft", help="e.g. '500 ms' or '0.5 s' (bare numbers: ms)")
        _text("TPOT target", "tpot", help="e.g. '50 ms' (bare numbers: ms)")
        _slider("Percentile", "percentile")
        _slider("Attainment target (fraction of requests meeting both)", "attainment", step=0.01)

        with st.expander("Advanced"):
            _select("Weight dtype", "dtype", c["dtype"])
            _select("KV-cache dtype", "kv_dtype", c["kv_dtype"])
            _text("Prefill MFU override (blank = GPU profile)", "prefill_mfu")
            _text("Decode MBU override (blank = GPU profile)", "decode_mbu")
            _text("Price per GPU-hour, USD (blank = profile)", "price")
            _text("GPU power at full load, e.g. '700 W' (blank = profile TDP)", "tdp")
            st.multiselect(
                "Chunk sizes (tokens per iteration)",
                c["chunks"],
                default=DEFAULTS["chunks"],
                key="chunks",
                bind=BIND,
            )
            st.multiselect("Tensor-parallel degrees", c["tps"], default=DEFAULTS["tps"], key="tps", bind=BIND)
            _text("Prefill pool layout, e.g. 'tep=8' (blank = search TP/TEP/DEP)", "prefill_layout")
            _text("Decode pool layout, e.g. 'dep=32' (blank = search TP/TEP/DEP)", "decode_layout")
            st.checkbox(
                "Layer-wise KV transfer (overlaps prefill)",
                value=DEFAULTS["layerwise"],
                key="layerwise",
                bind=BIND,
            )
            _slider("Margin disaggregation must win by", "margin", step=0.01)
    values = {k: copy.deepcopy(st.session_state.get(k, v)) for k, v in DEFAULTS.items()}
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


def _drop_url_params(keys: list[str]) -> None:
    """Remove ``keys`` from the URL before the widgets read it, so they start from their defaults.

    Streamlit seeds a bound widget from the query string it received at the start of the run and
    offers no public call to drop a parameter before the widget exists, so this uses its session's
    query-parameter object (covered by tests/test_app_hardening.py, which fail if it stops working).
    """
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx()
    if ctx is None:
        return
    with ctx.session_state.query_params() as qp:
        for key in keys:
            qp.remove_param(key)
            getattr(qp, "_initial_query_params", {}).pop(key, None)


def check_url() -> None:
    """Warn about (and drop) every URL parameter that cannot be used, naming it and the default used."""
    params = {k: st.query_params.get_all(k) for k in st.query_params}
    problems = url_problems(params)
    if problems:
        _drop_url_params([k for k, _ in problems])
        for _, text in problems:
            st.warning(text)


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
        out.update(gpus=int(v["gpus"]), target_rate_rps=None, objective="gpus")
    else:
        objective = {"GPUs": "gpus", "cost": "cost"}[v["objective"]]
        out.update(gpus=None, target_rate_rps=float(v["target_rate"]), objective=objective)
    trace_bytes = None
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
    else:
        out.update(workload=v["workload"], trace_name=None, trace_digest=None)
    out["rate_rps"] = float(v["rate"])
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
    out["layerwise"] = bool(v["layerwise"])
    out["margin"] = float(v["margin"])
    if errors:
        return None, errors
    return Spec(out, trace_bytes), []
