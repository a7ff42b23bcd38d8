"""The verdict: colocated, colocated-chunked or disaggregated, by the rule in DESIGN.md, with the
reasons (numbers) and the thresholds of link bandwidth, prompt length and rate that would flip it.

Rule (DESIGN.md, "When to recommend disaggregation"): recommend it only when (a) interference
between the phases is estimated and material (decode slowed by at least INTERFERENCE_MATERIAL in
the best colocated configuration at its goodput), (b) the best colocated configuration does not
already match it: disaggregated goodput must beat colocated by the margin at the same GPU budget
(or, for a target rate, need at least the margin fewer GPUs or less cost), and (c) the transfer
path keeps both targets (the disaggregated goodput is measured with the transfer in TTFT).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import numpy as np

from model.planner.colocated_rule import choice_words, colocated_choice, signed_pct, style_lead
from model.planner.goodput import config_goodput, goodput_rps
from model.planner.offload_effect import offload_reason, preemption_reason
from model.planner.prefix import prefix_reason
from model.planner.speculation_effect import speculation_reason
from model.planner.types import BestConfig, FlipThreshold, PlanInputs
from model.serving.evaluation import summarise
from model.serving.registry import build_set, style_of, styles
from model.serving.style import CandidateSet
from model.units import (
    format_bandwidth,
    format_bytes,
    format_count,
    format_money,
    format_rate,
    format_time,
)

# Decode slowdown caused by prefill (TPOT / pure decode step - 1) above which interference counts
# as material. DistServe (OSDI 2024, fig. 2) shows a single prefill in a decode batch slowing that
# step several-fold; 10% is the smallest effect the planner treats as worth a split.
INTERFERENCE_MATERIAL = 0.10
# Disaggregated candidates kept when searching flip thresholds (the best by current goodput).
THRESHOLD_TOP_K = 12
_BISECTIONS = 12


def interference(b: BestConfig) -> float:
    """Decode slowdown from prefill in a colocated configuration at its goodput (0 if disaggregated)."""
    ev = b.at_goodput
    if style_of(b.config).family == "disaggregated" or not ev.decode_step_s > 0:
        return 0.0
    return max(ev.tpot_mean_s / ev.decode_step_s - 1.0, 0.0)


def family_best(inp: PlanInputs, best: dict[str, BestConfig], family: str) -> BestConfig | None:
    """The best of the registered styles of one family (model.serving.registry): highest goodput on
    a budget, fewest GPUs or lowest cost for a target rate; ties go to the lower ``tie_order``
    (chunked before prefill-first colocated)."""
    ranked = sorted((s for s in styles(family) if s.name in best), key=lambda s: s.tie_order)
    cands = [best[s.name] for s in ranked]
    if not cands:
        return None
    if inp.gpus is not None:
        return max(cands, key=lambda b: b.goodput_rps)  # the first listed wins ties
    key = (lambda b: b.n_gpus) if inp.objective == "gpus" else (lambda b: b.cost_usd_per_hour)
    return min(cands, key=key)


def _colocated_best(inp: PlanInputs, best: dict[str, BestConfig]) -> BestConfig | None:
    return family_best(inp, best, "colocated")


def _disaggregated_goodputs(goodputs: dict) -> tuple | None:
    """(candidate set, goodputs) of the first disaggregated-family style swept, if any."""
    return next((goodputs[s.name] for s in styles("disaggregated") if s.name in goodputs), None)


def _gain(inp: PlanInputs, dis: BestConfig, col: BestConfig) -> float:
    """Disaggregation's advantage: goodput ratio - 1 (budget) or resource ratio - 1 (target rate)."""
    if inp.gpus is not None:
        return style_lead(dis.goodput_rps, col.goodput_rps)
    if inp.objective == "gpus":
        return style_lead(dis.n_gpus, col.n_gpus, lower_is_better=True)
    return style_lead(dis.cost_usd_per_hour, col.cost_usd_per_hour, lower_is_better=True)


def tie_band(inp: PlanInputs, best: dict[str, BestConfig]) -> tuple[bool, float | None]:
    """(tie, gain): ``gain`` is disaggregation's advantage (``_gain``: goodput ratio - 1 on a budget,
    resource ratio - 1 for a target rate; None unless both families meet the SLOs or when not
    finite); ``tie`` is True when neither family is ahead by the margin: gain < margin and
    colocated's own advantage 1/(1+gain) - 1 < margin. The verdict then stays colocated."""
    col = _colocated_best(inp, best)
    dis = family_best(inp, best, "disaggregated")
    if col is None or dis is None:
        return False, None
    gain = _gain(inp, dis, col)
    if not math.isfinite(gain):
        return False, None
    col_ahead = 1.0 / (1.0 + gain) - 1.0 if gain > -1.0 else math.inf
    return (gain < inp.margin and col_ahead < inp.margin), gain


def _style_line(b: BestConfig) -> str:
    ev = b.at_goodput
    return (
        f"Best {b.style}: {b.label} ({format_count(b.n_gpus, 'GPU')}, "
        f"{format_money(b.cost_usd_per_hour, 'h')}): goodput {format_rate(b.goodput_rps)} "
        f"({format_rate(b.goodput_rps_per_gpu)} per GPU) with p90 TTFT {format_time(ev.ttft_s.p90)} "
        f"and p90 TPOT {format_time(ev.tpot_s.p90)}; limited by the {b.binding_constraint}."
    )


def _why_no_disaggregation(inp: PlanInputs, goodputs: dict) -> str:
    """Explain, with numbers, why no disaggregated configuration meets the SLOs: the transfer and
    the duplicated weights of the feasible split that comes closest (at a very low rate)."""
    swept = _disaggregated_goodputs(goodputs)
    if swept is None or not swept[0].configs:
        return "no disaggregated split fits the budget and memory"
    cands = swept[0]
    res = cands.evaluate(np.full(len(cands.configs), 1e-3))
    slo = inp.scenario.slo
    i = int(np.argmax(res.latency.attainment(slo.ttft_s, slo.tpot_s)))
    ev = summarise(cands, res, i, inp.scenario, 1e-3)  # the evaluation already made, row i
    cfg = cands.configs[i]
    return (
        f"even the closest split ({cfg.label()}) reaches p90 TTFT {format_time(ev.ttft_s.p90)} against the "
        f"{format_time(slo.ttft_s)} target at a near-zero rate: each request's KV "
        f"({format_bytes(ev.kv_bytes_per_request)} on average) "
        f"crosses {cfg.link.name} in {format_time(ev.transfer_s)} on average, and the weights are held "
        f"{ev.weight_copies} times ({format_bytes(ev.weight_bytes_total)})"
    )


def decide(
    inp: PlanInputs,
    best: dict[str, BestConfig],
    infeasible: Counter,
    goodputs: dict | None = None,
    candidates: int = 1,
) -> tuple[str, list[str]]:
    """Apply the DESIGN.md rule; return the verdict and its reasons (sentences with numbers)."""
    reasons: list[str] = []
    where = format_count(inp.gpus, "GPU") if inp.gpus is not None else format_rate(inp.target_rate_rps)
    col = _colocated_best(inp, best)  # the family rule weighs disaggregation against the best colocated
    dis = family_best(inp, best, "disaggregated")
    pick = colocated_choice(inp, best)  # the colocated style named (model.planner.colocated_rule)
    named = pick.style
    if col is None and dis is None:
        reasons.append(f"No configuration meets the SLOs ({where}).")
        if inp.target_rate_rps is not None:
            reasons.append(
                f"The search stops at {format_count(inp.max_gpus, 'GPU')} (max_gpus / --max-gpus); "
                "a larger target rate may need more."
            )
        if infeasible:
            top = ", ".join(f"{r} ({n})" for r, n in infeasible.most_common(3))
            reasons.append(f"{sum(infeasible.values())} candidates cannot run: {top}.")
        elif not candidates:
            reasons.append(
                f"No candidate was enumerated: no TP option in {list(inp.tp_options)} divides the "
                f"{inp.scenario.arch.num_heads} attention heads and fits the GPU budget (or a node)."
            )
        else:
            reasons.append(
                "Every candidate that fits misses the TTFT or TPOT target even at a very low rate."
            )
        return "none", reasons
    if col is None:
        verdict = dis.style
        reasons.append(
            f"Only disaggregated serving meets the SLOs ({where}): no colocated configuration does."
        )
    elif dis is None:
        verdict = named
        why = _why_no_disaggregation(inp, goodputs or {})
        reasons.append(
            f"{named} is recommended: no disaggregated configuration meets the SLOs ({where}); {why}."
        )
    else:
        gain = _gain(inp, dis, col)
        intf = interference(col)
        material = intf >= INTERFERENCE_MATERIAL
        measure = (
            "goodput" if inp.gpus is not None else ("GPUs needed" if inp.objective == "gpus" else "cost")
        )
        if gain >= inp.margin and material:
            verdict = dis.style
            reasons.append(
                f"disaggregated is recommended: it beats the best colocated configuration on {measure} by "
                f"{gain:.0%} (margin {inp.margin:.0%}), and prefill interference in colocated serving is "
                f"material "
                f"(decode slowed {intf:.0%}, threshold {INTERFERENCE_MATERIAL:.0%})."
            )
        elif tie_band(inp, best)[0]:
            verdict = named
            reasons.append(
                f"tie within the {inp.margin:.0%} margin: disaggregated changes {measure} by "
                f"{signed_pct(gain, inp.margin)} (needs +{inp.margin:.0%}), so {named} is recommended "
                "(neither style is ahead by the margin)."
            )
        else:
            verdict = named
            why = (
                f"disaggregation changes {measure} by only {gain:+.0%} (needs +{inp.margin:.0%})"
                if gain < inp.margin
                else f"interference is not material (decode slowed {intf:.0%} < {INTERFERENCE_MATERIAL:.0%})"
            )
            reasons.append(f"{named} is recommended: {why}.")
    words = choice_words(inp, pick) if verdict == named else None
    if words:
        reasons.append(words[:1].upper() + words[1:] + ".")
    if col is not None and dis is not None:
        reasons.append(
            f"Interference in {col.label} at {format_rate(col.goodput_rps)}: "
            f"TPOT {format_time(col.at_goodput.tpot_mean_s)} "
            f"against {format_time(col.at_goodput.decode_step_s)} for decode alone ({intf:+.0%})."
        )
    for line in (
        speculation_reason(inp.scenario, best[verdict]),
        prefix_reason(inp.scenario, best[verdict]),
        offload_reason(inp.scenario, best[verdict]),
        preemption_reason(inp.scenario, best[verdict]),
    ):
        if line:
            reasons.append(line)
    for style in styles():
        if style.name in best:
            reasons.append(_style_line(best[style.name]))
    if dis is not None:
        ev = dis.at_goodput
        link = style_of(dis.config).kv_link(dis.config)
        copies_col = col.at_goodput.weight_copies if col is not None else 0
        reasons.append(
            f"Disaggregation costs: weights held {ev.weight_copies} times "
            f"({format_bytes(ev.weight_bytes_total)}) "
            f"against {copies_col} copies colocated; each request moves "
            f"{format_bytes(ev.kv_bytes_per_request)} of KV over "
            f"{link.name if link else 'the link'}, exposing {format_time(ev.transfer_s)} of TTFT "
            f"(link utilisation {ev.link_utilisation:.0%})."
        )
    if infeasible:
        top = "; ".join(f"{r} ({n})" for r, n in infeasible.most_common(2))
        reasons.append(f"{sum(infeasible.values())} candidates could not run: {top}.")
    return verdict, reasons


# ---------------------------------------------------------------------------------------------
# flip thresholds


def _scaled_links(configs: list, factor: float, link_name: str | None = None) -> list:
    """The configurations with their link's bandwidth scaled by ``factor``; with ``link_name``, only
    those that cross that link (splits paired inside a node keep their intra-node link)."""
    out = []
    for c in configs:
        if c.link.kind == "same-gpu" or (link_name is not None and c.link.name != link_name):
            out.append(c)
        else:
            out.append(
                replace(c, link=replace(c.link, bandwidth_bytes_per_s=c.link.bandwidth_bytes_per_s * factor))
            )
    return out


def _log_bisect(fn, lo: float, hi: float, steps: int = _BISECTIONS) -> float | None:
    """x in [lo, hi] (log scale) where the boolean fn flips, or None when it does not."""
    f_lo, f_hi = fn(lo), fn(hi)
    if f_lo == f_hi:
        return None
    a, b = np.log(lo), np.log(hi)
    for _ in range(steps):
        mid = 0.5 * (a + b)
        if fn(float(np.exp(mid))) == f_lo:
            a = mid
        else:
            b = mid
    return float(np.exp(0.5 * (a + b)))


def _top_disaggregated(goodputs: dict, k: int) -> list:
    swept = _disaggregated_goodputs(goodputs)
    if swept is None:
        return []
    cands, g = swept
    order = np.argsort(-g)[:k]
    return [cands.configs[i] for i in order if g[i] > 0] or [cands.configs[i] for i in order]


def _dis_goodput(scn, configs: list) -> float:
    if not configs:
        return 0.0
    return float(np.max(goodput_rps(build_set(scn, configs), scn.slo)))


def transfer_break_even(inp: PlanInputs, dis: BestConfig) -> FlipThreshold | None:
    """Closed form (model.symbolic.thresholds): the link line rate at which a p90-length prompt's exposed KV
    transfer just fits the TTFT slack left by queueing and prefill in the best disaggregated
    configuration at its goodput."""
    from model.symbolic.thresholds import break_even_bandwidth

    cfg = dis.config
    if style_of(cfg).kv_link(cfg) is None:
        return None
    scn = inp.scenario
    cands = build_set(scn, [cfg])
    prompts = scn.prompt_tokens
    i = int(np.argsort(prompts)[int(0.9 * (len(prompts) - 1))])
    prefill_s = float(cands.prefill_tables[0].prefill_s[i])
    ev = dis.at_goodput
    slack = scn.slo.ttft_s - ev.queue_wait_s - prefill_s - ev.admission_wait_s - ev.link_wait_s
    if not slack > 0:
        return None
    kv = float(scn.kv_bytes_per_request(prompts[i]))
    lanes = cfg.transfer_lanes
    th = break_even_bandwidth(
        kv,
        slack,
        cfg.link.latency_s,
        lanes,
        cfg.link.efficiency,
        layers=scn.arch.num_layers if cfg.layerwise else None,
        prefill_s=prefill_s if cfg.layerwise else None,
    )
    if not th.attainable:
        return None
    gbit = th.value * 8 / 1e9
    return FlipThreshold(
        "transfer_break_even",
        gbit,
        "Gbit/s per lane",
        cfg.link.bandwidth_bytes_per_s * 8 / 1e9,
        f"a p90 prompt's KV ({format_bytes(kv)}, {format_count(lanes, 'lane')}) fits the "
        f"{format_time(slack)} of TTFT left after queueing and prefill above "
        f"{format_bandwidth(gbit * 1e9 / 8)} per lane "
        f"({th.binding}; closed form)",
        method="closed-form",
    )


def _no_flip_words(always: bool, tie: bool, gain: float | None, margin: float) -> str:
    """How a link-speed search that finds no flip ends: disaggregation wins at every speed, never
    reaches the margin while within it now (a tie), or loses at every speed."""
    if always:
        return "disaggregation wins at all of them"
    if tie and gain is not None:
        return (
            f"disaggregation never reaches the +{margin:.0%} margin at any of them "
            f"(now {signed_pct(gain, margin)}: a tie within the margin)"
        )
    return "disaggregation loses at all of them"


def flip_thresholds(
    inp: PlanInputs,
    best: dict[str, BestConfig],
    goodputs: dict[str, tuple[CandidateSet, np.ndarray]],
    verdict: str,
) -> list[FlipThreshold]:
    """Link bandwidth, prompt-length scale and rate at which the verdict would change (numeric search
    over the best candidates; interference is held at its current estimate). These are flips of the
    family rule, weighed against the best colocated configuration as in ``decide``; which colocated
    style is named follows model.planner.colocated_rule."""
    out: list[FlipThreshold] = []
    col = _colocated_best(inp, best)
    dis = family_best(inp, best, "disaggregated")
    scn = inp.scenario
    need = 1.0 + inp.margin
    material = col is None or interference(col) >= INTERFERENCE_MATERIAL
    tie, gain = tie_band(inp, best)
    top = (
        _top_disaggregated(goodputs, THRESHOLD_TOP_K)
        if inp.gpus is not None
        else ([dis.config] if dis else [])
    )
    # The user's link between pools is the one whose speed is in question; splits paired inside a
    # node keep their intra-node link while it is scaled.
    networked = [c for c in top if c.link.kind != "same-gpu"]
    crosses = any(c.link.name == inp.link.name for c in networked)
    if networked and material and not crosses and inp.link.kind != "same-gpu":
        now = inp.link.bandwidth_bytes_per_s * 8 / 1e9
        out.append(
            FlipThreshold(
                "link_bandwidth",
                0.0,
                "Gbit/s",
                now,
                f"no speed of {inp.link.name} flips the verdict: the best splits pair prefill and decode "
                f"instances inside a node, so their KV stays on {networked[0].link.name}",
            )
        )
    if networked and material and crosses and inp.link.kind != "same-gpu":
        line_rate = inp.link.bandwidth_bytes_per_s
        if inp.gpus is not None:
            g_col = col.goodput_rps if col else 0.0

            def wins(f: float) -> bool:
                return _dis_goodput(scn, _scaled_links(networked, f, inp.link.name)) >= need * g_col
        else:
            target = float(inp.target_rate_rps)

            def wins(f: float) -> bool:
                return _dis_goodput(scn, _scaled_links(networked, f, inp.link.name)) >= target

        factor = _log_bisect(wins, 1e-4, 1e4)
        if factor is None:
            always = wins(1.0)
            now = line_rate * 8 / 1e9
            out.append(
                FlipThreshold(
                    "link_bandwidth",
                    0.0 if always else math.inf,
                    "Gbit/s",
                    now,
                    f"no link speed from {format_bandwidth(line_rate * 1e-4)} to "
                    f"{format_bandwidth(line_rate * 1e4)} flips the verdict: "
                    + _no_flip_words(always, tie, gain, inp.margin),
                )
            )
        else:
            value = line_rate * factor * 8 / 1e9
            side = "above" if wins(1e4) else "below"
            out.append(
                FlipThreshold(
                    "link_bandwidth",
                    value,
                    "Gbit/s",
                    line_rate * 8 / 1e9,
                    f"disaggregation {'wins' if inp.gpus is not None else 'holds the target rate'} {side} "
                    f"{format_bandwidth(line_rate * factor)} of link line rate "
                    f"(now {format_bandwidth(line_rate)})",
                )
            )
    if inp.gpus is not None and col is not None and top:

        def dis_wins(f: float) -> bool:
            s2 = replace(scn, prompt_scale=scn.prompt_scale * f)
            g_c = config_goodput(s2, col.config)
            g_d = _dis_goodput(s2, top[:4])
            return g_d >= need * g_c and g_d > 0

        longest = float(np.max(scn.prompt_tokens + scn.output_tokens))
        ceiling = scn.arch.max_context_tokens / longest if scn.arch.max_context_tokens else 8.0
        factor = _log_bisect(dis_wins, 1.0 / 8.0, float(np.clip(ceiling, 1.0, 8.0)), steps=8)
        if factor is not None:
            mean_prompt = scn.mean_prompt_tokens
            side = "shorter" if dis_wins(1.0 / 8.0) else "longer"
            out.append(
                FlipThreshold(
                    "prompt_tokens",
                    mean_prompt * factor,
                    "tokens (mean prompt)",
                    mean_prompt,
                    f"disaggregation wins for mean prompts {side} than about {mean_prompt * factor:,.0f} "
                    f"tokens (now {mean_prompt:,.0f}; all lengths scaled together)",
                )
            )
    if dis is not None:
        closed = transfer_break_even(inp, dis)
        if closed is not None:
            out.append(closed)
    if inp.gpus is not None and col is not None and dis is not None:
        lo_style, hi_style = sorted([col, dis], key=lambda b: b.goodput_rps)
        out.append(
            FlipThreshold(
                "rate",
                lo_style.goodput_rps,
                "req/s",
                lo_style.goodput_rps,
                f"both styles meet the SLOs up to {format_rate(lo_style.goodput_rps)} on "
                f"{format_count(inp.gpus, 'GPU')}; "
                f"above it only "
                f"{hi_style.style} does (up to {format_rate(hi_style.goodput_rps)})",
            )
        )
    return out
