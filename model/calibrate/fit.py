"""Calibrate a GPU profile's efficiencies from measurements (``pdplan calibrate``).

For each (GPU kind, engine label) the roofline's efficiency parameters -- prefill MFU, decode MBU,
the fixed per-step overhead and, optionally, the tensor-parallel link's efficiency -- are fitted by
bounded nonlinear least squares (``scipy.optimize.least_squares``, trust-region reflective; Branch,
Coleman & Li 1999, SIAM J. Sci. Comput. 21(1)) to the relative errors of the predictions:

    r_i = predicted_i / measured_i - 1

Predictions come from :mod:`model.roofline` only (no separate formulas here):

- prefill / TTFT of a static batch of B: ``prefill_cost(dep, isl, batch=B).time_s``;
- TTFT in an open loop at rate lambda (light load only, see
  :func:`model.calibrate.measurements.classify_ttft`):
  prefill + the mean wait of a G/D/1 queue, ``model.queueing.mgc_wait`` with one server,
  deterministic service and arrival SCV 1 / burstiness (M/D/1 for Poisson arrivals; DistServe,
  Zhong et al. 2024, sec. 3.1 models a prefill instance the same way);
- TPOT: ``mean_tpot_s(dep, B, isl, osl)`` at the mean running batch B (linear interpolation between
  whole batches), plus k x (prefill time - step overhead) for the k other prompts each decode step
  carries (:attr:`Measurement.prefills_per_step`): a colocated engine stalls decodes while it
  prefills (Sarathi-Serve, Agrawal et al. 2024, sec. 2-3);
- output throughput (used only for rows without TPOT): B x osl / end-to-end time per request.

Errors before (the base profile), after, and leave-one-out (each row predicted by a fit that did
not see it) are reported so an overfit is visible. See docs/calibration.md.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from model.calibrate.measurements import (
    FORMATS,
    Measurement,
    RowDefaults,
    classify_ttft,
    load_measurements,
    parse_csv,
    parse_vllm_json,
)
from model.errors import InputError, PdplanError, UnknownNameError, short
from model.hardware.collectives import default_tp_link
from model.hardware.profiles import GPU, gpu_from_toml, load_catalog
from model.limits import MAX_MEASUREMENT_ROWS
from model.llm.arch import LLMArch
from model.llm.catalog import get_model
from model.physics.roofline import Deployment, generation_time_s, mean_tpot_s, prefill_cost
from model.queueing.mgc import mgc_wait

__all__ = [
    "BOUNDS",
    "DEFAULT_FIT",
    "FORMATS",
    "PARAMETERS",
    "CalibrationResult",
    "ErrorRow",
    "Excluded",
    "GroupFit",
    "Measurement",
    "ParameterFit",
    "Residual",
    "RowDefaults",
    "calibrate",
    "calibrated_profile_toml",
    "load_measurements",
    "parse_csv",
    "parse_vllm_json",
    "write_profiles",
]

PARAMETERS = ("prefill_mfu", "decode_mbu", "step_overhead_s", "comm_efficiency")
DEFAULT_FIT = ("prefill_mfu", "decode_mbu", "step_overhead_s")
# Physically possible ranges. MFU / MBU / link efficiency are fractions of a peak (<= 1 by
# definition); the lower ends are far below any working engine, so a fit that lands on one means
# the model is missing something (reported as "at bound"). The step overhead must be > 0 (profile
# schema) and a host-side step cost above 50 ms is not an engine overhead but a misconfiguration.
BOUNDS: dict[str, tuple[float, float]] = {
    "prefill_mfu": (0.02, 1.0),
    "decode_mbu": (0.05, 1.0),
    "step_overhead_s": (1e-6, 0.05),
    "comm_efficiency": (0.05, 1.0),
}
# A parameter is fitted only if a 5% change of it moves some prediction by at least 0.1%.
SENSITIVITY_STEP = 0.05
SENSITIVITY_MIN = 1e-3
# A fitted parameter whose standard error exceeds this fraction of its value is not determined by the
# data: it is put back to the base profile's value and the rest are refitted.
MAX_RELATIVE_STD_ERROR = 0.5
# Penalty prediction (s) for an open-loop TTFT row whose queue is unstable at trial parameters.
UNSTABLE_TTFT_S = 1e3
METRICS = ("prefill", "ttft", "tpot", "throughput")


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class ParameterFit:
    """One efficiency parameter: profile value before, fitted value, its standard error (nan when
    not identifiable), whether it was fitted, and whether the fit stopped on a bound."""

    name: str
    base: float
    value: float
    std_error: float
    fitted: bool
    at_bound: bool
    note: str = ""


@dataclass(frozen=True)
class Residual:
    """One measured quantity: the measurement and the predictions before, after and leave-one-out.

    ``metric`` is prefill / ttft / tpot (seconds) or throughput (output tokens/s).
    """

    source: str
    metric: str
    measured: float
    before: float
    after: float
    loo: float

    def error(self, which: str) -> float:
        """Relative error predicted / measured - 1 of ``which`` (before / after / loo)."""
        return float(getattr(self, which)) / self.measured - 1.0


@dataclass(frozen=True)
class ErrorRow:
    """Root-mean-square and mean absolute relative errors of one metric (fractions, nan if none)."""

    metric: str
    n: int
    rmse_before: float
    rmse_after: float
    rmse_loo: float
    mape_before: float
    mape_after: float
    mape_loo: float


@dataclass(frozen=True)
class Excluded:
    """A measured value left out of the fit, and why."""

    source: str
    metric: str
    reason: str


@dataclass(frozen=True)
class GroupFit:
    """The calibration of one GPU kind under one engine label."""

    gpu: str
    engine: str
    profile_name: str
    base_profile_path: str
    files: tuple[str, ...]
    n_rows: int
    parameters: tuple[ParameterFit, ...]
    residuals: tuple[Residual, ...]
    errors: tuple[ErrorRow, ...]
    excluded: tuple[Excluded, ...]
    warnings: tuple[str, ...]
    rows: tuple[Measurement, ...]
    tp_link: str = ""

    def parameter(self, name: str) -> ParameterFit:
        for p in self.parameters:
            if p.name == name:
                return p
        raise InputError("parameter", name, ", ".join(p.name for p in self.parameters))

    def error_row(self, metric: str = "all") -> ErrorRow:
        for e in self.errors:
            if e.metric == metric:
                return e
        raise InputError("metric", metric, ", ".join(e.metric for e in self.errors))

    @property
    def values(self) -> dict[str, float]:
        """Fitted (or kept) value of every parameter."""
        return {p.name: p.value for p in self.parameters}


@dataclass(frozen=True)
class CalibrationResult:
    """Every (GPU, engine) group's fit. ``to_dict`` gives the JSON the CLI prints."""

    groups: tuple[GroupFit, ...]

    def group(self, gpu: str | None = None, engine: str | None = None) -> GroupFit:
        """The one group matching ``gpu`` / ``engine`` (either may be None when unambiguous)."""
        hits = [
            g
            for g in self.groups
            if (gpu is None or g.gpu == gpu.lower() or g.profile_name == gpu.lower())
            and (engine is None or g.engine == engine)
        ]
        if len(hits) != 1:
            names = ", ".join(f"{g.gpu}/{g.engine}" for g in self.groups)
            raise InputError("group", f"{gpu}/{engine}", f"exactly one of: {names}")
        return hits[0]

    def to_dict(self) -> dict[str, Any]:
        out = []
        for g in self.groups:
            out.append(
                {
                    "gpu": g.gpu,
                    "engine": g.engine,
                    "profile_name": g.profile_name,
                    "files": list(g.files),
                    "n_rows": g.n_rows,
                    "tp_link": g.tp_link,
                    "parameters": [dataclasses.asdict(p) for p in g.parameters],
                    "errors": [dataclasses.asdict(e) for e in g.errors],
                    "residuals": [
                        {
                            **dataclasses.asdict(r),
                            "error_before": r.error("before"),
                            "error_after": r.error("after"),
                            "error_loo": r.error("loo"),
                        }
                        for r in g.residuals
                    ],
                    "excluded": [dataclasses.asdict(x) for x in g.excluded],
                    "warnings": list(g.warnings),
                }
            )
        return {"groups": out}


# ---------------------------------------------------------------------------------------------
# Prediction


@dataclass(frozen=True)
class _Theta:
    prefill_mfu: float
    decode_mbu: float
    step_overhead_s: float
    comm_efficiency: float | None  # None: the link profile's own efficiency


@dataclass(frozen=True)
class _Config:
    """Rows sharing one deployment (model, TP, PP, dtypes), as arrays for vectorised prediction."""

    arch: LLMArch
    tp: int
    pp: int
    dtype: str
    kv_dtype: str | None
    index: np.ndarray  # positions of these rows in the group's row list
    isl: np.ndarray
    osl: np.ndarray
    prefill_batch: np.ndarray
    decode_batch: np.ndarray
    prefills_per_step: np.ndarray
    rate: np.ndarray  # open-loop arrival rate for TTFT, 0 where none
    scv_arrival: np.ndarray
    concurrency_mode: np.ndarray


def _deployment(gpu: GPU, cfg: _Config, th: _Theta) -> Deployment:
    link = None
    if th.comm_efficiency is not None and cfg.tp > 1:
        link = dataclasses.replace(default_tp_link(gpu, cfg.tp), efficiency=th.comm_efficiency)
    return Deployment(
        cfg.arch,
        gpu,
        tp=cfg.tp,
        pp=cfg.pp,
        weight_dtype=cfg.dtype,
        kv_dtype=cfg.kv_dtype,
        prefill_mfu=th.prefill_mfu,
        decode_mbu=th.decode_mbu,
        step_overhead_s=th.step_overhead_s,
        tp_link=link,
    )


def _tpot_at(dep: Deployment, batch: np.ndarray, isl: np.ndarray, osl: np.ndarray) -> np.ndarray:
    """mean_tpot_s at a fractional mean batch: linear interpolation between the whole batches around it."""
    lo = np.floor(batch)
    frac = batch - lo
    t_lo = mean_tpot_s(dep, lo, isl, osl)
    t_hi = mean_tpot_s(dep, lo + 1.0, isl, osl)
    return (1.0 - frac) * t_lo + frac * t_hi


def _predict(gpu: GPU, cfg: _Config, th: _Theta) -> dict[str, np.ndarray]:
    """Predicted prefill, TTFT, TPOT (s) and output throughput (tokens/s) of every row of ``cfg``."""
    dep = _deployment(gpu, cfg, th)
    prefill = np.asarray(prefill_cost(dep, cfg.isl, batch=cfg.prefill_batch).time_s, dtype=float)
    wait = np.zeros_like(prefill)
    queued = cfg.rate > 0
    if np.any(queued):
        w = mgc_wait(cfg.rate[queued], prefill[queued], 0.0, 1, cfg.scv_arrival[queued])
        wait[queued] = np.where(w.stable, w.mean_wait_s, UNSTABLE_TTFT_S)
    ttft = prefill + wait
    osl = cfg.osl
    tpot = _tpot_at(dep, cfg.decode_batch, cfg.isl, osl)
    tpot = tpot + cfg.prefills_per_step * np.maximum(prefill - dep.overhead_s, 0.0)
    gen = np.asarray(generation_time_s(dep, cfg.decode_batch, cfg.isl, osl), dtype=float)
    e2e = np.where(cfg.concurrency_mode, prefill + (osl - 1.0) * tpot, gen)
    throughput = cfg.decode_batch * osl / e2e
    return {"prefill": prefill, "ttft": ttft, "tpot": tpot, "throughput": throughput}


@dataclass(frozen=True)
class _Target:
    row: int  # index in the group's row list
    metric: str
    measured: float


class _Problem:
    """The residual function of one group: rows, their deployments and the measured targets."""

    def __init__(
        self, gpu: GPU, rows: Sequence[Measurement], targets: Sequence[_Target], configs: Sequence[_Config]
    ) -> None:
        self.gpu = gpu
        self.rows = rows
        self.targets = targets
        self.configs = configs
        self.measured = np.array([t.measured for t in targets], dtype=float)

    def predictions(self, th: _Theta, rows: np.ndarray | None = None) -> np.ndarray:
        """Prediction for every target (nan for targets whose row is not in ``rows``)."""
        per_row: dict[int, dict[str, float]] = {}
        for cfg in self.configs:
            keep = np.ones(cfg.index.shape, dtype=bool) if rows is None else np.isin(cfg.index, rows)
            if not np.any(keep):
                continue
            sub = _subset(cfg, keep)
            pred = _predict(self.gpu, sub, th)
            for j, i in enumerate(sub.index):
                per_row[int(i)] = {k: float(v[j]) for k, v in pred.items()}
        return np.array(
            [per_row[t.row][t.metric] if t.row in per_row else np.nan for t in self.targets], dtype=float
        )


def _subset(cfg: _Config, keep: np.ndarray) -> _Config:
    if np.all(keep):
        return cfg
    arrays = {
        f.name: getattr(cfg, f.name)[keep]
        for f in dataclasses.fields(cfg)
        if isinstance(getattr(cfg, f.name), np.ndarray)
    }
    return dataclasses.replace(cfg, **arrays)


# ---------------------------------------------------------------------------------------------
# Building the problem


def _resolve_model(name: str, where: str) -> LLMArch:
    """A catalog model by name/alias (e.g. vLLM's model_id ``meta-llama/Llama-3.1-8B-Instruct``),
    else by the last path component (a local checkpoint directory)."""
    for candidate in (name, name.rstrip("/").rsplit("/", 1)[-1]):
        try:
            return get_model(candidate)
        except (UnknownNameError, InputError):
            continue
    raise InputError(
        f"{where}, model",
        name,
        "a model in the catalog (`pdplan list models`) or a config.json; pass --model",
    )


def _rethrow(where: str, err: InputError) -> InputError:
    return InputError(f"{where}, {err.field}", err.value, err.allowed)


def _targets_for(i: int, m: Measurement, max_util: float) -> tuple[list[_Target], list[Excluded]]:
    targets: list[_Target] = []
    excluded: list[Excluded] = []
    if m.prefill_s is not None:
        targets.append(_Target(i, "prefill", m.prefill_s))
    if m.ttft_s is not None:
        light, why = classify_ttft(m, max_util)
        if light:
            targets.append(_Target(i, "ttft", m.ttft_s))
        else:
            excluded.append(Excluded(m.source, "ttft", why))
    if m.tpot_s is not None:
        if m.osl > 1.0:
            targets.append(_Target(i, "tpot", m.tpot_s))
        else:
            excluded.append(Excluded(m.source, "tpot", "osl = 1: no decode step"))
    if m.output_tokens_per_s is not None:
        if m.tpot_s is not None:
            pass  # TPOT measures the same decode speed more directly; throughput is not counted twice
        elif m.load == "rate":
            excluded.append(
                Excluded(m.source, "throughput", "open loop: throughput is set by the request rate")
            )
        else:
            targets.append(_Target(i, "throughput", m.output_tokens_per_s))
    return targets, excluded


def _configs(rows: Sequence[Measurement], archs: Sequence[LLMArch]) -> list[_Config]:
    keys: dict[tuple[Any, ...], list[int]] = {}
    for i, m in enumerate(rows):
        keys.setdefault((archs[i].name, m.tp, m.pp, m.dtype, m.kv_dtype), []).append(i)
    out = []
    for (_, tp, pp, dtype, kv), idx in keys.items():
        ms = [rows[i] for i in idx]
        out.append(
            _Config(
                arch=archs[idx[0]],
                tp=tp,
                pp=pp,
                dtype=dtype,
                kv_dtype=kv,
                index=np.array(idx),
                isl=np.array([m.isl for m in ms], dtype=float),
                osl=np.array([m.osl for m in ms], dtype=float),
                prefill_batch=np.array([m.batch if m.load == "batch" else 1.0 for m in ms], dtype=float),
                decode_batch=np.array([m.batch for m in ms], dtype=float),
                prefills_per_step=np.array([m.prefills_per_step for m in ms], dtype=float),
                rate=np.array(
                    [m.request_rate_rps if m.load == "rate" and m.request_rate_rps else 0.0 for m in ms],
                    dtype=float,
                ),
                scv_arrival=np.array([1.0 / m.burstiness for m in ms], dtype=float),
                concurrency_mode=np.array([m.load == "concurrency" for m in ms]),
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# Fitting


def _theta(names: Sequence[str], x: np.ndarray, base: _Theta) -> _Theta:
    return dataclasses.replace(base, **dict(zip(names, (float(v) for v in x), strict=True)))


def _fit(
    problem: _Problem, names: Sequence[str], base: _Theta, x0: np.ndarray, rows: np.ndarray | None = None
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


def _sensitive(problem: _Problem, name: str, base: _Theta) -> bool:
    """Does a SENSITIVITY_STEP relative change of ``name`` move any prediction by SENSITIVITY_MIN?"""
    value = getattr(base, name)
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
    problem: _Problem, names: Sequence[str], base: _Theta, x: np.ndarray
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
        arch = _resolve_model(m.model, m.source)
        try:
            Deployment(arch, gpu, tp=m.tp, pp=m.pp, weight_dtype=m.dtype, kv_dtype=m.kv_dtype)
        except InputError as err:
            raise _rethrow(m.source, err) from None
        archs.append(arch)
    targets: list[_Target] = []
    excluded: list[Excluded] = []
    for i, m in enumerate(rows):
        t, x = _targets_for(i, m, max_util)
        targets += t
        excluded += x
    if not targets:
        reasons = "; ".join(f"{x.source} {x.metric}: {x.reason}" for x in excluded) or "no measured values"
        raise PdplanError(f"calibrate: nothing to fit for GPU {gpu.name} / engine {engine}: {reasons}")
    problem = _Problem(gpu, rows, targets, _configs(rows, archs))

    tp_multi = any(m.tp > 1 for m in rows)
    link_name = ""
    comm_base = None
    if fit_comm and tp_multi:
        link = default_tp_link(gpu, max(m.tp for m in rows))
        link_name, comm_base = link.name, link.efficiency
    base = _Theta(gpu.prefill_mfu, gpu.decode_mbu, gpu.step_overhead_s, comm_base)

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
        x0 = np.array([getattr(base, n) for n in names], dtype=float)
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
        b = float(getattr(base, k_name))
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
    ``prefill_mfu``, ``decode_mbu``, ``step_overhead_s`` to fit (others stay at the base profile's
    values); ``fit_comm`` also fits the TP link efficiency when some row has TP > 1.
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
        raise InputError("fit", short(fit), "a list of parameter names from " + ", ".join(PARAMETERS[:3]))
    for name, flag in (("fit_comm", fit_comm), ("loo", loo)):
        if not isinstance(flag, bool):
            raise InputError(name, short(flag), "True or False")
    if isinstance(max_ttft_utilisation, bool):
        raise InputError("max_ttft_utilisation", max_ttft_utilisation, "a fraction in (0, 1)")
    if not rows:
        raise InputError("measurements", [], "at least one measurement")
    for m in rows:
        if not isinstance(m, Measurement):
            raise InputError("measurements", type(m).__name__, "Measurement rows (see model.calibrate_io)")
    bad = [n for n in fit if n not in PARAMETERS[:3]]
    if bad:
        raise InputError("fit", bad[0], "some of " + ", ".join(PARAMETERS[:3]))
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


# ---------------------------------------------------------------------------------------------
# Writing the calibrated profile


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise PdplanError(f"calibrate: cannot write {type(v).__name__} to TOML")


def _emit_toml(data: dict[str, Any]) -> str:
    """The GPU profile shape: top-level scalars and lists, then one level of tables of inline tables."""
    lines = []
    tables = {}
    for k, v in data.items():
        if isinstance(v, dict) and not ("value" in v and "source" in v):
            tables[k] = v
        else:
            lines.append(f"{k} = {_toml_value(v)}")
    for name, table in tables.items():
        lines.append("")
        lines.append(f"[{name}]")
        lines.extend(f"{k} = {_toml_value(v)}" for k, v in table.items())
    return "\n".join(lines) + "\n"


def _fmt_pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x * 100:.1f}%"


def _comment(text: str) -> str:
    return "# " + " ".join(text.split())


def calibrated_profile_toml(fit: GroupFit, *, when: _dt.datetime | None = None) -> str:
    """The calibrated GPU profile: the base profile's data with the [efficiency] values replaced,
    ``name`` = ``fit.profile_name``, no aliases, TOML comments recording the data it came from.
    Validated with :func:`model.hardware.profiles.gpu_from_toml` before it is returned."""
    base_path = Path(fit.base_profile_path)
    try:
        data = tomllib.loads(base_path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise PdplanError(f"calibrate: cannot read the base profile {base_path}: {err}") from None
    data["name"] = fit.profile_name
    data["full_name"] = f"{data.get('full_name', fit.gpu)} (calibrated, {fit.engine})"
    data["aliases"] = []
    eff = dict(data.get("efficiency", {}))
    all_err = fit.error_row("all")
    files = ", ".join(fit.files) or "measurements"
    summary = (
        f"calibrated by pdplan calibrate from {files}, {fit.n_rows} rows, "
        f"fit RMSE {_fmt_pct(all_err.rmse_after)} (before {_fmt_pct(all_err.rmse_before)}, "
        f"leave-one-out {_fmt_pct(all_err.rmse_loo)}); engine {fit.engine}"
    )
    keys = {"prefill_mfu": "prefill_mfu", "decode_mbu": "decode_mbu", "step_overhead_s": "step_overhead"}
    for pname, key in keys.items():
        p = fit.parameter(pname)
        old = eff.get(key, {})
        old_src = old.get("source", "") if isinstance(old, dict) else ""
        if p.fitted:
            se = f" +- {p.std_error:.2g}" if math.isfinite(p.std_error) else ""
            value: Any = f"{p.value * 1e3:.4g} ms" if pname == "step_overhead_s" else round(p.value, 4)
            unit = " s" if pname == "step_overhead_s" else ""
            src = f"{summary}; fitted {p.value:.4g}{unit}{se}, base {p.base:.4g}{unit}"
        else:
            value = old.get("value") if isinstance(old, dict) else p.base
            src = f"not calibrated (no measurement constrains it), kept from {fit.gpu}: {old_src}"
        eff[key] = {"value": value, "source": src}
    data["efficiency"] = eff
    stamp = (when or _dt.datetime.now(_dt.UTC)).strftime("%Y-%m-%d %H:%M UTC")
    head = [
        _comment(f"{fit.profile_name}: {fit.gpu} calibrated by `pdplan calibrate` on {stamp}."),
        _comment(f"Base profile: {fit.gpu} ({base_path.name}); engine label: {fit.engine}; data: {files}."),
        _comment(
            "Only [efficiency] differs from the base profile. Select it with --profile-dir DIR "
            f"--gpu {fit.profile_name} (or profile_dirs=DIR in Python)."
        ),
    ]
    for p in fit.parameters:
        if p.fitted:
            head.append(
                _comment(
                    f"{p.name}: {p.base:.4g} -> {p.value:.4g}"
                    + (f" +- {p.std_error:.2g}" if math.isfinite(p.std_error) else "")
                    + (
                        f" (TP link {fit.tp_link}; not stored in a GPU profile)"
                        if p.name == "comm_efficiency"
                        else ""
                    )
                )
            )
    head.append("# Errors (relative; RMSE before -> after, leave-one-out):")
    for e in fit.errors:
        head.append(
            _comment(
                f"  {e.metric} ({e.n}): {_fmt_pct(e.rmse_before)} -> {_fmt_pct(e.rmse_after)}, "
                f"LOO {_fmt_pct(e.rmse_loo)}"
            )
        )
    head.append("# Rows (source | model | tp | dtype | isl | osl | load | batch | measured):")
    for m in fit.rows:
        measured = ", ".join(
            f"{name} {getattr(m, attr) * scale:.4g}{unit}"
            for name, attr, scale, unit in (
                ("prefill", "prefill_s", 1e3, " ms"),
                ("ttft", "ttft_s", 1e3, " ms"),
                ("tpot", "tpot_s", 1e3, " ms"),
                ("throughput", "output_tokens_per_s", 1.0, " tok/s"),
            )
            if getattr(m, attr) is not None
        )
        head.append(
            _comment(
                f"  {m.source} | {m.model} | {m.tp} | {m.dtype} | {m.isl:.0f} | {m.osl:.0f} | {m.load}"
                f" | {m.batch:.3g} | {measured}"
            )
        )
    for x in fit.excluded:
        head.append(_comment(f"  not used: {x.source} {x.metric}: {x.reason}"))
    text = "\n".join(head) + "\n" + _emit_toml(data)
    gpu_from_toml(Path(f"{fit.profile_name}.toml"), text)  # raises if the schema would reject it
    return text


def _inside(path: Path, package: str) -> bool:
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return False
    for loc in spec.submodule_search_locations:
        root = Path(loc).resolve()
        if path == root or root in path.parents:
            return True
    return False


def write_profiles(
    result: CalibrationResult, out_dir: str | Path, *, force: bool = False
) -> tuple[Path, ...]:
    """Write each group's calibrated profile to ``out_dir/gpus/<profile_name>.toml``; returns the paths.

    ``out_dir`` is then usable as ``--profile-dir`` / ``profile_dirs``. Refuses to write inside the
    pdplan package (its built-in profiles are not to be edited by a tool), and refuses to replace an
    existing file unless ``force`` (checked for every file before any is written).
    """
    if not isinstance(result, CalibrationResult):
        raise InputError("result", type(result).__name__, "a CalibrationResult (from calibrate)")
    if not isinstance(out_dir, str | Path) or not str(out_dir).strip():
        raise InputError("out_dir", short(out_dir), "a directory path")
    try:
        root = Path(out_dir).expanduser().resolve()
    except (RuntimeError, OSError, ValueError) as err:  # '~nouser/x': no such user's home
        raise InputError("out_dir", short(str(out_dir)), f"a directory path ({short(str(err))})") from None
    for pkg in ("hardware_profiles", "model"):
        if _inside(root, pkg):
            raise InputError("out_dir", str(out_dir), f"a directory outside the pdplan package ({pkg})")
    gpus = root / "gpus"
    try:
        gpus.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError("out_dir", str(out_dir), f"a writable directory ({err})") from None
    paths = [gpus / f"{g.profile_name}.toml" for g in result.groups]
    existing = [p for p in paths if p.exists()]
    if existing and not force:
        raise InputError(
            "out_dir",
            short(str(existing[0])),
            "a file that does not exist yet (pass --force / force=True to replace it)",
        )
    for g, path in zip(result.groups, paths, strict=True):
        path.write_text(calibrated_profile_toml(g), encoding="utf-8")
    return tuple(paths)
