"""Hardware profiles: GPU, link and node data with their sources, validated at load time.

Profiles are TOML files (schema in docs/profiles.md). Every quantity is an inline table
``{ value = "3.35 TB/s", source = "..." }`` whose value pint reads; loading converts it to an SI
float and keeps the source. Built-in files live in the ``hardware_profiles`` package; a user adds a
profile by writing one more file in a directory passed as ``profile_dirs`` (same ``gpus/``,
``links/``, ``nodes/`` layout, or files directly) or by constructing the dataclasses in Python.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from model.errors import InputError, ProfileError, UnknownNameError, short
from model.limits import MAX_NESTING_DEPTH, MAX_PROFILE_BYTES, check_depth, check_file_size, is_dir, is_file
from model.units import Kind, parse_quantity

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
# Achieved fractions of peak (MFU, MBU, link efficiency): below 1% is a unit slip, not a measurement.
_MIN_EFFICIENCY = 0.01
# Dense peak FLOP/s per dtype: 1 TFLOP/s to 1 EFLOP/s.
_PEAK_FLOPS_RANGE = (1e12, 1e18)

DTYPES_WITH_PEAK = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
MAX_PROFILE_DIRS = 32  # profile directories per call: each is read and indexed once
LINK_KINDS = ("network", "intra-node", "pcie", "same-gpu")

Sources = tuple[tuple[str, str], ...]

# A profile name: a plain file stem, never a path (no '/', '\\', '..' or leading dot).
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")


def _positive(name: str, value: float, owner: str) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise InputError(f"{owner}.{name}", value, "a finite number > 0")


def _fraction(name: str, value: float, owner: str) -> None:
    if not (isinstance(value, int | float) and _MIN_EFFICIENCY <= value <= 1):
        raise InputError(
            f"{owner}.{name}", value, f"a fraction of peak in [{_MIN_EFFICIENCY:g}, 1] (dimensionless)"
        )


def _source_of(sources: Sources, key: str) -> str:
    return dict(sources).get(key, "")


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
            _positive(name, getattr(self, name), owner)
        for name in ("idle_w", "price_usd_per_hour", "interconnect_bandwidth_bytes_per_s"):
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
        _fraction("prefill_mfu", self.prefill_mfu, owner)
        _fraction("decode_mbu", self.decode_mbu, owner)
        if not self.peak_flops_per_s:
            raise InputError(f"{owner}.peak_flops_per_s", (), "at least one dtype, e.g. bf16")
        for dtype, flops in self.peak_flops_per_s:
            if dtype not in DTYPES_WITH_PEAK:
                raise InputError(f"{owner}.compute", dtype, f"one of {', '.join(DTYPES_WITH_PEAK)}")
            _positive(f"compute.{dtype}", flops, owner)
            if not _PEAK_FLOPS_RANGE[0] <= flops <= _PEAK_FLOPS_RANGE[1]:
                raise InputError(
                    f"{owner}.compute.{dtype}", flops, "a dense peak between 1 TFLOPS and 1 EFLOPS (FLOP/s)"
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

    def source(self, field_name: str) -> str:
        """The citation recorded for ``field_name`` (e.g. ``"memory.bandwidth"``)."""
        return _source_of(self.sources, field_name)


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

    def __post_init__(self) -> None:
        owner = f"link {self.name}"
        if self.kind not in LINK_KINDS:
            raise InputError(f"{owner}.kind", self.kind, f"one of {', '.join(LINK_KINDS)}")
        if self.kind == "same-gpu":
            return
        _positive("bandwidth_bytes_per_s", self.bandwidth_bytes_per_s, owner)
        if not 1e3 <= self.bandwidth_bytes_per_s <= 1e18:  # catches unit slips, allows what-if sweeps
            raise InputError(
                f"{owner}.bandwidth_bytes_per_s",
                self.bandwidth_bytes_per_s,
                "a line rate between 8 kbit/s and 8 Ebit/s (bytes/s)",
            )
        if not (math.isfinite(self.latency_s) and 0 <= self.latency_s <= 1.0):
            raise InputError(f"{owner}.latency_s", self.latency_s, "a time in [0, 1] s")
        _fraction("efficiency", self.efficiency, owner)

    @property
    def effective_bandwidth_bytes_per_s(self) -> float:
        """Achievable bandwidth = line rate x efficiency (infinite for ``same-gpu``)."""
        return self.bandwidth_bytes_per_s * self.efficiency

    def source(self, field_name: str) -> str:
        return _source_of(self.sources, field_name)


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
    sources: Sources = field(default=(), compare=False, repr=False)
    path: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = f"node {self.name}"
        for name in ("gpus_per_node", "nics_per_node"):
            value = getattr(self, name)
            if not (isinstance(value, int) and 1 <= value <= 1024):
                raise InputError(f"{owner}.{name}", value, "a whole number in [1, 1024]")

    def source(self, field_name: str) -> str:
        return _source_of(self.sources, field_name)


# ---------------------------------------------------------------------------------------------
# TOML reading: a small declarative schema per section, so unknown keys and wrong units are caught.

_QUANTITY = "quantity"
_NUMBER = "number"
_TEXT = "text"
_INT = "int"
_LIST = "list"

# (section, key) -> (type, Kind or None, required)
_GPU_SCHEMA: dict[tuple[str, str], tuple[str, Kind | None, bool]] = {
    ("", "schema"): (_INT, None, True),
    ("", "name"): (_TEXT, None, True),
    ("", "full_name"): (_TEXT, None, True),
    ("", "vendor"): (_TEXT, None, False),
    ("", "aliases"): (_LIST, None, False),
    ("memory", "capacity"): (_QUANTITY, Kind.BYTES, True),
    ("memory", "bandwidth"): (_QUANTITY, Kind.BANDWIDTH, True),
    **{("compute", d): (_QUANTITY, Kind.FLOPS, False) for d in DTYPES_WITH_PEAK},
    ("interconnect", "kind"): (_TEXT, None, True),
    ("interconnect", "bandwidth"): (_QUANTITY, Kind.BANDWIDTH, False),
    ("pcie", "generation"): (_INT, None, True),
    ("pcie", "bandwidth"): (_QUANTITY, Kind.BANDWIDTH, True),
    ("power", "tdp"): (_QUANTITY, Kind.POWER, True),
    ("power", "idle"): (_QUANTITY, Kind.POWER, True),
    ("price", "usd_per_hour"): (_NUMBER, None, True),
    ("efficiency", "prefill_mfu"): (_NUMBER, None, True),
    ("efficiency", "decode_mbu"): (_NUMBER, None, True),
    ("efficiency", "step_overhead"): (_QUANTITY, Kind.TIME, True),
}

_LINK_SCHEMA: dict[tuple[str, str], tuple[str, Kind | None, bool]] = {
    ("", "schema"): (_INT, None, True),
    ("", "name"): (_TEXT, None, True),
    ("", "full_name"): (_TEXT, None, True),
    ("", "kind"): (_TEXT, None, True),
    ("", "aliases"): (_LIST, None, False),
    ("", "note"): (_TEXT, None, False),
    ("", "bandwidth"): (_QUANTITY, Kind.BANDWIDTH, False),
    ("", "latency"): (_QUANTITY, Kind.TIME, False),
    ("", "efficiency"): (_NUMBER, None, False),
}

_NODE_SCHEMA: dict[tuple[str, str], tuple[str, Kind | None, bool]] = {
    ("", "schema"): (_INT, None, True),
    ("", "name"): (_TEXT, None, True),
    ("", "full_name"): (_TEXT, None, True),
    ("", "gpu"): (_TEXT, None, True),
    ("", "gpus_per_node"): (_INT, None, True),
    ("", "intra_node_link"): (_TEXT, None, True),
    ("", "nic_link"): (_TEXT, None, True),
    ("", "nics_per_node"): (_INT, None, True),
}


def _read_toml(path: Path, text: str | None = None) -> dict[str, Any]:
    """Parse a profile within the limits of model.limits (file size, nesting depth)."""
    try:
        if text is None:
            check_file_size(path, path.name, MAX_PROFILE_BYTES)
            text = path.read_text(encoding="utf-8")
        if len(text) > MAX_PROFILE_BYTES:
            raise ProfileError(path.name, "(file)", f"larger than {MAX_PROFILE_BYTES:,} characters")
        check_depth(text, path.name)
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ProfileError(path.name, "(file)", f"not valid TOML: {short(str(err))}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ProfileError(path.name, "(file)", f"cannot read: {short(str(err))}") from None
    except InputError as err:
        raise ProfileError(path.name, "(file)", f"expected {err.allowed}") from None
    except RecursionError:
        raise ProfileError(path.name, "(file)", f"at most {MAX_NESTING_DEPTH} levels of nesting") from None


def _flatten(data: Mapping[str, Any]) -> dict[tuple[str, str], Any]:
    """Top-level keys become ("", key); one level of tables becomes (table, key)."""
    flat: dict[tuple[str, str], Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and not ("value" in value and "source" in value):
            for sub, subvalue in value.items():
                flat[(key, sub)] = subvalue
        else:
            flat[("", key)] = value
    return flat


def _dotted(section: str, key: str) -> str:
    return f"{section}.{key}" if section else key


def _validate(
    path: Path, data: Mapping[str, Any], schema: Mapping[tuple[str, str], tuple[str, Kind | None, bool]]
) -> tuple[dict[str, Any], Sources]:
    """Check keys, types and units against ``schema``; return {dotted key: value} and the sources."""
    where = path.name
    flat = _flatten(data)
    unknown = [k for k in flat if k not in schema]
    if unknown:
        allowed = sorted({_dotted(*k) for k in schema})
        raise ProfileError(where, _dotted(*unknown[0]), f"unknown key; allowed keys: {', '.join(allowed)}")
    values: dict[str, Any] = {}
    sources: list[tuple[str, str]] = []
    for key, (typ, kind, required) in schema.items():
        dotted = _dotted(*key)
        if key not in flat:
            if required:
                raise ProfileError(where, dotted, "missing (required)")
            continue
        raw = flat[key]
        if typ in (_QUANTITY, _NUMBER) or (typ == _INT and isinstance(raw, dict)):
            if not isinstance(raw, dict) or "value" not in raw or "source" not in raw:
                raise ProfileError(where, dotted, 'expected { value = ..., source = "..." }')
            extra = set(raw) - {"value", "source", "as_of"}
            if extra:
                raise ProfileError(
                    where, dotted, f"unknown key {sorted(extra)[0]!r} (allowed: value, source)"
                )
            source = raw["source"]
            if not isinstance(source, str) or not source.strip():
                raise ProfileError(where, f"{dotted}.source", "a non-empty citation is required")
            sources.append((dotted, source))
            if "as_of" in raw:
                values[f"{dotted}.as_of"] = str(raw["as_of"])
            raw = raw["value"]
        if typ == _QUANTITY:
            try:
                value: Any = parse_quantity(raw, kind, dotted) if kind else raw
            except InputError as err:
                raise ProfileError(where, dotted, f"expected {err.allowed}, got {raw!r}") from None
            if not value > 0:
                raise ProfileError(where, dotted, f"must be > 0, got {raw!r}")
        elif typ == _NUMBER:
            if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
                raise ProfileError(where, dotted, f"expected a number, got {raw!r}")
            if raw < 0:
                raise ProfileError(where, dotted, f"must be >= 0, got {raw!r}")
            value = float(raw)
        elif typ == _INT:
            if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
                raise ProfileError(where, dotted, f"expected a whole number >= 1, got {raw!r}")
            value = raw
        elif typ == _LIST:
            if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
                raise ProfileError(where, dotted, "expected a list of strings")
            value = tuple(x.lower() for x in raw)
        else:
            if not isinstance(raw, str) or not raw.strip():
                raise ProfileError(where, dotted, f"expected a non-empty string, got {raw!r}")
            value = raw
        values[dotted] = value
    if values.get("schema") != 1:
        raise ProfileError(
            where, "schema", f"unsupported schema version {values.get('schema')!r} (allowed: 1)"
        )
    if not _NAME.fullmatch(values["name"]):
        raise ProfileError(
            where, "name", f"letters, digits, '.', '_' or '-' (not path-like), got {short(values['name'])!r}"
        )
    if values["name"] != path.stem and path.suffix.lower() == ".toml":
        raise ProfileError(
            where, "name", f"must equal the file name stem {path.stem!r}, got {short(values['name'])!r}"
        )
    return values, tuple(sources)


def _wrap(path: Path, build: Any) -> Any:
    """Re-raise dataclass range errors as ProfileErrors naming the file."""
    try:
        return build()
    except InputError as err:
        raise ProfileError(
            path.name, err.field.split(".", 1)[-1], f"got {err.value!r}; allowed: {err.allowed}"
        ) from None


def gpu_from_toml(path: Path, text: str | None = None) -> GPU:
    """Read and validate one GPU profile file."""
    v, sources = _validate(path, _read_toml(path, text), _GPU_SCHEMA)
    peaks = tuple((d, v[f"compute.{d}"]) for d in DTYPES_WITH_PEAK if f"compute.{d}" in v)
    if not peaks:
        raise ProfileError(path.name, "compute", "at least one dense peak (e.g. compute.bf16) is required")
    kind = v["interconnect.kind"]
    if kind.lower() != "none" and "interconnect.bandwidth" not in v:
        raise ProfileError(
            path.name, "interconnect.bandwidth", f"required when interconnect.kind is {kind!r}"
        )
    return _wrap(
        path,
        lambda: GPU(
            name=v["name"],
            full_name=v["full_name"],
            vendor=v.get("vendor", ""),
            aliases=v.get("aliases", ()),
            memory_bytes=v["memory.capacity"],
            memory_bandwidth_bytes_per_s=v["memory.bandwidth"],
            peak_flops_per_s=peaks,
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


def link_from_toml(path: Path, text: str | None = None) -> Link:
    """Read and validate one link profile file (``same-gpu`` links carry no numbers)."""
    v, sources = _validate(path, _read_toml(path, text), _LINK_SCHEMA)
    if v["kind"] == "same-gpu":
        return _wrap(
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
    return _wrap(
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
        ),
    )


def node_from_toml(path: Path, text: str | None = None) -> Node:
    """Read and validate one node profile file."""
    v, sources = _validate(path, _read_toml(path, text), _NODE_SCHEMA)
    return _wrap(
        path,
        lambda: Node(
            v["name"],
            v["full_name"],
            v["gpu"],
            v["gpus_per_node"],
            v["intra_node_link"],
            v["nic_link"],
            v["nics_per_node"],
            sources,
            str(path),
        ),
    )


# ---------------------------------------------------------------------------------------------
# Catalog


@dataclass(frozen=True)
class HardwareCatalog:
    """All GPU, link and node profiles visible to one call: built-ins plus user directories."""

    gpus: Mapping[str, GPU]
    links: Mapping[str, Link]
    nodes: Mapping[str, Node]

    def gpu(self, name: str | GPU) -> GPU:
        """Look up a GPU by name or alias (case-insensitive), or load a ``.toml`` path."""
        return _lookup("gpu", name, self.gpus, GPU, gpu_from_toml)

    def link(self, name: str | Link) -> Link:
        """Look up a link by name or alias, or load a ``.toml`` path."""
        return _lookup("link", name, self.links, Link, link_from_toml)

    def node(self, name: str | Node) -> Node:
        """Look up a node by name or alias, or load a ``.toml`` path."""
        return _lookup("node", name, self.nodes, Node, node_from_toml)


def _lookup(kind: str, name: Any, table: Mapping[str, Any], cls: type, loader: Any) -> Any:
    if isinstance(name, cls):
        return name
    if not isinstance(name, str) or not name.strip():
        raise InputError(kind, name, f"a {kind} name (see `pdplan list {kind}s`) or a .toml file path")
    key = name.strip().lower()
    if key in table:
        return table[key]
    if key.endswith(".toml"):
        path = Path(name)
        if not is_file(path):
            raise InputError(kind, name, "an existing .toml file")
        return loader(path)
    raise UnknownNameError(kind, name, sorted({p.name for p in table.values()}))


def _index(items: Iterable[Any], kind: str) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for item in items:
        for key in (item.name.lower(), *getattr(item, "aliases", ())):
            table[key] = item  # later directories override earlier ones
    return table


def _files(root: Any, sub: str) -> list[Any]:
    folder = root / sub
    if not is_dir(folder):
        return []
    return sorted((f for f in folder.iterdir() if f.name.lower().endswith(".toml")), key=lambda f: f.name)


def _load_dir(root: Any) -> tuple[list[GPU], list[Link], list[Node]]:
    def read(f: Any, loader: Any) -> Any:
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise ProfileError(f.name, "(file)", f"cannot read: {err}") from None
        return loader(Path(str(f)), text)

    gpus = [read(f, gpu_from_toml) for f in _files(root, "gpus")]
    links = [read(f, link_from_toml) for f in _files(root, "links")]
    nodes = [read(f, node_from_toml) for f in _files(root, "nodes")]
    return gpus, links, nodes


def _user_dir(path: str | Path) -> tuple[list[GPU], list[Link], list[Node]]:
    """A user directory: the gpus/links/nodes layout, or loose files sorted by their ``kind``."""
    root = Path(path)
    if not is_dir(root):
        raise InputError("profile_dir", str(path), "an existing directory of .toml profiles")
    gpus, links, nodes = _load_dir(root)
    for f in sorted(p for p in root.iterdir() if p.is_file() and p.suffix.lower() == ".toml"):
        data = _read_toml(f)
        if "memory" in data:
            gpus.append(gpu_from_toml(f))
        elif "gpus_per_node" in data:
            nodes.append(node_from_toml(f))
        else:
            links.append(link_from_toml(f))
    return gpus, links, nodes


@lru_cache(maxsize=8)
def _builtin() -> tuple[tuple[GPU, ...], tuple[Link, ...], tuple[Node, ...]]:
    gpus, links, nodes = _load_dir(resources.files("hardware_profiles"))
    return tuple(gpus), tuple(links), tuple(nodes)


@lru_cache(maxsize=16)
def _catalog(profile_dirs: tuple[str, ...]) -> HardwareCatalog:
    gpus, links, nodes = (list(x) for x in _builtin())
    for d in profile_dirs:
        g, li, n = _user_dir(d)
        gpus += g
        links += li
        nodes += n
    catalog = HardwareCatalog(_index(gpus, "gpu"), _index(links, "link"), _index(nodes, "node"))
    for node in nodes:  # a node must refer to profiles that exist
        for field_name, lookup in (
            ("gpu", catalog.gpu),
            ("intra_node_link", catalog.link),
            ("nic_link", catalog.link),
        ):
            try:
                found = lookup(getattr(node, field_name))
            except UnknownNameError as err:
                raise ProfileError(Path(node.path).name, field_name, str(err)) from None
            if field_name == "intra_node_link" and found.kind not in ("intra-node", "pcie"):
                raise ProfileError(
                    Path(node.path).name,
                    field_name,
                    f"{found.name} is a {found.kind} link; "
                    "expected an intra-node or PCIe link (NVLink, xGMI, PCIe)",
                )
            if field_name == "nic_link" and found.kind != "network":
                raise ProfileError(
                    Path(node.path).name,
                    field_name,
                    f"{found.name} is a {found.kind} link; "
                    "expected a network link (InfiniBand, RoCE, Ethernet)",
                )
    return catalog


def load_catalog(profile_dirs: str | Path | Sequence[str | Path] | None = None) -> HardwareCatalog:
    """Built-in profiles plus any user directories (later ones override earlier names)."""
    allowed = "None, a directory path, or a list of directory paths"
    if profile_dirs is None:
        dirs: tuple[str, ...] = ()
    elif isinstance(profile_dirs, str | Path):
        dirs = (str(profile_dirs),)
    elif isinstance(profile_dirs, Sequence) and len(profile_dirs) <= MAX_PROFILE_DIRS:
        dirs = tuple(
            d if isinstance(d, str) else str(d) if isinstance(d, Path) else None for d in profile_dirs
        )
    else:
        raise InputError("profile_dirs", short(profile_dirs), allowed)
    for d in dirs:
        if d is None or not d.strip():
            raise InputError("profile_dirs", short(profile_dirs), allowed + " (not empty)")
    return _catalog(dirs)


def get_gpu(name: str | GPU, profile_dirs: str | Path | Sequence[str | Path] | None = None) -> GPU:
    """A GPU profile by name, alias or ``.toml`` path."""
    return load_catalog(profile_dirs).gpu(name)


def get_link(name: str | Link, profile_dirs: str | Path | Sequence[str | Path] | None = None) -> Link:
    """A link profile by name, alias or ``.toml`` path."""
    return load_catalog(profile_dirs).link(name)


def get_node(name: str | Node, profile_dirs: str | Path | Sequence[str | Path] | None = None) -> Node:
    """A node profile by name, alias or ``.toml`` path."""
    return load_catalog(profile_dirs).node(name)


def unique(table: Mapping[str, Any]) -> list[Any]:
    """The distinct profiles of a catalog table (aliases collapsed), sorted by name."""
    return sorted({id(v): v for v in table.values()}.values(), key=lambda p: p.name)
