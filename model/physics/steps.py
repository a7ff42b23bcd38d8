"""Roofline cost of one engine step on one model instance: a prefill, a decode step and a
chunked-prefill (mixed) iteration.

One shared roofline (``_step``) serves every phase; the public functions only say how many tokens a
step processes, how many keys their attention reads and how much KV it reads and writes.

Per-step time (Williams, Waterman & Patterson 2009, "Roofline", CACM 52(4)):

    time = max(compute_s, memory_s) + comm_s + overhead_s
    overhead_s = engine step time + per-sequence cost + per-kernel floor and eager launches
                 (:func:`overhead_s`, :mod:`model.hardware.overheads`)
    compute_s = sum over weight components of FLOPs per GPU / (peak of the component's format x MFU)
                + attention FLOPs per GPU / (16-bit peak x MFU)
    memory_s  = (bytes per GPU - decode KV reads) / (HBM bandwidth x MBU)
                + decode KV reads incl. a fixed C tokens per sequence / (HBM bandwidth x eta_kv)
                (DECODE_KV_STREAM_EFFICIENCY, DECODE_ATTENTION_FIXED_TOKENS of model.physics.deployment)
    compute_s also carries llama.cpp's FP16 weight copy when gemm_accumulate is "fp16" (fp16_copy_s)

Bytes per element and the peak each component's GEMMs run at come from the format table
(:mod:`model.hardware.formats`) through the Deployment's precision.

Conventions (docs/model.md has the full derivations):
- "Per GPU" means one tensor-parallel rank: FLOPs and bytes are divided by TP (Megatron-LM,
  Shoeybi et al. 2019, splits every matmul and the attention heads across the ranks).
- With pipeline parallelism the batch is split into m = min(batch, PP) micro-batches (vLLM
  virtual engines, GPipe, Huang et al. 2019); the StepCost describes the critical path: one
  micro-batch of ceil(batch / m) sequences passing through all PP stages, which is the time
  between two steps of the same sequence. ``pp_bubble_fraction`` = 1 - m / PP of stage time idles.
- Activations travel in the precision's activation format (16-bit) whatever the weight format.
- Tensor-parallel all-reduces are not overlapped with compute (vLLM and TensorRT-LLM default).
- A decode step runs ``verify_width`` tokens per sequence (:mod:`model.physics.decode_tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from model.errors import InputError
from model.hardware.collective_algorithms import allreduce_s
from model.hardware.collectives import transfer_time_s
from model.hardware.formats import bytes_per_element
from model.hardware.overheads import kernels_per_step
from model.hardware.parallelism import Parallelism
from model.llm.arch import expert_width, lm_head_params
from model.physics import decode_tokens
from model.physics.attention import AttentionWork, decode_work, prefill_work
from model.physics.deployment import FP16_COPY_ABOVE_TOKENS, LOGIT_BYTES, Deployment
from model.physics.expert_parallel import dp_gather_time_s, load_imbalance, moe_comm_time_s
from model.physics.operators import (
    activation_elements_per_token,
    linear_flops_per_token,
    weight_params_read,
)
from model.physics.speculation import draft_arch

ArrayLike = float | int | np.ndarray
FP16_BYTES = bytes_per_element("fp16")  # one element of llama.cpp's dequantised weight copy


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
    draft_s: np.ndarray | float = 0.0  # speculative drafting inside time_s (model.physics.speculation)

    @property
    def arithmetic_intensity(self) -> np.ndarray:
        """FLOPs per byte moved (the roofline's x axis)."""
        return self.flops / np.maximum(self.bytes_moved, 1.0)


def _step(
    dep: Deployment,
    *,
    tokens: np.ndarray,
    logits_tokens: np.ndarray,
    prompt_tokens: np.ndarray,
    attn: AttentionWork,
    seqs: np.ndarray,
    busy: np.ndarray | float = 1.0,
) -> StepCost:
    """Roofline of one step (one micro-batch through every stage), inputs already per micro-batch.

    tokens: tokens through the linear layers; logits_tokens: tokens that need the LM head;
    prompt_tokens: prompt tokens in the step (they make it launch kernels eagerly); seqs: sequences
    in the step (their per-sequence engine cost, on the busiest attention-DP rank); attn: attention
    FLOPs and KV/state bytes per layer kind (:mod:`model.physics.attention`, all layers, per TP rank
    for the bytes: the critical path passes every PP stage); busy: share of the step's sequences
    (their tokens, attention and KV) on the busiest attention-DP rank, which the step waits for (1
    without attention-DP; :func:`_busy_share`).
    """
    arch, tp, g = dep.arch, int(dep.tp), int(dep.stage_gpus)
    act_b = dep.activation_bytes
    # Work per GPU (model.physics.expert_parallel): attention, dense MLPs, shared experts and the LM
    # head run on each attention-DP rank for its own sequences (the busiest rank's share ``busy``),
    # split over its TP GPUs; the routed experts serve all the step's tokens split over the stage's
    # G = TP x DP GPUs, the hottest GPU carrying load_imbalance(EP) times the mean. TP-only: all / TP.
    busy = np.asarray(busy, dtype=float)
    share = {"attention": busy / tp, "mlp": busy / tp, "experts": load_imbalance(dep.ep) / g}

    # FLOPs per GPU (linear layers per weight component; the LM head is in "mlp")
    attn_flops = attn.flops
    per_token = linear_flops_per_token(arch)
    parts = dep.weight_components  # components the architecture has
    linear = {c: per_token[c] * tokens for c in parts}
    linear["mlp"] = linear["mlp"] + 2.0 * lm_head_params(arch) * logits_tokens
    linear = {c: linear[c] * share[c] for c in parts}  # per GPU
    attn_flops = attn_flops * busy / tp
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
        + logits_tokens * busy * arch.vocab_size / tp * LOGIT_BYTES
    )
    total_bytes = w_bytes + kv_read + kv_write + act

    # Linear layers run at their format's tensor-core peak with the token-dependent efficiency
    # MFU(M) = MFU x M / (M + T_half) per GEMM of M rows (``gemm_mfu_at``). Summed over the GEMMs a
    # step streams, the (M + T_half) / M stretch adds T_half x 2 x weights / (peak x MFU) =
    # GEMM_EXPOSED_WEIGHT_FRACTION x weight bytes / (bandwidth x MBU) to the ideal FLOP time, with the
    # same weight bytes as the memory term (MoE: the touched experts, i.e. M = T k / E_touched rows
    # per expert; LM head: M = logits rows). Attention (FlashAttention) runs in 16-bit at the MFU.
    stream_bw = dep.gpu.memory_bandwidth_bytes_per_s * dep.mbu
    compute_s = (
        sum(linear[c] / dep.gemm_flops_per_s(c) for c in parts)
        + dep.exposed_weight_fraction * w_bytes / stream_bw
        + attn_flops / (dep.attention_peak_flops_per_s * dep.mfu)
        + fp16_copy_s(dep, {c: params[c] * w_share[c] for c in parts}, tokens)
    )
    # Decode attention streams its cached KV at its own efficiency, plus a fixed cost per sequence
    # of DECODE_ATTENTION_FIXED_TOKENS tokens' worth of KV (model.physics.deployment).
    decode_kv = attn.decode_kv_read_bytes * busy
    decode_kv_s = (decode_kv + dep.attention_fixed_tokens * attn.decode_kv_token_bytes * busy) / (
        dep.decode_kv_bandwidth
    )
    memory_s = (total_bytes - decode_kv) / stream_bw + decode_kv_s
    comm = _comm_s(dep, tokens, busy)

    overhead = overhead_s(dep, prompt_tokens, seqs * busy)
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


def overhead_s(dep: Deployment, prompt_tokens: np.ndarray, seqs: ArrayLike) -> np.ndarray:
    """Engine time of one step beyond the roofline (:mod:`model.hardware.overheads`):

        step_s + per_sequence_s x seqs + kernels x (kernel_s + launch_s if eager)

    kernels = :func:`~model.hardware.overheads.kernels_per_step`; a step runs eagerly (each kernel
    launched from the host) when it carries prompt tokens, or always when the engine does not capture
    decode steps in CUDA graphs (``decode_graphs`` false, e.g. vLLM with ``--enforce-eager``).
    """
    o, arch = dep.engine_overheads, dep.arch
    kernels = kernels_per_step(arch.num_layers, arch.num_moe_layers)
    eager = (np.asarray(prompt_tokens) > 0) | (not o.decode_graphs)
    per_kernel = o.kernel_s + np.where(eager, o.launch_s, 0.0)
    return o.step_s + o.per_sequence_s * np.asarray(seqs, dtype=float) + kernels * per_kernel


def _comm_s(dep: Deployment, tokens: np.ndarray, busy: np.ndarray) -> np.ndarray:
    """Communication of one step along the critical path (not overlapped with compute).

    TP-only: ALLREDUCES_PER_LAYER all-reduces of the hidden states per layer over TP (Megatron-LM),
    each by the algorithm the engine picks for its size and the link's topology
    (:func:`model.hardware.collective_algorithms.allreduce_s`: one-shot, two-shot, NVLS, ring, tree).
    With EP or attention-DP the MoE layers change: each layer still all-reduces its
    attention output over TP (of the busiest rank's tokens), dense layers their MLP output too,
    and each MoE layer runs the EP dispatch + combine all-to-all instead of the MLP all-reduce
    (EP > 1, shared experts' partial sums reduced with the combine) or, with EP = 1 and DP > 1, an
    all-gather + reduce-scatter over the stage (model.physics.expert_parallel). PP: a hop per stage
    boundary. Groups that leave the node use the scale-out network (``Deployment.group_link``).
    """
    arch, tp, dp = dep.arch, int(dep.tp), int(dep.dp)
    message = tokens * arch.hidden_size * dep.activation_bytes
    rank_message = message * busy
    comm = np.zeros_like(tokens, dtype=float)
    moe_changed = arch.is_moe and (dep.ep > 1 or dp > 1)
    mlp_allreduce_layers = arch.num_dense_layers if moe_changed else arch.num_layers
    if tp > 1:
        link = dep.tp_link_resolved
        one = allreduce_s(rank_message, tp, link)
        comm = comm + (arch.num_layers + mlp_allreduce_layers) * one
    if moe_changed and dep.ep > 1:
        # the hottest GPU: the larger of what it sends (its rank's tokens over TP) and what it
        # receives (the imbalanced mean of all tokens' expert copies)
        sent = np.maximum(tokens * busy / tp, load_imbalance(dep.ep) * tokens / dep.stage_gpus)
        comm = comm + moe_comm_time_s(
            sent,
            hidden_size=expert_width(arch),
            experts_per_token=arch.experts_per_token,
            moe_layers=arch.num_moe_layers,
            parallel_ep=dep.ep,
            local_gpus=dep.domain_gpus,
            intra=dep.intra_link,
            inter=dep.scale_out_link_resolved,
        )
    elif moe_changed:
        link = dep.group_link(dep.stage_gpus)
        comm = comm + dp_gather_time_s(message, arch.num_moe_layers, dep.stage_gpus, link)
    if dep.pp > 1:
        comm = comm + (dep.pp - 1) * transfer_time_s(rank_message, dep.pp_link_resolved)
    return comm


def gemm_mfu_at(dep: Deployment, tokens: ArrayLike) -> np.ndarray:
    """Achieved MFU of a dense linear layer (GEMM) with ``tokens`` rows: MFU_gemm x T / (T + T_half).

    T_half = GEMM_EXPOSED_WEIGHT_FRACTION x T_ridge (``Deployment.gemm_half_efficiency_tokens``).
    Small-M GEMMs lose efficiency to weight loads not hidden behind the math, tile and wave
    quantisation (NVIDIA Matrix Multiplication Background User's Guide, 2023, ch. 2-3); Sarathi-Serve
    (Agrawal et al., OSDI 2024) measures the resulting prefill slowdown at small chunks. ``_step``
    applies exactly this per GEMM (in its equivalent additive form); this function exposes the curve.
    """
    t = check_numbers("tokens", tokens, 0)
    return dep.gemm_mfu * t / (t + dep.gemm_half_efficiency_tokens)


def check_numbers(name: str, value: ArrayLike, minimum: float) -> np.ndarray:
    """``value`` as a float array; a clear error naming ``name`` unless all finite and >= minimum."""
    arr = np.asarray(value, dtype=float) if not isinstance(value, str) else None
    if arr is None or not np.all(np.isfinite(arr)) or np.any(arr < minimum):
        raise InputError(name, value, f"numbers >= {minimum:g}")
    return arr


def _busy_share(dep: Deployment, seqs: np.ndarray) -> np.ndarray | float:
    """Share of ``seqs`` sequences on the busiest attention-DP rank: ceil(seqs / DP) / seqs (each
    sequence lives on one rank; SGLang DP attention balances them); 1 without attention-DP."""
    if dep.dp == 1:
        return 1.0
    s = np.maximum(np.asarray(seqs, dtype=float), 1.0)
    return np.ceil(s / dep.dp - 1e-12) / s


def _mixed_busy_share(
    dep: Deployment, chunk: np.ndarray, decode_tokens: np.ndarray, decodes: np.ndarray
) -> np.ndarray | float:
    """Busiest rank's share of a mixed step's tokens: the rank running the prompt chunk also runs
    its ceil(decodes / DP) of the decodes: (chunk + ceil(decodes / DP) w) / (chunk + decodes w)."""
    if dep.dp == 1:
        return 1.0
    w = np.where(decodes > 0, decode_tokens / np.maximum(decodes, 1.0), 0.0)
    rank = chunk + np.ceil(decodes / dep.dp - 1e-12) * w
    return rank / np.maximum(chunk + decode_tokens, 1.0)


def _microbatches(dep: Deployment, seqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(micro-batches m = min(seqs, PP), sequences per micro-batch ceil(seqs / m))."""
    m = np.maximum(np.minimum(seqs, dep.pp), 1.0)
    return m, np.ceil(seqs / m - 1e-12)


def _with_bubble(cost: StepCost, dep: Deployment, m: np.ndarray) -> StepCost:
    return StepCost(**{**cost.__dict__, "pp_bubble_fraction": 1.0 - m / dep.pp})


# ----------------------------------------------------------------------------------------------
# Public step costs.


def prefill_cost(
    dep: Deployment, prompt_tokens: ArrayLike, *, cached_tokens: ArrayLike = 0, batch: ArrayLike = 1
) -> StepCost:
    """One prefill step of ``batch`` prompts, each ``prompt_tokens`` new tokens after ``cached_tokens``
    already-cached prefix tokens (prefix caching). Vectorised over all three.

    FLOPs: 2 N_active T (linear layers, T = batch x n) + 2 n_h L (d_qk + d_v) x batch x (n c +
    n (n + 1) / 2) (causal attention: new token i attends to c + i keys; FlashAttention skips the
    masked half, Dao 2023; windowed, sparse and linear layers per :mod:`model.physics.attention`)
    + 2 V h per prompt (only the last token needs logits).
    Bytes: weights once; cached prefix KV read once; new KV written once and read by attention.
    """
    n = check_numbers("prompt_tokens", prompt_tokens, 1)
    c = check_numbers("cached_tokens", cached_tokens, 0)
    b = check_numbers("batch", batch, 1)
    n, c, b = np.broadcast_arrays(n, c, b)
    m, b_mb = _microbatches(dep, b)
    cost = _step(
        dep,
        tokens=b_mb * n,
        logits_tokens=b_mb,
        prompt_tokens=b_mb * n,
        attn=prefill_work(dep.arch, dep.kv_dtype_resolved, int(dep.tp), n, c, b_mb),
        seqs=b_mb,
        busy=_busy_share(dep, b_mb),
    )
    return _with_bubble(cost, dep, m)


def decode_step_cost(dep: Deployment, batch: ArrayLike, context_tokens: ArrayLike) -> StepCost:
    """One decode iteration: ``batch`` sequences each run w tokens (the verify width of
    :func:`~model.physics.decode_tokens.tokens_per_decode_step`, 1 without speculation) attending to
    ``context_tokens`` keys (KV tokens read, including the token's own). Vectorised.

    FLOPs: 2 N_active B w + 2 V h B w + 2 n_h L (d_qk + d_v) B w ctx.
    Bytes: weights once (MoE: expected distinct experts at B w tokens), KV read B x ctx x KV/token,
    KV written B w x KV/token (Pope et al. 2022, sec. 2; Kwon et al. 2023, "PagedAttention").
    """
    b = check_numbers("batch", batch, 1)
    ctx = check_numbers("context_tokens", context_tokens, 1)
    b, ctx = np.broadcast_arrays(b, ctx)
    m, b_mb = _microbatches(dep, b)
    w = decode_tokens.tokens_per_decode_step(dep).verify_width
    cost = _step(
        dep,
        tokens=b_mb * w,
        logits_tokens=b_mb * w,
        prompt_tokens=np.zeros_like(b),
        attn=decode_work(dep.arch, dep.kv_dtype_resolved, int(dep.tp), b_mb, ctx, w),
        seqs=b_mb,
        busy=_busy_share(dep, b_mb),
    )
    return _with_draft(_with_bubble(cost, dep, m), dep, b, ctx)


def _with_draft(cost: StepCost, dep: Deployment, batch: np.ndarray, context: np.ndarray) -> StepCost:
    """``cost`` plus the speculative drafter's passes for ``batch`` decoding sequences
    (:func:`model.physics.speculation.draft_step_s`; nothing without speculation)."""
    if dep.speculation is None:
        return cost
    draft = draft_step_s(dep, batch, context)
    return StepCost(**{**cost.__dict__, "time_s": cost.time_s + draft, "draft_s": draft})


def mixed_step_unchecked(
    dep: Deployment, chunk: np.ndarray, prefix: np.ndarray, db: np.ndarray, dctx: np.ndarray
) -> StepCost:
    """:func:`mixed_step_cost` on already-checked, broadcast arrays (no PP bubble field set); the
    decodes' speculative drafting is added (zero for a chunk-only step)."""
    has_chunk = (chunk > 0).astype(float)
    w = decode_tokens.tokens_per_decode_step(dep).verify_width
    arch, kv, tp = dep.arch, dep.kv_dtype_resolved, int(dep.tp)
    cost = _step(
        dep,
        tokens=chunk + db * w,
        logits_tokens=db * w + has_chunk,
        prompt_tokens=chunk,
        attn=prefill_work(arch, kv, tp, chunk, prefix, has_chunk) + decode_work(arch, kv, tp, db, dctx, w),
        seqs=db + has_chunk,
        busy=_mixed_busy_share(dep, chunk, db * w, db),
    )
    return _with_draft(cost, dep, db, np.maximum(dctx, 1.0))


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
    chunk = check_numbers("chunk_tokens", chunk_tokens, 0)
    prefix = check_numbers("chunk_prefix_tokens", chunk_prefix_tokens, 0)
    db = check_numbers("decode_batch", decode_batch, 0)
    dctx = check_numbers("decode_context_tokens", decode_context_tokens, 0)
    chunk, prefix, db, dctx = np.broadcast_arrays(chunk, prefix, db, dctx)
    if np.any(chunk + db <= 0):
        raise InputError("chunk_tokens", chunk_tokens, "chunk_tokens + decode_batch >= 1 (an empty step)")
    if np.any((db > 0) & (dctx < 1)):
        raise InputError("decode_context_tokens", decode_context_tokens, ">= 1 when decode_batch > 0")
    cost = mixed_step_unchecked(dep, chunk, prefix, db, dctx)
    return _with_bubble(cost, dep, np.ones_like(chunk))


def draft_step_s(dep: Deployment, batch: np.ndarray, context_tokens: np.ndarray) -> np.ndarray:
    """Drafting time of one speculative step: k one-token decode passes of the drafter at ``batch``
    sequences of ``context_tokens`` (zero without speculation or for ngram). The drafter runs on the
    instance's GPUs with its layout and formats, each pass with its own step overhead."""
    spec = dep.speculation
    b = np.asarray(batch, dtype=float)
    if spec is None:
        return np.zeros(np.broadcast(b, np.asarray(context_tokens)).shape)
    arch = draft_arch(spec, dep.arch)
    if arch is None:
        return np.zeros(np.broadcast(b, np.asarray(context_tokens)).shape)
    drafter = replace(
        dep,
        arch=arch,
        parallel=Parallelism(tp=dep.tp),  # drafting runs on one stage's TP group
        speculation=None,
        precision=None if spec.method == "draft" else dep.precision,
    )
    one = decode_step_cost(drafter, np.maximum(b, 1.0), context_tokens).time_s
    return np.where(b > 0, spec.tokens * one, 0.0)
