"""The "Pool-size map" tab: goodput of every (prefill instances, decode instances) split within the
GPU budget for one pair of TP degrees (model.pool_map), or a plain sentence when no split fits.

Only splits within the budget are drawn; the TP choices offered are those whose smallest split
(one instance of each) fits. Presentation only: the splits and their goodputs come from the model.
"""

from __future__ import annotations

import streamlit as st

import model
from model.units import format_count, format_rate

from . import charts, compute
from .inputs import Spec


def tp_choices(
    tp_options: tuple[int, ...] | list[int], budget: int, extra: tuple[int, ...] = ()
) -> list[int]:
    """TP degrees a pool can have so that one instance of it plus the smallest other instance fit
    in ``budget`` GPUs (empty when not even two of the smallest fit)."""
    tps = sorted(set(tp_options) | set(extra))
    smallest = min(tps)
    return [tp for tp in tps if tp + smallest <= budget]


def no_split_text(tp_p: int, tp_d: int, budget: int) -> str:
    """The sentence shown instead of a map when no split of these TPs fits the budget."""
    need = tp_p + tp_d
    return (
        f"No disaggregated split fits {format_count(budget, 'GPU')}: the smallest, 1 x TP{tp_p} prefill "
        f"+ 1 x TP{tp_d} decode, needs {format_count(need, 'GPU')}."
    )


def caption(plan: model.Plan, tp_p: int, tp_d: int, mapped: int, budget: int, best_shown: bool) -> str:
    """What the map shows: its budget, what colour, star and markers mean."""
    note = f"Every split with n_p x TP{tp_p} + n_d x TP{tp_d} <= {format_count(mapped, 'GPU')}"
    if mapped < budget:
        note += (
            f" (the budget of {format_count(budget, 'GPU')} is cut to {mapped} to keep the map interactive)"
        )
    note += (
        ". Colour: goodput per GPU (DistServe's definition), so a small split can be brighter than a "
        "bigger one that serves more requests in total. Grey squares do not fit in memory; red crosses "
        "fit but miss the SLOs at every rate."
    )
    if best_shown:
        star = (
            "the highest total goodput within the budget"
            if plan.inputs.gpus is not None
            else "the fewest GPUs (or lowest cost) that reach the target rate"
        )
        note += f" The star is the planner's best disaggregated configuration: {star}."
    if plan.inputs.target_rate_rps is not None:
        note += f" Circled cells reach the target rate of {format_rate(plan.inputs.target_rate_rps)}."
    return note


def tab(spec: Spec, plan: model.Plan) -> None:
    """Draw the pool-size map tab."""
    tp_p, tp_d, budget = compute.map_setup(plan)
    tps = tp_choices(plan.inputs.tp_options, budget, (tp_p, tp_d))
    if not tps:
        smallest = min(plan.inputs.tp_options)
        st.info(no_split_text(smallest, smallest, budget))
        return
    tp_p = tp_p if tp_p in tps else tps[0]
    tp_d = tp_d if tp_d in tps else tps[0]
    c1, c2 = st.columns(2)
    tp_p = c1.selectbox("Prefill TP", tps, index=tps.index(tp_p), key=f"map_tp_p_{tp_p}_{budget}")
    tp_d = c2.selectbox("Decode TP", tps, index=tps.index(tp_d), key=f"map_tp_d_{tp_d}_{budget}")
    mapped = compute.map_budget(tp_p, tp_d, budget)
    if mapped < tp_p + tp_d:
        st.info(no_split_text(tp_p, tp_d, budget))
        return
    with st.spinner("Evaluating every pool split..."):
        m = compute.get_pool_map(spec, plan, tp_p, tp_d, mapped)
    dis = compute.best_of_family(plan, "disaggregated")
    best = None
    if dis is not None and (dis.config.prefill_tp, dis.config.decode_tp) == (tp_p, tp_d):
        best = (dis.config.n_prefill, dis.config.n_decode)
    fig = charts.pool_map(m, tp_p, tp_d, best, plan.inputs.target_rate_rps)
    st.plotly_chart(fig, key="chart_pool_map")
    st.caption(caption(plan, tp_p, tp_d, mapped, budget, best is not None))
