"""LLM architecture description and the quantities derived from it (parameters, weight and KV bytes).

Counting conventions (stated once, used everywhere):
- A linear layer of shape (d_in, d_out) has d_in x d_out weights; biases and norm scales are left
  out (they are < 0.1% of any catalog model).
- Attention (MHA/GQA/MQA): Q and O are hidden x (heads x head_dim); K and V are hidden x
  (kv_heads x head_dim) each (Ainslie et al. 2023, "GQA").
- MLA (DeepSeek-V2/V3): Q through a low-rank q_lora_rank bottleneck (or directly), KV through a
  kv_lora_rank latent plus a shared RoPE key of qk_rope_head_dim (DeepSeek-V2 paper, sec. 2.1).
- MLP: gated (SwiGLU, Shazeer 2020) has three hidden x intermediate matrices, plain has two.
- MoE layer: every routed and shared expert is a gated MLP of moe_intermediate_size plus a
  hidden x experts router; a token uses experts_per_token routed experts and all shared ones
  (Mixtral paper, sec. 2; DeepSeek-V3 report, sec. 2.1.2). Latent MoE (``moe_latent_size`` r,
  Nemotron 3 Super): routed experts map r -> moe_intermediate_size -> r, between one h x r down- and
  one r x h up-projection per MoE layer that every token uses; shared experts stay at width h
  (NVIDIA Nemotron 3 Super model card, "LatentMoE").
"""

from __future__ import annotations

import math

import numpy as np

from model.errors import InputError
from model.hardware.formats import Precision, bytes_per_element
from model.llm import attention
from model.llm.spec import LLMArch

__all__ = ["LLMArch"]  # re-exported: the dataclass lives in model.llm.spec


def attention_params_per_layer(arch: LLMArch, *, full_layer: bool = False) -> int:
    """Weights of one attention block: Q, K, V, O projections (GQA) or the MLA projections.

    GQA: h*(n_h*d) [Q] + 2*h*(n_kv*d) [K,V] + (n_h*d)*h [O]  (Ainslie et al. 2023), + h*(n_h*d) for
    an output gate (Qwen3-Next's gated attention: q_proj emits the query and the gate). ``full_layer``:
    an F layer with its own shape (Gemma 4: global_kv_heads x global_head_dim, K reused as V).
    MLA: Q: h*r_q + r_q*n_h*(d_nope+d_rope) (or h*n_h*(d_nope+d_rope) without r_q);
    KV: h*(r_kv + d_rope) + r_kv*n_h*(d_nope + d_v); O: n_h*d_v*h  (DeepSeek-V2, sec. 2.1).
    DeepSeek-V4 (``kv_shared``): Q through r_q as MLA, h*(n_kv*d) for the one shared K = V, and the
    grouped low-rank O of g groups: n_h*d*r_o + g*r_o*h (reference inference/model.py, Attention:
    wq_a, wq_b, wkv, wo_a, wo_b); K/H layers' compressors and indexers are added per layer kind
    (:func:`model.llm.attention.compressed_extra_params`).
    """
    h, n_h = arch.hidden_size, arch.num_heads
    if arch.is_mla:
        qk_dim = arch.qk_nope_head_dim + arch.qk_rope_head_dim
        q = h * arch.q_lora_rank + arch.q_lora_rank * n_h * qk_dim if arch.q_lora_rank else h * n_h * qk_dim
        kv = h * (arch.kv_lora_rank + arch.qk_rope_head_dim)
        kv += arch.kv_lora_rank * n_h * (arch.qk_nope_head_dim + arch.v_head_dim)
        return q + kv + n_h * arch.v_head_dim * h
    d, n_kv, kv_mats = arch.head_dim, arch.num_kv_heads, 1 if arch.kv_shared else 2
    if arch.kv_shared:
        q = h * arch.q_lora_rank + arch.q_lora_rank * n_h * d if arch.q_lora_rank else h * n_h * d
        o = (
            n_h * d * arch.o_lora_rank + arch.o_groups * arch.o_lora_rank * h
            if arch.o_groups
            else n_h * d * h
        )
        return q + kv_mats * h * n_kv * d + o
    if full_layer and arch.global_head_dim:  # Gemma 4 global layers: own shape, no v_proj with V = K
        d, n_kv, kv_mats = arch.global_head_dim, arch.global_kv_heads, 1 if arch.global_k_eq_v else 2
    gate = h * n_h * d if arch.attention_output_gate else 0
    return h * n_h * d + kv_mats * h * n_kv * d + n_h * d * h + gate


def mlp_params(arch: LLMArch, intermediate_size: int) -> int:
    """Weights of one MLP: 3*h*I when gated (SwiGLU), else 2*h*I (Vaswani et al. 2017)."""
    return (3 if arch.gated_mlp else 2) * arch.hidden_size * intermediate_size


def embedding_params(arch: LLMArch) -> int:
    """Token embedding (V*h), the LM head (V*h unless tied) and a learned position table if any."""
    table = arch.vocab_size * arch.hidden_size
    head = 0 if arch.tie_embeddings else table
    return table + head + arch.learned_position_embeddings * arch.hidden_size


def lm_head_params(arch: LLMArch) -> int:
    """The output projection h x V; it is used by every token that needs logits, tied or not."""
    return arch.vocab_size * arch.hidden_size


def ffn_params(arch: LLMArch, *, active: bool) -> int:
    """All MLP/MoE weights of the model; with ``active`` only those one token uses.

    Dense model: L_ffn * mlp(I) (L_ffn = layers with an MLP, all of them but in Nemotron-H).
    MoE: dense layers * mlp(I) + moe layers * (router h*E +
    (E or top-k, + shared) * mlp(I_moe)).
    """
    if not arch.is_moe:
        return arch.ffn_layers * mlp_params(arch, arch.intermediate_size)
    routed = arch.experts_per_token if active else arch.num_experts
    per_moe_layer = shared_moe_params(arch) + routed * expert_params(arch)
    return (
        arch.num_dense_layers * mlp_params(arch, arch.intermediate_size) + arch.num_moe_layers * per_moe_layer
    )


def mixer_params(arch: LLMArch) -> int:
    """Weights of every layer's token mixer: L x attention block for an all-attention model; with
    other layer kinds, softmax layers x attention block + indexers + linear/SSM mixers
    (:func:`model.llm.attention.mixer_params`)."""
    full = attention_params_per_layer(arch, full_layer=True) if arch.global_head_dim else None
    return attention.mixer_params(arch, attention_params_per_layer(arch), full)


def total_params(arch: LLMArch) -> int:
    """All weights of the main model: embeddings + token mixers + every MLP/expert (see module
    conventions). Multi-token-prediction layers are extra (:func:`mtp_params`)."""
    return embedding_params(arch) + mixer_params(arch) + ffn_params(arch, active=False)


def active_params(arch: LLMArch) -> int:
    """Weights one token's forward pass uses (MoE: top-k routed + shared experts)."""
    return embedding_params(arch) + mixer_params(arch) + ffn_params(arch, active=True)


def mtp_params(arch: LLMArch) -> int:
    """Weights of the multi-token-prediction layers: each is one more transformer layer (attention
    block + the last layer's MLP or MoE with all its experts) and a 2h x h projection of the
    concatenated hidden state and next-token embedding; embedding and LM head are shared
    (DeepSeek-V3 report, arXiv:2412.19437, sec. 2.2). Not in ``total_params`` (published counts
    leave them out); speculative decoding that drafts with them loads them too."""
    if not arch.num_mtp_layers:
        return 0
    if arch.is_moe:
        ffn = shared_moe_params(arch) + arch.num_experts * expert_params(arch)
    else:
        ffn = mlp_params(arch, arch.intermediate_size)
    h = arch.hidden_size
    return arch.num_mtp_layers * (attention_params_per_layer(arch) + ffn + 2 * h * h)


def expert_width(arch: LLMArch) -> int:
    """The width routed experts read and write (and the all-to-all carries): the latent width of a
    latent MoE, else hidden_size."""
    return arch.moe_latent_size or arch.hidden_size


def expert_params(arch: LLMArch) -> int:
    """Weights of one routed expert (0 for dense models): an MLP of moe_intermediate_size at
    :func:`expert_width`."""
    if not arch.is_moe:
        return 0
    return (3 if arch.gated_mlp else 2) * expert_width(arch) * arch.moe_intermediate_size


def shared_moe_params(arch: LLMArch) -> int:
    """Weights of one MoE layer every token uses besides its routed experts: the h x E router, the
    shared experts (width h) and a latent MoE's two h x r projections."""
    latent = 2 * arch.hidden_size * arch.moe_latent_size
    return (
        arch.hidden_size * arch.num_experts
        + arch.num_shared_experts * mlp_params(arch, arch.moe_intermediate_size)
        + latent
    )


def weight_params_by_component(arch: LLMArch) -> dict[str, int]:
    """All weights split by the components a :class:`~model.hardware.formats.Precision` names.

    attention: every token mixer (:func:`mixer_params`); experts: MoE layers x E routed experts;
    mlp: everything else
    (embeddings, LM head, dense MLPs, routers, shared experts). The three sum to ``total_params``.
    """
    attention = mixer_params(arch)
    experts = arch.num_moe_layers * arch.num_experts * expert_params(arch)
    return {"attention": attention, "mlp": total_params(arch) - attention - experts, "experts": experts}


def weight_bytes(arch: LLMArch, dtype: str | Precision) -> float:
    """Bytes to hold every weight (embeddings included): sum over components of params x bytes per
    element of the component's format, block scales included (format table). A dtype name means
    every component in that format: total_params x bytes/element."""
    if isinstance(dtype, Precision):
        parts = weight_params_by_component(arch)
        return float(sum(n * dtype.format(c).bytes_per_element for c, n in parts.items()))
    return total_params(arch) * bytes_per_element(dtype)


def kv_bytes_per_token(arch: LLMArch, kv_dtype: str = "bf16") -> float:
    """KV-cache bytes one token adds across all GPUs of an unsharded replica, in every softmax layer.

    MHA/GQA: 2 (K and V) x layers x n_kv x head_dim x bytes (Pope et al. 2022, "Efficiently Scaling
    Transformer Inference", sec. 2). MLA: layers x (kv_lora_rank + qk_rope_head_dim) x bytes: only
    the compressed latent and the shared RoPE key are cached (DeepSeek-V2, sec. 2.1.3). Layers are
    the softmax ones (F, S, C, X; X adds its indexer key): a windowed or hybrid model holds less per
    request than tokens x this (:func:`model.llm.attention.kv_bytes_per_request`).
    """
    return float(attention.kv_bytes_per_token(arch, kv_dtype))


def kv_bytes_per_token_per_gpu(arch: LLMArch, kv_dtype: str, tp: np.ndarray | int) -> np.ndarray:
    """KV bytes per token held by each GPU of a TP group.

    GQA: 2 x L x kv_heads_per_gpu(TP) x d x bytes (replicated heads counted on every rank).
    MLA: the latent is not split by heads, so every rank holds all of it (vLLM's MLA backend).
    """
    out = attention.kv_bytes_per_token(arch, kv_dtype, tp)
    return np.broadcast_to(out, np.shape(tp)).astype(float)


def check_tp(arch: LLMArch, tp: int) -> None:
    """TP must divide the attention heads (Megatron-LM's head split); raises naming the field."""
    if not (isinstance(tp, int | np.integer) and tp >= 1):
        raise InputError("tp", tp, "a whole number >= 1")
    if arch.num_heads % tp:
        divisors = [d for d in range(1, arch.num_heads + 1) if arch.num_heads % d == 0 and d <= 64]
        raise InputError(
            "tp", tp, f"a divisor of {arch.label}'s {arch.num_heads} attention heads: {divisors}"
        )


def describe(arch: LLMArch) -> dict[str, float | int | str | bool]:
    """Every field plus the derived counts, for `pdplan show model` and the UI."""
    out: dict[str, float | int | str | bool] = {
        k: (list(v) if isinstance(v, tuple) else v) for k, v in arch.__dict__.items()
    }
    out["total_params"] = total_params(arch)
    out["active_params"] = active_params(arch)
    out["attention_kind"] = attention.attention_kind(arch)
    out["kv_bytes_per_token_bf16"] = kv_bytes_per_token(arch, "bf16")
    for ctx in (8192, 131072):
        out[f"kv_bytes_per_request_{ctx // 1024}k_bf16"] = float(attention.kv_bytes_per_request(arch, ctx))
    state = attention.state_bytes_per_sequence(arch, "bf16")
    if state:
        out["state_bytes_per_sequence_bf16"] = state
    if arch.num_mtp_layers:
        out["mtp_params"] = mtp_params(arch)
    if arch.published_total_params:
        out["total_params_error_pct"] = 100 * (total_params(arch) / arch.published_total_params - 1)
    return out


def params_b(value: float) -> str:
    """Human form of a parameter count: 70.6B, 46.7B, 8.03B, 1.03T."""
    if not math.isfinite(value):
        return "n/a"
    return f"{value / 1e12:.3g}T" if value >= 999.5e9 else f"{value / 1e9:.3g}B"
