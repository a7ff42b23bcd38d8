"""The work of one engine step per GPU, before communication and overheads: FLOPs, bytes, and their
compute and memory times on the roofline (model.physics.steps states the formulas and conventions).
The routed experts' part is kept apart for two-micro-batch overlap (model.physics.expert_parallel).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.hardware.formats import bytes_per_element
from model.llm.arch import lm_head_params
from model.physics.attention import AttentionWork
from model.physics.deployment import FP16_COPY_ABOVE_TOKENS, LOGIT_BYTES, Deployment
from model.physics.expert_parallel import grouped_gemm_rows, load_imbalance, rows_per_expert
from model.physics.materialised_attention import score_traffic_s
from model.physics.operators import (
    activation_elements_per_token,
    linear_flops_per_token,
    weight_params_read,
)

FP16_BYTES = bytes_per_element("fp16")  # one element of llama.cpp's dequantised weight copy


@dataclass(frozen=True)
class StepWork:
    """FLOPs, bytes and their roofline times of one step's work per GPU (no communication)."""

    flops: np.ndarray
    compute_s: np.ndarray
    memory_s: np.ndarray
    total_bytes: np.ndarray
    weight_bytes: np.ndarray
    kv_read_bytes: np.ndarray
    kv_write_bytes: np.ndarray
    activation_bytes: np.ndarray
    expert_compute_s: np.ndarray | float = 0.0  # the routed experts' part of compute_s
    expert_memory_s: np.ndarray | float = 0.0  # the routed experts' weights' part of memory_s


def step_work(
    dep: Deployment, tokens: np.ndarray, logits: np.ndarray, attn: AttentionWork, busy: np.ndarray | float
) -> StepWork:
    """The roofline work per GPU of ``tokens`` tokens (``logits`` of them through the LM head) with
    attention work ``attn`` and the busiest attention-DP rank's share ``busy``: the compute_s and
    memory_s terms of :func:`model.physics.steps._step` (whose docstring states the formulas)."""
    arch, tp, g = dep.arch, int(dep.tp), int(dep.stage_gpus)
    act_b = dep.activation_bytes
    # Work per GPU (model.physics.expert_parallel): attention, dense MLPs, shared experts and the LM
    # head run on each attention-DP rank for its own sequences (the busiest rank's share ``busy``),
    # split over its TP GPUs; the routed experts serve all the step's tokens split over the stage's
    # G = TP x DP GPUs, the hottest GPU carrying load_imbalance(EP) times the mean. TP-only: all / TP.
    busy = np.asarray(busy, dtype=float)
    share = {"attention": busy / tp, "mlp": busy / tp, "experts": load_imbalance(dep.ep) / g}

    # FLOPs per GPU (linear layers per weight component; the LM head is in "mlp")
    per_token = linear_flops_per_token(arch)
    parts = dep.weight_components  # components the architecture has
    linear = {c: per_token[c] * tokens for c in parts}
    linear["mlp"] = linear["mlp"] + 2.0 * lm_head_params(arch) * logits
    linear = {c: linear[c] * share[c] for c in parts}  # per GPU
    attn_flops = (
        (attn.flops + (attn.masked_flops if dep.attention_kernel == "materialised" else 0.0)) * busy / tp
    )
    flops = sum(linear.values()) + attn_flops

    # Bytes per GPU (weights per component in its format, block scales included): each DP rank
    # streams its TP shard of the replicated weights; the routed experts the step's tokens touch are
    # spread over the G stage GPUs.
    params = weight_params_read(arch, tokens)
    w_share = {"attention": 1.0 / tp, "mlp": 1.0 / tp, "experts": 1.0 / g}
    w_bytes = sum(params[c] * dep.weight_bytes_per_element(c) * w_share[c] for c in parts)
    kv_read = attn.kv_read_bytes * busy
    kv_write = attn.kv_write_bytes * busy
    act = (
        tokens * busy * activation_elements_per_token(arch, tp) * act_b
        + tokens * busy * arch.hidden_size * dep.weight_bytes_per_element("mlp")  # embedding rows gathered
        + logits * busy * arch.vocab_size / tp * LOGIT_BYTES
    )
    total_bytes = w_bytes + kv_read + kv_write + act

    # Linear layers run at their format's tensor-core peak with the token-dependent efficiency
    # MFU(M) = MFU x M / (M + T_half) per GEMM of M rows (``gemm_mfu_at``). Summed over the GEMMs a
    # step streams, the (M + T_half) / M stretch adds T_half x 2 x weights / (peak x MFU) =
    # GEMM_EXPOSED_WEIGHT_FRACTION x weight bytes / (bandwidth x MBU) to the ideal FLOP time, with the
    # same weight bytes as the memory term (MoE: the touched experts, i.e. M = T k / E_touched rows
    # per expert; LM head: M = logits rows). Routed experts also compute their grouped GEMMs' tile
    # padding (``grouped_gemm_mfu_at``). Attention (FlashAttention) runs in 16-bit at the MFU.
    if "experts" in linear:
        rows = rows_per_expert(arch, tokens)
        linear["experts"] = linear["experts"] * grouped_gemm_rows(rows) / np.maximum(rows, 1e-300)
    stream_bw = dep.gpu.memory_bandwidth_bytes_per_s * dep.mbu
    compute_s = (
        sum(linear[c] / dep.gemm_flops_per_s(c) for c in parts)
        + dep.exposed_weight_fraction * w_bytes / stream_bw
        + attn_flops / (dep.attention_peak_flops_per_s * dep.mfu)
        + fp16_copy_s(dep, {c: params[c] * w_share[c] for c in parts}, tokens)
        + score_traffic_s(dep.attention_kernel, attn.score_elements * busy, dep.decode_kv_bandwidth)
    )
    # Decode attention streams its cached KV at its own efficiency, plus a fixed cost per sequence
    # of DECODE_ATTENTION_FIXED_TOKENS tokens' worth of KV (model.physics.deployment).
    decode_kv = attn.decode_kv_read_bytes * busy
    decode_kv_s = (decode_kv + dep.attention_fixed_tokens * attn.decode_kv_token_bytes * busy) / (
        dep.decode_kv_bandwidth
    )
    memory_s = (total_bytes - decode_kv) / stream_bw + decode_kv_s
    e_memory = 0.0
    e_compute = 0.0
    if "experts" in parts:
        e_memory = params["experts"] * dep.weight_bytes_per_element("experts") / g / stream_bw
        e_compute = (
            linear["experts"] / dep.gemm_flops_per_s("experts") + dep.exposed_weight_fraction * e_memory
        )
    return StepWork(
        flops,
        compute_s,
        memory_s,
        total_bytes,
        w_bytes,
        kv_read,
        kv_write,
        act,
        e_compute,
        e_memory,
    )


def fp16_copy_s(dep: Deployment, weights_per_gpu: dict[str, np.ndarray], tokens: np.ndarray) -> np.ndarray:
    """Time to dequantise weight-only quantised weights into an FP16 copy before each GEMM, in steps
    of more than FP16_COPY_ABOVE_TOKENS tokens when ``dep.gemm_accumulate`` is "fp16" (llama.cpp's
    cuBLAS path, ggml-cuda.cu ggml_cuda_op_mul_mat_cublas: to_fp16_cuda, then cublasGemmEx); 0
    otherwise. A separate kernel before the GEMM, so it adds to the step:

        sum over weight-only components c of weights_c per GPU x (bytes per weight_c + 2) / (HBM x MBU)

    (read the quantised blocks, write 2-byte halves; the GEMM's own read of the copy is its
    roofline's). Llama-2-7B Q4_0 on an RTX 4090: 6.7e9 x 2.5625 / (1008e9 x 0.7) = 24 ms per step.
    """
    out = np.zeros_like(np.asarray(tokens, dtype=float))
    if dep.gemm_accumulate != "fp16":
        return out
    stream_bw = dep.gpu.memory_bandwidth_bytes_per_s * dep.mbu
    for c, n in weights_per_gpu.items():
        if dep.resolved_precision.format(c).weight_only:
            out = out + n * (dep.weight_bytes_per_element(c) + FP16_BYTES) / stream_bw
    return np.where(np.asarray(tokens) > FP16_COPY_ABOVE_TOKENS, out, 0.0)
