"""Serving configurations shared by the planner and the simulator.

These are plain inputs (frozen dataclasses, validated on construction); the modelling lives in
``model.serving.colocated``, ``model.serving.disaggregated`` (analytical) and ``model.sim``
(discrete-event).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from model.errors import InputError
from model.hardware.gpus import GPU
from model.hardware.links import Link

ARCHITECTURES = ("colocated", "colocated-chunked", "disaggregated")


def _whole(field: str, value: object, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InputError(field, value, f"a whole number >= {minimum}")


def _profile(field: str, value: object, cls: type) -> None:
    if not isinstance(value, cls):
        raise InputError(field, value, f"a {cls.__name__} profile (model.get_{cls.__name__.lower()}(name))")


@dataclass(frozen=True)
class ColocatedConfig:
    """R replicas, each a TP group that runs both phases; ``chunk_tokens`` None = no chunking.

    ``chunk_tokens`` is the Sarathi-Serve token budget per iteration (decode tokens + prompt chunk).
    """

    gpu: GPU
    tp: int
    replicas: int
    chunk_tokens: int | None = None

    def __post_init__(self) -> None:
        _profile("gpu", self.gpu, GPU)
        _whole("tp", self.tp)
        _whole("replicas", self.replicas)
        if self.chunk_tokens is not None:
            _whole("chunk_tokens", self.chunk_tokens, 16)

    @property
    def architecture(self) -> str:
        """The style name: "colocated", or "colocated-chunked" with a chunk size."""
        return "colocated" if self.chunk_tokens is None else "colocated-chunked"

    @property
    def n_gpus(self) -> int:
        """GPUs used: TP x replicas."""
        return self.tp * self.replicas

    def label(self) -> str:
        """One line for reports, e.g. "4 x TP2 h100-sxm, chunk 512"."""
        chunk = f", chunk {self.chunk_tokens}" if self.chunk_tokens else ""
        return f"{self.replicas} x TP{self.tp} {self.gpu.name}{chunk}"


@dataclass(frozen=True)
class DisaggregatedConfig:
    """A prefill pool (n_prefill x TP prefill_tp) and a decode pool joined by ``link``.

    ``layerwise`` sends each layer's KV as soon as it is computed (Splitwise, sec. 4.3), exposing only
    the part of the transfer that does not overlap prefill compute.
    """

    prefill_gpu: GPU
    prefill_tp: int
    n_prefill: int
    decode_gpu: GPU
    decode_tp: int
    n_decode: int
    link: Link
    layerwise: bool = True
    nics_per_gpu: float = 1.0  # NICs per GPU of the nodes the link leaves (node profile); 1 = one each

    def __post_init__(self) -> None:
        _profile("prefill_gpu", self.prefill_gpu, GPU)
        _profile("decode_gpu", self.decode_gpu, GPU)
        _profile("link", self.link, Link)
        if not (isinstance(self.nics_per_gpu, int | float) and 0 < self.nics_per_gpu <= 1):
            raise InputError("nics_per_gpu", self.nics_per_gpu, "a fraction in (0, 1] (NICs per GPU)")
        _whole("prefill_tp", self.prefill_tp)
        _whole("n_prefill", self.n_prefill)
        _whole("decode_tp", self.decode_tp)
        _whole("n_decode", self.n_decode)

    architecture = "disaggregated"

    @property
    def transfer_lanes(self) -> int:
        """Parallel link lanes one request's KV crosses: each TP rank sends its own heads' share, so
        min(TP_p, TP_d) lanes, fewer when the nodes have fewer NICs than GPUs (at least one).
        A same-node link (NVLink/PCIe) is per GPU, so ``nics_per_gpu`` applies to network links only."""
        lanes = min(self.prefill_tp, self.decode_tp)
        if self.link.kind == "network":
            lanes = int(lanes * self.nics_per_gpu)
        return max(lanes, 1)

    @property
    def n_gpus(self) -> int:
        """GPUs used in both pools: TP_p x n_p + TP_d x n_d."""
        return self.prefill_tp * self.n_prefill + self.decode_tp * self.n_decode

    def label(self) -> str:
        """One line for reports: both pools and the link between them."""
        return (
            f"{self.n_prefill} x TP{self.prefill_tp} {self.prefill_gpu.name} prefill + "
            f"{self.n_decode} x TP{self.decode_tp} {self.decode_gpu.name} decode over {self.link.name}"
        )
