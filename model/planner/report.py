"""Plain-data views of plans and evaluations for the front ends (CLI JSON, web app, notebooks):
JSON-ready dictionaries, latency-versus-rate sweeps and roofline operating points. No new
modelling here: every number comes from the planner, the serving model or the roofline layer.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from model.physics.steps import decode_step_cost, prefill_cost
from model.planner.types import Alternative, Alternatives, BestConfig, Plan
from model.serving.common import StyleResult
from model.serving.phase_tables import deployment
from model.serving.registry import build_set, style_of
from model.workload.scenario import Scenario


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.repr}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    if isinstance(obj, np.generic):
        return _plain(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


def evaluation_dict(ev: Any) -> dict[str, Any]:
    """An Evaluation as JSON-ready data (its configuration left out; non-finite floats as strings)."""
    out = {k: v for k, v in _plain(ev).items() if k != "config"}
    # only where pre-emption shows (>= 1 in 1,000 requests; the planner's tails give ~1e-12 elsewhere)
    if getattr(ev, "preemptions_per_request", 0.0) >= 1e-3:
        out["preemptions_per_request"] = float(ev.preemptions_per_request)
    return out


def config_dict(config: Any) -> dict[str, Any]:
    """A configuration as names and numbers (profiles by name); its style decides the fields, and the
    key "architecture" holds the style name (kept from earlier output)."""
    return style_of(config).config_dict(config)


def best_dict(b: BestConfig) -> dict[str, Any]:
    """One style's best configuration: the JSON ``best`` entry of `pdplan plan`."""
    ev = b.at_goodput
    out = {
        **config_dict(b.config),
        "label": b.label,
        "goodput_rps": b.goodput_rps,
        "goodput_rps_per_gpu": b.goodput_rps_per_gpu,
        "cost_usd_per_hour": b.cost_usd_per_hour,
        "binding_constraint": b.binding_constraint,
        "ttft_p50_s": ev.ttft_s.p50,
        "ttft_p90_s": ev.ttft_s.p90,
        "ttft_p99_s": ev.ttft_s.p99,
        "tpot_p50_s": ev.tpot_s.p50,
        "tpot_p90_s": ev.tpot_s.p90,
        "tpot_p99_s": ev.tpot_s.p99,
        "ttft_components_s": ev.ttft_components_s,
        "energy_j_per_output_token": ev.energy_j_per_output_token,
        "cost_usd_per_million_output_tokens": ev.cost_usd_per_million_output_tokens,
    }
    out["at_goodput"] = evaluation_dict(ev)
    if b.failure is not None:
        out["failure"] = _plain(b.failure)
    return _plain(out)


def alternative_dict(a: Alternative) -> dict[str, Any]:
    """One ranked alternative: its configuration, goodput, GPUs, cost and binding constraint."""
    return _plain(
        {
            **config_dict(a.config),
            "style": a.style,
            "label": a.label,
            "goodput_rps": a.goodput_rps,
            "goodput_rps_per_gpu": a.goodput_rps_per_gpu,
            "cost_usd_per_hour": a.cost_usd_per_hour,
            "cost_usd_per_million_output_tokens": a.cost_usd_per_million_output_tokens,
            "binding": a.binding,
            "binding_constraint": a.binding_constraint,
        }
    )


def alternatives_dict(alts: Alternatives | None) -> dict[str, Any] | None:
    """The plan's top-N lists (the JSON ``alternatives`` entry of `pdplan plan`)."""
    if alts is None:
        return None
    return {
        "top": alts.top,
        "ranked_by": alts.ranked_by,
        "overall": [alternative_dict(a) for a in alts.overall],
        "by_style": {s: [alternative_dict(a) for a in lst] for s, lst in alts.by_style.items()},
    }


def plan_dict(plan: Plan) -> dict[str, Any]:
    """The whole plan as JSON-ready data (the `pdplan plan --json` schema); the key "infeasibility"
    (model.planner.infeasible) is present only when the verdict is "none"."""
    inp = plan.inputs
    scn = inp.scenario
    extra = {} if plan.infeasibility is None else {"infeasibility": plan.infeasibility}
    return _plain(
        {
            "verdict": plan.verdict,
            "tie": plan.tie,
            "disaggregated_gain": plan.gain,
            "colocated_tie": plan.colocated_tie,
            "colocated_lead": plan.colocated_lead,
            "colocated_note": plan.colocated_note,
            "reasons": list(plan.reasons),
            "best": {style: best_dict(b) for style, b in plan.best.items()},
            "alternatives": alternatives_dict(plan.alternatives),
            "flip_thresholds": [dataclasses.asdict(f) for f in plan.flip_thresholds],
            "infeasible": plan.infeasible,
            "candidates_evaluated": plan.candidates_evaluated,
            "mode": plan.mode,
            "inputs": {
                "model": scn.arch.name,
                "gpu": inp.gpu.name,
                "decode_gpu": inp.decode_gpu.name,
                "link": inp.link.name,
                "node": inp.node.name if inp.node else None,
                "gpus": inp.gpus,
                "target_rate_rps": inp.target_rate_rps,
                "workload": scn.workload.name,
                "dtype": scn.weight_dtype,
                "kv_dtype": scn.kv_dtype_resolved,
                "ttft_slo_s": scn.slo.ttft_s,
                "tpot_slo_s": scn.slo.tpot_s,
                "percentile": scn.slo.percentile,
                "attainment": scn.slo.attainment,
                "margin": inp.margin,
                "objective": inp.objective,
                "mean_prompt_tokens": scn.mean_prompt_tokens,
                "mean_output_tokens": scn.mean_output_tokens,
            },
            **extra,
        }
    )


@dataclasses.dataclass(frozen=True)
class RateSweep:
    """Latency of one configuration over a range of request rates (arrays over rates)."""

    rate_rps: np.ndarray
    ttft_p50_s: np.ndarray
    ttft_p90_s: np.ndarray
    ttft_p99_s: np.ndarray
    tpot_p50_s: np.ndarray
    tpot_p90_s: np.ndarray
    tpot_p99_s: np.ndarray
    attainment: np.ndarray
    stable: np.ndarray


def rate_sweep(config: Any, scenario: Scenario, rates_rps: np.ndarray) -> RateSweep:
    """TTFT/TPOT percentiles and SLO attainment of ``config`` at each rate (one vectorised pass)."""
    rates = np.asarray(rates_rps, dtype=float)
    cands = build_set(scenario, [config] * len(rates))
    res: StyleResult = cands.evaluate(rates)
    lat = res.latency
    slo = scenario.slo
    return RateSweep(
        rates,
        *(lat.ttft_percentile_s(q) for q in (0.5, 0.9, 0.99)),
        *(lat.tpot_percentile_s(q) for q in (0.5, 0.9, 0.99)),
        lat.attainment(slo.ttft_s, slo.tpot_s),
        res.stable,
    )


@dataclasses.dataclass(frozen=True)
class RooflinePoint:
    """One operating point on a GPU's roofline: arithmetic intensity and achieved FLOP/s."""

    phase: str
    gpu: str
    intensity_flop_per_byte: float
    achieved_flops_per_s: float
    peak_flops_per_s: float
    peak_bandwidth_bytes_per_s: float
    bound: str


def roofline_points(b: BestConfig, scenario: Scenario) -> list[RooflinePoint]:
    """Prefill (mean prompt, batch 1) and decode (batch at goodput) operating points of a best config."""
    deps = style_of(b.config).phase_deployments(b.config)
    out = []
    for phase, (gpu, parallel) in deps.items():
        dep = deployment(scenario, gpu, parallel)
        if phase == "prefill":
            cost = prefill_cost(dep, max(scenario.mean_prompt_tokens, 1.0))
        else:
            cost = decode_step_cost(dep, max(b.at_goodput.decode_batch, 1.0), scenario.decode_context_tokens)
        flops_gpu = float(cost.flops)
        out.append(
            RooflinePoint(
                phase,
                gpu.name,
                float(cost.arithmetic_intensity),
                flops_gpu / float(cost.time_s),
                dep.peak_flops_per_s,
                gpu.memory_bandwidth_bytes_per_s,
                str(cost.bound),
            )
        )
    return out
