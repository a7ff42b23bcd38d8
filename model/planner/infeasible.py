"""Actionable infeasibility: when no configuration meets the targets (verdict "none"), the closest
configuration, the lowest TTFT and TPOT the budget reaches, the smallest budget or the loosest
targets that would work, and the constraint that binds.

Every latency here is the SLO percentile at a vanishing load (model.planner.goodput's probe rate):
no queue forms, so TTFT is the prefill (plus any KV transfer) and TPOT a batch-1 decode step (plus
rare stalls). The goodput search uses the same probe: a configuration that misses the targets there
misses them at every rate (DistServe's goodput, Zhong et al. OSDI 2024, sec. 2.1), so these are the
floors no rate can beat. At a vanishing load the latency of a configuration depends on its instance
layout, not on how many instances it has, so the smallest working budget is found by trying the
budgets that allow each new layout, smallest first (a short ladder, each rung one vectorised
evaluation).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from model.limits import MAX_PLAN_GPUS
from model.planner.goodput import PROBE_RPS_PER_GPU, goodput_rps
from model.planner.types import FlipThreshold, Infeasibility, PlanInputs
from model.serving.common import StyleResult, check_slo
from model.serving.enumeration import candidate_layouts
from model.serving.phase_tables import instance_tables
from model.serving.registry import style_of
from model.serving.style import CandidateSet
from model.units import format_bytes, format_count, format_rate, format_time
from model.workload.slo import SLO

# Loosened targets grow by this factor per try until a configuration meets them (at most _TRIES).
_LOOSEN = 1.1
_TRIES = 40


@dataclass(frozen=True)
class Search:
    """The planner's own enumeration, handed in by model.planner.plan (which this module cannot
    import): ``sets_for(inputs, gpus, keep)`` gives every style's candidates for a budget (those
    ``keep(config)`` accepts), and
    ``meets_target(inputs)`` whether some configuration serves the target rate within max_gpus."""

    sets_for: Callable[..., dict[str, CandidateSet]]
    meets_target: Callable[[PlanInputs], bool]


@dataclass(frozen=True, eq=False)
class _Probe:
    """Fitting candidates of each style evaluated at a vanishing load."""

    rows: tuple[tuple[str, CandidateSet, StyleResult], ...]

    def ok(self, slo: SLO) -> bool:
        """Whether some candidate meets ``slo`` at a vanishing load (the goodput search's first test)."""
        return any(bool(check_slo(r.latency, r.stable, slo).ok.any()) for _, _, r in self.rows)


def _probe(sets: dict[str, CandidateSet]) -> _Probe:
    rows = []
    for style, cands in sets.items():
        fits = cands.fits()
        if not fits.any():
            continue
        sub = cands.subset(fits)
        rows.append((style, sub, sub.evaluate(PROBE_RPS_PER_GPU * np.asarray(sub.n_gpus, dtype=float))))
    return _Probe(tuple(rows))


def _nice_up(x: float) -> float:
    """``x`` rounded up to two significant digits (1234 ms -> 1300 ms), never below ``x``."""
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    return math.ceil(x / step - 1e-9) * step


def _memory(inp: PlanInputs, budget: int) -> tuple[float | None, float | None, str]:
    """(needed, usable) bytes per GPU of the largest layout ``budget`` GPUs allow, and a sentence."""
    scn = inp.scenario
    layouts = candidate_layouts(scn.arch, inp.tp_options, budget, inp.node)
    if not layouts:
        return (
            None,
            None,
            (
                f"Layout binds: no TP option in {list(inp.tp_options)} fits {format_count(budget, 'GPU')} "
                f"and divides {scn.arch.label}'s {scn.arch.num_heads} attention heads."
            ),
        )
    par = max(layouts, key=lambda p: p.gpus)
    gpu = max((inp.gpu, inp.decode_gpu), key=lambda g: g.memory_bytes)
    t = instance_tables(scn, gpu, par, None, "colocated")
    fit = t.fit
    usable = float(np.max(fit.usable_bytes_per_gpu))
    needed = float(fit.weight_bytes_per_gpu + np.min(fit.workspace_bytes_per_gpu) + fit.reserve_bytes_per_gpu)
    where = (
        f"TP{par.tp} on {par.gpus} x {gpu.name} (the largest layout a budget of "
        f"{format_count(budget, 'GPU')} allows)"
    )
    if needed > usable:
        text = (
            f"Memory binds: with {where} the weights alone take {format_bytes(fit.weight_bytes_per_gpu)} "
            f"per GPU, and with the activation workspace and runtime reserve need {format_bytes(needed)} "
            f"per GPU against {format_bytes(usable)} usable ({scn.gpu_memory_utilization:.0%} of "
            f"{format_bytes(gpu.memory_bytes)}): {format_bytes(needed - usable)} short per GPU."
        )
    else:
        text = f"Memory binds: with {where}: {t.reason}."
    bigger = candidate_layouts(scn.arch, inp.tp_options, MAX_PLAN_GPUS, inp.node)
    fits = next((x for x in bigger if instance_tables(scn, gpu, x, None, "colocated").fits), None)
    if fits is not None and fits.gpus > par.gpus:
        text += f" One instance fits from TP{fits.tp} ({format_count(fits.gpus, 'GPU')})."
    return needed, usable, text


def _signature(config: Any) -> tuple:
    """What decides a configuration's latency at a vanishing load: its style, the GPU and layout of
    each phase, the link between them and the chunk budget (not how many instances it has)."""
    style = style_of(config)
    phases = tuple(sorted((k, g.name, repr(par)) for k, (g, par) in style.phase_deployments(config).items()))
    link = style.kv_link(config)
    return (style.name, phases, link.name if link else None, getattr(config, "chunk_tokens", None))


def _ladder(inp: PlanInputs, search: Search) -> tuple[int | None, int]:
    """The smallest budget above the current one that meets the targets at a vanishing load, trying
    each budget that allows a new layout (one instance, or one prefill plus one decode instance);
    each distinct layout is evaluated once, at the first budget that allows it."""
    cap = MAX_PLAN_GPUS
    sizes = sorted({p.gpus for p in candidate_layouts(inp.scenario.arch, inp.tp_options, cap, inp.node)})
    rungs = sorted(set(sizes) | {a + b for a in sizes for b in sizes})
    seen: set[tuple] = set()

    def new(config: Any) -> bool:
        sig = _signature(config)
        if sig in seen:
            return False
        seen.add(sig)
        return True

    for b in (r for r in rungs if inp.gpus < r <= cap):
        if _probe(search.sets_for(replace(inp, gpus=b), b, new)).ok(inp.scenario.slo):
            return b, cap
    return None, cap


def _more_gpus(inp: PlanInputs, search: Search, probe: _Probe, binding: str) -> tuple[int | None, int]:
    """Target-rate mode: a max_gpus that serves the rate. Under load, the rate over the best goodput
    per GPU of one instance of each layout (pooling instances only helps), then twice that; when a
    latency target binds, only a cap that allows larger layouts can help."""
    scn = inp.scenario
    sizes = [p.gpus for p in candidate_layouts(scn.arch, inp.tp_options, MAX_PLAN_GPUS, inp.node)]
    if binding == "load":
        per_gpu = max(
            float(np.max(goodput_rps(c, scn.slo) / np.asarray(c.n_gpus, dtype=float)))
            for _, c, _ in probe.rows
        )
        first = math.ceil(float(inp.target_rate_rps) / per_gpu) if per_gpu > 0 else MAX_PLAN_GPUS
        tries = [first, 2 * first]
    else:
        tries = [2 * max(sizes)] if sizes else []
    tried = inp.max_gpus
    for m in dict.fromkeys(min(max(t, inp.max_gpus + 1), MAX_PLAN_GPUS) for t in tries):
        if m <= inp.max_gpus:
            continue
        tried = m
        if search.meets_target(replace(inp, max_gpus=m)):
            return m, m
    return None, tried


def _targets(inp: PlanInputs, probe: _Probe, ttft_s: float, tpot_s: float, search: Search) -> tuple:
    """Targets (TTFT, TPOT) that the closest configuration's latencies suggest, loosened by 10% steps
    (only those it misses; both when it misses neither) until a plan would be feasible."""
    slo = inp.scenario.slo
    t1 = max(slo.ttft_s, _nice_up(ttft_s))
    t2 = max(slo.tpot_s, _nice_up(tpot_s))
    grow = (t1 > slo.ttft_s, t2 > slo.tpot_s)
    if not any(grow):
        grow = (True, True)
    for _ in range(_TRIES):
        if max(t1, t2) > 3600:  # the SLO's own range
            return None, None
        new = SLO(t1, t2, slo.percentile, slo.attainment)
        if probe.ok(new):
            if inp.gpus is None and not search.meets_target(
                replace(inp, scenario=replace(inp.scenario, slo=new))
            ):
                return None, None
            return t1, t2
        t1 = _nice_up(t1 * _LOOSEN) if grow[0] else t1
        t2 = _nice_up(t2 * _LOOSEN) if grow[1] else t2
    return None, None


def _floors(probe: _Probe, slo: SLO) -> tuple[tuple, tuple[float, float]]:
    """The closest configuration (style, label, TTFT, TPOT: the smallest violation ratio
    max(TTFT / target, TPOT / target)) and the lowest TTFT and TPOT, all at a vanishing load."""
    q = slo.percentile / 100.0
    best_ratio, closest = math.inf, (None, None, None, None)
    lo_ttft = lo_tpot = math.inf
    for style, cands, res in probe.rows:
        ttft = res.latency.ttft_percentile_s(q)
        tpot = res.latency.tpot_percentile_s(q)
        ratio = np.maximum(ttft / slo.ttft_s, tpot / slo.tpot_s)
        i = int(np.argmin(ratio))
        if ratio[i] < best_ratio:
            best_ratio = float(ratio[i])
            closest = (style, cands.configs[i].label(), float(ttft[i]), float(tpot[i]))
        lo_ttft, lo_tpot = min(lo_ttft, float(ttft.min())), min(lo_tpot, float(tpot.min()))
    return closest, (lo_ttft, lo_tpot)


def _binding(probe: _Probe, slo: SLO, lowest: tuple[float, float]) -> str:
    ttft_ok, tpot_ok = lowest[0] <= slo.ttft_s, lowest[1] <= slo.tpot_s
    if not ttft_ok and not tpot_ok:
        return "ttft+tpot"
    if not ttft_ok:
        return "ttft"
    if not tpot_ok:
        return "tpot"
    return "load" if probe.ok(slo) else "attainment"


def explain(inp: PlanInputs, search: Search, fitting: dict[str, CandidateSet] | None = None) -> Infeasibility:
    """Why no configuration meets the targets and what would. ``fitting``: the candidates the budget
    sweep evaluated (rebuilt when None; target-rate mode looks at one instance of each layout)."""
    scn, slo = inp.scenario, inp.scenario.slo
    p = f"p{slo.percentile:g}"
    if inp.gpus is not None:
        budget = inp.gpus
        where = format_count(budget, "GPU")
    else:
        sizes = [x.gpus for x in candidate_layouts(scn.arch, inp.tp_options, inp.max_gpus, inp.node)]
        budget = min(inp.max_gpus, 2 * max(sizes)) if sizes else inp.max_gpus
        where = f"up to {format_count(inp.max_gpus, 'GPU')}"
    if fitting is None or inp.gpus is None:
        fitting = search.sets_for(replace(inp, gpus=budget), budget)
    probe = _probe(fitting)
    lines: list[str] = []
    needed = usable = None
    closest: tuple = (None, None, None, None)
    lowest: tuple = (None, None)
    if not probe.rows:
        needed, usable, text = _memory(inp, budget)
        binding = "memory" if needed is not None else "layout"
        lines.append(text)
    else:
        closest, lowest = _floors(probe, slo)
        binding = _binding(probe, slo, lowest)
        lines += _binding_lines(inp, binding, where, lowest, closest)
        lines.append(
            f"Closest configuration: {closest[0]} {closest[1]}, {p} TTFT {format_time(closest[2])} "
            f"(target {format_time(slo.ttft_s)}) and {p} TPOT {format_time(closest[3])} "
            f"(target {format_time(slo.tpot_s)}) at a vanishing load."
        )
        lines.append(
            f"Lowest reachable on {where} at a vanishing load: {p} TTFT {format_time(lowest[0])}, "
            f"{p} TPOT {format_time(lowest[1])} (possibly from different configurations)."
        )
    if inp.gpus is not None:
        works, searched = _ladder(inp, search)
    else:
        works, searched = _more_gpus(inp, search, probe, binding)
    what = "budget" if inp.gpus is not None else "max_gpus (--max-gpus)"
    if works is not None:
        lines.append(f"A {what} of {format_count(works, 'GPU')} would meet the targets.")
    else:
        lines.append(
            f"No {what} up to {format_count(searched, 'GPU')} meets the targets "
            f"with TP options {list(inp.tp_options)}."
        )
    t1 = t2 = None
    if probe.rows and binding != "load":  # under load the targets already hold at a vanishing load
        t1, t2 = _targets(inp, probe, closest[2], closest[3], search)
        if t1 is not None:
            lines.append(
                f"Targets of {p} TTFT {format_time(t1)} and {p} TPOT {format_time(t2)} would work "
                f"on {where}" + (f" at {format_rate(inp.target_rate_rps)}." if inp.gpus is None else ".")
            )
    return Infeasibility(
        binding,
        slo.ttft_s,
        slo.tpot_s,
        slo.percentile,
        *closest,
        *lowest,
        works,
        searched,
        t1,
        t2,
        needed,
        usable,
        tuple(lines),
    )


def _binding_lines(inp: PlanInputs, binding: str, where: str, lowest: tuple, closest: tuple) -> list[str]:
    slo = inp.scenario.slo
    p = f"p{slo.percentile:g}"
    out = []
    if "ttft" in binding.split("+"):
        out.append(
            f"TTFT binds: even an idle prefill misses the target: the lowest {p} TTFT on {where} is "
            f"{format_time(lowest[0])} (the prompt's prefill with no queue) against the "
            f"{format_time(slo.ttft_s)} target."
        )
    if "tpot" in binding.split("+"):
        out.append(
            f"TPOT binds: even a batch-1 decode misses the target: the lowest {p} TPOT on {where} is "
            f"{format_time(lowest[1])} against the {format_time(slo.tpot_s)} target."
        )
    if binding == "attainment":
        out.append(
            f"The targets are reachable one at a time but not together: no configuration has "
            f"{slo.attainment:.0%} of requests meeting both at once, even at a vanishing load."
        )
    if binding == "load":
        out.append(
            f"Load binds: the targets hold at a vanishing load, but {format_rate(inp.target_rate_rps)} "
            f"needs more than {format_count(inp.max_gpus, 'GPU')} (max_gpus)."
        )
    return out


def none_reasons(inf: Infeasibility, first: str, infeasible: Counter) -> tuple[str, ...]:
    """The reasons of a "none" verdict: the headline, the infeasibility lines, then (secondary) the
    candidates that could not run."""
    out = [first, *inf.lines]
    if infeasible:
        top = "; ".join(f"{r} ({n})" for r, n in infeasible.most_common(2))
        out.append(f"Also, {sum(infeasible.values())} candidates could not run: {top}.")
    return tuple(out)


def flips(inp: PlanInputs, inf: Infeasibility) -> tuple[FlipThreshold, ...]:
    """ "What would flip it" for a "none" verdict: the budget and the targets that would work."""
    out = []
    if inf.gpus_that_work is not None:
        now = inp.gpus if inp.gpus is not None else inp.max_gpus
        name = "gpus" if inp.gpus is not None else "max_gpus"
        out.append(
            FlipThreshold(
                name,
                float(inf.gpus_that_work),
                "GPUs",
                float(now),
                f"a {'budget' if inp.gpus is not None else 'max_gpus'} of "
                f"{format_count(inf.gpus_that_work, 'GPU')} meets the targets "
                f"(now {format_count(now, 'GPU')})",
            )
        )
    p = f"p{inf.percentile:g}"
    for name, value, now in (
        ("ttft_slo", inf.ttft_that_works_s, inf.ttft_target_s),
        ("tpot_slo", inf.tpot_that_works_s, inf.tpot_target_s),
    ):
        if value is not None and value > now:
            label = name.split("_")[0].upper()
            out.append(
                FlipThreshold(
                    name,
                    value,
                    "s",
                    now,
                    f"a {p} {label} target of {format_time(value)} (now {format_time(now)}) works "
                    "with the other target as suggested",
                )
            )
    return tuple(out)
