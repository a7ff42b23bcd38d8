"""The shared symbol table of the symbolic layer, and the check every numeric input passes.

One sympy Symbol per value name, shared by every formula. The Symbol's own name is the value name (a
Python identifier, so lambdify needs no renaming); its LaTeX and SI unit live in :data:`SYMBOLS`.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import sympy as sp

from model.errors import InputError

__all__ = ["SYMBOLS", "check_scalar", "check_value", "latex_names", "symbol", "unit"]

SYMBOLS: dict[str, tuple[str, str, bool]] = {
    # key: (LaTeX, SI unit, integer-valued)
    # roofline
    "prompt_tokens": (r"n", "tokens", False),
    "batch": (r"B", "sequences", False),
    "context_tokens": (r"n_{\mathrm{ctx}}", "tokens", False),
    "linear_params": (r"N_{\mathrm{lin}}", "params", False),
    "vocab_size": (r"V", "tokens", False),
    "hidden_size": (r"h", "", False),
    "num_heads": (r"n_{h}", "", False),
    "num_layers": (r"L", "", True),
    "qk_head_dim": (r"d_{qk}", "", False),
    "v_head_dim": (r"d_{v}", "", False),
    "tp": (r"\mathrm{TP}", "GPUs", False),
    "peak_flops_per_s": (r"P_{\mathrm{lin}}", "FLOP/s", False),
    "gemm_mfu": (r"\mathrm{MFU}_{\mathrm{lin}}", "", False),
    "attention_peak_flops_per_s": (r"P_{16}", "FLOP/s", False),
    "mfu": (r"\mathrm{MFU}", "", False),
    "gemm_exposed_weight_fraction": (r"\phi", "", False),
    "memory_bandwidth_bytes_per_s": (r"\mathrm{BW}", "B/s", False),
    "mbu": (r"\mathrm{MBU}", "", False),
    "decode_kv_stream_efficiency": (r"\eta_{\mathrm{kv}}", "", False),
    "decode_attention_fixed_tokens": (r"C_{\mathrm{att}}", "tokens", False),
    "weight_bytes_per_gpu": (r"W", "B", False),
    "kv_bytes_per_token_per_gpu": (r"k_{\mathrm{gpu}}", "B", False),
    "activation_bytes_per_gpu": (r"A", "B", False),
    "comm_s": (r"t_{\mathrm{comm}}", "s", False),
    "overhead_s": (r"t_{\mathrm{oh}}", "s", False),
    "linear_flops": (r"F_{\mathrm{lin}}", "FLOP", False),
    "attention_flops": (r"F_{\mathrm{att}}", "FLOP", False),
    "compute_s": (r"t_{\mathrm{compute}}", "s", False),
    "memory_s": (r"t_{\mathrm{memory}}", "s", False),
    "bytes_moved": (r"D", "B", False),
    # KV bytes
    "num_kv_heads": (r"n_{kv}", "", False),
    "head_dim": (r"d", "", False),
    "kv_lora_rank": (r"r_{kv}", "", False),
    "qk_rope_head_dim": (r"d_{\mathrm{rope}}", "", False),
    "kv_element_bytes": (r"b", "B", False),
    # KV transfer
    "kv_bytes": (r"K", "B", False),
    "link_latency_s": (r"\alpha", "s", False),
    "lanes": (r"m", "lanes", False),
    "link_bandwidth_bytes_per_s": (r"\mathrm{bw}", "B/s", False),
    "link_efficiency": (r"\varepsilon", "", False),
    "prefill_s": (r"t_{\mathrm{pre}}", "s", False),
    "per_layer_transfer_s": (r"t_{l}", "s", False),
    # all-reduce
    "message_bytes": (r"M", "B", False),
    "n_gpus": (r"p", "GPUs", False),
    "allreduce_latency_s": (r"\alpha_{\mathrm{AR}}", "s", False),
    "allreduce_bandwidth_bytes_per_s": (r"\beta", "B/s", False),
    # queueing
    "rate_rps": (r"\lambda", "1/s", False),
    "mean_service_s": (r"\mathrm{E}[S]", "s", False),
    "scv_service": (r"c_{s}^{2}", "", False),
    "utilisation": (r"\rho", "", False),
    "service_rate_per_s": (r"\mu", "1/s", False),
    "servers": (r"c", "servers", True),
    "offered_load": (r"a", "Erlang", False),
    "erlang_p": (r"P_{c}", "", False),
    # decode batch and colocated
    "mean_output_tokens": (r"\mathrm{E}[O]", "tokens", False),
    "step_time_intercept_s": (r"t_{0}", "s", False),
    "step_time_slope_s": (r"t_{1}", "s", False),
    "batch_star": (r"B^{*}", "sequences", False),
    "decode_step_s": (r"t_{\mathrm{dec}}", "s", False),
    "rate_per_replica_rps": (r"\lambda_{r}", "1/s", False),
    "mean_prefill_s": (r"\mathrm{E}[S_{p}]", "s", False),
    "prefill_utilisation": (r"\rho_{p}", "", False),
    # thresholds
    "slack_s": (r"t_{\mathrm{slack}}", "s", False),
    "prefill_s_per_token": (r"s_{\mathrm{tok}}", "s", False),
    "kv_bytes_per_token": (r"k", "B", False),
    "tpot_slo_s": (r"T_{\mathrm{TPOT}}", "s", False),
    "wait_budget_s": (r"W_{\max}", "s", False),
}


@cache
def symbol(key: str) -> sp.Symbol:
    """The shared Symbol for value ``key`` (positive; integer where the quantity is a count)."""
    if key not in SYMBOLS:
        raise KeyError(key)  # programming error inside this module, not user input
    integer = SYMBOLS[key][2]
    return sp.Symbol(key, positive=True, integer=integer) if integer else sp.Symbol(key, positive=True)


def latex_names() -> dict[sp.Symbol, str]:
    return {symbol(k): v[0] for k, v in SYMBOLS.items()}


def unit(key: str) -> str:
    return SYMBOLS[key][1]


def check_value(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise InputError(key, value, "a finite real number")
    v = float(value)
    if not math.isfinite(v):
        raise InputError(key, value, "a finite real number")
    return v


def check_scalar(name: str, value: object, minimum: float) -> float:
    v = check_value(name, value)
    if v < minimum:
        raise InputError(name, value, f"a number >= {minimum:g}")
    return v
