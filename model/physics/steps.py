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
    compute_s also carries llama.cpp's FP16 weight copy when gemm_accumulate is "fp16"
                (model.physics.step_work.fp16_copy_s)
    and, with attention_kernel "materialised" (no FlashAttention), the score-matrix passes and
                masked FLOPs (model.physics.materialised_attention)

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
- Tensor-parallel all-reduces are not overlapped with compute (vLLM and TensorRT-LLM default); the
  EP all-to-all is, with two-micro-batch overlap (model.physics.expert_parallel.overlapped_layer_s).
- A decode step runs ``verify_width`` tokens per sequence (:mod:`model.physics.decode_tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from model.errors import InputError
from model.hardware.collective_algorithms import allreduce_s
from model.hardware.collectives import transfer_time_s
from model.hardware.overheads import kernels_per_step
from model.hardware.parallelism import Parallelism
from model.physics import decode_tokens
from model.physics.attention import AttentionWork, decode_work, prefill_work
from model.physics.deployment import Deployment
from model.physics.expert_parallel import (
    NORMAL_KERNEL_SM_SHARE,
    EPGroup,
    dp_gather_time_s,
    grouped_gemm_rows,
    load_imbalance,
    moe_comm_time_s,
    moe_dispatch_combine_s,
    overlapped_layer_s,
)
from model.physics.speculation import draft_arch
from model.physics.step_work import StepWork, step_work

ArrayLike = float | int | np.ndarray


@dataclass(frozen=True)
class StepCost:
    """Cost of one engine step, per GPU along the critical path; every field broadcasts over the inputs.

    time_s = max(compute_s, memory_s) + comm_s + overhead_s, except with two-micro-batch overlap
    (``Deployment.overlaps_micro_batches``, EP > 1), where the all-to-all part of comm_s runs beside
    the compute (:func:`_overlapped_s`) and time_s is less than that sum. ``bound`` is "compute" where
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
    prompt_tokens: prompt tokens in the step (they make it launch kernels eagerly, and choose
    DeepEP's normal all-to-all kernels); seqs: sequences in the step (their per-sequence engine
    cost, on the busiest attention-DP rank); attn: attention FLOPs and KV/state bytes per layer
    kind (:mod:`model.physics.attention`, all layers, per TP rank for the bytes: the critical path
    passes every PP stage); busy: share of the step's sequences (their tokens, attention and KV) on
    the busiest attention-DP rank, which the step waits for (1 without attention-DP; :func:`_busy_share`).

    With two-micro-batch overlap (``Deployment.overlaps_micro_batches``, EP > 1, >= 2 sequences) the
    step is two micro-batches of half the tokens whose all-to-alls run beside the other's work
    (:func:`_overlapped_s`); compute_s / memory_s still report the whole step in one piece.
    """
    w = step_work(dep, tokens, logits_tokens, attn, busy)
    normal = np.asarray(prompt_tokens) > 0  # SGLang --deepep-mode auto: normal kernels with prefill
    other, a2a = _comm_s(dep, tokens, busy, normal)
    overhead = overhead_s(dep, prompt_tokens, seqs * busy)
    time_s = np.maximum(w.compute_s, w.memory_s) + other + a2a + overhead
    if dep.overlaps_micro_batches and dep.ep > 1:
        half = step_work(dep, tokens / 2, logits_tokens / 2, attn.scaled(0.5), busy)
        overlapped = _overlapped_s(dep, half, tokens, busy, normal) + other + overhead
        time_s = np.where(np.asarray(seqs) >= 2, overlapped, time_s)
    return StepCost(
        time_s=time_s,
        compute_s=w.compute_s,
        memory_s=w.memory_s,
        comm_s=other + a2a,
        overhead_s=overhead,
        flops=w.flops,
        bytes_moved=w.total_bytes,
        weight_bytes=w.weight_bytes,
        kv_read_bytes=w.kv_read_bytes,
        kv_write_bytes=w.kv_write_bytes,
        activation_bytes=w.activation_bytes,
        bound=np.where(w.compute_s >= w.memory_s, "compute", "memory"),
        tokens=tokens,
        pp_bubble_fraction=np.zeros_like(tokens, dtype=float),
    )


def _overlapped_s(
    dep: Deployment, half: StepWork, tokens: np.ndarray, busy: np.ndarray | float, normal: np.ndarray
) -> np.ndarray:
    """Two overlapped micro-batches of ``half`` the work each: the dense layers' share of the
    non-expert work runs alone, then per MoE layer
    :func:`~model.physics.expert_parallel.overlapped_layer_s` of one micro-batch's per-layer
    attention side a, routed experts e (each its own roofline, max(compute, memory); compute slowed
    by 1 / (1 - NORMAL_KERNEL_SM_SHARE) beside the normal kernels, which hold those SMs), dispatch
    d and combine c (all-to-alls at half the tokens)."""
    arch = dep.arch
    layers = arch.num_moe_layers
    stretch = np.where(normal, 1.0 / (1.0 - NORMAL_KERNEL_SM_SHARE), 1.0)
    experts = np.maximum(half.expert_compute_s * stretch, half.expert_memory_s)
    rest = np.maximum(
        (half.compute_s - half.expert_compute_s) * stretch, half.memory_s - half.expert_memory_s
    )
    sent = np.maximum(tokens / 2 * busy / dep.tp, load_imbalance(dep.ep) * tokens / 2 / dep.stage_gpus)
    group = EPGroup(dep.ep, dep.domain_gpus, dep.intra_link, dep.scale_out_link_resolved)
    dispatch, combine = moe_dispatch_combine_s(sent, arch, group, normal=normal)
    moe_share = layers / arch.num_layers  # the attention side of the MoE layers
    per_layer = overlapped_layer_s(
        rest * moe_share / layers, experts / layers, dispatch / layers, combine / layers
    )
    return 2.0 * rest * (1.0 - moe_share) + layers * per_layer


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


def _comm_s(
    dep: Deployment, tokens: np.ndarray, busy: np.ndarray, normal: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Communication of one step along the critical path, as (other collectives, EP all-to-all).

    TP-only: ALLREDUCES_PER_LAYER all-reduces of the hidden states per layer over TP (Megatron-LM),
    each by the algorithm the engine picks for its size and the link's topology
    (:func:`model.hardware.collective_algorithms.allreduce_s`: one-shot, two-shot, NVLS, ring, tree).
    With EP or attention-DP the MoE layers change: each layer still all-reduces its
    attention output over TP (of the busiest rank's tokens), dense layers their MLP output too,
    and each MoE layer runs the EP dispatch + combine all-to-all instead of the MLP all-reduce
    (EP > 1, shared experts' partial sums reduced with the combine; DeepEP's normal kernels where
    ``normal``, else its low-latency ones) or, with EP = 1 and DP > 1, an all-gather +
    reduce-scatter over the stage (model.physics.expert_parallel). PP: a hop per stage boundary.
    Groups that leave the node use the scale-out network (``Deployment.group_link``). Only the
    all-to-all overlaps compute under two-micro-batch overlap.
    """
    arch, tp, dp = dep.arch, int(dep.tp), int(dep.dp)
    message = tokens * arch.hidden_size * dep.activation_bytes
    rank_message = message * busy
    comm = np.zeros_like(tokens, dtype=float)
    a2a = np.zeros_like(tokens, dtype=float)
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
        group = EPGroup(dep.ep, dep.domain_gpus, dep.intra_link, dep.scale_out_link_resolved)
        a2a = a2a + moe_comm_time_s(sent, arch, group, normal=normal)
    elif moe_changed:
        link = dep.group_link(dep.stage_gpus)
        comm = comm + dp_gather_time_s(message, arch.num_moe_layers, dep.stage_gpus, link)
    if dep.pp > 1:
        comm = comm + (dep.pp - 1) * transfer_time_s(rank_message, dep.pp_link_resolved)
    return comm, a2a


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


def grouped_gemm_mfu_at(dep: Deployment, rows: ArrayLike) -> np.ndarray:
    """Achieved MFU of a routed expert's grouped GEMM that receives ``rows`` tokens on average (useful
    FLOPs over the expert format's peak): MFU_experts x m / (padded(m) + T_half), padded =
    :func:`~model.physics.expert_parallel.grouped_gemm_rows` (whole 128-row tiles), T_half as in
    :func:`gemm_mfu_at` with the experts' format. ``_step`` charges exactly this through the touched
    experts' weights (m = T k / E_touched, ``rows_per_expert``). DeepGEMM's published grouped FP8
    GEMMs on H800 (README, 2025-03-25, DeepSeek-V3 shapes) at 256 / 512 / 1024 rows per group reach
    0.61-0.69 / 0.75-0.77 / 0.76-0.92 of their 4096-8192-row rate (tests/test_moe_kernels.py)."""
    m = check_numbers("rows", rows, 0)
    rate = dep.gemm_flops_per_s("experts")
    peak = dict(dep.gpu.peak_flops_per_s)[dep.resolved_precision.format("experts").math]
    stream_bw = dep.gpu.memory_bandwidth_bytes_per_s * dep.mbu
    ridge = rate * dep.weight_bytes_per_element("experts") / (2.0 * stream_bw)
    return rate / peak * m / (grouped_gemm_rows(m) + dep.exposed_weight_fraction * ridge)


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
