"""The planner's inputs and results: frozen dataclasses shared by the search, verdict and report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from model.hardware.gpus import GPU
from model.hardware.links import Link
from model.hardware.nodes import Node
from model.serving.enumeration import LayoutOptions
from model.serving.evaluation import Evaluation
from model.workload.scenario import Scenario

# The built-in configuration types; a registered style may bring its own (model.serving.registry).
# Any registered style's configuration (model.serving.registry checks it; built-ins: ColocatedConfig,
# DisaggregatedConfig).
Config = Any


@dataclass(frozen=True)
class FailureImpact:
    """What losing one instance costs: goodput with one instance fewer in each pool, and the work
    in flight on the lost instance (requests and the tokens that must be recomputed)."""

    goodput_after_loss_rps: dict[str, float]
    requests_in_flight: dict[str, float]
    tokens_recomputed: dict[str, float]


@dataclass(frozen=True)
class BestConfig:
    """The best configuration of one style, with its goodput and its metrics at that rate."""

    architecture: str
    label: str
    config: Config
    n_gpus: int
    goodput_rps: float
    goodput_rps_per_gpu: float
    cost_usd_per_hour: float
    at_goodput: Evaluation
    binding_constraint: str
    failure: FailureImpact | None = None

    @property
    def style(self) -> str:
        """The serving style's registry name (the field ``architecture`` keeps its former name)."""
        return self.architecture


@dataclass(frozen=True)
class Alternative:
    """One ranked configuration of a plan's top-N list (model.planner.alternatives): its goodput,
    GPUs, cost and what stops its rate rising (``binding``: "TTFT", "TPOT", "TTFT+TPOT",
    "attainment", "memory" or "load"; ``binding_constraint``: the full text)."""

    style: str
    label: str
    config: Config
    n_gpus: int
    goodput_rps: float
    goodput_rps_per_gpu: float
    cost_usd_per_hour: float
    cost_usd_per_million_output_tokens: float
    binding: str
    binding_constraint: str


@dataclass(frozen=True)
class Alternatives:
    """The N best configurations overall and per style, best first, ranked by the plan's own
    objective (``ranked_by``: "goodput" on a budget, "gpus" or "cost" for a target rate)."""

    top: int
    ranked_by: str
    overall: tuple[Alternative, ...]
    by_style: dict[str, tuple[Alternative, ...]]


@dataclass(frozen=True)
class FlipThreshold:
    """A value of one input at which the verdict would change."""

    parameter: str
    value: float
    unit: str
    current: float
    text: str
    method: str = "numeric"


@dataclass(frozen=True)
class Infeasibility:
    """Why no configuration meets the targets, and what would (model.planner.infeasible).

    ``binding``: "memory" (no layout the budget allows holds the model), "layout" (no TP option
    fits the budget and divides the attention heads), "ttft" (even an idle
    prefill misses the TTFT target), "tpot" (even a batch-1 decode misses the TPOT target),
    "ttft+tpot" (both), "attainment" (each target is reachable but no configuration meets both for
    enough requests) or "load" (the targets hold at a vanishing load but not at the target rate
    within the GPU cap). Latencies are the SLO percentile at a vanishing load; None where no
    configuration fits in memory. ``gpus_that_work``: the smallest budget (or, for a target rate,
    the smallest ``max_gpus``) that would give a feasible plan, None when none up to
    ``gpus_searched_to`` does; ``ttft_that_works_s`` / ``tpot_that_works_s``: targets that would
    give a feasible plan on this budget (None when not found). ``lines``: the sentences shown.
    """

    binding: str
    ttft_target_s: float
    tpot_target_s: float
    percentile: float
    closest_style: str | None
    closest_label: str | None
    closest_ttft_s: float | None
    closest_tpot_s: float | None
    lowest_ttft_s: float | None
    lowest_tpot_s: float | None
    gpus_that_work: int | None
    gpus_searched_to: int
    ttft_that_works_s: float | None
    tpot_that_works_s: float | None
    memory_needed_bytes_per_gpu: float | None
    memory_available_bytes_per_gpu: float | None
    lines: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class PlanInputs:
    """Resolved inputs of one plan (profiles, scenario, search space)."""

    scenario: Scenario
    gpu: GPU
    decode_gpu: GPU
    link: Link
    node: Node | None
    intra_link: Link | None
    gpus: int | None
    target_rate_rps: float | None
    tp_options: tuple[int, ...]
    chunk_options: tuple[int, ...]
    layerwise: bool
    objective: str
    margin: float
    max_gpus: int
    layout_options: LayoutOptions = field(default_factory=LayoutOptions)


@dataclass(frozen=True, eq=False)
class Plan:
    """The planner's answer: verdict, reasons with numbers, best of each style, flip thresholds."""

    verdict: str
    reasons: tuple[str, ...]
    best: dict[str, BestConfig]
    flip_thresholds: tuple[FlipThreshold, ...]
    infeasible: dict[str, int]
    candidates_evaluated: int
    inputs: PlanInputs = field(repr=False)
    # Neither family ahead by the margin (model.planner.verdict.tie_band); the verdict stays colocated.
    tie: bool = False
    # Disaggregated / colocated goodput ratio - 1 on a budget (resource ratio - 1 for a target
    # rate); None unless both families meet the SLOs.
    gain: float | None = None
    # Why the verdict is "none" and what would work (model.planner.infeasible); None otherwise.
    infeasibility: Infeasibility | None = None
    # The N best configurations overall and per style (model.planner.alternatives).
    alternatives: Alternatives | None = None
    # The colocated choice (model.planner.colocated_rule): another colocated style ahead of the
    # engines' default (chunked prefill) by less than the margin, so the default is kept; its lead
    # (ratio - 1 on the verdict's measure; None unless both colocated styles meet the SLOs); the
    # verdict's words on it (None unless a colocated style is named and another is ahead of it).
    colocated_tie: bool = False
    colocated_lead: float | None = None
    colocated_note: str | None = None

    @property
    def mode(self) -> str:
        """ "budget" when a GPU count was given, else "target-rate" (smallest GPUs for a rate)."""
        return "budget" if self.inputs.gpus is not None else "target-rate"
