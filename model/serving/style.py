"""The serving-style protocol: what a style (colocated, chunked, disaggregated, ...) provides so the
planner, simulator, CLI, reports and app can treat every style alike.

A style is one object registered in :mod:`model.serving.registry` under its name. It owns its
configuration type, the candidates it offers for a GPU budget and for a target rate, the candidate
set that evaluates them analytically (vectorised), the instance layout the simulator replays, its
command-line flags and its labels. Recipe: docs/architecture.md, "Adding a serving style";
exercised by tests/test_registry.py.

Words: the *style* is how prefill and decode are placed on GPUs; the *architecture* of the LLM is
``model.llm.arch.LLMArch``. JSON keeps the key ``"architecture"`` for the style name (compatibility
with pdplan's earlier output); code says ``style``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from model.hardware.gpus import GPU
from model.hardware.links import Link
from model.hardware.nodes import Node
from model.hardware.parallelism import Parallelism, as_parallelism
from model.serving.common import StyleResult
from model.workload.scenario import Scenario

# Which side of the verdict a style is on (DESIGN.md, "When to recommend disaggregation").
FAMILIES = ("colocated", "disaggregated")


class StyleConfig(Protocol):
    """What every configuration carries: its style name, GPU count and a one-line label."""

    @property
    def style(self) -> str: ...

    @property
    def n_gpus(self) -> int: ...

    def label(self) -> str: ...


class CandidateSet(Protocol):
    """Many configurations of one style, evaluated together as arrays over candidates.

    Optional: ``take(idx)`` (the candidates at positions ``idx``, repeats allowed) lets the goodput
    search try several rates per candidate in one evaluation (model.planner.goodput)."""

    scenario: Scenario
    configs: list

    def evaluate(self, rate_rps: np.ndarray) -> StyleResult: ...

    def subset(self, mask: np.ndarray) -> CandidateSet: ...

    def fits(self) -> np.ndarray: ...

    def infeasible_reason(self, i: int) -> str: ...

    def resources(self, i: int, res: StyleResult, context_tokens: float) -> Any:
        """Memory, weight copies and power of candidate ``i`` (a model.serving.resources.Resources)."""
        ...

    @property
    def n_gpus(self) -> np.ndarray: ...

    @property
    def price_usd_per_hour(self) -> np.ndarray: ...


class SearchSpace(Protocol):
    """The planner's search space as a style sees it (model.planner.types.PlanInputs has these)."""

    scenario: Scenario
    gpu: GPU
    decode_gpu: GPU
    link: Link
    node: Node | None
    intra_link: Link | None
    target_rate_rps: float | None
    tp_options: tuple[int, ...]
    chunk_options: tuple[int, ...]
    layerwise: bool
    max_gpus: int


@dataclass(frozen=True, eq=False)
class TargetGroup:
    """Candidates of one style checked at a target rate: ``ok`` marks those meeting the SLOs there;
    ``enumerated`` is how many configurations the search looked at (for the plan's count). The
    planner keeps the cheapest ``ok`` candidate of each group, then the cheapest group."""

    cands: CandidateSet
    ok: np.ndarray
    enumerated: int


@dataclass(frozen=True)
class SimPool:
    """One pool of identical instances for the simulator. ``role`` "replica" runs both phases
    (colocated; ``chunk_tokens`` None = prefill-first), "prefill" or "decode" one phase each.
    ``parallel`` is each instance's layout (a whole number = TP-only of that degree)."""

    role: str
    gpu: GPU
    parallel: Parallelism | int
    instances: int
    chunk_tokens: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "parallel", as_parallelism("tp", self.parallel))

    @property
    def tp(self) -> int:
        """Tensor-parallel degree of each instance (``parallel.tp``)."""
        return self.parallel.tp


@dataclass(frozen=True)
class SimLayout:
    """What the simulator replays: one "replica" pool, or a "prefill" and a "decode" pool joined by
    ``link`` (KV sent per layer when ``layerwise``, over ``transfer_lanes`` parallel lanes)."""

    pools: tuple[SimPool, ...]
    link: Link | None = None
    layerwise: bool = True
    transfer_lanes: int = 1


@dataclass(frozen=True)
class CliFlag:
    """A ``pdplan simulate`` flag a style reads (``--chunk``); the value reaches
    ``config_from_cli`` under ``dest`` (``chunk``), None when not given (True/False for a switch)."""

    flag: str
    help: str
    type: type = int
    switch: bool = False

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


@runtime_checkable
class ServingStyle(Protocol):
    """One serving style. Attributes: ``name`` (registry key, JSON value), ``config_type``,
    ``family`` (one of FAMILIES), ``title`` (label for reports and the app), ``tie_order`` (lower
    wins a tie between styles of one family), ``cli_flags``."""

    name: str
    config_type: type
    family: str
    title: str
    tie_order: int
    cli_flags: tuple[CliFlag, ...]

    # -- planner
    def budget_configs(self, space: SearchSpace, gpus: int) -> list:
        """Configurations that use a budget of ``gpus`` GPUs (every TP, split, chunk, ...)."""
        ...

    def target_groups(self, space: SearchSpace) -> list[TargetGroup]:
        """Candidates checked at ``space.target_rate_rps``, grouped (see TargetGroup)."""
        ...

    def build_set(self, scenario: Scenario, configs: Sequence) -> CandidateSet:
        """The vectorised analytical evaluator of ``configs`` (all of this style)."""
        ...

    def lose_one(self, config: Any) -> dict[str, Any]:
        """Per pool, the configuration with one instance of it lost (None when nothing is left)."""
        ...

    def in_flight(self, ev: Any, scenario: Scenario) -> tuple[dict[str, float], dict[str, float]]:
        """Per pool, requests in flight on one instance and the tokens recomputed if it is lost,
        from the Evaluation ``ev`` at the operating rate."""
        ...

    # -- simulator
    def sim_layout(self, config: Any) -> SimLayout: ...

    # -- CLI, reports, app
    def config_from_cli(
        self, values: Mapping[str, Any], gpu: GPU, profile_dirs: str | Path | Sequence | None
    ) -> Any: ...

    def config_dict(self, config: Any) -> dict[str, Any]:
        """The configuration as names and numbers; the key "architecture" holds the style name."""
        ...

    def phase_deployments(self, config: Any) -> dict[str, tuple[GPU, Parallelism | int]]:
        """(GPU, layout) that runs each phase, keys "prefill" and "decode" (roofline points, math
        panel); the layout a Parallelism, or a whole number for TP-only."""
        ...

    def kv_link(self, config: Any) -> Link | None:
        """The link each request's KV crosses between the phases (None when they share GPUs)."""
        ...
