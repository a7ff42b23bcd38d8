"""Pin a scenario and compare: "Pin this scenario" keeps the current plan's summary in the session;
while one is pinned, it is shown beside the current scenario with the differences in GPUs, goodput,
cost per million output tokens, energy per output token and verdict (model.compare, the same table
as `pdplan compare`). The buttons are drawn before the plan runs (:func:`controls`), the table
after it (:func:`fill`). Presentation only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

import model
from model.planner.compare import comparison_rows, summarise
from model.units import format_count, format_rate

PINNED = "pinned_scenario"
HINT = "Pin this scenario, change inputs, and the two are shown side by side."


def _name(plan: model.Plan) -> str:
    """A short name of a scenario: model, GPU, size and workload."""
    inp = plan.inputs
    size = format_count(inp.gpus, "GPU") if inp.gpus is not None else format_rate(inp.target_rate_rps)
    return f"{inp.scenario.arch.name} on {size} x {inp.gpu.name}, {inp.scenario.workload.name}"


def _cell(text: str) -> str:
    for ch in ("\\", "$", "*", "_", "|"):
        text = text.replace(ch, "\\" + ch)
    return text


@dataclass(frozen=True)
class Controls:
    """The expander's buttons, drawn before the plan, and the container the table goes into."""

    body: Any
    pin: bool
    unpin: bool
    hint: bool  # the hint was drawn (nothing pinned, nothing clicked)


def controls() -> Controls:
    """The expander with the pin (and, while a scenario is pinned, unpin) button; needs no plan."""
    pinned = st.session_state.get(PINNED)
    box = st.expander("Compare with a pinned scenario", expanded=pinned is not None)
    c1, c2 = box.columns(2)
    hint = "Keep this plan to compare the next ones with"
    pin = c1.button("Pin this scenario", key="pin_scenario", help=hint)
    unpin = (pinned is not None or pin) and c2.button("Unpin", key="unpin_scenario")
    body = box.container()
    hint = pinned is None and not pin
    if hint:
        body.caption(HINT)
    return Controls(body, pin, bool(unpin), hint)


def fill(ctrl: Controls, plan: model.Plan) -> None:
    """Act on the buttons and draw the pinned-versus-current table (or the hint)."""
    pinned = st.session_state.get(PINNED)
    if ctrl.pin:
        pinned = st.session_state[PINNED] = summarise(plan, "pinned: " + _name(plan))
    if ctrl.unpin:
        pinned = st.session_state[PINNED] = None
    if ctrl.hint:
        return
    with ctrl.body:
        if pinned is None:
            st.caption(HINT)
            return
        comparison = model.compare(pinned, summarise(plan, "current: " + _name(plan)))
        rows, header = comparison_rows(comparison)
        header = ["", pinned.source, comparison.b.source, "current - pinned"]
        lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|---" * len(header) + "|"]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
        st.markdown("\n".join(lines))
