"""Calibrate a GPU profile's efficiencies from measurements (``pdplan calibrate``).

For each (GPU kind, engine label) the roofline's efficiency parameters -- prefill MFU, decode MBU,
the fixed per-step overhead and, optionally, the tensor-parallel link's efficiency -- are fitted by
bounded nonlinear least squares (``scipy.optimize.least_squares``, trust-region reflective; Branch,
Coleman & Li 1999, SIAM J. Sci. Comput. 21(1)) to the relative errors of the predictions:

    r_i = predicted_i / measured_i - 1

Predictions come from :mod:`model.physics` only (model.calibrate.problem; no separate formulas):

- prefill / TTFT of a static batch of B: ``prefill_cost(dep, isl, batch=B).time_s``;
- TTFT in an open loop at rate lambda (light load only, see
  :func:`model.calibrate.measurements.classify_ttft`):
  prefill + the mean wait of a G/D/1 queue, ``model.queueing.mgc.mgc_wait`` with one server,
  deterministic service and arrival SCV 1 / burstiness (M/D/1 for Poisson arrivals; DistServe,
  Zhong et al. 2024, sec. 3.1 models a prefill instance the same way);
- TPOT: ``mean_tpot_s(dep, B, isl, osl)`` at the mean running batch B (linear interpolation between
  whole batches), plus k x (prefill time - step overhead) for the k other prompts each decode step
  carries (:func:`model.calibrate.problem.prefills_per_step`, the interference formula of
  :mod:`model.queueing.interference`): a colocated engine stalls decodes while it prefills
  (Sarathi-Serve, Agrawal et al. 2024, sec. 2-3);
- output throughput (used only for rows without TPOT): B x osl / end-to-end time per request.

Errors before (the base profile), after, and leave-one-out (each row predicted by a fit that did
not see it) are reported so an overfit is visible. See docs/calibration.md.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from model.calibrate.load import load_measurements
from model.calibrate.measurements import Measurement, RowDefaults
from model.calibrate.problem import (
    Problem,
    Target,
    Theta,
    group_configs,
    resolve_model,
    rethrow_at,
    targets_for,
)
from model.calibrate.results import CalibrationResult, ErrorRow, Excluded, GroupFit, ParameterFit, Residual
from model.errors import InputError, PdplanError, UnknownNameError, short
from model.hardware.catalog import get_engine, load_catalog
from model.hardware.collectives import default_tp_link
from model.hardware.gpus import GPU
from model.limits import MAX_MEASUREMENT_ROWS
from model.physics.deployment import (
    DECODE_ATTENTION_FIXED_TOKENS,
    DECODE_KV_STREAM_EFFICIENCY,
    LOW_PRECISION_MFU_RATIO,
    Deployment,
)

__all__ = ["BOUNDS", "DEFAULT_FIT", "FITTABLE", "PARAMETERS", "calibrate"]

PARAMETERS = (
    "prefill_mfu",
    "decode_mbu",
    "step_overhead_s",
    "comm_efficiency",
    "kernel_s",
    "per_sequence_s",
    "decode_kv_efficiency",
    "decode_attention_fixed_tokens",
    "low_precision_gemm_ratio",
    "request_s",
)
DEFAULT_FIT = ("prefill_mfu", "decode_mbu", "step_overhead_s")
# Parameters ``fit`` may name: every one but comm_efficiency (asked for with ``fit_comm``): the GPU
# profile's efficiencies, the engine profile's per-kernel floor, per-sequence cost and client request
# overhead (model.hardware.overheads; written as comments, they belong to an engine profile's
# [overheads]), the decode-attention terms and the engine's 8-/4-bit GEMM ratio ([gemm]).
FITTABLE = tuple(n for n in PARAMETERS if n != "comm_efficiency")
# Parameters reported only when ``fit`` names them, all but the defaults: the engine overheads, the
# decode-attention efficiency terms (module constants of model.physics.deployment, not GPU-profile
# fields), the engine's 8-/4-bit GEMM efficiency ratio (with 16-bit rows in the group beside FP8/FP4
# ones it separates from the prefill MFU) and the client-observed per-request overhead on TTFT rows
# (0 unless fitted: rows with both prefill_s and ttft_s, or TTFT rows at several prompt lengths,
# separate it from the prefill).
OPT_IN = tuple(n for n in FITTABLE if n not in DEFAULT_FIT)
# Physically possible ranges. MFU / MBU / link efficiency are fractions of a peak (<= 1 by
# definition); the lower ends are far below any working engine, so a fit that lands on one means
# the model is missing something (reported as "at bound"). The step overhead must be > 0 (profile
# schema) and a host-side step cost above 50 ms is not an engine overhead but a misconfiguration.
BOUNDS: dict[str, tuple[float, float]] = {
    "prefill_mfu": (0.02, 1.0),
    "decode_mbu": (0.05, 1.0),
    "step_overhead_s": (1e-6, 0.05),
    "comm_efficiency": (0.05, 1.0),
    # a kernel floor above 50 us or a per-sequence cost above 1 ms per step is not an overhead of a
    # working engine (CUDA Graphs blog: ~3 us per short kernel; vLLM: ~5 us per sequence)
    "kernel_s": (1e-8, 5e-5),
    "per_sequence_s": (1e-8, 1e-3),
    # decode attention streams KV at a fraction of the HBM peak; its fixed cost per sequence is
    # below a few thousand tokens of KV (model.physics.deployment)
    "decode_kv_efficiency": (0.05, 1.0),
    "decode_attention_fixed_tokens": (0.0, 4096.0),
    # the engine profile's accepted range (model.hardware.overheads.Overheads)
    "low_precision_gemm_ratio": (0.1, 1.5),
    # a front end adding more than half a second per request is not an overhead but a misconfiguration
    "request_s": (1e-6, 0.5),
}
# Where an engine term's base is unset (the group's engine label names no profile, or the profile sets
# no FP8/FP4 ratio), sensitivity and the fit start from the built-in engines' value
# (hardware_profiles/engines/*.toml [overheads]) or, for the GEMM ratio, the one the model then uses
# (model.physics.deployment.LOW_PRECISION_MFU_RATIO).
TYPICAL_ENGINE_OVERHEAD = {
    "kernel_s": 3e-6,
    "per_sequence_s": 5e-6,
    "low_precision_gemm_ratio": LOW_PRECISION_MFU_RATIO["fp8"],
    # vLLM's API server: +8.4 to +12.2 ms client over server TTFT (hardware_profiles/engines/vllm.toml)
    "request_s": 10e-3,
}
# A parameter is fitted only if a 5% change of it moves some prediction by at least 0.1%.
SENSITIVITY_STEP = 0.05
SENSITIVITY_MIN = 1e-3
# A fitted parameter whose standard error exceeds this fraction of its value is not determined by the
# data: it is put back to the base profile's value and the rest are refitted.
MAX_RELATIVE_STD_ERROR = 0.5
METRICS = ("prefill", "ttft", "tpot", "throughput")


# ---------------------------------------------------------------------------------------------
# Fitting


def _engine_base(engine: str) -> tuple[float, float, float | None]:
    """(kernel_s, per_sequence_s, low_precision_gemm_ratio) of the engine profile the group's engine
    label names (e.g. "vllm", "vllm-0.8" -> vllm), so predictions carry the overheads and the 8-/4-bit
    GEMM generation the planner uses; (0, 0, None) when the label names no profile (the GPU profile's
    step overhead alone and LOW_PRECISION_MFU_RATIO, as without an engine)."""
    for label in (engine, re.split(r"[-_ ]", engine.strip(), maxsplit=1)[0]):
        try:
            e = get_engine(label)
        except (UnknownNameError, InputError):
            continue
        return e.kernel_s, e.per_sequence_s, e.low_precision_gemm_ratio
    return 0.0, 0.0, None


def _theta(names: Sequence[str], x: np.ndarray, base: Theta) -> Theta:
    return dataclasses.replace(base, **dict(zip(names, (float(v) for v in x), strict=True)))


def _fit(
    problem: Problem, names: Sequence[str], base: Theta, x0: np.ndarray, rows: np.ndarray | None = None
) -> np.ndarray:
    """Bounded least squares of the relative errors over ``rows`` (all rows when None)."""
    if not names:
        return x0
    mask = (
        np.ones(len(problem.targets), dtype=bool)
        if rows is None
        else np.isin([t.row for t in problem.targets], rows)
    )
    measured = problem.measured[mask]

    def residuals(x: np.ndarray) -> np.ndarray:
        pred = problem.predictions(_theta(names, x, base), rows)[mask]
        return pred / measured - 1.0

    lo = np.array([BOUNDS[n][0] for n in names])
    hi = np.array([BOUNDS[n][1] for n in names])
    start = np.clip(x0, lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))
    sol = least_squares(
        residuals,
        start,
        bounds=(lo, hi),
        x_scale=np.maximum(start, 1e-6),
        method="trf",
        xtol=1e-10,
        ftol=1e-10,
        gtol=1e-10,
        max_nfev=200,
    )
    return np.asarray(sol.x, dtype=float)


def _sensitive(problem: Problem, name: str, base: Theta) -> bool:
    """Does a SENSITIVITY_STEP relative change of ``name`` move any prediction by SENSITIVITY_MIN?
    (From TYPICAL_ENGINE_OVERHEAD where an engine overhead's base is 0.)"""
    value = getattr(base, name) or TYPICAL_ENGINE_OVERHEAD.get(name, 0.0)
    if value != getattr(base, name):
        base = dataclasses.replace(base, **{name: value})
    lo, hi = BOUNDS[name]
    bumped = (
        value * (1.0 - SENSITIVITY_STEP)
        if value * (1 + SENSITIVITY_STEP) > hi
        else value * (1.0 + SENSITIVITY_STEP)
    )
    bumped = min(max(bumped, lo), hi)
    p0 = problem.predictions(base)
    p1 = problem.predictions(dataclasses.replace(base, **{name: bumped}))
    return bool(np.nanmax(np.abs(p1 / p0 - 1.0)) >= SENSITIVITY_MIN)


def _std_errors(
    problem: Problem, names: Sequence[str], base: Theta, x: np.ndarray
) -> tuple[np.ndarray, bool, np.ndarray]:
    """Standard errors from the Jacobian at the solution: cov = s^2 (J^T J)^-1, s^2 = SSR / (n - p)
    (Gauss-Newton linearisation; Seber & Wild 1989, *Nonlinear Regression*, sec. 2.1). Returns
    (errors, identifiable, column norms of the Jacobian per relative parameter change); nan errors
    when n <= p or J^T J is singular."""
    p = len(names)
    if p == 0:
        return np.zeros(0), True, np.zeros(0)
    th = _theta(names, x, base)
    r0 = problem.predictions(th) / problem.measured - 1.0
    jac = np.empty((len(r0), p))
    for k, name in enumerate(names):
        h = max(abs(x[k]) * 1e-4, 1e-9)
        step = x.copy()
        step[k] = x[k] - h if x[k] + h > BOUNDS[name][1] else x[k] + h
        r1 = problem.predictions(_theta(names, step, base)) / problem.measured - 1.0
        jac[:, k] = (r1 - r0) / (step[k] - x[k])
    scale = np.maximum(np.abs(x), 1e-12)
    js = jac * scale  # sensitivity per relative change: comparable columns
    rank = np.linalg.matrix_rank(js, tol=1e-6 * max(np.abs(js).max(), 1e-300))
    n = len(r0)
    norms = np.linalg.norm(js, axis=0)
    if rank < p or n <= p:
        return np.full(p, np.nan), rank >= p, norms
    s2 = float(np.sum(r0**2)) / (n - p)
    cov = np.linalg.inv(js.T @ js) * s2
    return np.sqrt(np.maximum(np.diag(cov), 0.0)) * scale, True, norms


def _stats(errors: np.ndarray) -> tuple[float, float]:
    e = errors[np.isfinite(errors)]
    if e.size == 0:
        return math.nan, math.nan
    return float(np.sqrt(np.mean(e**2))), float(np.mean(np.abs(e)))


def _error_rows(residuals: Sequence[Residual]) -> tuple[ErrorRow, ...]:
    out = []
    for metric in (*METRICS, "all"):
        rs = [r for r in residuals if metric in ("all", r.metric)]
        if not rs:
            continue
        cols = {w: np.array([r.error(w) for r in rs]) for w in ("before", "after", "loo")}
        (rb, mb), (ra, ma), (rl, ml) = (_stats(cols[w]) for w in ("before", "after", "loo"))
        out.append(ErrorRow(metric, len(rs), rb, ra, rl, mb, ma, ml))
    return tuple(out)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-") or "custom"


def _calibrate_group(
    gpu: GPU,
    engine: str,
    rows: Sequence[Measurement],
    fit: Sequence[str],
    fit_comm: bool,
    max_util: float,
    loo: bool,
) -> GroupFit:
    archs = []
    for m in rows:
        arch = resolve_model(m.model, m.source)
        try:
            Deployment(arch, gpu, parallel=m.parallel, weight_dtype=m.dtype, kv_dtype=m.kv_dtype)
        except InputError as err:
            raise rethrow_at(m.source, err) from None
        archs.append(arch)
    targets: list[Target] = []
    excluded: list[Excluded] = []
    for i, m in enumerate(rows):
        t, x = targets_for(i, m, max_util)
        targets += t
        excluded += x
    if not targets:
        reasons = "; ".join(f"{x.source} {x.metric}: {x.reason}" for x in excluded) or "no measured values"
        raise PdplanError(f"calibrate: nothing to fit for GPU {gpu.name} / engine {engine}: {reasons}")
    problem = Problem(gpu, rows, targets, group_configs(rows, archs))

    tp_multi = any(m.tp > 1 for m in rows)
    link_name = ""
    comm_base = None
    if fit_comm and tp_multi:
        link = default_tp_link(gpu, max(m.tp for m in rows))
        link_name, comm_base = link.name, link.efficiency
    kernel_s, per_sequence_s, low_precision_ratio = _engine_base(engine)
    base = Theta(
        gpu.prefill_mfu,
        gpu.decode_mbu,
        gpu.step_overhead_s,
        comm_base,
        kernel_s,
        per_sequence_s,
        DECODE_KV_STREAM_EFFICIENCY,
        DECODE_ATTENTION_FIXED_TOKENS,
        low_precision_ratio,
    )

    warnings: list[str] = []
    wanted = [n for n in fit if n != "comm_efficiency"] + (
        ["comm_efficiency"] if comm_base is not None else []
    )
    if fit_comm and comm_base is None:
        warnings.append("comm_efficiency not fitted: no row has tp > 1")
    names = [n for n in wanted if _sensitive(problem, n, base)]
    for n in wanted:
        if n not in names:
            warnings.append(f"{n} not fitted: no measurement in this group is sensitive to it (kept at base)")
    while True:
        x0 = np.array([getattr(base, n) or TYPICAL_ENGINE_OVERHEAD.get(n, 0.0) for n in names], dtype=float)
        x = _fit(problem, names, base, x0)
        se, identifiable, norms = _std_errors(problem, names, base, x)
        rel = np.where(np.isfinite(se), se / np.maximum(np.abs(x), 1e-300), np.inf)
        if not names or (identifiable and np.all(rel <= MAX_RELATIVE_STD_ERROR)):
            break
        if identifiable and len(targets) <= len(names):
            warnings.append(
                f"{len(targets)} measured values for {len(names)} parameters: "
                "solved exactly, no error estimate"
            )
            break
        if not identifiable:
            worst = int(np.argmin(norms))
            others = ", ".join(n for n in names if n != names[worst])
            warnings.append(
                f"{names[worst]} not fitted: the data do not separate it from {others} (kept at base; "
                "add rows that differ in prompt length, batch size or model size)"
            )
        else:
            worst = int(np.argmax(rel))
            warnings.append(
                f"{names[worst]} not fitted: the data determine it only to +-{rel[worst]:.0%} (kept at base)"
            )
        names = [n for k, n in enumerate(names) if k != worst]
    th = _theta(names, x, base)

    before = problem.predictions(base)
    after = problem.predictions(th)
    row_ids = np.arange(len(rows))
    loo_pred = np.full(len(targets), np.nan)
    if loo and len(rows) > len(names) + 1:
        for i in row_ids:
            keep = row_ids[row_ids != i]
            xi = _fit(problem, names, base, x, keep)
            pred_i = problem.predictions(_theta(names, xi, base), np.array([i]))
            sel = [k for k, t in enumerate(targets) if t.row == i]
            loo_pred[sel] = pred_i[sel]
    elif loo:
        warnings.append(
            f"leave-one-out skipped: {len(rows)} rows for {len(names)} parameters "
            f"(need at least {len(names) + 2})"
        )
    residuals = tuple(
        Residual(
            rows[t.row].source, t.metric, t.measured, float(before[k]), float(after[k]), float(loo_pred[k])
        )
        for k, t in enumerate(targets)
    )
    params = []
    for k_name in PARAMETERS:
        if k_name == "comm_efficiency" and comm_base is None:
            continue
        if k_name in OPT_IN and k_name not in wanted:
            continue  # engine overheads and decode-attention terms are reported only when asked for
        b = getattr(base, k_name)
        b = float(TYPICAL_ENGINE_OVERHEAD[k_name] if b is None else b)
        if k_name in names:
            k = names.index(k_name)
            v = float(x[k])
            lo, hi = BOUNDS[k_name]
            at_bound = bool(math.isclose(v, lo, rel_tol=1e-3) or math.isclose(v, hi, rel_tol=1e-3))
            note = "at a bound of its physical range: the model may be missing an effect" if at_bound else ""
            if at_bound:
                warnings.append(f"{k_name} = {v:.4g} is at a bound of [{lo:g}, {hi:g}]")
            params.append(ParameterFit(k_name, b, v, float(se[k]), True, at_bound, note))
        else:
            params.append(
                ParameterFit(k_name, b, b, math.nan, False, False, "kept at the base profile value")
            )
    stats = _error_rows(residuals)
    all_row = next(e for e in stats if e.metric == "all")
    if math.isfinite(all_row.rmse_loo) and all_row.rmse_loo > 2.0 * max(all_row.rmse_after, 0.01):
        warnings.append(
            f"leave-one-out RMSE {all_row.rmse_loo:.1%} is more than twice the fit RMSE "
            f"{all_row.rmse_after:.1%}: "
            "the fit may be overfitting these rows"
        )
    files = tuple(dict.fromkeys(m.file for m in rows if m.file))
    return GroupFit(
        gpu=gpu.name,
        engine=engine,
        profile_name=f"{gpu.name}-calibrated-{_slug(engine)}",
        base_profile_path=gpu.path,
        files=files,
        n_rows=len(rows),
        parameters=tuple(params),
        residuals=residuals,
        errors=stats,
        excluded=tuple(excluded),
        warnings=tuple(warnings),
        rows=tuple(rows),
        tp_link=link_name,
    )


def calibrate(
    measurements: Iterable[Measurement] | str | Path,
    *,
    fmt: str | None = None,
    defaults: RowDefaults | None = None,
    profile_dirs: str | Path | Sequence[str | Path] | None = None,
    fit: Sequence[str] = DEFAULT_FIT,
    fit_comm: bool = False,
    max_ttft_utilisation: float = 0.5,
    loo: bool = True,
) -> CalibrationResult:
    """Fit efficiency parameters per (GPU kind, engine label) to ``measurements``.

    ``measurements``: :class:`Measurement` rows, or a file path (read with
    :func:`load_measurements` using ``fmt`` and ``defaults``). ``fit``: which of
    ``prefill_mfu``, ``decode_mbu``, ``step_overhead_s`` (default), the engine overheads
    ``kernel_s``, ``per_sequence_s``, the decode-attention terms ``decode_kv_efficiency``,
    ``decode_attention_fixed_tokens`` and the engine's FP8/FP4 GEMM ratio
    ``low_precision_gemm_ratio`` and the client-observed request overhead ``request_s`` (added to
    TTFT rows when fitted) to fit (others stay at the base profiles' values); ``fit_comm``
    also fits the TP link efficiency when some row has TP > 1.
    ``max_ttft_utilisation``: open-loop TTFT rows with request_rate x TTFT above it are not used.
    ``loo``: compute leave-one-out errors (one refit per row).
    """
    if isinstance(measurements, str | Path):
        rows = list(load_measurements(measurements, fmt, defaults=defaults))
    elif isinstance(measurements, Iterable) and not isinstance(measurements, Mapping | bytes):
        rows = list(islice(measurements, MAX_MEASUREMENT_ROWS + 1))
    else:
        raise InputError("measurements", type(measurements).__name__, "Measurement rows or a file path")
    if len(rows) > MAX_MEASUREMENT_ROWS:
        raise InputError(
            "measurements", f"> {MAX_MEASUREMENT_ROWS:,} rows", f"at most {MAX_MEASUREMENT_ROWS:,} rows"
        )
    if isinstance(fit, str) or not isinstance(fit, Sequence) or not all(isinstance(n, str) for n in fit):
        raise InputError("fit", short(fit), "a list of parameter names from " + ", ".join(FITTABLE))
    for name, flag in (("fit_comm", fit_comm), ("loo", loo)):
        if not isinstance(flag, bool):
            raise InputError(name, short(flag), "True or False")
    if isinstance(max_ttft_utilisation, bool):
        raise InputError("max_ttft_utilisation", max_ttft_utilisation, "a fraction in (0, 1)")
    if not rows:
        raise InputError("measurements", [], "at least one measurement")
    for m in rows:
        if not isinstance(m, Measurement):
            raise InputError(
                "measurements", type(m).__name__, "Measurement rows (see model.calibrate.measurements)"
            )
    bad = [n for n in fit if n not in FITTABLE]
    if bad:
        raise InputError("fit", bad[0], "some of " + ", ".join(FITTABLE))
    if not (isinstance(max_ttft_utilisation, int | float) and 0 < max_ttft_utilisation < 1):
        raise InputError("max_ttft_utilisation", max_ttft_utilisation, "a fraction in (0, 1)")
    catalog = load_catalog(profile_dirs)
    groups: dict[tuple[str, str], tuple[GPU, list[Measurement]]] = {}
    for m in rows:
        try:
            gpu = catalog.gpu(m.gpu)
        except (InputError, UnknownNameError) as err:
            raise InputError(f"{m.source}, gpu", m.gpu, f"a known GPU profile ({err})") from None
        groups.setdefault((gpu.name, m.engine), (gpu, []))[1].append(m)
    fits = tuple(
        _calibrate_group(gpu, engine, ms, fit, fit_comm, max_ttft_utilisation, loo)
        for (_, engine), (gpu, ms) in groups.items()
    )
    return CalibrationResult(fits)
