"""Symbolic (sympy) forms of pdplan's key formulas, and the closed-form thresholds derived from them.

Two uses:

1. **Display.** Every :class:`Formula` renders itself as LaTeX (``latex()``), or with numbers put in
   and the result with its unit (``latex_substituted(values)``), for the web app's "Show the math"
   panel (:func:`latex_block` makes a markdown string of ``$$ ... $$`` blocks).
2. **Thresholds.** The planner's verdict names the value that would flip it ("disaggregation wins
   above 38 Gbit/s"). :func:`break_even_bandwidth`, :func:`break_even_prompt_tokens`,
   :func:`max_rate_for_tpot` and :func:`max_rate_for_wait` solve the expressions below with
   ``sympy.solve`` once, lambdify the solutions (cached) and return a :class:`Threshold`.

The numeric implementations stay where they are (model.roofline, model.comm, model.queueing,
model.batching, model.colocated, model.disaggregated); these expressions restate them and
tests/test_symbolic.py checks that they agree numerically. Values are plain floats in SI units
(seconds, bytes, bytes/s, FLOP/s), keyed by the names in ``Formula.symbols``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import sympy as sp
from sympy.utilities.lambdify import implemented_function

from model.errors import InputError
from model.queueing.mgc import erlang_c

if TYPE_CHECKING:
    from model.physics.deployment import Deployment

__all__ = [
    "Formula",
    "Threshold",
    "all_formulas",
    "break_even_bandwidth",
    "break_even_prompt_tokens",
    "decode_values",
    "formula",
    "latex_block",
    "max_rate_for_tpot",
    "max_rate_for_wait",
    "prefill_values",
    "threshold_formulas",
]

# ----------------------------------------------------------------------------------------------
# Symbols: one sympy Symbol per value name, shared by every formula. The Symbol's own name is the
# value name (a Python identifier, so lambdify needs no renaming); its LaTeX and unit live here.

_SYMBOLS: dict[str, tuple[str, str, bool]] = {
    # key: (LaTeX, SI unit, integer-valued)
    # roofline
    "prompt_tokens": (r"n", "tokens", False),
    "batch": (r"B", "sequences", False),
    "context_tokens": (r"n_{\mathrm{ctx}}", "tokens", False),
    "linear_params": (r"N_{\mathrm{lin}}", "params", False),
    "vocab_size": (r"V", "tokens", False),
    "hidden_size": (r"h", "", False),
    "num_heads": (r"n_{h}", "", False),
    "num_layers": (r"L", "", True),
    "qk_head_dim": (r"d_{qk}", "", False),
    "v_head_dim": (r"d_{v}", "", False),
    "tp": (r"\mathrm{TP}", "GPUs", False),
    "peak_flops_per_s": (r"P_{\mathrm{lin}}", "FLOP/s", False),
    "gemm_mfu": (r"\mathrm{MFU}_{\mathrm{lin}}", "", False),
    "attention_peak_flops_per_s": (r"P_{16}", "FLOP/s", False),
    "mfu": (r"\mathrm{MFU}", "", False),
    "gemm_exposed_weight_fraction": (r"\phi", "", False),
    "memory_bandwidth_bytes_per_s": (r"\mathrm{BW}", "B/s", False),
    "mbu": (r"\mathrm{MBU}", "", False),
    "weight_bytes_per_gpu": (r"W", "B", False),
    "kv_bytes_per_token_per_gpu": (r"k_{\mathrm{gpu}}", "B", False),
    "activation_bytes_per_gpu": (r"A", "B", False),
    "comm_s": (r"t_{\mathrm{comm}}", "s", False),
    "overhead_s": (r"t_{\mathrm{oh}}", "s", False),
    "linear_flops": (r"F_{\mathrm{lin}}", "FLOP", False),
    "attention_flops": (r"F_{\mathrm{att}}", "FLOP", False),
    "compute_s": (r"t_{\mathrm{compute}}", "s", False),
    "memory_s": (r"t_{\mathrm{memory}}", "s", False),
    "bytes_moved": (r"D", "B", False),
    # KV bytes
    "num_kv_heads": (r"n_{kv}", "", False),
    "head_dim": (r"d", "", False),
    "kv_lora_rank": (r"r_{kv}", "", False),
    "qk_rope_head_dim": (r"d_{\mathrm{rope}}", "", False),
    "kv_element_bytes": (r"b", "B", False),
    # KV transfer
    "kv_bytes": (r"K", "B", False),
    "link_latency_s": (r"\alpha", "s", False),
    "lanes": (r"m", "lanes", False),
    "link_bandwidth_bytes_per_s": (r"\mathrm{bw}", "B/s", False),
    "link_efficiency": (r"\varepsilon", "", False),
    "prefill_s": (r"t_{\mathrm{pre}}", "s", False),
    "per_layer_transfer_s": (r"t_{l}", "s", False),
    # all-reduce
    "message_bytes": (r"M", "B", False),
    "n_gpus": (r"p", "GPUs", False),
    "allreduce_latency_s": (r"\alpha_{\mathrm{AR}}", "s", False),
    "allreduce_bandwidth_bytes_per_s": (r"\beta", "B/s", False),
    # queueing
    "rate_rps": (r"\lambda", "1/s", False),
    "mean_service_s": (r"\mathrm{E}[S]", "s", False),
    "scv_service": (r"c_{s}^{2}", "", False),
    "utilisation": (r"\rho", "", False),
    "service_rate_per_s": (r"\mu", "1/s", False),
    "servers": (r"c", "servers", True),
    "offered_load": (r"a", "Erlang", False),
    "erlang_p": (r"P_{c}", "", False),
    # decode batch and colocated
    "mean_output_tokens": (r"\mathrm{E}[O]", "tokens", False),
    "step_time_intercept_s": (r"t_{0}", "s", False),
    "step_time_slope_s": (r"t_{1}", "s", False),
    "batch_star": (r"B^{*}", "sequences", False),
    "decode_step_s": (r"t_{\mathrm{dec}}", "s", False),
    "rate_per_replica_rps": (r"\lambda_{r}", "1/s", False),
    "mean_prefill_s": (r"\mathrm{E}[S_{p}]", "s", False),
    "prefill_utilisation": (r"\rho_{p}", "", False),
    # thresholds
    "slack_s": (r"t_{\mathrm{slack}}", "s", False),
    "prefill_s_per_token": (r"s_{\mathrm{tok}}", "s", False),
    "kv_bytes_per_token": (r"k", "B", False),
    "tpot_slo_s": (r"T_{\mathrm{TPOT}}", "s", False),
    "wait_budget_s": (r"W_{\max}", "s", False),
}


@cache
def _sym(key: str) -> sp.Symbol:
    """The shared Symbol for value ``key`` (positive; integer where the quantity is a count)."""
    if key not in _SYMBOLS:
        raise KeyError(key)  # programming error inside this module, not user input
    integer = _SYMBOLS[key][2]
    return sp.Symbol(key, positive=True, integer=integer) if integer else sp.Symbol(key, positive=True)


def _latex_names() -> dict[sp.Symbol, str]:
    return {_sym(k): v[0] for k, v in _SYMBOLS.items()}


def _unit(key: str) -> str:
    return _SYMBOLS[key][1]


# Erlang C shown as a named function C(c, a); evaluated by model.queueing.mgc.erlang_c (log-space exact).
_ERLANG_C = implemented_function(sp.Function("C"), lambda c, a: float(erlang_c(c, a)))

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


# ----------------------------------------------------------------------------------------------
# Formula


def _check_value(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise InputError(key, value, "a finite real number")
    v = float(value)
    if not math.isfinite(v):
        raise InputError(key, value, "a finite real number")
    return v


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
            v = _check_value(key, values[key])
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
        lines = self._lines(_latex_names(), None)
        if self.condition is not None:
            cond = sp.latex(self.condition, symbol_names=_latex_names(), order=self.order)
            lines[0] = (lines[0][0], lines[0][1] + rf" \qquad ({cond})")
        return _aligned([f"{lhs} &= {rhs}" for lhs, rhs in lines])

    def latex_substituted(self, values: Mapping[str, object]) -> str:
        """The formula with the numbers of ``values`` put in, ending "= <result with unit>"."""
        args = self._inputs(values)
        names = _latex_names()
        numbers = dict(zip(self._args, args, strict=True))
        for k, v in numbers.items():
            names[self.symbols[k]] = _latex_number(float(v))
        where_vals = [float(fn(*args)) for fn in self._where_fns]
        for (_key, sym, _d), v in zip(self.where, where_vals, strict=True):
            names[sym] = _latex_number(v)
        symbolic = self._lines(_latex_names(), None)
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


def _formula(
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
    where_t = tuple((k, _sym(k), d) for k, d in where)
    units = {k: _unit(k) for k in keys} | {k: _unit(k) for k, _s, _d in where_t}
    lhs = _SYMBOLS[lhs_key_or_latex][0] if lhs_key_or_latex in _SYMBOLS else lhs_key_or_latex
    return Formula(
        name=name,
        description=description,
        expr=expr,
        symbols={k: _sym(k) for k in keys},
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


# ----------------------------------------------------------------------------------------------
# The formulas (built once, lazily).

_ROOFLINE_INPUTS = (
    "linear_params",
    "vocab_size",
    "hidden_size",
    "num_heads",
    "num_layers",
    "qk_head_dim",
    "v_head_dim",
    "tp",
    "peak_flops_per_s",
    "gemm_mfu",
    "attention_peak_flops_per_s",
    "mfu",
    "gemm_exposed_weight_fraction",
    "weight_bytes_per_gpu",
    "kv_bytes_per_token_per_gpu",
    "activation_bytes_per_gpu",
    "memory_bandwidth_bytes_per_s",
    "mbu",
    "comm_s",
    "overhead_s",
)


def _roofline_time(
    linear_flops: sp.Expr, attention_flops: sp.Expr, bytes_moved: sp.Expr
) -> tuple[sp.Expr, list[tuple[str, sp.Expr]]]:
    """max(compute, memory) + comm + overhead, with its definitions (model.physics.roofline._step)."""
    s = _sym
    stream_bw = s("memory_bandwidth_bytes_per_s") * s("mbu")
    compute = (
        s("linear_flops") / (s("tp") * s("peak_flops_per_s") * s("gemm_mfu"))
        + s("gemm_exposed_weight_fraction") * s("weight_bytes_per_gpu") / stream_bw
        + s("attention_flops") / (s("tp") * s("attention_peak_flops_per_s") * s("mfu"))
    )
    memory = s("bytes_moved") / stream_bw
    expr = sp.Max(s("compute_s"), s("memory_s")) + s("comm_s") + s("overhead_s")
    where = [
        ("compute_s", compute),
        ("memory_s", memory),
        ("linear_flops", linear_flops),
        ("attention_flops", attention_flops),
        ("bytes_moved", bytes_moved),
    ]
    return expr, where


_ROOFLINE_SOURCE = (
    "Roofline (Williams, Waterman & Patterson 2009, CACM 52(4)); FLOPs 2N per token (Kaplan et al. 2020, "
    "sec. 2.1); causal attention n(n+1)/2 key pairs (FlashAttention, Dao 2023); weights read once per "
    "step (Pope et al. 2022, sec. 2); TP split (Megatron-LM, Shoeybi et al. 2019); small-GEMM "
    "efficiency MFU x T / (T + T_half) in additive form (model.physics.roofline.gemm_mfu_at)."
)


@cache
def _prefill_time() -> Formula:
    s = _sym
    n = s("prompt_tokens")
    lin = 2 * s("linear_params") * n + 2 * s("vocab_size") * s("hidden_size")
    att = s("num_heads") * s("num_layers") * (s("qk_head_dim") + s("v_head_dim")) * n * (n + 1)
    mem = s("weight_bytes_per_gpu") + 2 * n * s("kv_bytes_per_token_per_gpu") + s("activation_bytes_per_gpu")
    expr, where = _roofline_time(lin, att, mem)
    return _formula(
        "prefill_time",
        "Prefill of one prompt of n tokens on one instance (roofline).",
        r"t_{\mathrm{prefill}}",
        expr,
        ("prompt_tokens", *_ROOFLINE_INPUTS),
        _ROOFLINE_SOURCE
        + " Numeric: model.physics.roofline.prefill_cost (batch 1, no cached prefix, PP = 1).",
        result_unit="s",
        where=where,
        assumptions=(
            "One prompt, no prefix cache, PP = 1. N_lin = active non-embedding parameters; only the last "
            "token needs the LM head (2 V h). Linear layers run at the weight format's peak P_lin x "
            "MFU_lin (MFU x 0.7 for 8/4-bit GEMMs), plus phi W / (BW MBU) for the weight loads small "
            "GEMMs do not hide (phi = model.physics.roofline.GEMM_EXPOSED_WEIGHT_FRACTION); attention "
            "runs at "
            "the 16-bit peak. The KV is written and "
            "read once (2 n k_gpu); A is the activation traffic (embedding rows, layer inputs/outputs, "
            "logits). t_comm = TP all-reduces (formula allreduce_ring), t_oh = step overhead + eager "
            "kernel launches."
        ),
    )


@cache
def _decode_step_time() -> Formula:
    s = _sym
    b, ctx = s("batch"), s("context_tokens")
    lin = 2 * s("linear_params") * b + 2 * s("vocab_size") * s("hidden_size") * b
    att = 2 * s("num_heads") * s("num_layers") * (s("qk_head_dim") + s("v_head_dim")) * b * ctx
    mem = (
        s("weight_bytes_per_gpu")
        + b * (ctx + 1) * s("kv_bytes_per_token_per_gpu")
        + s("activation_bytes_per_gpu")
    )
    expr, where = _roofline_time(lin, att, mem)
    return _formula(
        "decode_step_time",
        "One decode step: B sequences each emit one token attending to n_ctx keys (roofline).",
        r"t_{\mathrm{step}}",
        expr,
        ("batch", "context_tokens", *_ROOFLINE_INPUTS),
        _ROOFLINE_SOURCE + " KV read B n_ctx, written B (Kwon et al. 2023, PagedAttention). Numeric: "
        "model.physics.roofline.decode_step_cost (PP = 1).",
        result_unit="s",
        where=where,
        assumptions=(
            "PP = 1. MLA models attend over the latent (absorbed projections): d_qk = r_kv + d_rope, "
            "d_v = r_kv. MoE: W counts the expected distinct experts the batch touches."
        ),
    )


@cache
def _kv_bytes_gqa() -> Formula:
    s = _sym
    expr = 2 * s("num_layers") * s("num_kv_heads") * s("head_dim") * s("kv_element_bytes")
    return _formula(
        "kv_bytes_per_token_gqa",
        "KV-cache bytes one token adds (MHA/GQA/MQA): K and V per layer per KV head.",
        r"k_{\mathrm{GQA}}",
        expr,
        ("num_layers", "num_kv_heads", "head_dim", "kv_element_bytes"),
        "Pope et al. 2022, 'Efficiently Scaling Transformer Inference', sec. 2; Ainslie et al. 2023 (GQA). "
        "Numeric: model.llm.arch.kv_bytes_per_token.",
        result_unit="B",
    )


@cache
def _kv_bytes_mla() -> Formula:
    s = _sym
    expr = s("num_layers") * (s("kv_lora_rank") + s("qk_rope_head_dim")) * s("kv_element_bytes")
    return _formula(
        "kv_bytes_per_token_mla",
        "KV-cache bytes one token adds (MLA): the compressed latent and the shared RoPE key per layer.",
        r"k_{\mathrm{MLA}}",
        expr,
        ("num_layers", "kv_lora_rank", "qk_rope_head_dim", "kv_element_bytes"),
        "DeepSeek-V2 (DeepSeek-AI 2024), sec. 2.1.3. Numeric: model.llm.arch.kv_bytes_per_token.",
        result_unit="B",
    )


def _transfer_whole_expr() -> sp.Expr:
    s = _sym
    return s("link_latency_s") + s("kv_bytes") / (
        s("lanes") * s("link_bandwidth_bytes_per_s") * s("link_efficiency")
    )


def _per_layer_expr() -> sp.Expr:
    s = _sym
    return s("link_latency_s") + s("kv_bytes") / (
        s("num_layers") * s("lanes") * s("link_bandwidth_bytes_per_s") * s("link_efficiency")
    )


def _tail_expr(per_layer: sp.Expr) -> sp.Expr:
    s = _sym
    return s("num_layers") * per_layer - s("prefill_s") + s("prefill_s") / s("num_layers")


_TRANSFER_INPUTS = ("kv_bytes", "link_latency_s", "lanes", "link_bandwidth_bytes_per_s", "link_efficiency")
_TRANSFER_SOURCE = (
    "Alpha-beta model (Hockney 1994, Parallel Computing 20(3)); lanes = min(TP_p, TP_d), each TP rank "
    "sends its own heads' KV (Splitwise, Patel et al. ISCA 2024, sec. 4.3; Mooncake transfer engine)."
)


@cache
def _kv_transfer_whole() -> Formula:
    return _formula(
        "kv_transfer_whole",
        "KV transfer of a whole request after its prefill (exposed in full).",
        r"t_{\mathrm{xfer}}",
        _transfer_whole_expr(),
        _TRANSFER_INPUTS,
        _TRANSFER_SOURCE + " Numeric: model.serving.disaggregated.transfer_components (whole-request).",
        result_unit="s",
        assumptions="One message per request; bw is one lane's line rate, epsilon its achievable fraction.",
    )


@cache
def _kv_transfer_layerwise() -> Formula:
    s = _sym
    t_l = s("per_layer_transfer_s")
    expr = sp.Max(t_l, _tail_expr(t_l))
    return _formula(
        "kv_transfer_layerwise",
        "Exposed KV transfer time with layer-wise sending pipelined behind the prefill.",
        r"t_{\mathrm{exposed}}",
        expr,
        (*_TRANSFER_INPUTS, "num_layers", "prefill_s"),
        "Splitwise (Patel et al. ISCA 2024), sec. 4.3: layer l's KV is sent while layers l+1..L compute. "
        "With per-layer compute t_pre / L and per-layer transfer t_l, the last layer's KV lands at "
        "t_pre + t_l when t_l <= t_pre / L, else t_pre / L + L t_l. Numeric: "
        "model.serving.disaggregated.transfer_components (layer-wise).",
        result_unit="s",
        where=[("per_layer_transfer_s", _per_layer_expr())],
        assumptions="L equal layers, one message per layer, prefill compute spread evenly over the layers.",
        order=None,
    )


@cache
def _allreduce_ring() -> Formula:
    s = _sym
    p = s("n_gpus")
    per_step = s("allreduce_latency_s") + s("message_bytes") / (p * s("allreduce_bandwidth_bytes_per_s"))
    expr = sp.Mul(2, p - 1, per_step, evaluate=False)
    return _formula(
        "allreduce_ring",
        "One ring all-reduce of M bytes over p GPUs (reduce-scatter + all-gather).",
        r"t_{\mathrm{AR}}",
        expr,
        ("message_bytes", "n_gpus", "allreduce_latency_s", "allreduce_bandwidth_bytes_per_s"),
        "Patarasuk & Yuan 2009, JPDC 69(2); NCCL tests' busbw = algbw 2(p-1)/p. "
        "Numeric: model.hardware.collectives.allreduce_time_s.",
        result_unit="s",
        assumptions="beta = achievable per-direction bandwidth of one GPU (line rate x efficiency).",
        order=None,
    )


@cache
def _mg1_wait() -> Formula:
    s = _sym
    rho = s("utilisation")
    expr = rho * s("mean_service_s") * (1 + s("scv_service")) / sp.Mul(2, 1 - rho, evaluate=False)
    return _formula(
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
    s = _sym
    lam, mu, c = s("rate_rps"), s("service_rate_per_s"), s("servers")
    expr = _ERLANG_C(c, s("offered_load")) / (c * mu - lam)
    return _formula(
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
    s = _sym
    c, a = s("servers"), s("offered_load")
    k = sp.Symbol("k", integer=True, nonnegative=True)
    expr = s("erlang_p") / (sp.Sum(a**k / sp.factorial(k), (k, 0, c - 1)) + s("erlang_p"))
    with sp.evaluate(False):
        top = a**c / sp.factorial(c) * (c / (c - a))
    return _formula(
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


def _tidy(expr: sp.Expr) -> sp.Expr:
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


def _solve_for(lhs: sp.Expr, rhs: sp.Expr, var: sp.Symbol) -> sp.Expr:
    """The one solution of lhs = rhs for ``var`` (sympy.solve), simplified and tidied for display."""
    sols = sp.solve(sp.Eq(lhs, rhs), var)
    if len(sols) != 1:
        raise RuntimeError(f"expected one solution for {var}, sympy gave {sols}")  # internal
    return _tidy(sp.simplify(sols[0]))


def _batch_fixed_point() -> tuple[sp.Expr, sp.Expr]:
    """(B*, TPOT) of B = lambda_r E[O] (t0 + t1 B) / (1 - rho_p), solved by sympy (rho_p = 0: decode pool)."""
    s = _sym
    b = sp.Symbol("B_fixed", positive=True)
    demand = s("rate_rps") * s("mean_output_tokens")
    b_star = _solve_for(b, demand * (s("step_time_intercept_s") + s("step_time_slope_s") * b), b)
    return b_star, s("step_time_intercept_s") + s("step_time_slope_s") * s("batch_star")


_LITTLE_SOURCE = (
    "Little's law on the batch (Little 1961, Oper. Res. 9(3)) with iteration-level batching (Orca, Yu "
    "et al. OSDI 2022): B = lambda E[O] tau(B), tau(B) = t0 + t1 B. Numeric: model.batching.decode_pool, "
    "model.queueing.decode_batch.solve_batch."
)


@cache
def _decode_batch() -> Formula:
    s = _sym
    b_star, _tpot = _batch_fixed_point()
    return _formula(
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
    s = _sym
    b_star, tpot = _batch_fixed_point()
    return _formula(
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
    s = _sym
    rho = s("prefill_utilisation")
    return _formula(
        "colocated_stall_inflation",
        "Colocated (unchunked) decode per-token time: decodes run only in the time prefill leaves.",
        r"\tau",
        s("decode_step_s") / (1 - rho),
        ("decode_step_s", "rate_per_replica_rps", "mean_prefill_s"),
        "DistServe (Zhong et al. OSDI 2024), sec. 2.2: a prefill pre-empts the running decodes. Numeric: "
        "model.serving.colocated.evaluate_colocated (unchunked).",
        result_unit="s",
        where=[("prefill_utilisation", s("rate_per_replica_rps") * s("mean_prefill_s"))],
        condition=rho < 1,
        condition_text="prefill utilisation >= 1: decodes starve",
        assumptions="Prefill-first scheduling (vLLM default without chunking); lambda_r per replica.",
    )


@cache
def _colocated_tpot() -> Formula:
    s = _sym
    b = sp.Symbol("B_fixed", positive=True)
    lam = s("rate_per_replica_rps")
    rho = lam * s("mean_prefill_s")
    tau = (s("step_time_intercept_s") + s("step_time_slope_s") * b) / (1 - rho)
    b_star = _solve_for(b, lam * s("mean_output_tokens") * tau, b)
    tpot = _tidy(sp.simplify(tau.subs(b, b_star)))
    return _formula(
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


_BUILDERS: dict[str, Callable[[], Formula]] = {
    "prefill_time": _prefill_time,
    "decode_step_time": _decode_step_time,
    "kv_bytes_per_token_gqa": _kv_bytes_gqa,
    "kv_bytes_per_token_mla": _kv_bytes_mla,
    "kv_transfer_whole": _kv_transfer_whole,
    "kv_transfer_layerwise": _kv_transfer_layerwise,
    "allreduce_ring": _allreduce_ring,
    "mg1_wait": _mg1_wait,
    "mmc_wait": _mmc_wait,
    "erlang_c": _erlang_c_explicit,
    "decode_batch": _decode_batch,
    "decode_tpot": _decode_tpot,
    "colocated_stall_inflation": _colocated_inflation,
    "colocated_tpot": _colocated_tpot,
}


def formula(name: str) -> Formula:
    """The formula called ``name`` (see :func:`all_formulas` for the list)."""
    if name not in _BUILDERS:
        raise InputError("formula", name, "one of " + ", ".join(_BUILDERS))
    return _BUILDERS[name]()


def all_formulas() -> list[Formula]:
    """Every formula in display order (phase cost, communication, queueing, batching, colocated)."""
    return [build() for build in _BUILDERS.values()]


def latex_block(formulas: Iterable[Formula], values: Mapping[str, object] | None = None) -> str:
    """Markdown for Streamlit's ``st.markdown``: per formula a bold title, its description and a
    ``$$ ... $$`` block, substituted when ``values`` holds every input it needs (else symbolic)."""
    parts = []
    for f in formulas:
        if not isinstance(f, Formula):
            raise InputError("formulas", f, "Formula objects (see model.symbolic.formulas.all_formulas)")
        complete = values is not None and all(k in values for k in f.symbols)
        body = f.latex_substituted(values) if complete and values is not None else f.latex()
        parts.append(f"**{f.name}**: {f.description}\n\n$$\n{body}\n$$\n\n*Source:* {f.source}\n")
    return "\n".join(parts)


# ----------------------------------------------------------------------------------------------
# Values from a deployment (for the "Show the math" panel).


def _roofline_values(dep: Deployment, cost: _CostView) -> dict[str, float]:
    from model.llm.arch import active_params, embedding_params
    from model.physics.deployment import GEMM_EXPOSED_WEIGHT_FRACTION
    from model.physics.operators import attention_dims as _attention_dims

    arch = dep.arch
    return {
        "linear_params": float(active_params(arch) - embedding_params(arch)),
        "vocab_size": float(arch.vocab_size),
        "hidden_size": float(arch.hidden_size),
        "num_heads": float(arch.num_heads),
        "num_layers": float(arch.num_layers),
        "tp": float(dep.tp),
        "peak_flops_per_s": float(dep.peak_flops_per_s),
        "gemm_mfu": float(dep.gemm_mfu),
        "attention_peak_flops_per_s": float(dep.attention_peak_flops_per_s),
        "mfu": float(dep.mfu),
        "gemm_exposed_weight_fraction": float(GEMM_EXPOSED_WEIGHT_FRACTION),
        "weight_bytes_per_gpu": float(np.asarray(cost.weight_bytes)),
        "kv_bytes_per_token_per_gpu": float(dep.kv_bytes_per_token_per_gpu),
        "activation_bytes_per_gpu": float(np.asarray(cost.activation_bytes)),
        "memory_bandwidth_bytes_per_s": float(dep.gpu.memory_bandwidth_bytes_per_s),
        "mbu": float(dep.mbu),
        "comm_s": float(np.asarray(cost.comm_s)),
        "overhead_s": float(np.asarray(cost.overhead_s)),
    } | dict(zip(("qk_head_dim", "v_head_dim"), _attention_dims(arch, absorbed=cost.absorbed), strict=True))


def _scalar(name: str, value: object, minimum: float) -> float:
    v = _check_value(name, value)
    if v < minimum:
        raise InputError(name, value, f"a number >= {minimum:g}")
    return v


@dataclass(frozen=True)
class _CostView:
    weight_bytes: float
    activation_bytes: float
    comm_s: float
    overhead_s: float
    absorbed: bool


def prefill_values(dep: Deployment, prompt_tokens: float) -> dict[str, float]:
    """Values for :func:`formula` ``"prefill_time"`` from a model.physics.roofline.Deployment (PP = 1).

    W, A, t_comm and t_oh are taken from model.physics.roofline.prefill_cost; the rest from the deployment.
    """
    from model.physics.steps import prefill_cost

    if int(dep.pp) != 1:
        raise InputError("pp", dep.pp, "1 (the symbolic roofline shows one pipeline stage)")
    n = _scalar("prompt_tokens", prompt_tokens, 1)
    cost = prefill_cost(dep, n)
    view = _CostView(
        float(cost.weight_bytes),
        float(cost.activation_bytes),
        float(cost.comm_s),
        float(cost.overhead_s),
        False,
    )
    return _roofline_values(dep, view) | {"prompt_tokens": n}


def decode_values(dep: Deployment, batch: float, context_tokens: float) -> dict[str, float]:
    """Values for :func:`formula` ``"decode_step_time"`` from a model.physics.roofline.Deployment (PP = 1)."""
    from model.physics.steps import decode_step_cost

    if int(dep.pp) != 1:
        raise InputError("pp", dep.pp, "1 (the symbolic roofline shows one pipeline stage)")
    b = _scalar("batch", batch, 1)
    ctx = _scalar("context_tokens", context_tokens, 1)
    cost = decode_step_cost(dep, b, ctx)
    view = _CostView(
        float(cost.weight_bytes),
        float(cost.activation_bytes),
        float(cost.comm_s),
        float(cost.overhead_s),
        True,
    )
    return _roofline_values(dep, view) | {"batch": b, "context_tokens": ctx}


# ----------------------------------------------------------------------------------------------
# Closed-form thresholds.


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
    return sp.lambdify([_sym(k) for k in args], expr, modules=["math"])


# Branches of the exposed transfer time: (name, expression in the inputs).
def _transfer_branches(layerwise: bool) -> list[tuple[str, sp.Expr]]:
    if not layerwise:
        return [("whole-request transfer", _transfer_whole_expr())]
    per_layer = _per_layer_expr()
    return [("per-layer transfer", per_layer), ("pipeline tail", _tail_expr(per_layer))]


_BW_ARGS = ("kv_bytes", "slack_s", "link_latency_s", "lanes", "link_efficiency", "num_layers", "prefill_s")


@cache
def _bandwidth_solutions(layerwise: bool) -> tuple[tuple[str, Callable, Callable], ...]:
    """Per branch: (name, bw solving branch = slack, branch's limit as bw -> infinity)."""
    bw = _sym("link_bandwidth_bytes_per_s")
    out = []
    for name, expr in _transfer_branches(layerwise):
        sol = _solve_for(expr, _sym("slack_s"), bw)
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
    slack = _scalar("slack_s", slack_s, 0.0)
    lat = _scalar("latency_s", latency_s, 0.0)
    m = _scalar("lanes", lanes, 1.0)
    eff = _check_value("efficiency", efficiency)
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
        pre = _scalar("prefill_s", prefill, 0.0)
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
    k = _scalar("kv_bytes", kv_bytes, 0.0)
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
    n = _sym("prompt_tokens")
    subs = {
        _sym("kv_bytes"): n * _sym("kv_bytes_per_token"),
        _sym("prefill_s"): n * _sym("prefill_s_per_token"),
    }
    out = []
    for name, expr in _transfer_branches(layerwise):
        g = sp.expand(expr.subs(subs))
        out.append(
            (
                name,
                _lam(_TOK_ARGS, _solve_for(g, _sym("slack_s"), n)),
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
    bw = _scalar("bandwidth_bytes_per_s", bandwidth_bytes_per_s, 0.0)
    if bw <= 0:
        raise InputError("bandwidth_bytes_per_s", bandwidth_bytes_per_s, "a bandwidth > 0 bytes/s")
    k = _scalar("kv_bytes_per_token", kv_bytes_per_token, 0.0)
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
    s = _sym
    lam = s("rate_per_replica_rps")
    tpot = formula("colocated_tpot").expr
    at_slo = _solve_for(tpot, s("tpot_slo_s"), lam)
    b_star = lam * s("mean_output_tokens") * tpot  # Little: B = lambda E[O] TPOT
    at_cap = _solve_for(b_star, s("batch"), lam)
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
    t0v = _scalar("t0", t0, 0.0)
    t1v = _scalar("t1", t1, 0.0)
    eo = _scalar("mean_output_tokens", mean_output_tokens, 0.0)
    if eo <= 0:
        raise InputError("mean_output_tokens", mean_output_tokens, "a number of tokens > 0")
    slo = _scalar("tpot_slo_s", tpot_slo_s, 0.0)
    if slo <= 0:
        raise InputError("tpot_slo_s", tpot_slo_s, "a time > 0 s")
    es_p = _scalar("mean_prefill_s", mean_prefill_s, 0.0)
    cap = None if max_batch is None else _scalar("max_batch", max_batch, 1.0)
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
    s = _sym
    f = formula("mg1_wait")
    lam = _solve_for(f.full_expr, s("wait_budget_s"), s("rate_rps"))
    return _lam(("mean_service_s", "scv_service", "wait_budget_s"), lam)


def max_rate_for_wait(mean_service_s: float, scv_service: float, wait_budget_s: float) -> Threshold:
    """Highest arrival rate (req/s) of an M/G/1 queue whose Pollaczek-Khinchine mean wait <= budget.

    lambda E[S]^2 (1 + c_s^2) / (2 (1 - lambda E[S])) = W_max
    -> lambda = 2 W_max / (E[S]^2 (1 + c_s^2) + 2 W_max E[S])  (below 1 / E[S], so stable).
    """
    es = _scalar("mean_service_s", mean_service_s, 0.0)
    if es <= 0:
        raise InputError("mean_service_s", mean_service_s, "a time > 0 s")
    scv = _scalar("scv_service", scv_service, 0.0)
    budget = _scalar("wait_budget_s", wait_budget_s, 0.0)
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
    s = _sym
    out = []
    bw = _sym("link_bandwidth_bytes_per_s")
    for layerwise in (False, True):
        for name, expr in _transfer_branches(layerwise):
            sol = _solve_for(expr, s("slack_s"), bw)
            keys = sorted((str(x) for x in sol.free_symbols), key=_BW_ARGS.index)
            out.append(
                _formula(
                    "break_even_bandwidth_" + name.replace(" ", "_").replace("-", "_"),
                    f"Link line rate per lane at which the {name} equals the slack.",
                    r"\mathrm{bw}^{*}",
                    sol,
                    keys,
                    "Solved by sympy from kv_transfer_whole / kv_transfer_layerwise. "
                    "Used by model.symbolic.formulas.break_even_bandwidth.",
                    result_unit="B/s",
                )
            )
    lam = s("rate_per_replica_rps")
    tpot = formula("colocated_tpot").expr
    sol = _solve_for(tpot, s("tpot_slo_s"), lam)
    out.append(
        _formula(
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
            "Solved by sympy from colocated_tpot. Used by model.symbolic.formulas.max_rate_for_tpot.",
            result_unit="1/s",
        )
    )
    f = formula("mg1_wait")
    sol = _solve_for(f.full_expr, s("wait_budget_s"), s("rate_rps"))
    out.append(
        _formula(
            "max_rate_for_wait",
            "Arrival rate at which the M/G/1 mean wait reaches the budget.",
            r"\lambda^{*}",
            sol,
            ("mean_service_s", "scv_service", "wait_budget_s"),
            "Solved by sympy from mg1_wait. Used by model.symbolic.formulas.max_rate_for_wait.",
            result_unit="1/s",
        )
    )
    return out
