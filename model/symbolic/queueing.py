"""Symbolic queueing: M/G/1 (Pollaczek-Khinchine) and M/M/c mean waits, and Erlang C written out."""

from __future__ import annotations

from functools import cache

import sympy as sp
from sympy.utilities.lambdify import implemented_function

from model.queueing.mgc import erlang_c
from model.symbolic.core import Formula, make_formula
from model.symbolic.symbols import symbol

__all__ = ["BUILDERS"]

# Erlang C shown as a named function C(c, a); evaluated by model.queueing.mgc.erlang_c (log-space exact).
_ERLANG_C = implemented_function(sp.Function("C"), lambda c, a: float(erlang_c(c, a)))


@cache
def _mg1_wait() -> Formula:
    s = symbol
    rho = s("utilisation")
    expr = rho * s("mean_service_s") * (1 + s("scv_service")) / sp.Mul(2, 1 - rho, evaluate=False)
    return make_formula(
        "mg1_wait",
        "M/G/1 mean wait in queue (Pollaczek-Khinchine).",
        r"\mathrm{E}[W]",
        expr,
        ("rate_rps", "mean_service_s", "scv_service"),
        "Kleinrock 1975, Queueing Systems vol. 1, sec. 5.7, eq. 5.76. Numeric: model.queueing.mgc.mg1_wait.",
        result_unit="s",
        where=[("utilisation", s("rate_rps") * s("mean_service_s"))],
        condition=rho < 1,
        condition_text="utilisation >= 1: unstable",
        assumptions="Poisson arrivals, one FCFS server; c_s^2 = Var[S]/E[S]^2 (0 gives M/D/1).",
    )


@cache
def _mmc_wait() -> Formula:
    s = symbol
    lam, mu, c = s("rate_rps"), s("service_rate_per_s"), s("servers")
    expr = _ERLANG_C(c, s("offered_load")) / (c * mu - lam)
    return make_formula(
        "mmc_wait",
        "M/M/c mean wait in queue: Erlang C probability of waiting over the spare service rate.",
        r"\mathrm{E}[W]",
        expr,
        ("rate_rps", "service_rate_per_s", "servers"),
        "Kleinrock 1975, vol. 1, sec. 3.5, eqs. 3.39-3.40. Numeric: model.queueing.mgc.mmc_wait "
        "(C by model.queueing.mgc.erlang_c).",
        result_unit="s",
        where=[("offered_load", lam / mu)],
        condition=lam < c * mu,
        condition_text="utilisation >= 1: unstable",
        assumptions="Poisson arrivals, exponential service of rate mu, c identical servers, one FCFS queue.",
        order=None,
    )


@cache
def _erlang_c_explicit() -> Formula:
    s = symbol
    c, a = s("servers"), s("offered_load")
    k = sp.Symbol("k", integer=True, nonnegative=True)
    expr = s("erlang_p") / (sp.Sum(a**k / sp.factorial(k), (k, 0, c - 1)) + s("erlang_p"))
    with sp.evaluate(False):
        top = a**c / sp.factorial(c) * (c / (c - a))
    return make_formula(
        "erlang_c",
        "Erlang C: probability that an arrival waits in M/M/c.",
        r"C(c, a)",
        expr,
        ("servers", "offered_load"),
        "Erlang 1917; Kleinrock 1975, vol. 1, eq. 3.40. "
        "Numeric (log-space, any c): model.queueing.mgc.erlang_c.",
        result_unit="",
        where=[("erlang_p", top)],
        condition=a < c,
        condition_text="a >= c: every arrival waits",
        assumptions="Evaluated here in floats, so c up to ~170; the numeric function has no such limit.",
        order=None,
    )


BUILDERS = {
    "mg1_wait": _mg1_wait,
    "mmc_wait": _mmc_wait,
    "erlang_c": _erlang_c_explicit,
}
"""The formulas of this module by name, in display order (collected by model.symbolic.formulas)."""
