"""Panels of the app: the verdict card, the side-by-side table of the best configurations, the
downloads, "Show the math" and "Verify by simulation". Presentation only."""

from __future__ import annotations

import csv
import html
import io
import json
import math
from typing import Any

import streamlit as st

import model
from model.planner.redundancy import redundancy_warnings
from model.planner.summary import verdict_summary
from model.serving.registry import get_style, styles
from model.units import format_bytes, format_count, format_money, format_rate, format_si, format_time

from . import compute, flips
from .charts import STYLE_COLOURS
from .infeasible import infeasibility_panel
from .inputs import Spec, scenario_json
from .text import md

STYLES = compute.STYLES
# The words for each verdict: every registered style's title (model.serving.registry), or "none".
VERDICT_WORDS = {**{s.name: s.title for s in styles()}, "none": "no configuration meets the SLOs"}


def _safe(text: str) -> str:
    """Markdown-escaped and HTML-escaped (names may come from an uploaded file)."""
    return md(html.escape(text))


# ---------------------------------------------------------------------------------------------
# verdict


def verdict_card(plan: model.Plan, evals: dict[str, model.Evaluation], spec: Spec) -> None:
    """The verdict, its reasons and flip thresholds, and the best configuration of each style."""
    inp = plan.inputs
    where = format_count(inp.gpus, "GPU") if inp.gpus is not None else format_rate(inp.target_rate_rps)
    colour = STYLE_COLOURS.get(plan.verdict, "#777777")
    with st.container(border=True):
        # One element for the verdict, its line and the summary (each element sent after the plan
        # costs the browser a render: docs/app.md, "Responsiveness").
        st.markdown(
            f"## Verdict: {plan.verdict}\n\n"
            f"<span style='color:{colour};font-weight:600'>{VERDICT_WORDS[plan.verdict]}</span> "
            + (f"tie within margin ({plan.gain:+.0%}), " if plan.tie and plan.gain is not None else "")
            + f"for {_safe(inp.scenario.arch.name)} on {_safe(inp.gpu.name)}"
            + (f" + {_safe(inp.decode_gpu.name)}" if inp.decode_gpu != inp.gpu else "")
            + f", {_safe(inp.link.name)}, {where}, workload {_safe(inp.scenario.workload.name)}"
            + f"\n\n**{md(html.escape(verdict_summary(plan), quote=False))}**",
            help="From model.plan: the DESIGN.md rule (interference material, the margin beaten, the "
            "transfer path within the targets).",
            unsafe_allow_html=True,
        )
        risks = [
            w for s in STYLES if s in plan.best for w in redundancy_warnings(plan.best[s], carried_rate(spec))
        ]
        if risks:
            st.warning("Redundancy:\n" + "\n".join(f"- {md(w)}" for w in risks))
        left, right = st.columns([3, 2])
        why = "**Why**\n\n" + "\n".join(f"- {md(r)}" for r in plan.reasons)
        if plan.infeasible:
            n = sum(plan.infeasible.values())
            why += f"\n\n*{n} of {plan.candidates_evaluated} candidates cannot run (see the reasons).*"
        left.markdown(why)
        with right:
            flips.flip_box(spec, plan)
        side_by_side(plan, evals, spec)


def carried_rate(spec: Spec) -> float | None:
    """The rate the deployment must carry: the target rate, else the inspected rate (None at 0)."""
    if spec["target_rate_rps"] is not None:
        return spec["target_rate_rps"]
    return spec["rate_rps"] if spec["rate_rps"] > 0 else None


def _after_loss(b: model.BestConfig, rate: float | None) -> str:
    return ", ".join(
        f"{k} {format_rate(v)}" + (" ⚠ below the rate to carry" if rate is not None and v < rate else "")
        for k, v in b.failure.goodput_after_loss_rps.items()
    )


def _row(label: str, fn, styles: list[str]) -> str:
    cells = []
    for s in styles:
        try:
            cells.append(fn(s))
        except (KeyError, AttributeError, TypeError, ValueError):
            cells.append("–")
    return f"| {label} | " + " | ".join(cells) + " |"


def _by_length(ev: model.Evaluation) -> str:
    classes = getattr(ev, "by_prompt_length", ())
    if not classes:
        return "–"
    return "; ".join(
        f"{c.name} (≤{format_count(c.prompt_tokens_range[1], 'token')}): {format_time(c.ttft_p90_s)}, "
        f"{c.slo_attainment:.0%}"
        for c in classes
    )


def side_by_side(plan: model.Plan, evals: dict[str, model.Evaluation], spec: Spec) -> None:
    """A table with one column per style: configuration, goodput, cost and latency at the rate."""
    styles = [s for s in STYLES if s in plan.best]
    missing = [s for s in STYLES if s not in plan.best]
    if not styles:
        infeasibility_panel(plan)
        return
    b, ev = plan.best, evals
    rate = spec["rate_rps"]
    at = f"at {format_rate(rate)}" if rate > 0 else "at its goodput"
    if spec["target_rate_rps"] is not None:
        at = f"at the target {format_rate(rate)}"
    head = [("★ " if s == plan.verdict else "") + s for s in styles]
    lines = [
        "| | " + " | ".join(head) + " |",
        "|---|" + "---|" * len(styles),
        _row("configuration", lambda s: md(b[s].label), styles),
        _row(
            "GPUs / cost",
            lambda s: md(f"{format_count(b[s].n_gpus, 'GPU')} / {format_money(b[s].cost_usd_per_hour, 'h')}"),
            styles,
        ),
        _row(
            "**goodput**",
            lambda s: (
                f"**{format_rate(b[s].goodput_rps)}** ({format_rate(b[s].goodput_rps_per_gpu)} per GPU)"
            ),
            styles,
        ),
        _row("limited by", lambda s: md(b[s].binding_constraint), styles),
        _row(
            f"TTFT p50 / p90 / p99 {at}",
            lambda s: " / ".join(
                format_time(x) for x in (ev[s].ttft_s.p50, ev[s].ttft_s.p90, ev[s].ttft_s.p99)
            ),
            styles,
        ),
        _row(
            f"TPOT p50 / p90 / p99 {at}",
            lambda s: " / ".join(
                format_time(x) for x in (ev[s].tpot_s.p50, ev[s].tpot_s.p90, ev[s].tpot_s.p99)
            ),
            styles,
        ),
        _row(
            "SLO attainment",
            lambda s: f"{ev[s].slo_attainment:.1%}" + ("" if ev[s].stable else " (unstable)"),
            styles,
        ),
        _row("p90 TTFT / attainment by prompt length", lambda s: _by_length(ev[s]), styles),
        _row("output tokens", lambda s: format_rate(ev[s].output_tokens_per_s, "tok/s"), styles),
        _row(
            "energy per output token",
            lambda s: format_si(ev[s].energy_j_per_output_token, "J", small=True),
            styles,
        ),
        _row(
            "cost per million output tokens",
            lambda s: md(format_money(ev[s].cost_usd_per_million_output_tokens)),
            styles,
        ),
        _row(
            "weight copies",
            lambda s: f"{ev[s].weight_copies} ({format_bytes(ev[s].weight_bytes_total)})",
            styles,
        ),
        _row(
            "KV per request / link use",
            lambda s: (
                f"{format_bytes(ev[s].kv_bytes_per_request)} / {ev[s].link_utilisation:.0%}"
                if get_style(s).family == "disaggregated"
                else "–"
            ),
            styles,
        ),
        _row(
            "goodput after losing one instance",
            lambda s: _after_loss(b[s], carried_rate(spec)),
            styles,
        ),
    ]
    st.markdown("\n".join(lines))
    if missing:
        st.caption("No configuration meets the SLOs for: " + ", ".join(missing) + ".")


# ---------------------------------------------------------------------------------------------
# downloads


CSV_FIELDS = (
    "style",
    "verdict",
    "label",
    "n_gpus",
    "goodput_rps",
    "goodput_rps_per_gpu",
    "cost_usd_per_hour",
    "binding_constraint",
    "rate_rps",
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p90_s",
    "tpot_p99_s",
    "queue_wait_s",
    "prefill_s",
    "transfer_s",
    "link_wait_s",
    "admission_wait_s",
    "slo_attainment",
    "output_tokens_per_s",
    "energy_j_per_output_token",
    "cost_usd_per_million_output_tokens",
    "weight_copies",
    "weight_bytes_total",
    "kv_bytes_per_request",
    "link_utilisation",
)


def results_csv(plan: model.Plan, evals: dict[str, model.Evaluation]) -> str:
    """One row per style: the best configuration and its metrics at the inspected rate."""
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=CSV_FIELDS)
    w.writeheader()
    for style, b in plan.best.items():
        ev = evals[style]
        w.writerow(
            {
                "style": style,
                "verdict": plan.verdict,
                "label": b.label,
                "n_gpus": b.n_gpus,
                "goodput_rps": b.goodput_rps,
                "goodput_rps_per_gpu": b.goodput_rps_per_gpu,
                "cost_usd_per_hour": b.cost_usd_per_hour,
                "binding_constraint": b.binding_constraint,
                "rate_rps": ev.rate_rps,
                **{f"ttft_{p}_s": getattr(ev.ttft_s, p) for p in ("p50", "p90", "p99")},
                **{f"tpot_{p}_s": getattr(ev.tpot_s, p) for p in ("p50", "p90", "p99")},
                **{f"{k}_s": v for k, v in ev.ttft_components_s.items()},
                "slo_attainment": ev.slo_attainment,
                "output_tokens_per_s": ev.output_tokens_per_s,
                "energy_j_per_output_token": ev.energy_j_per_output_token,
                "cost_usd_per_million_output_tokens": ev.cost_usd_per_million_output_tokens,
                "weight_copies": ev.weight_copies,
                "weight_bytes_total": ev.weight_bytes_total,
                "kv_bytes_per_request": ev.kv_bytes_per_request,
                "link_utilisation": ev.link_utilisation,
            }
        )
    return out.getvalue()


def results_json(plan: model.Plan, evals: dict[str, model.Evaluation], spec: Spec) -> str:
    """``model.plan_dict`` plus the metrics at the inspected rate and the app's plain inputs."""
    from model.planner.report import evaluation_dict

    data = model.plan_dict(plan)
    data["evaluated_at"] = {s: evaluation_dict(ev) for s, ev in evals.items()}
    data["app_inputs"] = {k: v for k, v in spec.values.items() if k != "config_text"}
    return json.dumps(data, indent=1, default=str)


def downloads(plan: model.Plan, evals: dict[str, model.Evaluation], spec: Spec) -> None:
    st.markdown(
        "Results of this view, and a scenario file that restores every input (uploads included) "
        "through *Scenario file* in the sidebar. The URL holds the inputs too (not uploads)."
    )
    c1, c2, c3 = st.columns(3)
    c1.download_button("Results (CSV)", results_csv(plan, evals), "pdplan-results.csv", "text/csv")
    c2.download_button(
        "Results (JSON)", results_json(plan, evals, spec), "pdplan-results.json", "application/json"
    )
    c3.download_button("Scenario (JSON)", scenario_json(spec), "pdplan-scenario.json", "application/json")


# ---------------------------------------------------------------------------------------------
# show the math


MATH_CSS = ".katex-display { overflow-x: auto; overflow-y: hidden; padding: 2px 0 6px; }"


def math_panel(plan: model.Plan, spec: Spec) -> None:
    if not compute.symbolic_available():
        st.info("model.symbolic is not available in this installation, so the formulas cannot be shown.")
        return
    styles = [s for s in STYLES if s in plan.best]
    if not styles:
        st.info("No configuration to show the math for.")
        return
    default = plan.verdict if plan.verdict in styles else styles[0]
    style = st.radio("Configuration", styles, index=styles.index(default), horizontal=True, key="math_style")
    rate = spec["rate_rps"]
    st.caption(
        f"{plan.best[style].label}, "
        + (f"at {format_rate(rate)}" if rate > 0 else "at its goodput")
        + ". Numbers are SI (s, B, FLOP/s); formulas and sources from model/symbolic/."
    )
    with st.spinner("Rendering the formulas..."):
        sections = compute.get_math(spec, plan, style)
    # a long substituted formula scrolls inside its own box instead of overflowing the page
    st.html(f"<style>{MATH_CSS}</style>")
    for title, block in sections:
        st.markdown(f"#### {title}")
        st.markdown(block)


# ---------------------------------------------------------------------------------------------
# verify by simulation


def _share(x: float) -> str:
    return f"{x:.1%}" if math.isfinite(x) else format_si(x, "")


def _tokens(x: float) -> str:
    return format_rate(x, "tok/s")


# (label, analytical value, simulated value, formatter from model.units): times in seconds.
SIM_ROWS = (
    ("rate", lambda a: a.rate_rps, lambda s: s.offered_rate_rps, format_rate),
    ("TTFT p50", lambda a: a.ttft_s.p50, lambda s: s.ttft_s[0], format_time),
    ("TTFT p90", lambda a: a.ttft_s.p90, lambda s: s.ttft_s[1], format_time),
    ("TTFT p99", lambda a: a.ttft_s.p99, lambda s: s.ttft_s[2], format_time),
    ("TPOT p50", lambda a: a.tpot_s.p50, lambda s: s.tpot_s[0], format_time),
    ("TPOT p90", lambda a: a.tpot_s.p90, lambda s: s.tpot_s[1], format_time),
    ("TPOT p99", lambda a: a.tpot_s.p99, lambda s: s.tpot_s[2], format_time),
    ("mean queue wait", lambda a: a.queue_wait_s, lambda s: s.mean_queue_wait_s, format_time),
    ("mean prefill", lambda a: a.prefill_s, lambda s: s.mean_prefill_s, format_time),
    (
        "mean exposed transfer",
        lambda a: a.transfer_s + a.link_wait_s,
        lambda s: s.mean_transfer_exposed_s,
        format_time,
    ),
    (
        "mean decode admission wait",
        lambda a: a.admission_wait_s,
        lambda s: s.mean_decode_admission_wait_s,
        format_time,
    ),
    ("SLO attainment", lambda a: a.slo_attainment, lambda s: s.attainment, _share),
    ("output tokens", lambda a: a.output_tokens_per_s, lambda s: s.output_tokens_per_s, _tokens),
)


def _fmt(fmt: Any, x: float) -> str:
    if not isinstance(x, int | float):
        return "–"
    return fmt(0.0 if abs(x) < 1e-12 else float(x))


def simulation_verdict(plan: model.Plan, evals: dict[str, model.Evaluation], results: dict[str, Any]) -> None:
    """The line "the simulation confirms / contradicts the analytical verdict" (model.sim.check) for
    the recommended style, and the p99 TTFT flags of every simulated style."""
    from model.sim.check import check_verdict

    slo = plan.inputs.scenario.slo
    for style, (summary, gp) in results.items():
        ratio = gp.rate_rps / plan.best[style].goodput_rps if gp is not None else None
        check = check_verdict(
            style, summary, slo.attainment, evals[style].ttft_s.p99, plan.inputs.margin, ratio
        )
        if style == plan.verdict:
            (st.success if check.confirms else st.error)(md(check.text))
        for flag in check.flags:
            st.warning(md(f"{style}: {flag}."))


def simulation_panel(plan: model.Plan, evals: dict[str, model.Evaluation], spec: Spec) -> None:
    if not compute.simulator_available():
        st.info("The simulator (model.sim) is not available in this installation.")
        return
    styles = [s for s in STYLES if s in plan.best]
    if not styles:
        st.info("No configuration to simulate.")
        return
    st.markdown(
        "The discrete-event simulator (model/sim/simulate.py) replays requests through each style's best "
        "configuration, sharing only the phase-cost layer with the analytical model. "
        + (
            "Arrivals: the uploaded trace, time-scaled to the rate."
            if spec["trace_digest"]
            else "Arrivals: Poisson at the rate, lengths from the workload."
        )
    )
    c1, c2 = st.columns(2)
    n = c1.select_slider("Requests per run", [250, 500, 1000, 2000, 4000], value=1000, key="sim_n")
    seed = int(c2.number_input("Seed", min_value=0, max_value=10_000, value=0, step=1, key="sim_seed"))
    with_goodput = st.checkbox(
        "Also search the simulated goodput", key="sim_goodput", help="About 8 simulator runs per style."
    )
    request = (spec.key, spec["rate_rps"], n, seed, with_goodput)
    if st.button("Run simulation", type="primary", key="sim_run"):
        st.session_state["sim_request"] = request
    if st.session_state.get("sim_request") != request:
        st.caption("Press *Run simulation* (results stay until an input changes).")
        return
    steps = len(styles) * (2 if with_goodput else 1)
    bar = st.progress(0.0, text="Simulating...")
    results: dict[str, tuple[Any, Any]] = {}
    done = 0
    for style in styles:
        rate = evals[style].rate_rps

        def progress(arrived: int, total: int, base: int = done, style: str = style) -> None:
            bar.progress(min((base + arrived / max(total, 1)) / steps, 1.0), text=f"Simulating {style}...")

        try:
            summary = compute.run_simulation(spec, plan, style, rate, n, seed, progress)
            done += 1
            gp = None
            if with_goodput:
                bar.progress(done / steps, text=f"Searching the simulated goodput of {style}...")
                gp = compute.run_sim_goodput(spec, plan, style, n, seed)
                done += 1
        except model.PdplanError as err:
            st.error(f"{style}: {err}")
            continue
        results[style] = (summary, gp)
        bar.progress(done / steps, text=f"Simulated {style}")
    bar.progress(1.0, text="Simulation done")
    simulation_verdict(plan, evals, results)
    cols = st.columns(len(results) or 1)
    for col, (style, (summary, gp)) in zip(cols, results.items(), strict=False):
        a = evals[style]
        lines = [f"**{style}**", "", "| | analytical | simulated |", "|---|---|---|"]
        lines += [
            f"| {label} | {_fmt(fmt, fa(a))} | {_fmt(fmt, fs(summary))} |" for label, fa, fs, fmt in SIM_ROWS
        ]
        if gp is not None:
            lines.append(
                f"| goodput | {format_rate(plan.best[style].goodput_rps)} | {format_rate(gp.rate_rps)} |"
            )
        col.markdown("\n".join(lines))
        col.caption(
            f"{summary.measured} requests measured of {summary.requests}; "
            + ("stable" if summary.stable else f"unstable: {summary.stop_reason}")
        )
