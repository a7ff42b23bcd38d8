"""Attention that materialises the score matrix (no FlashAttention): the extra memory traffic and
FLOPs of an engine whose attention runs as separate, non-fused kernels.

A fused kernel (FlashAttention, Dao et al. 2022; FlashInfer; TensorRT-LLM's fMHA) keeps the scores
of a tile in registers and shared memory: its HBM traffic is the Q, K, V and output tensors, which
:mod:`model.physics.attention` counts, and it skips the fully masked tiles of causal attention.
llama.cpp without ``-fa`` (the default of ``llama-bench`` and ``llama_context_default_params``
until 2025: ``flash_attn = false``, llama.cpp at ggerganov/llama.cpp 3bc10cb4, May 2024,
llama.cpp ``llama_context_default_params`` and examples/llama-bench/llama-bench.cpp
``cmd_params_defaults``) builds attention in ``llm_build_kqv`` as three graph nodes:

    kq  = ggml_mul_mat(k, q)               # n_kv x n_tokens x n_head scores
    kq  = ggml_soft_max_ext(kq, kq_mask, scale, ...)
    kqv = ggml_mul_mat(v, kq)

Every query is scored against all n_kv cached cells (the causal mask is added by the softmax, the
masked half is computed, not skipped). On the CUDA backend both products take the "KQ + KQV
multi-batch" path (ggml-cuda.cu ``ggml_cuda_mul_mat`` -> ``ggml_cuda_mul_mat_batched_cublas``,
for any token count on GPUs with fast FP16: the single-token kernels are only chosen when
``!fp16_performance_good``), which converts its F32 right-hand side to FP16 (``to_fp16_cuda``),
multiplies with CUBLAS_COMPUTE_16F into an FP16 buffer and converts the result to F32
(``to_fp32_cuda``; precision GGML_PREC_DEFAULT, which llm_build_kqv leaves for Llama). Per score
element, in bytes of HBM traffic:

    KQ GEMM writes FP16                          2
    to_fp32: read FP16, write F32                2 + 4
    soft_max: read F32, write F32                4 + 4   (the mask row is shared by the heads)
    to_fp16 of KQV's right-hand side: read F32, write FP16   4 + 2
    KQV GEMM reads FP16                          2
                                                 = 24 = SCORE_BYTES_PER_ELEMENT

These are separate kernels that run one after another between the layer's GEMMs, so their time
adds to the step: score elements x 24 B / (HBM bandwidth x MBU) (streaming kernels, at the GPU
profile's streaming efficiency), and the masked FLOPs run with the rest of attention. At an
8,192-token prompt (16 micro-batches of 512) on Llama-3.1-8B this is 876 GB, about 1.2 s on an
RTX 4090, the size of the gap the measured llama-bench pp8192 rows showed (docs/validation.md).
"""

from __future__ import annotations

import numpy as np

from model.errors import InputError

# Attention kernels an engine can run: "fused" (FlashAttention-style, the default) or
# "materialised" (score matrix in HBM, llama.cpp without -fa).
ATTENTION_KERNELS = ("fused", "materialised")
SCORE_BYTES_PER_ELEMENT = 24.0  # module docstring: the five passes of llama.cpp's KQ/softmax/KQV


def check_attention_kernel(kernel: object) -> None:
    """A clear error unless ``kernel`` is one of ATTENTION_KERNELS."""
    if kernel not in ATTENTION_KERNELS:
        raise InputError("attention_kernel", kernel, " or ".join(ATTENTION_KERNELS))


def score_traffic_s(kernel: str, score_elements: np.ndarray, stream_bytes_per_s: float) -> np.ndarray:
    """Time of the score-matrix passes: score_elements x SCORE_BYTES_PER_ELEMENT / stream bandwidth
    for a "materialised" kernel, 0 for a fused one (score_elements per GPU, all layers)."""
    scores = np.asarray(score_elements, dtype=float)
    if kernel != "materialised":
        return np.zeros_like(scores)
    return scores * SCORE_BYTES_PER_ELEMENT / stream_bytes_per_s
