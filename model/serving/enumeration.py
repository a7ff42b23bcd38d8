"""Enumerate candidate configurations for a GPU budget (the built-in styles use these)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from model.errors import InputError
from model.hardware.gpus import GPU
from model.hardware.links import Link
from model.hardware.nodes import Node
from model.hardware.parallelism import Parallelism, as_parallelism, parse_parallelism
from model.llm.arch import LLMArch
from model.serving.candidates import link_for
from model.serving.configs import ColocatedConfig, DisaggregatedConfig
from model.serving.phase_tables import DEFAULT_CHUNK_OPTIONS as DEFAULT_CHUNK_OPTIONS  # re-exported

DEFAULT_TP_OPTIONS = (1, 2, 4, 8)
# Attention-DP degrees the planner tries for MoE models as DEP layouts (tp = 1, ep = dp), within
# the budget: from one node's 8 GPUs to the 32-GPU prefill (EP32) of DeepSeek's own deployment and
# the 72-GPU decode pools of SGLang's (DeepSeek-V3 report sec. 3.4; LMSYS 2025-05-05 large-scale EP).
DEFAULT_DP_OPTIONS = (2, 4, 8, 16, 32, 64)
# GPUs per node assumed for instances that span nodes when no node profile is given: the 8-GPU
# HGX/DGX baseboard of every datacenter node profile in the catalog (hardware_profiles/nodes).
DEFAULT_NODE_GPUS = 8


@dataclass(frozen=True)
class LayoutOptions:
    """The parallel layouts the planner enumerates beyond the TP degrees (``tp_options``).

    ``ep``: EP degrees to consider (None: 1 and TP x DP, i.e. TP, TEP and DEP layouts).
    ``dp_attention``: attention-DP degrees (None: DEFAULT_DP_OPTIONS as DEP layouts with TP1 for
    MoE models; given: every TP x DP combination). ``pp``: pipeline degrees (default 1 only, so
    dense plans keep their TP layouts). ``prefill`` / ``decode``: a fixed layout for the
    disaggregated prefill / decode pool (None: enumerate).
    """

    ep: tuple[int, ...] | None = None
    dp_attention: tuple[int, ...] | None = None
    pp: tuple[int, ...] = (1,)
    prefill: Parallelism | None = None
    decode: Parallelism | None = None


def valid_tps(arch: LLMArch, tp_options: Sequence[int], max_gpus: int, node: Node | None = None) -> list[int]:
    """TP degrees that divide the attention heads, fit the budget and, with a node profile, fit in one
    node (a TP group all-reduces twice per layer, which only the intra-node link can carry: instances
    beyond a node use EP, attention-DP or PP across nodes instead)."""
    limit = min(max_gpus, node.domain_gpus) if node is not None else max_gpus
    return sorted({tp for tp in tp_options if tp <= limit and arch.num_heads % tp == 0})


def nodes_spanned(gpus: int, node: Node | None, spans: bool = True) -> int | None:
    """NVLink domains an instance of ``gpus`` GPUs occupies (``Parallelism.nodes``): 1 when it fits in
    one (the profile's ``domain_gpus``: a server's GPUs, or a GB200/GB300 NVL72 rack's 72, else
    DEFAULT_NODE_GPUS), else gpus / GPUs per domain; None when it does not split evenly. A TP-only
    instance without a node profile (``spans`` False) stays on one node (one NVLink fabric assumed)."""
    per_node = node.domain_gpus if node is not None else DEFAULT_NODE_GPUS
    if gpus <= per_node or (node is None and not spans):
        return 1
    return gpus // per_node if gpus % per_node == 0 else None


def layout_from_text(field: str, text: str, node: Node | None = None) -> Parallelism:
    """A layout typed by a user ("dep=16", "tp=2,dp=4,ep=8"), placed on nodes of ``node`` (else of
    DEFAULT_NODE_GPUS GPUs) by :func:`nodes_spanned`; errors name ``field``."""
    par = parse_parallelism(field, text)
    nodes = nodes_spanned(par.gpus, node, spans=par.gpus > (node.domain_gpus if node else DEFAULT_NODE_GPUS))
    if nodes is None:
        raise InputError(field, text, "GPUs per instance within one node or a multiple of a node's GPUs")
    return par if nodes == par.nodes else Parallelism(par.tp, par.pp, par.ep, par.dp_attention, nodes)


def _layout(arch: LLMArch, tp: int, dp: int, ep: int, pp: int, node: Node | None) -> Parallelism | None:
    stage = tp * dp
    if pp > 1 and arch.num_layers % pp:
        return None
    if ep > 1 and (not arch.is_moe or arch.num_experts % ep or stage % ep):
        return None
    nodes = nodes_spanned(stage * pp, node, spans=dp > 1 or ep > 1 or pp > 1)
    return None if nodes is None else Parallelism(tp=tp, pp=pp, ep=ep, dp_attention=dp, nodes=nodes)


def candidate_layouts(
    arch: LLMArch,
    tp_options: Sequence[int],
    max_gpus: int,
    node: Node | None = None,
    options: LayoutOptions | None = None,
) -> list[Parallelism]:
    """The instance layouts the planner enumerates, smallest first (bounded: at most
    |tp| x |dp| x |pp| x |ep| layouts, 13 by default for an MoE model on 64 GPUs).

    Dense models: TP t for t in :func:`valid_tps` (x PP p for p in ``options.pp``). MoE models also:
    TEP t (tp = ep = t, experts split over the TP group) and DEP d (tp = 1, dp_attention = ep = d),
    or with ``options.dp_attention`` given every TP x DP with EP = TP x DP (or ``options.ep``).
    EP must divide the routed experts; instances larger than a node span gpus / GPUs-per-node nodes.
    """
    opts = options if options is not None else LayoutOptions()
    tps = valid_tps(arch, tp_options, max_gpus, node)
    out: set[Parallelism] = set()
    for tp in tps:
        if not arch.is_moe:
            dps: Sequence[int] = (1,)
        elif opts.dp_attention is not None:
            dps = opts.dp_attention
        else:
            dps = (1, *DEFAULT_DP_OPTIONS) if tp == 1 else (1,)
        for dp in dps:
            for pp in opts.pp:
                if tp * dp * pp > max_gpus:
                    continue
                eps = opts.ep if opts.ep is not None else ((1,) if dp == 1 else ()) + (tp * dp,)
                for ep in sorted(set(eps)):
                    par = _layout(arch, tp, dp, ep, pp, node)
                    if par is not None:
                        out.add(par)
    return sorted(out, key=lambda p: (p.gpus, p.pp, p.dp_attention, p.ep, p.tp))


def space_candidates(space: object, max_gpus: int) -> list[Parallelism]:
    """:func:`candidate_layouts` of a search space (its model, TP options, node, ``layout_options``)."""
    opts = getattr(space, "layout_options", None) or LayoutOptions()
    arch = space.scenario.arch  # type: ignore[attr-defined]
    return candidate_layouts(arch, space.tp_options, max_gpus, space.node, opts)  # type: ignore[attr-defined]


def space_layouts(space: object, max_gpus: int) -> tuple[list[Parallelism], list[Parallelism]]:
    """(prefill-side, decode-side) layouts of a search space (``model.serving.style.SearchSpace``):
    :func:`candidate_layouts` of its model, TP options, node and ``layout_options``, with a pool's
    fixed layout (``LayoutOptions.prefill`` / ``decode``) in place of the enumeration when given."""
    opts = getattr(space, "layout_options", None) or LayoutOptions()
    both = space_candidates(space, max_gpus)
    pre = [opts.prefill] if opts.prefill is not None and opts.prefill.gpus <= max_gpus else both
    dec = [opts.decode] if opts.decode is not None and opts.decode.gpus <= max_gpus else both
    return pre, dec


def gpu_kinds(gpu: GPU, decode_gpu: GPU) -> list[GPU]:
    """The GPU kinds a colocated search tries: the GPU, and the decode GPU when it differs."""
    return [gpu] if decode_gpu == gpu else [gpu, decode_gpu]


def colocated_for_budget(
    gpu: GPU, layouts: Sequence[Parallelism | int], gpus: int, chunk: int | None
) -> list[ColocatedConfig]:
    """One colocated configuration per layout (a whole number = TP-only): as many replicas as the
    budget holds."""
    out = []
    for layout in layouts:
        par = as_parallelism("tp", layout)
        if gpus // par.gpus >= 1:
            out.append(ColocatedConfig(gpu, par, gpus // par.gpus, chunk))
    return out


def nics_per_gpu(node: Node | None) -> float:
    """NICs per GPU of a node profile (1 without one): KV transfer lanes are capped by it."""
    if node is None:
        return 1.0
    return min(1.0, node.nics_per_node / node.gpus_per_node)


def disaggregated_for_budget(
    prefill_gpu: GPU,
    decode_gpu: GPU,
    prefill_layouts: Sequence[Parallelism | int],
    decode_layouts: Sequence[Parallelism | int],
    gpus: int,
    link: Link,
    node: Node | None = None,
    intra_link: Link | None = None,
    layerwise: bool = True,
) -> list[DisaggregatedConfig]:
    """Every split n_p x G_p + n_d x G_d of the budget that leaves fewer than G_d GPUs idle, where
    G_p, G_d are the GPUs of one prefill / decode instance (its TP for a TP-only layout).

    Splits whose pools pair up inside nodes (``node``, see ``link_for``) talk over its intra-node
    link; others over ``link``.
    """
    out = []
    node_gpus = node.domain_gpus if node is not None else None
    pars_p = [as_parallelism("prefill_tp", p) for p in prefill_layouts]
    pars_d = [as_parallelism("decode_tp", p) for p in decode_layouts]
    for par_p in pars_p:
        for par_d in pars_d:
            g_p, g_d = par_p.gpus, par_d.gpus
            for n_p in range(1, gpus // g_p + 1):
                n_d = (gpus - n_p * g_p) // g_d
                if n_d < 1:
                    break
                chosen = link_for(
                    n_p, g_p, n_d, g_d, link, node_gpus, intra_link if prefill_gpu == decode_gpu else None
                )
                out.append(
                    DisaggregatedConfig(
                        prefill_gpu, par_p, n_p, decode_gpu, par_d, n_d, chosen, layerwise, nics_per_gpu(node)
                    )
                )
    return out


def disaggregated_grid(
    prefill_gpu: GPU,
    decode_gpu: GPU,
    prefill: Parallelism | int,
    decode: Parallelism | int,
    gpus: int,
    link: Link,
    layerwise: bool = True,
) -> list[DisaggregatedConfig]:
    """Every (n_p, n_d) with n_p x G_p + n_d x G_d <= gpus (GPUs per instance of the ``prefill`` and
    ``decode`` layouts; a whole number = TP-only): the pool-size map."""
    par_p, par_d = as_parallelism("prefill_tp", prefill), as_parallelism("decode_tp", decode)
    g_p, g_d = par_p.gpus, par_d.gpus
    out = []
    for n_p in range(1, gpus // g_p + 1):
        for n_d in range(1, (gpus - n_p * g_p) // g_d + 1):
            out.append(DisaggregatedConfig(prefill_gpu, par_p, n_p, decode_gpu, par_d, n_d, link, layerwise))
    return out
