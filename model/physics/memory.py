"""GPU memory fit of one model instance, vLLM style: weights + activation workspace + runtime reserve
inside ``gpu_memory_utilization`` x memory; whatever is left holds the KV cache.

vLLM's worker profiles one forward pass of ``max_num_batched_tokens`` tokens, subtracts weights,
the activation peak and non-torch memory from utilisation x total memory, and gives the rest to
KV-cache blocks (vLLM docs, "Engine arguments: --gpu-memory-utilization, --max-num-batched-tokens";
Kwon et al. 2023, "PagedAttention", sec. 4). An instance that does not fit is a result with the
numbers, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from model.errors import InputError
from model.llm.arch import expert_width
from model.llm.attention import KVLayout, kv_layout
from model.physics.deployment import LOGIT_BYTES, Deployment
from model.physics.expert_parallel import all_to_all_buffer_bytes
from model.scalars import plain, plain_fields
from model.units import format_bytes

GIB = 2.0**30
# Non-torch memory each GPU process holds: CUDA context and kernel images, cuBLAS/cuDNN workspaces
# and NCCL buffers. vLLM logs report "non_torch_memory" of ~0.5-1.2 GiB per GPU on H100/A100; 1 GiB.
RUNTIME_LIBRARY_BYTES = 1.0 * GIB
# CUDA-graph memory pool for decode batch sizes; vLLM logs "Graph capturing finished ... took
# 0.3-1 GiB" for 7B-70B models; 0.5 GiB.
CUDA_GRAPH_POOL_BYTES = 0.5 * GIB
# Sequences whose logits the profiling pass materialises (vLLM's default max_num_seqs = 256).
PROFILE_MAX_SEQS = 256
# Tokens per KV-cache block (vLLM default block_size = 16); capacity and per-sequence use round to it.
KV_BLOCK_TOKENS = 16


@dataclass(frozen=True)
class MemoryFit:
    """Per-GPU memory budget of one instance. Arrays broadcast over max_batched_tokens and utilisation
    (plain Python numbers when both are scalars)."""

    fits: bool | np.ndarray
    weight_bytes_per_gpu: float
    workspace_bytes_per_gpu: float | np.ndarray
    reserve_bytes_per_gpu: float
    usable_bytes_per_gpu: float | np.ndarray
    kv_bytes_available_per_gpu: float | np.ndarray
    kv_bytes_per_token_per_gpu: float
    kv_capacity_tokens: float | np.ndarray
    gpu_memory_bytes: float
    n_gpus: int
    reason: str
    # Windowed / hybrid models: KV tokens a sequence holds at a context (internal: not in JSON).
    kv_layout: KVLayout | None = field(default=None, metadata={"json": False})

    def kv_tokens(self, context_tokens: float | np.ndarray) -> np.ndarray:
        """KV-cache tokens (in units of ``kv_bytes_per_token_per_gpu``) one sequence of
        ``context_tokens`` holds: the context itself for full attention; less with sliding-window,
        chunked or linear-attention layers (:class:`model.llm.attention.KVLayout`)."""
        ctx = np.asarray(context_tokens, dtype=float)
        return ctx if self.kv_layout is None else self.kv_layout.tokens(ctx)

    comm_buffer_bytes_per_gpu: float = 0.0
    attention_ranks: int = 1

    def max_batch(self, context_tokens: float | np.ndarray, whole: bool = True) -> float | np.ndarray:
        """Concurrent sequences of ``context_tokens`` tokens whose KV fits: floor(blocks / blocks per
        sequence) on each attention-DP rank (a sequence's KV lives on one rank), times the ranks,
        with paged 16-token blocks (a partly filled last block still takes a block). ``whole``
        False: blocks / blocks per sequence unrounded, the mean number of sequences of that mean
        size a cache shared by sequences of varying sizes holds."""
        ctx = np.asarray(context_tokens, dtype=float)
        if not np.all(np.isfinite(ctx)) or np.any(ctx < 1):
            raise InputError("context_tokens", context_tokens, "numbers >= 1")
        ranks = self.attention_ranks
        blocks = np.floor(np.asarray(self.kv_capacity_tokens, dtype=float) / ranks / KV_BLOCK_TOKENS)
        per_seq = np.ceil(self.kv_tokens(ctx) / KV_BLOCK_TOKENS)
        per_rank = blocks / per_seq
        return plain(ranks * (np.floor(per_rank) if whole else per_rank))


def activation_workspace_bytes(dep: Deployment, max_batched_tokens: float | np.ndarray) -> np.ndarray:
    """Peak activation memory of one forward pass of ``max_batched_tokens`` tokens, per GPU.

    T x activation bytes (2, bf16) x (2 h [residual stream + normed input]
    + max(QKV width, 3 x MLP width) / TP)
    + min(T, 256) x V / TP x 4 bytes (fp32 logits of the sampled rows). The live set of a layer is
    the residual plus the widest intermediate: the gate/up output (2 I) and the activation (I) of
    the MLP, or Q, K and V; with MoE, I is the per-token routed width (top-k + shared) x I_moe.
    """
    arch, tp = dep.arch, int(dep.tp)
    t = np.asarray(max_batched_tokens, dtype=float)
    if arch.is_moe:
        width = (arch.experts_per_token + arch.num_shared_experts) * arch.moe_intermediate_size
        width = max(width, arch.intermediate_size if arch.num_dense_layers else 0)
    else:
        width = arch.intermediate_size
    qkv = (arch.num_heads + 2 * arch.num_kv_heads) * arch.head_dim
    widest = max(qkv, (3 if arch.gated_mlp else 2) * width) / tp
    per_token = (2 * arch.hidden_size + widest) * dep.activation_bytes
    logits = np.minimum(t, PROFILE_MAX_SEQS) * arch.vocab_size / tp * LOGIT_BYTES
    return t * per_token + logits


def _fit_layout(dep: Deployment, kv_tok: float) -> KVLayout:
    """The target model's KV layout (model.llm.attention.kv_layout) in units of ``kv_tok``, the
    per-token bytes of the target plus a speculative drafter's full-attention KV, if any."""
    layout = kv_layout(dep.arch, dep.kv_dtype_resolved, int(dep.tp))
    drafter = dep.drafter_kv_bytes_per_token_per_gpu
    if not drafter or layout.is_plain:
        return layout
    f = dep.kv_bytes_per_token_per_gpu / kv_tok  # the target's share of each token's bytes
    return KVLayout(
        kv_tok,
        (*(s * f for s in layout.shares), 1.0 - f),
        (*layout.caps, float("inf")),
        layout.state_tokens * f,
    )


def memory_fit(
    dep: Deployment,
    *,
    max_batched_tokens: float | np.ndarray = 8192,
    gpu_memory_utilization: float | np.ndarray = 0.9,
    reserve_bytes: float | None = None,
) -> MemoryFit:
    """Does ``dep`` fit, and how much KV cache is left?

    usable = utilisation x GPU memory; KV = usable - weights per GPU - workspace - reserve - EP
    all-to-all buffers; KV capacity (tokens per instance) = attention-DP ranks x KV per GPU / KV
    bytes per token per GPU, rounded down to 16-token blocks (each DP rank holds its own sequences'
    KV over its TP GPUs); a sequence holds ``MemoryFit.kv_tokens(context)`` of them (fewer than its
    context with windowed or linear-attention layers). Weights per GPU: ``Deployment.weight_bytes_per_gpu``
    (experts split over TP x DP, the rest over TP). Buffers:
    :func:`model.physics.expert_parallel.all_to_all_buffer_bytes`.
    ``reserve_bytes`` None -> RUNTIME_LIBRARY_BYTES + CUDA_GRAPH_POOL_BYTES.
    """
    mbt = np.asarray(max_batched_tokens, dtype=float)
    if not np.all(np.isfinite(mbt)) or np.any(mbt < 1):
        raise InputError("max_batched_tokens", max_batched_tokens, "numbers >= 1")
    util = np.asarray(gpu_memory_utilization, dtype=float)
    if not np.all(np.isfinite(util)) or np.any(util <= 0) or np.any(util > 1):
        raise InputError("gpu_memory_utilization", gpu_memory_utilization, "fractions in (0, 1]")
    reserve = RUNTIME_LIBRARY_BYTES + CUDA_GRAPH_POOL_BYTES if reserve_bytes is None else float(reserve_bytes)
    if not (np.isfinite(reserve) and reserve >= 0):
        raise InputError("reserve_bytes", reserve_bytes, "bytes >= 0")
    mbt, util = np.broadcast_arrays(mbt, util)
    mem = dep.gpu.memory_bytes
    usable = util * mem
    weights = dep.weight_bytes_per_gpu
    workspace = activation_workspace_bytes(dep, mbt)
    arch = dep.arch
    buffers = (
        all_to_all_buffer_bytes(expert_width(arch), dep.physical_experts, dep.ep) if arch.is_moe else 0.0
    )
    left = usable - weights - workspace - reserve - buffers
    kv_tok = dep.kv_bytes_per_token_per_gpu + dep.drafter_kv_bytes_per_token_per_gpu
    layout = _fit_layout(dep, kv_tok)
    capacity = dep.dp * np.floor(np.maximum(left, 0.0) / kv_tok / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS
    fits = capacity >= KV_BLOCK_TOKENS

    u0, w0, l0, c0 = (
        float(usable.flat[0]),
        float(workspace.flat[0]),
        float(left.flat[0]),
        float(capacity.flat[0]),
    )
    where = f"{dep.n_gpus} x {dep.gpu.name}" if dep.n_gpus > 1 else f"one {dep.gpu.name}"
    if weights > u0:
        reason = (
            f"needs {format_bytes(weights)} of weights per GPU, has {format_bytes(u0)} usable "
            f"({float(util.flat[0]):.2f} x {format_bytes(mem)}) on {where}"
        )
    elif not bool(fits.flat[0]):
        rest = reserve + buffers
        reason = (
            f"needs {format_bytes(weights + w0 + rest)} per GPU (weights {format_bytes(weights)} + "
            f"workspace {format_bytes(w0)} + reserve {format_bytes(rest)}), has {format_bytes(u0)} "
            f"usable on {where}; no room for KV"
        )
    else:
        reason = (
            f"fits on {where}: weights {format_bytes(weights)} + workspace {format_bytes(w0)} + "
            f"reserve {format_bytes(reserve + buffers)} "
            f"per GPU, {format_bytes(l0)} left for KV = {c0:,.0f} tokens"
        )
    if fits.size > 1 and not (fits.all() or not fits.any()):
        reason += f" (fits in {int(fits.sum())} of {fits.size} settings)"
    result = MemoryFit(
        fits=fits,
        weight_bytes_per_gpu=weights,
        workspace_bytes_per_gpu=workspace,
        reserve_bytes_per_gpu=reserve,
        usable_bytes_per_gpu=usable,
        kv_bytes_available_per_gpu=np.maximum(left, 0.0),
        kv_bytes_per_token_per_gpu=kv_tok,
        kv_capacity_tokens=capacity,
        gpu_memory_bytes=mem,
        n_gpus=dep.n_gpus,
        reason=reason,
        kv_layout=None if layout.is_plain else layout,
        comm_buffer_bytes_per_gpu=buffers,
        attention_ranks=dep.dp,
    )
    return plain_fields(result)  # plain floats / bool for scalar inputs, arrays for array inputs
