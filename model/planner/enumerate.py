"""Enumerate candidate configurations for a GPU budget or for a target rate."""

from __future__ import annotations

from collections.abc import Sequence

from model.hardware.gpus import GPU
from model.hardware.links import Link
from model.hardware.nodes import Node
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


def colocated_for_budget(gpu: GPU, tps: Sequence[int], gpus: int, chunk: int | None) -> list[ColocatedConfig]:
    """One colocated configuration per TP: as many replicas as the budget holds."""
    return [ColocatedConfig(gpu, tp, gpus // tp, chunk) for tp in tps if gpus // tp >= 1]


def nics_per_gpu(node: Node | None) -> float:
    """NICs per GPU of a node profile (1 without one): KV transfer lanes are capped by it."""
    if node is None:
        return 1.0
    return min(1.0, node.nics_per_node / node.gpus_per_node)


def disaggregated_for_budget(
    prefill_gpu: GPU,
    decode_gpu: GPU,
    prefill_tps: Sequence[int],
    decode_tps: Sequence[int],
    gpus: int,
    link: Link,
    node: Node | None = None,
    intra_link: Link | None = None,
    layerwise: bool = True,
) -> list[DisaggregatedConfig]:
    """Every split n_p x TP_p + n_d x TP_d of the budget that leaves fewer than TP_d GPUs idle.

    Splits whose pools pair up inside nodes (``node``, see ``link_for``) talk over its intra-node
    link; others over ``link``.
    """
    out = []
    node_gpus = node.gpus_per_node if node is not None else None
    for tp_p in prefill_tps:
        for tp_d in decode_tps:
            for n_p in range(1, gpus // tp_p + 1):
                n_d = (gpus - n_p * tp_p) // tp_d
                if n_d < 1:
                    break
                chosen = link_for(
                    n_p, tp_p, n_d, tp_d, link, node_gpus, intra_link if prefill_gpu == decode_gpu else None
                )
                out.append(
                    DisaggregatedConfig(
                        prefill_gpu, tp_p, n_p, decode_gpu, tp_d, n_d, chosen, layerwise, nics_per_gpu(node)
                    )
                )
    return out


def disaggregated_grid(
    prefill_gpu: GPU,
    decode_gpu: GPU,
    tp_p: int,
    tp_d: int,
    gpus: int,
    link: Link,
    layerwise: bool = True,
) -> list[DisaggregatedConfig]:
    """Every (n_p, n_d) with n_p x TP_p + n_d x TP_d <= gpus: the pool-size map."""
    out = []
    for n_p in range(1, gpus // tp_p + 1):
        for n_d in range(1, (gpus - n_p * tp_p) // tp_d + 1):
            out.append(DisaggregatedConfig(prefill_gpu, tp_p, n_p, decode_gpu, tp_d, n_d, link, layerwise))
    return out
