"""The "Frontier" view: output tokens/s per GPU against tokens/s per user for each style
(``model.frontier``), with the SLO region shaded. Presentation only: the points, the Pareto
frontier and the SLO boundary all come from model.planner.frontier."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

import model
from model.units import format_count, format_time

from . import compute
from .alternatives import markdown_table
from .charts import _LAYOUT, STYLE_COLOURS
from .inputs import Spec

# Largest GPU budget the view spans: each style's configurations are evaluated at 14 rates each
# (about 9 s for Llama-3.1-70B on 16 H100s); per-GPU figures change little with the budget.
MAX_FRONTIER_GPUS = 16


def budget_of(plan: model.Plan) -> int:
    """The GPU budget of the view: the plan's budget, or (for a target rate) the largest best
    configuration, capped at MAX_FRONTIER_GPUS."""
    gpus = plan.inputs.gpus or max([b.n_gpus for b in plan.best.values()] + [1])
    return int(min(gpus, MAX_FRONTIER_GPUS))


@st.cache_resource(max_entries=16, show_spinner=False)
def _frontier(key: str, _spec: Spec, gpus: int) -> model.Frontier:
    args, kwargs = compute.plan_arguments(_spec)
    kwargs.pop("target_rate_rps", None)
    kwargs.pop("objective", None)
    kwargs.pop("margin", None)
    kwargs["gpus"] = gpus
    return model.frontier(*args, **kwargs)


def chart(f: model.Frontier) -> go.Figure:
    """Every evaluated point (faint), each style's frontier (line), the SLO region (shaded)."""
    fig = go.Figure()
    top_x = max([float(np.max(s.output_tokens_per_s_per_user)) for s in f.styles.values()] + [1.0])
    fig.add_vrect(
        x0=f.min_tokens_per_s_per_user,
        x1=max(top_x, f.min_tokens_per_s_per_user) * 1.05,
        fillcolor="green",
        opacity=0.08,
        line_width=0,
        annotation_text=f"TPOT p{f.percentile:g} <= {format_time(f.tpot_slo_s)}",
        annotation_position="top left",
    )
    for name, s in f.styles.items():
        colour = STYLE_COLOURS.get(name, "black")
        labels = np.array([s.labels[int(i)] for i in s.config_index], dtype=object)
        fig.add_trace(
            go.Scatter(
                x=s.output_tokens_per_s_per_user,
                y=s.output_tokens_per_s_per_gpu,
                mode="markers",
                marker={"color": colour, "size": 4, "opacity": 0.25},
                name=f"{name} (all points)",
                legendgroup=name,
                showlegend=False,
                text=labels,
                hovertemplate="%{text}<br>%{x:.3g} tok/s/user, %{y:.4g} tok/s/GPU<extra></extra>",
            )
        )
        o = s.frontier_order()
        fig.add_trace(
            go.Scatter(
                x=s.output_tokens_per_s_per_user[o],
                y=s.output_tokens_per_s_per_gpu[o],
                mode="lines+markers",
                line={"color": colour},
                marker={"symbol": np.where(s.meets_slo[o], "circle", "circle-open"), "size": 7},
                name=name,
                legendgroup=name,
                text=labels[o],
                customdata=s.rate_rps[o],
                hovertemplate="%{text}<br>%{customdata:.3g} req/s: %{x:.3g} tok/s/user, "
                "%{y:.4g} tok/s/GPU<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="output tokens/s per user (1 / TPOT)")
    fig.update_yaxes(title_text="output tokens/s per GPU")
    fig.update_layout(height=520, title=f"Throughput versus interactivity ({f.gpus} GPUs)", **_LAYOUT)
    return fig


def rows(f: model.Frontier) -> list[dict[str, Any]]:
    """The frontier points of every style as table rows."""
    out = []
    for name, s in f.styles.items():
        for i in s.frontier_order():
            out.append(
                {
                    "style": name,
                    "configuration": s.labels[int(s.config_index[i])],
                    "rate (req/s)": round(float(s.rate_rps[i]), 4),
                    "tok/s per user": round(float(s.output_tokens_per_s_per_user[i]), 2),
                    "tok/s per GPU": round(float(s.output_tokens_per_s_per_gpu[i]), 1),
                    "meets SLO": bool(s.meets_slo[i]),
                }
            )
    return out


def show(spec: Spec, plan: model.Plan) -> None:
    """The frontier chart and its table for the plan's inputs."""
    gpus = budget_of(plan)
    with st.spinner("Evaluating every configuration over a range of rates..."):
        f = _frontier(spec.key, spec, gpus)
    if not f.styles:
        st.info("No configuration fits in memory at this budget, so there is no frontier to draw.")
        return
    st.plotly_chart(chart(f), key="chart_frontier")
    note = f"Every configuration of each style on {format_count(gpus, 'GPU')}"
    if (plan.inputs.gpus or gpus) > gpus:
        note += f" (the budget is cut to {MAX_FRONTIER_GPUS} GPUs to keep the view interactive)"
    st.caption(
        note + ", at 2% to 98% of its stability limit. Lines: each style's Pareto frontier (filled "
        "markers meet the whole SLO, TTFT included); shaded: the TPOT target's region, tokens/s per "
        f"user >= {f.min_tokens_per_s_per_user:.3g}."
    )
    with st.expander("Frontier points"):
        st.markdown(markdown_table(rows(f)))
