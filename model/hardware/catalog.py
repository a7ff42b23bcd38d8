"""The hardware catalog: every GPU, link, node and engine profile visible to one call (built-ins in
the ``hardware_profiles`` package plus user directories), with lookup by name, alias or path.

A user adds a profile by writing one more file in a directory passed as ``profile_dirs`` (same
``gpus/``, ``links/``, ``nodes/``, ``engines/`` layout, or files directly) or by constructing the
dataclasses in Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from model.errors import InputError, ProfileError, UnknownNameError, short
from model.hardware.engines import DEFAULT_ENGINE, Engine, engine_from_toml
from model.hardware.gpus import GPU, gpu_from_toml
from model.hardware.links import Link, link_from_toml
from model.hardware.nodes import Node, node_from_toml
from model.hardware.schema import read_toml
from model.limits import is_dir, is_file

MAX_PROFILE_DIRS = 32  # profile directories per call: each is read and indexed once


@dataclass(frozen=True)
class HardwareCatalog:
    """All GPU, link, node and engine profiles visible to one call: built-ins plus user directories."""

    gpus: Mapping[str, GPU]
    links: Mapping[str, Link]
    nodes: Mapping[str, Node]
    engines: Mapping[str, Engine]

    def gpu(self, name: str | GPU) -> GPU:
        """Look up a GPU by name or alias (case-insensitive), or load a ``.toml`` path."""
        return _lookup("gpu", name, self.gpus, GPU, gpu_from_toml)

    def link(self, name: str | Link) -> Link:
        """Look up a link by name or alias, or load a ``.toml`` path."""
        return _lookup("link", name, self.links, Link, link_from_toml)

    def node(self, name: str | Node) -> Node:
        """Look up a node by name or alias, or load a ``.toml`` path."""
        return _lookup("node", name, self.nodes, Node, node_from_toml)

    def engine(self, name: str | Engine) -> Engine:
        """Look up a serving engine by name or alias, or load a ``.toml`` path."""
        return _lookup("engine", name, self.engines, Engine, engine_from_toml)


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


_Profiles = tuple[list[GPU], list[Link], list[Node], list[Engine]]


def _load_dir(root: Any) -> _Profiles:
    def read(f: Any, loader: Any) -> Any:
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise ProfileError(f.name, "(file)", f"cannot read: {short(str(err))}") from None
        return loader(Path(str(f)), text)

    gpus = [read(f, gpu_from_toml) for f in _files(root, "gpus")]
    links = [read(f, link_from_toml) for f in _files(root, "links")]
    nodes = [read(f, node_from_toml) for f in _files(root, "nodes")]
    engines = [read(f, engine_from_toml) for f in _files(root, "engines")]
    return gpus, links, nodes, engines


def _user_dir(path: str | Path) -> _Profiles:
    """A user directory: the gpus/links/nodes/engines layout, or loose files sorted by their keys."""
    root = Path(path)
    if not is_dir(root):
        raise InputError("profile_dir", str(path), "an existing directory of .toml profiles")
    gpus, links, nodes, engines = _load_dir(root)
    for f in sorted(p for p in root.iterdir() if p.is_file() and p.suffix.lower() == ".toml"):
        data = read_toml(f)
        if "memory" in data:
            gpus.append(gpu_from_toml(f))
        elif "gpus_per_node" in data:
            nodes.append(node_from_toml(f))
        elif "batching" in data:
            engines.append(engine_from_toml(f))
        else:
            links.append(link_from_toml(f))
    return gpus, links, nodes, engines


@lru_cache(maxsize=8)
def _builtin() -> tuple[tuple[GPU, ...], tuple[Link, ...], tuple[Node, ...], tuple[Engine, ...]]:
    gpus, links, nodes, engines = _load_dir(resources.files("hardware_profiles"))
    return tuple(gpus), tuple(links), tuple(nodes), tuple(engines)


@lru_cache(maxsize=16)
def _catalog(profile_dirs: tuple[str, ...]) -> HardwareCatalog:
    gpus, links, nodes, engines = (list(x) for x in _builtin())
    for d in profile_dirs:
        g, li, n, e = _user_dir(d)
        gpus += g
        links += li
        nodes += n
        engines += e
    catalog = HardwareCatalog(
        _index(gpus, "gpu"), _index(links, "link"), _index(nodes, "node"), _index(engines, "engine")
    )
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


def get_engine(
    name: str | Engine | None = None, profile_dirs: str | Path | Sequence[str | Path] | None = None
) -> Engine:
    """A serving-engine profile by name, alias or ``.toml`` path (None: the default, vLLM)."""
    return load_catalog(profile_dirs).engine(DEFAULT_ENGINE if name is None else name)


def unique(table: Mapping[str, Any]) -> list[Any]:
    """The distinct profiles of a catalog table (aliases collapsed), sorted by name."""
    return sorted({id(v): v for v in table.values()}.values(), key=lambda p: p.name)
