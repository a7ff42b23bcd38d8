"""Read the attention kinds of a Hugging Face ``config.json`` into LLMArch fields (model.llm.attention).

Config keys by family (their ``transformers`` / model-repo configuration classes):
- ``layer_types`` ("full_attention", "sliding_attention", "linear_attention") with ``sliding_window``:
  gpt-oss (GptOssConfig), Gemma 3/4, Qwen3-Next / Qwen3.5 (Qwen3NextConfig).
- ``full_attention_interval`` without ``layer_types``: Qwen3-Next, one full layer in every interval.
- ``sliding_window`` alone (``use_sliding_window`` not false): every layer windowed (Mistral 7B v0.1);
  ``sliding_window_pattern`` N: every N-th layer full (Gemma 3).
- ``attention_chunk_size`` with ``no_rope_layers`` (default: every ``no_rope_layer_interval`` = 4th
  layer is a NoPE global layer): Llama 4 (Llama4TextConfig).
- ``index_topk``, ``index_n_heads``, ``index_head_dim``: DeepSeek-V3.2 and GLM-5 DSA on every layer;
  ``sparse_attention_config``: MiniMax-M3 block-sparse top-k (k = top-k blocks x block size).
- ``hybrid_override_pattern`` (M Mamba-2, * attention, - MLP, E MoE): Nemotron-H (NemotronHConfig).
- ``compress_ratios`` (one per layer, the list may run on into the MTP layers: 0 sliding window only,
  4 compressed sparse, other ratios heavily compressed) with ``sliding_window``, ``o_groups``,
  ``o_lora_rank``, ``q_lora_rank``: DeepSeek-V4 (reference inference/model.py: ``overlap`` and the
  indexer exist exactly for ratio 4; transformers DeepseekV4Config maps 0 / 4 / 128 the same way).
- ``num_nextn_predict_layers`` / ``mtp_num_hidden_layers``: multi-token-prediction layers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from model.errors import ProfileError

_LAYER_TYPES = {
    "full_attention": "F",
    "sliding_attention": "S",
    "linear_attention": "L",
    "chunked_attention": "C",
}
_NEMOTRON = {"M": "M", "*": "F", "-": "-", "E": "-"}
# DeepSeek-V4: the compression ratio that has an indexer (compressed sparse attention, "K" layers).
V4_SPARSE_RATIO = 4
# Llama4TextConfig default: layers (i + 1) % 4 == 0 are NoPE full-attention layers.
LLAMA4_NOPE_INTERVAL = 4


def _whole(cfg: Mapping[str, Any], key: str, where: str, default: int = 0) -> int:
    value = cfg.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1 << 30:
        raise ProfileError(where, key, f"expected a whole number >= 0, got {str(value)[:40]!r}")
    return value


def _flags(cfg: Mapping[str, Any], key: str, layers: int, where: str) -> list[int]:
    value = cfg.get(key)
    if not isinstance(value, list) or len(value) != layers or not all(v in (0, 1) for v in value):
        raise ProfileError(where, key, f"expected a list of {layers} zeros and ones")
    return value


def _pattern(cfg: Mapping[str, Any], layers: int, where: str, fields: dict[str, Any]) -> str:
    """One kind letter per layer, "" when every layer is full attention."""
    window = _whole(cfg, "sliding_window", where)
    if cfg.get("compress_ratios") is not None:
        return _compressed_pattern(cfg, layers, where, fields, window)
    if cfg.get("hybrid_override_pattern") is not None:
        p = cfg["hybrid_override_pattern"]
        if not isinstance(p, str) or len(p) != layers or set(p) - set(_NEMOTRON):
            raise ProfileError(where, "hybrid_override_pattern", f"expected {layers} of M * - E")
        fields["num_ffn_layers"] = p.count("-") + p.count("E")
        if "E" in p:
            fields["num_dense_layers"] = p.count("-")
        return "".join(_NEMOTRON[c] for c in p)
    if cfg.get("layer_types") is not None:
        types = cfg["layer_types"]
        if not isinstance(types, list) or len(types) != layers or set(types) - set(_LAYER_TYPES):
            raise ProfileError(where, "layer_types", f"expected {layers} of {', '.join(_LAYER_TYPES)}")
        p = "".join(_LAYER_TYPES[t] for t in types)
    elif cfg.get("full_attention_interval") and cfg.get("linear_num_value_heads"):
        n = _whole(cfg, "full_attention_interval", where)
        p = "".join("F" if (i + 1) % n == 0 else "L" for i in range(layers))
    elif cfg.get("attention_chunk_size"):
        fields["attention_window"] = _whole(cfg, "attention_chunk_size", where)
        if cfg.get("no_rope_layers"):
            flags = _flags(cfg, "no_rope_layers", layers, where)
        else:
            n = _whole(cfg, "no_rope_layer_interval", where, LLAMA4_NOPE_INTERVAL) or LLAMA4_NOPE_INTERVAL
            flags = [int((i + 1) % n != 0) for i in range(layers)]
        return "".join("C" if f else "F" for f in flags)
    elif window and cfg.get("use_sliding_window", True) is not False:
        n = _whole(cfg, "sliding_window_pattern", where)
        p = "".join("F" if n and (i + 1) % n == 0 else "S" for i in range(layers))
    else:
        p = "F" * layers
    if "S" in p:
        if not window:
            raise ProfileError(where, "sliding_window", "needed (> 0) with sliding_attention layers")
        fields["attention_window"] = window
    return p


def _compressed_pattern(
    cfg: Mapping[str, Any], layers: int, where: str, fields: dict[str, Any], window: int
) -> str:
    """DeepSeek-V4's per-layer ``compress_ratios``: S (0), K (the sparse ratio), H (any other)."""
    ratios = cfg["compress_ratios"]
    if (
        not isinstance(ratios, list)
        or len(ratios) < layers
        or not all(isinstance(r, int) and not isinstance(r, bool) and 0 <= r <= 1 << 16 for r in ratios)
    ):
        raise ProfileError(where, "compress_ratios", f"expected a list of at least {layers} whole numbers")
    ratios = ratios[:layers]
    heavy = {r for r in ratios if r and r != V4_SPARSE_RATIO}
    if len(heavy) > 1 or not window:
        raise ProfileError(where, "compress_ratios", "one heavy ratio besides 4, with a sliding_window > 0")
    fields["attention_window"] = window
    if V4_SPARSE_RATIO in ratios:
        fields["compress_ratio_sparse"] = V4_SPARSE_RATIO
    if heavy:
        fields["compress_ratio_heavy"] = heavy.pop()
    fields["kv_shared"] = True
    for key in ("q_lora_rank", "o_groups", "o_lora_rank"):
        fields[key] = _whole(cfg, key, where)
    return "".join("S" if not r else ("K" if r == V4_SPARSE_RATIO else "H") for r in ratios)


def _sparse(cfg: Mapping[str, Any], p: str, where: str, fields: dict[str, Any]) -> str:
    """Mark the top-k sparse layers (X) and read the indexer's shape."""
    if cfg.get("index_topk"):
        fields["index_topk"] = _whole(cfg, "index_topk", where)
        fields["index_heads"] = _whole(cfg, "index_n_heads", where)
        fields["index_head_dim"] = _whole(cfg, "index_head_dim", where)
        if "F" not in p and "K" not in p:
            for key in ("index_topk", "index_heads", "index_head_dim"):
                del fields[key]  # no layer uses an indexer (a DeepSeek-V4 config without ratio-4 layers)
        return p.replace("F", "X")
    sac = cfg.get("sparse_attention_config")
    if isinstance(sac, Mapping) and sac.get("use_sparse_attention"):
        fields["index_topk"] = _whole(sac, "sparse_topk_blocks", where) * _whole(
            sac, "sparse_block_size", where
        )
        fields["index_heads"] = _whole(sac, "sparse_num_index_heads", where)
        fields["index_head_dim"] = _whole(sac, "sparse_index_dim", where)
        flags = _flags(sac, "sparse_attention_freq", len(p), where)
        return "".join("X" if f and c == "F" else c for c, f in zip(p, flags, strict=True))
    return p


def attention_fields(cfg: Mapping[str, Any], layers: int, where: str, notes: list[str]) -> dict[str, Any]:
    """LLMArch keyword arguments for the attention kinds, state and MTP layers of ``cfg``."""
    fields: dict[str, Any] = {}
    p = _sparse(cfg, _pattern(cfg, layers, where, fields), where, fields)
    if "L" in p:
        keys = (
            "linear_num_key_heads",
            "linear_key_head_dim",
            "linear_num_value_heads",
            "linear_value_head_dim",
        )
        for key in keys:
            fields[key] = _whole(cfg, key, where)
        fields["linear_conv_kernel"] = _whole(cfg, "linear_conv_kernel_dim", where)
    if "M" in p:
        fields["linear_num_key_heads"] = _whole(cfg, "n_groups", where)
        fields["linear_key_head_dim"] = _whole(cfg, "ssm_state_size", where)
        fields["linear_num_value_heads"] = _whole(cfg, "mamba_num_heads", where)
        fields["linear_value_head_dim"] = _whole(cfg, "mamba_head_dim", where)
        fields["linear_conv_kernel"] = _whole(cfg, "conv_kernel", where)
    state = cfg.get("mamba_ssm_dtype") or cfg.get("mamba_ssm_cache_dtype")
    if ("L" in p or "M" in p) and state:
        fields["state_dtype"] = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(str(state), "")
    if set(p) != {"F"}:
        fields["layer_pattern"] = p
    if str(cfg.get("model_type", "")).startswith("gpt_oss"):
        fields["attention_sinks"] = True  # GptOssAttention's learned per-head sinks
    mtp = _whole(cfg, "num_nextn_predict_layers", where) or _whole(cfg, "mtp_num_hidden_layers", where)
    if mtp:
        fields["num_mtp_layers"] = mtp
        notes.append(f"{mtp} multi-token-prediction layer(s): weights in mtp_params, not in total_params")
    if cfg.get("global_head_dim") and "F" in p:  # Gemma 4: the full layers' own shape
        fields["global_head_dim"] = _whole(cfg, "global_head_dim", where)
        fields["global_k_eq_v"] = bool(cfg.get("attention_k_eq_v"))
        key = "num_global_key_value_heads" if fields["global_k_eq_v"] else "num_key_value_heads"
        fields["global_kv_heads"] = _whole(cfg, key, where) or _whole(cfg, "num_key_value_heads", where)
    if cfg.get("attn_output_gate"):
        fields["attention_output_gate"] = True  # Qwen3-Next: q_proj also emits the output gate
    return fields
