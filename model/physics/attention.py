"""Attention FLOPs and KV-cache traffic of a step, per layer kind (model.llm.attention).

For each layer kind, per sequence of n new tokens after c cached ones (prefill) or w tokens at a
context of ctx (decode); keys(p) is how many keys the query at position p (1-based) attends to:

    F  keys(p) = p                      (causal; FlashAttention skips the masked half, Dao 2023)
    S  keys(p) = min(p, W)              (sliding window; Beltagy et al. 2020)
    C  keys(p) = ((p - 1) mod W) + 1    (chunked-local; Llama 4 attention_chunk_size)
    X  keys(p) = min(p, k) main + p indexer keys (DeepSeek-V3.2 DSA, arXiv:2512.02556 sec. 2.1:
       the indexer costs O(L^2) at its small n_I x d_I, the main attention O(L k))
    K  keys(p) = min(p / m, k) pooled entries + min(p, W) window, and p / m indexer keys (DeepSeek-V4
       CSA, m = compress_ratio_sparse, k = index_topk)
    H  keys(p) = p / m' pooled entries + min(p, W) window (DeepSeek-V4 HCA, m' = compress_ratio_heavy)
    L, M  no keys: a recurrence of c x n_v d_k d_v FLOPs per token (c = 6 Gated DeltaNet, 4 Mamba-2,
       model.llm.attention.RECURRENCE_FLOPS_PER_STATE_ELEMENT)

Attention FLOPs = 2 n_h (d_qk + d_v) x sum of keys(p) per softmax layer (QK^T and PV, Vaswani et
al. 2017), dims of :func:`model.physics.operators.attention_dims` (MLA: decompressed in prefill,
absorbed in decode). X layers run MLA in its absorbed (MQA) form in both phases, as DSA is
implemented (DeepSeek-V3.2 report, sec. 2.1); indexer FLOPs = 2 n_I d_I per (query, key) pair.

KV traffic per TP rank: a step reads the KV its queries attend to (F and X-indexer keys: the whole
context; S and C: at most W cached tokens plus the new ones; X main: the top-k selected entries in
decode, the whole context in prefill; K and H: their window plus the pooled entries (K in decode:
the top-k of them, and every indexer key)) and writes the new tokens' KV; L and M layers read and write
their state once per sequence per step (Pope et al. 2022, sec. 2; Yang et al. 2024).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.hardware.formats import bytes_per_element
from model.llm import attention as kinds
from model.llm.arch import LLMArch
from model.physics.operators import attention_dims


@dataclass(frozen=True)
class AttentionWork:
    """FLOPs of the attention score/value products, indexers and recurrences (whole instance, before
    the TP split) and KV/state bytes read and written (per TP rank, all layers) of one step.

    ``decode_kv_read_bytes``: the part of ``kv_read_bytes`` that decode attention kernels stream
    (the cached keys and values decoding tokens attend to; 0 in prefill); ``decode_kv_token_bytes``:
    what one more cached token would add to it (per TP rank, all sequences), which the step cost
    uses for the decode attention kernels' fixed cost per sequence
    (model.physics.deployment.DECODE_ATTENTION_FIXED_TOKENS).

    ``score_elements`` and ``masked_flops`` matter only to an attention kernel that materialises
    the score matrix (model.physics.materialised_attention): the elements of the n x n_kv score
    matrices of the dense-key layers (F, S, C: every query against every cached key, the mask
    applied by the softmax, not skipped), per TP rank, all layers, and the FLOPs of the masked
    pairs such a kernel computes on top of ``flops`` (whole instance)."""

    flops: np.ndarray
    kv_read_bytes: np.ndarray
    kv_write_bytes: np.ndarray
    decode_kv_read_bytes: np.ndarray | float = 0.0
    decode_kv_token_bytes: np.ndarray | float = 0.0
    score_elements: np.ndarray | float = 0.0
    masked_flops: np.ndarray | float = 0.0

    def __add__(self, other: AttentionWork) -> AttentionWork:
        return AttentionWork(
            self.flops + other.flops,
            self.kv_read_bytes + other.kv_read_bytes,
            self.kv_write_bytes + other.kv_write_bytes,
            self.decode_kv_read_bytes + other.decode_kv_read_bytes,
            self.decode_kv_token_bytes + other.decode_kv_token_bytes,
            self.score_elements + other.score_elements,
            self.masked_flops + other.masked_flops,
        )

    def scaled(self, factor: float) -> AttentionWork:
        """The work of ``factor`` times as many sequences of the same lengths (every field is linear
        in the sequence count)."""
        return AttentionWork(
            self.flops * factor,
            self.kv_read_bytes * factor,
            self.kv_write_bytes * factor,
            self.decode_kv_read_bytes * factor,
            self.decode_kv_token_bytes * factor,
            self.score_elements * factor,
            self.masked_flops * factor,
        )


def key_pairs_before(kind: str, x: np.ndarray, window: float) -> np.ndarray:
    """sum of keys(p) for p = 1..x (closed forms; x may be any non-negative array).

    F: x(x+1)/2. S and X (cap W): x(x+1)/2 up to W, then W(W+1)/2 + (x - W) W. C: q W(W+1)/2 +
    r(r+1)/2 with x = q W + r.
    """
    if kind == "F":
        return x * (x + 1) / 2
    if kind in "SX":
        return np.where(x <= window, x * (x + 1) / 2, window * (window + 1) / 2 + (x - window) * window)
    q = np.floor(x / window)
    r = x - q * window
    return q * window * (window + 1) / 2 + r * (r + 1) / 2


def keys_at(kind: str, ctx: np.ndarray, window: float) -> np.ndarray:
    """keys(ctx): keys a query at position ``ctx`` attends to (F: ctx; S, X: min(ctx, W); C: its chunk)."""
    if kind == "F":
        return ctx
    if kind in "SX":
        return np.minimum(ctx, window)
    return np.mod(np.maximum(ctx, 1.0) - 1, window) + 1


def _linear_pairs(x: np.ndarray, a: float, cap: float = np.inf) -> np.ndarray:
    """sum of min(a p, cap) for p = 1..x (continuous in x): a x(x+1)/2 while a x <= cap, then
    cap per further query (the pooled entries of a K / H layer, a = 1 / m)."""
    if not np.isfinite(cap):
        return a * x * (x + 1) / 2
    x0 = cap / a
    return np.where(a * x <= cap, a * x * (x + 1) / 2, a * x0 * (x0 + 1) / 2 + (x - x0) * cap)


def _compressed_pairs(arch: LLMArch, kind: str, x: np.ndarray) -> np.ndarray:
    """sum of keys(p) for p = 1..x of a K or H layer: pooled entries (capped at top-k for K) plus
    the whole-token window."""
    a = 1.0 / kinds.compress_ratio(arch, kind)
    cap = float(arch.index_topk) if kind == "K" else np.inf
    return _linear_pairs(x, a, cap) + key_pairs_before("S", x, float(arch.attention_window))


def _compressed_keys(arch: LLMArch, kind: str, ctx: np.ndarray) -> np.ndarray:
    """keys(ctx) of a K or H layer: min(ctx / m, k) (K) or ctx / m' (H) pooled entries + min(ctx, W)."""
    pooled = ctx / kinds.compress_ratio(arch, kind)
    if kind == "K":
        pooled = np.minimum(pooled, float(arch.index_topk))
    return pooled + np.minimum(ctx, float(arch.attention_window))


def _window(arch: LLMArch, kind: str) -> float:
    return float(arch.index_topk if kind == "X" else arch.attention_window)


def _layer_bytes(arch: LLMArch, kv_dtype: str, tp: int, kind: str) -> tuple[float, float]:
    """(KV bytes per token of one ``kind`` layer, indexer-key bytes per token per X layer) per TP rank."""
    b = bytes_per_element(kv_dtype, "kv_dtype")
    return float(kinds.layer_kv_elements(arch, tp, kind)) * b, arch.index_head_dim * b


def _dims(arch: LLMArch, kind: str, *, absorbed: bool) -> float:
    """d_qk + d_v of one ``kind`` layer's heads: attention_dims, the absorbed (MQA) form for X
    layers, the own head width of F layers that have one (Gemma 4 globals)."""
    if kind == "F" and arch.global_head_dim:
        return 2.0 * arch.global_head_dim
    qk, v = attention_dims(arch, absorbed=absorbed or kind == "X")
    return qk + v


def _recurrence_flops(arch: LLMArch) -> float:
    """FLOPs per token of every L/M layer's recurrence (whole instance)."""
    counts = kinds.kind_counts(arch)
    state = arch.linear_num_value_heads * arch.linear_key_head_dim * arch.linear_value_head_dim
    return sum(
        counts.get(k, 0) * kinds.RECURRENCE_FLOPS_PER_STATE_ELEMENT[k] * state for k in kinds.STATE_KINDS
    )


def prefill_work(
    arch: LLMArch, kv_dtype: str, tp: int, new: np.ndarray, cached: np.ndarray, seqs: np.ndarray
) -> AttentionWork:
    """Attention work of ``seqs`` sequences each adding ``new`` tokens after ``cached`` ones."""
    n, c = new, cached
    per_token = kinds.kv_bytes_per_token(arch, kv_dtype, tp)
    flops = np.zeros_like(n, dtype=float)
    read = np.zeros_like(n, dtype=float)
    scores = np.zeros_like(n, dtype=float)
    masked = np.zeros_like(n, dtype=float)
    for kind, count in kinds.kind_counts(arch).items():
        if kind not in kinds.SOFTMAX_KINDS:
            continue
        layer_b, index_b = _layer_bytes(arch, kv_dtype, tp, kind)
        dims = _dims(arch, kind, absorbed=False)
        if kind in "FSC":  # a materialising kernel: every new token against all n_kv = c + n keys
            scores = scores + count * arch.num_heads / tp * n * (c + n)
        if kind == "F":
            flops = flops + 2.0 * arch.num_heads * count * dims * (n * c + n * (n + 1) / 2)
            masked = masked + 2.0 * arch.num_heads * count * dims * n * (n - 1) / 2
            read = read + count * layer_b * (c + n)
            continue
        if kind in kinds.COMPRESSED_KINDS:
            pairs = _compressed_pairs(arch, kind, c + n) - _compressed_pairs(arch, kind, c)
            flops = flops + 2.0 * arch.num_heads * count * dims * pairs
            m, w = kinds.compress_ratio(arch, kind), float(arch.attention_window)
            read = read + count * layer_b * (np.minimum(c, w) + n + (c + n) / m)
            if kind == "K":
                index_pairs = _linear_pairs(c + n, 1.0 / m) - _linear_pairs(c, 1.0 / m)
                flops = flops + 2.0 * arch.index_heads * arch.index_head_dim * count * index_pairs
                read = read + count * index_b * (c + n) / m
            continue
        w = _window(arch, kind)
        pairs = key_pairs_before(kind, c + n, w) - key_pairs_before(kind, c, w)
        flops = flops + 2.0 * arch.num_heads * count * dims * pairs
        if kind in "SC":
            masked = masked + 2.0 * arch.num_heads * count * dims * (n * (c + n) - pairs)
        if kind == "X":
            full_pairs = n * c + n * (n + 1) / 2
            flops = flops + 2.0 * arch.index_heads * arch.index_head_dim * count * full_pairs
            read = read + count * (layer_b + index_b) * (c + n)
        else:
            read = read + count * layer_b * (np.minimum(c, w) + n)
    flops = flops + _recurrence_flops(arch) * n
    state = kinds.state_bytes_per_sequence(arch, kv_dtype, tp)
    has = (n > 0).astype(float)
    return AttentionWork(
        flops * seqs,
        (read + state * has) * seqs,
        (n * per_token + state * has) * seqs,
        score_elements=scores * seqs,
        masked_flops=masked * seqs,
    )


def decode_work(
    arch: LLMArch, kv_dtype: str, tp: int, seqs: np.ndarray, ctx: np.ndarray, width: float
) -> AttentionWork:
    """Attention work of ``seqs`` sequences each running ``width`` tokens at ``ctx`` keys of context
    (the tokens' own KV included), every token counted at the full context (as the verify pass of
    speculative decoding reads it)."""
    per_token = kinds.kv_bytes_per_token(arch, kv_dtype, tp)
    flops = np.zeros_like(ctx, dtype=float)
    read = np.zeros_like(ctx, dtype=float)
    token_b = 0.0  # KV bytes one more attended token adds, over the attention layers
    scores = np.zeros_like(ctx, dtype=float)
    masked = np.zeros_like(ctx, dtype=float)
    for kind, count in kinds.kind_counts(arch).items():
        if kind in kinds.COMPRESSED_KINDS or kind in kinds.SOFTMAX_KINDS:
            token_b += count * _layer_bytes(arch, kv_dtype, tp, kind)[0]
        if kind in kinds.COMPRESSED_KINDS:
            layer_b, index_b = _layer_bytes(arch, kv_dtype, tp, kind)
            keys = _compressed_keys(arch, kind, ctx)
            flops = flops + 2.0 * arch.num_heads * count * _dims(arch, kind, absorbed=True) * width * keys
            read = read + count * layer_b * keys
            if kind == "K":
                pooled = ctx / kinds.compress_ratio(arch, kind)
                flops = flops + 2.0 * arch.index_heads * arch.index_head_dim * count * width * pooled
                read = read + count * index_b * pooled
        elif kind in kinds.SOFTMAX_KINDS:
            layer_b, index_b = _layer_bytes(arch, kv_dtype, tp, kind)
            keys = keys_at(kind, ctx, _window(arch, kind))
            dims = _dims(arch, kind, absorbed=True)
            flops = flops + 2.0 * arch.num_heads * count * dims * width * keys
            if kind in "FSC":  # a materialising kernel scores every cached key, masked or not
                scores = scores + count * arch.num_heads / tp * width * ctx
                masked = masked + 2.0 * arch.num_heads * count * dims * width * (ctx - keys)
            read = read + count * layer_b * keys
            if kind == "X":
                flops = flops + 2.0 * arch.index_heads * arch.index_head_dim * count * width * ctx
                read = read + count * index_b * ctx
    flops = flops + _recurrence_flops(arch) * width
    state = kinds.state_bytes_per_sequence(arch, kv_dtype, tp)
    return AttentionWork(
        flops * seqs,
        (read + state) * seqs,
        (width * per_token + state) * seqs,
        read * seqs,
        token_b * seqs,
        scores * seqs,
        masked * seqs,
    )


def decode_kink_context(arch: LLMArch) -> tuple[float, float, float]:
    """(threshold, x_a, x_b): above ``threshold`` context a decode step's cost is affine again
    (through x_a and x_b); threshold 0 when every layer is F, L, M or none (affine everywhere).

    S and X layers read min(ctx, cap) keys: constant above the largest cap K, lines through K and 2K.
    C layers read a saw-tooth ((ctx - 1) mod W) + 1: lines through mid-chunk points 1.5 W and 2.5 W
    give its chunk average W / 2 (Llama 4 has C layers only besides F). K and H layers' windows
    stop at W and a K layer's pooled top-k at m k; above both every term is linear.
    """
    counts = kinds.kind_counts(arch)
    caps = [_window(arch, k) for k in counts if k in "SX"]
    caps += [float(arch.attention_window) for k in counts if k in kinds.COMPRESSED_KINDS]
    if "K" in counts:
        caps.append(float(arch.compress_ratio_sparse * arch.index_topk))
    if caps:
        k = max(caps + ([float(arch.attention_window)] if "C" in counts else []))
        return k, k, 2.0 * k
    if "C" in counts:
        w = float(arch.attention_window)
        return w, 1.5 * w, 2.5 * w
    return 0.0, 0.0, 0.0


def chunk_line_kink(arch: LLMArch) -> tuple[float, float]:
    """(prefix threshold, period) for sums over prompt chunks: a chunk's attention pairs and KV reads
    grow linearly with its prefix below the largest S / X window K and again, with another slope,
    above it (threshold K, period 0: two consecutive chunks give the upper line). Chunked-local
    layers (C) repeat with period W: the upper line is drawn over one period. (0, 0) when linear."""
    threshold, _, _ = decode_kink_context(arch)
    counts = kinds.kind_counts(arch)
    period = float(arch.attention_window) if "C" in counts and not set("SXKH") & set(counts) else 0.0
    return threshold, period
