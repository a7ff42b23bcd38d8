"""Prefill-decode interference on a colocated replica: how the prompts it processes slow its decodes.

One formula, in two equivalent forms (docs/model.md, "Colocated interference"):

- **Per step** (:func:`stalled_step_s`): a decode step that also pays for k prompts' prefill work
  of s seconds each takes t_dec + k s. Continuous-batching engines put new prompts into the running
  iterations (Orca, Yu et al. OSDI 2022) or run them between decode steps (vLLM's prefill-first
  scheduler), and the running decodes wait for them either way (DistServe, Zhong et al. OSDI 2024,
  sec. 2.2; Sarathi-Serve, Agrawal et al. OSDI 2024, sec. 2-3).
- **Open loop** (:func:`shared_token_time_s`): with Poisson-like arrivals at lambda per replica,
  the prompts landing during one step are k = lambda tau, and the fixed point of the per-step form
  is tau = t_dec / (1 - u + u t_dec / t_mix), u = lambda E[S] the prefill-busy fraction. For
  prefill-only iterations (no chunking: a prefill iteration emits no decode token, t_mix = inf) it is
  t_dec / (1 - u); for chunked prefill with mixed iterations of mean t_mix it equals the iteration
  rate form 1 / (u / t_mix + (1 - u) / t_dec).

The number of prompts per step in a closed loop is :func:`closed_loop_prefills_per_step`. What a
prompt's stall s is depends on the scheduler and is the caller's choice (model.serving.colocated:
a whole prefill iteration; model.calibrate.problem: the prefill minus the step overhead that its
decode step already pays). model.symbolic.batching builds its sympy form from
:func:`token_time_form`, the same expression.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from model.physics.decode_tokens import DecodeTokens, decode_steps

__all__ = ["closed_loop_prefills_per_step", "shared_token_time_s", "stalled_step_s", "token_time_form"]


def token_time_form(decode_s: Any, prefill_busy: Any, decode_over_mixed: Any) -> Any:
    """t_dec / (1 - u + u t_dec / t_mix), written once for numbers, arrays and sympy symbols
    (``decode_over_mixed`` = t_dec / t_mix; 0 when prefill iterations carry no decode token)."""
    return decode_s / (1 - prefill_busy + prefill_busy * decode_over_mixed)


def shared_token_time_s(
    decode_token_s: np.ndarray | float,
    prefill_busy: np.ndarray | float,
    mixed_step_s: np.ndarray | float = np.inf,
) -> np.ndarray:
    """Per-token time tau of decodes on a replica busy with prompts a fraction u of the time.

    tau = t_dec / (1 - u + u t_dec / t_mix) = 1 / (u / t_mix + (1 - u) / t_dec): iterations carrying
    prompt work (mean ``mixed_step_s`` t_mix, inf when they carry no decode token) take the share u,
    decode-only iterations of ``decode_token_s`` t_dec the rest. inf where u >= 1 (decodes starve).
    Source: the per-step form t_dec + k s with k = lambda tau (module docstring; DistServe sec. 2.2,
    Sarathi-Serve sec. 3).
    """
    t = np.asarray(decode_token_s, dtype=float)
    u = np.asarray(prefill_busy, dtype=float)
    mix = np.asarray(mixed_step_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.where(np.isinf(mix), 0.0, t / mix)
        tau = token_time_form(t, u, ratio)
    return np.where(u < 1.0, tau, np.inf)


def stalled_step_s(
    decode_step_s: np.ndarray | float, prefills_per_step: np.ndarray | float, stall_s: np.ndarray | float
) -> np.ndarray:
    """t_dec + k s: a decode step that waits for ``prefills_per_step`` k prompts of ``stall_s`` s each
    (the per-step form; DistServe sec. 2.2, Sarathi-Serve sec. 2-3)."""
    return np.asarray(decode_step_s, dtype=float) + np.asarray(prefills_per_step, dtype=float) * np.asarray(
        stall_s, dtype=float
    )


def closed_loop_prefills_per_step(
    concurrency: np.ndarray | float, output_tokens: np.ndarray | float, per_step: DecodeTokens
) -> np.ndarray:
    """Other requests' prompts per iteration in a closed loop of C requests: (C - 1) / (decode_steps(O) + 1).

    Each of the other C - 1 slots starts a request once per cycle of one prefill iteration plus
    decode_steps(O) decode iterations (O with one token per step;
    :func:`model.physics.decode_tokens.decode_steps`). The observed request's own slot starts none
    while it decodes.
    """
    c = np.asarray(concurrency, dtype=float)
    steps = np.asarray(decode_steps(np.asarray(output_tokens, dtype=float), per_step), dtype=float)
    return (c - 1.0) / (steps + 1.0)
