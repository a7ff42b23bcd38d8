"""Row translation for benchmarks/peer_calculators.py: pure functions that turn one measurement row
(``validate_roofline.Row``) into one peer's request, or raise :class:`NotExpressible` with the reason
the peer cannot state it. No peer is imported here (they run in their own environment through
benchmarks/peer_driver.py); the assumptions made in translating are documented in docs/validation.md,
"Peer calculators side by side".
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import validate_roofline as v

from model.errors import PdplanError
from model.hardware.catalog import get_gpu
from model.llm.catalog import get_model

PEERS = ("aiconfigurator", "llm-analysis", "genz-llm")
# The two analytical peers again, with pdplan's per-GPU default efficiencies instead of their own
# default of 1 (peak compute and bandwidth): separates the efficiency constants from the structure.
VARIANTS = ("llm-analysis+eff", "genz-llm+eff")


class NotExpressible(Exception):
    """The peer has no way to state this row (no model, GPU, engine or format for it)."""


# ---------------------------------------------------------------------------------------------------
# Shared translation helpers


def metric_quantity(metric: str) -> str:
    """The peer output compared with a row's metric: prefill_s, tpot_s or e2e_s (same names)."""
    if metric not in ("prefill_s", "tpot_s", "e2e_s"):
        raise ValueError(f"unknown metric {metric!r}")
    return metric


# Words of the file's ``not_expressible`` column that describe the measurement itself, so no tool's
# static-batch prediction is comparable: speculative decoding, a closed-loop TTFT at concurrency > 1.
COMMON_REFUSAL_WORDS = ("speculative", "closed-loop ttft")


def _common_refusals(row: v.Row) -> None:
    """Rows left out for every peer: a measurement the file's ``not_expressible`` column marks as taken
    with speculative decoding or as a closed-loop TTFT (COMMON_REFUSAL_WORDS), and EP / attention-DP
    layouts (none in the table now)."""
    text = row.skip.lower()
    if text.startswith("not yet expressible") and any(w in text for w in COMMON_REFUSAL_WORDS):
        raise NotExpressible(row.skip)
    if row.ep != 1 or row.dp_attention != 1:
        raise NotExpressible("expert parallelism / attention-DP layout not translated")


def in_catalog(name: str) -> bool:
    try:
        get_model(name)
    except PdplanError:
        return False
    return True


def is_moe(name: str) -> bool:
    """True for a catalog mixture-of-experts model (False for a model outside the catalog)."""
    return in_catalog(name) and get_model(name).num_experts > 0


def is_plain_llama(name: str) -> bool:
    """Dense, gated-MLP, grouped-query attention with nothing else: the Llama architecture."""
    if not in_catalog(name):
        return False
    m = get_model(name)
    return (
        m.num_experts == 0
        and m.gated_mlp
        and not m.layer_pattern
        and m.kv_lora_rank == 0
        and m.attention_window == 0
        and m.num_heads * m.head_dim == m.hidden_size
    )


def hf_llama_config(name: str) -> dict:
    """A Hugging Face ``config.json`` (LlamaForCausalLM) holding the catalog model's published
    dimensions (the catalog cites each model's config.json)."""
    m = get_model(name)
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": m.hidden_size,
        "intermediate_size": m.intermediate_size,
        "num_hidden_layers": m.num_layers,
        "num_attention_heads": m.num_heads,
        "num_key_value_heads": m.num_kv_heads,
        "head_dim": m.head_dim,
        "vocab_size": m.vocab_size,
        "max_position_embeddings": m.max_context_tokens,
        "tie_word_embeddings": m.tie_embeddings,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "torch_dtype": "bfloat16",
    }


def datasheet(gpu_name: str) -> dict[str, float]:
    """Datasheet figures of pdplan's GPU profile (each cited in its TOML): memory GB, bandwidth GB/s,
    dense BF16 and FP8/INT8 TFLOPS, interconnect GB/s per direction."""
    g = get_gpu(gpu_name)
    peaks = dict(g.peak_flops_per_s)
    bf16 = peaks.get("bf16", peaks.get("fp16", 0.0))
    low = peaks.get("fp8", peaks.get("int8", 2 * bf16))
    return {
        "memory_gb": g.memory_bytes / 1e9,
        "bandwidth_gb_s": g.memory_bandwidth_bytes_per_s / 1e9,
        "bf16_tflops": bf16 / 1e12,
        "fp8_tflops": low / 1e12,
        "link_gb_s": g.interconnect_bandwidth_bytes_per_s / 1e9,
    }


# ---------------------------------------------------------------------------------------------------
# aiconfigurator 0.12.0

# Catalog model -> the Hugging Face id whose config.json the aiconfigurator-core wheel ships.
AIC_MODELS = {
    "llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B",
    "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B",
    "llama-3.1-405b": "meta-llama/Meta-Llama-3.1-405B",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
    "llama-3.3-nemotron-super-49b": "nvidia/Llama-3_3-Nemotron-Super-49B-v1",
    "nemotron-3-nano-30b-a3b": "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    "gpt-oss-20b": "openai/gpt-oss-20b",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
    "kimi-k2": "moonshotai/Kimi-K2-Instruct",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "glm-5": "zai-org/GLM-5",
}
# pdplan GPU -> aiconfigurator system with a measured database (systems/data/<system>/<backend>/...).
AIC_SYSTEMS = {
    "h100-sxm": "h100_sxm",
    "h200": "h200_sxm",
    "b200": "b200_sxm",
    "a100-80gb-sxm": "a100_sxm",
    "a100-40gb-sxm": "a100_sxm",  # same SXM4 silicon; only the memory size differs
    "l40s": "l40s",
    "rtx-pro-6000": "rtx_pro_6000_server",
}
# First word of the row's engine -> aiconfigurator backend (NIM runs TensorRT-LLM).
AIC_BACKENDS = {"tensorrt-llm": "trtllm", "nim": "trtllm", "vllm": "vllm", "sglang": "sglang"}
# Row weight format -> aiconfigurator GEMM / MoE quant mode (None: the checkpoint's own).
AIC_GEMM = {"fp16": "bfloat16", "bf16": "bfloat16", "fp8": "fp8", "nvfp4": "nvfp4", "mxfp4": None}
AIC_KV = {"fp16": "bfloat16", "bf16": "bfloat16", "fp8": "fp8"}


def aiconfigurator_request(row: v.Row) -> dict:
    """The aiconfigurator ``cli_estimate`` call for one row (static batch of ``batch`` requests)."""
    _common_refusals(row)
    system = AIC_SYSTEMS.get(row.gpu)
    if system is None:
        raise NotExpressible(f"no aiconfigurator system (measured database) for {row.gpu}")
    word = row.engine.strip().split()[0].lower() if row.engine.strip() else ""
    backend = AIC_BACKENDS.get(word)
    if backend is None:
        raise NotExpressible(f"engine {row.engine!r} is not an aiconfigurator backend (trtllm, vllm, sglang)")
    if row.dtype not in AIC_GEMM:
        raise NotExpressible(f"weight format {row.dtype} has no aiconfigurator quant mode")
    req: dict = {"row_id": row.id, "system": system}
    if row.model in AIC_MODELS:
        req["model"] = AIC_MODELS[row.model]
    elif is_plain_llama(row.model):
        req["model"] = row.model
        req["hf_config"] = hf_llama_config(row.model)
    else:
        raise NotExpressible(
            f"no aiconfigurator model config for {row.model} (not a plain Llama architecture)"
        )
    moe = is_moe(row.model)
    kw: dict = {
        "mode": "static_ctx" if row.metric == "prefill_s" else "static",
        "backend_name": backend,
        "database_mode": "SILICON",
        "isl": row.isl,
        "osl": max(row.osl, 2),
        "batch_size": row.batch,
        "tp_size": row.tp,
        "pp_size": row.pp,
    }
    gemm = AIC_GEMM[row.dtype]
    if gemm is not None and not moe:
        kw["gemm_quant_mode"] = gemm
    if moe and gemm is not None:
        kw["gemm_quant_mode"] = gemm
        kw["moe_quant_mode"] = gemm
    if moe:
        kw["moe_tp_size"] = row.tp
        kw["moe_ep_size"] = 1
    if row.kv_dtype in AIC_KV:
        kw["kvcache_quant_mode"] = AIC_KV[row.kv_dtype]
    req["kwargs"] = kw
    return req


# ---------------------------------------------------------------------------------------------------
# llm-analysis 0.2.2

# Catalog model -> a model config the llm-analysis wheel ships (llm_analysis/model_configs/*.json).
LLMA_MODELS = {
    "llama-2-7b": "NousResearch_Llama-2-7b-hf",
    "llama-2-13b": "decapoda-research_llama-13b-hf",  # LLaMA-1 13B: the same dimensions as Llama-2-13B
    "llama-2-70b": "upstage_Llama-2-70b-instruct-v2",
}
# pdplan GPU -> a GPU config the wheel ships (others: pdplan's datasheet figures, :func:`datasheet`).
LLMA_GPUS = {"a100-80gb-sxm": "a100-sxm-80gb", "a100-40gb-sxm": "a100-sxm-40gb", "h100-sxm": "h100-sxm-80gb"}
# Row weight format -> llm-analysis dtype config (weight bits, activation bits, embedding 16).
LLMA_DTYPES = {
    "fp16": "w16a16e16",
    "bf16": "w16a16e16",
    "fp8": "w8a8e16",
    "int8": "w8a8e16",
    "q8_0": "w8a16e16",
    "int4": "w4a16e16",
    "q4_0": "w4a16e16",
}
KV_BYTES = {"fp16": 2, "bf16": 2, "fp8": 1}


def llm_analysis_ffn(hidden: int, intermediate: int) -> int:
    """llm-analysis's ``ffn_embed_dim`` for a gated MLP: 1.5 x intermediate (same weights in its two
    matrices as in the three gated ones), rounded to the nearest multiple of ``hidden`` (it requires one)."""
    return max(1, round(1.5 * intermediate / hidden)) * hidden


def llm_analysis_request(row: v.Row) -> dict:
    """The llm-analysis ``infer`` call for one row (dense models only: it has no MoE routing)."""
    _common_refusals(row)
    if row.dtype not in LLMA_DTYPES:
        raise NotExpressible(f"weight format {row.dtype} has no llm-analysis dtype config")
    req: dict = {"row_id": row.id, "gpu": LLMA_GPUS.get(row.gpu, row.gpu)}
    if row.model in LLMA_MODELS:
        req["model"] = LLMA_MODELS[row.model]
    elif is_plain_llama(row.model):
        # Its MLP is two matrices of hidden x ffn_embed_dim: 1.5 x intermediate keeps the gated
        # MLP's three matrices' weights and FLOPs (the wheel's own Llama-2-7B config uses 4 x hidden);
        # it refuses an ffn_embed_dim that is not a multiple of hidden_dim, so the nearest multiple.
        m = get_model(row.model)
        req["model"] = row.model
        req["model_config"] = {
            "name": row.model,
            "num_layers": m.num_layers,
            "n_head": m.num_heads,
            "hidden_dim": m.hidden_size,
            "vocab_size": m.vocab_size,
            "max_seq_len": m.max_context_tokens,
            "num_key_value_heads": m.num_kv_heads,
            "ffn_embed_dim": llm_analysis_ffn(m.hidden_size, m.intermediate_size),
            "model_type": "llama",
        }
    else:
        raise NotExpressible(f"no llm-analysis model config for {row.model} (not a plain Llama architecture)")
    if row.gpu not in LLMA_GPUS:
        d = datasheet(row.gpu)
        req["gpu_config"] = {
            "name": row.gpu,
            "mem_per_GPU_in_GB": d["memory_gb"],
            "hbm_bandwidth_in_GB_per_sec": d["bandwidth_gb_s"],
            "intra_node_bandwidth_in_GB_per_sec": d["link_gb_s"],
            "intra_node_min_message_latency": 8e-06,  # the wheel's value for A100/H100
            "peak_fp16_TFLOPS": d["bf16_tflops"],
            "peak_i8_TFLOPS": d["fp8_tflops"],
            "peak_i4_TFLOPS": 2 * d["fp8_tflops"],
            "inter_node_bandwidth_in_GB_per_sec": 50.0,
        }
    req["kwargs"] = {
        "dtype_name": LLMA_DTYPES[row.dtype],
        "batch_size_per_gpu": row.batch,
        "tp_size": row.tp,
        "pp_size": row.pp,
        "seq_len": row.isl,
        "num_tokens_to_generate": max(row.osl, 1),
        "kv_cache_dtype_bytes": KV_BYTES.get(row.kv_dtype, 2),
    }
    return req


# ---------------------------------------------------------------------------------------------------
# genz-llm 0.0.16

# Catalog model -> GenZ's model name (GenZ/Models/Model_sets/*.py).
GENZ_MODELS = {
    "llama-2-7b": "meta-llama/Llama-2-7B",
    "llama-2-13b": "meta-llama/Llama-2-13B",
    "llama-2-70b": "meta-llama/Llama-2-70B",
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B",
    "llama-3.1-70b": "meta-llama/Llama-3.1-70B",
    "llama-3.1-405b": "meta-llama/Llama-3.1-405B",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B",
}
# pdplan GPU -> GenZ's system preset (Systems/system_configs.py); others: datasheet figures.
GENZ_SYSTEMS = {
    "a100-40gb-sxm": "A100_40GB_GPU",
    "a100-80gb-sxm": "A100_80GB_GPU",
    "h100-sxm": "H100_GPU",
    "mi300x": "MI300X",
}
GENZ_BITS = {
    "fp16": "bf16",
    "bf16": "bf16",
    "fp8": "fp8",
    "int8": "int8",
    "q8_0": "int8",
    "int4": "int4",
    "q4_0": "int4",
}
GENZ_BITS.update({"nvfp4": "fp4", "mxfp4": "fp4"})


def genz_request(row: v.Row) -> dict:
    """GenZ's ``prefill_moddeling`` / ``decode_moddeling`` call for one row (its default efficiency 1)."""
    _common_refusals(row)
    if row.model not in GENZ_MODELS:
        raise NotExpressible(f"no GenZ model definition for {row.model}")
    if row.dtype not in GENZ_BITS:
        raise NotExpressible(f"weight format {row.dtype} has no GenZ bit width")
    if row.gpu in GENZ_SYSTEMS:
        system: str | dict = GENZ_SYSTEMS[row.gpu]
    else:
        d = datasheet(row.gpu)
        system = {
            "Flops": d["bf16_tflops"],
            "Memory_size": d["memory_gb"],
            "Memory_BW": d["bandwidth_gb_s"],
            "ICN": d["link_gb_s"],
            "real_values": True,
        }
    return {
        "row_id": row.id,
        "model": GENZ_MODELS[row.model],
        "decode_generated_tokens": row.osl // 2,
        "system": system,
        "kwargs": {
            "batch_size": row.batch,
            "input_tokens": row.isl,
            "output_tokens": row.osl,
            "bits": GENZ_BITS[row.dtype],
            "tensor_parallel": row.tp,
            "pipeline_parallel": row.pp,
        },
    }


def llm_analysis_eff_request(row: v.Row) -> dict:
    """:func:`llm_analysis_request` with pdplan's GPU profile efficiencies: ``flops_efficiency`` =
    prefill MFU, ``hbm_memory_efficiency`` = decode MBU (its defaults are 1)."""
    req = llm_analysis_request(row)
    g = get_gpu(row.gpu)
    req["kwargs"] |= {"flops_efficiency": g.prefill_mfu, "hbm_memory_efficiency": g.decode_mbu}
    return req


def genz_eff_request(row: v.Row) -> dict:
    """:func:`genz_request` with pdplan's GPU profile efficiencies: GenZ's one ``system_eff`` (compute
    and memory) is the prefill MFU for the prefill call and the decode MBU for the decode call."""
    g = get_gpu(row.gpu)
    return genz_request(row) | {"prefill_eff": g.prefill_mfu, "decode_eff": g.decode_mbu}


TRANSLATORS: dict[str, Callable[[v.Row], dict]] = {
    "aiconfigurator": aiconfigurator_request,
    "llm-analysis": llm_analysis_request,
    "genz-llm": genz_request,
    "llm-analysis+eff": llm_analysis_eff_request,
    "genz-llm+eff": genz_eff_request,
}


def translate(peer: str, rows: list[v.Row]) -> tuple[list[dict], dict[str, str]]:
    """(requests, {row id: why not expressible}) for one peer over the rows pdplan scores."""
    requests, refused = [], {}
    for row in rows:
        try:
            requests.append(TRANSLATORS[peer](row))
        except NotExpressible as err:
            refused[row.id] = str(err)
        except PdplanError as err:
            refused[row.id] = f"catalog: {str(err).split(';')[0]}"
    return requests, refused
