"""The :class:`Formula` type: a sympy expression with its inputs, units, source and LaTeX rendering.

Also the helpers every formula module uses: :func:`make_formula` (build one from value names),
:func:`solve_for` (sympy.solve for one unknown, tidied for display) and the SI-prefixed number
formatting of the substituted LaTeX.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import sympy as sp

from model.errors import InputError
from model.symbolic.symbols import SYMBOLS, check_value, latex_names, symbol, unit

__all__ = ["Formula", "make_formula", "solve_for", "tidy"]

# ----------------------------------------------------------------------------------------------
# Number formatting for the substituted LaTeX.

_PREFIXED_UNITS = {"s", "B", "B/s", "FLOP", "FLOP/s", "params"}
_BIG_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_SMALL_PREFIXES = ((1.0, ""), (1e-3, "m"), (1e-6, r"\mu "), (1e-9, "n"))


def _latex_number(x: float, *, digits: int = 4, wrap: bool = True) -> str:
    """A number as LaTeX: integers as is, 1e-3 <= |x| < 1e5 as %g, else mantissa x 10^exponent."""
    if math.isinf(x):
        return r"\infty" if x > 0 else r"-\infty"
    if math.isnan(x):
        return r"\mathrm{NaN}"
    if x == int(x) and abs(x) < 1e6:
        text = str(int(x))
    elif 1e-3 <= abs(x) < 1e5:
        text = f"{x:.{digits}g}"
    else:
        exp = math.floor(math.log10(abs(x)))
        mant = x / 10**exp
        if round(mant, digits - 1) >= 10:
            mant, exp = mant / 10, exp + 1
        text = f"{mant:.{digits}g}" + rf" \times 10^{{{exp}}}"
        return rf"\left({text}\right)" if wrap else text
    return rf"\left({text}\right)" if (wrap and x < 0) else text


def _latex_quantity(x: float, unit: str) -> str:
    """A result with its unit, using an SI prefix for seconds, bytes, FLOP and bytes/s."""
    if not math.isfinite(x) or x == 0 or unit not in _PREFIXED_UNITS:
        suffix = rf"\ \mathrm{{{unit}}}" if unit else ""
        return _latex_number(x, wrap=False) + suffix
    table = _SMALL_PREFIXES if unit == "s" else (*_BIG_PREFIXES, (1.0, ""))
    scale, prefix = table[-1]
    for s, p in table:
        if abs(x) >= s * (1 - 1e-12):
            scale, prefix = s, p
            break
    return _latex_number(x / scale, wrap=False) + rf"\ \mathrm{{{prefix}{unit}}}"


@dataclass(frozen=True, eq=False)
class Formula:
    """One formula: ``lhs = expr`` with intermediate definitions ``where`` and a validity condition.

    ``symbols`` maps each input's value name to its Symbol (the keys :meth:`evaluate` needs);
    ``units`` gives the SI unit of every input and intermediate; ``where`` is a tuple of
    (name, Symbol, definition) substituted in order into ``expr`` before evaluation (a definition
    may use the symbols defined after it);
    ``condition`` (a sympy relation in the inputs, or None) must hold for a finite result, else
    :meth:`evaluate` returns ``math.inf`` (e.g. an unstable queue). ``source`` cites where the
    formula comes from and which pdplan function computes it numerically.
    """

    name: str
    description: str
    expr: sp.Expr
    symbols: dict[str, sp.Symbol]
    units: dict[str, str]
    source: str
    lhs: str = ""
    result_unit: str = ""
    where: tuple[tuple[str, sp.Symbol, sp.Expr], ...] = ()
    condition: sp.Basic | None = None
    condition_text: str = ""
    assumptions: str = ""
    order: str | None = None  # sympy.latex term order ("old" keeps 1 - x); None: sympy's default

    # -- derived forms ------------------------------------------------------------------------
    @cached_property
    def full_expr(self) -> sp.Expr:
        """``expr`` with every ``where`` definition substituted: a function of the inputs only."""
        out = self.expr
        for _key, sym, definition in self.where:
            out = out.subs(sym, definition)
        return out

    @cached_property
    def _args(self) -> tuple[str, ...]:
        return tuple(self.symbols)

    @cached_property
    def _fn(self) -> Callable[..., Any]:
        return sp.lambdify([self.symbols[k] for k in self._args], self.full_expr, modules=["math"])

    @cached_property
    def _where_fns(self) -> tuple[Callable[..., Any], ...]:
        fns = []
        for i, (_key, _unused, definition) in enumerate(self.where):
            d = definition
            for _k2, s2, d2 in self.where[i + 1 :]:
                d = d.subs(s2, d2)
            fns.append(sp.lambdify([self.symbols[k] for k in self._args], d, modules=["math"]))
        return tuple(fns)

    @cached_property
    def _cond_fn(self) -> Callable[..., Any] | None:
        if self.condition is None:
            return None
        cond = self.condition
        for _key, sym, definition in self.where:
            cond = cond.subs(sym, definition)
        return sp.lambdify([self.symbols[k] for k in self._args], cond, modules=["math"])

    # -- numbers ------------------------------------------------------------------------------
    def _inputs(self, values: Mapping[str, object]) -> list[float | int]:
        if not isinstance(values, Mapping):
            raise InputError("values", values, f"a mapping of {', '.join(self._args)} to numbers")
        out: list[float | int] = []
        for key in self._args:
            if key not in values:
                raise InputError(key, None, f"a value for {self.name} (needs {', '.join(self._args)})")
            v = check_value(key, values[key])
            if self.symbols[key].is_integer:
                if v != int(v) or v < 1:
                    raise InputError(key, values[key], "a whole number >= 1")
                out.append(int(v))
            else:
                out.append(v)
        return out

    def holds(self, values: Mapping[str, object]) -> bool:
        """Whether the validity condition holds at ``values`` (True when there is none)."""
        args = self._inputs(values)
        return True if self._cond_fn is None else bool(self._cond_fn(*args))

    def evaluate(self, values: Mapping[str, object]) -> float:
        """The formula's value at ``values`` (SI floats keyed by ``symbols``; extra keys ignored).

        Returns ``math.inf`` where ``condition`` fails or a denominator is zero.
        """
        args = self._inputs(values)
        if self._cond_fn is not None and not bool(self._cond_fn(*args)):
            return math.inf
        try:
            return float(self._fn(*args))
        except ZeroDivisionError:
            return math.inf
        except OverflowError:
            raise InputError(
                "values", dict(values), f"magnitudes {self.name} can evaluate in floats"
            ) from None

    # -- LaTeX --------------------------------------------------------------------------------
    def _lines(self, names: dict[sp.Symbol, str], mul_symbol: str | None) -> list[tuple[str, str]]:
        lines = [(self.lhs, sp.latex(self.expr, symbol_names=names, mul_symbol=mul_symbol, order=self.order))]
        for _key, sym, definition in self.where:
            lines.append(
                (
                    names.get(sym, sp.latex(sym)),
                    sp.latex(definition, symbol_names=names, mul_symbol=mul_symbol, order=self.order),
                )
            )
        return lines

    def latex(self) -> str:
        """The formula as LaTeX (an ``aligned`` block when it has ``where`` definitions)."""
        lines = self._lines(latex_names(), None)
        if self.condition is not None:
            cond = sp.latex(self.condition, symbol_names=latex_names(), order=self.order)
            lines[0] = (lines[0][0], lines[0][1] + rf" \qquad ({cond})")
        return _aligned([f"{lhs} &= {rhs}" for lhs, rhs in lines])

    def latex_substituted(self, values: Mapping[str, object]) -> str:
        """The formula with the numbers of ``values`` put in, ending "= <result with unit>"."""
        args = self._inputs(values)
        names = latex_names()
        numbers = dict(zip(self._args, args, strict=True))
        for k, v in numbers.items():
            names[self.symbols[k]] = _latex_number(float(v))
        where_vals = [float(fn(*args)) for fn in self._where_fns]
        for (_key, sym, _d), v in zip(self.where, where_vals, strict=True):
            names[sym] = _latex_number(v)
        symbolic = self._lines(latex_names(), None)
        filled = self._lines(names, "dot")
        result = self.evaluate(values)
        rows = []
        head_sym, head_num = symbolic[0][1], filled[0][1]
        tail = _latex_quantity(result, self.result_unit)
        if math.isinf(result) and self.condition is not None:
            tail += rf" \quad (\text{{{self.condition_text or 'condition fails'}}})"
        rows.append(f"{self.lhs} &= {head_sym} = {head_num} = {tail}")
        for (lhs, rhs_sym), (_l, rhs_num), (key, _s, _d), v in zip(
            symbolic[1:], filled[1:], self.where, where_vals, strict=True
        ):
            rows.append(f"{lhs} &= {rhs_sym} = {rhs_num} = {_latex_quantity(v, self.units.get(key, ''))}")
        return _aligned(rows)


def _aligned(rows: list[str]) -> str:
    if len(rows) == 1:
        return rows[0].replace("&=", "=", 1)
    return r"\begin{aligned}" + r" \\ ".join(rows) + r"\end{aligned}"


def make_formula(
    name: str,
    description: str,
    lhs_key_or_latex: str,
    expr: sp.Expr,
    inputs: Iterable[str],
    source: str,
    *,
    result_unit: str,
    where: Iterable[tuple[str, sp.Expr]] = (),
    condition: sp.Basic | None = None,
    condition_text: str = "",
    assumptions: str = "",
    order: str | None = "old",
) -> Formula:
    keys = list(inputs)
    where_t = tuple((k, symbol(k), d) for k, d in where)
    units = {k: unit(k) for k in keys} | {k: unit(k) for k, _s, _d in where_t}
    lhs = SYMBOLS[lhs_key_or_latex][0] if lhs_key_or_latex in SYMBOLS else lhs_key_or_latex
    return Formula(
        name=name,
        description=description,
        expr=expr,
        symbols={k: symbol(k) for k in keys},
        units=units,
        source=source,
        lhs=lhs,
        result_unit=result_unit,
        where=where_t,
        condition=condition,
        condition_text=condition_text,
        assumptions=assumptions,
        order=order,
    )


def tidy(expr: sp.Expr) -> sp.Expr:
    """Same value, display form: a single fraction whose numerator carries no leading minus sign
    (the sign moves into a difference in the denominator: -K / (alpha - t) -> K / (t - alpha))."""
    num, den = sp.fraction(sp.together(expr))
    if num.as_coeff_Mul()[0] < 0:
        factors = list(sp.Mul.make_args(den))
        for i, factor in enumerate(factors):
            if isinstance(factor, sp.Add):
                factors[i] = sp.Add(*[-term for term in factor.args])
                num = -num
                break
        den = sp.Mul(*factors)
    return num / den


def solve_for(lhs: sp.Expr, rhs: sp.Expr, var: sp.Symbol) -> sp.Expr:
    """The one solution of lhs = rhs for ``var`` (sympy.solve), simplified and tidied for display."""
    sols = sp.solve(sp.Eq(lhs, rhs), var)
    if len(sols) != 1:
        raise RuntimeError(f"expected one solution for {var}, sympy gave {sols}")  # internal
    return tidy(sp.simplify(sols[0]))
