"""Symbolic roofline: prefill time, decode step time and KV bytes per token, and their values taken
from a model.physics.deployment.Deployment (for the web app's "Show the math" panel)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
import sympy as sp

from model.errors import InputError
from model.symbolic.core import Formula, make_formula
from model.symbolic.symbols import check_scalar, symbol

if TYPE_CHECKING:
    from model.physics.deployment import Deployment

__all__ = ["BUILDERS", "decode_values", "prefill_values"]

_ROOFLINE_INPUTS = (
    "linear_params",
    "vocab_size",
    "hidden_size",
    "num_heads",
    "num_layers",
    "qk_head_dim",
    "v_head_dim",
    "tp",
    "peak_flops_per_s",
    "gemm_mfu",
    "attention_peak_flops_per_s",
    "mfu",
    "gemm_exposed_weight_fraction",
    "weight_bytes_per_gpu",
    "kv_bytes_per_token_per_gpu",
    "activation_bytes_per_gpu",
    "memory_bandwidth_bytes_per_s",
    "mbu",
    "comm_s",
    "overhead_s",
)


def _roofline_time(
    linear_flops: sp.Expr,
    attention_flops: sp.Expr,
    bytes_moved: sp.Expr,
    decode_kv_s: sp.Expr | None = None,
    decode_kv_bytes: sp.Expr | None = None,
) -> tuple[sp.Expr, list[tuple[str, sp.Expr]]]:
    """max(compute, memory) + comm + overhead, with its definitions (model.physics.steps._step).
    ``decode_kv_bytes`` of ``bytes_moved`` stream in ``decode_kv_s`` instead of at BW x MBU."""
    s = symbol
    stream_bw = s("memory_bandwidth_bytes_per_s") * s("mbu")
    compute = (
        s("linear_flops") / (s("tp") * s("peak_flops_per_s") * s("gemm_mfu"))
        + s("gemm_exposed_weight_fraction") * s("weight_bytes_per_gpu") / stream_bw
        + s("attention_flops") / (s("tp") * s("attention_peak_flops_per_s") * s("mfu"))
    )
    memory = s("bytes_moved") / stream_bw
    if decode_kv_s is not None and decode_kv_bytes is not None:
        memory = (s("bytes_moved") - decode_kv_bytes) / stream_bw + decode_kv_s
    expr = sp.Max(s("compute_s"), s("memory_s")) + s("comm_s") + s("overhead_s")
    where = [
        ("compute_s", compute),
        ("memory_s", memory),
        ("linear_flops", linear_flops),
        ("attention_flops", attention_flops),
        ("bytes_moved", bytes_moved),
    ]
    return expr, where


_ROOFLINE_SOURCE = (
    "Roofline (Williams, Waterman & Patterson 2009, CACM 52(4)); FLOPs 2N per token (Kaplan et al. 2020, "
    "sec. 2.1); causal attention n(n+1)/2 key pairs (FlashAttention, Dao 2023); weights read once per "
    "step (Pope et al. 2022, sec. 2); TP split (Megatron-LM, Shoeybi et al. 2019); small-GEMM "
    "efficiency MFU x T / (T + T_half) in additive form (model.physics.steps.gemm_mfu_at)."
)


@cache
def _prefill_time() -> Formula:
    s = symbol
    n = s("prompt_tokens")
    lin = 2 * s("linear_params") * n + 2 * s("vocab_size") * s("hidden_size")
    att = s("num_heads") * s("num_layers") * (s("qk_head_dim") + s("v_head_dim")) * n * (n + 1)
    mem = s("weight_bytes_per_gpu") + 2 * n * s("kv_bytes_per_token_per_gpu") + s("activation_bytes_per_gpu")
    expr, where = _roofline_time(lin, att, mem)
    return make_formula(
        "prefill_time",
        "Prefill of one prompt of n tokens on one instance (roofline).",
        r"t_{\mathrm{prefill}}",
        expr,
        ("prompt_tokens", *_ROOFLINE_INPUTS),
        _ROOFLINE_SOURCE + " Numeric: model.physics.steps.prefill_cost (batch 1, no cached prefix, PP = 1).",
        result_unit="s",
        where=where,
        assumptions=(
            "One prompt, no prefix cache, PP = 1. N_lin = active non-embedding parameters (MoE: routed "
            "experts at their grouped GEMMs' padded rows); only the last "
            "token needs the LM head (2 V h). Linear layers run at the weight format's peak P_lin x "
            "MFU_lin (MFU x 0.7 for 8/4-bit GEMMs), plus phi W / (BW MBU) for the weight loads small "
            "GEMMs do not hide (phi = model.physics.deployment.GEMM_EXPOSED_WEIGHT_FRACTION); attention "
            "runs at "
            "the 16-bit peak. The KV is written and "
            "read once (2 n k_gpu); A is the activation traffic (embedding rows, layer inputs/outputs, "
            "logits). t_comm = TP all-reduces (formula allreduce_ring for the ring; steps use the "
            "algorithm the engine picks, model.hardware.collective_algorithms), t_oh = engine step "
            "overhead + per-sequence cost + per-kernel floor + eager kernel launches "
            "(model.hardware.overheads)."
        ),
    )


@cache
def _decode_step_time() -> Formula:
    s = symbol
    b, ctx = s("batch"), s("context_tokens")
    lin = 2 * s("linear_params") * b + 2 * s("vocab_size") * s("hidden_size") * b
    att = 2 * s("num_heads") * s("num_layers") * (s("qk_head_dim") + s("v_head_dim")) * b * ctx
    k = s("kv_bytes_per_token_per_gpu")
    mem = s("weight_bytes_per_gpu") + b * (ctx + 1) * k + s("activation_bytes_per_gpu")
    kv_s = (
        b
        * (ctx + s("decode_attention_fixed_tokens"))
        * k
        / (s("memory_bandwidth_bytes_per_s") * s("decode_kv_stream_efficiency"))
    )
    expr, where = _roofline_time(lin, att, mem, kv_s, b * ctx * k)
    return make_formula(
        "decode_step_time",
        "One decode step: B sequences each emit one token attending to n_ctx keys (roofline).",
        r"t_{\mathrm{step}}",
        expr,
        (
            "batch",
            "context_tokens",
            *_ROOFLINE_INPUTS,
            "decode_kv_stream_efficiency",
            "decode_attention_fixed_tokens",
        ),
        _ROOFLINE_SOURCE + " KV read B n_ctx, written B (Kwon et al. 2023, PagedAttention); decode "
        "attention streams the KV at eta_kv of BW with a fixed cost of C_att tokens per sequence "
        "(model.physics.deployment.DECODE_KV_STREAM_EFFICIENCY, DECODE_ATTENTION_FIXED_TOKENS). "
        "Numeric: model.physics.steps.decode_step_cost (PP = 1).",
        result_unit="s",
        where=where,
        assumptions=(
            "PP = 1. MLA models attend over the latent (absorbed projections): d_qk = r_kv + d_rope, "
            "d_v = r_kv. MoE: W counts the expected distinct experts the batch touches; N_lin counts the "
            "routed experts' grouped GEMMs at their padded rows (whole 128-row tiles)."
        ),
    )


@cache
def _kv_bytes_gqa() -> Formula:
    s = symbol
    expr = 2 * s("num_layers") * s("num_kv_heads") * s("head_dim") * s("kv_element_bytes")
    return make_formula(
        "kv_bytes_per_token_gqa",
        "KV-cache bytes one token adds (MHA/GQA/MQA): K and V per layer per KV head.",
        r"k_{\mathrm{GQA}}",
        expr,
        ("num_layers", "num_kv_heads", "head_dim", "kv_element_bytes"),
        "Pope et al. 2022, 'Efficiently Scaling Transformer Inference', sec. 2; Ainslie et al. 2023 (GQA). "
        "Numeric: model.llm.arch.kv_bytes_per_token.",
        result_unit="B",
    )


@cache
def _kv_bytes_mla() -> Formula:
    s = symbol
    expr = s("num_layers") * (s("kv_lora_rank") + s("qk_rope_head_dim")) * s("kv_element_bytes")
    return make_formula(
        "kv_bytes_per_token_mla",
        "KV-cache bytes one token adds (MLA): the compressed latent and the shared RoPE key per layer.",
        r"k_{\mathrm{MLA}}",
        expr,
        ("num_layers", "kv_lora_rank", "qk_rope_head_dim", "kv_element_bytes"),
        "DeepSeek-V2 (DeepSeek-AI 2024), sec. 2.1.3. Numeric: model.llm.arch.kv_bytes_per_token.",
        result_unit="B",
    )


BUILDERS = {
    "prefill_time": _prefill_time,
    "decode_step_time": _decode_step_time,
    "kv_bytes_per_token_gqa": _kv_bytes_gqa,
    "kv_bytes_per_token_mla": _kv_bytes_mla,
}
"""The formulas of this module by name, in display order (collected by model.symbolic.formulas)."""


# ----------------------------------------------------------------------------------------------
# Values from a deployment (for the "Show the math" panel).


def _linear_params(dep: Deployment, tokens: float) -> float:
    """N_lin: active non-embedding weights, the routed experts' counted at their grouped GEMMs'
    padded rows (model.physics.expert_parallel.grouped_gemm_rows at ``tokens`` step tokens)."""
    from model.llm.arch import active_params, embedding_params
    from model.physics.expert_parallel import grouped_gemm_rows, rows_per_expert
    from model.physics.operators import linear_flops_per_token

    arch = dep.arch
    base = float(active_params(arch) - embedding_params(arch))
    if not arch.is_moe:
        return base
    rows = float(rows_per_expert(arch, np.asarray(tokens, dtype=float)))
    routed = linear_flops_per_token(arch)["experts"] / 2.0
    return base + routed * (float(grouped_gemm_rows(rows)) / rows - 1.0)


def _roofline_values(dep: Deployment, cost: _CostView) -> dict[str, float]:
    from model.physics.deployment import GEMM_EXPOSED_WEIGHT_FRACTION
    from model.physics.operators import attention_dims as _attention_dims

    arch = dep.arch
    return {
        "linear_params": _linear_params(dep, cost.tokens),
        "vocab_size": float(arch.vocab_size),
        "hidden_size": float(arch.hidden_size),
        "num_heads": float(arch.num_heads),
        "num_layers": float(arch.num_layers),
        "tp": float(dep.tp),
        "peak_flops_per_s": float(dep.peak_flops_per_s),
        "gemm_mfu": float(dep.gemm_mfu),
        "attention_peak_flops_per_s": float(dep.attention_peak_flops_per_s),
        "mfu": float(dep.mfu),
        "gemm_exposed_weight_fraction": float(GEMM_EXPOSED_WEIGHT_FRACTION),
        "weight_bytes_per_gpu": float(np.asarray(cost.weight_bytes)),
        "kv_bytes_per_token_per_gpu": float(dep.kv_bytes_per_token_per_gpu),
        "activation_bytes_per_gpu": float(np.asarray(cost.activation_bytes)),
        "memory_bandwidth_bytes_per_s": float(dep.gpu.memory_bandwidth_bytes_per_s),
        "mbu": float(dep.mbu),
        "comm_s": float(np.asarray(cost.comm_s)),
        "overhead_s": float(np.asarray(cost.overhead_s)),
    } | dict(zip(("qk_head_dim", "v_head_dim"), _attention_dims(arch, absorbed=cost.absorbed), strict=True))


@dataclass(frozen=True)
class _CostView:
    weight_bytes: float
    activation_bytes: float
    comm_s: float
    overhead_s: float
    absorbed: bool
    tokens: float


def prefill_values(dep: Deployment, prompt_tokens: float) -> dict[str, float]:
    """Values for :func:`formula` ``"prefill_time"`` from a model.physics.deployment.Deployment (PP = 1).

    W, A, t_comm and t_oh are taken from model.physics.steps.prefill_cost; the rest from the deployment.
    """
    from model.physics.steps import prefill_cost

    if int(dep.pp) != 1:
        raise InputError("pp", dep.pp, "1 (the symbolic roofline shows one pipeline stage)")
    n = check_scalar("prompt_tokens", prompt_tokens, 1)
    cost = prefill_cost(dep, n)
    view = _CostView(
        float(cost.weight_bytes),
        float(cost.activation_bytes),
        float(cost.comm_s),
        float(cost.overhead_s),
        False,
        n,
    )
    return _roofline_values(dep, view) | {"prompt_tokens": n}


def decode_values(dep: Deployment, batch: float, context_tokens: float) -> dict[str, float]:
    """Values for :func:`formula` ``"decode_step_time"`` from a Deployment (PP = 1)."""
    from model.physics.steps import decode_step_cost

    if int(dep.pp) != 1:
        raise InputError("pp", dep.pp, "1 (the symbolic roofline shows one pipeline stage)")
    b = check_scalar("batch", batch, 1)
    ctx = check_scalar("context_tokens", context_tokens, 1)
    cost = decode_step_cost(dep, b, ctx)
    view = _CostView(
        float(cost.weight_bytes),
        float(cost.activation_bytes),
        float(cost.comm_s),
        float(cost.overhead_s),
        True,
        float(cost.tokens),
    )
    return _roofline_values(dep, view) | {
        "batch": b,
        "context_tokens": ctx,
        "decode_kv_stream_efficiency": dep.decode_kv_bandwidth / dep.gpu.memory_bandwidth_bytes_per_s,
        "decode_attention_fixed_tokens": dep.attention_fixed_tokens,
    }
