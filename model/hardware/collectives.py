"""Communication costs: ring all-reduce for tensor parallelism, point-to-point transfers (KV cache,
pipeline activations), and which link a tensor-parallel group uses by default.

All inputs and outputs are SI floats or numpy arrays (bytes, seconds, bytes/s).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from model.errors import InputError, UnknownNameError
from model.hardware.catalog import get_link
from model.hardware.gpus import GPU
from model.hardware.links import Link
from model.hardware.parallelism import Parallelism
from model.scalars import plain

ArrayLike = float | int | np.ndarray

# The built-in link whose latency and efficiency stand in for an NVLink *bridge* (a two-GPU
# NVLink connector, e.g. H100 PCIe, RTX 3090), which has no link profile of its own.
NVLINK_BRIDGE_TEMPLATE_LINK = "nvlink3"
# GPUs an NVLink bridge joins: bridges connect pairs of cards (NVIDIA H100 PCIe product brief,
# "NVLink bridge connects two GPUs"); a larger TP group falls back to PCIe.
NVLINK_BRIDGE_MAX_GPUS = 2


def _nonneg(name: str, value: ArrayLike) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise InputError(name, value, "finite numbers >= 0")
    return arr


def allreduce_time_s(
    message_bytes: ArrayLike, n_gpus: ArrayLike, bandwidth_bytes_per_s: ArrayLike, latency_s: ArrayLike
) -> float | np.ndarray:
    """Time of one ring all-reduce of ``message_bytes`` over ``n_gpus`` GPUs.

    t = 2 (n - 1) x (latency + (M / n) / bandwidth); 0 when n == 1.
    A ring all-reduce is a reduce-scatter plus an all-gather, each n - 1 steps that move M / n
    bytes per GPU (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms for clusters
    of workstations", JPDC 69(2); NCCL docs, "Performance reported by NCCL tests": algbw and
    busbw = algbw x 2(n-1)/n). ``bandwidth_bytes_per_s`` is the achievable per-direction
    bandwidth of one GPU (line rate x efficiency); ``latency_s`` the per-step latency.
    A float for scalar inputs, an array for array inputs.
    """
    m = _nonneg("message_bytes", message_bytes)
    n = np.asarray(n_gpus, dtype=float)
    if not np.all(np.isfinite(n)) or np.any(n < 1) or np.any(n != np.round(n)):
        raise InputError("n_gpus", n_gpus, "whole numbers >= 1")
    bw = np.asarray(bandwidth_bytes_per_s, dtype=float)
    if np.any(np.isnan(bw)) or np.any(bw <= 0):
        raise InputError("bandwidth_bytes_per_s", bandwidth_bytes_per_s, "numbers > 0")
    lat = _nonneg("latency_s", latency_s)
    steps = 2.0 * (n - 1.0)
    return plain(np.asarray(steps * (lat + (m / n) / bw), dtype=float))


def transfer_time_s(message_bytes: ArrayLike, link: Link, *, messages: ArrayLike = 1) -> float | np.ndarray:
    """Time to move ``message_bytes`` over ``link`` as ``messages`` separate messages.

    t = messages x latency + bytes / (bandwidth x efficiency); 0 for a ``same-gpu`` link (nothing
    crosses it). The alpha-beta (Hockney 1994, "The communication challenge for MPP", Parallel
    Computing 20(3)) model; efficiency is the measured fraction of line rate in the link profile.
    A float for scalar inputs, an array for array inputs.
    """
    m = _nonneg("message_bytes", message_bytes)
    k = np.asarray(messages, dtype=float)
    if not np.all(np.isfinite(k)) or np.any(k < 0):
        raise InputError("messages", messages, "numbers >= 0")
    if link.kind == "same-gpu":
        return plain(np.zeros(np.broadcast_shapes(m.shape, k.shape)))
    return plain(alpha_beta_time_s(m, link.effective_bandwidth_bytes_per_s, link.latency_s, k))


def alpha_beta_time_s(
    message_bytes: ArrayLike, bandwidth_bytes_per_s: ArrayLike, latency_s: ArrayLike, messages: ArrayLike = 1
) -> np.ndarray:
    """The alpha-beta time of :func:`transfer_time_s` over arrays of links (broadcast together):
    t = messages x latency + bytes / bandwidth, ``bandwidth_bytes_per_s`` the achievable rate (line
    rate x efficiency, x parallel lanes); an infinite bandwidth moves the bytes in no time.
    Unvalidated: for vectorised callers that already hold validated link profiles."""
    bw = np.asarray(bandwidth_bytes_per_s, dtype=float)
    m = np.asarray(message_bytes, dtype=float)
    return np.asarray(
        np.asarray(messages, dtype=float) * np.asarray(latency_s, dtype=float) + m / bw, dtype=float
    )


def _normalise(kind: str) -> str:
    return "".join(ch for ch in kind.lower() if ch.isalnum())


def default_tp_link(gpu: GPU, tp: int | Parallelism = 2) -> Link:
    """The link a TP group of ``tp`` ``gpu``s all-reduces over when none is given (``tp`` a degree or
    a :class:`~model.hardware.parallelism.Parallelism`, whose ``tp`` is used).

    - NVLink/NVSwitch or xGMI: the built-in link profile named after ``gpu.interconnect_kind``
      (``"NVLink 4"`` -> ``nvlink4``, ``"xGMI"`` -> ``xgmi``), as measured in its profile.
    - An NVLink *bridge* (pairs of cards): the GPU's own interconnect bandwidth with the
      ``nvlink3`` profile's latency and efficiency, for TP <= 2; larger groups use PCIe.
    - Otherwise (``"none"``): PCIe peer-to-peer of the GPU's generation (``pcie-gen4-x16`` ...) at
      the GPU's PCIe bandwidth.
    """
    if isinstance(tp, Parallelism):
        tp = tp.tp
    kind = gpu.interconnect_kind.strip()
    key = _normalise(kind)
    if key and key != "none":
        if "bridge" in key:
            if tp <= NVLINK_BRIDGE_MAX_GPUS and gpu.interconnect_bandwidth_bytes_per_s > 0:
                template = get_link(NVLINK_BRIDGE_TEMPLATE_LINK)
                return dataclasses.replace(
                    template,
                    name=f"{gpu.name}-nvlink-bridge",
                    full_name=f"{kind} ({gpu.full_name})",
                    bandwidth_bytes_per_s=gpu.interconnect_bandwidth_bytes_per_s,
                    aliases=(),
                )
        else:
            try:
                return get_link(key)
            except UnknownNameError:
                pass
    pcie = get_link(f"pcie-gen{gpu.pcie_generation}-x16")
    if math.isclose(pcie.bandwidth_bytes_per_s, gpu.pcie_bandwidth_bytes_per_s):
        return pcie
    return dataclasses.replace(
        pcie, name=f"{gpu.name}-pcie", bandwidth_bytes_per_s=gpu.pcie_bandwidth_bytes_per_s, aliases=()
    )


def all_to_all_time_s(
    bytes_per_gpu: ArrayLike, group_gpus: int, local_gpus: int, intra: Link, inter: Link
) -> float | np.ndarray:
    """Time of one MoE all-to-all (token dispatch or combine) in which each of ``group_gpus`` GPUs
    sends ``bytes_per_gpu`` bytes spread evenly over the group (itself included).

    t = latency + max(B_local / bw_intra, B_remote / bw_inter), where of the B bytes a GPU sends,
    the share (L - 1) / N stays in its NVLink domain (L = ``local_gpus`` of the group share it,
    N = ``group_gpus``), 1 / N stays on the GPU, and (N - L) / N leaves over its NIC; the two paths
    run at once (DeepEP's normal kernels forward intra-node traffic over NVLink and inter-node
    traffic over RDMA in parallel, deepseek-ai/DeepEP docs/legacy.md, "Normal kernels with NVLink
    and RDMA forwarding"). Latency: the larger link latency (the sends go out in parallel). The
    bandwidths are the link profiles' effective rates (line rate x efficiency), per GPU.
    Measured check (DeepEP, H800 + CX7 400G, docs/legacy.md): intranode EP8 dispatch 153 GB/s of
    ~160 GB/s NVLink; internode EP16-64 43-58 GB/s per GPU against a 50 GB/s NIC (docs/model.md).
    """
    b = _nonneg("bytes_per_gpu", bytes_per_gpu)
    n, local = int(group_gpus), int(local_gpus)
    if n < 1 or not 1 <= local <= n:
        raise InputError("local_gpus", local_gpus, f"a whole number in [1, group_gpus = {group_gpus}]")
    if n == 1:
        return plain(np.zeros_like(b))
    local_s = b * (local - 1) / n / intra.effective_bandwidth_bytes_per_s
    remote_s = b * (n - local) / n / inter.effective_bandwidth_bytes_per_s if n > local else 0.0 * b
    latency = max(intra.latency_s, inter.latency_s) if n > local else intra.latency_s
    return plain(np.asarray(latency + np.maximum(local_s, remote_s), dtype=float))
