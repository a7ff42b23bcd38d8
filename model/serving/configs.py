"""Serving configurations shared by the planner and the simulator.

These are plain inputs (frozen dataclasses, validated on construction); the modelling lives in
``model.serving.colocated``, ``model.serving.disaggregated`` (analytical) and ``model.sim``
(discrete-event). ``style`` names the registered serving style (model.serving.registry).

Each instance's layout is one :class:`~model.hardware.parallelism.Parallelism` (``parallel``,
``prefill_parallel``, ``decode_parallel``); a whole number there means TP-only of that degree, so
``ColocatedConfig(gpu, 2, 4)`` is four TP2 replicas. ``tp``/``prefill_tp``/``decode_tp`` read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.errors import InputError, check_whole
from model.hardware.gpus import GPU
from model.hardware.links import Link
from model.hardware.parallelism import Parallelism, as_parallelism


def _profile(field: str, value: object, cls: type) -> None:
    if not isinstance(value, cls):
        raise InputError(field, value, f"a {cls.__name__} profile (model.get_{cls.__name__.lower()}(name))")


@dataclass(frozen=True)
class ColocatedConfig:
    """R replicas, each an instance of layout ``parallel`` that runs both phases; ``chunk_tokens``
    None = no chunking.

    ``chunk_tokens`` is the Sarathi-Serve token budget per iteration (decode tokens + prompt chunk).
    """

    gpu: GPU
    parallel: Parallelism | int
    replicas: int
    chunk_tokens: int | None = None

    def __post_init__(self) -> None:
        _profile("gpu", self.gpu, GPU)
        object.__setattr__(self, "parallel", as_parallelism("tp", self.parallel))
        check_whole("replicas", self.replicas)
        if self.chunk_tokens is not None:
            check_whole("chunk_tokens", self.chunk_tokens, 16)

    @property
    def style(self) -> str:
        """The serving style's registry name (model.serving.registry)."""
        return "colocated" if self.chunk_tokens is None else "colocated-chunked"

    @property
    def architecture(self) -> str:
        """Former name of ``style`` (kept for compatibility)."""
        return self.style

    @property
    def tp(self) -> int:
        """Tensor-parallel degree of each replica (``parallel.tp``)."""
        return self.parallel.tp

    @property
    def n_gpus(self) -> int:
        """GPUs used: GPUs per replica (``parallel.gpus``) x replicas."""
        return self.parallel.gpus * self.replicas

    def label(self) -> str:
        """One line for reports, e.g. "4 x TP2 h100-sxm, chunk 512" (the layout's ``parallel.label``)."""
        chunk = f", chunk {self.chunk_tokens}" if self.chunk_tokens else ""
        return f"{self.replicas} x {self.parallel.label} {self.gpu.name}{chunk}"


@dataclass(frozen=True)
class DisaggregatedConfig:
    """A prefill pool (n_prefill instances of layout ``prefill_parallel``) and a decode pool
    (n_decode x ``decode_parallel``) joined by ``link``.

    ``layerwise`` sends each layer's KV as soon as it is computed (Splitwise, sec. 4.3), exposing only
    the part of the transfer that does not overlap prefill compute.
    """

    prefill_gpu: GPU
    prefill_parallel: Parallelism | int
    n_prefill: int
    decode_gpu: GPU
    decode_parallel: Parallelism | int
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
        object.__setattr__(self, "prefill_parallel", as_parallelism("prefill_tp", self.prefill_parallel))
        check_whole("n_prefill", self.n_prefill)
        object.__setattr__(self, "decode_parallel", as_parallelism("decode_tp", self.decode_parallel))
        check_whole("n_decode", self.n_decode)

    style = "disaggregated"  # the serving style's registry name (model.serving.registry)
    architecture = "disaggregated"  # former name of ``style`` (kept for compatibility)

    @property
    def prefill_tp(self) -> int:
        """Tensor-parallel degree of each prefill instance (``prefill_parallel.tp``)."""
        return self.prefill_parallel.tp

    @property
    def decode_tp(self) -> int:
        """Tensor-parallel degree of each decode instance (``decode_parallel.tp``)."""
        return self.decode_parallel.tp

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
        """GPUs used in both pools: GPUs per prefill instance x n_p + GPUs per decode instance x n_d."""
        return self.prefill_parallel.gpus * self.n_prefill + self.decode_parallel.gpus * self.n_decode

    def label(self) -> str:
        """One line for reports: both pools and the link between them."""
        return (
            f"{self.n_prefill} x {self.prefill_parallel.label} {self.prefill_gpu.name} prefill + "
            f"{self.n_decode} x {self.decode_parallel.label} {self.decode_gpu.name} decode "
            f"over {self.link.name}"
        )
