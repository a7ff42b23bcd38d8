"""Which colocated style to recommend: the engines' default (chunked prefill) unless another
colocated style beats it by the verdict's margin.

Rule (issue 17, docs/planner.md "The verdict"): chunked prefill is what the engines run unless told
otherwise. vLLM's "Optimization and Tuning" guide, section "Chunked Prefill"
(docs.vllm.ai/en/latest/configuration/optimization.html): "In vLLM V1, chunked prefill is always
enabled by default". SGLang's "Server Arguments" (docs.sglang.ai, ``--chunked-prefill-size``: the
maximum tokens in a chunk, -1 disables chunked prefill) leaves it unset by default, and
``ServerArgs`` then sets a size from the GPU's memory (2048 to 16384 tokens,
python/sglang/srt/server_args.py), so chunking is on unless switched off. A model difference
smaller than the margin therefore does not move the recommendation off it.

The default is the colocated style with the lowest ``tie_order`` (colocated-chunked). Another
colocated style is recommended only when it is ahead of the default by at least the margin on the
verdict's measure: goodput on a GPU budget, GPUs needed or cost for a target rate (the measure and
margin of the family rule, ``model.planner.verdict.tie_band``). When it is ahead by less, the verdict
keeps the default and says so (``choice_words``). The family comparison (disaggregated against the
best colocated style) is unchanged; this rule only picks which colocated style is named.

One function, ``pick_colocated``, applies the rule to numbers; the plan (``colocated_choice``), the
concurrency plan, the robustness sampling and the validation grid all call it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from model.planner.types import BestConfig, PlanInputs
from model.serving.registry import get_style, styles


def style_lead(value: float, default: float, lower_is_better: bool = False) -> float:
    """How far a style with ``value`` is ahead of one with ``default``, as a ratio - 1:
    value / default - 1 when higher is better (goodput), default / value - 1 when lower is better
    (GPUs, cost). A free (0) resource is ahead of any priced one (inf), and level with another free one."""
    if lower_is_better:
        value, default = default, value
    if default <= 0:
        return 0.0 if value <= 0 else math.inf
    return value / default - 1.0


def default_colocated() -> str | None:
    """The engines' default colocated style: the registered colocated style with the lowest
    ``tie_order`` (colocated-chunked)."""
    ranked = sorted(styles("colocated"), key=lambda s: s.tie_order)
    return ranked[0].name if ranked else None


@dataclass(frozen=True)
class ColocatedPick:
    """The rule's answer: ``style`` recommended (None when no colocated style meets the SLOs);
    ``rival`` the best other colocated style and ``lead`` its advantage over the default
    (``style_lead``; negative when the default is ahead), both None unless the default and a rival
    are present; ``tie`` when the rival is ahead, but by less than the margin (the default stays)."""

    style: str | None
    rival: str | None = None
    lead: float | None = None
    tie: bool = False


def pick_colocated(
    values: Mapping[str, float], margin: float, lower_is_better: bool = False
) -> ColocatedPick:
    """The rule on numbers: ``values`` maps each style that meets the SLOs to the verdict's measure
    (styles of other families are ignored). The default is picked unless a rival leads it by at
    least ``margin``; without the default, the best present style (lowest ``tie_order`` on equal
    values)."""
    present = sorted(
        (n for n in values if get_style(n).family == "colocated"), key=lambda n: get_style(n).tie_order
    )
    if not present:
        return ColocatedPick(None)
    default = default_colocated()
    if default not in present:
        sign = -1.0 if lower_is_better else 1.0
        return ColocatedPick(max(present, key=lambda n: sign * values[n]))  # max keeps the first on ties
    others = [n for n in present if n != default]
    if not others:
        return ColocatedPick(default)
    leads = {n: style_lead(values[n], values[default], lower_is_better) for n in others}
    rival = max(others, key=lambda n: leads[n])
    lead = leads[rival]
    if lead >= margin:
        return ColocatedPick(rival, rival, lead)
    return ColocatedPick(default, rival, lead, tie=lead > 0.0)


def measure_values(inp: PlanInputs, best: Mapping[str, BestConfig]) -> tuple[dict[str, float], bool]:
    """({style: the verdict's measure}, lower is better): goodput on a budget; GPUs needed or
    cost per hour for a target rate (``inp.objective``)."""
    if inp.gpus is not None:
        return {n: b.goodput_rps for n, b in best.items()}, False
    if inp.objective == "gpus":
        return {n: float(b.n_gpus) for n, b in best.items()}, True
    return {n: b.cost_usd_per_hour for n, b in best.items()}, True


def colocated_choice(inp: PlanInputs, best: Mapping[str, BestConfig]) -> ColocatedPick:
    """``pick_colocated`` on the plan's best configurations and measure (``measure_values``)."""
    values, lower = measure_values(inp, best)
    return pick_colocated(values, inp.margin, lower)


def signed_pct(x: float, *near: float) -> str:
    """A signed whole percentage, with one decimal where the whole percent would round onto one of
    ``near`` (fractions: the margin, so +9.6% is not shown as +10% next to "needs +10%"; or 0)."""
    whole = round(abs(x) * 100)
    return f"{x:+.1%}" if any(whole == round(v * 100) for v in near) else f"{x:+.0%}"


def choice_words(inp: PlanInputs, pick: ColocatedPick, measure: str = "goodput") -> str | None:
    """The verdict's words on the colocated choice when a rival is ahead of the default (None
    otherwise), e.g. for a tie "colocated (no chunking) +5% goodput: a tie within the 10% margin;
    colocated with chunked prefill kept as the engines' default". ``measure`` names what was
    compared on a budget (the concurrency verdict compares users held within the SLOs)."""
    if pick.rival is None or pick.lead is None or pick.style is None or pick.lead <= 0:
        return None
    rival, default = get_style(pick.rival).title, get_style(default_colocated()).title
    lead = signed_pct(pick.lead, inp.margin, 0.0)
    if inp.gpus is not None:
        ahead = f"{rival} {lead} {measure}"
    elif inp.objective == "gpus":
        ahead = f"{rival} ahead on GPUs ({default} needs {lead} GPUs)"
    else:
        ahead = f"{rival} ahead on cost ({default} costs {lead})"
    if pick.tie:
        return f"{ahead}: a tie within the {inp.margin:.0%} margin; {default} kept as the engines' default"
    return (
        f"{ahead}: ahead by at least the {inp.margin:.0%} margin, so it is recommended over the "
        f"engines' default ({default})"
    )
