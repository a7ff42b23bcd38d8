"""Speculative decoding: k drafted tokens per step, verified by one (k + 1)-token step of the target.

One :class:`Speculation` value describes the method, the number of speculative tokens k and the
acceptance; :func:`model.physics.decode_tokens.tokens_per_decode_step` turns it into tokens emitted
and verified per step, :func:`model.physics.steps.draft_step_s` into the drafter's time per step, and
:func:`draft_memory` into the drafter's weights and KV.

- **Tokens per step** (Leviathan, Kalman and Matias, ICML 2023, "Fast Inference from Transformers
  via Speculative Decoding", sec. 3.1 and eq. 1): with per-position conditional acceptance rates
  a_1..a_k (a_i = P(draft i accepted | drafts 1..i-1 accepted)), a step emits
  1 + sum_i prod_{j<=i} a_j tokens (the accepted drafts plus the target's own next token); with one
  rate alpha at every position that is (1 - alpha^(k+1)) / (1 - alpha). Engines report the mean
  accepted length tau = that number (EAGLE's "average acceptance length", vLLM's
  "mean acceptance length"); :meth:`Speculation.from_accepted_length` finds the one alpha giving tau.
- **Verify step**: the target runs k + 1 tokens per sequence (the last accepted token and the k
  drafts) through every layer, reads the KV once and writes k + 1 entries (verify width in
  ``model.physics.steps.decode_step_cost``); at large batch the step turns compute-bound, which the
  roofline gives without a separate rule.
- **Drafting** (chain drafting, one drafted token per pass, k passes per step):
  ``mtp``: DeepSeek-V3's multi-token-prediction module (DeepSeek-V3 technical report,
  arXiv 2412.19437, sec. 2.2: one Transformer block of the main model's shape, a d x 2d projection,
  embedding and output head shared with the main model), reused for every drafted token as vLLM
  and SGLang do; ``eagle``: an EAGLE / EAGLE-3 head (Li et al., ICML 2024, sec. 4: one decoder layer
  and a fully connected layer over concatenated features, the target's embedding and LM head
  reused; EAGLE-3, arXiv 2503.01840, fuses three feature levels, a 3d x d layer); each pass costs a
  one-layer decode step of that shape (attention over the context, its MLP, the shared LM head) with
  its own step overhead; ``draft``: a separate small model (Leviathan et al.; vLLM's draft-model
  proposer) decoding k steps at the same batch; ``ngram``: prompt-lookup decoding (Saxena 2023,
  vLLM's ngram proposer) matches n-grams on the CPU: no GPU time, no memory.
- **Memory**: the head's layer and projection (mtp, eagle) or the draft model's weights, plus the
  drafter's KV per token (one layer for mtp and eagle, the draft model's for draft).
- Acceptance does not depend on the batch here (a measured constant of model, drafter and data).
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, replace

import numpy as np

from model.errors import InputError
from model.llm.arch import LLMArch, attention_params_per_layer, kv_bytes_per_token, mlp_params

METHODS = ("mtp", "eagle", "draft", "ngram")
MAX_SPEC_TOKENS = 16
"""Largest k: engines draft at most a handful (vLLM num_speculative_tokens, SGLang
speculative-num-steps); EAGLE-2/3 trees reach depth 8-10."""
# Width of the fully connected layer in front of an EAGLE / MTP head, in multiples of hidden size:
# 2 for EAGLE-1 and DeepSeek MTP (embedding and feature concatenated, arXiv 2412.19437 eq. 21).
HEAD_INPUT_WIDTHS = {"mtp": 2, "eagle": 2}


def _rate(field: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or not 0 <= value <= 1
    ):
        raise InputError(field, value, "an acceptance rate in [0, 1]")
    return float(value)


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding of one deployment: ``method`` (mtp, eagle, draft, ngram), ``tokens`` k
    drafted per step, ``acceptance`` per-position conditional rates (one value applies to every
    position), and ``draft_model`` for the draft method."""

    method: str
    tokens: int
    acceptance: tuple[float, ...]
    draft_model: LLMArch | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise InputError("spec_method", self.method, "one of " + ", ".join(METHODS))
        k = self.tokens
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= MAX_SPEC_TOKENS:
            raise InputError("spec_tokens", k, f"a whole number of drafted tokens in [1, {MAX_SPEC_TOKENS}]")
        object.__setattr__(self, "tokens", int(k))
        rates = self.acceptance
        if isinstance(rates, numbers.Real) and not isinstance(rates, bool):
            rates = (rates,)
        if not isinstance(rates, tuple | list) or len(rates) not in (1, self.tokens):
            raise InputError(
                "spec_acceptance", self.acceptance, f"one rate or {self.tokens} per-position rates in [0, 1]"
            )
        rates = tuple(_rate("spec_acceptance", r) for r in rates)
        object.__setattr__(self, "acceptance", rates * self.tokens if len(rates) == 1 else rates)
        if (self.method == "draft") != (self.draft_model is not None):
            raise InputError(
                "draft_model",
                None if self.draft_model is None else self.draft_model.name,
                "a draft model (catalog name) with method 'draft', and none with the other methods",
            )
        if self.draft_model is not None and not isinstance(self.draft_model, LLMArch):
            raise InputError("draft_model", self.draft_model, "an LLMArch (model.get_model(name))")

    @classmethod
    def from_accepted_length(
        cls, method: str, tokens: int, accepted_length: float, draft_model: LLMArch | None = None
    ) -> Speculation:
        """The speculation whose one acceptance rate alpha gives a mean of ``accepted_length``
        tokens per step: (1 - alpha^(k+1)) / (1 - alpha) = tau, tau in [1, k + 1] (bisection;
        the left side rises with alpha)."""
        probe = cls(method, tokens, (0.0,), draft_model)  # validates method, k and the draft model
        k = probe.tokens
        if (
            isinstance(accepted_length, bool)
            or not isinstance(accepted_length, numbers.Real)
            or not 1.0 <= accepted_length <= k + 1
        ):
            raise InputError("spec_accepted_length", accepted_length, f"tokens per step in [1, {k + 1}]")
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if emitted_per_step((mid,) * k) < accepted_length else (lo, mid)
        return cls(method, k, (0.5 * (lo + hi),), draft_model)

    @property
    def emitted_per_step(self) -> float:
        """Mean tokens emitted per sequence per step: 1 + sum_i prod_{j<=i} a_j."""
        return emitted_per_step(self.acceptance)

    @property
    def verify_width(self) -> int:
        """Tokens per sequence the target runs per step: k + 1."""
        return self.tokens + 1

    @property
    def label(self) -> str:
        """E.g. ``eagle k=3 (2.4 tokens/step)``."""
        return f"{self.method} k={self.tokens} ({self.emitted_per_step:.2g} tokens/step)"


def emitted_per_step(rates: tuple[float, ...]) -> float:
    """1 + sum_i prod_{j<=i} a_i (Leviathan et al. 2023, eq. 1 for equal rates)."""
    return 1.0 + float(np.sum(np.cumprod(np.asarray(rates, dtype=float))))


def draft_arch(spec: Speculation, target: LLMArch) -> LLMArch | None:
    """The network one drafting pass runs: a one-layer model of the target's shape (mtp: its
    last layer's kind, MoE in an MoE model; eagle: a dense decoder layer), the draft model, or None
    (ngram)."""
    if spec.method == "ngram":
        return None
    if spec.method == "draft":
        return spec.draft_model
    if spec.method == "mtp" or not target.is_moe:
        return replace(target, name=f"{target.name}-{spec.method}", num_layers=1, num_dense_layers=0)
    width = target.intermediate_size or target.moe_intermediate_size * max(target.experts_per_token, 1)
    return replace(
        target,
        name=f"{target.name}-{spec.method}",
        num_layers=1,
        num_dense_layers=0,
        num_experts=0,
        experts_per_token=0,
        num_shared_experts=0,
        moe_intermediate_size=0,
        intermediate_size=width,
    )


def draft_memory(spec: Speculation, target: LLMArch, kv_dtype: str) -> tuple[float, float]:
    """(extra weight parameters, extra KV bytes per token) of the drafter, whole instance.

    mtp / eagle: one layer (attention + MLP or MoE) and the input projection of
    HEAD_INPUT_WIDTHS x d x d; embedding and LM head are shared. draft: the draft model's weights
    and KV. ngram: nothing."""
    arch = draft_arch(spec, target)
    if arch is None:
        return 0.0, 0.0
    kv = kv_bytes_per_token(arch, kv_dtype)
    if spec.method == "draft":
        from model.llm.arch import total_params

        return float(total_params(arch)), kv
    if arch.is_moe:
        experts = (arch.num_experts + arch.num_shared_experts) * mlp_params(arch, arch.moe_intermediate_size)
        ffn = experts + arch.hidden_size * arch.num_experts
    else:
        ffn = mlp_params(arch, arch.intermediate_size)
    head = HEAD_INPUT_WIDTHS[spec.method] * arch.hidden_size**2
    return float(attention_params_per_layer(arch) + ffn + head), kv


_TEXT = re.compile(
    r"(?P<method>[a-z]+)\s+k=(?P<k>\d{1,2})\s+(?:a=(?P<rates>[0-9.]{1,8}(?:,[0-9.]{1,8}){0,15})"
    r"|tau=(?P<tau>[0-9.]{1,8}))(?:\s+draft=(?P<draft>[a-z0-9._-]{1,64}))?"
)
TEXT_FORMS = (
    "blank (off), or 'METHOD k=K a=RATE[,RATE...]' or 'METHOD k=K tau=T' [draft=MODEL], "
    "e.g. 'eagle k=3 a=0.8'"
)


def parse_speculation(text: str, field: str = "speculation") -> Speculation | None:
    """A Speculation from one line of text (the app's field): ``eagle k=3 a=0.8``,
    ``mtp k=2 a=0.9,0.7``, ``eagle k=4 tau=2.9``, ``draft k=4 a=0.7 draft=llama-2-7b``; blank is
    off. Parsed by one regular expression (nothing evaluated); errors name ``field``."""
    if not isinstance(text, str) or len(text) > 200:
        raise InputError(field, str(text)[:80], TEXT_FORMS)
    t = " ".join(text.strip().lower().split())
    if not t or t == "off":
        return None
    m = _TEXT.fullmatch(t)
    if m is None:
        raise InputError(field, t, TEXT_FORMS)
    draft = None
    if m["draft"]:
        from model.llm.catalog import get_model

        draft = get_model(m["draft"])
    k = int(m["k"])
    try:
        if m["tau"]:
            return Speculation.from_accepted_length(m["method"], k, float(m["tau"]), draft)
        return Speculation(m["method"], k, tuple(float(x) for x in m["rates"].split(",")), draft)
    except ValueError:
        raise InputError(field, t, TEXT_FORMS) from None
