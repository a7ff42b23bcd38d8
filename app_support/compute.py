"""Cached calls into ``model``: the plan, the pool-size map, latency-versus-rate sweeps, evaluations
at a chosen rate, roofline points, the math panel and simulator runs.

Every cached function is keyed on ``Spec.key`` (a JSON string of plain inputs) plus plain
arguments; objects derived from that key (the Spec, the Plan) ride along as ``_``-prefixed
arguments, which Streamlit does not hash. ``st.cache_resource`` is used (no copy on read) because
the results are frozen dataclasses and numpy arrays that nothing mutates. This module only builds
inputs (profiles with user overrides, a custom link, a trace workload) and calls ``model``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import streamlit as st

import model
from model.hardware.parallelism import as_parallelism
from model.planner.verdict import family_best
from model.serving.registry import style_names, style_of
from model.units import format_bandwidth

from .inputs import Spec, cached_config, cached_trace

STYLES = style_names()  # the registered serving styles (model.serving.registry), in plan order
SWEEP_POINTS = 18
# The pool-size map evaluates every (n_prefill, n_decode) split; beyond this many cells it is shown
# for a smaller budget so it stays interactive (about 1 s for 500 cells).
MAX_MAP_CELLS = 500


# ---------------------------------------------------------------------------------------------
# inputs -> model objects


def _gpu(name: str, spec: Spec) -> model.GPU:
    gpu = model.load_catalog().gpu(name)
    changes = {
        f: spec[k]
        for f, k in (
            ("prefill_mfu", "prefill_mfu"),
            ("decode_mbu", "decode_mbu"),
            ("price_usd_per_hour", "price"),
            ("tdp_w", "tdp_w"),
        )
        if spec[k] is not None
    }
    return dataclasses.replace(gpu, **changes) if changes else gpu


def _link(spec: Spec) -> str | model.Link:
    link = spec["link"]
    if isinstance(link, str):
        return link
    return model.Link(
        name="custom",
        full_name=f"custom link, {format_bandwidth(link['bandwidth_bytes_per_s'], digits=4)}",
        kind="network",
        bandwidth_bytes_per_s=link["bandwidth_bytes_per_s"],
        latency_s=link["latency_s"],
        efficiency=link["efficiency"],
    )


def trace_of(spec: Spec) -> Any:
    """The uploaded Trace of a spec (None for a preset workload)."""
    if spec["trace_digest"] is None:
        return None
    return cached_trace(spec["trace_digest"], spec["trace_name"], spec.trace_bytes)


def plan_arguments(spec: Spec) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Positional and keyword arguments of ``model.plan`` for a spec."""
    arch = cached_config(spec["config_name"], spec["config_text"]) if spec["config_text"] else spec["model"]
    trace = trace_of(spec)
    if trace is not None:
        workload: Any = model.Workload.from_trace(trace, name=f"trace:{spec['trace_name']}")
    elif spec["isl"] is not None:
        workload = model.workload_from_lengths(isl_dist=spec["isl"], osl_dist=spec["osl"])
    else:
        workload = spec["workload"]
    kwargs = {
        "workload": workload,
        "ttft_slo_s": spec["ttft_slo_s"],
        "tpot_slo_s": spec["tpot_slo_s"],
        "percentile": spec["percentile"],
        "attainment": spec["attainment"],
        "link": _link(spec),
        "decode_gpu": _gpu(spec["decode_gpu"], spec) if spec["decode_gpu"] else None,
        "dtype": spec["dtype"],
        "kv_dtype": spec["kv_dtype"],
        "tp_options": tuple(spec["tp_options"]),
        "prefill_parallelism": spec.values.get("prefill_parallelism"),
        "decode_parallelism": spec.values.get("decode_parallelism"),
        "chunk_options": tuple(spec["chunk_options"]),
        "layerwise": spec["layerwise"],
        "objective": spec["objective"],
        "margin": spec["margin"],
        "speculation": model.parse_speculation(spec.values.get("speculation") or ""),
        "kv_offload": spec.values.get("kv_offload"),
        "preemption": spec.values.get("preemption"),
        "prefix_hit_rate": spec.values.get("prefix_hit_rate"),
    }
    if spec["gpus"] is not None:
        kwargs["gpus"] = spec["gpus"]
    else:
        kwargs["target_rate_rps"] = spec["target_rate_rps"]
    return (arch, _gpu(spec["gpu"], spec)), kwargs


# ---------------------------------------------------------------------------------------------
# cached calls


@st.cache_resource(max_entries=32, show_spinner=False)
def _plan(key: str, _spec: Spec, thresholds: bool) -> model.Plan:
    args, kwargs = plan_arguments(_spec)
    return model.plan(*args, thresholds=thresholds, **kwargs)


def get_plan(spec: Spec, thresholds: bool = False) -> model.Plan:
    """``model.plan`` on the spec's inputs (raises PdplanError on bad input).

    ``thresholds`` False (what an Apply needs) skips the flip-threshold searches, which cost one to
    three times the rest of the plan (docs/app.md, "Responsiveness"); they run only when the page
    asks for them ("What would flip it" switched on, the JSON download). Verdict, reasons, best
    configurations and alternatives are the same either way (``model.plan(thresholds=...)``); the
    two are cached apart."""
    return _plan(spec.key, spec, bool(thresholds))


def best_of_family(plan: model.Plan, family: str) -> model.BestConfig | None:
    """The plan's best configuration among the registered styles of ``family`` (the verdict's rule)."""
    return family_best(plan.inputs, plan.best, family)


def map_setup(plan: model.Plan) -> tuple[int, int, int]:
    """Default (prefill TP, decode TP, GPU budget) of the pool-size map.

    The TPs of the best disaggregated configuration; without one, the smallest TP degree searched
    for both pools (so the smallest splits, such as the 1 x TP1 + 1 x TP1 the reasons name, are on
    the map). The budget is the plan's (target-rate mode: twice the GPUs the best disaggregated
    configuration needs, or twice the smallest split)."""
    dis = best_of_family(plan, "disaggregated")
    if dis is not None:
        deps = style_of(dis.config).phase_deployments(dis.config)
        # the map is drawn over TP degrees: the TP of each phase's layout (Parallelism or a whole number)
        tp_p, tp_d = (as_parallelism("tp", deps[phase][1]).tp for phase in ("prefill", "decode"))
    else:
        tp_p = tp_d = min(plan.inputs.tp_options)
    if plan.inputs.gpus is not None:
        budget = plan.inputs.gpus
    else:
        budget = 2 * dis.n_gpus if dis is not None else 2 * (tp_p + tp_d)
    return tp_p, tp_d, budget


def map_budget(tp_p: int, tp_d: int, budget: int) -> int:
    """The budget actually mapped: never above ``budget``, and capped so the map has at most about
    MAX_MAP_CELLS cells. Below ``tp_p + tp_d`` no split fits (the page says so instead of a map)."""
    cap = int(math.sqrt(2 * MAX_MAP_CELLS * tp_p * tp_d))
    return min(budget, max(cap, tp_p + tp_d))


@st.cache_resource(max_entries=64, show_spinner=False)
def _pool_map(key: str, _plan_obj: model.Plan, tp_p: int, tp_d: int, budget: int) -> dict[str, np.ndarray]:
    return model.pool_map(_plan_obj.inputs, tp_p, tp_d, budget)


def get_pool_map(spec: Spec, plan: model.Plan, tp_p: int, tp_d: int, budget: int) -> dict[str, np.ndarray]:
    return _pool_map(spec.key, plan, tp_p, tp_d, budget)


def sweep_rates(plan: model.Plan, inspect_rate: float) -> np.ndarray:
    """A common rate axis for every style: up to 1.5 x the highest goodput (or the inspected rate)."""
    top = max([b.goodput_rps for b in plan.best.values()] + [inspect_rate, 1e-3])
    hi = 1.5 * top
    return np.linspace(hi / SWEEP_POINTS, hi, SWEEP_POINTS)


@st.cache_resource(max_entries=64, show_spinner=False)
def _sweeps(key: str, _plan_obj: model.Plan, rates: tuple[float, ...]) -> dict[str, Any]:
    scn = _plan_obj.inputs.scenario
    return {s: model.rate_sweep(b.config, scn, np.array(rates)) for s, b in _plan_obj.best.items()}


def get_sweeps(spec: Spec, plan: model.Plan, rates: np.ndarray) -> dict[str, Any]:
    """``model.rate_sweep`` of every style's best configuration over ``rates``."""
    return _sweeps(spec.key, plan, tuple(float(r) for r in rates))


@st.cache_resource(max_entries=128, show_spinner=False)
def _evaluations(key: str, _plan_obj: model.Plan, rate: float) -> dict[str, model.Evaluation]:
    scn = _plan_obj.inputs.scenario
    return {s: model.evaluate(b.config, scn, rate) for s, b in _plan_obj.best.items()}


def get_evaluations(spec: Spec, plan: model.Plan) -> dict[str, model.Evaluation]:
    """Each style's best configuration evaluated at the inspected rate (at its goodput when 0)."""
    rate = spec["rate_rps"]
    if not rate > 0:
        return {s: b.at_goodput for s, b in plan.best.items()}
    return _evaluations(spec.key, plan, float(rate))


@st.cache_resource(max_entries=64, show_spinner=False)
def _figure(name: str, key: str, rate: float, _build: Callable[[], Any]) -> Any:
    return _build()


def cached_figure(name: str, spec: Spec, build: Callable[[], Any]) -> Any:
    """The figure ``name`` built once per plan inputs and inspected rate (what the open tab's figures
    depend on): plotly's validating constructors cost more server time than the rest of the page
    after the plan (docs/app.md, "Responsiveness"), and st.plotly_chart only reads the figure."""
    return _figure(name, spec.key, float(spec["rate_rps"]), build)


def get_rooflines(plan: model.Plan) -> dict[str, list[Any]]:
    """``model.roofline_points`` of every style's best configuration (microseconds; not cached)."""
    scn = plan.inputs.scenario
    return {s: model.roofline_points(b, scn) for s, b in plan.best.items()}


# ---------------------------------------------------------------------------------------------
# "Show the math"


def symbolic_available() -> bool:
    try:
        from model.symbolic import formulas  # noqa: F401
    except ImportError:
        return False
    return True


def _deployment(plan: model.Plan, gpu: model.GPU, parallel: model.Parallelism | int) -> model.Deployment:
    scn = plan.inputs.scenario
    return model.Deployment(
        scn.arch, gpu, parallel=parallel, weight_dtype=scn.weight_dtype, kv_dtype=scn.kv_dtype_resolved
    )


@st.cache_data(max_entries=64, show_spinner=False)
def _math(key: str, _plan_obj: model.Plan, style: str, rate: float) -> list[tuple[str, str]]:
    from model.hardware.formats import bytes_per_element
    from model.symbolic import formulas as symbolic
    from model.symbolic import selection
    from model.symbolic.roofline import decode_values, prefill_values

    plan = _plan_obj
    b = plan.best[style]
    ev = b.at_goodput if not rate > 0 else model.evaluate(b.config, plan.inputs.scenario, rate)
    scn = plan.inputs.scenario
    arch = scn.arch
    cfg = b.config
    cfg_style = style_of(cfg)
    deps = cfg_style.phase_deployments(cfg)
    pre = _deployment(plan, *deps["prefill"])
    dec = pre if deps["decode"] == deps["prefill"] else _deployment(plan, *deps["decode"])
    values: dict[str, Callable[[], dict[str, float]]] = {
        "prefill": lambda: prefill_values(pre, max(scn.mean_prompt_tokens, 1.0)),
        "decode": lambda: decode_values(dec, max(ev.decode_batch, 1.0), max(scn.decode_context_tokens, 1.0)),
        "kv": lambda: selection.kv_values(arch, bytes_per_element(scn.kv_dtype_resolved)),
        "transfer": lambda: selection.transfer_values(cfg, arch, ev.kv_bytes_per_request, ev.prefill_s),
    }
    sections: list[tuple[str, str]] = []
    for section in selection.formulas_for(cfg, arch):
        formulas = [symbolic.formula(n) for n in section.formulas]
        try:
            numbers = values[section.values]() if section.values else None
            sections.append((section.title, symbolic.latex_block(formulas, numbers)))
        except model.PdplanError as err:  # a value out of the formula's range: show it symbolic
            block = symbolic.latex_block(formulas, None) + f"\n\n*(values not shown: {err})*"
            sections.append((section.title, block))
    return sections


def get_math(spec: Spec, plan: model.Plan, style: str) -> list[tuple[str, str]]:
    """(title, markdown with $$ LaTeX $$) sections for one style, numbers put in where available."""
    return _math(spec.key, plan, style, float(spec["rate_rps"]))


# ---------------------------------------------------------------------------------------------
# "Verify by simulation"


def simulator_available() -> bool:
    try:
        from model.sim import simulate  # noqa: F401
    except ImportError:
        return False
    return True


def _requests(spec: Spec, plan: model.Plan, rate: float, n: int, seed: int) -> Any:
    from model.sim import simulate as sim

    trace = trace_of(spec)
    if trace is not None:
        return sim.trace_requests(trace, n, rate_rps=rate)
    return sim.poisson_requests(plan.inputs.scenario.workload, rate, n, seed=seed)


def _session_memo(name: str, key: tuple, compute_fn: Callable[[], Any], keep: int = 32) -> Any:
    """Memoise in this session's state (simulator runs report progress to the page, which
    ``st.cache_*`` cannot replay, so they are kept per session instead)."""
    memo = st.session_state.setdefault(name, {})
    if key not in memo:
        if len(memo) >= keep:
            memo.pop(next(iter(memo)))
        memo[key] = compute_fn()
    return memo[key]


def run_simulation(
    spec: Spec,
    plan: model.Plan,
    style: str,
    rate: float,
    n: int,
    seed: int,
    progress: Callable[[int, int], None] | None = None,
) -> Any:
    """Simulator summary (model.sim.report.SimSummary) of one style's best config at ``rate``."""
    from model.sim import simulate as sim

    def run() -> Any:
        scn = plan.inputs.scenario
        options = sim.SimOptions(warmup_requests=n // 10, progress=progress)
        req = _requests(spec, plan, rate, n, seed)
        config = plan.best[style].config
        return sim.simulate(config, scn.arch, req, options=options, **sim.scenario_options(scn)).summary

    return _session_memo("sim_runs", (spec.key, style, float(rate), int(n), int(seed)), run)


def run_sim_goodput(spec: Spec, plan: model.Plan, style: str, n: int, seed: int) -> Any:
    """Simulated goodput (model.sim.simulate.GoodputResult) of one style's best configuration."""
    from model.sim import simulate as sim

    def run() -> Any:
        scn = plan.inputs.scenario
        b = plan.best[style]
        req = _requests(spec, plan, b.goodput_rps, n, seed)
        return sim.goodput(
            b.config,
            scn.arch,
            req,
            start_rps=b.goodput_rps,
            options=sim.SimOptions(warmup_requests=n // 10),
            **sim.scenario_options(scn),
        )

    return _session_memo("sim_goodputs", (spec.key, style, int(n), int(seed)), run)
