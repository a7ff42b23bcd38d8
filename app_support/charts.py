"""Plotly figures of the app. Each takes results from ``model`` and only arranges them for display."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from model.serving.registry import styles
from model.units import format_bytes, format_count, format_rate, format_si, format_time

# One colour per registered style, in registration order (model.serving.registry); a style
# registered later takes the next colour of the palette.
_PALETTE = ("#636EFA", "#00A67E", "#EF553B", "#AB63FA", "#FFA15A", "#19D3F3")
STYLE_COLOURS = {s.name: _PALETTE[i % len(_PALETTE)] for i, s in enumerate(styles())}
TTFT_PARTS = (
    ("queue_wait", "queue wait", "#8C9CB5"),
    ("prefill", "prefill", "#4C78A8"),
    ("transfer", "KV transfer", "#F58518"),
    ("link_wait", "link wait", "#E45756"),
    ("admission_wait", "decode admission", "#B279A2"),
)
MEMORY_PARTS = (
    ("weights", "#4C78A8"),
    ("KV in use", "#F58518"),
    ("KV capacity free", "#FFD8A8"),
    ("workspace", "#54A24B"),
    ("reserve", "#B0B0B0"),
    ("not usable", "#E8E8E8"),
)
_LAYOUT = {"margin": {"l": 60, "r": 20, "t": 50, "b": 50}, "legend": {"orientation": "h", "y": -0.18}}


def _hover(style: str, metric: str, rates: np.ndarray, values: np.ndarray, fmt: Any) -> dict[str, Any]:
    """Hover text of one line of a rate chart: "colocated TTFT p90: 312 ms at 12.5 req/s"."""
    text = [f"{style} {metric}: {fmt(v)} at {format_rate(r)}" for r, v in zip(rates, values, strict=True)]
    return {"text": text, "hovertemplate": "%{text}<extra></extra>"}


def _finite(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return np.where(np.isfinite(x), x, np.nan)


def pool_map(
    m: dict[str, np.ndarray],
    tp_p: int,
    tp_d: int,
    best: tuple[int, int] | None,
    target_rps: float | None = None,
) -> go.Figure:
    """Heatmap of goodput per GPU over (decode instances, prefill instances).

    Cells that do not fit in memory get a grey square, cells that fit but meet the SLOs at no rate
    a red cross; the best disaggregated configuration a star; with ``target_rps``, the cells whose
    goodput reaches it a circle. The colour scale starts at 0 and is hidden when no cell has a
    goodput (a one-value scale would be meaningless).
    """
    n_p, n_d = m["n_prefill"], m["n_decode"]
    fig = go.Figure()
    if len(n_p) == 0:
        fig.update_layout(title="No (prefill, decode) split fits this budget", **_LAYOUT)
        return fig
    ys, xs = np.arange(1, n_p.max() + 1), np.arange(1, n_d.max() + 1)
    z = np.full((len(ys), len(xs)), np.nan)
    text = np.full(z.shape, "", dtype=object)
    for i in range(len(n_p)):
        r, c = n_p[i] - 1, n_d[i] - 1
        ok = bool(m["fits"][i]) and m["goodput_rps"][i] > 0
        z[r, c] = m["goodput_rps_per_gpu"][i] if ok else np.nan
        status = (
            "ok" if ok else ("does not fit in memory" if not m["fits"][i] else "misses the SLOs at any rate")
        )
        text[r, c] = (
            f"{n_p[i]} x TP{tp_p} prefill + {n_d[i]} x TP{tp_d} decode = "
            f"{format_count(int(m['n_gpus'][i]), 'GPU')}<br>goodput {format_rate(m['goodput_rps'][i])} "
            f"({format_rate(m['goodput_rps_per_gpu'][i])} per GPU): {status}"
        )
    valid = np.isfinite(z)
    fig.add_trace(
        go.Heatmap(
            x=xs,
            y=ys,
            z=z,
            text=text,
            hoverinfo="text",
            colorscale="Viridis",
            zmin=0.0,
            zmax=float(np.nanmax(z)) if valid.any() else 1.0,
            showscale=bool(valid.any()),
            colorbar={"title": "req/s per GPU"},
            hoverongaps=False,
        )
    )
    if target_rps is not None:
        reach = m["fits"].astype(bool) & (m["goodput_rps"] >= target_rps)
        if reach.any():
            fig.add_trace(
                go.Scatter(
                    x=n_d[reach],
                    y=n_p[reach],
                    mode="markers",
                    name=f"reaches {format_rate(target_rps)}",
                    hoverinfo="skip",
                    marker={"symbol": "circle-open", "size": 16, "color": "white", "line": {"width": 2}},
                )
            )
    nofit = ~m["fits"].astype(bool)
    fail = m["fits"].astype(bool) & ~(m["goodput_rps"] > 0)
    for mask, name, symbol, colour in (
        (nofit, "does not fit in memory", "square", "#9E9E9E"),
        (fail, "misses the SLOs", "x", "#D62728"),
    ):
        if mask.any():
            fig.add_trace(
                go.Scatter(
                    x=n_d[mask],
                    y=n_p[mask],
                    mode="markers",
                    name=name,
                    hoverinfo="skip",
                    marker={"symbol": symbol, "size": 14, "color": colour},
                )
            )
    if best is not None:
        fig.add_trace(
            go.Scatter(
                x=[best[1]],
                y=[best[0]],
                mode="markers",
                name="best disaggregated (planner's choice)",
                hoverinfo="skip",
                marker={
                    "symbol": "star",
                    "size": 20,
                    "color": "white",
                    "line": {"color": "black", "width": 2},
                },
            )
        )
    fig.update_layout(
        title=f"Goodput per GPU by pool sizes (prefill TP{tp_p}, decode TP{tp_d})",
        xaxis_title=f"decode instances (TP{tp_d} each)",
        yaxis_title=f"prefill instances (TP{tp_p} each)",
        xaxis={"dtick": 1},
        yaxis={"dtick": 1},
        **_LAYOUT,
    )
    return fig


def _vline_shape(x: float, line: dict[str, Any]) -> dict[str, Any]:
    """A vertical line at ``x`` across the plot, as ``fig.add_vline`` would add it."""
    return {"type": "line", "x0": x, "x1": x, "xref": "x", "y0": 0, "y1": 1, "yref": "y domain", "line": line}


def ttft_breakdown(evals: dict[str, Any], ttft_slo_s: float, percentile: float) -> go.Figure:
    """Mean TTFT of each style's best configuration split into its components, with the p90 TTFT."""
    styles = list(evals)
    fig = go.Figure()
    for key, label, colour in TTFT_PARTS:
        vals = [evals[s].ttft_components_s[key] * 1e3 for s in styles]
        fig.add_trace(
            go.Bar(
                y=styles,
                x=_finite(vals),
                name=label,
                orientation="h",
                marker_color=colour,
                customdata=[format_time(v / 1e3) for v in vals],
                hovertemplate="%{y}: " + label + " %{customdata}<extra></extra>",
            )
        )
    p90 = [evals[s].ttft_s.p90 * 1e3 for s in styles]
    fig.add_trace(
        go.Scatter(
            y=styles,
            x=_finite(p90),
            mode="markers",
            name="p90 TTFT",
            marker={"symbol": "diamond", "size": 12, "color": "black"},
            customdata=[format_time(v / 1e3) for v in p90],
            hovertemplate="%{y}: p90 TTFT %{customdata}<extra></extra>",
        )
    )
    # The target line as the layout entries fig.add_vline would write (it costs more than the rest
    # of the figure: docs/app.md, "Responsiveness").
    x_ms = ttft_slo_s * 1e3
    fig.update_layout(
        shapes=[_vline_shape(x_ms, {"dash": "dash", "color": "red"})],
        annotations=[
            {
                **{"text": f"TTFT target (p{percentile:g})", "showarrow": False},
                **{"x": x_ms, "xref": "x", "xanchor": "left", "y": 1, "yref": "y domain", "yanchor": "top"},
            }
        ],
        barmode="stack",
        title="TTFT components (means) of each style's best configuration",
        xaxis_title="ms",
        **_LAYOUT,
    )
    return fig


def latency_vs_rate(
    sweeps: dict[str, Any], slo: Any, goodputs: dict[str, float], inspect_rate: float
) -> go.Figure:
    """TTFT and TPOT percentiles and SLO attainment versus request rate, with the SLO lines."""
    q = min((50, 90, 99), key=lambda p: abs(p - slo.percentile))
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        subplot_titles=(f"TTFT p{q} (dotted: p99)", f"TPOT p{q} (dotted: p99)", "SLO attainment"),
    )
    for style, sw in sweeps.items():
        colour = STYLE_COLOURS.get(style, "black")
        for row, metric in ((1, "ttft"), (2, "tpot")):
            main = _finite(getattr(sw, f"{metric}_p{q}_s")) * 1e3
            tail = _finite(getattr(sw, f"{metric}_p99_s")) * 1e3
            fig.add_trace(
                go.Scatter(
                    x=sw.rate_rps,
                    y=main,
                    name=style,
                    legendgroup=style,
                    showlegend=row == 1,
                    line={"color": colour},
                    **_hover(style, f"{metric.upper()} p{q}", sw.rate_rps, main / 1e3, format_time),
                ),
                row=row,
                col=1,
            )
            fig.add_trace(
                go.Scatter(
                    x=sw.rate_rps,
                    y=tail,
                    name=f"{style} p99",
                    legendgroup=style,
                    showlegend=False,
                    line={"color": colour, "dash": "dot"},
                    **_hover(style, f"{metric.upper()} p99", sw.rate_rps, tail / 1e3, format_time),
                ),
                row=row,
                col=1,
            )
        att = np.where(sw.stable, _finite(sw.attainment), 0.0)
        fig.add_trace(
            go.Scatter(
                x=sw.rate_rps,
                y=att,
                name=style,
                legendgroup=style,
                showlegend=False,
                line={"color": colour},
                **_hover(style, "SLO attainment", sw.rate_rps, att, lambda a: f"{a:.1%}"),
            ),
            row=3,
            col=1,
        )
        if style in goodputs:
            fig.add_vline(x=goodputs[style], line_dash="dot", line_color=colour, opacity=0.6)
    fig.add_hline(
        y=slo.ttft_s * 1e3, line_dash="dash", line_color="red", row=1, col=1, annotation_text="TTFT target"
    )
    fig.add_hline(
        y=slo.tpot_s * 1e3, line_dash="dash", line_color="red", row=2, col=1, annotation_text="TPOT target"
    )
    fig.add_hline(
        y=slo.attainment,
        line_dash="dash",
        line_color="red",
        row=3,
        col=1,
        annotation_text="attainment target",
    )
    if inspect_rate > 0:
        fig.add_vline(x=inspect_rate, line_color="black", opacity=0.5)
    # Linear axes up to a few times the target: near saturation the queueing delay is unbounded.
    fig.update_yaxes(title_text="ms", range=[0, 3 * slo.ttft_s * 1e3], row=1, col=1)
    fig.update_yaxes(title_text="ms", range=[0, 3 * slo.tpot_s * 1e3], row=2, col=1)
    fig.update_yaxes(range=[0, 1.02], row=3, col=1)
    fig.update_xaxes(title_text="request rate (req/s); dotted verticals: goodput", row=3, col=1)
    fig.update_layout(height=760, title="Latency versus request rate", **_LAYOUT)
    fig.update_layout(legend={"y": -0.08})
    return fig


def roofline(points: dict[str, list[Any]]) -> go.Figure:
    """Roofline of each GPU kind (log-log) with the prefill and decode operating points."""
    fig = go.Figure()
    intensity = np.logspace(-1, 4.5, 200)
    seen: set[tuple[str, float, float]] = set()
    for pts in points.values():
        for p in pts:
            roof = (p.gpu, p.peak_flops_per_s, p.peak_bandwidth_bytes_per_s)
            if roof in seen:
                continue
            seen.add(roof)
            y = np.minimum(p.peak_flops_per_s, intensity * p.peak_bandwidth_bytes_per_s) / 1e12
            fig.add_trace(
                go.Scatter(
                    x=intensity,
                    y=y,
                    mode="lines",
                    name=f"{p.gpu} roofline",
                    line={"color": "#555", "width": 2},
                )
            )
    for style, pts in points.items():
        for p in pts:
            fig.add_trace(
                go.Scatter(
                    x=[p.intensity_flop_per_byte],
                    y=[p.achieved_flops_per_s / 1e12],
                    mode="markers",
                    name=f"{style} {p.phase}",
                    marker={
                        "symbol": "circle" if p.phase == "prefill" else "square",
                        "size": 13,
                        "color": STYLE_COLOURS.get(style, "black"),
                        "line": {"color": "black", "width": 1},
                    },
                    hovertemplate=(
                        f"{style} {p.phase} on {p.gpu}<br>%{{x:.3g}} FLOP/byte, "
                        f"{format_si(p.achieved_flops_per_s, 'FLOP/s')} ({p.bound}-bound)<extra></extra>"
                    ),
                )
            )
    fig.update_layout(
        title="Roofline: prefill (circles) and decode (squares) operating points, per GPU",
        # one labelled tick per decade: the default 2 and 5 minor labels read like data points
        xaxis={
            "type": "log",
            "title": "arithmetic intensity (FLOP / byte)",
            "dtick": 1,
            "minor": {"showgrid": True},
        },
        yaxis={"type": "log", "title": "achieved TFLOP/s per GPU", "dtick": 1, "minor": {"showgrid": True}},
        **_LAYOUT,
    )
    return fig


def memory(evals: dict[str, Any]) -> go.Figure:
    """Memory of one GPU in each pool of each style (GB): weights, KV in use and free, workspace."""
    cats, parts = [], {name: [] for name, _ in MEMORY_PARTS}
    for style, ev in evals.items():
        for pm in ev.memory:
            cats.append(f"{style}<br>{pm.pool}")
            used = pm.weight_bytes + pm.kv_capacity_bytes + pm.workspace_bytes + pm.reserve_bytes
            parts["weights"].append(pm.weight_bytes)
            parts["KV in use"].append(min(pm.kv_in_use_bytes, pm.kv_capacity_bytes))
            parts["KV capacity free"].append(max(pm.kv_capacity_bytes - pm.kv_in_use_bytes, 0.0))
            parts["workspace"].append(pm.workspace_bytes)
            parts["reserve"].append(pm.reserve_bytes)
            parts["not usable"].append(max(pm.gpu_memory_bytes - used, 0.0))
    fig = go.Figure()
    for name, colour in MEMORY_PARTS:
        fig.add_trace(
            go.Bar(
                x=cats,
                y=np.array(parts[name]) / 1e9,
                name=name,
                marker_color=colour,
                customdata=[format_bytes(b) for b in parts[name]],
                hovertemplate="%{x}: " + name + " %{customdata}<extra></extra>",
            )
        )
    fig.update_layout(barmode="stack", title="Memory per GPU in each pool", yaxis_title="GB", **_LAYOUT)
    return fig


def weight_duplication(evals: dict[str, Any]) -> go.Figure:
    """Weights held across the whole deployment (copies x one copy) per style."""
    styles = list(evals)
    fig = go.Figure(
        go.Bar(
            x=styles,
            y=[evals[s].weight_bytes_total / 1e9 for s in styles],
            text=[format_count(evals[s].weight_copies, "copy", "copies") for s in styles],
            customdata=[format_bytes(evals[s].weight_bytes_total) for s in styles],
            textposition="auto",
            marker_color=[STYLE_COLOURS.get(s, "black") for s in styles],
            hovertemplate="%{x}: %{customdata} of weights (%{text})<extra></extra>",
        )
    )
    fig.update_layout(title="Weight duplication: weights held across all GPUs", yaxis_title="GB", **_LAYOUT)
    return fig
