"""The planner: enumerate configurations of each serving style, find their goodput, pick the best,
and hand them to the verdict (model.planner.verdict).

Two modes (DESIGN.md): a GPU budget (maximise goodput with at most ``gpus`` GPUs) or a target
rate (find the fewest GPUs, or the lowest cost, that keep the SLOs at ``target_rate_rps``).
Candidates that cannot run are counted by reason, never raised (a value with a reason).
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from model.errors import InputError, build_request
from model.hardware.catalog import load_catalog
from model.hardware.engines import DEFAULT_ENGINE, Engine, check_swap_tier, with_preemption
from model.hardware.gpus import GPU
from model.hardware.kv_offload import KVOffload, resolve_kv_offload
from model.hardware.links import Link
from model.hardware.nodes import Node
from model.hardware.parallelism import Parallelism, as_parallelism
from model.limits import MAX_OPTIONS, MAX_PLAN_GPUS, check_int
from model.llm.arch import LLMArch
from model.llm.catalog import get_model
from model.physics.speculation import Speculation
from model.planner.alternatives import (
    DEFAULT_TOP,
    Segment,
    build_alternatives,
    cheapest_ok,
    check_top,
    picks,
    rank_order,
    with_bindings,
)
from model.planner.failures import sweep_states, with_failures
from model.planner.goodput import Brackets, goodput_brackets, goodput_rps
from model.planner.infeasible import Search as InfeasibleSearch
from model.planner.infeasible import explain as infeasible_explain
from model.planner.infeasible import flips as infeasible_flips
from model.planner.infeasible import none_reasons
from model.planner.layouts import layout_options
from model.planner.prefix import with_prefix_hit_rate
from model.planner.types import BestConfig, Config, Plan, PlanInputs
from model.serving.candidates import DisaggregatedSet, only
from model.serving.enumeration import DEFAULT_CHUNK_OPTIONS, DEFAULT_TP_OPTIONS, disaggregated_grid
from model.serving.evaluation import summarise
from model.serving.registry import styles
from model.serving.style import CandidateSet
from model.workload.presets import Workload, get_workload
from model.workload.scenario import DEFAULT_SAMPLES, Scenario
from model.workload.slo import SLO

# Largest GPU budget or search size (model.limits.MAX_PLAN_GPUS: the budget sweep grows with it).
MAX_GPUS = MAX_PLAN_GPUS


# ---------------------------------------------------------------------------------------------
# input resolution


def _resolve_slo(slo, ttft_slo_s, tpot_slo_s, percentile, attainment) -> SLO:
    if slo is not None:
        if not isinstance(slo, SLO):
            raise InputError("slo", type(slo).__name__, "an SLO(ttft_s, tpot_s, ...) or None")
        return slo
    if ttft_slo_s is None or tpot_slo_s is None:
        raise InputError("slo", None, "an SLO(...) or both ttft_slo_s and tpot_slo_s")
    return SLO(ttft_slo_s, tpot_slo_s, percentile, attainment)


@dataclass(frozen=True)
class PlanRequest:
    """Everything a plan is asked for, as one value (``model.plan(request)`` or ``model.plan(model,
    gpu, **fields)``); :func:`resolve_inputs` looks the names up and validates every field.

    ``model``/``gpu``/``decode_gpu``/``link``/``node``/``engine``: catalog names, file paths or
    profile objects. ``workload``: a preset name or a Workload. The targets: ``slo``, or
    ``ttft_slo_s`` and ``tpot_slo_s`` (seconds) at ``percentile`` with ``attainment``. The size:
    exactly one of ``gpus`` (a budget) or ``target_rate_rps`` (fewest GPUs or cost, ``objective``,
    up to ``max_gpus``). ``dtype``/``kv_dtype``: numeric formats (model.hardware.formats).
    ``tp_options``/``chunk_options``: the search space. ``layerwise``: KV sent per layer.
    ``margin``: the gain disaggregation must show. ``samples``/``seed``: the workload sample.
    ``arrival_scv``: squared coefficient of variation of inter-arrival gaps (1 = Poisson; the prefill
    queues use it through the G/G/c approximation, model.queueing.mgc_wait). ``engine``: the
    serving-engine profile whose caps and overheads the evaluation applies (None: vLLM), the same
    profile ``pdplan simulate --engine`` reads. ``speculation``: speculative decoding on every instance
    (model.Speculation; None: off). ``prefix_hit_rate`` / ``prefix_routing``: model.planner.prefix.
    ``kv_offload``: offload tiers (model.hardware.kv_offload). ``preemption``: replaces the engine
    profile's pre-emption policy, one of model.hardware.engines.PREEMPTIONS ("swap" needs a cpu tier
    in ``kv_offload``; None: the profile's). ``ep_options`` / ``dp_attention_options``
    / ``pp_options``: degrees to enumerate (None: TP, TEP and DEP layouts for MoE models, PP 1;
    model.serving.enumeration.candidate_layouts). ``prefill_parallelism`` / ``decode_parallelism``: a
    fixed layout for a disaggregated pool, e.g. "tep=8", "dep=32".
    """

    model: str | LLMArch
    gpu: str | GPU
    workload: str | Workload
    slo: SLO | None = None
    ttft_slo_s: float | None = None
    tpot_slo_s: float | None = None
    percentile: float = 90.0
    attainment: float = 0.9
    link: str | Link = "ib-ndr-400"
    decode_gpu: str | GPU | None = None
    node: str | Node | None = None
    gpus: int | None = None
    target_rate_rps: float | None = None
    dtype: str = "bf16"
    kv_dtype: str | None = None
    tp_options: Sequence[int] = DEFAULT_TP_OPTIONS
    chunk_options: Sequence[int] = DEFAULT_CHUNK_OPTIONS
    layerwise: bool = True
    objective: str = "gpus"
    margin: float = 0.10
    max_gpus: int = 256
    profile_dirs: str | Path | Sequence[str | Path] | None = None
    samples: int = DEFAULT_SAMPLES
    seed: int = 0
    arrival_scv: float = 1.0
    engine: str | Engine | None = None
    speculation: Speculation | None = None
    prefix_hit_rate: float | None = None
    prefix_routing: str = "cache-aware"
    ep_options: Sequence[int] | None = None
    dp_attention_options: Sequence[int] | None = None
    pp_options: Sequence[int] | None = None
    prefill_parallelism: str | Parallelism | None = None
    decode_parallelism: str | Parallelism | None = None
    kv_offload: str | KVOffload | None = None
    preemption: str | None = None


def resolve_inputs(request: PlanRequest) -> PlanInputs:
    """Look up names, validate ranges, and build the scenario; errors name the field."""
    if not isinstance(request, PlanRequest):
        raise InputError("request", type(request).__name__, "a PlanRequest")
    model = request.model
    gpu = request.gpu
    workload = request.workload
    slo = request.slo
    ttft_slo_s = request.ttft_slo_s
    tpot_slo_s = request.tpot_slo_s
    percentile = request.percentile
    attainment = request.attainment
    link = request.link
    decode_gpu = request.decode_gpu
    node = request.node
    gpus, target_rate_rps = request.gpus, request.target_rate_rps
    dtype, kv_dtype = request.dtype, request.kv_dtype
    tp_options = request.tp_options
    chunk_options = request.chunk_options
    layerwise = request.layerwise
    objective = request.objective
    margin = request.margin
    max_gpus = request.max_gpus
    profile_dirs = request.profile_dirs
    samples = request.samples
    seed = request.seed
    arrival_scv = request.arrival_scv
    engine = request.engine
    if request.speculation is not None and not isinstance(request.speculation, Speculation):
        raise InputError("speculation", request.speculation, "a Speculation (model.Speculation) or None")
    if (gpus is None) == (target_rate_rps is None):
        raise InputError(
            "gpus / target_rate", (gpus, target_rate_rps), "exactly one of a GPU budget or a target rate"
        )
    if gpus is not None and (
        isinstance(gpus, bool) or not isinstance(gpus, numbers.Integral) or not 1 <= gpus <= MAX_GPUS
    ):
        raise InputError("gpus", gpus, f"a whole number of GPUs in [1, {MAX_GPUS}]")
    if gpus is not None:
        gpus = int(gpus)
    if target_rate_rps is not None and not (
        isinstance(target_rate_rps, int | float) and math.isfinite(target_rate_rps) and target_rate_rps > 0
    ):
        raise InputError("target_rate", target_rate_rps, "a request rate > 0 req/s")
    if objective not in ("gpus", "cost"):
        raise InputError("objective", objective, "'gpus' or 'cost'")
    if isinstance(margin, bool) or not (isinstance(margin, int | float) and 0 <= margin < 1):
        raise InputError("margin", margin, "a fraction in [0, 1), e.g. 0.1")
    if isinstance(max_gpus, bool) or not (
        isinstance(max_gpus, numbers.Integral) and 1 <= max_gpus <= MAX_GPUS
    ):
        raise InputError("max_gpus", max_gpus, f"a whole number in [1, {MAX_GPUS}]")
    for name, options in (("chunk_options", chunk_options), ("tp_options", tp_options)):
        if isinstance(options, str) or not isinstance(options, Sequence) or not options:
            raise InputError(name, options, "a non-empty list of whole numbers")
        if len(options) > MAX_OPTIONS:
            raise InputError(name, options, f"at most {MAX_OPTIONS} values (every combination is evaluated)")
    for name, value in (("dtype", dtype), ("kv_dtype", kv_dtype)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InputError(name, value, "a numeric format name such as 'bf16' or 'fp8'")
    for name, flag in (("layerwise", layerwise),):
        if not isinstance(flag, bool):
            raise InputError(name, flag, "True or False")
    if not isinstance(workload, str | Workload):
        raise InputError("workload", type(workload).__name__, "a workload preset name or a Workload")
    for c in chunk_options:
        if isinstance(c, bool) or not (isinstance(c, numbers.Integral) and 16 <= c <= 65536):
            raise InputError("chunk_options", c, "token budgets between 16 and 65536")
    for t in tp_options:
        if isinstance(t, bool) or not (isinstance(t, numbers.Integral) and 1 <= t <= 64):
            raise InputError("tp_options", t, "TP degrees between 1 and 64")
    catalog = load_catalog(profile_dirs)
    g = catalog.gpu(gpu)
    dg = catalog.gpu(decode_gpu) if decode_gpu is not None else g
    li = catalog.link(link)
    eng = with_preemption(catalog.engine(DEFAULT_ENGINE if engine is None else engine), request.preemption)
    nd = catalog.node(node) if node is not None else None
    intra = catalog.link(nd.intra_node_link) if nd is not None else None
    arch = get_model(model)
    usable = [t for t in tp_options if arch.num_heads % t == 0]
    if not usable:
        divisors = [d for d in (1, 2, 4, 8, 16, 32, 64) if arch.num_heads % d == 0]
        raise InputError(
            "tp_options",
            list(tp_options),
            f"TP degrees dividing {arch.label}'s {arch.num_heads} attention heads, e.g. {divisors}",
        )
    if nd is not None and nd.gpu not in (g.name, dg.name):
        raise InputError("node", nd.name, f"a node profile of {g.name} GPUs (this one holds {nd.gpu})")
    wl = workload if isinstance(workload, Workload) else get_workload(workload)
    wl = with_prefix_hit_rate(wl, request, arch, g, eng, usable)
    offload = resolve_kv_offload(request.kv_offload, nd, g.name)
    check_swap_tier(eng.preemption, offload)
    scn = Scenario(
        arch,
        wl,
        _resolve_slo(slo, ttft_slo_s, tpot_slo_s, percentile, attainment),
        dtype,
        kv_dtype,
        samples,
        seed,
        arrival_scv=arrival_scv,
        engine=eng,
        speculation=request.speculation,
        kv_offload=offload,
    )
    return PlanInputs(
        scn,
        g,
        dg,
        li,
        nd,
        intra,
        gpus,
        target_rate_rps,
        tuple(int(t) for t in tp_options),
        tuple(int(c) for c in chunk_options),
        layerwise,
        objective,
        float(margin),
        int(max_gpus),
        layout_options(
            arch,
            nd,
            gpus if gpus is not None else int(max_gpus),
            request.ep_options,
            request.dp_attention_options,
            request.pp_options,
            request.prefill_parallelism,
            request.decode_parallelism,
        ),
    )


# ---------------------------------------------------------------------------------------------
# candidates


def budget_sets(
    inp: PlanInputs, gpus: int, keep: Callable[[Config], bool] | None = None
) -> dict[str, CandidateSet]:
    """Candidate sets of each registered style for a budget of ``gpus`` GPUs (only the
    configurations ``keep`` accepts, when given)."""
    out: dict[str, CandidateSet] = {}
    for style in styles():
        configs = [c for c in style.budget_configs(inp, gpus) if keep is None or keep(c)]
        if configs:
            out[style.name] = style.build_set(inp.scenario, configs)
    return out


def _split_feasible(cands: CandidateSet, infeasible: Counter) -> CandidateSet:
    fits = cands.fits()
    for i in np.nonzero(~fits)[0]:
        infeasible[cands.infeasible_reason(int(i))] += 1
    return cands.subset(fits)


def _rank(goodput: np.ndarray, gpus: np.ndarray, cost: np.ndarray) -> int:
    """Index of the highest goodput; ties go to fewer GPUs, then lower cost."""
    return int(rank_order(goodput, gpus, cost, None)[0])


def best_of(cands: CandidateSet, goodput: np.ndarray, scn: Scenario) -> BestConfig | None:
    """The best candidate of a set by goodput, evaluated at its goodput (failure impact: see
    :func:`with_failures`; its binding constraint, empty here, is the first alternative's:
    model.planner.alternatives.with_bindings)."""
    if len(cands.configs) == 0 or not np.any(goodput > 0):
        return None
    i = _rank(goodput, np.asarray(cands.n_gpus), np.asarray(cands.price_usd_per_hour))
    rate = float(goodput[i])
    sub = only(cands, i)
    ev = summarise(sub, sub.evaluate(np.array([rate])), 0, scn, rate)
    config = cands.configs[i]
    return BestConfig(
        architecture=config.style,
        label=config.label(),
        config=config,
        n_gpus=int(config.n_gpus),
        goodput_rps=rate,
        goodput_rps_per_gpu=rate / config.n_gpus,
        cost_usd_per_hour=float(np.asarray(cands.price_usd_per_hour)[i]),
        at_goodput=ev,
        binding_constraint="",
    )


def _sweep_budget(
    inp: PlanInputs, gpus: int, infeasible: Counter, keep: int | None = None
) -> tuple[dict[str, BestConfig], int, dict, dict]:
    """Each style's best configuration on the budget, every candidate's goodput (exact for the
    ``keep`` best of each style, when given; a good rate below the exact one for the others:
    model.planner.goodput.highest_rate_rps), and the search states by configuration
    (model.planner.failures.sweep_states: a later search of a swept configuration resumes there)."""
    sets = budget_sets(inp, gpus)
    best: dict[str, BestConfig] = {}
    goodputs: dict[str, tuple[CandidateSet, np.ndarray]] = {}
    states: dict[str, tuple[CandidateSet, Brackets]] = {}
    n = 0
    for style, cands in sets.items():
        n += len(cands.configs)
        feasible = _split_feasible(cands, infeasible)
        brackets = goodput_brackets(feasible, inp.scenario.slo, keep=keep)
        g = brackets.value()
        goodputs[style] = (feasible, g)
        states[style] = (feasible, brackets)
        b = best_of(feasible, g, inp.scenario)
        if b is not None:
            best[style] = b
    return best, n, goodputs, sweep_states(states)


def _sweep_target(
    inp: PlanInputs, infeasible: Counter, top: int
) -> tuple[dict[str, BestConfig], int, dict[str, list[Segment]]]:
    """Each style's cheapest configuration meeting the SLOs at the target rate: over the cheapest
    ``ok`` candidates of all its groups, the lowest objective, then the higher goodput
    (model.planner.alternatives.rank_order); also those candidates (for the top-N list)."""
    best: dict[str, BestConfig] = {}
    segments: dict[str, list[Segment]] = {}
    n = 0
    for style in styles():
        found = []
        for group in style.target_groups(inp):
            n += group.enumerated
            fits = group.cands.fits()
            for i in np.nonzero(~fits)[0]:
                infeasible[group.cands.infeasible_reason(int(i))] += 1
            ok = np.asarray(group.ok, dtype=bool) & fits
            seg = cheapest_ok(group.cands, ok, inp.objective, inp.scenario.slo, top)
            if seg is not None:
                found.append(seg)
        first = picks(found, inp.objective, 1)
        if first:
            seg, i = first[0]
            best[style.name] = best_of(only(seg.cands, i), seg.goodput_rps[i : i + 1], inp.scenario)
            segments[style.name] = found
    return best, n, segments


def plan(
    model: str | LLMArch | PlanRequest,
    gpu: str | GPU | None = None,
    *,
    thresholds: bool = True,
    top: int = DEFAULT_TOP,
    **kwargs: Any,
) -> Plan:
    """Plan serving for ``model`` on ``gpu``: the verdict, its reasons and the best of each style.

    ``model`` is a :class:`PlanRequest`, or a model with ``gpu`` and the other fields of
    PlanRequest as keywords (workload, SLOs, link, decode_gpu, node, gpus or target_rate_rps, dtype,
    TP and chunk options, objective, margin, profile_dirs, engine, ...). ``thresholds`` False skips
    the flip-threshold searches (faster). ``top``: how many alternatives ``Plan.alternatives`` lists
    per style and overall (model.planner.alternatives; 1 to 50).
    """
    from model.planner.colocated_rule import choice_words, colocated_choice
    from model.planner.verdict import THRESHOLD_TOP_K, decide, flip_thresholds, tie_band

    top = check_top(top)
    inp = resolve_inputs(plan_request(model, gpu, **kwargs))
    infeasible: Counter = Counter()
    if inp.gpus is not None:
        # only the best few of each style are read (alternatives; flip searches when asked): refine those
        keep = max(top, THRESHOLD_TOP_K) if thresholds else top
        best, n, goodputs, known = _sweep_budget(inp, inp.gpus, infeasible, keep)
        segments = {style: [Segment(c, g)] for style, (c, g) in goodputs.items()}
    else:
        best, n, segments = _sweep_target(inp, infeasible, top)
        goodputs, known = {}, {}
    objective = None if inp.gpus is not None else inp.objective
    alternatives = build_alternatives(segments, inp.scenario, objective, top)
    best = with_bindings(with_failures(inp.scenario, best, known), alternatives, inp.scenario)
    verdict, reasons = decide(inp, best, infeasible, goodputs, n)
    flips = flip_thresholds(inp, best, goodputs, verdict) if thresholds and best else ()
    tie, gain = tie_band(inp, best)
    pick = colocated_choice(inp, best)
    named = verdict == pick.style  # the colocated choice is part of the verdict
    note = choice_words(inp, pick) if named else None
    why = None
    if verdict == "none":
        why = infeasible_explain(inp, _SEARCH, {s: c for s, (c, _) in goodputs.items()})
        reasons = none_reasons(why, reasons[0], infeasible)
        flips = infeasible_flips(inp, why)
    return Plan(
        verdict,
        tuple(reasons),
        best,
        tuple(flips),
        dict(infeasible),
        n,
        inp,
        tie,
        gain,
        why,
        alternatives,
        colocated_tie=named and pick.tie,
        colocated_lead=pick.lead,
        colocated_note=note,
    )


_SEARCH = InfeasibleSearch(
    sets_for=budget_sets,
    meets_target=lambda inp: bool(_sweep_target(inp, Counter(), 1)[0]),
)


def plan_request(
    model: str | LLMArch | PlanRequest, gpu: str | GPU | None = None, **kwargs: Any
) -> PlanRequest:
    """A PlanRequest as given, or built from a model, a GPU and keyword fields (errors name the field)."""
    return build_request(PlanRequest, model, gpu, kwargs)


def pool_map(
    inp: PlanInputs, prefill: Parallelism | int, decode: Parallelism | int, gpus: int | None = None
) -> dict[str, np.ndarray]:
    """Goodput of every (n_prefill, n_decode) with n_p x G_p + n_d x G_d <= gpus: the pool-size map.

    ``prefill`` and ``decode`` are the instance layouts of the two pools (a whole number = TP-only of
    that degree); G_p and G_d their GPUs per instance.

    Returns arrays n_prefill, n_decode, n_gpus, goodput_rps, goodput_rps_per_gpu and fits.
    """
    if not isinstance(inp, PlanInputs):
        raise InputError(
            "inp",
            type(inp).__name__,
            "PlanInputs (from resolve_inputs(PlanRequest(...)) or plan(...).inputs)",
        )
    prefill = as_parallelism("prefill", prefill)
    decode = as_parallelism("decode", decode)
    if gpus is not None:
        check_int("gpus", gpus, 1, MAX_PLAN_GPUS, "the pool map has one cell per pool split")
    budget = gpus or inp.gpus or inp.max_gpus
    configs = disaggregated_grid(inp.gpu, inp.decode_gpu, prefill, decode, budget, inp.link, inp.layerwise)
    if not configs:
        empty = np.zeros(0)
        return {
            k: empty
            for k in ("n_prefill", "n_decode", "n_gpus", "goodput_rps", "goodput_rps_per_gpu", "fits")
        }
    cands = DisaggregatedSet.build(inp.scenario, configs)
    fits = cands.fits()
    g = np.where(fits, goodput_rps(cands, inp.scenario.slo), 0.0)
    n_gpus = np.asarray(cands.n_gpus)
    return {
        "n_prefill": np.array([c.n_prefill for c in configs]),
        "n_decode": np.array([c.n_decode for c in configs]),
        "n_gpus": n_gpus,
        "goodput_rps": g,
        "goodput_rps_per_gpu": g / n_gpus,
        "fits": fits,
    }
