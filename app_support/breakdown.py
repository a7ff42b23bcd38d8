"""The *TTFT breakdown* tab, the view open after every Apply: each style's mean TTFT components as
one HTML table of stacked bars and numbers (a single markdown element, nothing for the browser to
lay out beyond text), with the interactive plotly chart behind a toggle.

A plotly chart in the open view cost the browser 0.3-0.45 s after every new plan (it remounts and
draws twice); the table draws in a few milliseconds (docs/app.md, "Responsiveness", session 8).
Presentation only: every number is from the plan's own evaluations (``Evaluation.ttft_components_s``,
``Evaluation.ttft_s``)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

import streamlit as st

from model.units import format_time

from . import charts, compute
from .inputs import Spec

CHART_KEY = "ttft_chart"  # the toggle that swaps the table for the plotly chart


def _finite(x: float) -> float:
    return x if math.isfinite(x) else math.nan


def _pct(x_s: float, scale_s: float) -> str:
    return f"{min(100 * x_s / scale_s, 100):.2f}%"


def _bar(parts_s: list[float], p90_s: float, target_s: float, scale_s: float) -> str:
    """One style's stacked bar (segments in TTFT_PARTS' colours), its p90 as a black tick and the
    target as a red dashed line, each as a percentage of the common ``scale_s``."""
    segs = "".join(
        f"<span title='{html.escape(label)}' style='display:inline-block;height:14px;"
        f"width:{_pct(v, scale_s)};background:{colour}'></span>"
        for v, (_, label, colour) in zip(parts_s, charts.TTFT_PARTS, strict=True)
        if math.isfinite(v) and v > 0
    )
    marks = "".join(
        f"<span style='position:absolute;left:{_pct(x, scale_s)};top:-3px;height:20px;"
        f"border-left:{line}'></span>"
        for x, line in ((p90_s, "3px solid black"), (target_s, "2px dashed red"))
        if math.isfinite(x)
    )
    return f"<div style='position:relative;width:100%;min-width:160px;white-space:nowrap'>{segs}{marks}</div>"


def _time(x_s: float) -> str:
    """A time cell: ``format_time``; below a nanosecond (an admission wait of 1e-204 s) "< 1 ns"."""
    if not math.isfinite(x_s):
        return "–"
    return "&lt; 1 ns" if 0 < x_s < 1e-9 else format_time(x_s)


def table_html(evals: Mapping[str, Any], ttft_slo_s: float, percentile: float) -> str:
    """The breakdown as one HTML table: per style a stacked bar of the mean TTFT components, then
    each component, the p90 TTFT (times through ``model.units.format_time``); the bars share one
    scale, 5% beyond the largest of the target, the stacked means and the p90s."""
    rows = {s: [_finite(ev.ttft_components_s[k]) for k, _, _ in charts.TTFT_PARTS] for s, ev in evals.items()}
    p90 = {s: _finite(ev.ttft_s.p90) for s, ev in evals.items()}
    ends = [
        x for s in rows for x in (sum(v for v in rows[s] if math.isfinite(v)), p90[s]) if math.isfinite(x)
    ]
    scale_s = max([ttft_slo_s, *ends]) * 1.05
    head = "".join(
        f"<th><span style='color:{colour}'>&#9632;</span> {html.escape(label)}</th>"
        for _, label, colour in charts.TTFT_PARTS
    )
    body = "".join(
        f"<tr><td>{html.escape(s)}</td>"
        f"<td style='width:35%'>{_bar(rows[s], p90[s], ttft_slo_s, scale_s)}</td>"
        + "".join(f"<td style='white-space:nowrap'>{_time(v)}</td>" for v in rows[s])
        + f"<td style='white-space:nowrap'><b>{_time(p90[s])}</b></td></tr>"
        for s in rows
    )
    return (
        "<table style='width:100%'><thead><tr><th>style</th><th>mean TTFT components</th>"
        f"{head}<th>p90 TTFT</th></tr></thead><tbody>{body}</tbody></table>\n\n"
        f"<small>Black tick: p90 TTFT; red dashed line: the TTFT target ({format_time(ttft_slo_s)}, "
        f"p{percentile:g}).</small>"
    )


def keep() -> None:
    """While the tab is closed, keep the toggle's value for its reopening (a widget not drawn in a
    run loses its state)."""
    if CHART_KEY in st.session_state:
        st.session_state[CHART_KEY] = st.session_state[CHART_KEY]


def tab(spec: Spec, evals: Mapping[str, Any], slo: Any) -> None:
    """The tab's content: the table (or, with the toggle on, the plotly chart) and its caption."""
    where = "at the inspected rate" if spec["rate_rps"] > 0 else "at each style's goodput"
    if st.toggle(
        "Interactive chart", key=CHART_KEY, help="Draw the breakdown as a plotly chart (slower to draw)."
    ):
        fig = compute.cached_figure(
            "ttft", spec, lambda: charts.ttft_breakdown(evals, slo.ttft_s, slo.percentile)
        )
        st.plotly_chart(fig, key="chart_ttft")
        st.caption(f"Bars: mean TTFT components {where}; diamonds: p90 TTFT; dashed line: the TTFT target.")
        return
    st.markdown(
        table_html(evals, slo.ttft_s, slo.percentile) + f" <small>Components are means {where}.</small>",
        unsafe_allow_html=True,
    )
