"""Measurements from vLLM serving-benchmark result JSON (``benchmarks/benchmark_serving.py
--save-result``; one object, a list, or JSON lines). The keys read are listed in docs/calibration.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from model.calibrate.measurements import (
    DEFAULT_DTYPE,
    DEFAULT_PP,
    DEFAULT_TP,
    DEFAULT_VLLM_ENGINE,
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
from model.errors import InputError
from model.limits import MAX_MEASUREMENT_ROWS, parse_json

__all__ = ["parse_vllm_json"]


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
    value = number_field(where, key, raw, minimum=0.0, strict=False)
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
    gpu = merge_field(where, "gpu", obj.get("gpu"), d.gpu)
    if gpu is None:
        raise InputError(f"{where}, gpu", None, "a GPU name (--gpu, or --metadata gpu=... when benchmarking)")
    tp = whole_field(where, "tp", merge_field(where, "tp", obj.get("tp"), d.tp) or DEFAULT_TP)
    pp = whole_field(where, "pp", merge_field(where, "pp", obj.get("pp"), d.pp) or DEFAULT_PP)
    dtype = text_field(
        where, "dtype", merge_field(where, "dtype", obj.get("dtype"), d.dtype) or DEFAULT_DTYPE
    ).lower()
    kv = merge_field(where, "kv_dtype", obj.get("kv_dtype"), d.kv_dtype)
    engine = text_field(
        where, "engine", merge_field(where, "engine", obj.get("engine"), d.engine) or DEFAULT_VLLM_ENGINE
    )

    completed = whole_field(where, "completed", _get(obj, where, "completed"))
    isl = number_field(where, "total_input_tokens", _get(obj, where, "total_input_tokens")) / completed
    osl = number_field(where, "total_output_tokens", _get(obj, where, "total_output_tokens")) / completed
    if isl < 1 or osl < 1:
        raise InputError(
            f"{where}, total_input_tokens/total_output_tokens", (isl, osl), ">= 1 token per request"
        )
    raw_rate = _get(obj, where, "request_rate")
    infinite = isinstance(raw_rate, str) and raw_rate.strip().lower() in ("inf", "infinity")
    rate = None if infinite else number_field(where, "request_rate", raw_rate)
    raw_b = obj.get("burstiness")
    burstiness = 1.0 if raw_b is None else number_field(where, "burstiness", raw_b)
    raw_c = obj.get("max_concurrency")
    cap = None if raw_c is None else float(whole_field(where, "max_concurrency", raw_c))

    ttft_s = _opt_json_ms(obj, where, "mean_ttft_ms")
    tpot_s = _opt_json_ms(obj, where, "mean_tpot_ms")
    itl_s = _opt_json_ms(obj, where, "mean_itl_ms")
    tpot_s = tpot_s if tpot_s is not None else itl_s
    e2e_s = _opt_json_ms(obj, where, "mean_e2el_ms")
    raw_out = obj.get("output_throughput")
    out_tps = (
        None if raw_out is None else number_field(where, "output_throughput", raw_out, strict=False) or None
    )
    if ttft_s is None and tpot_s is None:
        raise InputError(f"{where}, mean_ttft_ms/mean_tpot_ms", None, "a TTFT or TPOT/ITL statistic")

    limit = float(min(cap, completed)) if cap is not None else float(completed)
    if rate is None and cap is not None:
        load, batch, lam = "concurrency", limit, None
    else:
        load = "rate"
        if rate is None:  # every request sent at once: arrival rate = measured completions per second
            lam = number_field(where, "request_throughput", _get(obj, where, "request_throughput"))
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
        **row_identity(model, gpu, kv),
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
