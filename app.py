"""pdplan's web app: should prefill and decode run together or apart, on how many GPUs, and why.

Run with ``streamlit run app.py`` (or ``make app``). Presentation only: every number comes from the
``model`` package (model.plan, model.pool_map, model.rate_sweep, model.roofline_points,
model.evaluate, model.symbolic, model.simulate). Helpers live in ``app_support/``; docs/app.md
describes the page and its measured responsiveness.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

from app_support import (
    alternatives,
    breakdown,
    charts,
    compare,
    compute,
    concurrency,
    flips,
    frontier,
    guard,
    inputs,
    panels,
    poolmap,
    recipes,
    schedule,
)
from model.errors import PdplanError
from model.units import format_count, format_rate, format_time

st.set_page_config(page_title="pdplan: colocated or disaggregated?", page_icon="⚖️", layout="wide")

# The first tab is the one open after an Apply: the TTFT breakdown draws from the plan's own
# evaluations (no computation); every other tab computes only when opened (docs/app.md).
TABS = (
    "TTFT breakdown",
    "Pool-size map",
    "Latency vs rate",
    "Roofline",
    "Memory",
    "Show the math",
    "Verify by simulation",
    "Download",
    "Alternatives",
    "Frontier",
)


def _stop_with(errors: list[str]) -> None:
    for e in errors:
        st.error(e)
    st.stop()


@dataclass(frozen=True)
class Slots:
    """The parts of the page drawn before the plan (so that the browser renders them while it runs)
    with the containers the plan's results go into."""

    verdict: Any
    compare: compare.Controls
    load: Any
    tabs: Sequence[Any]
    is_open: dict[str, bool]
    schedule: Any


def _layout(spec: inputs.Spec) -> Slots:
    """Everything on the page that needs no plan, in page order, with empty containers for the rest.

    Drawn before ``model.plan`` runs: Streamlit sends each element as it is created, so the browser
    lays these out during the plan and only the plan's own results remain after it (docs/app.md,
    "Responsiveness")."""
    trace = compute.trace_of(spec)
    if trace is not None:
        st.caption(
            f"Trace {panels.md(spec['trace_name'])}: {format_count(len(trace), 'request')} over "
            f"{format_time(trace.duration_s)} (mean {format_rate(trace.mean_rate_rps)}); the planner "
            "resamples its (prompt, output) pairs, "
            "the simulator replays its arrivals time-scaled to the rate."
        )
    verdict = st.container()
    controls = compare.controls()
    load = concurrency.choice()
    tabs = st.tabs(TABS, key="view", on_change="rerun", bind=inputs.BIND)
    is_open = {name: tab.open is not False for name, tab in zip(TABS, tabs, strict=True)}
    return Slots(verdict, controls, load, tabs, is_open, schedule.expander())


def _tab_contents(slots: Slots, spec: inputs.Spec, plan: Any, evals: dict[str, Any]) -> None:
    """The open tab's content (every other tab computes nothing)."""
    tabs, is_open = slots.tabs, slots.is_open
    slo = plan.inputs.scenario.slo
    with tabs[0]:
        if is_open["TTFT breakdown"] and evals:
            breakdown.tab(spec, evals, slo)
        else:
            breakdown.keep()
    with tabs[1]:
        if is_open["Pool-size map"]:
            poolmap.tab(spec, plan)
    with tabs[2]:
        if is_open["Latency vs rate"] and plan.best:
            rates = compute.sweep_rates(plan, spec["rate_rps"])
            sweeps = compute.get_sweeps(spec, plan, rates)
            goodputs = {s: b.goodput_rps for s, b in plan.best.items()}
            fig = compute.cached_figure(
                "rate", spec, lambda: charts.latency_vs_rate(sweeps, slo, goodputs, spec["rate_rps"])
            )
            st.plotly_chart(fig, key="chart_rate")
    with tabs[3]:
        if is_open["Roofline"] and plan.best:
            roofline = compute.cached_figure(
                "roofline", spec, lambda: charts.roofline(compute.get_rooflines(plan))
            )
            st.plotly_chart(roofline, key="chart_roofline")
            st.caption(
                "Prefill: the mean prompt at batch 1; decode: the batch at the rate (model.roofline_points)."
            )
    with tabs[4]:
        if is_open["Memory"] and evals:
            c1, c2 = st.columns([3, 2])
            memory = compute.cached_figure("memory", spec, lambda: charts.memory(evals))
            c1.plotly_chart(memory, key="chart_memory")
            weights = compute.cached_figure("weights", spec, lambda: charts.weight_duplication(evals))
            c2.plotly_chart(weights, key="chart_weights")
    with tabs[5]:
        if is_open["Show the math"]:
            panels.math_panel(plan, spec)
    with tabs[6]:
        if is_open["Verify by simulation"]:
            panels.simulation_panel(plan, evals, spec)
    with tabs[7]:
        if is_open["Download"]:
            with st.spinner("Searching the flip thresholds for the JSON..."):
                full = compute.get_plan(spec, thresholds=True)  # `pdplan plan --json`'s, thresholds included
            panels.downloads(full, evals, spec)
            recipes.download(plan)
    with tabs[8]:
        if is_open["Alternatives"]:
            alternatives.show(plan)
    with tabs[9]:
        if is_open["Frontier"] and plan.best:
            frontier.show(spec, plan)


def main() -> None:
    t0, cpu0 = time.perf_counter(), time.thread_time()
    raw = inputs.sidebar()
    st.title("pdplan: prefill and decode, together or apart?")
    spec, errors = inputs.parse(raw)
    if spec is None:
        _stop_with(errors)
    page = st.empty()
    with page.container():
        slots = _layout(spec)
    try:
        with slots.verdict, st.spinner("Planning..."):
            t_plan = time.perf_counter()
            plan = compute.get_plan(spec, thresholds=flips.searching())
            plan_s = time.perf_counter() - t_plan
        evals = compute.get_evaluations(spec, plan)
    except PdplanError as err:
        page.empty()  # no empty tabs under the error
        _stop_with([str(err)])
    with slots.verdict:
        panels.verdict_card(plan, evals, spec)
    compare.fill(slots.compare, plan)
    with slots.load:
        concurrency.section(spec)
    _tab_contents(slots, spec, plan, evals)
    schedule.section(slots.schedule, spec, plan)
    runs = st.session_state["_runs"] = st.session_state.get("_runs", 0) + 1
    wall, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
    st.caption(
        f"Computed in {wall:.2f} s ({cpu:.2f} s CPU; plan {plan_s:.2f} s; cached results are reused; "
        f"page run {runs})."
    )


guard.run_guarded(main)
