"""The planner's parallel-layout search space from a request: EP, attention-DP and PP degrees to
enumerate and fixed per-pool layouts, validated at the edge (model.serving.enumeration enumerates)."""

from __future__ import annotations

import numbers
from collections.abc import Sequence

from model.errors import InputError
from model.hardware.nodes import Node
from model.hardware.parallelism import MAX_DEGREE, Parallelism, parse_parallelism
from model.limits import MAX_OPTIONS
from model.llm.arch import LLMArch
from model.serving.enumeration import DEFAULT_NODE_GPUS, LayoutOptions, nodes_spanned


def _degrees(field: str, options: Sequence[int] | None) -> tuple[int, ...] | None:
    if options is None:
        return None
    if isinstance(options, str) or not isinstance(options, Sequence) or not options:
        raise InputError(field, options, "a non-empty list of whole numbers")
    if len(options) > MAX_OPTIONS:
        raise InputError(field, options, f"at most {MAX_OPTIONS} values (every combination is evaluated)")
    for v in options:
        if isinstance(v, bool) or not (isinstance(v, numbers.Integral) and 1 <= v <= MAX_DEGREE):
            raise InputError(field, v, f"degrees between 1 and {MAX_DEGREE}")
    return tuple(sorted({int(v) for v in options}))


def _fixed(
    field: str, value: str | Parallelism | None, arch: LLMArch, node: Node | None, gpus: int
) -> Parallelism | None:
    """A pool's fixed layout, placed on nodes and checked against the model, the node and the budget."""
    if value is None:
        return None
    par = value if isinstance(value, Parallelism) else parse_parallelism(field, value)  # type: ignore[arg-type]
    per_node = node.domain_gpus if node is not None else DEFAULT_NODE_GPUS  # one NVLink domain
    if par.gpus > gpus:
        raise InputError(
            field, par.label, f"an instance of at most the {gpus} GPUs allowed (it has {par.gpus})"
        )
    if node is not None and par.tp > per_node:
        raise InputError(
            field,
            par.label,
            f"TP within one node's NVLink domain ({per_node} GPUs of {node.name}); use EP or PP",
        )
    nodes = nodes_spanned(par.gpus, node, spans=par.gpus > per_node)
    if nodes is None:
        raise InputError(
            field, par.label, f"GPUs per instance <= {per_node} or a multiple of it (whole nodes)"
        )
    if (par.dp_attention > 1 or par.ep > 1) and not arch.is_moe:
        raise InputError(field, par.label, f"no EP or attention-DP for the dense model {arch.label}")
    if par.ep > 1 and arch.num_experts % par.ep:
        raise InputError(field, par.label, f"EP dividing {arch.label}'s {arch.num_experts} routed experts")
    if arch.num_heads % par.tp:
        raise InputError(field, par.label, f"TP dividing {arch.label}'s {arch.num_heads} attention heads")
    if par.nodes != nodes and not isinstance(value, Parallelism):
        par = Parallelism(par.tp, par.pp, par.ep, par.dp_attention, nodes)
    return par


def layout_options(
    arch: LLMArch,
    node: Node | None,
    gpus: int,
    ep: Sequence[int] | None = None,
    dp_attention: Sequence[int] | None = None,
    pp: Sequence[int] | None = None,
    prefill: str | Parallelism | None = None,
    decode: str | Parallelism | None = None,
) -> LayoutOptions:
    """Validated :class:`~model.serving.enumeration.LayoutOptions` for a plan of at most ``gpus`` GPUs:
    ``ep`` / ``dp_attention`` / ``pp`` degree lists (None: the defaults), ``prefill`` / ``decode``
    fixed pool layouts ("dep=32", "tp=8", a Parallelism). Errors name the request field."""
    eps = _degrees("ep_options", ep)
    dps = _degrees("dp_attention_options", dp_attention)
    pps = _degrees("pp_options", pp) or (1,)
    if eps is not None and any(e > 1 for e in eps) and not arch.is_moe:
        raise InputError(
            "ep_options", list(eps), f"[1] for the dense model {arch.label} (no experts to split)"
        )
    if eps is not None and arch.is_moe and any(arch.num_experts % e for e in eps):
        bad = [e for e in eps if arch.num_experts % e]
        raise InputError("ep_options", bad, f"divisors of {arch.label}'s {arch.num_experts} routed experts")
    if dps is not None and any(d > 1 for d in dps) and not arch.is_moe:
        raise InputError("dp_attention_options", list(dps), f"[1] for the dense model {arch.label}")
    return LayoutOptions(
        ep=eps,
        dp_attention=dps,
        pp=pps,
        prefill=_fixed("prefill_parallelism", prefill, arch, node, gpus),
        decode=_fixed("decode_parallelism", decode, arch, node, gpus),
    )
