"""Tokens per decode step: the one place that decides how many tokens a decode iteration yields per
sequence and how many it verifies, so that speculative decoding changes one function.

Plain autoregressive decoding emits one token per running sequence per step and runs one token per
sequence through the model (Pope et al. 2022, "Efficiently Scaling Transformer Inference", sec. 2).
A speculative step with k drafted tokens verifies k + 1 tokens per sequence and emits the accepted
ones plus one (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding",
sec. 3): (mean accepted + 1, k + 1), from the deployment's
:class:`~model.physics.speculation.Speculation`. Everything that counts decode
steps or sizes a decode step (roofline step cost, whole-request sums, TPOT, the simulator's step
count and context growth) calls :func:`tokens_per_decode_step` and :func:`decode_steps`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from model.physics.deployment import Deployment


class DecodeTokens(NamedTuple):
    """Per sequence per decode step: ``emitted`` output tokens and ``verify_width`` tokens run
    through the model (its linear layers, attention queries, logits and KV writes)."""

    emitted: float
    verify_width: float


def tokens_per_decode_step(dep: Deployment | None = None) -> DecodeTokens:
    """(tokens emitted, verify width) per sequence per decode step of ``dep``: (1, 1) without
    speculation; (1 + sum_i prod_{j<=i} a_j, k + 1) with it (model.physics.speculation)."""
    spec = None if dep is None else dep.speculation
    if spec is None:
        return DecodeTokens(1.0, 1.0)
    return DecodeTokens(spec.emitted_per_step, float(spec.verify_width))


def decode_steps(output_tokens: float | np.ndarray, per_step: DecodeTokens) -> np.ndarray | float:
    """Decode steps a request of ``output_tokens`` needs after prefill (which emits the first token):
    ceil((O - 1) / emitted); O - 1 with one token per step. A Python number in, a float out (the
    simulator calls this per event); an array in, an array out."""
    if isinstance(output_tokens, int | float):
        return float(math.ceil(max(output_tokens - 1.0, 0.0) / per_step.emitted - 1e-12))
    rest = np.maximum(np.asarray(output_tokens, dtype=float) - 1.0, 0.0)
    return np.ceil(rest / per_step.emitted - 1e-12)
