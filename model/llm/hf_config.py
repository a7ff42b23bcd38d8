"""Read a Hugging Face ``config.json`` (local file or dict, never the network) into an LLMArch.

Key names differ by ``model_type``; this module maps the ones that decide cost and reports the
fields it recognises but does not model (sliding windows, quantisation, extra prediction heads)
in ``LLMArch.notes`` instead of guessing. Field meanings: the ``transformers`` configuration
classes (LlamaConfig, MixtralConfig, Qwen2Config, OPTConfig, FalconConfig, BloomConfig,
DeepseekV3Config).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from model.errors import InputError, ProfileError, short
from model.limits import MAX_PROFILE_BYTES, is_file, parse_json
from model.llm.arch import LLMArch
from model.llm.hf_attention import attention_fields

# model_type -> gated MLP (SwiGLU family) or plain two-matrix MLP
GATED_MODEL_TYPES = {
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "gemma",
    "gemma2",
    "deepseek_v2",
    "deepseek_v3",
    "yi",
    "phi3",
    "olmo",
    "olmo2",
    "granite",
    "internlm2",
    "gpt_oss",
    "llama4",
    "llama4_text",
    "qwen3_next",
    "qwen3_5_moe_text",
    "qwen3_5_text",
    "deepseek_v32",
    "deepseek_v4",
    "glm_moe_dsa",
    "glm4_moe",
    "minimax_m3",
    "minimax_m2",
    "kimi_k2",
    "gemma3_text",
    "gemma4_text",
}
# Nemotron-H's MLPs are up/down with a squared-ReLU (mlp_hidden_act "relu2"), not gated.
PLAIN_MLP_MODEL_TYPES = {
    "opt",
    "bloom",
    "falcon",
    "gpt2",
    "gpt_neox",
    "gptj",
    "gpt_bigcode",
    "phi",
    "nemotron_h",
}
# transformers' PretrainedConfig ties embeddings by default; these configuration classes default to
# separate LM-head weights (Llama4TextConfig: tie_word_embeddings=False).
UNTIED_BY_DEFAULT = {"llama4_text", "llama4"}
# Models whose config omits the FFN size because it is always 4 x hidden (BLOOM, Falcon modelling code).
FFN_IS_4H = {"bloom", "falcon", "gpt2", "gpt_neox"}

_NOT_MODELLED = {
    "quantization_config": "quantization_config is ignored; pass --dtype to set the weight format",
}


def _first(cfg: Mapping[str, Any], keys: tuple[str, ...], where: str, field: str, default: Any = None) -> Any:
    for key in keys:
        if key in cfg and cfg[key] is not None:
            return cfg[key]
    if default is not None:
        return default
    raise ProfileError(where, field, f"missing: none of {', '.join(keys)} is in the config")


# Largest dimension a config may give (hidden size, vocabulary, layers...): far beyond any real model.
MAX_DIMENSION = 100_000_000


def _int(value: Any, where: str, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DIMENSION:
        raise ProfileError(
            where, field, f"expected a whole number in [0, {MAX_DIMENSION}], got {str(value)[:40]!r}"
        )
    return value


def arch_from_hf_config(cfg: Mapping[str, Any], *, name: str = "", where: str = "config.json") -> LLMArch:
    """Map a Hugging Face config dict to an LLMArch; raises ProfileError naming the missing field."""
    if not isinstance(cfg, Mapping):
        raise ProfileError(where, "(file)", "expected a JSON object")
    meta = cfg.get("_pdplan", {}) or {}
    if not isinstance(meta, Mapping):
        raise ProfileError(where, "_pdplan", f"expected an object, got {str(meta)[:40]!r}")
    aliases = meta.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        raise ProfileError(where, "_pdplan.aliases", "expected a list of names")
    for key in ("name", "display_name", "source"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise ProfileError(where, f"_pdplan.{key}", f"expected a string, got {short(meta[key])!r}")
    for key in ("published_total_params", "published_active_params"):
        value = meta.get(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e16:
            raise ProfileError(
                where, f"_pdplan.{key}", f"expected a parameter count in [0, 1e16), got {short(value)!r}"
            )
    if "hidden_size" not in cfg and "text_config" in cfg:
        if not isinstance(cfg["text_config"], Mapping):
            raise ProfileError(where, "text_config", "expected an object")
        outer, cfg = cfg, cfg["text_config"]
        if "tie_word_embeddings" not in cfg and "tie_word_embeddings" in outer:  # multimodal wrappers
            cfg = {**cfg, "tie_word_embeddings": outer["tie_word_embeddings"]}
    for key in ("max_position_embeddings", "seq_length"):
        value = cfg.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ProfileError(where, key, f"expected a whole number >= 0, got {str(value)[:40]!r}")
    for key in ("tie_word_embeddings", "new_decoder_architecture", "multi_query"):
        if key in cfg and cfg[key] is not None and not isinstance(cfg[key], bool):
            raise ProfileError(where, key, f"expected true or false, got {cfg[key]!r}")
    model_type = str(cfg.get("model_type", "")).lower()
    notes: list[str] = []
    for key, why in _NOT_MODELLED.items():
        if cfg.get(key):
            notes.append(why)

    hidden = _int(
        _first(cfg, ("hidden_size", "n_embed", "d_model", "n_embd"), where, "hidden_size"),
        where,
        "hidden_size",
    )
    layers = _int(
        _first(cfg, ("num_hidden_layers", "n_layer", "num_layers"), where, "num_hidden_layers"),
        where,
        "num_hidden_layers",
    )
    heads = _int(
        _first(cfg, ("num_attention_heads", "n_head"), where, "num_attention_heads"),
        where,
        "num_attention_heads",
    )
    if model_type == "falcon" and not cfg.get("new_decoder_architecture") and cfg.get("multi_query"):
        kv_heads = 1
    else:
        kv_heads = _int(
            _first(cfg, ("num_key_value_heads", "num_kv_heads"), where, "num_key_value_heads", heads),
            where,
            "num_key_value_heads",
        )
    head_dim = cfg.get("head_dim") or cfg.get("attention_head_dim") or hidden // max(heads, 1)
    attn_kwargs = attention_fields(cfg, layers, where, notes)

    if model_type in GATED_MODEL_TYPES:
        gated = True
    elif model_type in PLAIN_MLP_MODEL_TYPES:
        gated = False
    else:
        act = str(cfg.get("hidden_act", cfg.get("activation_function", ""))).lower()
        gated = act in {"silu", "swiglu", "geglu"}
        notes.append(
            f"model_type {model_type or '(none)'!r} is not in the known list; "
            f"MLP assumed {'gated' if gated else 'plain'} from activation {act or '(none)'!r}"
        )

    is_moe = any(cfg.get(k) for k in ("num_local_experts", "n_routed_experts", "num_experts"))
    dense_keys = ("dense_intermediate_size", "intermediate_size_mlp") if is_moe else ()
    if is_moe and "intermediate_size" not in cfg and cfg.get("moe_intermediate_size"):
        cfg = {**cfg, "intermediate_size": 0}  # MoE in every layer, no dense MLP (Qwen3.5-MoE)
    if model_type in FFN_IS_4H and not any(
        cfg.get(k) for k in ("intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size")
    ):
        intermediate = 4 * hidden
    else:
        intermediate = _int(
            _first(
                cfg,
                (*dense_keys, "intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size"),
                where,
                "intermediate_size",
            ),
            where,
            "intermediate_size",
        )

    experts = _int(
        cfg.get("num_local_experts") or cfg.get("n_routed_experts") or cfg.get("num_experts") or 0,
        where,
        "num_experts",
    )
    moe_kwargs: dict[str, int] = {}
    if experts:
        moe_kwargs = {
            "num_experts": experts,
            "experts_per_token": _int(
                _first(cfg, ("num_experts_per_tok",), where, "num_experts_per_tok"),
                where,
                "num_experts_per_tok",
            ),
            "num_shared_experts": _int(cfg.get("n_shared_experts") or 0, where, "n_shared_experts"),
            "moe_intermediate_size": _int(
                cfg.get("moe_intermediate_size") or cfg.get("intermediate_size") or intermediate,
                where,
                "moe_intermediate_size",
            ),
            "num_dense_layers": _int(
                attn_kwargs.pop("num_dense_layers", None) or cfg.get("first_k_dense_replace") or 0,
                where,
                "first_k_dense_replace",
            ),
            "moe_latent_size": _int(cfg.get("moe_latent_size") or 0, where, "moe_latent_size"),
            "routing_groups": _int(cfg.get("n_group") or 0, where, "n_group"),
            "routing_groups_per_token": _int(cfg.get("topk_group") or 0, where, "topk_group"),
        }
        _moe_layout(cfg, layers, moe_kwargs, where, notes)

    mla_kwargs: dict[str, int] = {}
    if cfg.get("kv_lora_rank"):
        mla_kwargs = {
            key: _int(cfg.get(key) or 0, where, key)
            for key in ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
        }
        head_dim = mla_kwargs["qk_nope_head_dim"] + mla_kwargs["qk_rope_head_dim"]

    learned_pos = 0
    if model_type == "opt":
        learned_pos = _int(cfg.get("max_position_embeddings", 2048), where, "max_position_embeddings") + 2
        if cfg.get("word_embed_proj_dim", hidden) != hidden:
            notes.append("word_embed_proj_dim != hidden_size: the projection matrices are not counted")

    try:
        return LLMArch(
            name=str(meta.get("name") or name or cfg.get("_name_or_path") or model_type or "custom"),
            hidden_size=hidden,
            num_layers=layers,
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=_int(head_dim, where, "head_dim"),
            intermediate_size=intermediate,
            vocab_size=_int(_first(cfg, ("vocab_size",), where, "vocab_size"), where, "vocab_size"),
            tie_embeddings=bool(cfg.get("tie_word_embeddings", model_type not in UNTIED_BY_DEFAULT)),
            gated_mlp=gated,
            learned_position_embeddings=learned_pos,
            max_context_tokens=int(cfg.get("max_position_embeddings") or cfg.get("seq_length") or 0),
            display_name=str(meta.get("display_name", "")),
            source=str(meta.get("source", where)),
            published_total_params=float(meta.get("published_total_params", 0.0)),
            published_active_params=float(meta.get("published_active_params", 0.0)),
            aliases=tuple(str(a).lower() for a in meta.get("aliases", ())),
            notes=tuple(notes),
            **moe_kwargs,
            **mla_kwargs,
            **attn_kwargs,
        )
    except ValueError as err:
        raise ProfileError(where, "(model)", str(err)) from None


def _moe_layout(
    cfg: Mapping[str, Any], layers: int, moe: dict[str, int], where: str, notes: list[str]
) -> None:
    """Dense-layer count and shared-expert count of an MoE config, in place.

    Llama 4: every ``interleave_moe_layer_step``-th layer is MoE (the others dense, of
    ``intermediate_size_mlp``), each MoE layer with one shared expert (Llama4TextMoe). A list
    ``moe_layer_freq`` (MiniMax-M3) must mark the first_k_dense_replace layers dense. Shared experts
    of ``shared_expert_intermediate_size`` (Qwen-MoE) or ``moe_shared_expert_intermediate_size``
    (Nemotron-H) count as that width / moe_intermediate_size experts.
    """
    step = cfg.get("interleave_moe_layer_step")
    if step is not None:
        step = _int(step, where, "interleave_moe_layer_step") or 1
        moe["num_dense_layers"] = layers - layers // step
        moe["num_shared_experts"] = max(1, moe["num_shared_experts"])
    freq = cfg.get("moe_layer_freq")
    if isinstance(freq, list):
        if freq.count(0) != moe["num_dense_layers"] or freq[: moe["num_dense_layers"]].count(1):
            notes.append(
                "moe_layer_freq is not 'first_k_dense_replace dense, then MoE': counted as if it were"
            )
    elif (freq or 1) != 1:
        notes.append("moe_layer_freq != 1 is not modelled (every layer after the dense ones is MoE)")
    shared = cfg.get("shared_expert_intermediate_size") or cfg.get("moe_shared_expert_intermediate_size")
    if shared:
        width = _int(shared, where, "shared_expert_intermediate_size")
        count, rest = divmod(width, moe["moe_intermediate_size"])
        if rest or not count:
            notes.append("the shared expert's width is not a multiple of moe size: counted as one expert")
            count = 1
        moe["num_shared_experts"] = max(count, moe["num_shared_experts"])


def load_hf_config(path: str | Path, *, max_bytes: int = MAX_PROFILE_BYTES) -> LLMArch:
    """Read a local ``config.json`` file (size-limited, plain JSON, no code execution)."""
    if not isinstance(path, str | Path) or not str(path).strip():
        raise InputError("path", short(path), "a config.json file path")
    p = Path(path)
    if not is_file(p):
        raise ProfileError(p.name, "(file)", "no such file")
    if p.stat().st_size > max_bytes:
        raise ProfileError(p.name, "(file)", f"larger than {max_bytes} bytes; a config.json is a few kB")
    return parse_hf_config_text(p.read_text(encoding="utf-8", errors="replace"), where=p.name, name=p.stem)


def parse_hf_config_text(text: str, *, where: str = "config.json", name: str = "") -> LLMArch:
    """Parse config.json text (used by the CLI and by uploads in the web app)."""
    if not isinstance(text, str):
        raise InputError("text", short(text), "config.json text (a str)")
    if len(text) > MAX_PROFILE_BYTES:
        raise ProfileError(
            where, "(file)", f"larger than {MAX_PROFILE_BYTES} characters; a config.json is a few kB"
        )
    try:  # nesting depth, integer digits and NaN/Infinity limited (model.limits)
        cfg = parse_json(text, where)
    except InputError as err:
        problem = "not valid JSON" if err.value == "(text)" else "not a readable config"
        raise ProfileError(where, "(file)", f"{problem}: expected {err.allowed}") from None
    return arch_from_hf_config(cfg, name=name if name != "config" else "", where=where)
