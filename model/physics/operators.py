"""Per-token operator counts derived from the architecture alone (no format, no hardware): attention
dimensions, linear-layer FLOPs and the weights a step streams, each split by the weight components of
a :class:`~model.hardware.formats.Precision` ("attention", "mlp", "experts"), and activation traffic.
"""

from __future__ import annotations

import numpy as np

from model.llm.arch import LLMArch, expert_params, lm_head_params, mixer_params, mlp_params, shared_moe_params
from model.llm.moe import expected_experts_touched


def attention_dims(arch: LLMArch, *, absorbed: bool) -> tuple[float, float]:
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


def _shared_mlp_params(arch: LLMArch) -> float:
    """Non-routed MLP weights of every layer: dense MLPs, plus per MoE layer the router (h x E), the
    shared experts and a latent MoE's projections (:func:`model.llm.arch.shared_moe_params`)."""
    if not arch.is_moe:
        return float(arch.ffn_layers * mlp_params(arch, arch.intermediate_size))
    return float(
        arch.num_dense_layers * mlp_params(arch, arch.intermediate_size)
        + arch.num_moe_layers * shared_moe_params(arch)
    )


def linear_flops_per_token(arch: LLMArch) -> dict[str, float]:
    """2 x the non-embedding weights one token uses, per component (Kaplan et al. 2020, "Scaling
    Laws", sec. 2.1: C_forward ~ 2N): each weight is one multiply-add per token. Routed experts:
    top-k per MoE layer. Embedding lookups are free; the LM head is counted per logits row by the
    caller. The three sum to 2 x (active_params - embedding_params)."""
    routed = arch.num_moe_layers * arch.experts_per_token * expert_params(arch) if arch.is_moe else 0
    return {
        "attention": 2.0 * mixer_params(arch),
        "mlp": 2.0 * _shared_mlp_params(arch),
        "experts": 2.0 * routed,
    }


def weight_params_read(arch: LLMArch, tokens: np.ndarray) -> dict[str, np.ndarray]:
    """Weights a step streams from memory for ``tokens`` tokens, per component (whole model, before
    the TP split).

    Every attention, dense-MLP, router and shared-expert weight and the LM head (V x h, in "mlp")
    are read once per step however many tokens it has (weights are reused across the batch, Pope et
    al. 2022, sec. 2). Routed experts: only the expected distinct experts the step's tokens touch,
    E (1 - (1 - k/E)^T) per MoE layer (:func:`model.llm.moe.expected_experts_touched`). The embedding
    table is gathered by row (counted with activations), not streamed.
    """
    shape = np.shape(tokens)
    attention = np.full(shape, float(mixer_params(arch)))
    mlp = np.full(shape, _shared_mlp_params(arch) + lm_head_params(arch))
    if arch.is_moe:
        touched = expected_experts_touched(arch.num_experts, arch.experts_per_token, tokens)
        experts = arch.num_moe_layers * touched * float(expert_params(arch))
    else:
        experts = np.zeros(shape)
    return {"attention": attention, "mlp": mlp, "experts": experts}


def activation_elements_per_token(arch: LLMArch, tp: int) -> float:
    """Activation elements one token reads and writes per step, summed over layers, per TP rank.

    Per layer: each linear layer reads its input and writes its output (QKV: h in, (n_h + 2 n_kv) d
    / TP out; O: n_h d / TP in, h out; gate/up: h in, 2 I / TP out; down: I / TP in, h out), and
    attention reads Q and writes its output (2 n_h d / TP). I is the MLP width a token uses
    (MoE: (top-k + shared) x moe_intermediate). Norms and residual adds are fused into these. Every
    layer is charged an attention block's traffic (linear-attention and Mamba mixers have similar
    projection widths); only layers with an MLP are charged one.
    """
    h = arch.hidden_size
    if arch.is_mla:
        q_dim = arch.num_heads * (arch.qk_nope_head_dim + arch.qk_rope_head_dim)
        kv_dim = arch.kv_lora_rank + arch.qk_rope_head_dim
        o_dim = arch.num_heads * arch.v_head_dim
    else:
        q_dim = arch.num_heads * arch.head_dim
        kv_dim = (1 if arch.kv_shared else 2) * arch.num_kv_heads * arch.head_dim
        o_dim = q_dim
    up = 2 if arch.gated_mlp else 1
    attn = (h + (q_dim + kv_dim) / tp) + (o_dim / tp + h) + (q_dim + o_dim) / tp
    dense_mlp = (h + up * arch.intermediate_size / tp) + (arch.intermediate_size / tp + h)
    if arch.is_moe:
        width = (arch.experts_per_token + arch.num_shared_experts) * arch.moe_intermediate_size
        moe_mlp = (h + up * width / tp) + (width / tp + h) + arch.num_experts  # + router logits
        mlp_total = arch.num_dense_layers * dense_mlp + arch.num_moe_layers * moe_mlp
    else:
        mlp_total = arch.ffn_layers * dense_mlp
    return arch.num_layers * attn + mlp_total
