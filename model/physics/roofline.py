"""Roofline phase costs: FLOPs, bytes and time of a prefill, a decode step and a chunked-prefill
iteration on one model instance (a TP x PP group of identical GPUs).

One shared roofline (``_step``) serves every phase; the public functions only say how many
tokens a step processes, how many keys their attention reads and how much KV it reads and writes.

Per-step time (Williams, Waterman & Patterson 2009, "Roofline", CACM 52(4)):

    time = max(compute_s, memory_s) + comm_s + overhead_s
    compute_s = FLOPs per GPU / (peak FLOP/s of the compute dtype x MFU)
    memory_s  = bytes per GPU / (HBM bandwidth x MBU)

The linear layers' MFU depends on the tokens T a step carries, MFU(T) = MFU x T / (T + T_half)
(``gemm_mfu_at``; GEMM_EXPOSED_WEIGHT_FRACTION): prefill, chunked and decode steps all get it from
``_step``, which is what makes small prefill chunks cost more than their FLOPs.

Conventions (docs/model.md has the full derivations):
- "Per GPU" means one tensor-parallel rank: FLOPs and bytes are divided by TP (Megatron-LM,
  Shoeybi et al. 2019, splits every matmul and the attention heads across the ranks).
- With pipeline parallelism the batch is split into m = min(batch, PP) micro-batches (vLLM
  virtual engines, GPipe, Huang et al. 2019); the StepCost describes the critical path: one
  micro-batch of ceil(batch / m) sequences passing through all PP stages, which is the time
  between two steps of the same sequence. ``pp_bubble_fraction`` = 1 - m / PP of stage time idles.
- Activations travel in 16-bit (ACTIVATION_BYTES) whatever the weight format: FP8 and int4
  engines keep bf16/fp16 activations between layers (TensorRT-LLM and vLLM FP8 linear layers
  output bf16).
- Tensor-parallel all-reduces are not overlapped with compute (vLLM and TensorRT-LLM default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from model.errors import InputError
from model.hardware.collectives import allreduce_time_s, default_tp_link, transfer_time_s
from model.hardware.formats import bytes_per_element, compute_dtype
from model.hardware.profiles import GPU, Link
from model.limits import MAX_ARRAY_ELEMENTS
from model.llm.arch import (
    LLMArch,
    active_params,
    attention_params_per_layer,
    check_tp,
    embedding_params,
    expert_params,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    lm_head_params,
    mlp_params,
    weight_bytes,
)
from model.llm.moe import expected_experts_touched

ArrayLike = float | int | np.ndarray

# Bytes per activation element between layers and on the TP all-reduce (bf16/fp16).
ACTIVATION_BYTES = 2.0
# Bytes per logit written by the LM head (vLLM and TensorRT-LLM compute logits in fp32).
LOGIT_BYTES = 4.0
# TP all-reduces per transformer layer: one after attention's output projection, one after the
# MLP's down projection (Megatron-LM, Shoeybi et al. 2019, sec. 3, Fig. 3).
ALLREDUCES_PER_LAYER = 2
# Compute time of GEMMs in an 8- or 4-bit format, as a fraction of what the MFU alone predicts at
# that format's (2x or 4x) peak. Each low-precision GEMM needs its input activations quantised by a
# separate kernel, attention, norms and sampling stay in 16-bit, and the doubled tensor-core rate
# pushes the GPU into its power limit (lower clocks). TensorRT-LLM 0.5 on H100 reached ~780 TFLOP/s
# in FP8 prefill of Llama-2-7B (docs/source/performance.md low-latency table: 2048 tokens in 36 ms),
# i.e. ~0.4 of the FP8 peak against ~0.6 MFU in 16-bit: ratio ~0.7.
LOW_PRECISION_MFU_RATIO = {"fp8": 0.7, "int8": 0.7, "fp4": 0.7}
# Fraction kappa of a GEMM's weight stream that is not hidden behind its tensor-core math. It sets
# how the linear layers' efficiency falls when a step carries few tokens (``gemm_mfu_at``):
# MFU(T) = MFU x T / (T + T_half), T_half = kappa x T_ridge, where T_ridge is the token count at
# which a GEMM's FLOP time equals its weight-read time (``Deployment.gemm_ridge_tokens``).
# kappa = 0 is the ideal roofline (full MFU as soon as a GEMM is compute-bound); kappa = 1 is no
# overlap of weight loads and math at all. Physical basis: with M = T rows each weight tile loaded
# from HBM feeds only 2 M FLOPs per element, so near the ridge point the loads are only partly
# hidden by the software pipeline, and small-M GEMMs use smaller tiles and suffer tile and wave
# quantisation (NVIDIA, "Matrix Multiplication Background User's Guide", DU-09799-001, 2023,
# ch. 2 "Math and memory bounds", sec. 2.3 and ch. 3 "Dimension quantization effects").
# Value from published cuBLAS measurements: FP16 GEMM, M = 64, N = K = 16384 on an A100 runs at
# 95-100 TFLOP/s (ml-explore/mlx PR #3315, 2026, cuBLAS baseline column); the model gives
# 312 x 0.6 x 64 / (64 + kappa x 115) = 99 TFLOP/s at kappa = 0.5 (kappa = 1: 67, too slow). On an
# H100 the same shapes at M = 32 / 64 are memory-bound (87 / 178 TFLOP/s, mlx PR #3160), which
# needs kappa < 0.7. With 0.5 a GEMM at M = T_ridge runs at 2/3 of its large-M efficiency; a
# 512-token step on an A100 (bf16, T_half = 57) at 90%, a 4096-token one at 99%. Independent check:
# Sarathi-Serve's prefill overhead at small chunks (docs/validation.md).
GEMM_EXPOSED_WEIGHT_FRACTION = 0.5
# Eager (non-CUDA-graph) kernel launches per transformer layer in a step that carries prompt tokens:
# 2 norms, QKV GEMM, rotary, KV-cache write, attention, O GEMM, gate/up GEMM, activation, down GEMM,
# 2 residual adds. Engines capture decode steps in CUDA graphs (vLLM, TensorRT-LLM) but launch
# prefill kernels one by one, so prefill pays this per layer and decode does not.
EAGER_KERNELS_PER_LAYER = 12
# Host-side launch cost of one CUDA kernel: ~4-5 us (NVIDIA developer blog, A. Gray, "Getting
# Started with CUDA Graphs", 2019: a short kernel costs ~3.8 us per launch without graphs, 2.9 us
# end to end with them removed from the critical path); 5 us with framework (PyTorch) dispatch.
KERNEL_LAUNCH_S = 5e-6
# KV formats an engine can store (vLLM --kv-cache-dtype: auto/fp8; fp16/bf16/fp32 via auto).
KV_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8")


@dataclass(frozen=True)
class Deployment:
    """One model instance: ``tp`` x ``pp`` identical GPUs serving one copy of the weights.

    ``kv_dtype`` None -> the weight dtype if it is fp8/bf16/fp16, else bf16. Efficiencies None ->
    the GPU profile's defaults. ``tp_link`` None -> the GPU's NVLink/xGMI, or PCIe if it has none
    (:func:`model.hardware.collectives.default_tp_link`); ``pp_link`` None -> the same link as TP.
    """

    arch: LLMArch
    gpu: GPU
    tp: int = 1
    pp: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str | None = None
    prefill_mfu: float | None = None
    decode_mbu: float | None = None
    step_overhead_s: float | None = None
    tp_link: Link | None = None
    pp_link: Link | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.arch, LLMArch):
            raise InputError("model", self.arch, "an LLMArch (see model.llm.catalog.get_model)")
        if not isinstance(self.gpu, GPU):
            raise InputError("gpu", self.gpu, "a GPU profile (see model.hardware.profiles.get_gpu)")
        check_tp(self.arch, self.tp)
        if not (isinstance(self.pp, int | np.integer) and not isinstance(self.pp, bool) and self.pp >= 1):
            raise InputError("pp", self.pp, "a whole number >= 1")
        if self.arch.num_layers % self.pp:
            raise InputError("pp", self.pp, f"a divisor of {self.arch.label}'s {self.arch.num_layers} layers")
        if not isinstance(self.weight_dtype, str):
            raise InputError("dtype", self.weight_dtype, "a dtype name such as bf16 or fp8")
        self.gpu.peak_flops(compute_dtype(self.weight_dtype))  # raises naming "dtype"
        if self.kv_dtype is not None:
            bytes_per_element(self.kv_dtype, "kv_dtype")
            if self.kv_dtype.lower() not in KV_DTYPES:
                raise InputError("kv_dtype", self.kv_dtype, f"one of {', '.join(KV_DTYPES)}")
        for name in ("prefill_mfu", "decode_mbu"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int | float) and 0 < value <= 1):
                raise InputError(name, value, "a fraction in (0, 1]")
        if self.step_overhead_s is not None and not (
            isinstance(self.step_overhead_s, int | float)
            and math.isfinite(self.step_overhead_s)
            and self.step_overhead_s >= 0
        ):
            raise InputError("step_overhead_s", self.step_overhead_s, "a time >= 0 s")
        for name in ("tp_link", "pp_link"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Link):
                raise InputError(name, value, "a Link profile (see model.hardware.profiles.get_link) or None")

    # -- resolved settings --------------------------------------------------------------------
    @property
    def n_gpus(self) -> int:
        return int(self.tp) * int(self.pp)

    @property
    def kv_dtype_resolved(self) -> str:
        if self.kv_dtype is not None:
            return self.kv_dtype.lower()
        w = self.weight_dtype.lower()
        return w if w in ("fp8", "bf16", "fp16") else "bf16"

    @property
    def mfu(self) -> float:
        return self.gpu.prefill_mfu if self.prefill_mfu is None else float(self.prefill_mfu)

    @property
    def mbu(self) -> float:
        return self.gpu.decode_mbu if self.decode_mbu is None else float(self.decode_mbu)

    @property
    def overhead_s(self) -> float:
        return self.gpu.step_overhead_s if self.step_overhead_s is None else float(self.step_overhead_s)

    @property
    def peak_flops_per_s(self) -> float:
        return self.gpu.peak_flops(compute_dtype(self.weight_dtype))

    @property
    def gemm_mfu(self) -> float:
        """MFU of the linear layers: the MFU, times LOW_PRECISION_MFU_RATIO for 8-/4-bit GEMMs."""
        return self.mfu * LOW_PRECISION_MFU_RATIO.get(compute_dtype(self.weight_dtype), 1.0)

    @property
    def gemm_ridge_tokens(self) -> float:
        """T_ridge: tokens per step at which a linear layer's FLOP time equals its weight-read time.

        2 T / (peak x MFU_gemm) = bytes per weight / (HBM bandwidth x MBU) per weight element, so
        T_ridge = peak x MFU_gemm x bytes per weight / (2 x bandwidth x MBU) (the roofline ridge
        point, Williams et al. 2009, in tokens; A100 bf16: 312e12 x 0.6 x 2 / (2 x 2.04e12 x 0.8)
        = 115; int4 weights, 0.5 B each on the bf16 peak, quarter it).
        """
        wb = bytes_per_element(self.weight_dtype, "dtype")
        return (
            self.peak_flops_per_s
            * self.gemm_mfu
            * wb
            / (2.0 * self.gpu.memory_bandwidth_bytes_per_s * self.mbu)
        )

    @property
    def gemm_half_efficiency_tokens(self) -> float:
        """T_half = GEMM_EXPOSED_WEIGHT_FRACTION x T_ridge: step tokens at which the linear layers
        reach half their large-batch MFU (see :func:`gemm_mfu_at`)."""
        return GEMM_EXPOSED_WEIGHT_FRACTION * self.gemm_ridge_tokens

    @property
    def attention_peak_flops_per_s(self) -> float:
        """Peak of the 16-bit path attention runs on (bf16, else fp16, else the weight format's)."""
        table = dict(self.gpu.peak_flops_per_s)
        return table.get("bf16") or table.get("fp16") or self.peak_flops_per_s

    @cached_property
    def tp_link_resolved(self) -> Link:
        return self.tp_link if self.tp_link is not None else default_tp_link(self.gpu, int(self.tp))

    @property
    def pp_link_resolved(self) -> Link:
        return self.pp_link if self.pp_link is not None else self.tp_link_resolved

    @property
    def weight_bytes_per_gpu(self) -> float:
        """Bytes of weights each GPU holds: all weights / (TP x PP) (even split)."""
        return weight_bytes(self.arch, self.weight_dtype) / self.n_gpus

    @property
    def kv_bytes_per_token(self) -> float:
        """KV bytes one token adds to the whole instance (all layers, all heads)."""
        return kv_bytes_per_token(self.arch, self.kv_dtype_resolved)

    @property
    def kv_bytes_per_token_per_gpu(self) -> float:
        """KV bytes per token on each GPU: TP splits heads (replicated below n_kv), PP splits layers."""
        return float(kv_bytes_per_token_per_gpu(self.arch, self.kv_dtype_resolved, int(self.tp))) / self.pp


@dataclass(frozen=True)
class StepCost:
    """Cost of one engine step, per GPU along the critical path; every field broadcasts over the inputs.

    time_s = max(compute_s, memory_s) + comm_s + overhead_s. ``bound`` is "compute" where
    compute_s >= memory_s, else "memory". Bytes: bytes_moved = weight_bytes + kv_read_bytes +
    kv_write_bytes + activation_bytes.
    """

    time_s: np.ndarray
    compute_s: np.ndarray
    memory_s: np.ndarray
    comm_s: np.ndarray
    overhead_s: np.ndarray
    flops: np.ndarray
    bytes_moved: np.ndarray
    weight_bytes: np.ndarray
    kv_read_bytes: np.ndarray
    kv_write_bytes: np.ndarray
    activation_bytes: np.ndarray
    bound: np.ndarray
    tokens: np.ndarray
    pp_bubble_fraction: np.ndarray

    @property
    def arithmetic_intensity(self) -> np.ndarray:
        """FLOPs per byte moved (the roofline's x axis)."""
        return self.flops / np.maximum(self.bytes_moved, 1.0)


# ----------------------------------------------------------------------------------------------
# Per-token counts derived from the architecture (no dtype, no hardware).


def _attention_dims(arch: LLMArch, *, absorbed: bool) -> tuple[float, float]:
    """(query-key dim, value dim) per head for the attention FLOPs.

    GQA/MHA: head_dim for both. MLA prefill (decompressed K/V): qk_nope + qk_rope, v_head_dim.
    MLA decode with absorbed projections attends over the latent: kv_lora_rank + qk_rope and
    kv_lora_rank (DeepSeek-V2, sec. 2.1.4 and App. C; vLLM MLA backend).
    """
    if arch.is_mla:
        if absorbed:
            return float(arch.kv_lora_rank + arch.qk_rope_head_dim), float(arch.kv_lora_rank)
        return float(arch.qk_nope_head_dim + arch.qk_rope_head_dim), float(arch.v_head_dim)
    return float(arch.head_dim), float(arch.head_dim)


def _linear_flops_per_token(arch: LLMArch) -> float:
    """2 x active non-embedding weights: each weight is one multiply-add per token (Kaplan et al.
    2020, "Scaling Laws", sec. 2.1: C_forward ~ 2N); embedding lookups are free, the LM head is
    counted separately for the tokens that need logits."""
    return 2.0 * (active_params(arch) - embedding_params(arch))


def _activation_elements_per_token(arch: LLMArch, tp: int) -> float:
    """Activation elements one token reads and writes per step, summed over layers, per TP rank.

    Per layer: each linear layer reads its input and writes its output (QKV: h in, (n_h + 2 n_kv) d
    / TP out; O: n_h d / TP in, h out; gate/up: h in, 2 I / TP out; down: I / TP in, h out), and
    attention reads Q and writes its output (2 n_h d / TP). I is the MLP width a token uses
    (MoE: (top-k + shared) x moe_intermediate). Norms and residual adds are fused into these.
    """
    h = arch.hidden_size
    if arch.is_mla:
        q_dim = arch.num_heads * (arch.qk_nope_head_dim + arch.qk_rope_head_dim)
        kv_dim = arch.kv_lora_rank + arch.qk_rope_head_dim
        o_dim = arch.num_heads * arch.v_head_dim
    else:
        q_dim = arch.num_heads * arch.head_dim
        kv_dim = 2 * arch.num_kv_heads * arch.head_dim
        o_dim = q_dim
    up = 2 if arch.gated_mlp else 1
    attn = (h + (q_dim + kv_dim) / tp) + (o_dim / tp + h) + (q_dim + o_dim) / tp
    dense_mlp = (h + up * arch.intermediate_size / tp) + (arch.intermediate_size / tp + h)
    if arch.is_moe:
        width = (arch.experts_per_token + arch.num_shared_experts) * arch.moe_intermediate_size
        moe_mlp = (h + up * width / tp) + (width / tp + h) + arch.num_experts  # + router logits
        mlp_total = arch.num_dense_layers * dense_mlp + arch.num_moe_layers * moe_mlp
    else:
        mlp_total = arch.num_layers * dense_mlp
    return arch.num_layers * attn + mlp_total


def _weight_params_read(arch: LLMArch, tokens: np.ndarray) -> np.ndarray:
    """Weights a step streams from memory for ``tokens`` tokens (whole model, before the TP split).

    Every attention, dense-MLP, router and shared-expert weight and the LM head (V x h) are read once
    per step however many tokens it has (weights are reused across the batch, Pope et al. 2022,
    sec. 2). Routed experts: only the expected distinct experts the step's tokens touch,
    E (1 - (1 - k/E)^T) per MoE layer (:func:`model.llm.moe.expected_experts_touched`). The embedding
    table is gathered by row (counted with activations), not streamed.
    """
    base = arch.num_layers * attention_params_per_layer(arch) + lm_head_params(arch)
    if not arch.is_moe:
        return np.full(
            np.shape(tokens), float(base + arch.num_layers * mlp_params(arch, arch.intermediate_size))
        )
    per_expert = expert_params(arch)
    touched = expected_experts_touched(arch.num_experts, arch.experts_per_token, tokens)
    moe_layer = arch.hidden_size * arch.num_experts + (touched + arch.num_shared_experts) * per_expert
    dense = arch.num_dense_layers * mlp_params(arch, arch.intermediate_size)
    return base + dense + arch.num_moe_layers * moe_layer


# ----------------------------------------------------------------------------------------------
# The one roofline.


def _step(
    dep: Deployment,
    *,
    tokens: np.ndarray,
    logits_tokens: np.ndarray,
    prefill_key_pairs: np.ndarray,
    decode_key_pairs: np.ndarray,
    kv_read_tokens: np.ndarray,
    kv_write_tokens: np.ndarray,
) -> StepCost:
    """Roofline of one step (one micro-batch through every stage), inputs already per micro-batch.

    tokens: tokens through the linear layers; logits_tokens: tokens that need the LM head;
    prefill_key_pairs / decode_key_pairs: (query, key) pairs of causal-prefill and decode attention
    per layer; kv_read_tokens / kv_write_tokens: KV-cache tokens read and written (whole model).
    """
    arch, tp = dep.arch, int(dep.tp)
    wb = bytes_per_element(dep.weight_dtype, "dtype")
    kv_tok_gpu = dep.kv_bytes_per_token_per_gpu * dep.pp  # all layers on the critical path

    # FLOPs per GPU
    qk_p, v_p = _attention_dims(arch, absorbed=False)
    qk_d, v_d = _attention_dims(arch, absorbed=True)
    attn_flops = (
        2.0
        * arch.num_heads
        * arch.num_layers
        * ((qk_p + v_p) * prefill_key_pairs + (qk_d + v_d) * decode_key_pairs)
    )
    linear_flops = _linear_flops_per_token(arch) * tokens + 2.0 * lm_head_params(arch) * logits_tokens
    flops = (linear_flops + attn_flops) / tp

    # Bytes per GPU
    w_bytes = _weight_params_read(arch, tokens) * wb / tp
    kv_read = kv_read_tokens * kv_tok_gpu
    kv_write = kv_write_tokens * kv_tok_gpu
    act = (
        tokens * _activation_elements_per_token(arch, tp) * ACTIVATION_BYTES
        + tokens * arch.hidden_size * wb  # embedding rows gathered
        + logits_tokens * arch.vocab_size / tp * LOGIT_BYTES
    )
    total_bytes = w_bytes + kv_read + kv_write + act

    # Linear layers run at the weight format's tensor-core peak with the token-dependent efficiency
    # MFU(M) = MFU x M / (M + T_half) per GEMM of M rows (``gemm_mfu_at``). Summed over the GEMMs a
    # step streams, the (M + T_half) / M stretch adds T_half x 2 x weights / (peak x MFU) =
    # GEMM_EXPOSED_WEIGHT_FRACTION x weight bytes / (bandwidth x MBU) to the ideal FLOP time, with the
    # same weight bytes as the memory term (MoE: the touched experts, i.e. M = T k / E_touched rows
    # per expert; LM head: M = logits rows). Attention (FlashAttention) runs in 16-bit at the MFU.
    stream_bw = dep.gpu.memory_bandwidth_bytes_per_s * dep.mbu
    compute_s = (
        (linear_flops / tp) / (dep.peak_flops_per_s * dep.gemm_mfu)
        + GEMM_EXPOSED_WEIGHT_FRACTION * w_bytes / stream_bw
        + (attn_flops / tp) / (dep.attention_peak_flops_per_s * dep.mfu)
    )
    memory_s = total_bytes / stream_bw

    # Communication: TP all-reduces of the hidden state, PP hops between stages.
    message = tokens * arch.hidden_size * ACTIVATION_BYTES
    comm = np.zeros_like(tokens, dtype=float)
    if tp > 1:
        link = dep.tp_link_resolved
        one = allreduce_time_s(message, tp, link.effective_bandwidth_bytes_per_s, link.latency_s)
        comm = comm + ALLREDUCES_PER_LAYER * arch.num_layers * one
    if dep.pp > 1:
        comm = comm + (dep.pp - 1) * transfer_time_s(message, dep.pp_link_resolved)

    # Per-step host overhead, plus eager kernel launches when the step carries prompt tokens.
    launches = EAGER_KERNELS_PER_LAYER * arch.num_layers * KERNEL_LAUNCH_S
    overhead = dep.overhead_s + np.where(prefill_key_pairs > 0, launches, 0.0)
    time_s = np.maximum(compute_s, memory_s) + comm + overhead
    bound = np.where(compute_s >= memory_s, "compute", "memory")
    return StepCost(
        time_s=time_s,
        compute_s=compute_s,
        memory_s=memory_s,
        comm_s=comm,
        overhead_s=overhead,
        flops=flops,
        bytes_moved=total_bytes,
        weight_bytes=w_bytes,
        kv_read_bytes=kv_read,
        kv_write_bytes=kv_write,
        activation_bytes=act,
        bound=bound,
        tokens=tokens,
        pp_bubble_fraction=np.zeros_like(tokens, dtype=float),
    )


def gemm_mfu_at(dep: Deployment, tokens: ArrayLike) -> np.ndarray:
    """Achieved MFU of a dense linear layer (GEMM) with ``tokens`` rows: MFU_gemm x T / (T + T_half).

    T_half = GEMM_EXPOSED_WEIGHT_FRACTION x T_ridge (``Deployment.gemm_half_efficiency_tokens``).
    Small-M GEMMs lose efficiency to weight loads not hidden behind the math, tile and wave
    quantisation (NVIDIA Matrix Multiplication Background User's Guide, 2023, ch. 2-3); Sarathi-Serve
    (Agrawal et al., OSDI 2024) measures the resulting prefill slowdown at small chunks. ``_step``
    applies exactly this per GEMM (in its equivalent additive form); this function exposes the curve.
    """
    t = _check("tokens", tokens, 0)
    return dep.gemm_mfu * t / (t + dep.gemm_half_efficiency_tokens)


def _check(name: str, value: ArrayLike, minimum: float) -> np.ndarray:
    arr = np.asarray(value, dtype=float) if not isinstance(value, str) else None
    if arr is None or not np.all(np.isfinite(arr)) or np.any(arr < minimum):
        raise InputError(name, value, f"numbers >= {minimum:g}")
    return arr


def _microbatches(dep: Deployment, seqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(micro-batches m = min(seqs, PP), sequences per micro-batch ceil(seqs / m))."""
    m = np.maximum(np.minimum(seqs, dep.pp), 1.0)
    return m, np.ceil(seqs / m - 1e-12)


def _with_bubble(cost: StepCost, dep: Deployment, m: np.ndarray) -> StepCost:
    return StepCost(**{**cost.__dict__, "pp_bubble_fraction": 1.0 - m / dep.pp})


# ----------------------------------------------------------------------------------------------
# Public phase costs.


def prefill_cost(
    dep: Deployment, prompt_tokens: ArrayLike, *, cached_tokens: ArrayLike = 0, batch: ArrayLike = 1
) -> StepCost:
    """One prefill step of ``batch`` prompts, each ``prompt_tokens`` new tokens after ``cached_tokens``
    already-cached prefix tokens (prefix caching). Vectorised over all three.

    FLOPs: 2 N_active T (linear layers, T = batch x n) + 2 n_h L (d_qk + d_v) x batch x (n c +
    n (n + 1) / 2) (causal attention: new token i attends to c + i keys; FlashAttention skips the
    masked half, Dao 2023) + 2 V h per prompt (only the last token needs logits).
    Bytes: weights once; cached prefix KV read once; new KV written once and read by attention.
    """
    n = _check("prompt_tokens", prompt_tokens, 1)
    c = _check("cached_tokens", cached_tokens, 0)
    b = _check("batch", batch, 1)
    n, c, b = np.broadcast_arrays(n, c, b)
    m, b_mb = _microbatches(dep, b)
    cost = _step(
        dep,
        tokens=b_mb * n,
        logits_tokens=b_mb,
        prefill_key_pairs=b_mb * (n * c + n * (n + 1) / 2),
        decode_key_pairs=np.zeros_like(n),
        kv_read_tokens=b_mb * (c + n),
        kv_write_tokens=b_mb * n,
    )
    return _with_bubble(cost, dep, m)


def decode_step_cost(dep: Deployment, batch: ArrayLike, context_tokens: ArrayLike) -> StepCost:
    """One decode iteration: ``batch`` sequences each generate one token attending to
    ``context_tokens`` keys (KV tokens read, including the token's own). Vectorised.

    FLOPs: 2 N_active B + 2 V h B + 2 n_h L (d_qk + d_v) B ctx.
    Bytes: weights once (MoE: expected distinct experts at B tokens), KV read B x ctx x KV/token,
    KV written B x KV/token (Pope et al. 2022, sec. 2; Kwon et al. 2023, "PagedAttention").
    """
    b = _check("batch", batch, 1)
    ctx = _check("context_tokens", context_tokens, 1)
    b, ctx = np.broadcast_arrays(b, ctx)
    m, b_mb = _microbatches(dep, b)
    cost = _step(
        dep,
        tokens=b_mb,
        logits_tokens=b_mb,
        prefill_key_pairs=np.zeros_like(b),
        decode_key_pairs=b_mb * ctx,
        kv_read_tokens=b_mb * ctx,
        kv_write_tokens=b_mb,
    )
    return _with_bubble(cost, dep, m)


def _mixed_unchecked(
    dep: Deployment, chunk: np.ndarray, prefix: np.ndarray, db: np.ndarray, dctx: np.ndarray
) -> StepCost:
    has_chunk = (chunk > 0).astype(float)
    return _step(
        dep,
        tokens=chunk + db,
        logits_tokens=db + has_chunk,
        prefill_key_pairs=chunk * prefix + chunk * (chunk + 1) / 2,
        decode_key_pairs=db * dctx,
        kv_read_tokens=has_chunk * (prefix + chunk) + db * dctx,
        kv_write_tokens=chunk + db,
    )


def mixed_step_cost(
    dep: Deployment,
    *,
    chunk_tokens: ArrayLike,
    chunk_prefix_tokens: ArrayLike,
    decode_batch: ArrayLike,
    decode_context_tokens: ArrayLike,
) -> StepCost:
    """One chunked-prefill iteration (Sarathi-Serve, Agrawal et al. 2024, sec. 4): a prompt chunk
    of ``chunk_tokens`` whose attention also reads the KV of ``chunk_prefix_tokens`` earlier-chunk
    tokens, batched with ``decode_batch`` decodes at ``decode_context_tokens`` each.

    Weights are read once for the whole iteration (the decodes ride along for little extra memory
    traffic). The chunk's attention re-reads the prefix KV every iteration, and each iteration
    pays the step overhead and all-reduce latencies again: those are the costs of chunking.
    The chunk counts one logits row (the final chunk's); the mixed batch is not split into PP
    micro-batches.
    """
    chunk = _check("chunk_tokens", chunk_tokens, 0)
    prefix = _check("chunk_prefix_tokens", chunk_prefix_tokens, 0)
    db = _check("decode_batch", decode_batch, 0)
    dctx = _check("decode_context_tokens", decode_context_tokens, 0)
    chunk, prefix, db, dctx = np.broadcast_arrays(chunk, prefix, db, dctx)
    if np.any(chunk + db <= 0):
        raise InputError("chunk_tokens", chunk_tokens, "chunk_tokens + decode_batch >= 1 (an empty step)")
    if np.any((db > 0) & (dctx < 1)):
        raise InputError("decode_context_tokens", decode_context_tokens, ">= 1 when decode_batch > 0")
    cost = _mixed_unchecked(dep, chunk, prefix, db, dctx)
    return _with_bubble(cost, dep, np.ones_like(chunk))


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
    n = _check("prompt_tokens", prompt_tokens, 1)
    c = _check("chunk_tokens", chunk_tokens, 1)
    db = _check("decode_batch", decode_batch, 0)
    dctx = _check("decode_context_tokens", decode_context_tokens, 0)
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
    cost = _mixed_unchecked(dep, chunk, prefix, db * active, dctx * active)
    return np.asarray(np.where(active, cost.time_s, 0.0).sum(axis=0), dtype=float)


def chunked_prefill_overhead(
    dep: Deployment, prompt_tokens: ArrayLike, chunk_tokens: ArrayLike
) -> np.ndarray:
    """Extra prefill time from chunking, as a fraction: chunked time / one-step prefill time - 1
    (no decodes riding along; Sarathi-Serve, Agrawal et al. 2024, sec. 5.3 and Fig. 12)."""
    whole = prefill_cost(dep, prompt_tokens).time_s
    return chunked_prefill_time_s(dep, prompt_tokens, chunk_tokens) / whole - 1.0


def _decode_sum_s(dep: Deployment, batch: np.ndarray, first_ctx: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Exact sum of decode step times over contexts first_ctx, first_ctx + 1, ..., first_ctx + steps - 1.

    compute_s and memory_s are affine in the context (attention FLOPs and KV bytes grow linearly),
    comm and overhead do not depend on it, so max(compute, memory) has at most one kink: split the
    index range there and sum each affine piece as count x value at its midpoint.
    """
    steps = np.asarray(steps, dtype=float)
    last = first_ctx + np.maximum(steps - 1.0, 0.0)
    s0 = decode_step_cost(dep, batch, first_ctx)
    s1 = decode_step_cost(dep, batch, last)
    span = np.maximum(steps - 1.0, 1.0)
    a_c = (s1.compute_s - s0.compute_s) / span
    a_m = (s1.memory_s - s0.memory_s) / span
    d0 = s0.compute_s - s0.memory_s
    slope = a_c - a_m
    n_last = steps - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        jx = np.where(slope != 0, -d0 / slope, np.inf)
    # k = last index of the first piece (the side that dominates at j = 0)
    k_down = np.where(slope < 0, np.floor(jx), n_last)  # d0 >= 0: compute dominates until jx
    k_up = np.where(slope > 0, np.ceil(jx) - 1.0, n_last)  # d0 < 0: memory dominates until jx
    k = np.clip(np.where(d0 >= 0, k_down, k_up), -1.0, n_last)

    def piece(v0: np.ndarray, a: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        count = np.maximum(hi - lo + 1.0, 0.0)
        return count * (v0 + a * (lo + hi) / 2.0)

    first_c, first_m = piece(s0.compute_s, a_c, 0.0, k), piece(s0.memory_s, a_m, 0.0, k)
    rest_c, rest_m = piece(s0.compute_s, a_c, k + 1.0, n_last), piece(s0.memory_s, a_m, k + 1.0, n_last)
    roof = np.where(d0 >= 0, first_c + rest_m, first_m + rest_c)
    fixed = steps * (s0.comm_s + s0.overhead_s)
    return np.where(steps > 0, roof + fixed, 0.0)


def _gen_inputs(
    batch: ArrayLike, prompt_tokens: ArrayLike, output_tokens: ArrayLike
) -> tuple[np.ndarray, ...]:
    b = _check("batch", batch, 1)
    isl = _check("prompt_tokens", prompt_tokens, 1)
    osl = _check("output_tokens", output_tokens, 1)
    return tuple(np.broadcast_arrays(b, isl, osl))


def decode_total_s(
    dep: Deployment, batch: ArrayLike, prompt_tokens: ArrayLike, output_tokens: ArrayLike
) -> np.ndarray:
    """Time of the output_tokens - 1 decode steps after prefill (the first token comes from prefill).

    Step j (j = 0 .. osl - 2) attends to isl + 1 + j keys; summed exactly (see ``_decode_sum_s``).
    """
    b, isl, osl = _gen_inputs(batch, prompt_tokens, output_tokens)
    return _decode_sum_s(dep, b, isl + 1.0, osl - 1.0)


def mean_tpot_s(
    dep: Deployment, batch: ArrayLike, prompt_tokens: ArrayLike, output_tokens: ArrayLike
) -> np.ndarray:
    """TPOT = decode time / (output_tokens - 1) over the growing context isl + 1 .. isl + osl - 1
    (DistServe's TPOT; not the step time at the final context). 0 when output_tokens == 1."""
    b, isl, osl = _gen_inputs(batch, prompt_tokens, output_tokens)
    total = _decode_sum_s(dep, b, isl + 1.0, osl - 1.0)
    return np.where(osl > 1, total / np.maximum(osl - 1.0, 1.0), 0.0)


def generation_time_s(
    dep: Deployment, batch: ArrayLike, prompt_tokens: ArrayLike, output_tokens: ArrayLike
) -> np.ndarray:
    """End-to-end time of a static batch: one prefill of ``batch`` prompts plus osl - 1 decode steps."""
    b, isl, osl = _gen_inputs(batch, prompt_tokens, output_tokens)
    return prefill_cost(dep, isl, batch=b).time_s + _decode_sum_s(dep, b, isl + 1.0, osl - 1.0)
