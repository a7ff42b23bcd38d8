"""Expert parallelism (EP) and attention data parallelism (DP-attention) inside one instance: how
the work of a step divides over the GPUs, the MoE token dispatch / combine all-to-all, the expert
load imbalance, and the all-to-all communication buffers.

Layout (model.hardware.parallelism): an instance stage has G = tp x dp_attention GPUs. Attention,
dense MLPs, shared experts, routers and the LM head are replicated on each of the dp_attention ranks
and split over the rank's tp GPUs; each rank runs 1 / dp_attention of the step's sequences and holds
their KV. The routed experts are split over all G GPUs (EP groups of ``ep`` GPUs, each expert
sharded G / ep ways when ep < G). DeepSeek-V3 technical report (arXiv 2412.19437), sec. 3.4
"Inference and deployment": attention TP4 + SP with DP8 and MoE EP32 for prefill, attention
TP4 + SP with DP80 and MoE EP320 for decode; SGLang ``--enable-dp-attention`` and ``--moe-dense-tp-size``.

Communication per MoE layer (ep > 1): a dispatch all-to-all sends each token's hidden state to its
top-k experts' GPUs and a combine all-to-all returns the k expert outputs (GShard, Lepikhin et al.
2021, sec. 2.2). Without EP but with dp_attention > 1, the ranks all-gather tokens before the MoE
layer and reduce-scatter after it (SGLang DP attention), priced as one all-reduce over G GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.hardware.collectives import all_to_all_time_s, allreduce_time_s
from model.hardware.formats import bytes_per_element
from model.hardware.links import Link
from model.llm.arch import LLMArch, expert_width
from model.llm.moe import expected_experts_touched

# Bytes per hidden element of a dispatched token: FP8 (e4m3) values plus one fp32 scale per 128
# channels. DeepEP dispatches in FP8 with per-128-channel scales (deepseek-ai/DeepEP docs/legacy.md,
# "FP8 dispatching and BF16 combining"; csrc/config.hpp LowLatencyLayout: message = hidden + hidden /
# 128 x 4 bytes); DeepSeek-V3 report sec. 3.3 (1 x 128 activation tiles).
DISPATCH_BYTES_PER_ELEMENT = 1.0 + 4.0 / 128.0
# Bytes per hidden element of a combined expert output: BF16 (DeepEP, same sources).
COMBINE_BYTES_PER_ELEMENT = bytes_per_element("bf16")
# Max / mean routed-token load over the GPUs of an EP group with expert load balancing (EPLB,
# redundant experts placed by observed load). Measured: SGLang's DeepSeek-V3 prefill on 4 x 8 H100
# (EP32, 16,384 tokens per GPU, 4,096-token prompts) ran 50,302 input tokens/s per node with EPLB
# placed from the real routing statistics and 59,337 with simulated perfect balance (LMSYS blog
# "Deploying DeepSeek with PD Disaggregation and Large-scale Expert Parallelism on 96 H100 GPUs",
# 2025-05-05, "Overall Throughput" table; lm-sys/lm-sys.github.io blog/2025-05-05-large-scale-ep.md):
# the residual imbalance stretched the whole step by 59,337 / 50,302 = 1.18. Only the MoE part of a
# step (routed experts and all-to-all) waits for the hottest GPU, so its own factor is at least
# 1.18; the same blog's simulated GPU balancedness (mean / max tokens per GPU) with EPLB is ~0.8 at
# these scales (1 / 0.8 = 1.25), and without EPLB its measured speed-ups of 1.49x (prefill) and
# 2.54x (decode) put max / mean at 1.5-2.5. 1.2 is taken: the measured 1.18 rounded, within the
# simulated range. It multiplies the routed experts' FLOPs and the all-to-all bytes of the hottest
# GPU when ep > 1 (tests/test_validation_table.py re-derives the 1.18).
EP_LOAD_IMBALANCE = 1.2
# Largest decode batch per GPU the low-latency all-to-all buffers are sized for: SGLang's default
# SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK = 128 (DeepEP recommends < 256, docs/legacy.md).
LL_MAX_DISPATCH_TOKENS_PER_RANK = 128
# Copies of the low-latency send and receive areas (odd/even double buffering, DeepEP
# csrc/config.hpp LowLatencyLayout: 2 send + 2 receive buffers).
LL_BUFFER_COPIES = 4
# Share of the GPU's SMs DeepEP's normal (high-throughput) kernels occupy while they run beside the
# GEMMs of the other micro-batch: Buffer.num_sms = 20 (deepseek-ai/DeepEP deep_ep/buffers/legacy.py
# default; DeepSeek-V3 report sec. 3.2.2: "only 20 SMs are sufficient to fully utilize the bandwidths
# of IB and NVLink") of an H800's 132 SMs (NVIDIA Hopper architecture whitepaper: H100 SXM5 132 SMs).
# The low-latency kernels' receive hook occupies no SM during the overlap (DeepEP docs/legacy.md,
# "hook-based communication-computation overlapping method that does not occupy any SM").
NORMAL_KERNEL_SM_SHARE = 20.0 / 132.0
# Rows of one tile of a grouped (MoE) GEMM: each expert's rows are computed in whole tiles of this
# many rows. DeepGEMM's grouped FP8 kernels use BLOCK_M = 128 (contiguous layout: each expert's
# segment aligned to get_m_alignment_for_contiguous_layout() = 128; masked layout: block_m 128 for
# more than 64 rows, deep_gemm/jit_kernels/gemm.py get_best_configs, 2025-03 release).
GROUPED_GEMM_BLOCK_M = 128


def dispatch_bytes_per_token(hidden_size: int, experts_per_token: int) -> float:
    """Bytes one token sends in the dispatch: h x k x DISPATCH_BYTES_PER_ELEMENT (one copy per
    routed expert, as DeepEP's low-latency kernels send; DeepSeek-V3: 7168 x 8 x 1.03125 = 59,136 B)."""
    return float(hidden_size * experts_per_token * DISPATCH_BYTES_PER_ELEMENT)


def combine_bytes_per_token(hidden_size: int, experts_per_token: int) -> float:
    """Bytes returned per token in the combine: h x k x 2 (BF16; DeepSeek-V3: 114,688 B)."""
    return float(hidden_size * experts_per_token * COMBINE_BYTES_PER_ELEMENT)


def load_imbalance(ep: int) -> float:
    """Max / mean routed load over the GPUs: EP_LOAD_IMBALANCE with ep > 1, else 1 (a TP split of
    every expert gives every GPU the same share)."""
    return EP_LOAD_IMBALANCE if ep > 1 else 1.0


@dataclass(frozen=True)
class EPGroup:
    """The GPUs one MoE all-to-all runs over: ``ep`` GPUs, ``local_gpus`` of them in each NVLink
    domain (node), joined inside the node by ``intra`` and between nodes by ``inter``."""

    ep: int
    local_gpus: int
    intra: Link
    inter: Link

    @property
    def local(self) -> int:
        """GPUs of the group in one node: min(local_gpus, ep)."""
        return max(1, min(self.local_gpus, self.ep))

    @property
    def nodes(self) -> int:
        """Nodes the group spans: ceil(ep / local)."""
        return -(-self.ep // self.local)


def _distinct(bins: float, picks: int) -> float:
    """Expected distinct bins ``picks`` uniform draws land in: n (1 - (1 - 1/n)^k) (occupancy,
    Feller vol. 1 ch. II; with replacement, within 0.5% of drawing k distinct experts at k << E)."""
    return bins * (1.0 - (1.0 - 1.0 / bins) ** picks) if bins > 0 else 0.0


def node_limit(arch: LLMArch, nodes: int) -> float:
    """Most nodes one token's experts can sit on. Group-limited routing picks M =
    ``routing_groups_per_token`` of g = ``routing_groups`` expert groups; with whole groups per node
    a token reaches at most M nodes (DeepSeek-V3 report, arXiv 2412.19437, sec. 2.1.2 "Node-Limited
    Routing": "each token will be sent to at most M nodes", M = 4; config.json n_group 8,
    topk_group 4), with more nodes than groups each group spans nodes / g of them: min(nodes,
    M x max(1, nodes / g)). No group limit (0, or g = M): all ``nodes``."""
    g, m = arch.routing_groups, arch.routing_groups_per_token
    if not g or not m or m >= g:
        return float(nodes)
    return float(min(nodes, m * max(1.0, nodes / g)))


def normal_copies_per_token(arch: LLMArch, group: EPGroup) -> tuple[float, float]:
    """(copies over RDMA, copies over NVLink) of one token's hidden state in a dispatch (or combine)
    by DeepEP's normal (high-throughput) kernels, per source GPU, for uniform routing.

    The normal kernels send a token once to each destination node over RDMA (to the GPU of the same
    local rank) and that GPU forwards it over NVLink to the node's GPUs holding its experts
    (deepseek-ai/DeepEP docs/legacy.md, "Normal kernels with NVLink and RDMA forwarding", kernels
    "optimized for asymmetric-domain bandwidth forwarding ... from NVLink domain to RDMA domain";
    DeepSeek-V3 report sec. 3.2.2). With n nodes, the token's k experts among the n' =
    :func:`node_limit` reachable nodes of L GPUs each:
    D = n' (1 - (1 - 1/n')^k) destination nodes, of which the share (n - 1) / n is remote:
    RDMA copies = D (n - 1) / n; distinct destination GPUs G_d = n' L (1 - (1 - 1/(n' L))^k), each
    reached over NVLink except from itself: NVLink copies = G_d (L - 1) / L.
    DeepSeek-V3 at EP32 over 4 nodes: D = 4 (1 - 0.75^8) = 3.5995, RDMA 2.6996 copies (6 with the
    low-latency kernels' k (N - L) / N), G_d = 32 (1 - (31/32)^8) = 7.1777, NVLink 6.2805.
    """
    k, local, n = arch.experts_per_token, group.local, group.nodes
    reach = node_limit(arch, n)
    dest_nodes = _distinct(reach, k)
    rdma = dest_nodes * (n - 1) / n
    nvlink = _distinct(reach * local, k) * (local - 1) / local
    return rdma, nvlink


def _normal_a2a_s(per_gpu_bytes: np.ndarray, copies: tuple[float, float], group: EPGroup) -> np.ndarray:
    """One normal-kernel all-to-all: latency + max(B x RDMA copies / bw_inter, B x NVLink copies /
    bw_intra) for B bytes per token-copy-set sent by the hottest GPU (the two paths run at once)."""
    rdma, nvlink = copies
    remote = group.nodes > 1
    latency = max(group.intra.latency_s, group.inter.latency_s) if remote else group.intra.latency_s
    over_nic = per_gpu_bytes * rdma / group.inter.effective_bandwidth_bytes_per_s if remote else 0.0
    over_nvl = per_gpu_bytes * nvlink / group.intra.effective_bandwidth_bytes_per_s
    return latency + np.maximum(over_nic, over_nvl)


def moe_comm_time_s(
    tokens_per_gpu: np.ndarray, arch: LLMArch, group: EPGroup, *, normal: np.ndarray | bool = False
) -> np.ndarray:
    """All-to-all time of one step's MoE layers along the critical path (ep > 1), in seconds: the sum
    of :func:`moe_dispatch_combine_s`."""
    dispatch, combine = moe_dispatch_combine_s(tokens_per_gpu, arch, group, normal=normal)
    return dispatch + combine


def moe_dispatch_combine_s(
    tokens_per_gpu: np.ndarray, arch: LLMArch, group: EPGroup, *, normal: np.ndarray | bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(dispatch, combine) all-to-all time of one step's MoE layers (ep > 1; zeros otherwise).

    ``tokens_per_gpu``: tokens the hottest GPU moves, t = max(its rank's tokens / TP, f x T / G)
    for T step tokens over the stage's G GPUs (a TP group splits its replicated tokens, as
    TensorRT-LLM's and SGLang's TEP do; f = EP_LOAD_IMBALANCE on the receiving side). Per MoE layer
    a dispatch of t x h x 1.03125 B per copy and a combine of t x h x 2 B per copy (h =
    :func:`model.llm.arch.expert_width`), by one of DeepEP's two kernel kinds (``normal`` per element):

    - low-latency (decode): one copy per routed expert, k copies spread over the group,
      :func:`model.hardware.collectives.all_to_all_time_s` of t x h x k x b bytes over ``group.ep``
      GPUs, ``group.local`` per node;
    - normal / high-throughput (steps with prompt tokens): one copy per destination node over RDMA,
      fanned out over NVLink (:func:`normal_copies_per_token`).

    Engines choose by phase: SGLang ``--moe-a2a-backend deepep --deepep-mode auto`` (the default
    mode) runs the normal kernels for batches with prefill (extend) tokens and the low-latency ones
    for decode batches (docs.sglang.ai Server Arguments; DeepEP docs/legacy.md: normal kernels "for
    both training and inference prefilling", low-latency kernels "for latency-sensitive inference
    decoding"); vLLM's ``deepep_high_throughput`` / ``deepep_low_latency`` backends are the same
    pair chosen per deployment (a prefill pool / a decode pool).
    Not overlapped with compute here; :func:`overlapped_layer_s` applies two-micro-batch overlap.
    """
    per_gpu = np.asarray(tokens_per_gpu, dtype=float)
    if group.ep <= 1:
        return np.zeros_like(per_gpu), np.zeros_like(per_gpu)
    h, k = expert_width(arch), arch.experts_per_token
    copies = normal_copies_per_token(arch, group)
    out = []
    for per_element in (DISPATCH_BYTES_PER_ELEMENT, COMBINE_BYTES_PER_ELEMENT):
        one_copy = per_gpu * h * per_element
        ll = all_to_all_time_s(one_copy * k, group.ep, group.local, group.intra, group.inter)
        ht = _normal_a2a_s(one_copy, copies, group)
        out.append(arch.num_moe_layers * np.where(normal, ht, np.asarray(ll, dtype=float)))
    return out[0], out[1]


def overlapped_layer_s(
    attention_s: np.ndarray, experts_s: np.ndarray, dispatch_s: np.ndarray, combine_s: np.ndarray
) -> np.ndarray:
    """One MoE layer of two overlapped micro-batches A and B, each input the time of ONE micro-batch's
    stage in that layer: a (attention and everything but the routed experts), e (routed experts), d
    (dispatch), c (combine). Each all-to-all of one micro-batch runs beside a compute stage of the
    other, in four pairs per layer:

        layer = max(d, a) + max(d, e) + max(c, e) + max(c, a)

    (A's dispatch beside B's attention, B's dispatch beside A's experts, A's combine beside B's
    experts, B's combine beside A's next attention: SGLang two-batch overlap, operations
    attn | dispatch, mlp | combine with a yield between, LMSYS large-scale EP blog 2025-05-05,
    "Two-batch Overlap", +27-35% prefill throughput measured; DeepSeek profile-data README: "two
    micro-batches to overlap computation and all-to-all communication" in prefill and decode).
    Between max(2a + 2e, 2d + 2c) (perfect hiding) and their sum (no overlap); unbalanced stages
    (e.g. decode's long attention against short expert GEMMs) leave communication exposed.
    """
    a, e = np.asarray(attention_s, dtype=float), np.asarray(experts_s, dtype=float)
    d, c = np.asarray(dispatch_s, dtype=float), np.asarray(combine_s, dtype=float)
    return np.maximum(d, a) + np.maximum(d, e) + np.maximum(c, e) + np.maximum(c, a)


def rows_per_expert(arch: LLMArch, tokens: np.ndarray) -> np.ndarray:
    """Mean rows a touched routed expert receives in one MoE layer of a ``tokens``-token step:
    T k / E_touched (:func:`model.llm.moe.expected_experts_touched`; T = 1 gives 1, T -> inf T k / E)."""
    t = np.asarray(tokens, dtype=float)
    touched = expected_experts_touched(arch.num_experts, arch.experts_per_token, t)
    return t * arch.experts_per_token / np.maximum(touched, 1e-300)


def grouped_gemm_rows(rows_per_expert: np.ndarray) -> np.ndarray:
    """Rows a grouped GEMM computes per touched expert that receives m rows on average:
    m + (B / 2) min(1, m / B), B = GROUPED_GEMM_BLOCK_M.

    Each expert's rows fill whole B-row tiles, so its last tile is on average half empty (the token
    counts per expert vary from step to step, so the remainder m mod B is spread evenly): B / 2
    wasted rows per expert once m >= B. Below one tile the idle rows' math overlaps the expert's
    weight loads, which :func:`model.physics.steps.gemm_mfu_at`'s exposed-weight term already
    charges, so the waste is taken in proportion, (B / 2) (m / B), tending to 0 with m (an
    assumption that keeps small-batch MoE decode memory-bound, as measured).
    DeepSeek-V3 decode at 576 rows per expert: 640 rows (+11%); prefill at 16,384: +0.4%.
    """
    m = np.asarray(rows_per_expert, dtype=float)
    block = float(GROUPED_GEMM_BLOCK_M)
    return m + 0.5 * block * np.minimum(1.0, m / block)


def dp_gather_time_s(message_bytes: np.ndarray, layers: int, stage_gpus: int, link: Link) -> np.ndarray:
    """DP-attention without EP: per MoE layer an all-gather of the step's tokens before the experts
    and a reduce-scatter after them over the G stage GPUs, together the traffic of one ring
    all-reduce of the whole step's hidden states (Patarasuk & Yuan 2009; SGLang DP attention)."""
    one = allreduce_time_s(message_bytes, stage_gpus, link.effective_bandwidth_bytes_per_s, link.latency_s)
    return layers * np.asarray(one, dtype=float)


def all_to_all_buffer_bytes(hidden_size: int, num_experts: int, ep: int) -> float:
    """GPU memory DeepEP's low-latency buffers take on each GPU when ep > 1 (else 0):
    LL_BUFFER_COPIES x E x T_max x (2 h + h / 128 x 4) bytes, T_max = LL_MAX_DISPATCH_TOKENS_PER_RANK
    (deepseek-ai/DeepEP csrc/config.hpp, LowLatencyLayout: send and receive areas of E x T_max
    combine messages of 2 h + h / 128 x 4 bytes, each double-buffered; DeepSeek-V3: 4 x 256 x 128 x
    14,560 = 1.91 GB)."""
    if ep <= 1:
        return 0.0
    message = 2.0 * hidden_size + hidden_size / 128.0 * 4.0
    return float(LL_BUFFER_COPIES * num_experts * LL_MAX_DISPATCH_TOKENS_PER_RANK * message)
