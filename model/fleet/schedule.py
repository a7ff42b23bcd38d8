"""Load over a day: the pool sizes each serving style needs as the request rate moves, and what
autoscaling saves against static provisioning for the peak.

One plan at the curve's peak rate fixes each style's layout; its scaling table (model.fleet.capacity)
gives the goodput of every pool size once. Per time bin, the smallest size carrying the bin's rate
is looked up (vectorised over bins). Provisioning then follows two rules:

- scale up early: an instance needed from time t starts loading at t - reaction time, where
  reaction time = weight bytes of one instance / the node's storage bandwidth + engine start-up;
- scale down late: an instance is kept until the need for it has stayed away for the hold time.

Both rules together: bin i is provisioned with the smallest size carrying the highest rate of the
bins overlapping [start_i - hold_s, end_i + reaction_s] (:func:`provision`). Sizing for the window's
highest rate, rather than taking each pool's highest count, keeps the schedule monotone: a curve
that is higher anywhere never gets fewer GPU-hours (a disaggregated size with more prefill and fewer
decode instances may follow one with the opposite split; the switch is taken as instantaneous).
GPU-hours and cost are the sum over bins of provisioned GPUs (price) x bin width; static
provisioning holds the peak's size for the whole curve.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from model.errors import InputError
from model.fleet.capacity import Capacity, capacity_of
from model.fleet.curve import RateCurve
from model.hardware.nodes import DEFAULT_STORAGE_BANDWIDTH_BYTES_PER_S
from model.limits import check_real
from model.llm.arch import LLMArch
from model.planner.plan import PlanRequest, plan, plan_request
from model.planner.types import Plan
from model.serving.registry import styles as registered_styles

__all__ = [
    "ENGINE_START_S",
    "HOLD_S",
    "Schedule",
    "ScheduleOptions",
    "StyleSchedule",
    "provision",
    "schedule",
]

ENGINE_START_S = 60.0
"""Engine start-up beyond loading weights (process start, profiling, KV allocation, torch.compile
from its cache, CUDA-graph capture): about a minute. vLLM issue #20264 (a pod restart with the
torch.compile cache reused: first response 59 s after start, weight loading 0.9 s of it); issue
#19824 measures a cold Llama-70B FP8 TP8 start at ~60 s P2P check + ~15 s Dynamo + ~70 s
torch.compile + ~60 s CUDA-graph capture besides the weights, so cold starts need ~4x this."""

HOLD_S = 300.0
"""Scale-down hold: Kubernetes' Horizontal Pod Autoscaler keeps the highest recommendation of the
last 5 minutes before scaling down (``--horizontal-pod-autoscaler-downscale-stabilization``,
default 300 s; Kubernetes docs, "Horizontal Pod Autoscaling", stabilization window)."""


@dataclass(frozen=True)
class ScheduleOptions:
    """How the schedule is computed. ``resolution_s``: longest time bin (curve rows are split into
    bins no longer than this). ``hold_s``: scale-down hold. ``engine_start_s``: start-up besides
    loading weights. ``reaction_s``: override the computed reaction time (None: compute it)."""

    resolution_s: float = 60.0
    hold_s: float = HOLD_S
    engine_start_s: float = ENGINE_START_S
    reaction_s: float | None = None


@dataclass(frozen=True, eq=False)
class StyleSchedule:
    """One style over the curve. Per bin: ``need`` (instances per pool carrying the bin's rate) and
    ``provisioned`` (after the reaction and hold rules), both (bins, pools); ``n_gpus`` provisioned.
    Totals: GPU-hours and USD autoscaled and static (the peak's size all along); ``uncovered_bins``
    counts bins whose rate no size in the table carries (then the largest size is used)."""

    style: str
    peak_label: str
    pools: tuple[str, ...]
    gpus_per_instance: tuple[int, ...]
    need: np.ndarray
    provisioned: np.ndarray
    n_gpus: np.ndarray
    reaction_s: float
    gpu_hours: float
    cost_usd: float
    static_gpus: int
    static_gpu_hours: float
    static_cost_usd: float
    uncovered_bins: int

    @property
    def savings_gpu_hours(self) -> float:
        """GPU-hours autoscaling saves against static provisioning for the peak."""
        return self.static_gpu_hours - self.gpu_hours

    @property
    def savings_fraction(self) -> float:
        """Saved GPU-hours / static GPU-hours."""
        return self.savings_gpu_hours / self.static_gpu_hours if self.static_gpu_hours > 0 else 0.0


@dataclass(frozen=True, eq=False)
class Schedule:
    """Every style's schedule over the curve's bins (``start_s``, ``end_s``, ``rate_rps``), the plan
    at the peak, the style needing the fewest GPU-hours, and styles left out with the reason."""

    curve: RateCurve
    start_s: np.ndarray
    end_s: np.ndarray
    rate_rps: np.ndarray
    styles: dict[str, StyleSchedule]
    plan: Plan
    skipped: dict[str, str]

    @property
    def fewest_gpu_hours(self) -> str | None:
        """The style whose autoscaled GPU-hours are lowest (ties: lower cost)."""
        if not self.styles:
            return None
        return min(self.styles.values(), key=lambda s: (round(s.gpu_hours, 9), s.cost_usd)).style


def window_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(values[lo[i]:hi[i]]) for every i (lo < hi), along axis 0, in one ``reduceat`` pass:
    reduce over [lo0, hi0), [hi0, lo1) (dropped), [lo1, hi1), ... with a sentinel row at the end."""
    padded = np.concatenate((values, np.zeros((1, *values.shape[1:]), values.dtype)))
    idx = np.empty(2 * lo.size, dtype=np.int64)
    idx[0::2], idx[1::2] = lo, hi
    return np.maximum.reduceat(padded, idx, axis=0)[0::2]


def provision(
    capacity: Capacity,
    start_s: np.ndarray,
    end_s: np.ndarray,
    rate_rps: np.ndarray,
    reaction_s: float,
    hold_s: float,
) -> StyleSchedule:
    """The schedule of one style over bins [start_s, end_s) at ``rate_rps`` (see the module doc)."""
    largest = int(capacity.frontier()[-1])
    need_pick = capacity.smallest(rate_rps)
    uncovered = need_pick < 0
    lo = np.searchsorted(end_s, start_s - hold_s, side="right")
    hi = np.searchsorted(start_s, end_s + reaction_s, side="left")
    pick = capacity.smallest(window_max(rate_rps, lo, hi))
    need = capacity.counts[np.where(uncovered, largest, need_pick)]
    prov = capacity.counts[np.where(pick < 0, largest, pick)]
    gpus = prov @ np.asarray(capacity.gpus_per_instance, dtype=float)
    price = prov @ np.asarray(capacity.price_usd_per_instance_hour, dtype=float)
    hours = (end_s - start_s) / 3600.0
    peak = capacity.smallest(np.array([rate_rps.max()]))[0]
    peak = largest if peak < 0 else int(peak)
    total_h = float(hours.sum())
    return StyleSchedule(
        style=capacity.style,
        peak_label=capacity.peak_label,
        pools=capacity.pools,
        gpus_per_instance=capacity.gpus_per_instance,
        need=need,
        provisioned=prov,
        n_gpus=gpus,
        reaction_s=float(reaction_s),
        gpu_hours=float(gpus @ hours),
        cost_usd=float(price @ hours),
        static_gpus=int(capacity.n_gpus[peak]),
        static_gpu_hours=float(capacity.n_gpus[peak]) * total_h,
        static_cost_usd=float(capacity.cost_usd_per_hour[peak]) * total_h,
        uncovered_bins=int(uncovered.sum()),
    )


def reaction_time_s(capacity: Capacity, storage_bytes_per_s: float, engine_start_s: float) -> float:
    """Start-up of one instance: weight bytes / the node's storage read bandwidth + engine start-up
    (each instance reads the whole model from its node's local storage; several instances starting
    on one node at once would share it, so this is the fastest case)."""
    return capacity.weight_bytes_per_instance / storage_bytes_per_s + engine_start_s


def _check_options(options: ScheduleOptions) -> ScheduleOptions:
    if not isinstance(options, ScheduleOptions):
        raise InputError("options", type(options).__name__, "a ScheduleOptions")
    check_real("resolution_s", options.resolution_s, 1.0, 86400.0)
    check_real("hold_s", options.hold_s, 0.0, 7 * 86400.0)
    check_real("engine_start_s", options.engine_start_s, 0.0, 86400.0)
    if options.reaction_s is not None:
        check_real("reaction_s", options.reaction_s, 0.0, 86400.0)
    return options


def schedule(
    curve: RateCurve,
    model: str | LLMArch | PlanRequest,
    gpu: Any = None,
    *,
    options: ScheduleOptions | None = None,
    **kwargs: Any,
) -> Schedule:
    """Pool sizes over ``curve`` for each serving style, with GPU-hours and cost against static
    provisioning for the peak. ``model``/``gpu``/keywords: a PlanRequest or its fields (workload,
    SLOs, link, node, engine, ...; not ``gpus`` or ``target_rate_rps``: the plan is made for the
    curve's peak rate). ``options``: bin resolution, hold, engine start-up (ScheduleOptions)."""
    if not isinstance(curve, RateCurve):
        raise InputError(
            "curve", type(curve).__name__, "a RateCurve (model.fleet.curve: rate_curve, load_curve_csv, ...)"
        )
    opts = _check_options(ScheduleOptions() if options is None else options)
    request = plan_request(model, gpu, **kwargs)
    if request.gpus is not None or request.target_rate_rps is not None:
        raise InputError(
            "gpus / target_rate",
            (request.gpus, request.target_rate_rps),
            "neither: the schedule plans for the curve's peak rate",
        )
    start, end, rates = curve.bins(opts.resolution_s)  # before planning: refuses too many bins
    peak_plan = plan(replace(request, target_rate_rps=curve.peak_rps), thresholds=False)
    node = peak_plan.inputs.node
    storage = node.weight_load_bytes_per_s if node is not None else DEFAULT_STORAGE_BANDWIDTH_BYTES_PER_S
    styles: dict[str, StyleSchedule] = {}
    skipped: dict[str, str] = {}
    for name, best in peak_plan.best.items():
        cap = capacity_of(best, peak_plan.inputs.scenario)
        if cap is None or not cap.goodput_rps.max() > 0:
            skipped[name] = "its pools cannot be resized" if cap is None else "no pool size meets the SLOs"
            continue
        react = (
            opts.reaction_s
            if opts.reaction_s is not None
            else reaction_time_s(cap, storage, opts.engine_start_s)
        )
        styles[name] = provision(cap, start, end, rates, react, opts.hold_s)
    for name in _unplanned(styles, skipped):
        skipped[name] = (
            f"no configuration meets the SLOs at the peak {curve.peak_rps:.3g} req/s "
            f"within {peak_plan.inputs.max_gpus} GPUs"
        )
    return Schedule(curve, start, end, rates, styles, peak_plan, skipped)


def _unplanned(done: dict, skipped: dict) -> Sequence[str]:
    """Registered styles with no schedule and no reason yet: the peak plan found none of theirs."""
    return [s.name for s in registered_styles() if s.name not in done and s.name not in skipped]


def schedule_rows(result: Schedule) -> list[dict[str, Any]]:
    """One summary row per style: GPU-hours and cost autoscaled vs static, savings, reaction time."""
    rows = []
    for s in result.styles.values():
        rows.append(
            {
                "style": s.style,
                "peak_config": s.peak_label,
                "static_gpus": s.static_gpus,
                "peak_gpus_autoscaled": int(s.n_gpus.max()),
                "min_gpus_autoscaled": int(s.n_gpus.min()),
                "gpu_hours": s.gpu_hours,
                "static_gpu_hours": s.static_gpu_hours,
                "savings_gpu_hours": s.savings_gpu_hours,
                "savings_fraction": s.savings_fraction,
                "cost_usd": s.cost_usd,
                "static_cost_usd": s.static_cost_usd,
                "reaction_s": s.reaction_s,
                "uncovered_bins": s.uncovered_bins,
            }
        )
    return rows
