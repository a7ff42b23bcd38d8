"""Node profiles: a server type (GPU kind and count, intra-node link, NICs), from
``hardware_profiles/nodes/*.toml``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from model.errors import InputError
from model.hardware.schema import (
    INT,
    QUANTITY,
    TEXT,
    Schema,
    Sources,
    positive,
    read_toml,
    source_of,
    validate,
    wrap,
)
from model.units import Kind

DEFAULT_STORAGE_BANDWIDTH_BYTES_PER_S = 7.0e9
"""Weight-loading bandwidth of a node whose profile gives none (or with no node profile): one PCIe
Gen4 x4 NVMe SSD reading sequentially, 7,000 MB/s (Samsung PM1733 U.2 datasheet, sequential read);
the DGX-class profiles state their own (several drives in RAID 0)."""


@dataclass(frozen=True)
class Node:
    """A server type: how many GPUs of which kind, what joins them, and which NICs leave it."""

    name: str
    full_name: str
    gpu: str
    gpus_per_node: int
    intra_node_link: str
    nic_link: str
    nics_per_node: int
    # GPUs sharing one NVLink (scale-up) domain: gpus_per_node for an HGX/DGX server (None = that),
    # 72 for a GB200/GB300 NVL72 rack whose 18 trays of 4 GPUs meet on NVLink Switch trays.
    nvlink_domain_gpus: int | None = None
    # Sequential read bandwidth of the node's local storage (bytes/s): how fast an instance starting
    # on it loads its weights (model.fleet.schedule). None: DEFAULT_STORAGE_BANDWIDTH_BYTES_PER_S.
    storage_bandwidth_bytes_per_s: float | None = None
    # Host (CPU DRAM) memory of the node (bytes): the ceiling of a CPU KV-offload tier
    # (model.hardware.kv_offload). None: the profile states none (a CPU tier is then refused).
    host_memory_bytes: float | None = None
    # Host-to-GPU bandwidth per GPU, per direction (bytes/s) when it is not the GPU's own PCIe link
    # (GB200/GB300: NVLink-C2C to the Grace CPU). None: the GPU profile's PCIe bandwidth.
    host_link_bandwidth_bytes_per_s: float | None = None
    # Local NVMe capacity of the node (bytes): the ceiling of an NVMe KV-offload tier.
    nvme_capacity_bytes: float | None = None
    sources: Sources = field(default=(), compare=False, repr=False)
    path: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = f"node {self.name}"
        for name in ("gpus_per_node", "nics_per_node"):
            value = getattr(self, name)
            if not (isinstance(value, int) and 1 <= value <= 1024):
                raise InputError(f"{owner}.{name}", value, "a whole number in [1, 1024]")
        domain = self.nvlink_domain_gpus
        if domain is not None and not (
            isinstance(domain, int)
            and not isinstance(domain, bool)
            and self.gpus_per_node <= domain <= 1024
            and domain % self.gpus_per_node == 0
        ):
            raise InputError(
                f"{owner}.nvlink_domain_gpus",
                domain,
                f"a whole multiple of gpus_per_node ({self.gpus_per_node}) up to 1024",
            )
        if self.storage_bandwidth_bytes_per_s is not None:
            positive("storage_bandwidth", self.storage_bandwidth_bytes_per_s, owner)
        for name in ("host_memory_bytes", "host_link_bandwidth_bytes_per_s", "nvme_capacity_bytes"):
            if getattr(self, name) is not None:
                positive(name, getattr(self, name), owner)

    @property
    def domain_gpus(self) -> int:
        """GPUs on one NVLink domain: ``nvlink_domain_gpus``, else the node's own GPUs."""
        return self.gpus_per_node if self.nvlink_domain_gpus is None else self.nvlink_domain_gpus

    @property
    def weight_load_bytes_per_s(self) -> float:
        """The storage bandwidth an instance loads its weights at (the profile's, else the default)."""
        if self.storage_bandwidth_bytes_per_s is None:
            return DEFAULT_STORAGE_BANDWIDTH_BYTES_PER_S
        return self.storage_bandwidth_bytes_per_s

    def source(self, field_name: str) -> str:
        """The citation recorded for ``field_name`` (e.g. ``"bandwidth"``)."""
        return source_of(self.sources, field_name)


# TOML schema: (section, key) -> (type, unit kind, required).
_NODE_SCHEMA: Schema = {
    ("", "schema"): (INT, None, True),
    ("", "name"): (TEXT, None, True),
    ("", "full_name"): (TEXT, None, True),
    ("", "gpu"): (TEXT, None, True),
    ("", "gpus_per_node"): (INT, None, True),
    ("", "intra_node_link"): (TEXT, None, True),
    ("", "nic_link"): (TEXT, None, True),
    ("", "nics_per_node"): (INT, None, True),
    ("", "nvlink_domain_gpus"): (INT, None, False),
    ("", "storage_bandwidth"): (QUANTITY, Kind.BANDWIDTH, False),
    ("", "host_memory"): (QUANTITY, Kind.BYTES, False),
    ("", "host_link_bandwidth"): (QUANTITY, Kind.BANDWIDTH, False),
    ("", "nvme_capacity"): (QUANTITY, Kind.BYTES, False),
}


def node_from_toml(path: Path, text: str | None = None) -> Node:
    """Read and validate one node profile file."""
    v, sources = validate(path, read_toml(path, text), _NODE_SCHEMA)
    return wrap(
        path,
        lambda: Node(
            v["name"],
            v["full_name"],
            v["gpu"],
            v["gpus_per_node"],
            v["intra_node_link"],
            v["nic_link"],
            v["nics_per_node"],
            nvlink_domain_gpus=v.get("nvlink_domain_gpus"),
            storage_bandwidth_bytes_per_s=v.get("storage_bandwidth"),
            host_memory_bytes=v.get("host_memory"),
            host_link_bandwidth_bytes_per_s=v.get("host_link_bandwidth"),
            nvme_capacity_bytes=v.get("nvme_capacity"),
            sources=sources,
            path=str(path),
        ),
    )
