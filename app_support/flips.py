"""The verdict card's "What would flip it" box: the plan's flip thresholds (link bandwidth, prompt
length, rate), searched only when asked for.

The searches (model.planner.verdict.flip_thresholds: log bisections of the disaggregated goodput
over link speed and prompt scale) cost one to three times the rest of a plan, so an Apply plans
without them (compute.get_plan) and this box offers a toggle that runs them (the same call with
``thresholds=True``, cached per inputs). The toggle is drawn in a fragment: switching it on reruns
only this box, not the page; while it is on, later Applies plan with the thresholds at once
(:func:`searching`), so an Apply still costs one plan. With the
verdict "none" the plan already carries what would make a configuration work (model.planner.
infeasible), which is shown at once. Presentation only.
"""

from __future__ import annotations

import streamlit as st

import model

from . import compute
from .inputs import Spec
from .text import md

SEARCH_KEY = "flips"
SEARCH_LABEL = "Search what would flip it"
SEARCH_HELP = (
    "Searches link speeds from 1/10,000 to 10,000 times the chosen link and prompts from 1/8 to 8 "
    "times their length for the point where the verdict changes (model.plan's flip thresholds). "
    "It costs one to three times the plan itself, so it runs only while this is on."
)
NOT_SEARCHED = "Not searched yet: switch on the search above (it stays on for later Applies)."
NONE_FOUND = (
    "No flip threshold in the searched range (link bandwidth 1/10,000 to 10,000 times, prompts 1/8 "
    "to 8 times)."
)


def thresholds_list(flips: tuple[model.FlipThreshold, ...] | list) -> None:
    """The flip thresholds as a bullet list, or the sentence saying none was found."""
    if flips:
        st.markdown("\n".join(f"- {md(f.text)}" for f in flips))
    else:
        st.caption(NONE_FOUND)


def searching() -> bool:
    """Whether the search is switched on (the page then plans with the thresholds at once)."""
    return bool(st.session_state.get(SEARCH_KEY, False))


@st.fragment
def flip_box(spec: Spec, plan: model.Plan) -> None:
    """ "What would flip it": the infeasibility flips at once; otherwise the searched thresholds
    while the search toggle is on."""
    st.markdown("**What would flip it**")
    if plan.verdict == "none":
        thresholds_list(plan.flip_thresholds)  # the targets or budget that would work (no search)
        return
    if not st.toggle(SEARCH_LABEL, key=SEARCH_KEY, help=SEARCH_HELP):
        st.caption(NOT_SEARCHED)
        return
    with st.spinner("Searching link speeds and prompt lengths..."):
        full = compute.get_plan(spec, thresholds=True)  # the page's own plan when it was searching
    thresholds_list(full.flip_thresholds)
