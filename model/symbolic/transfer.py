"""Symbolic communication: KV transfer (whole request and layer-wise pipelined) and ring all-reduce."""

from __future__ import annotations

from functools import cache

import sympy as sp

from model.symbolic.core import Formula, make_formula
from model.symbolic.symbols import symbol

__all__ = ["BUILDERS", "per_layer_expr", "tail_expr", "transfer_whole_expr"]


def transfer_whole_expr() -> sp.Expr:
    s = symbol
    return s("link_latency_s") + s("kv_bytes") / (
        s("lanes") * s("link_bandwidth_bytes_per_s") * s("link_efficiency")
    )


def per_layer_expr() -> sp.Expr:
    s = symbol
    return s("link_latency_s") + s("kv_bytes") / (
        s("num_layers") * s("lanes") * s("link_bandwidth_bytes_per_s") * s("link_efficiency")
    )


def tail_expr(per_layer: sp.Expr) -> sp.Expr:
    s = symbol
    return s("num_layers") * per_layer - s("prefill_s") + s("prefill_s") / s("num_layers")


_TRANSFER_INPUTS = ("kv_bytes", "link_latency_s", "lanes", "link_bandwidth_bytes_per_s", "link_efficiency")
_TRANSFER_SOURCE = (
    "Alpha-beta model (Hockney 1994, Parallel Computing 20(3)); lanes = min(TP_p, TP_d), each TP rank "
    "sends its own heads' KV (Splitwise, Patel et al. ISCA 2024, sec. 4.3; Mooncake transfer engine)."
)


@cache
def _kv_transfer_whole() -> Formula:
    return make_formula(
        "kv_transfer_whole",
        "KV transfer of a whole request after its prefill (exposed in full).",
        r"t_{\mathrm{xfer}}",
        transfer_whole_expr(),
        _TRANSFER_INPUTS,
        _TRANSFER_SOURCE + " Numeric: model.serving.disaggregated.transfer_components (whole-request).",
        result_unit="s",
        assumptions="One message per request; bw is one lane's line rate, epsilon its achievable fraction.",
    )


@cache
def _kv_transfer_layerwise() -> Formula:
    s = symbol
    t_l = s("per_layer_transfer_s")
    expr = sp.Max(t_l, tail_expr(t_l))
    return make_formula(
        "kv_transfer_layerwise",
        "Exposed KV transfer time with layer-wise sending pipelined behind the prefill.",
        r"t_{\mathrm{exposed}}",
        expr,
        (*_TRANSFER_INPUTS, "num_layers", "prefill_s"),
        "Splitwise (Patel et al. ISCA 2024), sec. 4.3: layer l's KV is sent while layers l+1..L compute. "
        "With per-layer compute t_pre / L and per-layer transfer t_l, the last layer's KV lands at "
        "t_pre + t_l when t_l <= t_pre / L, else t_pre / L + L t_l. Numeric: "
        "model.serving.disaggregated.transfer_components (layer-wise).",
        result_unit="s",
        where=[("per_layer_transfer_s", per_layer_expr())],
        assumptions="L equal layers, one message per layer, prefill compute spread evenly over the layers.",
        order=None,
    )


@cache
def _allreduce_ring() -> Formula:
    s = symbol
    p = s("n_gpus")
    per_step = s("allreduce_latency_s") + s("message_bytes") / (p * s("allreduce_bandwidth_bytes_per_s"))
    expr = sp.Mul(2, p - 1, per_step, evaluate=False)
    return make_formula(
        "allreduce_ring",
        "One ring all-reduce of M bytes over p GPUs (reduce-scatter + all-gather).",
        r"t_{\mathrm{AR}}",
        expr,
        ("message_bytes", "n_gpus", "allreduce_latency_s", "allreduce_bandwidth_bytes_per_s"),
        "Patarasuk & Yuan 2009, JPDC 69(2); NCCL tests' busbw = algbw 2(p-1)/p. "
        "Numeric: model.hardware.collectives.allreduce_time_s.",
        result_unit="s",
        assumptions="beta = achievable per-direction bandwidth of one GPU (line rate x efficiency).",
        order=None,
    )


BUILDERS = {
    "kv_transfer_whole": _kv_transfer_whole,
    "kv_transfer_layerwise": _kv_transfer_layerwise,
    "allreduce_ring": _allreduce_ring,
}
"""The formulas of this module by name, in display order (collected by model.symbolic.formulas)."""
