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

import numpy as np

from model.hardware.collectives import all_to_all_time_s, allreduce_time_s
from model.hardware.formats import bytes_per_element
from model.hardware.links import Link

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


def moe_comm_time_s(
    tokens_per_gpu: np.ndarray,
    *,
    hidden_size: int,
    experts_per_token: int,
    moe_layers: int,
    parallel_ep: int,
    local_gpus: int,
    intra: Link,
    inter: Link,
) -> np.ndarray:
    """All-to-all time of one step's MoE layers along the critical path (ep > 1), in seconds.

    ``tokens_per_gpu``: tokens the hottest GPU moves, t = max(its rank's tokens / TP, f x T / G)
    for T step tokens over the stage's G GPUs (a TP group splits its replicated tokens, as
    TensorRT-LLM's and SGLang's TEP do; f = EP_LOAD_IMBALANCE on the receiving side). Per MoE layer:
    a2a(t x dispatch bytes per token) + a2a(t x combine bytes per token),
    a2a = :func:`model.hardware.collectives.all_to_all_time_s` over ``parallel_ep`` GPUs of which
    ``local_gpus`` share the NVLink domain. Not overlapped with compute (DeepSeek's two-micro-batch
    overlap hides part of it; docs/model.md).
    """
    per_gpu = np.asarray(tokens_per_gpu, dtype=float)
    if parallel_ep <= 1:
        return np.zeros_like(per_gpu)
    local = min(local_gpus, parallel_ep)
    one = np.zeros_like(per_gpu)
    for per_token in (dispatch_bytes_per_token, combine_bytes_per_token):
        sent = per_gpu * per_token(hidden_size, experts_per_token)
        one = one + np.asarray(all_to_all_time_s(sent, parallel_ep, local, intra, inter), dtype=float)
    return moe_layers * one


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
