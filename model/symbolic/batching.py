"""Symbolic decode batching and colocated interference: the Little's-law batch fixed point, decode
TPOT, the prefill-stall inflation of colocated decodes and the colocated TPOT solved in closed form."""

from __future__ import annotations

from functools import cache

import sympy as sp

from model.queueing.interference import token_time_form
from model.symbolic.core import Formula, make_formula, solve_for, tidy
from model.symbolic.symbols import symbol

__all__ = ["BUILDERS"]


def _batch_fixed_point() -> tuple[sp.Expr, sp.Expr]:
    """(B*, TPOT) of B = lambda_r E[O] (t0 + t1 B) / (1 - rho_p), solved by sympy (rho_p = 0: decode pool)."""
    s = symbol
    b = sp.Symbol("B_fixed", positive=True)
    demand = s("rate_rps") * s("mean_output_tokens")
    b_star = solve_for(b, demand * (s("step_time_intercept_s") + s("step_time_slope_s") * b), b)
    return b_star, s("step_time_intercept_s") + s("step_time_slope_s") * s("batch_star")


_LITTLE_SOURCE = (
    "Little's law on the batch (Little 1961, Oper. Res. 9(3)) with iteration-level batching (Orca, Yu "
    "et al. OSDI 2022): B = lambda E[O] tau(B), tau(B) = t0 + t1 B. Numeric: "
    "model.queueing.decode_batch.solve_batch."
)


@cache
def _decode_batch() -> Formula:
    s = symbol
    b_star, _tpot = _batch_fixed_point()
    return make_formula(
        "decode_batch",
        "Steady-state decode batch per instance (least root of the Little's-law fixed point).",
        "batch_star",
        b_star,
        ("rate_rps", "mean_output_tokens", "step_time_intercept_s", "step_time_slope_s"),
        _LITTLE_SOURCE,
        result_unit="sequences",
        condition=s("rate_rps") * s("mean_output_tokens") * s("step_time_slope_s") < 1,
        condition_text="lambda E[O] t1 >= 1: the batch grows without bound",
        assumptions="Affine step time in the batch; lambda is the rate per decode instance; no KV cap.",
    )


@cache
def _decode_tpot() -> Formula:
    s = symbol
    b_star, tpot = _batch_fixed_point()
    return make_formula(
        "decode_tpot",
        "TPOT of a continuous-batching decode instance at its steady-state batch.",
        r"\mathrm{TPOT}",
        tpot,
        ("rate_rps", "mean_output_tokens", "step_time_intercept_s", "step_time_slope_s"),
        _LITTLE_SOURCE,
        result_unit="s",
        where=[("batch_star", b_star)],
        condition=s("rate_rps") * s("mean_output_tokens") * s("step_time_slope_s") < 1,
        condition_text="lambda E[O] t1 >= 1: the batch grows without bound",
        assumptions="Affine step time; the mean batch stands in for the fluctuating one (exact for affine).",
    )


@cache
def _colocated_inflation() -> Formula:
    s = symbol
    rho = s("prefill_utilisation")
    return make_formula(
        "colocated_stall_inflation",
        "Colocated (unchunked) decode per-token time: decodes run only in the time prefill leaves.",
        r"\tau",
        token_time_form(s("decode_step_s"), rho, 0),
        ("decode_step_s", "rate_per_replica_rps", "mean_prefill_s"),
        "DistServe (Zhong et al. OSDI 2024), sec. 2.2: a prefill pre-empts the running decodes. Numeric: "
        "model.queueing.interference.shared_token_time_s (prefill iterations carry no decode token), "
        "called by model.serving.colocated.evaluate_colocated.",
        result_unit="s",
        where=[("prefill_utilisation", s("rate_per_replica_rps") * s("mean_prefill_s"))],
        condition=rho < 1,
        condition_text="prefill utilisation >= 1: decodes starve",
        assumptions="Prefill-first scheduling (vLLM default without chunking); lambda_r per replica.",
    )


@cache
def _colocated_tpot() -> Formula:
    s = symbol
    b = sp.Symbol("B_fixed", positive=True)
    lam = s("rate_per_replica_rps")
    rho = lam * s("mean_prefill_s")
    tau = token_time_form(s("step_time_intercept_s") + s("step_time_slope_s") * b, rho, 0)
    b_star = solve_for(b, lam * s("mean_output_tokens") * tau, b)
    tpot = tidy(sp.simplify(tau.subs(b, b_star)))
    return make_formula(
        "colocated_tpot",
        "Colocated TPOT at the steady-state batch: the fixed point B = lambda_r E[O] tau(B), solved.",
        r"\mathrm{TPOT}",
        tpot,
        (
            "rate_per_replica_rps",
            "mean_prefill_s",
            "mean_output_tokens",
            "step_time_intercept_s",
            "step_time_slope_s",
        ),
        "Formulas colocated_stall_inflation and decode_batch combined (solved by sympy).",
        result_unit="s",
        condition=lam * (s("mean_prefill_s") + s("mean_output_tokens") * s("step_time_slope_s")) < 1,
        condition_text="lambda_r (E[S_p] + E[O] t1) >= 1: unstable",
        assumptions="Affine decode step time t_dec(B) = t0 + t1 B; no KV cap.",
    )


BUILDERS = {
    "decode_batch": _decode_batch,
    "decode_tpot": _decode_tpot,
    "colocated_stall_inflation": _colocated_inflation,
    "colocated_tpot": _colocated_tpot,
}
"""The formulas of this module by name, in display order (collected by model.symbolic.formulas)."""
