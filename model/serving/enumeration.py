"""Enumerate candidate configurations for a GPU budget (the built-in styles use these)."""

from __future__ import annotations

from collections.abc import Sequence

from model.hardware.gpus import GPU
from model.hardware.links import Link
from model.hardware.nodes import Node
from model.hardware.parallelism import Parallelism, as_parallelism
from model.llm.arch import LLMArch
from model.serving.candidates import link_for
from model.serving.configs import ColocatedConfig, DisaggregatedConfig

DEFAULT_TP_OPTIONS = (1, 2, 4, 8)
DEFAULT_CHUNK_OPTIONS = (256, 512, 1024, 2048, 4096)


def valid_tps(arch: LLMArch, tp_options: Sequence[int], max_gpus: int, node: Node | None = None) -> list[int]:
    """TP degrees that divide the attention heads, fit the budget and, with a node profile, fit in one
    node (a TP group all-reduces twice per layer, which only the intra-node link can carry: TP beyond
    a node is what pipeline parallelism is for, and the planner does not enumerate PP)."""
    limit = min(max_gpus, node.gpus_per_node) if node is not None else max_gpus
    return sorted({tp for tp in tp_options if tp <= limit and arch.num_heads % tp == 0})


def candidate_layouts(
    arch: LLMArch, tp_options: Sequence[int], max_gpus: int, node: Node | None = None
) -> list[Parallelism]:
    """The instance layouts the planner enumerates, smallest first: today TP-only, one per degree of
    :func:`valid_tps` (the MoE issue adds PP, EP and attention-DP layouts here)."""
    return [Parallelism.tensor(tp) for tp in valid_tps(arch, tp_options, max_gpus, node)]


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
    node_gpus = node.gpus_per_node if node is not None else None
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
