"""The "Alternatives" view: the plan's N best configurations overall and per style (model.plan's
``Plan.alternatives``, ranked by the planner's own objective). Presentation only."""

from __future__ import annotations

from typing import Any

import streamlit as st

import model
from model.units import format_money, format_rate

from .panels import md

RANKED_BY = {
    "goodput": "highest goodput (ties: fewer GPUs, then lower cost)",
    "gpus": "fewest GPUs meeting the SLOs at the target rate (ties: higher goodput)",
    "cost": "lowest cost meeting the SLOs at the target rate (ties: higher goodput)",
}


def rows(alts: tuple[model.Alternative, ...]) -> list[dict[str, Any]]:
    """One table row per alternative, best first (numbers formatted with their units)."""
    return [
        {
            "#": k + 1,
            "style": a.style,
            "configuration": a.label,
            "GPUs": a.n_gpus,
            "goodput": format_rate(a.goodput_rps),
            "goodput per GPU": format_rate(a.goodput_rps_per_gpu),
            "cost": format_money(a.cost_usd_per_hour, "h"),
            "cost per M output tokens": format_money(a.cost_usd_per_million_output_tokens),
            "binding": a.binding,
            "binding constraint": a.binding_constraint,
        }
        for k, a in enumerate(alts)
    ]


def show(plan: model.Plan) -> None:
    """The overall top-N table and one per style."""
    alts = plan.alternatives
    if alts is None or not alts.overall:
        st.info("No configuration meets the SLOs, so there are no alternatives to rank.")
        return
    st.caption(
        f"The {alts.top} best configurations, ranked by {RANKED_BY.get(alts.ranked_by, alts.ranked_by)}: "
        "the planner's own objective, so each style's first row is its best in the verdict card. "
        "Binding: what fails first just above each configuration's goodput."
    )
    st.markdown("**Overall**\n\n" + markdown_table(rows(alts.overall)))
    for style, lst in alts.by_style.items():
        st.markdown(f"**{md(style)}**\n\n" + markdown_table(rows(lst)))


def markdown_table(table: list[dict[str, Any]]) -> str:
    """Rows as a markdown table (the app's tables are markdown: they render with the page)."""
    if not table:
        return ""
    head = list(table[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(md(str(r[k])) for k in head) + " |" for r in table]
    return "\n".join(lines)
