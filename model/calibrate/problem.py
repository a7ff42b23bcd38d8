"""The calibration problem of one (GPU, engine) group: predictions of every measured value from the
roofline at trial efficiencies, and the targets and deployments built from the measurement rows.

Predictions come from model.physics only (no separate formulas here); see
model.calibrate.fit for the list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from model.calibrate.measurements import Measurement, classify_ttft
from model.calibrate.results import Excluded
from model.errors import InputError, UnknownNameError
from model.hardware.collectives import default_tp_link
from model.hardware.gpus import GPU
from model.hardware.overheads import Overheads
from model.hardware.parallelism import Parallelism
from model.llm.arch import LLMArch
from model.llm.catalog import get_model
from model.physics.decode_tokens import DecodeTokens, decode_steps, tokens_per_decode_step
from model.physics.deployment import Deployment
from model.physics.generation import generation_time_s, mean_tpot_s
from model.physics.steps import prefill_cost
from model.queueing.interference import closed_loop_prefills_per_step, stalled_step_s
from model.queueing.mgc import mgc_wait

__all__ = [
    "Problem",
    "Target",
    "Theta",
    "group_configs",
    "prefills_per_step",
    "resolve_model",
    "rethrow_at",
    "targets_for",
]

# Penalty prediction (s) for an open-loop TTFT row whose queue is unstable at trial parameters.
UNSTABLE_TTFT_S = 1e3


# ---------------------------------------------------------------------------------------------
# Prediction


@dataclass(frozen=True)
class Theta:
    prefill_mfu: float
    decode_mbu: float
    step_overhead_s: float
    comm_efficiency: float | None  # None: the link profile's own efficiency
    kernel_s: float = 0.0  # engine per-kernel floor (model.hardware.overheads)
    per_sequence_s: float = 0.0  # engine per-sequence cost per step
    decode_kv_efficiency: float | None = None  # None: model.physics.deployment's fitted constant
    decode_attention_fixed_tokens: float | None = None  # None: the same module's constant
    low_precision_gemm_ratio: float | None = None  # the engine's 8-/4-bit GEMM ratio (fitted when asked)
    request_s: float = 0.0  # client-observed overhead on TTFT rows (engine [overheads] request), when fitted


@dataclass(frozen=True)
class _Config:
    """Rows sharing one deployment (model, parallel layout, dtypes), as arrays for vectorised prediction."""

    arch: LLMArch
    parallel: Parallelism
    dtype: str
    kv_dtype: str | None
    index: np.ndarray  # positions of these rows in the group's row list
    isl: np.ndarray
    osl: np.ndarray
    prefill_batch: np.ndarray
    decode_batch: np.ndarray
    rate: np.ndarray  # open-loop arrival rate for TTFT, 0 where none
    scv_arrival: np.ndarray
    concurrency_mode: np.ndarray
    open_rate: np.ndarray  # open-loop (or burst) rate behind the prompts decodes wait for, 0 where none
    burst: np.ndarray  # every request sent at once: the engine keeps its slots full
    measured_tpot: np.ndarray  # measured TPOT (s), 0 where not measured


def _deployment(gpu: GPU, cfg: _Config, th: Theta) -> Deployment:
    link = None
    if th.comm_efficiency is not None and cfg.parallel.tp > 1:
        link = dataclasses.replace(default_tp_link(gpu, cfg.parallel), efficiency=th.comm_efficiency)
    return Deployment(
        cfg.arch,
        gpu,
        parallel=cfg.parallel,
        weight_dtype=cfg.dtype,
        kv_dtype=cfg.kv_dtype,
        prefill_mfu=th.prefill_mfu,
        decode_mbu=th.decode_mbu,
        step_overhead_s=th.step_overhead_s,
        tp_link=link,
        overheads=Overheads(
            step_s=th.step_overhead_s,
            kernel_s=th.kernel_s,
            per_sequence_s=th.per_sequence_s,
            low_precision_gemm_ratio=th.low_precision_gemm_ratio,
        ),
        decode_kv_efficiency=th.decode_kv_efficiency,
        decode_attention_fixed_tokens=th.decode_attention_fixed_tokens,
    )


def _tpot_at(dep: Deployment, batch: np.ndarray, isl: np.ndarray, osl: np.ndarray) -> np.ndarray:
    """mean_tpot_s at a fractional mean batch: linear interpolation between the whole batches around it."""
    lo = np.floor(batch)
    frac = batch - lo
    t_lo = mean_tpot_s(dep, lo, isl, osl)
    t_hi = mean_tpot_s(dep, lo + 1.0, isl, osl)
    return (1.0 - frac) * t_lo + frac * t_hi


def prefills_per_step(cfg: _Config, per_step: DecodeTokens) -> np.ndarray:
    """Mean number of *other* requests' prompts each decode step of a request waits for (k of
    :func:`model.queueing.interference.stalled_step_s`).

    Static batch: 0 (all prefills come before decoding). Closed loop of C requests:
    :func:`~model.queueing.interference.closed_loop_prefills_per_step`, (C - 1) / osl with one token
    per step. Open loop at rate lambda: the arrivals during one step, lambda x step time (arrivals do
    not depend on the observed request; step time = measured TPOT x tokens emitted per step). Burst
    (every request sent at once, request_rate = completions/s): the engine keeps its B slots full, so
    a closed loop measured by its rate: lambda x step time x (B - 1) / B, the own slot excluded.
    """
    step_s = cfg.measured_tpot * per_step.emitted
    open_k = cfg.open_rate * step_s * np.where(cfg.burst, (cfg.decode_batch - 1.0) / cfg.decode_batch, 1.0)
    closed_k = closed_loop_prefills_per_step(cfg.decode_batch, cfg.osl, per_step)
    return np.where(cfg.concurrency_mode, closed_k, open_k)


def _predict(gpu: GPU, cfg: _Config, th: Theta) -> dict[str, np.ndarray]:
    """Predicted prefill, TTFT, TPOT (s) and output throughput (tokens/s) of every row of ``cfg``."""
    dep = _deployment(gpu, cfg, th)
    prefill = np.asarray(prefill_cost(dep, cfg.isl, batch=cfg.prefill_batch).time_s, dtype=float)
    wait = np.zeros_like(prefill)
    queued = cfg.rate > 0
    if np.any(queued):
        w = mgc_wait(cfg.rate[queued], prefill[queued], 0.0, 1, cfg.scv_arrival[queued])
        wait[queued] = np.where(w.stable, w.mean_wait_s, UNSTABLE_TTFT_S)
    # TTFT rows as a client measures them: + the front end's per-request work (HTTP, tokenise, queue
    # hand-off; model.hardware.overheads ``request_s``), 0 unless fitted; prefill rows are the engine's own
    ttft = prefill + wait + th.request_s
    osl = cfg.osl
    per_step = tokens_per_decode_step(dep)
    # Each decode step also waits for k other prompts' prefill, less the step overhead it pays anyway
    # (continuous batching puts the prompt into the running iteration; model.queueing.interference).
    step_s = stalled_step_s(
        _tpot_at(dep, cfg.decode_batch, cfg.isl, osl) * per_step.emitted,
        prefills_per_step(cfg, per_step),
        np.maximum(prefill - dep.overhead_s, 0.0),
    )
    tpot = step_s / per_step.emitted
    gen = np.asarray(generation_time_s(dep, cfg.decode_batch, cfg.isl, osl), dtype=float)
    e2e = np.where(cfg.concurrency_mode, prefill + decode_steps(osl, per_step) * step_s, gen)
    throughput = cfg.decode_batch * osl / e2e
    return {"prefill": prefill, "ttft": ttft, "tpot": tpot, "throughput": throughput}


@dataclass(frozen=True)
class Target:
    row: int  # index in the group's row list
    metric: str
    measured: float


class Problem:
    """The residual function of one group: rows, their deployments and the measured targets."""

    def __init__(
        self, gpu: GPU, rows: Sequence[Measurement], targets: Sequence[Target], configs: Sequence[_Config]
    ) -> None:
        self.gpu = gpu
        self.rows = rows
        self.targets = targets
        self.configs = configs
        self.measured = np.array([t.measured for t in targets], dtype=float)

    def predictions(self, th: Theta, rows: np.ndarray | None = None) -> np.ndarray:
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


def resolve_model(name: str, where: str) -> LLMArch:
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


def rethrow_at(where: str, err: InputError) -> InputError:
    return InputError(f"{where}, {err.field}", err.value, err.allowed)


def targets_for(i: int, m: Measurement, max_util: float) -> tuple[list[Target], list[Excluded]]:
    targets: list[Target] = []
    excluded: list[Excluded] = []
    if m.prefill_s is not None:
        targets.append(Target(i, "prefill", m.prefill_s))
    if m.ttft_s is not None:
        light, why = classify_ttft(m, max_util)
        if light:
            targets.append(Target(i, "ttft", m.ttft_s))
        else:
            excluded.append(Excluded(m.source, "ttft", why))
    if m.tpot_s is not None:
        if m.osl > 1.0:
            targets.append(Target(i, "tpot", m.tpot_s))
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
            targets.append(Target(i, "throughput", m.output_tokens_per_s))
    return targets, excluded


def group_configs(rows: Sequence[Measurement], archs: Sequence[LLMArch]) -> list[_Config]:
    keys: dict[tuple[Any, ...], list[int]] = {}
    for i, m in enumerate(rows):
        keys.setdefault((archs[i].name, m.parallel, m.dtype, m.kv_dtype), []).append(i)
    out = []
    for (_, parallel, dtype, kv), idx in keys.items():
        ms = [rows[i] for i in idx]
        out.append(
            _Config(
                arch=archs[idx[0]],
                parallel=parallel,
                dtype=dtype,
                kv_dtype=kv,
                index=np.array(idx),
                isl=np.array([m.isl for m in ms], dtype=float),
                osl=np.array([m.osl for m in ms], dtype=float),
                prefill_batch=np.array([m.batch if m.load == "batch" else 1.0 for m in ms], dtype=float),
                decode_batch=np.array([m.batch for m in ms], dtype=float),
                rate=np.array(
                    [m.request_rate_rps if m.load == "rate" and m.request_rate_rps else 0.0 for m in ms],
                    dtype=float,
                ),
                scv_arrival=np.array([1.0 / m.burstiness for m in ms], dtype=float),
                concurrency_mode=np.array([m.load == "concurrency" for m in ms]),
                open_rate=np.array(
                    [(m.request_rate_rps or 0.0) if m.load == "rate" else 0.0 for m in ms], dtype=float
                ),
                burst=np.array([m.burst for m in ms]),
                measured_tpot=np.array([m.tpot_s or 0.0 for m in ms], dtype=float),
            )
        )
    return out
