"""One-call estimate for a model on a GPU group: prefill, decode, TPOT and memory fit.

The API behind ``pdplan estimate``; every number comes from :mod:`model.physics` and
:mod:`model.physics.memory`. All fields, including the breakdowns, are plain Python numbers and strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from model.errors import InputError, build_request, check_whole
from model.hardware.catalog import get_gpu
from model.hardware.gpus import GPU
from model.hardware.parallelism import Parallelism
from model.limits import MAX_BATCH, MAX_TOKENS
from model.llm.arch import LLMArch
from model.llm.attention import kv_bytes_per_request
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.generation import generation_time_s, mean_tpot_s
from model.physics.memory import MemoryFit, memory_fit
from model.physics.steps import StepCost, decode_step_cost, prefill_cost
from model.scalars import plain_fields


@dataclass(frozen=True)
class Estimate:
    """Latency and memory of one static batch of ``batch`` requests of ``isl`` prompt and ``osl``
    output tokens on one instance. Times in seconds, sizes in bytes; plain Python numbers and strings
    throughout (``prefill``, ``decode`` and ``memory`` too).

    ``prefill_bound`` / ``decode_bound`` say which roofline limit set the step time ("compute" or
    "memory"); ``decode_context_tokens`` is the context of the representative decode step
    (isl + osl / 2); ``kv_capacity_tokens`` and ``max_batch`` are the KV cache in tokens and in
    sequences of isl + osl tokens; ``fits`` is False with a one-line ``reason`` when the weights,
    the batch's KV or the context window do not fit.
    """

    model: str
    gpu: str
    tp: int
    pp: int
    dtype: str
    kv_dtype: str
    isl: int
    osl: int
    batch: int
    prefill_s: float
    prefill_bound: str
    decode_step_s: float
    decode_bound: str
    decode_context_tokens: float
    tpot_s: float
    generation_s: float
    output_tokens_per_s: float
    kv_bytes_per_token: float
    kv_bytes_per_token_per_gpu: float
    kv_bytes_per_request: float
    weight_bytes_per_gpu: float
    kv_capacity_tokens: float
    max_batch: int
    fits: bool
    reason: str
    prefill: StepCost
    decode: StepCost
    memory: MemoryFit

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict: the headline numbers plus the prefill/decode/memory breakdown."""

        def scalar(x: Any) -> Any:
            arr = np.asarray(x)
            return arr.item() if arr.ndim == 0 or arr.size == 1 else arr.tolist()

        def step(c: StepCost) -> dict[str, Any]:
            return {k: scalar(v) for k, v in c.__dict__.items()}

        head = {k: v for k, v in self.__dict__.items() if k not in ("prefill", "decode", "memory")}
        mem = {k: scalar(v) for k, v in self.memory.__dict__.items() if k != "kv_layout"}  # internal
        return {
            **head,
            "breakdown": {"prefill": step(self.prefill), "decode": step(self.decode), "memory": mem},
        }


@dataclass(frozen=True)
class EstimateRequest:
    """One roofline estimate asked for, as one value (``model.estimate(request)`` or
    ``model.estimate(model, gpu, isl=..., osl=..., **fields)``).

    ``model``/``gpu``: names, file paths or objects; ``isl``/``osl``: prompt and output tokens;
    ``batch``: sequences per step; the instance's layout is ``parallel`` when given, else TP ``tp`` x
    PP ``pp`` (conveniences for the CLI's ``--tp``/``--pp``; not both); ``dtype``/``kv_dtype``:
    numeric formats; ``profile_dirs``: extra profile folders; ``max_batched_tokens`` and
    ``gpu_memory_utilization``: the memory fit's activation workspace and usable memory fraction.
    """

    model: str | LLMArch
    gpu: str | GPU
    isl: int
    osl: int
    batch: int = 1
    tp: int = 1
    pp: int = 1
    parallel: Parallelism | None = None
    dtype: str = "bf16"
    kv_dtype: str | None = None
    profile_dirs: str | Path | Sequence[str | Path] | None = None
    max_batched_tokens: int = 8192
    gpu_memory_utilization: float = 0.9


def estimate(model: str | LLMArch | EstimateRequest, gpu: str | GPU | None = None, **fields: Any) -> Estimate:
    """Estimate one configuration: an :class:`EstimateRequest`, or its fields (``model``, ``gpu``,
    then keywords; ``isl`` and ``osl`` required).

    prefill_s: one prefill step of ``batch`` prompts of ``isl`` tokens; decode_step_s: one decode
    step at ``batch`` and context isl + osl / 2; tpot_s: mean decode step over the growing context
    (:func:`model.physics.generation.mean_tpot_s`); generation_s = prefill + the decode steps
    (osl - 1 at one token per step, :mod:`model.physics.decode_tokens`);
    max_batch: concurrent sequences of isl + osl tokens whose KV fits; ``fits`` also requires the
    batch to fit that KV cache and isl + osl to fit the model's context window.
    """
    r = build_request(EstimateRequest, model, gpu, fields)
    model, gpu, tp, pp, parallel = r.model, r.gpu, r.tp, r.pp, r.parallel
    dtype, kv_dtype, batch, profile_dirs = r.dtype, r.kv_dtype, r.batch, r.profile_dirs
    max_batched_tokens, gpu_memory_utilization = r.max_batched_tokens, r.gpu_memory_utilization
    isl = check_whole("isl", r.isl, 1, MAX_TOKENS)
    osl = check_whole("osl", r.osl, 1, MAX_TOKENS)
    batch = check_whole("batch", batch, 1, MAX_BATCH)
    arch = get_model(model)
    g = get_gpu(gpu, profile_dirs)
    tp, pp = check_whole("tp", tp), check_whole("pp", pp)
    if parallel is None:
        parallel = Parallelism(tp=tp, pp=pp)
    elif (tp, pp) != (1, 1):
        raise InputError("tp", tp, "1 (pass tp/pp or parallel, not both)")
    dep = Deployment(arch, g, parallel=parallel, weight_dtype=dtype, kv_dtype=kv_dtype)
    pre = prefill_cost(dep, isl, batch=batch)
    ctx = isl + osl / 2.0
    dec = decode_step_cost(dep, batch, ctx)
    tpot = float(mean_tpot_s(dep, batch, isl, osl))
    gen = float(generation_time_s(dep, batch, isl, osl))
    mem = memory_fit(
        dep, max_batched_tokens=max_batched_tokens, gpu_memory_utilization=gpu_memory_utilization
    )
    max_batch = int(mem.max_batch(isl + osl))
    fits, reason = bool(mem.fits), mem.reason
    if fits and arch.max_context_tokens and isl + osl > arch.max_context_tokens:
        fits = False
        reason = f"{isl + osl:,} tokens exceed {arch.label}'s context window of {arch.max_context_tokens:,}"
    elif fits and max_batch < batch:
        fits = False
        reason = (
            f"the KV cache holds {float(mem.kv_capacity_tokens):,.0f} tokens: {max_batch} sequence(s) of "
            f"{isl + osl:,} tokens, fewer than the batch of {batch}"
        )
    return Estimate(
        model=arch.name,
        gpu=g.name,
        tp=dep.tp,
        pp=dep.pp,
        dtype=dtype,
        kv_dtype=dep.kv_dtype_resolved,
        isl=isl,
        osl=osl,
        batch=batch,
        prefill_s=float(pre.time_s),
        prefill_bound=str(pre.bound),
        decode_step_s=float(dec.time_s),
        decode_bound=str(dec.bound),
        decode_context_tokens=ctx,
        tpot_s=tpot,
        generation_s=gen,
        output_tokens_per_s=batch * osl / gen,
        kv_bytes_per_token=dep.kv_bytes_per_token,
        kv_bytes_per_token_per_gpu=dep.kv_bytes_per_token_per_gpu,
        kv_bytes_per_request=float(kv_bytes_per_request(arch, isl + osl, dep.kv_dtype_resolved)),
        weight_bytes_per_gpu=dep.weight_bytes_per_gpu,
        kv_capacity_tokens=float(mem.kv_capacity_tokens),
        max_batch=max_batch,
        fits=fits,
        reason=reason,
        prefill=plain_fields(pre),
        decode=plain_fields(dec),
        memory=mem,
    )
