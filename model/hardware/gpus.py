"""GPU profiles: one frozen dataclass per GPU kind, read from ``hardware_profiles/gpus/*.toml``.

Schema in docs/profiles.md; every number carries its datasheet source (``GPU.sources``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from model.errors import InputError, ProfileError
from model.hardware.schema import (
    INT,
    LIST,
    NUMBER,
    QUANTITY,
    TEXT,
    Schema,
    Sources,
    fraction,
    positive,
    read_toml,
    source_of,
    validate,
    wrap,
)
from model.units import Kind

# Plausible ranges (SI units) that catch unit slips such as "1 byte" of memory or "1e-300 B/s":
# from the smallest edge accelerators to well beyond any announced data-center GPU.
# Each row: field, low, high, unit for the message.
_GPU_SANE_RANGES = (
    ("memory_bytes", 1e8, 1e13, "bytes"),
    ("memory_bandwidth_bytes_per_s", 1e9, 1e15, "bytes/s"),
    ("tdp_w", 1.0, 1e4, "W"),
    ("step_overhead_s", 0.0, 1.0, "s"),
    ("pcie_bandwidth_bytes_per_s", 1e8, 1e13, "bytes/s"),
    ("idle_w", 0.0, 1e4, "W"),
    # A rented GPU-hour costs cents to tens of dollars; 1,000 USD leaves room for whole-node prices.
    ("price_usd_per_hour", 0.0, 1e3, "USD per GPU-hour"),
)
# Interconnect bandwidth when there is one: 1 GB/s (old PCIe switches) to 100 TB/s (bytes/s).
_INTERCONNECT_RANGE = (1e9, 1e14)
# Dense peak FLOP/s per dtype: 1 TFLOP/s to 1 EFLOP/s.
_PEAK_FLOPS_RANGE = (1e12, 1e18)

DTYPES_WITH_PEAK = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
# ``[compute] fp16_accumulate``: the dense FP16 tensor peak with FP16 (not FP32) accumulation. GeForce
# cards run FP32-accumulate tensor math at half this rate (NVIDIA GA102, Ada and RTX Blackwell
# whitepapers, "with FP16 Accumulate" vs "with FP32 Accumulate" rows); data-center GPUs run both at
# one rate, so their profiles leave it out (0: the same as the fp16 peak). Engines that multiply in
# FP16 with FP16 accumulation (llama.cpp's cuBLAS path) reach it: ``Deployment.gemm_accumulate``.
FP16_ACCUMULATE_KEY = "fp16_accumulate"


@dataclass(frozen=True)
class GPU:
    """One GPU kind. All numbers are SI floats; ``sources`` maps each field to its citation."""

    name: str
    full_name: str
    memory_bytes: float
    memory_bandwidth_bytes_per_s: float
    peak_flops_per_s: tuple[tuple[str, float], ...]  # dense peak per dtype, e.g. (("bf16", 9.894e14),)
    tdp_w: float
    idle_w: float
    price_usd_per_hour: float
    prefill_mfu: float
    decode_mbu: float
    step_overhead_s: float
    fp16_accumulate_flops_per_s: float = 0.0  # FP16 tensor peak with FP16 accumulate; 0 = the fp16 peak
    interconnect_kind: str = "none"
    interconnect_bandwidth_bytes_per_s: float = 0.0  # per direction; 0 when there is none
    pcie_generation: int = 4
    pcie_bandwidth_bytes_per_s: float = 32e9  # per direction
    vendor: str = ""
    aliases: tuple[str, ...] = ()
    price_as_of: str = ""
    sources: Sources = field(default=(), compare=False, repr=False)
    path: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = f"gpu {self.name}"
        for name in (
            "memory_bytes",
            "memory_bandwidth_bytes_per_s",
            "tdp_w",
            "step_overhead_s",
            "pcie_bandwidth_bytes_per_s",
        ):
            positive(name, getattr(self, name), owner)
        for name in (
            "idle_w",
            "price_usd_per_hour",
            "interconnect_bandwidth_bytes_per_s",
            "fp16_accumulate_flops_per_s",
        ):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise InputError(f"{owner}.{name}", value, "a finite number >= 0")
        for name, low, high, unit in _GPU_SANE_RANGES:
            value = getattr(self, name)
            if not low <= value <= high:
                raise InputError(
                    f"{owner}.{name}", value, f"a physically plausible value in [{low:g}, {high:g}] {unit}"
                )
        bw = self.interconnect_bandwidth_bytes_per_s
        if bw and not _INTERCONNECT_RANGE[0] <= bw <= _INTERCONNECT_RANGE[1]:
            low, high = _INTERCONNECT_RANGE
            raise InputError(
                f"{owner}.interconnect_bandwidth_bytes_per_s", bw, f"0 or in [{low:g}, {high:g}] bytes/s"
            )
        if self.idle_w > self.tdp_w:
            raise InputError(f"{owner}.idle_w", self.idle_w, f"<= tdp_w ({self.tdp_w} W)")
        fraction("prefill_mfu", self.prefill_mfu, owner)
        fraction("decode_mbu", self.decode_mbu, owner)
        if not self.peak_flops_per_s:
            raise InputError(f"{owner}.peak_flops_per_s", (), "at least one dtype, e.g. bf16")
        for dtype, flops in self.peak_flops_per_s:
            if dtype not in DTYPES_WITH_PEAK:
                raise InputError(f"{owner}.compute", dtype, f"one of {', '.join(DTYPES_WITH_PEAK)}")
            positive(f"compute.{dtype}", flops, owner)
            if not _PEAK_FLOPS_RANGE[0] <= flops <= _PEAK_FLOPS_RANGE[1]:
                raise InputError(
                    f"{owner}.compute.{dtype}", flops, "a dense peak between 1 TFLOPS and 1 EFLOPS (FLOP/s)"
                )

        acc = self.fp16_accumulate_flops_per_s
        if acc and not _PEAK_FLOPS_RANGE[0] <= acc <= _PEAK_FLOPS_RANGE[1]:
            raise InputError(
                f"{owner}.compute.{FP16_ACCUMULATE_KEY}",
                acc,
                "0 or a dense peak between 1 TFLOPS and 1 EFLOPS",
            )

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The dtypes this GPU has tensor-core peaks for."""
        return tuple(d for d, _ in self.peak_flops_per_s)

    def peak_flops(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype``; a clear error if the GPU has no such tensor-core path."""
        table = dict(self.peak_flops_per_s)
        if dtype not in table:
            raise InputError("dtype", dtype, f"one that the {self.name} supports: {', '.join(self.dtypes)}")
        return table[dtype]

    def fp16_accumulate_peak(self) -> float:
        """Dense FP16 tensor FLOP/s with FP16 accumulation: ``fp16_accumulate_flops_per_s``, else the
        fp16 (else bf16) peak, which data-center GPUs reach with either accumulator."""
        table = dict(self.peak_flops_per_s)
        return self.fp16_accumulate_flops_per_s or table.get("fp16") or table.get("bf16", 0.0)

    def source(self, field_name: str) -> str:
        """The citation recorded for ``field_name`` (e.g. ``"memory.bandwidth"``)."""
        return source_of(self.sources, field_name)


# TOML schema: (section, key) -> (type, unit kind, required).
_GPU_SCHEMA: Schema = {
    ("", "schema"): (INT, None, True),
    ("", "name"): (TEXT, None, True),
    ("", "full_name"): (TEXT, None, True),
    ("", "vendor"): (TEXT, None, False),
    ("", "aliases"): (LIST, None, False),
    ("memory", "capacity"): (QUANTITY, Kind.BYTES, True),
    ("memory", "bandwidth"): (QUANTITY, Kind.BANDWIDTH, True),
    **{("compute", d): (QUANTITY, Kind.FLOPS, False) for d in DTYPES_WITH_PEAK},
    ("compute", FP16_ACCUMULATE_KEY): (QUANTITY, Kind.FLOPS, False),
    ("interconnect", "kind"): (TEXT, None, True),
    ("interconnect", "bandwidth"): (QUANTITY, Kind.BANDWIDTH, False),
    ("pcie", "generation"): (INT, None, True),
    ("pcie", "bandwidth"): (QUANTITY, Kind.BANDWIDTH, True),
    ("power", "tdp"): (QUANTITY, Kind.POWER, True),
    ("power", "idle"): (QUANTITY, Kind.POWER, True),
    ("price", "usd_per_hour"): (NUMBER, None, True),
    ("efficiency", "prefill_mfu"): (NUMBER, None, True),
    ("efficiency", "decode_mbu"): (NUMBER, None, True),
    ("efficiency", "step_overhead"): (QUANTITY, Kind.TIME, True),
}


def gpu_from_toml(path: Path, text: str | None = None) -> GPU:
    """Read and validate one GPU profile file."""
    v, sources = validate(path, read_toml(path, text), _GPU_SCHEMA)
    peaks = tuple((d, v[f"compute.{d}"]) for d in DTYPES_WITH_PEAK if f"compute.{d}" in v)
    if not peaks:
        raise ProfileError(path.name, "compute", "at least one dense peak (e.g. compute.bf16) is required")
    kind = v["interconnect.kind"]
    if kind.lower() != "none" and "interconnect.bandwidth" not in v:
        raise ProfileError(
            path.name, "interconnect.bandwidth", f"required when interconnect.kind is {kind!r}"
        )
    return wrap(
        path,
        lambda: GPU(
            name=v["name"],
            full_name=v["full_name"],
            vendor=v.get("vendor", ""),
            aliases=v.get("aliases", ()),
            memory_bytes=v["memory.capacity"],
            memory_bandwidth_bytes_per_s=v["memory.bandwidth"],
            peak_flops_per_s=peaks,
            fp16_accumulate_flops_per_s=v.get(f"compute.{FP16_ACCUMULATE_KEY}", 0.0),
            interconnect_kind=kind,
            interconnect_bandwidth_bytes_per_s=v.get("interconnect.bandwidth", 0.0),
            pcie_generation=v["pcie.generation"],
            pcie_bandwidth_bytes_per_s=v["pcie.bandwidth"],
            tdp_w=v["power.tdp"],
            idle_w=v["power.idle"],
            price_usd_per_hour=v["price.usd_per_hour"],
            price_as_of=v.get("price.usd_per_hour.as_of", ""),
            prefill_mfu=v["efficiency.prefill_mfu"],
            decode_mbu=v["efficiency.decode_mbu"],
            step_overhead_s=v["efficiency.step_overhead"],
            sources=sources,
            path=str(path),
        ),
    )
