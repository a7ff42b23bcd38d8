"""The LLMArch dataclass: a decoder-only model's shape, its field checks and the layer-kind letters.

Derived quantities (parameters, weight and KV bytes) live in :mod:`model.llm.arch` and
:mod:`model.llm.attention`; both import this module, so it imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from model.errors import InputError, short
from model.hardware.formats import bytes_per_element

# Layer-kind letters of LLMArch.layer_pattern (model.llm.attention has the meaning of each).
KIND_NAMES = {
    "F": "full",
    "S": "sliding",
    "C": "chunked",
    "X": "sparse",
    "K": "compressed sparse",
    "H": "heavily compressed",
    "L": "linear",
    "M": "mamba2",
    "-": "none",
}
SOFTMAX_KINDS = "FSCXKH"  # layers with a KV cache
COMPRESSED_KINDS = "KH"  # softmax layers that cache one entry per group of tokens (DeepSeek-V4)
STATE_KINDS = "LM"  # layers with a fixed recurrent state

# Allowed range of each integer field: counts >= 1 where every transformer has one, 0 where the
# feature is optional; upper bounds far past any published model (largest today: hidden 18,432,
# 126 layers, 256 experts, vocab ~260k, context 10M), so a unit or typo slip is refused.
_FIELD_RANGES: dict[str, tuple[int, int]] = {
    "hidden_size": (1, 1 << 20),
    "num_layers": (1, 10_000),
    "num_heads": (1, 1 << 16),
    "num_kv_heads": (1, 1 << 16),
    "head_dim": (1, 1 << 16),
    "intermediate_size": (0, 1 << 24),
    "vocab_size": (1, 1 << 24),
    "num_experts": (0, 1 << 16),
    "experts_per_token": (0, 1 << 16),
    "num_shared_experts": (0, 1 << 10),
    "moe_intermediate_size": (0, 1 << 24),
    "num_dense_layers": (0, 10_000),
    "kv_lora_rank": (0, 1 << 16),
    "q_lora_rank": (0, 1 << 16),
    "qk_rope_head_dim": (0, 1 << 16),
    "qk_nope_head_dim": (0, 1 << 16),
    "v_head_dim": (0, 1 << 16),
    "learned_position_embeddings": (0, 1 << 24),
    "max_context_tokens": (0, 1 << 30),
    "attention_window": (0, 1 << 30),
    "index_topk": (0, 1 << 30),
    "index_heads": (0, 1 << 16),
    "index_head_dim": (0, 1 << 16),
    "linear_num_key_heads": (0, 1 << 16),
    "linear_key_head_dim": (0, 1 << 16),
    "linear_num_value_heads": (0, 1 << 16),
    "linear_value_head_dim": (0, 1 << 16),
    "linear_conv_kernel": (0, 1 << 10),
    "num_ffn_layers": (0, 10_000),
    "num_mtp_layers": (0, 100),
    "global_kv_heads": (0, 1 << 16),
    "global_head_dim": (0, 1 << 16),
    "compress_ratio_sparse": (0, 1 << 16),
    "compress_ratio_heavy": (0, 1 << 16),
    "o_groups": (0, 1 << 16),
    "o_lora_rank": (0, 1 << 16),
    "moe_latent_size": (0, 1 << 20),
    "routing_groups": (0, 1 << 16),
    "routing_groups_per_token": (0, 1 << 16),
}


@dataclass(frozen=True)
class LLMArch:
    """A decoder-only transformer's shape. MoE fields are 0 for dense models; MLA fields 0 without MLA."""

    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_embeddings: bool = False
    gated_mlp: bool = True
    num_experts: int = 0
    experts_per_token: int = 0
    num_shared_experts: int = 0
    moe_intermediate_size: int = 0
    num_dense_layers: int = 0  # layers with a dense MLP in an MoE model (DeepSeek's first_k_dense_replace)
    # Latent MoE (Nemotron 3 Super): routed experts work in this width, between a shared h x latent
    # down-projection and latent x h up-projection per MoE layer; 0 = experts work in hidden_size.
    moe_latent_size: int = 0
    # Group-limited (node-limited) routing: the router picks routing_groups_per_token of
    # routing_groups expert groups, then the top-k experts inside them (DeepSeek-V3 config.json
    # n_group = 8, topk_group = 4; DeepSeek-V3 report sec. 2.1.2: each token reaches at most 4 nodes).
    # 0 = no group limit.
    routing_groups: int = 0
    routing_groups_per_token: int = 0
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    learned_position_embeddings: int = 0  # rows of a learned position table (OPT); 0 for RoPE/ALiBi
    max_context_tokens: int = 0
    # Attention kinds (model.llm.attention): one letter per layer, "" = all full attention.
    layer_pattern: str = ""
    attention_window: int = 0  # sliding window (S layers) or local chunk (C layers), tokens
    index_topk: int = 0  # X layers: tokens the indexer selects per query
    index_heads: int = 0
    index_head_dim: int = 0
    linear_num_key_heads: int = 0  # L/M layers (Mamba-2: n_groups)
    linear_key_head_dim: int = 0  # (Mamba-2: d_state)
    linear_num_value_heads: int = 0  # (Mamba-2: heads)
    linear_value_head_dim: int = 0  # (Mamba-2: head_dim)
    linear_conv_kernel: int = 0
    state_dtype: str = ""  # recurrent-state format; "" = the KV format
    # F layers with their own shape (Gemma 4 global layers): KV heads, head width, V = K (no v_proj)
    global_kv_heads: int = 0
    global_head_dim: int = 0
    global_k_eq_v: bool = False
    attention_output_gate: bool = False  # sigmoid gate on the attention output, h x n_h d (Qwen3-Next)
    attention_sinks: bool = False  # learned per-head sink logits (gpt-oss); no cost modelled
    # DeepSeek-V4: one shared K = V entry of n_kv x head_dim per token (MQA, no separate V cache),
    # K layers cache one entry per compress_ratio_sparse tokens (indexer top-k over them), H layers
    # one per compress_ratio_heavy tokens; both also keep the last attention_window tokens whole.
    kv_shared: bool = False
    compress_ratio_sparse: int = 0
    compress_ratio_heavy: int = 0
    o_groups: int = 0  # grouped low-rank output projection: groups x o_lora_rank (0 = plain O)
    o_lora_rank: int = 0
    num_ffn_layers: int = 0  # layers with an MLP/MoE when not every layer has one (Nemotron-H); 0 = all
    num_mtp_layers: int = 0  # multi-token-prediction layers (extra weights, used by speculation)
    display_name: str = ""
    source: str = ""
    published_total_params: float = 0.0
    published_active_params: float = 0.0
    aliases: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        self._check_fields()
        self._check_consistency()

    def _check_fields(self) -> None:
        """Types and ranges of each field on its own (counts are whole numbers, sizes bounded)."""
        if not isinstance(self.name, str) or not self.name.strip():
            raise InputError("model.name", short(self.name), "a non-empty string")
        for name, (low, high) in _FIELD_RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or not low <= value <= high:
                raise InputError(
                    f"model {self.name}.{name}", short(value), f"a whole number in [{low}, {high:,}]"
                )
        for name in (
            "tie_embeddings",
            "gated_mlp",
            "attention_sinks",
            "attention_output_gate",
            "global_k_eq_v",
            "kv_shared",
        ):
            if not isinstance(getattr(self, name), bool | np.bool_):
                raise InputError(f"model {self.name}.{name}", short(getattr(self, name)), "true or false")
        for name in ("published_total_params", "published_active_params"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e16:
                raise InputError(f"model {self.name}.{name}", short(value), "a parameter count in [0, 1e16)")

    def _check_consistency(self) -> None:
        """Fields checked against each other: an impossible model is refused, not priced."""

        def bad(name: str, allowed: str) -> InputError:
            return InputError(f"model {self.name}.{name}", getattr(self, name), allowed)

        self._check_pattern(bad)
        if self.num_heads % self.num_kv_heads:
            raise bad("num_kv_heads", f"a divisor of num_heads ({self.num_heads})")
        if not self.is_moe:
            for name in (
                "experts_per_token",
                "num_shared_experts",
                "moe_intermediate_size",
                "num_dense_layers",
                "moe_latent_size",
                "routing_groups",
                "routing_groups_per_token",
            ):
                if getattr(self, name):
                    raise bad(name, "0 for a dense model (num_experts = 0)")
        else:
            if not 1 <= self.experts_per_token <= self.num_experts:
                raise bad("experts_per_token", f"1..num_experts ({self.num_experts})")
            if self.routing_groups_per_token > self.routing_groups:
                raise bad("routing_groups_per_token", f"0..routing_groups ({self.routing_groups})")
            if self.moe_intermediate_size < 1:
                raise bad("moe_intermediate_size", "a whole number >= 1 in an MoE model")
            if self.num_dense_layers >= self.ffn_layers:
                raise bad(
                    "num_dense_layers", f"fewer than the MLP layers ({self.ffn_layers}) in an MoE model"
                )
        if (not self.is_moe or self.num_dense_layers) and self.intermediate_size < 1:
            raise bad("intermediate_size", "a whole number >= 1 (the dense MLP width)")
        if self.is_mla:
            for name in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
                if getattr(self, name) < 1:
                    raise bad(name, "a whole number >= 1 with MLA (kv_lora_rank > 0)")
        else:
            names = ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
            for name in names if self.kv_shared else ("q_lora_rank", *names):
                if getattr(self, name):
                    raise bad(name, "0 without MLA (kv_lora_rank = 0)")
        if bool(self.o_groups) != bool(self.o_lora_rank) or (
            self.o_groups and self.num_heads % self.o_groups
        ):
            raise bad("o_groups", f"a divisor of num_heads ({self.num_heads}) exactly with o_lora_rank > 0")

    def _check_pattern(self, bad: Callable[[str, str], InputError]) -> None:
        """The layer pattern and the fields each kind needs (model.llm.attention)."""
        p = self.layer_pattern
        if not isinstance(p, str) or (p and (len(p) != self.num_layers or set(p) - set(KIND_NAMES))):
            raise bad(
                "layer_pattern",
                f"one of {''.join(KIND_NAMES)} per layer ({self.num_layers} letters) or empty",
            )
        if p and not set(p) & set(SOFTMAX_KINDS):
            raise bad("layer_pattern", f"at least one attention layer ({', '.join(SOFTMAX_KINDS)})")
        windowed = any(k in p for k in "SCKH")
        if windowed != (self.attention_window > 0) or ("S" in p and "C" in p):
            raise bad(
                "attention_window", "> 0 exactly when the pattern has S, C, K or H layers (not S and C)"
            )
        if ("X" in p or "K" in p) != (self.index_topk > 0) or (
            ("X" in p or "K" in p) and min(self.index_heads, self.index_head_dim) < 1
        ):
            raise bad(
                "index_topk",
                "> 0 with index_heads and index_head_dim >= 1 exactly when there are X or K layers",
            )
        for kind, name in (("K", "compress_ratio_sparse"), ("H", "compress_ratio_heavy")):
            if (kind in p) != (getattr(self, name) > 0):
                raise bad(name, f"a whole number >= 1 exactly when the pattern has {kind} layers")
        linear = ("L" in p) or ("M" in p)
        dims = (
            "linear_num_key_heads",
            "linear_key_head_dim",
            "linear_num_value_heads",
            "linear_value_head_dim",
        )
        for name in (*dims, "linear_conv_kernel"):
            if linear != (getattr(self, name) > 0):
                raise bad(name, "a whole number >= 1 exactly when the pattern has L or M layers")
        if self.state_dtype:
            bytes_per_element(self.state_dtype, f"model {self.name}.state_dtype")
        if self.global_head_dim and (
            self.is_mla or self.global_kv_heads < 1 or self.num_heads % self.global_kv_heads
        ):
            raise bad(
                "global_kv_heads", f"a divisor of num_heads ({self.num_heads}) with global_head_dim, no MLA"
            )
        if self.num_ffn_layers > self.num_layers:
            raise bad("num_ffn_layers", f"at most num_layers ({self.num_layers})")

    @property
    def ffn_layers(self) -> int:
        """Layers with an MLP or MoE block (all of them unless ``num_ffn_layers`` says fewer)."""
        return self.num_ffn_layers or self.num_layers

    @property
    def is_moe(self) -> bool:
        """Whether the MLP layers are mixture-of-experts (num_experts > 0)."""
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        """Whether attention is multi-head latent attention (kv_lora_rank > 0, DeepSeek-V2 style)."""
        return self.kv_lora_rank > 0

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is MoE: all but the leading dense ones (0 for a dense model)."""
        return self.ffn_layers - self.num_dense_layers if self.is_moe else 0

    @property
    def label(self) -> str:
        """Display name for reports (the catalog name when none is set)."""
        return self.display_name or self.name
