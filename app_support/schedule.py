"""The "Load over a day" section: a rate curve (the diurnal preset or an uploaded CSV), the pool sizes
each style needs over it, and GPU-hours autoscaled vs static for the peak (``model.schedule``).
Presentation only: every number comes from model.fleet (docs/schedule.md)."""

from __future__ import annotations

import hashlib
from typing import Any

import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

import model
from model.errors import PdplanError
from model.fleet.schedule import schedule_rows

from . import uploads
from .charts import STYLE_COLOURS
from .compute import plan_arguments
from .inputs import Spec

MAX_CURVE_BYTES = 2_000_000  # a week at one-minute steps is ~150 kB


@st.cache_resource(max_entries=16, show_spinner=False)
def _schedule(key: str, curve_key: str, _spec: Spec, _curve: model.RateCurve) -> model.Schedule:
    (arch, gpu), kwargs = plan_arguments(_spec)
    kwargs.pop("gpus", None)
    kwargs.pop("target_rate_rps", None)
    return model.schedule(_curve, arch, gpu, **kwargs)


def _curve(peak_rps: float, trough: float, upload: Any) -> tuple[str, model.RateCurve]:
    if upload is None:
        return f"diurnal:{peak_rps}:{trough}", model.diurnal_curve(
            peak_rps, model.DiurnalShape(trough_fraction=trough)
        )
    uploads.check_size_only(upload.name, upload.size, MAX_CURVE_BYTES, "rate curve")
    data = upload.getvalue()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise uploads.UploadError(f"{upload.name}: not UTF-8 text (a CSV of time_s,rate_rps)") from None
    return "csv:" + hashlib.sha256(data).hexdigest(), model.load_curve_csv(upload.name, text)


def chart(result: model.Schedule) -> go.Figure:
    """The curve (top) and each style's provisioned GPUs (bottom) over time, in hours."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.4, 0.6])
    hours = result.start_s / 3600
    fig.add_trace(
        go.Scatter(x=hours, y=result.rate_rps, mode="lines", line_shape="hv", name="request rate"), 1, 1
    )
    for name, s in result.styles.items():
        colour = STYLE_COLOURS.get(name, "black")
        fig.add_trace(
            go.Scatter(x=hours, y=s.n_gpus, mode="lines", line_shape="hv", name=name, line={"color": colour}),
            2,
            1,
        )
        fig.add_hline(y=s.static_gpus, line_dash="dot", line_color=colour, opacity=0.5, row=2, col=1)
    fig.update_yaxes(title_text="req/s", row=1, col=1)
    fig.update_yaxes(title_text="GPUs provisioned", row=2, col=1)
    fig.update_xaxes(title_text="hours", row=2, col=1)
    fig.update_layout(height=480, margin={"l": 60, "r": 20, "t": 30, "b": 50})
    return fig


OPEN_KEY = "sched_open"
# The section's inputs kept while it is closed (Streamlit drops the state of a widget not drawn in a
# run; an uploaded curve cannot be kept this way and is read again after reopening).
_KEPT = ("sched_peak", "sched_trough", "sched_on")


def expander() -> Any:
    """The section's expander, drawn before the plan runs; opening it reruns the page and
    :func:`section` draws its content only while it is open."""
    title = "Load over a day: pool sizes over time, GPU-hours autoscaled vs static"
    return st.expander(title, key=OPEN_KEY, on_change="rerun")


def section(box: Any, spec: Spec, plan: model.Plan) -> None:
    """The expander's content while it is open; the schedule is computed only when its toggle is
    on (it plans at the peak). The default peak is the plan's target rate, or its verdict's goodput
    on a budget."""
    if not box.open:  # keep the inputs for its reopening (a widget not drawn loses its state)
        for key in _KEPT:
            if key in st.session_state:
                st.session_state[key] = st.session_state[key]
        return
    best = plan.best.get(plan.verdict)
    default_peak_rps = plan.inputs.target_rate_rps or (best.goodput_rps if best else 1.0)
    with box:
        c1, c2, c3 = st.columns(3)
        peak = c1.number_input(
            "Peak rate (req/s)", 0.01, 1e5, round(float(max(default_peak_rps, 0.01)), 2), key="sched_peak"
        )
        trough = c2.slider("Trough / peak (diurnal preset)", 0.0, 1.0, 0.3, 0.05, key="sched_trough")
        upload = c3.file_uploader("Or a curve CSV (time_s,rate_rps)", type=["csv"], key="sched_curve")
        if not st.toggle("Compute the schedule", key="sched_on"):
            st.caption(
                "Sizes every minute of the curve with the smallest pool carrying its rate, from one plan at "
                "the peak (docs/schedule.md)."
            )
            return
        try:
            curve_key, curve = _curve(peak, trough, upload)
            with st.spinner("Planning at the peak and sizing every minute..."):
                result = _schedule(spec.key, curve_key, spec, curve)
        except (PdplanError, uploads.UploadError) as err:
            st.error(str(err))
            return
        if not result.styles:
            st.warning("No style meets the SLOs at the curve's peak: " + "; ".join(result.skipped.values()))
            return
        st.plotly_chart(chart(result), key="chart_schedule")
        rows = schedule_rows(result)
        st.dataframe(
            [
                {
                    "style": r["style"],
                    "at the peak": r["peak_config"],
                    "GPU-hours": round(r["gpu_hours"], 1),
                    "static GPU-hours": round(r["static_gpu_hours"], 1),
                    "saved": f"{r['savings_fraction']:.0%}",
                    "USD": round(r["cost_usd"]),
                    "static USD": round(r["static_cost_usd"]),
                    "reaction (s)": round(r["reaction_s"]),
                }
                for r in rows
            ],
            hide_index=True,
        )
        st.caption(
            f"Fewest GPU-hours: **{result.fewest_gpu_hours}**. Dotted lines: static provisioning for the "
            "peak. Instances start a reaction time early (weights / node storage bandwidth + engine "
            "start-up) and stay 5 minutes after the need has gone."
        )
