"""Attention kinds per layer: weights of each mixer, KV and recurrent-state bytes per request, and the
attention FLOPs and KV traffic of a step (docs/model.md, "Attention kinds").

A model's layers are one letter each in ``LLMArch.layer_pattern`` ("" = every layer full attention):

    F  full causal softmax attention (keys: the whole context)
    S  sliding-window attention, window W = ``attention_window`` (Beltagy et al. 2020, "Longformer";
       Mistral 7B; gpt-oss alternates S128 / F; Gemma 3 has 5 S : 1 F)
    C  chunked-local attention, chunk W = ``attention_window``: a token sees the earlier tokens of its
       own W-token chunk (Llama 4, ``attention_chunk_size`` 8192; its F layers are the NoPE globals)
    X  sparse attention over the top-k earlier tokens chosen by a lightweight indexer
       (DeepSeek-V3.2 "DSA", DeepSeek-AI 2025, arXiv:2512.02556 sec. 2.1): k = ``index_topk``,
       indexer ``index_heads`` x ``index_head_dim``; the indexer scores every earlier token
    K  compressed sparse attention (DeepSeek-V4 "CSA"): every m = ``compress_ratio_sparse`` tokens are
       pooled into one cached entry (and one indexer key); a query attends to the indexer's top-k
       entries plus the last W = ``attention_window`` tokens kept whole
    H  heavily compressed attention (DeepSeek-V4 "HCA"): one entry per m' = ``compress_ratio_heavy``
       tokens, all of them attended, plus the same W-token window (DeepSeek-AI 2026, DeepSeek-V4
       report sec. 2.3; reference ``inference/model.py``: Compressor, Indexer, Attention)
    L  gated linear attention with a fixed-size state per sequence (Gated DeltaNet, Yang et al. 2024,
       arXiv:2412.06464; Qwen3-Next / Qwen3.5 3 L : 1 F)
    M  Mamba-2 state-space mixer (Dao & Gu 2024, arXiv:2405.21060; Nemotron-H hybrids)
    -  no token mixer (Nemotron-H MLP/MoE-only layers)

Per-layer KV elements per token: GQA 2 n_kv d (Pope et al. 2022, sec. 2); MLA r_kv + d_rope
(DeepSeek-V2, sec. 2.1.3); an X layer also caches one indexer key of index_head_dim per token.
``kv_shared`` (DeepSeek-V4): one K = V entry of n_kv x head_dim, no separate V. A K layer caches
W whole entries + one pooled entry and one indexer key per m tokens, an H layer W + one per m'; their
compressors keep the unpooled tail of kv and gate scores (fp32, 2 m x 2 d for K with its
overlapping windows and 2 m x 2 d_I for the indexer's, m' x d for H, each twice) per sequence.
L/M layers keep a recurrent state of n_v x d_k x d_v elements (in ``state_dtype``) plus a causal
convolution window of (2 n_k d_k + n_v d_v) x (conv_kernel - 1) elements, independent of length.

:mod:`model.llm.arch` uses the mixer parameter formulas here (``mixer_params``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.hardware.formats import bytes_per_element
from model.llm.spec import COMPRESSED_KINDS, KIND_NAMES, SOFTMAX_KINDS, STATE_KINDS, LLMArch
from model.scalars import plain

# Input-projection gate heads per value head: Gated DeltaNet projects beta and alpha (2, Qwen3-Next
# ``in_proj_ba``); Mamba-2 projects dt (1, ``in_proj`` of Dao & Gu 2024).
GATES_PER_VALUE_HEAD = {"L": 2, "M": 1}
# FLOPs per token per value head of the recurrence, in units of d_k x d_v (multiply-add = 2 FLOPs).
# Gated DeltaNet S_t = a S (I - b k k^T) + b v k^T, o = S q: S k, the rank-1 update and S q: 3 x 2.
# Mamba-2 h_t = a h + x B^T, y = h C: the outer product and h C: 2 x 2.
RECURRENCE_FLOPS_PER_STATE_ELEMENT = {"L": 6.0, "M": 4.0}
# DeepSeek-V4's compressors keep their unpooled kv and gate scores in fp32 (reference inference/model.py,
# Compressor.kv_state / score_state buffers); a K layer's overlapping windows double both axes.
COMPRESSOR_STATE_BYTES = 4
COMPRESSOR_OVERLAP = {"K": 2, "H": 1}


def pattern(arch: LLMArch) -> str:
    """The per-layer kind letters (all "F" when the architecture gives none)."""
    return arch.layer_pattern or "F" * arch.num_layers


def kind_counts(arch: LLMArch) -> dict[str, int]:
    """Layers of each kind letter present in the model."""
    p = pattern(arch)
    return {k: p.count(k) for k in KIND_NAMES if k in p}


def compress_ratio(arch: LLMArch, kind: str) -> int:
    """Tokens pooled into one cached entry by a K or H layer (0 for other kinds)."""
    return {"K": arch.compress_ratio_sparse, "H": arch.compress_ratio_heavy}.get(kind, 0)


def softmax_layers(arch: LLMArch) -> int:
    """Layers that keep a KV cache (F, S, C, X)."""
    return sum(n for k, n in kind_counts(arch).items() if k in SOFTMAX_KINDS)


def _runs(p: str) -> list[tuple[str, int]]:
    """Run lengths of ``p``: "LLLF" -> [("L", 3), ("F", 1)]."""
    runs: list[tuple[str, int]] = []
    for c in p:
        if runs and runs[-1][0] == c:
            runs[-1] = (c, runs[-1][1] + 1)
        else:
            runs.append((c, 1))
    return runs


def compact_pattern(p: str) -> str:
    """``p`` as repeats of its shortest period ("12 x (3 linear + 1 full)"), else its runs
    ("3 full + 57 sparse"), else counts per kind when the runs are many."""

    def say(runs: list[tuple[str, int]]) -> str:
        return " + ".join(f"{n} {KIND_NAMES[k]}" for k, n in runs)

    for period in range(1, len(p) // 2 + 1):
        if len(p) % period == 0 and p[:period] * (len(p) // period) == p:
            return say(_runs(p)) if period == 1 else f"{len(p) // period} x ({say(_runs(p[:period]))})"
    runs = _runs(p)
    return say(runs) if len(runs) <= 6 else say([(k, p.count(k)) for k in KIND_NAMES if k in p])


def attention_kind(arch: LLMArch) -> str:
    """One line naming the attention kinds: "GQA; 18 x (sliding, full), window 128; sinks"."""
    base = "MLA" if arch.is_mla else ("MHA" if arch.num_kv_heads == arch.num_heads else "GQA")
    if arch.num_kv_heads == 1 and not arch.is_mla:
        base = "MQA (K = V)" if arch.kv_shared else "MQA"
    parts = [base]
    p = pattern(arch)
    if set(p) != {"F"}:
        parts.append(compact_pattern(p))
    if "S" in p or "C" in p:
        parts.append(f"{'chunk' if 'C' in p else 'window'} {arch.attention_window}")
    if "X" in p:
        parts.append(f"top-{arch.index_topk} indexer {arch.index_heads} x {arch.index_head_dim}")
    if "K" in p:
        parts.append(
            f"{arch.compress_ratio_sparse}x-compressed top-{arch.index_topk} "
            f"(indexer {arch.index_heads} x {arch.index_head_dim})"
        )
    if "H" in p:
        parts.append(f"{arch.compress_ratio_heavy}x-compressed dense")
    if ("K" in p or "H" in p) and not ("S" in p or "C" in p):
        parts.append(f"window {arch.attention_window}")
    if arch.attention_sinks:
        parts.append("sinks")
    if arch.num_mtp_layers:
        parts.append(f"{arch.num_mtp_layers} MTP layer{'s' * (arch.num_mtp_layers > 1)}")
    return "; ".join(parts)


# ----------------------------------------------------------------------------------------------
# Weights of the token mixers.


def linear_mixer_params(arch: LLMArch, kind: str) -> int:
    """Weights of one L (Gated DeltaNet) or M (Mamba-2) layer's mixer.

    in_proj h x (2 n_k d_k + 2 n_v d_v + g n_v) [q, k, v, output gate z, g gates per head]
    + depthwise conv (2 n_k d_k + n_v d_v) x kernel + out_proj n_v d_v x h (+ per-head decay and
    bias, 2 n_v). Qwen3-Next ``Qwen3NextGatedDeltaNet`` (in_proj_qkvz, in_proj_ba, conv1d, out_proj);
    Mamba-2 (Dao & Gu 2024, sec. 7: x, z, B, C, dt from one projection; n_k = n_groups,
    d_k = d_state).
    """
    h = arch.hidden_size
    qk = 2 * arch.linear_num_key_heads * arch.linear_key_head_dim
    v = arch.linear_num_value_heads * arch.linear_value_head_dim
    g = GATES_PER_VALUE_HEAD[kind] * arch.linear_num_value_heads
    return h * (qk + 2 * v + g) + (qk + v) * arch.linear_conv_kernel + v * h + 2 * arch.linear_num_value_heads


def indexer_params(arch: LLMArch) -> int:
    """Weights of one X layer's top-k indexer: queries from the query latent (or the hidden state
    without one) r_q x n_I d_I, one key h x d_I and per-head weights h x n_I (DeepSeek-V3.2-Exp
    ``inference/model.py``, class Indexer: wq_b, wk, weights_proj)."""
    q_in = arch.q_lora_rank or arch.hidden_size
    return (
        q_in * arch.index_heads * arch.index_head_dim
        + arch.hidden_size * arch.index_head_dim
        + arch.hidden_size * arch.index_heads
    )


def compressor_params(arch: LLMArch, kind: str, width: int) -> int:
    """Weights of one DeepSeek-V4 compressor pooling entries of ``width`` elements: its kv and gate
    projections h x (c x width) each, c = COMPRESSOR_OVERLAP[kind] (reference Compressor.wkv /
    wgate; its m x c x width position bias is left out, < 0.01%)."""
    return 2 * arch.hidden_size * COMPRESSOR_OVERLAP[kind] * width


def compressed_extra_params(arch: LLMArch, kind: str) -> int:
    """Weights a K or H layer adds to its attention block: the compressor of its n_kv x head_dim
    entries; a K layer also its indexer: queries from the query latent r_q x n_I d_I, per-head
    weights h x n_I and the indexer keys' own compressor (reference Indexer: wq_b, weights_proj,
    compressor)."""
    extra = compressor_params(arch, kind, arch.num_kv_heads * arch.head_dim)
    if kind == "K":
        q_in = arch.q_lora_rank or arch.hidden_size
        extra += q_in * arch.index_heads * arch.index_head_dim + arch.hidden_size * arch.index_heads
        extra += compressor_params(arch, kind, arch.index_head_dim)
    return extra


def mixer_params(arch: LLMArch, softmax_block: int, full_block: int | None = None) -> int:
    """Weights of every layer's token mixer: softmax layers x ``softmax_block`` (the attention block,
    ``attention_params_per_layer``; F layers ``full_block`` when they have their own shape) + X
    layers' indexers + K/H layers' compressors and indexers + L/M layers' linear mixers."""
    counts = kind_counts(arch)
    full = softmax_block if full_block is None else full_block
    total = sum(n * (full if k == "F" else softmax_block) for k, n in counts.items() if k in SOFTMAX_KINDS)
    total += counts.get("X", 0) * indexer_params(arch)
    total += sum(counts.get(k, 0) * compressed_extra_params(arch, k) for k in COMPRESSED_KINDS if k in counts)
    for kind in STATE_KINDS:
        total += counts.get(kind, 0) * linear_mixer_params(arch, kind) if kind in counts else 0
    return total


# ----------------------------------------------------------------------------------------------
# KV and state bytes.


def kv_heads_per_gpu(arch: LLMArch, tp: np.ndarray | int) -> np.ndarray:
    """KV heads each tensor-parallel rank stores: n_kv / TP, at least 1 (heads are replicated when
    TP exceeds n_kv, as vLLM and Megatron do for GQA)."""
    return np.maximum(np.ceil(arch.num_kv_heads / np.asarray(tp)), 1.0)


def layer_kv_elements(arch: LLMArch, tp: np.ndarray | int | None, kind: str = "S") -> np.ndarray | float:
    """KV elements one token adds to one softmax layer of ``kind`` (per TP rank when ``tp`` is given;
    the MLA latent is not split by heads, vLLM's MLA backend keeps it whole on every rank). F layers
    with their own shape (Gemma 4 globals) use global_kv_heads x global_head_dim; with V = K the
    engines still keep both caches (the attention kernels read K and V), so the factor stays 2."""
    if arch.is_mla:
        return float(arch.kv_lora_rank + arch.qk_rope_head_dim)
    heads, dim = arch.num_kv_heads, arch.head_dim
    if kind == "F" and arch.global_head_dim:
        heads, dim = arch.global_kv_heads, arch.global_head_dim
    factor = 1.0 if arch.kv_shared else 2.0
    if tp is None:
        return float(factor * heads * dim)
    return factor * np.maximum(np.ceil(heads / np.asarray(tp)), 1.0) * dim


def token_kv_elements(arch: LLMArch, tp: np.ndarray | int | None, kind: str) -> np.ndarray | float:
    """KV elements one token adds to one softmax layer of ``kind`` while inside every window,
    indexer keys included: layer_kv_elements for F, S, C (+ d_I for X); a K or H layer of ratio m
    keeps the token whole in its window and 1 / m of a pooled entry (K: + d_I / m of an indexer key)."""
    e = layer_kv_elements(arch, tp, kind)
    m = compress_ratio(arch, kind)
    if m:
        e = e * (1.0 + 1.0 / m) + (arch.index_head_dim / m if kind == "K" else 0.0)
    elif kind == "X":
        e = e + arch.index_head_dim
    return e


def kv_bytes_per_token(
    arch: LLMArch, kv_dtype: str = "bf16", tp: np.ndarray | int | None = None
) -> float | np.ndarray:
    """Bytes one token adds to the KV cache of every softmax layer (F, S, C, X) while it is inside
    every window: sum over softmax layers of per-layer elements x bytes, plus each X layer's indexer
    key. Whole instance with ``tp`` None, else per TP rank. For an all-full-attention model this is
    the classic 2 L n_kv d bytes (GQA) or L (r_kv + d_rope) bytes (MLA)."""
    b = bytes_per_element(kv_dtype, "kv_dtype")
    counts = kind_counts(arch)
    n_soft = sum(n for k, n in counts.items() if k in SOFTMAX_KINDS)
    if n_soft == arch.num_layers and not arch.global_head_dim and not arch.kv_shared:
        out = (
            (2.0 * arch.num_layers * kv_heads_per_gpu(arch, tp) * arch.head_dim * b)
            if (tp is not None and not arch.is_mla)
            else arch.num_layers * layer_kv_elements(arch, tp) * b
        )
        return out + counts.get("X", 0) * arch.index_head_dim * b
    return sum(n * token_kv_elements(arch, tp, k) * b for k, n in counts.items() if k in SOFTMAX_KINDS)


def state_bytes_per_sequence(arch: LLMArch, kv_dtype: str = "bf16", tp: int | None = None) -> float:
    """Recurrent-state bytes of one sequence over all L/M layers (0 without them), whole instance or
    per TP rank (heads split evenly): n_v d_k d_v x state bytes + (2 n_k d_k + n_v d_v)(kernel - 1)
    x KV bytes per layer. Independent of the sequence length."""
    n = sum(n for k, n in kind_counts(arch).items() if k in STATE_KINDS)
    if not n:
        return compressor_state_bytes(arch)
    state_b = bytes_per_element(arch.state_dtype or kv_dtype, "state_dtype")
    conv_b = bytes_per_element(kv_dtype, "kv_dtype")
    nk, dk = arch.linear_num_key_heads, arch.linear_key_head_dim
    nv, dv = arch.linear_num_value_heads, arch.linear_value_head_dim
    per_layer = nv * dk * dv * state_b + (2 * nk * dk + nv * dv) * (arch.linear_conv_kernel - 1) * conv_b
    return n * per_layer / (tp or 1) + compressor_state_bytes(arch)


def compressor_state_bytes(arch: LLMArch) -> float:
    """Unpooled compressor state of one sequence over all K and H layers (0 without them):
    kv and gate score buffers of (c m) x (c width) fp32 elements each, c = COMPRESSOR_OVERLAP, width
    n_kv x head_dim, plus a K layer's indexer compressor of width d_I (reference Compressor buffers;
    kept whole on every TP rank, like the shared entry itself)."""
    counts = kind_counts(arch)
    total = 0.0
    for kind in COMPRESSED_KINDS:
        if kind not in counts:
            continue
        c, m = COMPRESSOR_OVERLAP[kind], compress_ratio(arch, kind)
        widths = [arch.num_kv_heads * arch.head_dim] + ([arch.index_head_dim] if kind == "K" else [])
        total += counts[kind] * sum(2 * c * m * c * w * COMPRESSOR_STATE_BYTES for w in widths)
    return float(total)


@dataclass(frozen=True)
class KVLayout:
    """How a request's KV grows with its context, in units of ``per_token_bytes`` (the KV a token adds
    while inside every window, :func:`kv_bytes_per_token`).

    tokens(ctx) = sum_g share_g x min(ctx, cap_g) + state_tokens: groups of softmax layers with a cap
    (inf for F and X, W for S and C) weighted by their share of the per-token bytes, plus the fixed
    recurrent state expressed in tokens. For an all-full model tokens(ctx) = ctx exactly.
    """

    per_token_bytes: float
    shares: tuple[float, ...]
    caps: tuple[float, ...]
    state_tokens: float = 0.0

    @property
    def is_plain(self) -> bool:
        """Every softmax layer keeps every token and there is no recurrent state."""
        return self.caps == (float("inf"),) and self.state_tokens == 0.0

    def tokens(self, context_tokens: float | np.ndarray) -> np.ndarray:
        """Equivalent KV tokens of one request with ``context_tokens`` tokens of context."""
        ctx = np.asarray(context_tokens, dtype=float)
        if self.is_plain:
            return ctx
        out = sum(s * np.minimum(ctx, c) for s, c in zip(self.shares, self.caps, strict=True))
        return out + np.where(ctx > 0, self.state_tokens, 0.0)

    def bytes(self, context_tokens: float | np.ndarray) -> np.ndarray:
        """KV + state bytes of one request with ``context_tokens`` tokens of context."""
        if self.is_plain:
            return np.asarray(context_tokens, dtype=float) * self.per_token_bytes
        return self.tokens(context_tokens) * self.per_token_bytes


def kv_layout(arch: LLMArch, kv_dtype: str = "bf16", tp: int | None = None) -> KVLayout:
    """The :class:`KVLayout` of ``arch`` (whole instance with ``tp`` None, else per TP rank): the
    windowed bytes (S and C layers whole, K and H layers' W-token windows) capped at the window,
    the rest uncapped."""
    per_token = float(kv_bytes_per_token(arch, kv_dtype, tp))
    counts = kind_counts(arch)
    state = state_bytes_per_sequence(arch, kv_dtype, tp)
    b = bytes_per_element(kv_dtype, "kv_dtype")
    capped_bytes = sum(counts.get(k, 0) * float(layer_kv_elements(arch, tp, k)) * b for k in "SCKH")
    if not capped_bytes and not state:
        return KVLayout(per_token, (1.0,), (float("inf"),))
    capped_share = capped_bytes / per_token if per_token else 0.0
    shares, caps = [1.0 - capped_share], [float("inf")]
    if capped_bytes:
        shares.append(capped_share)
        caps.append(float(arch.attention_window))
    if softmax_layers(arch) == counts.get("S", 0) + counts.get("C", 0):
        shares, caps = shares[1:], caps[1:]  # every softmax layer is windowed: no uncapped group
    return KVLayout(per_token, tuple(shares), tuple(caps), state / per_token if per_token else 0.0)


def kv_bytes_per_request(
    arch: LLMArch, context_tokens: float | np.ndarray, kv_dtype: str = "bf16", tp: int | None = None
) -> float | np.ndarray:
    """KV + recurrent-state bytes one request holds at ``context_tokens`` tokens of context (what a
    disaggregated deployment transfers after a prefill of that many tokens, and what bounds KV
    capacity): sum over softmax layers of min(ctx, cap) x per-layer bytes (cap = W for S and C
    layers, none for F and X) + X layers' indexer keys x ctx + the L/M layers' fixed state.
    Vectorised over ``context_tokens`` (a plain float for a scalar); per TP rank when ``tp`` is given."""
    return plain(kv_layout(arch, kv_dtype, tp).bytes(context_tokens))
