"""The "no configuration meets the targets" panel: what binds, how close the closest configuration
came, the lowest latencies on the budget, and the budget or targets that would work. Every number
comes from the plan's Infeasibility (model.planner.infeasible); presentation only."""

from __future__ import annotations

import streamlit as st

import model
from model.units import format_bytes, format_count, format_time

# The binding constraint in words (model.planner.types.Infeasibility.binding).
BINDING_WORDS = {
    "memory": "memory: the model does not fit any layout the budget allows",
    "layout": "layout: no TP option fits the budget and divides the attention heads",
    "ttft": "TTFT: even an idle prefill misses the target",
    "tpot": "TPOT: even a batch-1 decode misses the target",
    "ttft+tpot": "TTFT and TPOT: both miss their targets even at a vanishing load",
    "attainment": "attainment: the targets hold one at a time but not together",
    "load": "load: the targets hold at a vanishing load but not at the target rate",
}


def _md(text: str) -> str:
    """Escape what Streamlit markdown would read as LaTeX, emphasis or a table cell border."""
    for ch in ("\\", "$", "*", "_", "|"):
        text = text.replace(ch, "\\" + ch)
    return text


def _t(x: float | None) -> str:
    return "–" if x is None else format_time(x)


def infeasibility_panel(plan: model.Plan) -> None:
    """Draw the panel for a "none" verdict (nothing when the plan has no Infeasibility)."""
    inf = plan.infeasibility
    if inf is None:
        st.warning("No style has a configuration that meets the SLOs; see the reasons above.")
        return
    p = f"p{inf.percentile:g}"
    with st.container(border=True, key="infeasibility"):
        words = BINDING_WORDS.get(inf.binding, inf.binding)
        st.markdown(f"**No configuration meets the targets. Binding: {words}.**")
        cells = [("target", inf.ttft_target_s, inf.tpot_target_s)]
        if inf.closest_label is not None:
            closest = _md(f"closest: {inf.closest_style} {inf.closest_label}")
            cells.append((closest, inf.closest_ttft_s, inf.closest_tpot_s))
            cells.append(("lowest reachable (vanishing load)", inf.lowest_ttft_s, inf.lowest_tpot_s))
        if inf.ttft_that_works_s is not None:
            cells.append(("targets that would work", inf.ttft_that_works_s, inf.tpot_that_works_s))
        rows = [f"| | {p} TTFT | {p} TPOT |", "|---|---|---|"]
        rows += [f"| {label} | {_t(a)} | {_t(b)} |" for label, a, b in cells]
        st.markdown("\n".join(rows))
        notes = []
        if inf.memory_needed_bytes_per_gpu is not None and inf.memory_available_bytes_per_gpu is not None:
            notes.append(
                f"Memory per GPU: needs {format_bytes(inf.memory_needed_bytes_per_gpu)}, has "
                f"{format_bytes(inf.memory_available_bytes_per_gpu)} usable."
            )
        if inf.gpus_that_work is not None:
            what = "budget" if plan.inputs.gpus is not None else "max GPUs"
            notes.append(f"A {what} of {format_count(inf.gpus_that_work, 'GPU')} would meet the targets.")
        else:
            notes.append(f"No budget up to {format_count(inf.gpus_searched_to, 'GPU')} meets the targets.")
        st.caption(" ".join(notes))
