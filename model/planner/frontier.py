"""The throughput-interactivity frontier: per serving style, output tokens/s per GPU against output
tokens/s per user (1 / TPOT) over a range of request rates and every configuration of the style.

This is the view public serving benchmarks draw (SemiAnalysis InferenceMAX, NVIDIA's Dynamo and
TensorRT-LLM Pareto charts: throughput per GPU against interactivity per user). Each point is one
configuration at one open-loop request rate ``r``:

- output tokens/s per GPU = r x E[output tokens] / GPUs (every request is served when stable);
- output tokens/s per user = 1 / TPOT, with TPOT at the SLO's percentile (so the SLO region,
  tokens/s per user >= 1 / TPOT target, holds exactly the points meeting the TPOT target).

A point dominates another when it is at least as good on both axes and better on one; the frontier
of a style is its non-dominated points (its Pareto set), drawn from high interactivity to high
throughput. Rates default to fractions of each configuration's stability limit (the highest rate
its queues stay stable, found by the goodput search's doubling and bisection), so every
configuration contributes points from light load up to saturation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from model.errors import InputError
from model.hardware.gpus import GPU
from model.llm.arch import LLMArch
from model.planner.goodput import stability_limit_rps
from model.planner.plan import PlanRequest, budget_sets, plan_request, resolve_inputs
from model.serving.common import check_slo
from model.serving.registry import build_set
from model.workload.scenario import Scenario

# Default rates: these fractions of each configuration's stability limit (denser near saturation,
# where throughput per GPU is highest and the frontier bends).
LOAD_FRACTIONS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98)
# Most rates given explicitly, and most (configuration, rate) points evaluated per style: each
# point is one row of the vectorised model (about 1 ms per point on one core; 9,000 points take ~9 s).
MAX_RATES = 256
MAX_POINTS = 50_000
# Rows evaluated per pass: bounds memory at [rows x samples] arrays.
_BLOCK = 2048


@dataclass(frozen=True, eq=False)
class StyleFrontier:
    """Every stable (configuration, rate) point of one style (arrays over points) and its frontier.

    ``labels`` and ``n_gpus_of`` are per configuration; ``config_index`` maps each point to its
    configuration. ``on_frontier`` marks the non-dominated points; :meth:`frontier_order` lists
    them by rising tokens/s per user.
    """

    style: str
    labels: tuple[str, ...]
    config_index: np.ndarray
    n_gpus: np.ndarray
    rate_rps: np.ndarray
    output_tokens_per_s_per_gpu: np.ndarray
    output_tokens_per_s_per_user: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    meets_slo: np.ndarray
    on_frontier: np.ndarray

    def frontier_order(self) -> np.ndarray:
        """Indices of the frontier points by rising tokens/s per user (falling tokens/s per GPU)."""
        idx = np.nonzero(self.on_frontier)[0]
        return idx[np.argsort(self.output_tokens_per_s_per_user[idx], kind="stable")]


@dataclass(frozen=True, eq=False)
class Frontier:
    """The frontier of each style (registration order) for one scenario and GPU budget.
    ``min_tokens_per_s_per_user`` = 1 / TPOT target: the SLO region is to its right."""

    styles: dict[str, StyleFrontier]
    gpus: int
    percentile: float
    ttft_slo_s: float
    tpot_slo_s: float
    min_tokens_per_s_per_user: float


def pareto_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Points not dominated when both ``x`` and ``y`` are maximised (of exact duplicates, the first).

    Sort by x falling (ties: y falling, then index); a point is on the frontier when its y beats
    the best y of every point before it. O(n log n).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    keep = np.zeros(n, dtype=bool)
    if n == 0:
        return keep
    order = np.lexsort((np.arange(n), -y, -x))
    ys = y[order]
    best_before = np.concatenate(([-np.inf], np.maximum.accumulate(ys)[:-1]))
    keep[order] = ys > best_before
    return keep


def _rates(cands: Any, rates_rps: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(configuration index, rate) of every point: each configuration at each given rate, or at
    LOAD_FRACTIONS of its own stability limit."""
    n = len(cands.configs)
    if rates_rps is None:
        limit = stability_limit_rps(cands)
        per = np.outer(limit, LOAD_FRACTIONS)
    else:
        per = np.broadcast_to(rates_rps, (n, len(rates_rps)))
    idx = np.repeat(np.arange(n), per.shape[1])
    rates = per.reshape(-1)
    keep = rates > 0
    return idx[keep], rates[keep]


def style_frontier(
    scenario: Scenario, configs: Sequence[Any], rates_rps: Sequence[float] | None = None
) -> StyleFrontier:
    """The points and frontier of ``configs`` (one style) under ``scenario``: each configuration at
    each of ``rates_rps`` (req/s), or at LOAD_FRACTIONS of its stability limit when None. Unstable
    points are left out; TPOT and TTFT are at the scenario SLO's percentile."""
    if not isinstance(scenario, Scenario):
        raise InputError("scenario", type(scenario).__name__, "a Scenario (model.Scenario.build(...))")
    rates = _check_rates(rates_rps)
    if isinstance(configs, str) or not isinstance(configs, Sequence):
        raise InputError("configs", type(configs).__name__, "a list of configurations of one style")
    points = len(configs) * (len(LOAD_FRACTIONS) if rates is None else len(rates))
    if points > MAX_POINTS:
        raise InputError(
            "rates", f"{points:,} points", f"at most {MAX_POINTS:,} (configurations x rates) per style"
        )
    cands = build_set(scenario, list(configs))
    idx, rate = _rates(cands, rates)
    q = scenario.slo.percentile / 100.0
    parts = []
    for start in range(0, len(idx), _BLOCK):
        i, r = idx[start : start + _BLOCK], rate[start : start + _BLOCK]
        block = build_set(scenario, [cands.configs[k] for k in i])
        out = block.evaluate(r)
        ok = check_slo(out.latency, out.stable, scenario.slo).ok
        parts.append((out.stable, out.latency.ttft_percentile_s(q), out.latency.tpot_percentile_s(q), ok))
    stable, ttft, tpot, ok = (np.concatenate([p[k] for p in parts]) for k in range(4))
    stable = stable.astype(bool) & np.isfinite(tpot) & (tpot > 0)
    idx, rate, ttft, tpot, ok = idx[stable], rate[stable], ttft[stable], tpot[stable], ok[stable].astype(bool)
    gpus_of = np.asarray(cands.n_gpus, dtype=float)
    n_gpus = gpus_of[idx]
    per_gpu = rate * scenario.mean_output_tokens / n_gpus
    per_user = 1.0 / tpot
    return StyleFrontier(
        style=cands.configs[0].style,
        labels=tuple(c.label() for c in cands.configs),
        config_index=idx,
        n_gpus=n_gpus,
        rate_rps=rate,
        output_tokens_per_s_per_gpu=per_gpu,
        output_tokens_per_s_per_user=per_user,
        ttft_s=ttft,
        tpot_s=tpot,
        meets_slo=ok,
        on_frontier=pareto_mask(per_user, per_gpu),
    )


def _check_rates(rates_rps: Sequence[float] | np.ndarray | None) -> np.ndarray | None:
    if rates_rps is None:
        return None
    if isinstance(rates_rps, str) or not isinstance(rates_rps, Sequence | np.ndarray):
        raise InputError("rates", rates_rps, "a list of request rates > 0 req/s")
    if not 1 <= len(rates_rps) <= MAX_RATES:
        raise InputError("rates", f"{len(rates_rps)} values", f"1 to {MAX_RATES} request rates")
    out = []
    for r in rates_rps:
        if (
            isinstance(r, bool)
            or not isinstance(r, int | float | np.number)
            or not (np.isfinite(r) and 0 < r <= 1e7)
        ):
            raise InputError("rates", r, "request rates in (0, 1e7] req/s")
        out.append(float(r))
    return np.array(out)


def frontier(
    model: str | LLMArch | PlanRequest,
    gpu: str | GPU | None = None,
    *,
    rates_rps: Sequence[float] | None = None,
    **kwargs: Any,
) -> Frontier:
    """The throughput-interactivity frontier of each serving style for a GPU budget.

    ``model`` is a :class:`~model.planner.plan.PlanRequest` with ``gpus`` set, or a model with
    ``gpu`` and the PlanRequest fields as keywords (workload, SLOs, ``gpus``, TP and chunk options,
    ...): the configurations are those the planner enumerates for that budget, each evaluated at
    ``rates_rps`` (req/s) or, when None, at fractions of its stability limit. E.g.
    ``model.frontier("llama-3.1-8b", "h100-sxm", workload="chat", ttft_slo_s=0.5, tpot_slo_s=0.05,
    gpus=8)``.
    """
    request: PlanRequest = plan_request(model, gpu, **kwargs)
    if request.gpus is None:
        raise InputError(
            "gpus", None, "a GPU budget: the frontier spans each style's configurations up to it"
        )
    inp = resolve_inputs(request)
    rates = _check_rates(rates_rps)
    out: dict[str, StyleFrontier] = {}
    for name, cands in budget_sets(inp, inp.gpus).items():
        fits = cands.fits()
        if fits.any():
            f = style_frontier(
                inp.scenario, [c for c, ok in zip(cands.configs, fits, strict=True) if ok], rates
            )
            if len(f.rate_rps):
                out[name] = f
    slo = inp.scenario.slo
    return Frontier(out, inp.gpus, slo.percentile, slo.ttft_s, slo.tpot_s, 1.0 / slo.tpot_s)


def frontier_dict(f: Frontier) -> dict[str, Any]:
    """The frontier as JSON-ready data (the `pdplan frontier --json` schema): per style, its
    frontier points by rising tokens/s per user, and how many stable points were evaluated."""
    styles = {}
    for name, s in f.styles.items():
        styles[name] = {
            "points_evaluated": len(s.rate_rps),
            "frontier": [
                {
                    "label": s.labels[int(s.config_index[i])],
                    "n_gpus": int(s.n_gpus[i]),
                    "rate_rps": float(s.rate_rps[i]),
                    "output_tokens_per_s_per_gpu": float(s.output_tokens_per_s_per_gpu[i]),
                    "output_tokens_per_s_per_user": float(s.output_tokens_per_s_per_user[i]),
                    "ttft_s": float(s.ttft_s[i]),
                    "tpot_s": float(s.tpot_s[i]),
                    "meets_slo": bool(s.meets_slo[i]),
                }
                for i in s.frontier_order()
            ],
        }
    return {
        "gpus": f.gpus,
        "percentile": f.percentile,
        "ttft_slo_s": f.ttft_slo_s,
        "tpot_slo_s": f.tpot_slo_s,
        "min_output_tokens_per_s_per_user": f.min_tokens_per_s_per_user,
        "styles": styles,
    }
