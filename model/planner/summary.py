"""The verdict in one line: the decision, the margin rule and the tie band, with disaggregation's
gain (``Plan.gain``) placed against them.

Reads only the plan (``Plan.verdict``, ``Plan.tie``, ``Plan.gain``, ``PlanInputs.margin``), whose
numbers come from ``model.planner.verdict`` (``tie_band``, ``decide``) and
``model.planner.colocated_rule`` (``Plan.colocated_note``); no new modelling. The tie
band is the one ``tie_band`` applies: a gain g is a tie when g < margin and colocated's own
advantage 1 / (1 + g) - 1 < margin, i.e. 1 / (1 + margin) - 1 < g < margin.
"""

from __future__ import annotations

from model.planner.colocated_rule import signed_pct
from model.planner.types import Plan
from model.serving.registry import get_style


def tie_band_limits(margin: float) -> tuple[float, float]:
    """(lowest, highest) gain of the tie band: (1 / (1 + margin) - 1, margin); both exclusive."""
    return 1.0 / (1.0 + margin) - 1.0, margin


def gain_words(plan: Plan) -> str:
    """Disaggregation's gain in words: its goodput against colocated's on a budget; for a target
    rate, the GPUs (or cost) colocated needs against disaggregated (``verdict._gain``)."""
    pct = signed_pct(plan.gain, plan.inputs.margin)
    if plan.inputs.gpus is not None:
        return f"disaggregated has {pct} goodput against the best colocated"
    if plan.inputs.objective == "gpus":
        return f"the best colocated needs {pct} GPUs against disaggregated"
    return f"the best colocated costs {pct} against disaggregated"


def verdict_summary(plan: Plan) -> str:
    """One line: the verdict, disaggregation's gain, the margin rule and the tie band, then the
    colocated choice's words when another colocated style is ahead of the one named
    (``Plan.colocated_note``, model.planner.colocated_rule)."""
    line = _family_summary(plan)
    note = plan.colocated_note
    return f"{line} {note[:1].upper()}{note[1:]}." if note else line


def _family_summary(plan: Plan) -> str:
    m = plan.inputs.margin
    lo, hi = tie_band_limits(m)
    band = f"a difference between {lo:+.1%} and +{hi:.0%} is a tie, which stays colocated"
    rule = f"disaggregate only when it is ahead by at least {m:.0%}; {band}"
    if plan.verdict == "none":
        return "No configuration meets the SLOs on these inputs (see Why)."
    title = get_style(plan.verdict).title
    title = title[:1].upper() + title[1:]
    family = get_style(plan.verdict).family
    if plan.gain is None:
        other = "colocated" if family == "disaggregated" else "disaggregated"
        return f"{title}: no {other} configuration meets the SLOs, so there is nothing to weigh ({rule})."
    gain = gain_words(plan)
    if family == "disaggregated":
        return f"{title}: {gain}, at or above the {m:.0%} margin (rule: {rule})."
    if plan.tie:
        return f"Tie, so {title.lower()}: {gain}, inside the tie band (rule: {rule})."
    if plan.gain >= m:
        return (
            f"{title}: {gain}, above the {m:.0%} margin, but prefill interference is not material, "
            f"so the rule keeps colocated serving (rule: {rule}, and interference must be material)."
        )
    return f"{title}: {gain}, so colocated is ahead by more than the {m:.0%} margin (rule: {rule})."
