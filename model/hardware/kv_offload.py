"""KV offload tiers: CPU DRAM, local NVMe and a remote KV store below the GPU's HBM, each with a
capacity, a reload bandwidth per GPU and a latency (LMCache / SGLang HiCache / Mooncake-store style).

One spec line names the tiers, parsed by a strict grammar (no evaluation)::

    SPEC := ITEM ("," ITEM)*
    ITEM := TIER ":" SIZE ["@" BANDWIDTH] | "working-set:" COUNT
    TIER := "cpu" | "nvme" | "remote"

``SIZE`` and ``BANDWIDTH`` are quantities (``512 GB``, ``50 GB/s``; :func:`model.units.parse_quantity`);
``COUNT`` is a token count (``20M``, ``2e7``). Capacities of ``cpu`` and ``nvme`` are per node (the
node's host memory and NVMe drives, shared by its GPUs); ``remote`` is one store the whole fleet
shares (Mooncake store: every instance sees every cached prefix). ``working-set`` is the KV, in
tokens, of the distinct prefixes the workload reuses (see :mod:`model.physics.kv_tiers`).

Default bandwidths per GPU, per direction, from the node profile:

- ``cpu``: the node's ``host_link_bandwidth`` (NVLink-C2C on GB200), else the GPU's PCIe link
  (each GPU has its own x16 link to the host);
- ``nvme``: the node's ``storage_bandwidth`` / GPUs per node (the drives are shared);
- ``remote``: the node's NIC link bandwidth x its achieved efficiency x NICs / GPUs per node (RDMA
  reads, Mooncake transfer engine); its latency is the link profile's.

A tier larger than the node's host memory (``cpu``) or NVMe capacity (``nvme``) is one clear error
naming the field; so is a node profile that states neither.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from model.errors import InputError
from model.hardware.catalog import get_gpu, get_link, get_node, load_catalog
from model.hardware.nodes import Node
from model.units import Kind, format_bytes, parse_quantity

TIER_KINDS = ("cpu", "nvme", "remote")
# Per-transfer latency of a host-to-GPU copy: the PCIe per-message latency of the link profiles
# (hardware_profiles/links/pcie-gen5-x16.toml: 4.1-6.1 us, lukealonso/p2pmark README), 5 us.
HOST_COPY_LATENCY_S = 5e-6
# NVMe read latency: Micron 9200 NVMe SSD datasheet, "Latency to media performance, typical (QD = 1)
# READ: 92-150 us"; 100 us per reload (the reload streams many blocks at depth after the first).
NVME_READ_LATENCY_S = 100e-6
# Largest remote store this tool accepts (bytes): 1 EB bounds the arithmetic, not any product.
MAX_REMOTE_BYTES = 1e18
MAX_SPEC_CHARS = 200
MAX_WORKING_SET_TOKENS = 1e13
_COUNT = re.compile(r"^(\d+(?:\.\d+)?(?:[eE]\d{1,2})?)\s*([kKMG]?)$")
_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}


@dataclass(frozen=True)
class KVTier:
    """One tier below HBM. ``capacity_bytes``: per node for cpu/nvme, the whole store for remote;
    ``bandwidth_bytes_per_s``: reload rate into one GPU (per direction); ``latency_s``: fixed cost of
    one reload; ``source``: where the bandwidth comes from."""

    kind: str
    capacity_bytes: float
    bandwidth_bytes_per_s: float
    latency_s: float
    source: str = ""

    def __post_init__(self) -> None:
        if self.kind not in TIER_KINDS:
            raise InputError("kv_offload", self.kind, f"a tier kind: one of {', '.join(TIER_KINDS)}")
        for name in ("capacity_bytes", "bandwidth_bytes_per_s"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise InputError(f"kv_offload.{self.kind}.{name}", v, "a finite number > 0")
        if not (isinstance(self.latency_s, int | float) and 0 <= self.latency_s <= 1):
            raise InputError(f"kv_offload.{self.kind}.latency_s", self.latency_s, "a time in [0, 1] s")

    def reload_time_s(self, bytes_per_gpu: float) -> float:
        """Time to bring ``bytes_per_gpu`` back into each GPU's HBM: latency + bytes / bandwidth
        (every GPU of the instance reloads its own shard over its own share of the tier)."""
        return self.latency_s + float(bytes_per_gpu) / self.bandwidth_bytes_per_s

    def instance_bytes(self, instance_gpus: int, gpus_per_node: int) -> float:
        """Capacity one instance of ``instance_gpus`` GPUs can use: its GPUs' share of a node tier
        (capacity x GPUs / GPUs per node), or the whole shared remote store."""
        if self.kind == "remote":
            return self.capacity_bytes
        return self.capacity_bytes * instance_gpus / gpus_per_node


@dataclass(frozen=True)
class KVOffload:
    """The tiers below HBM of one node type, fastest first, and the workload's prefix working set
    (KV tokens of the distinct reused prefixes; None: the reused prefixes fit wherever they are)."""

    tiers: tuple[KVTier, ...]
    node: str
    gpus_per_node: int
    working_set_tokens: float | None = None

    def __post_init__(self) -> None:
        if not all(isinstance(t, KVTier) for t in self.tiers):
            raise InputError("kv_offload", self.tiers, "KVTier values")
        kinds = [t.kind for t in self.tiers]
        if len(set(kinds)) != len(kinds):
            raise InputError("kv_offload", ",".join(kinds), "each tier kind at most once")
        object.__setattr__(self, "tiers", tuple(sorted(self.tiers, key=lambda t: TIER_KINDS.index(t.kind))))
        w = self.working_set_tokens
        if w is not None and not (
            isinstance(w, int | float) and not isinstance(w, bool) and 1 <= w <= MAX_WORKING_SET_TOKENS
        ):
            raise InputError("kv_offload.working-set", w, f"a token count in [1, {MAX_WORKING_SET_TOKENS:g}]")

    @property
    def label(self) -> str:
        """The spec line back, e.g. ``cpu:2 TB,nvme:30.7 TB`` (sizes rounded to 3 digits)."""
        parts = [f"{t.kind}:{format_bytes(t.capacity_bytes)}" for t in self.tiers]
        if self.working_set_tokens is not None:
            w = self.working_set_tokens
            parts.append(f"working-set:{w / 1e6:.4g}M" if w >= 1e6 else f"working-set:{w:.0f}")
        return ",".join(parts)


def node_for_gpu(gpu: str) -> Node:
    """The catalog's first node profile holding ``gpu`` GPUs (e.g. h200 -> hgx-h200-8); an error
    naming ``node`` when the catalog has none."""
    name = get_gpu(gpu).name
    for n in sorted({id(x): x for x in load_catalog().nodes.values()}.values(), key=lambda x: x.name):
        if n.gpu == name:
            return n
    raise InputError("node", name, "a node profile for this GPU (give --node); the catalog has none")


def _count(text: str, field: str) -> float:
    m = _COUNT.match(text.strip())
    if m is None:
        raise InputError(field, text, "a token count such as 20M, 500k or 2e7")
    return float(m.group(1)) * _SUFFIX[m.group(2)]


def _default_bandwidth(kind: str, node: Node) -> tuple[float, float, str]:
    """(bandwidth per GPU, latency, source) of a tier on ``node`` from its profile."""
    where = f"node {node.name}"
    if kind == "cpu":
        if node.host_link_bandwidth_bytes_per_s is not None:
            return node.host_link_bandwidth_bytes_per_s, HOST_COPY_LATENCY_S, f"{where} host_link_bandwidth"
        gpu = get_gpu(node.gpu)
        return gpu.pcie_bandwidth_bytes_per_s, HOST_COPY_LATENCY_S, f"GPU {gpu.name} PCIe bandwidth"
    if kind == "nvme":
        bw = node.weight_load_bytes_per_s / node.gpus_per_node
        return bw, NVME_READ_LATENCY_S, f"{where} storage_bandwidth / {node.gpus_per_node} GPUs"
    link = get_link(node.nic_link)
    bw = link.bandwidth_bytes_per_s * link.efficiency * node.nics_per_node / node.gpus_per_node
    return bw, link.latency_s, f"{where} {node.nics_per_node} x {link.name} / {node.gpus_per_node} GPUs"


def _check_capacity(kind: str, size: float, node: Node, field: str) -> None:
    """A cpu tier within the host memory, an nvme tier within the NVMe drives, a remote store < 1 EB."""
    if kind == "remote":
        if size > MAX_REMOTE_BYTES:
            raise InputError(field, format_bytes(size), f"at most {format_bytes(MAX_REMOTE_BYTES)}")
        return
    limit, key = (
        (node.host_memory_bytes, "host_memory")
        if kind == "cpu"
        else (node.nvme_capacity_bytes, "nvme_capacity")
    )
    if limit is None:
        raise InputError(field, format_bytes(size), f"a node profile stating {key} ({node.name} states none)")
    if size > limit:
        raise InputError(
            field, format_bytes(size), f"at most the {key} of node {node.name} ({format_bytes(limit)})"
        )


def parse_tier_items(
    spec: str, field: str = "kv_offload"
) -> tuple[list[tuple[str, float, float | None]], float | None]:
    """The grammar alone (no node): ([(tier, size bytes, bandwidth or None)], working set or None)."""
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(field, spec, "tiers such as 'cpu:512GB,nvme:4TB'")
    if len(spec) > MAX_SPEC_CHARS:
        raise InputError(field, spec[:40] + "...", f"at most {MAX_SPEC_CHARS} characters")
    items: list[tuple[str, float, float | None]] = []
    working_set = None
    for item in spec.split(","):
        key, sep, value = item.partition(":")
        key = key.strip().lower()
        if not sep or not value.strip():
            raise InputError(field, item.strip(), "TIER:SIZE[@BANDWIDTH] or working-set:COUNT")
        if key == "working-set":
            working_set = _count(value, f"{field}.working-set")
            continue
        if key not in TIER_KINDS:
            raise InputError(field, key, f"a tier: one of {', '.join(TIER_KINDS)}, or working-set")
        size_text, at, bw_text = value.partition("@")
        size = parse_quantity(size_text.strip(), Kind.BYTES, f"{field}.{key}")
        bw = parse_quantity(bw_text.strip(), Kind.BANDWIDTH, f"{field}.{key} bandwidth") if at else None
        if size <= 0 or (bw is not None and bw <= 0):
            raise InputError(f"{field}.{key}", value.strip(), "a size and a bandwidth > 0")
        items.append((key, size, bw))
    return items, working_set


def parse_kv_offload(spec: str, node: str | Node, field: str = "kv_offload") -> KVOffload:
    """Parse a tier spec line (grammar in the module docstring) against ``node``'s profile.

    E.g. ``parse_kv_offload("cpu:1TB,nvme:8TB,working-set:50M", "hgx-h200-8")``. Each error names
    the field (``kv_offload.cpu``, ...) and the allowed range."""
    items, working_set = parse_tier_items(spec, field)
    nd = get_node(node)
    tiers: list[KVTier] = []
    for key, size, given_bw in items:
        _check_capacity(key, size, nd, f"{field}.{key}")
        bw, latency, source = _default_bandwidth(key, nd)
        if given_bw is not None:
            bw, source = given_bw, "given"
        tiers.append(KVTier(key, size, bw, latency, source))
    return KVOffload(tuple(tiers), nd.name, nd.gpus_per_node, working_set)


def resolve_kv_offload(value: str | KVOffload | None, node: Node | None, gpu: str) -> KVOffload | None:
    """A plan's ``kv_offload``: None, a KVOffload, or a spec line parsed against ``node`` (None:
    the catalog's node for ``gpu``, :func:`node_for_gpu`)."""
    if value is None:
        return None
    if isinstance(value, KVOffload):
        if node is not None and value.node != node.name:
            raise InputError("kv_offload", value.node, f"tiers of the plan's node {node.name}")
        return value
    if not isinstance(value, str):
        raise InputError("kv_offload", value, "a tier spec such as 'cpu:512GB,nvme:4TB' or a KVOffload")
    return parse_kv_offload(value, node if node is not None else node_for_gpu(gpu))
