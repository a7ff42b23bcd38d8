"""Fixed-concurrency (closed-loop) planning: N users, each sending its next request when its last
one completes (after a think time), the load benchmark clients such as vLLM's benchmark_serving,
genai-perf/aiperf and the Dynamo recipes apply.

Built on the open-loop model without changing it: each candidate's open-loop mean response time is
tabulated over rates up to its stability limit (model.serving candidate sets), and the closed
network of N users, think time Z and that system is solved by mean value analysis
(model.queueing.closed_loop, which states the method, its sources and its approximation). At N
users a candidate has a throughput X(N) = N / (Z + R(N)), and its TTFT/TPOT distributions are the
open model's at the equivalent rate whose mean population equals what an arriving request sees.

The capacity figure is the **maximum concurrency within the SLOs**: the largest N whose latencies
meet the plan's SLO test (model.serving.common.check_slo; the same percentile and attainment
targets as goodput). The best configuration of a style on a GPU budget is the one with the highest
maximum concurrency (ties: higher throughput at the asked N, fewer GPUs, lower cost), and the
verdict compares the families' best maximum concurrency with the same margin and tie band as the
open-loop verdict (model.planner.verdict): disaggregated is recommended when it holds at least
``margin`` more users within the SLOs. docs/planner.md, "Fixed concurrency", explains the choice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from model.errors import InputError
from model.planner.colocated_rule import choice_words, pick_colocated
from model.planner.goodput import PROBE_RPS_PER_GPU, goodput_rps, stability_limit_rps
from model.planner.plan import budget_sets, plan_request, resolve_inputs
from model.planner.types import PlanInputs
from model.queueing.closed_loop import (
    ClosedLoopResult,
    ClosedLoopState,
    ResponseCurve,
    closed_loop_mva,
    open_rate_grid,
)
from model.queueing.latency import LatencyModel
from model.serving.common import StyleResult, check_slo
from model.serving.evaluation import Percentiles, percentiles_of
from model.serving.registry import build_set, get_style, style_of
from model.serving.style import CandidateSet
from model.units import format_rate, format_time
from model.workload.concurrency import Concurrency, as_concurrency
from model.workload.scenario import Scenario

__all__ = [
    "ConcurrencyEvaluation",
    "ConcurrencyPlan",
    "ConcurrencyPoint",
    "concurrency_curve",
    "concurrency_plan_dict",
    "evaluate_concurrency",
    "plan_concurrency",
]


@dataclass(frozen=True)
class ConcurrencyPoint:
    """One configuration at ``users`` concurrent users. ``throughput_rps`` = users / (think +
    response); latencies (seconds) at ``equivalent_rate_rps``, the open-loop rate whose mean
    population equals what an arriving request sees; ``extra_wait_s``: queueing beyond the open
    model's stable range (added to TTFT; 0 unless the system is saturated)."""

    users: int
    throughput_rps: float
    output_tokens_per_s: float
    response_mean_s: float
    ttft_mean_s: float
    tpot_mean_s: float
    ttft_s: Percentiles
    tpot_s: Percentiles
    slo_attainment: float
    meets_slo: bool
    equivalent_rate_rps: float
    extra_wait_s: float


@dataclass(frozen=True)
class ConcurrencyEvaluation:
    """One configuration under closed-loop load: metrics at the asked concurrency (``at_users``),
    the maximum concurrency within the SLOs (``max_concurrency``; ``capped`` when the search stopped
    at model.limits.MAX_CONCURRENCY with the SLOs still met) and the metrics there (``at_max``,
    None when even one user misses), and the open-loop goodput for reference."""

    style: str
    label: str
    config: Any
    n_gpus: int
    cost_usd_per_hour: float
    concurrency: Concurrency
    at_users: ConcurrencyPoint
    max_concurrency: int
    capped: bool
    at_max: ConcurrencyPoint | None
    goodput_rps: float


@dataclass(frozen=True, eq=False)
class ConcurrencyPlan:
    """The fixed-concurrency plan on a GPU budget: ``verdict`` (a style name or "none"), its
    ``reasons``, the best configuration of each style (``best``), ``tie`` / ``gain`` on the
    maximum concurrency within the SLOs (disaggregated / colocated - 1; None unless both families
    hold at least one user), and the resolved inputs."""

    verdict: str
    reasons: tuple[str, ...]
    best: dict[str, ConcurrencyEvaluation]
    concurrency: Concurrency
    tie: bool
    gain: float | None
    infeasible: dict[str, int]
    candidates_evaluated: int
    inputs: PlanInputs

    @property
    def mode(self) -> str:
        """Always "concurrency" (a GPU budget at a fixed number of users)."""
        return "concurrency"


# ---------------------------------------------------------------------------------------------
# the analysis of a candidate set


def mean_response_s(res: StyleResult) -> np.ndarray:
    """Mean end-to-end latency per candidate: mean TTFT plus the mean decode time, request i
    decoding for (O_i - 1) x base step + n_i x mean stall (the TPOT model of
    model.queueing.latency: its stall total spread over the O_i - 1 gaps; chunked, the mean mixed
    share's extra per gap); inf where unstable."""
    lat = res.latency
    gaps = np.maximum(lat.output_tokens - 1.0, 0.0)[None, :]
    decode = (gaps * lat.tpot_base_s[:, None] + lat.stall_events * lat.stall_m1_s[:, None]).mean(axis=1)
    if lat.mixed is not None:  # chunked: the mixed share's mean extra per gap (model.queueing.mixed_share)
        decode = decode + (gaps * lat.mixed.mean_extra_s()).mean(axis=1)
    return np.where(res.stable, res.ttft_mean_s + decode, np.inf)


def _probe(cands: CandidateSet, rate: np.ndarray) -> np.ndarray:
    """``rate`` with zeros raised to the planner's vanishing-load probe (a queue model needs > 0)."""
    return np.maximum(rate, PROBE_RPS_PER_GPU * np.asarray(cands.n_gpus, dtype=float))


def response_curve(cands: CandidateSet, limit_rps: np.ndarray, to_limit: bool = False) -> ResponseCurve:
    """The open model's mean response at the rates of model.queueing.closed_loop.open_rate_grid
    (one vectorised evaluation per grid column). A point that is not stable (rounding at the
    limit) repeats the last stable one."""
    rates = open_rate_grid(limit_rps, to_limit)
    resp = np.empty_like(rates)
    for k in range(rates.shape[1]):
        rates[:, k] = _probe(cands, rates[:, k])
        resp[:, k] = mean_response_s(cands.evaluate(rates[:, k]))
    for k in range(1, rates.shape[1]):
        bad = ~np.isfinite(resp[:, k])
        rates[bad, k] = rates[bad, k - 1]
        resp[bad, k] = resp[bad, k - 1]
    return ResponseCurve.build(rates, resp, None if to_limit else limit_rps)


@dataclass(frozen=True, eq=False)
class _Analysis:
    cands: CandidateSet
    goodput_rps: np.ndarray
    mva: ClosedLoopResult
    load: Concurrency


def _analyse(
    cands: CandidateSet,
    scn: Scenario,
    load: Concurrency,
    levels: list[int],
    known: tuple[np.ndarray, np.ndarray] | None = None,
) -> _Analysis:
    """Goodput and stability limit (unless ``known``), response curve and MVA (at ``levels`` and on
    to the maximum concurrency) of the candidates of ``cands``, all of which must be stable at a
    vanishing load."""
    good, limit = known if known is not None else (goodput_rps(cands, scn.slo), stability_limit_rps(cands))
    curve = response_curve(cands, limit)
    mva = closed_loop_mva(curve, load.think_time_s, levels, limit_rps=good)
    return _Analysis(cands, good, mva, load)


def _shifted(lat: LatencyModel, extra_s: np.ndarray) -> LatencyModel:
    """The latency model with ``extra_s`` [C] more waiting before the first token."""
    return replace(lat, fixed_s=lat.fixed_s + np.asarray(extra_s, dtype=float)[:, None])


def _points(
    cands: CandidateSet, state: ClosedLoopState, users: np.ndarray, rows: list[int], scn: Scenario
) -> list[ConcurrencyPoint]:
    """Candidates ``rows`` at their MVA ``state`` ([C] arrays) with ``users`` [C] users each: the
    open model at the equivalent rates, TTFT shifted by the extra wait."""
    res = cands.evaluate(_probe(cands, state.rate_rps))
    lat = _shifted(res.latency, state.extra_wait_s)
    out = []
    for i in rows:
        sub = lat.row(i)
        check = check_slo(sub, sub.stable, scn.slo)
        x = float(state.throughput_rps[i])
        ttft, tpot = percentiles_of(sub)
        out.append(
            ConcurrencyPoint(
                users=int(users[i]),
                throughput_rps=x,
                output_tokens_per_s=x * scn.mean_output_tokens,
                response_mean_s=float(state.response_s[i]),
                ttft_mean_s=float(res.ttft_mean_s[i] + state.extra_wait_s[i]),
                tpot_mean_s=float(sub.mean_tpot_s()[0]),
                ttft_s=ttft,
                tpot_s=tpot,
                slo_attainment=float(check.attainment[0]),
                meets_slo=bool(check.ok[0]),
                equivalent_rate_rps=float(state.rate_rps[i]),
                extra_wait_s=float(state.extra_wait_s[i]),
            )
        )
    return out


def _evaluation(an: _Analysis, i: int, scn: Scenario) -> ConcurrencyEvaluation:
    """Candidate ``i`` of an analysis as a ConcurrencyEvaluation (at the asked users and at its
    maximum concurrency)."""
    mva = an.mva
    j = int(np.flatnonzero(mva.users == an.load.users)[0])
    c = len(an.cands.configs)
    at_users = _points(an.cands, mva.levels.column(j), np.full(c, an.load.users), [i], scn)[0]
    top = int(mva.max_users[i])
    at_max = _points(an.cands, mva.at_max, mva.max_users, [i], scn)[0] if top >= 1 else None
    config = an.cands.configs[i]
    return ConcurrencyEvaluation(
        style=config.style,
        label=config.label(),
        config=config,
        n_gpus=int(config.n_gpus),
        cost_usd_per_hour=float(np.asarray(an.cands.price_usd_per_hour)[i]),
        concurrency=an.load,
        at_users=at_users,
        max_concurrency=top,
        capped=bool(mva.capped[i]),
        at_max=at_max,
        goodput_rps=float(an.goodput_rps[i]),
    )


def only_set(cands: CandidateSet, i: int) -> CandidateSet:
    """Candidate ``i`` alone, as a candidate set."""
    mask = np.zeros(len(cands.configs), dtype=bool)
    mask[i] = True
    return cands.subset(mask)


def _usable(cands: CandidateSet, infeasible: Counter) -> CandidateSet:
    """The candidates that fit in memory (the others counted by reason)."""
    fits = np.asarray(cands.fits(), dtype=bool)
    for i in np.nonzero(~fits)[0]:
        infeasible[cands.infeasible_reason(int(i))] += 1
    return cands.subset(fits)


def _best_index(cands: CandidateSet, scn: Scenario, load: Concurrency) -> tuple[int, float]:
    """The candidate holding the most users within the SLOs; ties: higher throughput at the asked
    users, fewer GPUs, lower cost. The ranking needs each response curve only up to the candidate's
    goodput (the maximum concurrency is where the equivalent rate reaches it), so the whole set is
    tabulated there (25 rates, no stability search); the throughput used for ties past that
    point is the curve's extrapolation (the chosen candidate is then solved on its full curve).
    Returns the index and its goodput."""
    good = goodput_rps(cands, scn.slo)
    curve = response_curve(cands, good, to_limit=True)
    mva = closed_loop_mva(curve, load.think_time_s, [load.users], limit_rps=good)
    gpus = np.asarray(cands.n_gpus, dtype=float)
    cost = np.asarray(cands.price_usd_per_hour, dtype=float)
    x = mva.levels.throughput_rps[:, 0]
    i = int(np.lexsort((cost, gpus, -x, -mva.max_users.astype(float)))[0])
    return i, float(good[i])


# ---------------------------------------------------------------------------------------------
# public functions


def evaluate_concurrency(
    config: Any,
    scenario: Scenario,
    concurrency: int | Concurrency,
    think_time_s: float = 0.0,
    think: str = "exponential",
) -> ConcurrencyEvaluation:
    """One configuration (any registered style's) serving ``scenario`` to ``concurrency`` users
    with mean think time ``think_time_s``: throughput, TTFT/TPOT at N users and the maximum
    concurrency within ``scenario.slo``, e.g. ``model.evaluate_concurrency(cfg, scn, 64)``."""
    style_of(config)
    if not isinstance(scenario, Scenario):
        raise InputError("scenario", scenario, "a Scenario (model.Scenario.build(...))")
    load = as_concurrency(concurrency, think_time_s, think)
    cands, limit = _one(config, scenario)
    known = (goodput_rps(cands, scenario.slo), limit)
    return _evaluation(_analyse(cands, scenario, load, [load.users], known), 0, scenario)


def _one(config: Any, scenario: Scenario) -> tuple[CandidateSet, np.ndarray]:
    """The candidate set of one configuration and its stability limit; InputError naming
    ``config`` when it does not fit or is stable at no load."""
    cands = build_set(scenario, [config])
    if not bool(np.asarray(cands.fits())[0]):
        raise InputError("config", config.label(), f"a configuration that fits: {cands.infeasible_reason(0)}")
    limit = stability_limit_rps(cands)
    if float(limit[0]) <= 0:
        raise InputError("config", config.label(), "a configuration whose queues are stable at some load")
    return cands, limit


def concurrency_curve(
    config: Any, scenario: Scenario, levels: Sequence[int], think_time_s: float = 0.0
) -> tuple[ConcurrencyPoint, ...]:
    """Throughput and latencies of one configuration at each user count of ``levels`` (mean think
    time ``think_time_s``), e.g. for a throughput-versus-concurrency chart."""
    style_of(config)
    if not isinstance(scenario, Scenario):
        raise InputError("scenario", scenario, "a Scenario (model.Scenario.build(...))")
    if isinstance(levels, str) or not isinstance(levels, Sequence) or not 1 <= len(levels) <= 1000:
        raise InputError("levels", levels, "a list of 1 to 1000 user counts")
    loads = [as_concurrency(n, think_time_s) for n in levels]
    cands, limit = _one(config, scenario)
    curve = response_curve(cands, limit)
    mva = closed_loop_mva(curve, loads[0].think_time_s, [c.users for c in loads])
    out = {}
    for j, users in enumerate(mva.users):
        out[int(users)] = _points(cands, mva.levels.column(j), np.array([users]), [0], scenario)[0]
    return tuple(out[c.users] for c in loads)


def plan_concurrency(
    model: Any,
    gpu: Any = None,
    *,
    concurrency: int | Concurrency,
    think_time_s: float = 0.0,
    think: str = "exponential",
    **kwargs: Any,
) -> ConcurrencyPlan:
    """Plan serving for ``concurrency`` users on a GPU budget: for each style the configuration
    holding the most users within the SLOs, its throughput and latencies at ``concurrency`` users,
    and the verdict on that capacity (module docstring). ``model`` is a PlanRequest, or a model with
    ``gpu`` and PlanRequest fields as keywords (``gpus`` is required), e.g.
    ``model.plan_concurrency("llama-3.1-8b", "h100-sxm", concurrency=64, gpus=8, workload="chat",
    ttft_slo_s=0.5, tpot_slo_s=0.05)``."""
    load = as_concurrency(concurrency, think_time_s, think)
    inp = resolve_inputs(plan_request(model, gpu, **kwargs))
    if inp.gpus is None:
        raise InputError("gpus", None, "a GPU budget (a fixed-concurrency plan fills a budget with users)")
    scn = inp.scenario
    infeasible: Counter = Counter()
    best: dict[str, ConcurrencyEvaluation] = {}
    n = 0
    for style, cands in budget_sets(inp, inp.gpus).items():
        n += len(cands.configs)
        usable = _usable(cands, infeasible)
        if not len(usable.configs):
            continue
        i, good = _best_index(usable, scn, load)
        one = only_set(usable, i)
        limit = stability_limit_rps(one)
        if float(limit[0]) <= 0:  # the best meets no SLO and is never stable
            continue
        an = _analyse(one, scn, load, [load.users], (np.array([good]), limit))
        best[style] = _evaluation(an, 0, scn)
    verdict, tie, gain, reasons = _decide(inp, best, load)
    if verdict == "none" and infeasible:
        reasons += [f"{count} configuration(s) cannot run: {why}" for why, count in infeasible.most_common(3)]
    return ConcurrencyPlan(verdict, tuple(reasons), best, load, tie, gain, dict(infeasible), n, inp)


# ---------------------------------------------------------------------------------------------
# verdict and report


def _family_best(best: dict[str, ConcurrencyEvaluation], family: str) -> ConcurrencyEvaluation | None:
    ranked = sorted(
        (b for name, b in best.items() if get_style(name).family == family),
        key=lambda b: get_style(b.style).tie_order,
    )
    good = [b for b in ranked if b.max_concurrency > 0]
    if not good:
        return None
    return max(good, key=lambda b: (b.max_concurrency, b.at_users.throughput_rps))


def _line(b: ConcurrencyEvaluation) -> str:
    p = b.at_users
    meets = "meets the SLOs" if p.meets_slo else "misses the SLOs"
    cap = "at least " if b.capped else ""
    return (
        f"{b.style} {b.label}: {cap}{b.max_concurrency} users within the SLOs; at {p.users} users "
        f"{format_rate(p.throughput_rps)} ({p.output_tokens_per_s:,.0f} output tokens/s), TTFT p90 "
        f"{format_time(p.ttft_s.p90)}, TPOT p90 {format_time(p.tpot_s.p90)} ({meets})."
    )


def _decide(
    inp: PlanInputs, best: dict[str, ConcurrencyEvaluation], load: Concurrency
) -> tuple[str, bool, float | None, list[str]]:
    """Verdict on the maximum concurrency within the SLOs (margin and tie band as model.planner.verdict;
    the colocated style named by model.planner.colocated_rule on the users each holds)."""
    col = _family_best(best, "colocated")
    dis = _family_best(best, "disaggregated")
    pick = pick_colocated(
        {n: float(b.max_concurrency) for n, b in best.items() if b.max_concurrency > 0}, inp.margin
    )
    named = best[pick.style] if pick.style is not None else None
    lines = [_line(b) for b in best.values()]
    margin = inp.margin
    if col is None and dis is None:
        why = (
            f"No configuration on {inp.gpus} GPUs meets the SLOs even for one user (the open-loop plan, "
            "model.plan / pdplan plan without --concurrency, says what would)."
        )
        return "none", False, None, [why, *lines]
    note = choice_words(inp, pick, "users within the SLOs")
    notes = [note[:1].upper() + note[1:] + "."] if note else []
    if dis is None or col is None:
        only = dis or named
        head = f"Only {only.style} serves any user within the SLOs."
        return only.style, False, None, [head, *(notes if only is named else []), *lines]
    gain = dis.max_concurrency / col.max_concurrency - 1.0
    col_ahead = col.max_concurrency / dis.max_concurrency - 1.0
    tie = gain < margin and col_ahead < margin
    head = (
        f"Capacity within the SLOs on {inp.gpus} GPUs ({load.label()} asked): disaggregated "
        f"{dis.max_concurrency} users vs {col.style} {col.max_concurrency} users ({gain:+.0%})"
    )
    if gain >= margin:
        return dis.style, False, gain, [f"{head}: disaggregated holds at least {margin:.0%} more.", *lines]
    if tie:
        why = f"{head}: a tie within the {margin:.0%} margin, so {named.style} is recommended."
        return named.style, True, gain, [why, *notes, *lines]
    return named.style, False, gain, [f"{head}: colocated holds more users.", *notes, *lines]


def concurrency_plan_dict(plan: ConcurrencyPlan) -> dict[str, Any]:
    """A ConcurrencyPlan as JSON-ready data (non-finite floats as strings, configurations by their
    style's config_dict)."""
    from model.planner.report import _plain

    def one(b: ConcurrencyEvaluation) -> dict[str, Any]:
        out = {k: v for k, v in _plain(b).items() if k not in ("config", "concurrency")}
        out["config"] = _plain(get_style(b.style).config_dict(b.config))
        return out

    return {
        "mode": plan.mode,
        "concurrency": _plain(plan.concurrency),
        "verdict": plan.verdict,
        "tie": plan.tie,
        "gain": _plain(plan.gain),
        "reasons": list(plan.reasons),
        "best": {name: one(b) for name, b in plan.best.items()},
        "infeasible": dict(plan.infeasible),
        "candidates_evaluated": plan.candidates_evaluated,
        "gpus": plan.inputs.gpus,
        "margin": plan.inputs.margin,
    }
