"""Whole-request sums of step costs: a prompt prefilled in chunks, the decode steps of a request
(TPOT) and a static batch's generation time. Every step comes from :mod:`model.physics.steps`; the
number of decode steps and the context they advance by come from
:func:`model.physics.decode_tokens.tokens_per_decode_step`.
"""

from __future__ import annotations

import numpy as np

from model.errors import InputError
from model.limits import MAX_ARRAY_ELEMENTS
from model.physics import decode_tokens
from model.physics.affine import affine_max_sum, affine_terms
from model.physics.decode_tokens import decode_steps
from model.physics.deployment import Deployment
from model.physics.steps import ArrayLike, check_numbers, decode_step_cost, mixed_step_unchecked, prefill_cost


def chunked_prefill_time_s(
    dep: Deployment,
    prompt_tokens: ArrayLike,
    chunk_tokens: ArrayLike,
    *,
    decode_batch: ArrayLike = 0,
    decode_context_tokens: ArrayLike = 0,
) -> np.ndarray:
    """Total time to prefill ``prompt_tokens`` in ceil(n / c) iterations of ``chunk_tokens`` c each,
    with ``decode_batch`` decodes riding along in every iteration (their context held fixed).

    sum over i = 0 .. ceil(n/c) - 1 of mixed_step(chunk = min(c, n - i c), prefix = i c).
    Vectorised over all arguments (the chunk index is an extra array axis).
    """
    n = check_numbers("prompt_tokens", prompt_tokens, 1)
    c = check_numbers("chunk_tokens", chunk_tokens, 1)
    db = check_numbers("decode_batch", decode_batch, 0)
    dctx = check_numbers("decode_context_tokens", decode_context_tokens, 0)
    if np.any((db > 0) & (dctx < 1)):
        raise InputError("decode_context_tokens", decode_context_tokens, ">= 1 when decode_batch > 0")
    n, c, db, dctx = np.broadcast_arrays(n, c, db, dctx)
    n_chunks = np.ceil(n / c)
    if float(n_chunks.max()) * max(n.size, 1) > MAX_ARRAY_ELEMENTS:  # the chunk axis is materialised
        raise InputError(
            "prompt_tokens / chunk_tokens", float(n_chunks.max()), f"at most {MAX_ARRAY_ELEMENTS:,} chunks"
        )
    i = np.arange(int(n_chunks.max())).reshape((-1,) + (1,) * n.ndim)
    prefix = i * c
    chunk = np.clip(n - prefix, 0.0, c)
    active = chunk > 0
    cost = mixed_step_unchecked(dep, chunk, prefix, db * active, dctx * active)
    return np.asarray(np.where(active, cost.time_s, 0.0).sum(axis=0), dtype=float)


def chunked_prefill_overhead(
    dep: Deployment, prompt_tokens: ArrayLike, chunk_tokens: ArrayLike
) -> np.ndarray:
    """Extra prefill time from chunking, as a fraction: chunked time / one-step prefill time - 1
    (no decodes riding along; Sarathi-Serve, Agrawal et al. 2024, sec. 5.3 and Fig. 12)."""
    whole = prefill_cost(dep, prompt_tokens).time_s
    return chunked_prefill_time_s(dep, prompt_tokens, chunk_tokens) / whole - 1.0


def _decode_sum_s(dep: Deployment, batch: np.ndarray, first_ctx: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Exact sum of decode step times over ``steps`` steps at contexts first_ctx + e j, j = 0 .. steps - 1
    (e = tokens emitted per step).

    compute_s and memory_s are affine in the context (attention FLOPs and KV bytes grow linearly),
    comm and overhead do not depend on it: :func:`model.physics.affine.affine_max_sum` splits the
    index range at the kink and sums each affine piece.
    """
    steps = np.asarray(steps, dtype=float)
    e = decode_tokens.tokens_per_decode_step(dep).emitted
    n_last = steps - 1.0
    span = np.maximum(n_last, 1.0)
    s0 = decode_step_cost(dep, batch, first_ctx)
    s1 = decode_step_cost(dep, batch, first_ctx + e * span)
    t = affine_terms(s0, s1, 0.0, span)
    roof = affine_max_sum(t.c0, t.c1, t.m0, t.m1, np.zeros_like(steps), n_last)
    return np.where(steps > 0, roof + steps * t.fixed, 0.0)


def _gen_inputs(
    batch: ArrayLike, prompt_tokens: ArrayLike, output_tokens: ArrayLike
) -> tuple[np.ndarray, ...]:
    b = check_numbers("batch", batch, 1)
    isl = check_numbers("prompt_tokens", prompt_tokens, 1)
    osl = check_numbers("output_tokens", output_tokens, 1)
    return tuple(np.broadcast_arrays(b, isl, osl))


def decode_total_s(
    dep: Deployment, batch: ArrayLike, prompt_tokens: ArrayLike, output_tokens: ArrayLike
) -> np.ndarray:
    """Time of the decode steps after prefill (the first token comes from prefill):
    decode_steps(osl) = osl - 1 steps at one token per step, step j attending to isl + 1 + e j keys;
    summed exactly (see ``_decode_sum_s``)."""
    b, isl, osl = _gen_inputs(batch, prompt_tokens, output_tokens)
    return _decode_sum_s(dep, b, isl + 1.0, decode_steps(osl, decode_tokens.tokens_per_decode_step(dep)))


def mean_tpot_s(
    dep: Deployment, batch: ArrayLike, prompt_tokens: ArrayLike, output_tokens: ArrayLike
) -> np.ndarray:
    """TPOT = decode time / (output_tokens - 1) over the growing context (DistServe's TPOT; not the
    step time at the final context). 0 when output_tokens == 1."""
    b, isl, osl = _gen_inputs(batch, prompt_tokens, output_tokens)
    total = decode_total_s(dep, b, isl, osl)
    return np.where(osl > 1, total / np.maximum(osl - 1.0, 1.0), 0.0)


def generation_time_s(
    dep: Deployment, batch: ArrayLike, prompt_tokens: ArrayLike, output_tokens: ArrayLike
) -> np.ndarray:
    """End-to-end time of a static batch: one prefill of ``batch`` prompts plus its decode steps."""
    b, isl, osl = _gen_inputs(batch, prompt_tokens, output_tokens)
    return prefill_cost(dep, isl, batch=b).time_s + decode_total_s(dep, b, isl, osl)
