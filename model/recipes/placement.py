"""Node placement: which instance of which pool runs on which node and GPUs.

Nodes come from the plan's node profile (GPUs per node). Instances of the ``spread`` pools (the
decode pool: each node then holds a decode instance its prefill neighbours can send KV to within
the node) go round-robin over the fewest nodes that can hold all GPUs; the others are packed
first-fit decreasing (largest instance first, each into the first node with enough free GPUs,
lowest GPU indices first). An instance larger than a node, or one the plan spreads over ``nodes``
nodes (Parallelism.nodes), takes whole fresh nodes, its GPUs split evenly. Without a node profile each
instance gets a host of its own (the plan did not say how GPUs are grouped).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from model.hardware.nodes import Node
from model.hardware.parallelism import Parallelism

BASE_PORT = 8100
"""HTTP port of the first instance on a node; the next instances there take the following ports."""


@dataclass(frozen=True)
class Slot:
    """GPUs ``gpus`` (indices on the node) of node ``node`` (0-based)."""

    node: int
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class Instance:
    """Instance ``index`` of pool ``pool`` ("replica", "prefill" or "decode") and where it runs;
    ``port`` is its HTTP port on its first node (unique per node)."""

    pool: str
    index: int
    parallel: Parallelism
    slots: tuple[Slot, ...]
    port: int

    @property
    def name(self) -> str:
        """e.g. ``prefill-0``."""
        return f"{self.pool}-{self.index}"

    @property
    def head(self) -> int:
        """The node whose GPUs hold rank 0 (where the server listens)."""
        return self.slots[0].node


@dataclass(frozen=True)
class Placement:
    """Every instance's node and GPUs; ``node_name`` is the node profile (None: one host per
    instance) and ``gpus_per_node`` its GPU count."""

    node_name: str | None
    gpus_per_node: int | None
    n_nodes: int
    instances: tuple[Instance, ...]

    def on_node(self, node: int) -> tuple[Instance, ...]:
        """Instances with GPUs on ``node``."""
        return tuple(i for i in self.instances if any(s.node == node for s in i.slots))

    def of_pool(self, pool: str) -> tuple[Instance, ...]:
        """Instances of one pool, by index."""
        return tuple(sorted((i for i in self.instances if i.pool == pool), key=lambda i: i.index))

    def gpus_used(self, node: int) -> int:
        """GPUs in use on ``node``."""
        return sum(len(s.gpus) for i in self.instances for s in i.slots if s.node == node)


def place(
    pools: tuple[tuple[str, int, Parallelism], ...],
    node: Node | None,
    spread: tuple[str, ...] = ("decode",),
    base_port: int = BASE_PORT,
) -> Placement:
    """Place ``count`` instances of each ``(pool, count, parallel)``; see the module docstring."""
    wanted = [(pool, k, par) for pool, count, par in pools for k in range(count)]
    size = node.gpus_per_node if node is not None else None
    free: list[list[int]] = []  # free GPU indices per node
    slots: dict[int, tuple[Slot, ...]] = {}
    fits = [j for j, w in enumerate(wanted) if size is not None and w[2].nodes == 1 and w[2].gpus <= size]
    if size is not None and fits:
        free = [list(range(size)) for _ in range(math.ceil(sum(wanted[j][2].gpus for j in fits) / size))]
        for r, j in enumerate(j for j in fits if wanted[j][0] in spread):
            g = wanted[j][2].gpus
            n = next((m % len(free) for m in range(r, r + len(free)) if len(free[m % len(free)]) >= g), None)
            if n is not None:
                got, free[n] = free[n][:g], free[n][g:]
                slots[j] = (Slot(n, tuple(got)),)
    order = sorted((j for j in range(len(wanted)) if j not in slots), key=lambda j: -wanted[j][2].gpus)
    for j in order:
        _, _, par = wanted[j]
        g = par.gpus
        if size is None:
            free.append([])
            slots[j] = (Slot(len(free) - 1, tuple(range(g))),)
            continue
        spread = max(par.nodes, math.ceil(g / size))
        if spread > 1:
            per = math.ceil(g / spread)
            taken = []
            for _ in range(spread):
                free.append(list(range(per, size)))
                taken.append(Slot(len(free) - 1, tuple(range(per))))
            slots[j] = tuple(taken)
            continue
        n = next((i for i, f in enumerate(free) if len(f) >= g), None)
        if n is None:
            free.append(list(range(size)))
            n = len(free) - 1
        got, free[n] = free[n][:g], free[n][g:]
        slots[j] = (Slot(n, tuple(got)),)
    ports: dict[int, int] = {}
    instances = []
    for j, (pool, k, par) in enumerate(wanted):
        head = slots[j][0].node
        ports[head] = ports.get(head, base_port - 1) + 1
        instances.append(Instance(pool, k, par, slots[j], ports[head]))
    return Placement(None if node is None else node.name, size, len(free), tuple(instances))
