"""Link profiles: paths that carry KV cache or collectives, from ``hardware_profiles/links/*.toml``."""

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

LINK_KINDS = ("network", "intra-node", "pcie", "same-gpu")
# How the GPUs a link joins are wired, which decides the collective algorithms available
# (model.hardware.collective_algorithms): "switch" (NVSwitch: any GPU reaches any other at its full
# per-GPU bandwidth), "switch-multicast" (NVSwitch gen 3+, H100 and later: NVLink SHARP / multimem
# reductions in the switch), "full-mesh" (AMD xGMI: one link per peer, ``bandwidth`` is per peer),
# "bus" (PCIe peer-to-peer through the host bridge), "network" (NICs between nodes).
TOPOLOGIES = ("switch", "switch-multicast", "full-mesh", "bus", "network")
# The topology of a link whose profile names none, by kind.
DEFAULT_TOPOLOGY = {"intra-node": "switch", "pcie": "bus", "network": "network", "same-gpu": "switch"}


@dataclass(frozen=True)
class Link:
    """A path that carries KV cache between GPUs. ``bandwidth`` is per direction (bytes/s).

    A ``same-gpu`` link has infinite bandwidth and zero latency: nothing crosses it.
    """

    name: str
    full_name: str
    kind: str
    bandwidth_bytes_per_s: float
    latency_s: float
    efficiency: float
    aliases: tuple[str, ...] = ()
    sources: Sources = field(default=(), compare=False, repr=False)
    path: str = field(default="", compare=False, repr=False)
    topology: str = ""  # one of TOPOLOGIES; "" -> DEFAULT_TOPOLOGY of the kind

    def __post_init__(self) -> None:
        owner = f"link {self.name}"
        if self.kind not in LINK_KINDS:
            raise InputError(f"{owner}.kind", self.kind, f"one of {', '.join(LINK_KINDS)}")
        if self.topology and self.topology not in TOPOLOGIES:
            raise InputError(f"{owner}.topology", self.topology, f"one of {', '.join(TOPOLOGIES)}")
        if self.kind == "same-gpu":
            return
        positive("bandwidth_bytes_per_s", self.bandwidth_bytes_per_s, owner)
        if not 1e3 <= self.bandwidth_bytes_per_s <= 1e18:  # catches unit slips, allows what-if sweeps
            raise InputError(
                f"{owner}.bandwidth_bytes_per_s",
                self.bandwidth_bytes_per_s,
                "a line rate between 8 kbit/s and 8 Ebit/s (bytes/s)",
            )
        if not (math.isfinite(self.latency_s) and 0 <= self.latency_s <= 1.0):
            raise InputError(f"{owner}.latency_s", self.latency_s, "a time in [0, 1] s")
        fraction("efficiency", self.efficiency, owner)

    @property
    def effective_bandwidth_bytes_per_s(self) -> float:
        """Achievable bandwidth = line rate x efficiency (infinite for ``same-gpu``)."""
        return self.bandwidth_bytes_per_s * self.efficiency

    @property
    def fabric(self) -> str:
        """The link's topology (``topology``, else the default of its kind)."""
        return self.topology or DEFAULT_TOPOLOGY[self.kind]

    def source(self, field_name: str) -> str:
        """The citation recorded for ``field_name`` (e.g. ``"bandwidth"``)."""
        return source_of(self.sources, field_name)


# TOML schema: (section, key) -> (type, unit kind, required).
_LINK_SCHEMA: Schema = {
    ("", "schema"): (INT, None, True),
    ("", "name"): (TEXT, None, True),
    ("", "full_name"): (TEXT, None, True),
    ("", "kind"): (TEXT, None, True),
    ("", "aliases"): (LIST, None, False),
    ("", "note"): (TEXT, None, False),
    ("", "bandwidth"): (QUANTITY, Kind.BANDWIDTH, False),
    ("", "latency"): (QUANTITY, Kind.TIME, False),
    ("", "efficiency"): (NUMBER, None, False),
    ("", "topology"): (TEXT, None, False),
}


def link_from_toml(path: Path, text: str | None = None) -> Link:
    """Read and validate one link profile file (``same-gpu`` links carry no numbers)."""
    v, sources = validate(path, read_toml(path, text), _LINK_SCHEMA)
    if v["kind"] == "same-gpu":
        return wrap(
            path,
            lambda: Link(
                v["name"],
                v["full_name"],
                "same-gpu",
                math.inf,
                0.0,
                1.0,
                v.get("aliases", ()),
                sources,
                str(path),
            ),
        )
    for key in ("bandwidth", "latency", "efficiency"):
        if key not in v:
            raise ProfileError(path.name, key, f"required for a {v['kind']!r} link")
    return wrap(
        path,
        lambda: Link(
            v["name"],
            v["full_name"],
            v["kind"],
            v["bandwidth"],
            v["latency"],
            v["efficiency"],
            v.get("aliases", ()),
            sources,
            str(path),
            v.get("topology", ""),
        ),
    )
