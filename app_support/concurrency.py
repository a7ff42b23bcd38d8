"""The "Load: rate | concurrency" choice: with *concurrency*, the page adds the fixed-concurrency
(closed-loop) plan on the same inputs (``model.plan_concurrency``): for each style the configuration
holding the most users within the SLOs, its throughput and latencies at N users, and the verdict on
that capacity. Presentation only: every number comes from model.planner.concurrency
(docs/planner.md, "Fixed concurrency")."""

from __future__ import annotations

from typing import Any

import streamlit as st

import model
from model.errors import PdplanError
from model.limits import MAX_CONCURRENCY
from model.units import format_rate, format_time

from .compute import plan_arguments
from .inputs import Spec

LOAD_MODES = ("rate", "concurrency")


@st.cache_resource(max_entries=16, show_spinner=False)
def _plan(key: str, users: int, think_s: float, think: str, _spec: Spec) -> model.ConcurrencyPlan:
    (arch, gpu), kwargs = plan_arguments(_spec)
    return model.plan_concurrency(arch, gpu, concurrency=model.Concurrency(users, think_s, think), **kwargs)


def rows(result: model.ConcurrencyPlan) -> list[dict[str, Any]]:
    """One table row per style: capacity, and throughput and p90 latencies at the asked users."""
    out = []
    for b in result.best.values():
        p = b.at_users
        out.append(
            {
                "style": b.style,
                "configuration": b.label,
                "max users within SLO": f"{'>= ' if b.capped else ''}{b.max_concurrency}",
                f"req/s at {p.users}": format_rate(p.throughput_rps),
                "output tok/s": round(p.output_tokens_per_s),
                "TTFT p90": format_time(p.ttft_s.p90),
                "TPOT p90": format_time(p.tpot_s.p90),
                "meets SLO": "yes" if p.meets_slo else "no",
            }
        )
    return out


def choice() -> Any:
    """The load choice (drawn before the plan runs); returns the container :func:`section` fills."""
    st.radio(
        "Load",
        LOAD_MODES,
        horizontal=True,
        key="load_mode",
        help="rate: open loop (the plan above); "
        "concurrency: N users, each sending its next request when the last one completes",
    )
    return st.container()


def section(spec: Spec) -> None:
    """With the load choice "concurrency": its inputs and the closed-loop plan (budget mode only)."""
    if st.session_state.get("load_mode") != "concurrency":
        return
    if spec["gpus"] is None:
        st.info("Fixed concurrency plans a GPU budget: choose *GPU budget* as the plan size.")
        return
    c1, c2, c3 = st.columns(3)
    users = int(c1.number_input("Concurrent users", 1, MAX_CONCURRENCY, 64, key="conc_users"))
    think_s = float(c2.number_input("Mean think time (s)", 0.0, 3600.0, 0.0, key="conc_think"))
    think = c3.selectbox("Think-time distribution", ("exponential", "fixed"), key="conc_dist")
    try:
        with st.spinner("Solving the closed loop for every candidate..."):
            result = _plan(spec.key, users, think_s, think, spec)
    except PdplanError as err:
        st.error(str(err))
        return
    tie = " (tie within the margin)" if result.tie else ""
    st.markdown(f"**Fixed concurrency, {result.concurrency.label()}: {result.verdict}**{tie}")
    for reason in result.reasons[:1]:
        st.caption(reason)
    st.dataframe(rows(result), hide_index=True, key="conc_table")
    st.caption(
        "Capacity: the most users whose TTFT and TPOT pass the SLO test; throughput = users / (think + "
        "response), by mean value analysis over the open-loop model (docs/planner.md)."
    )
