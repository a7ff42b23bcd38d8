"""Closed-form thresholds solved from the symbolic formulas.

The planner's verdict names the value that would flip it ("disaggregation wins above 38 Gbit/s").
:func:`break_even_bandwidth`, :func:`break_even_prompt_tokens`, :func:`max_rate_for_tpot` and
:func:`max_rate_for_wait` solve the expressions of model.symbolic.transfer, model.symbolic.batching
and model.symbolic.queueing with ``sympy.solve`` once, lambdify the solutions (cached) and return a
:class:`Threshold`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache

import numpy as np
import sympy as sp

from model.errors import InputError
from model.symbolic.core import Formula, make_formula, solve_for
from model.symbolic.formulas import formula
from model.symbolic.symbols import check_scalar, check_value, symbol
from model.symbolic.transfer import per_layer_expr, tail_expr, transfer_whole_expr

__all__ = [
    "Threshold",
    "break_even_bandwidth",
    "break_even_prompt_tokens",
    "max_rate_for_tpot",
    "max_rate_for_wait",
    "threshold_formulas",
]


@dataclass(frozen=True)
class Threshold:
    """A break-even or flip point. ``value`` is the threshold (SI units); ``attainable`` is False when
    no value works (then ``value`` is ``math.inf`` for "needs more than any" or 0.0 for "none at all");
    ``binding`` names the branch that set it; ``reason`` is one line for the verdict. ``float(t)``
    gives ``value``."""

    value: float
    attainable: bool
    binding: str
    reason: str

    def __float__(self) -> float:
        return self.value


def _lam(args: Iterable[str], expr: sp.Expr) -> Callable[..., float]:
    return sp.lambdify([symbol(k) for k in args], expr, modules=["math"])


# Branches of the exposed transfer time: (name, expression in the inputs).
def _transfer_branches(layerwise: bool) -> list[tuple[str, sp.Expr]]:
    if not layerwise:
        return [("whole-request transfer", transfer_whole_expr())]
    per_layer = per_layer_expr()
    return [("per-layer transfer", per_layer), ("pipeline tail", tail_expr(per_layer))]


_BW_ARGS = ("kv_bytes", "slack_s", "link_latency_s", "lanes", "link_efficiency", "num_layers", "prefill_s")


@cache
def _bandwidth_solutions(layerwise: bool) -> tuple[tuple[str, Callable, Callable], ...]:
    """Per branch: (name, bw solving branch = slack, branch's limit as bw -> infinity)."""
    bw = symbol("link_bandwidth_bytes_per_s")
    out = []
    for name, expr in _transfer_branches(layerwise):
        sol = solve_for(expr, symbol("slack_s"), bw)
        floor = sp.limit(expr, bw, sp.oo)
        out.append((name, _lam(_BW_ARGS, sol), _lam(_BW_ARGS, floor)))
    return tuple(out)


def _check_transfer_inputs(
    slack_s: float,
    latency_s: float,
    lanes: float,
    efficiency: float,
    layers: int | None,
    prefill: float | None,
) -> tuple[float, float, float, float, int, float]:
    slack = check_scalar("slack_s", slack_s, 0.0)
    lat = check_scalar("latency_s", latency_s, 0.0)
    m = check_scalar("lanes", lanes, 1.0)
    eff = check_value("efficiency", efficiency)
    if not 0 < eff <= 1:
        raise InputError("efficiency", efficiency, "a fraction in (0, 1]")
    if (layers is None) != (prefill is None):
        raise InputError("layers", layers, "given together with the prefill time (layer-wise), or both None")
    n_layers = 1
    pre = 0.0
    if layers is not None:
        if isinstance(layers, bool) or not isinstance(layers, int | np.integer) or layers < 1:
            raise InputError("layers", layers, "a whole number of layers >= 1")
        n_layers = int(layers)
        pre = check_scalar("prefill_s", prefill, 0.0)
    return slack, lat, m, eff, n_layers, pre


def break_even_bandwidth(
    kv_bytes: float,
    slack_s: float,
    latency_s: float,
    lanes: float,
    efficiency: float,
    layers: int | None = None,
    prefill_s: float | None = None,
) -> Threshold:
    """Smallest per-lane link line rate (bytes/s) at which the exposed KV transfer time <= ``slack_s``.

    Whole-request (``layers`` None): alpha + K / (m bw eps) = slack -> bw = K / (m eps (slack - alpha)).
    Layer-wise (``layers`` and ``prefill_s`` given): exposed = max(t_l, L t_l - t_pre + t_pre / L) with
    t_l = alpha + K / (L m bw eps) (model.serving.disaggregated.transfer_components); both branches fall with
    bw, so the answer is the larger of the two branch solutions. A branch whose floor (its value at
    infinite bandwidth, e.g. the latency alone) exceeds the slack makes it unattainable (``math.inf``).
    """
    k = check_scalar("kv_bytes", kv_bytes, 0.0)
    slack, lat, m, eff, n_layers, pre = _check_transfer_inputs(
        slack_s, latency_s, lanes, efficiency, layers, prefill_s
    )
    args = (k, slack, lat, m, eff, n_layers, pre)
    best, binding = 0.0, "none"
    for name, solve, floor in _bandwidth_solutions(layers is not None):
        lowest = float(floor(*args))
        if lowest > slack or (lowest == slack and k > 0):
            return Threshold(
                math.inf,
                False,
                name,
                f"{name} is at least {lowest:.4g} s at any bandwidth, above the {slack:.4g} s slack",
            )
        need = 0.0 if k == 0 else float(solve(*args))
        if need > best:
            best, binding = need, name
    reason = (
        f"exposed KV transfer fits in {slack:.4g} s at >= {best * 8 / 1e9:.4g} Gbit/s per lane ({binding})"
        if best > 0
        else "no KV bytes to move: any bandwidth fits"
    )
    return Threshold(best, True, binding, reason)


_TOK_ARGS = (
    "link_bandwidth_bytes_per_s",
    "kv_bytes_per_token",
    "slack_s",
    "link_latency_s",
    "lanes",
    "link_efficiency",
    "num_layers",
    "prefill_s_per_token",
)


@cache
def _token_solutions(layerwise: bool) -> tuple[tuple[str, Callable, Callable, Callable], ...]:
    """Per branch, with K = n k and t_pre = n s_tok: (name, n at branch = slack, intercept, slope in n)."""
    n = symbol("prompt_tokens")
    subs = {
        symbol("kv_bytes"): n * symbol("kv_bytes_per_token"),
        symbol("prefill_s"): n * symbol("prefill_s_per_token"),
    }
    out = []
    for name, expr in _transfer_branches(layerwise):
        g = sp.expand(expr.subs(subs))
        out.append(
            (
                name,
                _lam(_TOK_ARGS, solve_for(g, symbol("slack_s"), n)),
                _lam(_TOK_ARGS, g.subs(n, 0)),
                _lam(_TOK_ARGS, sp.diff(g, n)),
            )
        )
    return tuple(out)


def break_even_prompt_tokens(
    bandwidth_bytes_per_s: float,
    kv_bytes_per_token: float,
    slack_s: float,
    latency_s: float,
    lanes: float,
    efficiency: float,
    layers: int | None = None,
    prefill_s_per_token: float | None = None,
) -> Threshold:
    """Longest prompt (tokens) whose exposed KV transfer time still fits in ``slack_s``.

    KV bytes K = n k; layer-wise, prefill time t_pre = n s_tok (compute-bound prefill: pass the
    per-token prefill time). Each branch of the exposed time is affine in n, g(n) = g0 + g1 n:
    a rising branch bounds n from above at n = (slack - g0) / g1, a falling one from below. Returns
    the upper bound (``math.inf`` if nothing bounds it); unattainable (0.0) if no length fits.
    """
    bw = check_scalar("bandwidth_bytes_per_s", bandwidth_bytes_per_s, 0.0)
    if bw <= 0:
        raise InputError("bandwidth_bytes_per_s", bandwidth_bytes_per_s, "a bandwidth > 0 bytes/s")
    k = check_scalar("kv_bytes_per_token", kv_bytes_per_token, 0.0)
    slack, lat, m, eff, n_layers, s_tok = _check_transfer_inputs(
        slack_s, latency_s, lanes, efficiency, layers, prefill_s_per_token
    )
    args = (bw, k, slack, lat, m, eff, n_layers, s_tok)
    upper, lower, binding, lower_name = math.inf, 0.0, "none", ""
    for name, solve, intercept, slope in _token_solutions(layers is not None):
        g0, g1 = float(intercept(*args)), float(slope(*args))
        if g1 == 0:
            if g0 > slack:
                return Threshold(0.0, False, name, f"{name} is {g0:.4g} s at any length, above the slack")
            continue
        root = float(solve(*args))
        if g1 > 0 and root < upper:
            upper, binding = root, name
        elif g1 < 0 and root > lower:
            lower, lower_name = root, name
    if upper < max(lower, 0.0) or upper < 0:
        return Threshold(
            0.0, False, binding, f"no prompt length keeps the exposed transfer within {slack:.4g} s"
        )
    reason = f"prompts up to {upper:.4g} tokens keep the exposed KV transfer within {slack:.4g} s ({binding})"
    if lower > 0:
        reason += f"; prompts shorter than {lower:.4g} tokens exceed it ({lower_name})"
    return Threshold(upper, True, binding, reason)


@cache
def _rate_for_tpot_solutions() -> tuple[Callable, Callable]:
    """(lambda at TPOT = T, lambda at B* = B_max) for the colocated form (E[S_p] = 0: decode pool)."""
    s = symbol
    lam = s("rate_per_replica_rps")
    tpot = formula("colocated_tpot").expr
    at_slo = solve_for(tpot, s("tpot_slo_s"), lam)
    b_star = lam * s("mean_output_tokens") * tpot  # Little: B = lambda E[O] TPOT
    at_cap = solve_for(b_star, s("batch"), lam)
    args = (
        "step_time_intercept_s",
        "step_time_slope_s",
        "mean_output_tokens",
        "tpot_slo_s",
        "mean_prefill_s",
        "batch",
    )
    return _lam(args, at_slo), _lam(args, at_cap)


def max_rate_for_tpot(
    t0: float,
    t1: float,
    mean_output_tokens: float,
    tpot_slo_s: float,
    *,
    mean_prefill_s: float = 0.0,
    max_batch: float | None = None,
) -> Threshold:
    """Highest arrival rate per instance (req/s) at which mean TPOT <= ``tpot_slo_s``.

    Decode step time t0 + t1 B, Little's law B = lambda E[O] tau(B). Decode pool (``mean_prefill_s``
    0): TPOT = t0 / (1 - lambda E[O] t1) -> lambda = (1 - t0 / T) / (E[O] t1). Colocated unchunked
    (prefill stalls, formula colocated_tpot): lambda = (1 - t0 / T) / (E[S_p] + E[O] t1). With
    ``max_batch`` the KV cap also binds where B* = max_batch. ``math.inf`` if nothing limits the rate;
    unattainable (0.0) if even an idle instance misses the target (t0 > T).
    """
    t0v = check_scalar("t0", t0, 0.0)
    t1v = check_scalar("t1", t1, 0.0)
    eo = check_scalar("mean_output_tokens", mean_output_tokens, 0.0)
    if eo <= 0:
        raise InputError("mean_output_tokens", mean_output_tokens, "a number of tokens > 0")
    slo = check_scalar("tpot_slo_s", tpot_slo_s, 0.0)
    if slo <= 0:
        raise InputError("tpot_slo_s", tpot_slo_s, "a time > 0 s")
    es_p = check_scalar("mean_prefill_s", mean_prefill_s, 0.0)
    cap = None if max_batch is None else check_scalar("max_batch", max_batch, 1.0)
    if t0v > slo:
        return Threshold(
            0.0, False, "tpot", f"the step time at batch 0 ({t0v:.4g} s) already exceeds the TPOT target"
        )
    at_slo, at_cap = _rate_for_tpot_solutions()
    args = (t0v, t1v, eo, slo, es_p, 1.0 if cap is None else cap)
    load = es_p + eo * t1v
    rate, binding = (math.inf, "none") if load == 0 else (float(at_slo(*args)), "tpot")
    if cap is not None:
        r_cap = math.inf if (t0v == 0 and load == 0) else float(at_cap(*args))
        if r_cap < rate:
            rate, binding = r_cap, "kv capacity"
    reason = (
        f"TPOT <= {slo:.4g} s up to {rate:.4g} req/s per instance ({binding})"
        if math.isfinite(rate)
        else "nothing in this model limits the rate"
    )
    return Threshold(rate, True, binding, reason)


@cache
def _rate_for_wait_solution() -> Callable:
    s = symbol
    f = formula("mg1_wait")
    lam = solve_for(f.full_expr, s("wait_budget_s"), s("rate_rps"))
    return _lam(("mean_service_s", "scv_service", "wait_budget_s"), lam)


def max_rate_for_wait(mean_service_s: float, scv_service: float, wait_budget_s: float) -> Threshold:
    """Highest arrival rate (req/s) of an M/G/1 queue whose Pollaczek-Khinchine mean wait <= budget.

    lambda E[S]^2 (1 + c_s^2) / (2 (1 - lambda E[S])) = W_max
    -> lambda = 2 W_max / (E[S]^2 (1 + c_s^2) + 2 W_max E[S])  (below 1 / E[S], so stable).
    """
    es = check_scalar("mean_service_s", mean_service_s, 0.0)
    if es <= 0:
        raise InputError("mean_service_s", mean_service_s, "a time > 0 s")
    scv = check_scalar("scv_service", scv_service, 0.0)
    budget = check_scalar("wait_budget_s", wait_budget_s, 0.0)
    rate = float(_rate_for_wait_solution()(es, scv, budget))
    return Threshold(
        rate,
        True,
        "mean wait",
        f"mean queue wait <= {budget:.4g} s up to {rate:.4g} req/s ({rate * es:.1%} busy)",
    )


@cache
def threshold_formulas() -> list[Formula]:
    """The closed-form solutions above as Formulas (for docs and the UI)."""
    s = symbol
    out = []
    bw = symbol("link_bandwidth_bytes_per_s")
    for layerwise in (False, True):
        for name, expr in _transfer_branches(layerwise):
            sol = solve_for(expr, s("slack_s"), bw)
            keys = sorted((str(x) for x in sol.free_symbols), key=_BW_ARGS.index)
            out.append(
                make_formula(
                    "break_even_bandwidth_" + name.replace(" ", "_").replace("-", "_"),
                    f"Link line rate per lane at which the {name} equals the slack.",
                    r"\mathrm{bw}^{*}",
                    sol,
                    keys,
                    "Solved by sympy from kv_transfer_whole / kv_transfer_layerwise. "
                    "Used by model.symbolic.thresholds.break_even_bandwidth.",
                    result_unit="B/s",
                )
            )
    lam = s("rate_per_replica_rps")
    tpot = formula("colocated_tpot").expr
    sol = solve_for(tpot, s("tpot_slo_s"), lam)
    out.append(
        make_formula(
            "max_rate_for_tpot",
            "Arrival rate per instance at which TPOT reaches the target (E[S_p] = 0 for a decode pool).",
            r"\lambda^{*}",
            sol,
            (
                "step_time_intercept_s",
                "step_time_slope_s",
                "mean_output_tokens",
                "tpot_slo_s",
                "mean_prefill_s",
            ),
            "Solved by sympy from colocated_tpot. Used by model.symbolic.thresholds.max_rate_for_tpot.",
            result_unit="1/s",
        )
    )
    f = formula("mg1_wait")
    sol = solve_for(f.full_expr, s("wait_budget_s"), s("rate_rps"))
    out.append(
        make_formula(
            "max_rate_for_wait",
            "Arrival rate at which the M/G/1 mean wait reaches the budget.",
            r"\lambda^{*}",
            sol,
            ("mean_service_s", "scv_service", "wait_budget_s"),
            "Solved by sympy from mg1_wait. Used by model.symbolic.thresholds.max_rate_for_wait.",
            result_unit="1/s",
        )
    )
    return out
