"""Collectives by algorithm: the time of an all-reduce, all-gather or reduce-scatter over a group of
GPUs under each algorithm engines use, and the choice among them by message size and topology.

Every algorithm is an alpha-beta model (Hockney 1994; Thakur, Rabenseifner & Gropp 2005,
"Optimization of collective communication operations in MPICH", IJHPCA 19(1)): ``s`` synchronised
phases of latency alpha (the link profile's ``latency``) plus the bytes the busiest GPU port moves
divided by its achievable bandwidth B (line rate x efficiency). M is the full message each GPU
holds (all-reduce input, all-gather output, reduce-scatter input), n the group's GPUs.

| algorithm | where | time |
|---|---|---|
| ring | any topology (NCCL Ring) | 2(n-1) (alpha + M / (n B_ring)) |
| one-shot | NVSwitch, xGMI mesh (vLLM / TRT-LLM custom all-reduce) | alpha + M_in / B_port |
| two-shot | NVSwitch, xGMI mesh (reduce-scatter + all-gather, direct) | 2 alpha + 2 M_in / (n B_port) |
| NVLS | NVSwitch gen 3+ (NVLink SHARP, multimem) | 2 alpha + M / B |
| tree | across nodes (NCCL double binary tree) | 2 ceil(log2 n) alpha + 2 M / B |

Port traffic: through a switch one GPU's port carries everything it reads, so one-shot moves
(n - 1) M and two-shot 2 (n - 1) M / n into it; on a full mesh each peer has its own link, so
one-shot moves M and two-shot 2 M / n over each link in parallel, and a ring can run one ring per
link in parallel (RCCL builds n - 1 rings on the MI300X mesh), B_ring = (n - 1) B_link. NVLS:
each GPU sends its whole buffer into the switch once (multimem.ld_reduce) and receives the reduced
result once (multimem.st), M each way instead of a ring's 2 (n - 1) M / n.

The choice (:func:`allreduce_choice`): the fastest of the algorithms the topology and group allow,
as NCCL's tuner does (src/graph/tuning.cc: predicted latency + size / bandwidth per algorithm and
protocol, lowest wins) and as the engines' custom kernels were tuned: vLLM uses its custom kernels
on fully NVLink- or xGMI-connected groups of 2-8 GPUs up to 8 MiB (vllm/distributed/
device_communicators/custom_all_reduce.py, ``_SUPPORTED_WORLD_SIZES`` and ``max_size``), one-shot
below 256 KiB at 8 GPUs / 512 KiB at 4 (csrc/custom_all_reduce.cuh, ``cross_device_reduce_1stage``
vs ``_2stage``); the modelled crossover lands at 213 KiB and 746 KiB on NVLink 4
(tests/test_collective_algorithms.py). Measured checks: NVLS all-reduce of small messages on two
H100s ~6 us (NVIDIA/nccl issue #1259); custom one-shot all-reduce on GB200, 8 GPUs, one token of
hidden 7168 in bf16: 10.9 us with the RMSNorm fused (lightseekorg/tokenspeed PR #860).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from model.errors import InputError
from model.hardware.links import Link
from model.scalars import plain

ArrayLike = float | int | np.ndarray

# Largest group the custom one-/two-shot kernels serve: vLLM's custom all-reduce supports world
# sizes 2, 4, 6 and 8 (custom_all_reduce.py ``_SUPPORTED_WORLD_SIZES``); TensorRT-LLM's
# ONESHOT/TWOSHOT kernels are likewise limited to one NVLink domain of <= 8 ranks in HGX nodes.
CUSTOM_MAX_GPUS = 8
# Largest message the custom kernels take before the engine falls back to NCCL/RCCL: vLLM
# CustomAllreduce ``max_size`` = 8 MiB (custom_all_reduce.py, default argument).
CUSTOM_MAX_BYTES = 8 * 1024 * 1024
ALGORITHMS = ("ring", "one-shot", "two-shot", "nvls", "tree")
# Algorithms each topology offers (links.TOPOLOGIES).
_OFFERED = {
    "switch": ("ring", "one-shot", "two-shot"),
    "switch-multicast": ("ring", "one-shot", "two-shot", "nvls"),
    "full-mesh": ("ring", "one-shot", "two-shot"),
    "bus": ("ring",),
    "network": ("ring", "tree"),
}


@dataclass(frozen=True)
class Fabric:
    """What a collective over ``gpus`` GPUs of one link sees: ``topology`` (links.TOPOLOGIES),
    ``bandwidth_bytes_per_s`` (achievable, per GPU port through a switch or bus, per peer link on a
    full mesh or per NIC on a network) and ``latency_s`` (alpha, per synchronised phase)."""

    topology: str
    gpus: int
    bandwidth_bytes_per_s: float
    latency_s: float

    @classmethod
    def of(cls, link: Link, gpus: int) -> Fabric:
        """The fabric of ``gpus`` GPUs joined by ``link`` (its topology, effective bandwidth, latency)."""
        if isinstance(gpus, bool) or not isinstance(gpus, int | np.integer) or gpus < 1:
            raise InputError("n_gpus", gpus, "a whole number >= 1")
        return cls(link.fabric, int(gpus), link.effective_bandwidth_bytes_per_s, link.latency_s)

    def offered(self) -> tuple[str, ...]:
        """Algorithms this fabric and group size allow (custom kernels only up to CUSTOM_MAX_GPUS)."""
        algs = _OFFERED[self.topology]
        if self.gpus > CUSTOM_MAX_GPUS:
            algs = tuple(a for a in algs if a not in ("one-shot", "two-shot"))
        return algs


def _message(message_bytes: ArrayLike) -> np.ndarray:
    m = np.asarray(message_bytes, dtype=float)
    if not np.all(np.isfinite(m)) or np.any(m < 0):
        raise InputError("message_bytes", message_bytes, "finite numbers >= 0")
    return m


def allreduce_algorithm_s(message_bytes: ArrayLike, fabric: Fabric, algorithm: str) -> np.ndarray:
    """All-reduce time of ``message_bytes`` under one ``algorithm`` (table in the module docstring);
    0 for one GPU. Raises InputError for an algorithm the fabric does not offer."""
    m, n = _message(message_bytes), fabric.gpus
    if algorithm not in fabric.offered():
        raise InputError("algorithm", algorithm, f"one of {fabric.offered()} on a {fabric.topology} of {n}")
    if n == 1:
        return np.zeros_like(m)
    a, bw, mesh = fabric.latency_s, fabric.bandwidth_bytes_per_s, fabric.topology == "full-mesh"
    if algorithm == "ring":
        ring_bw = bw * (n - 1) if mesh else bw
        return 2.0 * (n - 1) * (a + m / n / ring_bw)
    if algorithm == "one-shot":
        return a + (m if mesh else (n - 1) * m) / bw
    if algorithm == "two-shot":
        return 2.0 * a + 2.0 * (m / n if mesh else (n - 1) * m / n) / bw
    if algorithm == "nvls":
        return 2.0 * a + m / bw
    return 2.0 * math.ceil(math.log2(n)) * a + 2.0 * m / bw  # tree


def allreduce_choice(message_bytes: ArrayLike, fabric: Fabric) -> tuple[np.ndarray, np.ndarray]:
    """(time, algorithm name) of the fastest offered all-reduce per message size; the custom
    one-/two-shot kernels only up to CUSTOM_MAX_BYTES (the engines fall back to NCCL/RCCL above)."""
    m = _message(message_bytes)
    names = fabric.offered()
    times = []
    for name in names:
        t = allreduce_algorithm_s(m, fabric, name)
        if name in ("one-shot", "two-shot"):
            t = np.where(m <= CUSTOM_MAX_BYTES, t, np.inf)
        times.append(np.broadcast_to(t, m.shape))
    stack = np.stack(times)
    best = np.argmin(stack, axis=0)
    return np.take_along_axis(stack, best[None], axis=0)[0], np.asarray(names)[best]


def allreduce_s(message_bytes: ArrayLike, n_gpus: int, link: Link) -> float | np.ndarray:
    """Time of one all-reduce of ``message_bytes`` over ``n_gpus`` GPUs joined by ``link``, by the
    algorithm an engine picks (:func:`allreduce_choice`); 0 over a ``same-gpu`` link or one GPU."""
    m = _message(message_bytes)
    if link.kind == "same-gpu" or n_gpus == 1:
        return plain(np.zeros_like(m))
    return plain(allreduce_choice(m, Fabric.of(link, n_gpus))[0])


def allgather_s(message_bytes: ArrayLike, n_gpus: int, link: Link) -> float | np.ndarray:
    """Time of one all-gather whose output (each GPU's copy) is ``message_bytes``, over ``link``.

    An all-gather is the second half of a two-shot or ring all-reduce (Thakur et al. 2005): direct
    (switch or mesh, every GPU reads the n - 1 other shards at once) alpha + (n-1) M / (n B_port)
    (mesh: M / (n B_link)), else ring (n - 1) (alpha + M / (n B_ring)); the faster is taken.
    A reduce-scatter of an M-byte input moves the same bytes (:func:`reduce_scatter_s`).
    """
    m = _message(message_bytes)
    if link.kind == "same-gpu" or n_gpus == 1:
        return plain(np.zeros_like(m))
    f = Fabric.of(link, n_gpus)
    # half of each two-phase all-reduce: the ring's n - 1 steps, or one direct phase of two-shot
    ring = allreduce_algorithm_s(m, f, "ring") / 2.0
    if "two-shot" in f.offered():
        return plain(np.minimum(ring, allreduce_algorithm_s(m, f, "two-shot") / 2.0))
    return plain(ring)


def reduce_scatter_s(message_bytes: ArrayLike, n_gpus: int, link: Link) -> float | np.ndarray:
    """Time of one reduce-scatter of an ``message_bytes`` input per GPU: the all-gather's bytes and
    phases in reverse (Thakur et al. 2005), so :func:`allgather_s` of the same size."""
    return allgather_s(message_bytes, n_gpus, link)
