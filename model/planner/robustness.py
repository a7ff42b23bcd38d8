"""Verdict robustness: how often each style wins across the model's own measured error.

The verdict compares two goodputs that each carry the roofline's error. This module redraws the
phase costs within the error distribution of the published-measurement table
(model/planner/data/model_errors.json, written by benchmarks/model_errors.py): each "plausible
world" multiplies every prefill time by one factor, every decode step time by another (both drawn
from the empirical log(measured / predicted) of the table's prefill and decode rows, so collective,
overhead and kernel errors are inside them), and the KV link's bandwidth by a third (log-uniform
within +-``LINK_LOG_SPREAD``; no link rows yet). The draws are a Latin hypercube (McKay, Beckman
and Conover, Technometrics 1979): each factor's range is cut into D equal-probability strata,
each stratum is sampled once, and the strata are paired at random; an empirical quantile function
(linear interpolation between order statistics) maps them to factors.

The configurations are held fixed at the plan's best of each style and re-searched for goodput
in every world (one vectorised bisection per style over all D worlds), so the result says how
sure the verdict between *these* configurations is, not whether another split would then be best.
In each world the verdict's rules are applied to those goodputs: disaggregated against the better
colocated style of that world by the margin (model.planner.verdict), and among the colocated styles
the engines' default unless another is ahead by the margin (model.planner.colocated_rule).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from model.errors import InputError
from model.limits import check_int
from model.planner.colocated_rule import default_colocated, pick_colocated, style_lead
from model.planner.goodput import Brackets, goodput_brackets
from model.planner.types import Plan
from model.planner.verdict import family_best
from model.serving.registry import build_set, style_of
from model.serving.style import CandidateSet
from model.workload.slo import SLO

__all__ = ["ErrorModel", "Robustness", "error_model", "robustness", "world_factors"]

ERRORS_FILE = Path(__file__).resolve().parent / "data" / "model_errors.json"
DEFAULT_DRAWS = 128
MAX_DRAWS = 4096
LINK_LOG_SPREAD = float(np.log(1.25))
"""Assumed spread of achieved KV-link bandwidth: within a factor 1.25 either way of the profile's
line rate x efficiency (log-uniform). An assumption, not a measurement: the table has no link rows."""


TAIL_QUANTILES = (0.1, 0.9)
"""The part of each empirical error distribution the worlds are drawn from. The outer 10% on each
side are rows with terms the roofline does not have yet (client-side TTFT with tens of ms of serving
overhead on a tiny prefill, up to 32x; issue 16), which would otherwise dominate every verdict."""


@dataclass(frozen=True)
class ErrorModel:
    """Signed log errors log(measured / predicted) of the measurement table, per phase."""

    prefill_log_ratios: tuple[float, ...]
    decode_log_ratios: tuple[float, ...]
    link_log_spread: float
    source: str


@dataclass(frozen=True)
class Robustness:
    """The verdict across ``draws`` plausible worlds (budget mode: goodput ratio; target-rate mode:
    whether each family's chosen configuration still reaches the target rate)."""

    draws: int
    colocated_label: str
    disaggregated_label: str
    p_neither: float  # share of the worlds where neither style meets the SLOs at any rate
    # The rest are over the worlds where at least one style meets them:
    p_disaggregated_better: float  # P(disaggregated goodput > colocated goodput)
    p_disaggregated_recommended: float  # P(disaggregated ahead by the margin)
    p_colocated_recommended: float  # P(not disaggregated by the margin): the colocated verdict
    ratio_p5: float  # disaggregated / colocated goodput, 5th percentile over the worlds
    ratio_p50: float
    ratio_p95: float
    p_colocated_meets_target: float | None  # target-rate mode only
    p_disaggregated_meets_target: float | None
    source: str
    # (style, share of the worlds where at least one style meets the SLOs in which the rules name
    # it), every style of the plan's best in registration order
    p_style_recommended: tuple[tuple[str, float], ...] = ()

    @property
    def summary(self) -> str:
        """One line, e.g. "disaggregated wins in 83% of plausible worlds (goodput ratio 0.95-1.31)"."""
        neither = f"; neither meets the SLOs in {self.p_neither:.0%}" if self.p_neither > 0 else ""
        named = ", ".join(f"{s} {p:.0%}" for s, p in self.p_style_recommended)
        return (
            f"disaggregated is ahead by the margin in {self.p_disaggregated_recommended:.0%} of "
            f"{self.draws} plausible worlds and better at all in {self.p_disaggregated_better:.0%} "
            f"(disaggregated / colocated goodput {self.ratio_p5:.2f}-{self.ratio_p95:.2f}, p5-p95; "
            f"median {self.ratio_p50:.2f}{neither})" + (f"; style recommended: {named}" if named else "")
        )


@lru_cache(maxsize=1)
def error_model() -> ErrorModel:
    """The committed error distribution (model/planner/data/model_errors.json)."""
    data = json.loads(ERRORS_FILE.read_text(encoding="utf-8"))
    groups = data["groups"]
    return ErrorModel(
        tuple(float(x) for x in groups["prefill"]["log_ratios"]),
        tuple(float(x) for x in groups["decode"]["log_ratios"]),
        LINK_LOG_SPREAD,
        str(data["source"]),
    )


def _quantile(log_ratios: tuple[float, ...], u: np.ndarray) -> np.ndarray:
    """Empirical quantile function (linear between order statistics) of the log ratios at ``u``,
    with ``u`` mapped into ``TAIL_QUANTILES`` (the outer tails are left out, see there)."""
    x = np.sort(np.asarray(log_ratios, dtype=float))
    lo, hi = TAIL_QUANTILES
    return np.interp(lo + (hi - lo) * u, np.linspace(0.0, 1.0, len(x)), x)


def world_factors(errors: ErrorModel, draws: int, seed: int = 0) -> np.ndarray:
    """[D, 3] multipliers (prefill time, decode step time, link bandwidth), one row per world,
    from a Latin hypercube of ``draws`` points (deterministic for a seed)."""
    rng = np.random.default_rng(seed)
    strata = np.stack([rng.permutation(draws) for _ in range(3)], axis=1)
    u = (strata + rng.random((draws, 3))) / draws
    return np.stack(
        [
            np.exp(_quantile(errors.prefill_log_ratios, u[:, 0])),
            np.exp(_quantile(errors.decode_log_ratios, u[:, 1])),
            np.exp(errors.link_log_spread * (2.0 * u[:, 2] - 1.0)),
        ],
        axis=1,
    )


def robustness(plan: Plan, draws: int = DEFAULT_DRAWS, seed: int = 0) -> Robustness:
    """The plan's verdict across ``draws`` plausible worlds of the model's measured error, e.g.
    ``model.robustness(model.plan("llama-3.1-70b", "h100-sxm", workload="chat", ttft_slo_s=0.5,
    tpot_slo_s=0.05, gpus=16)).summary``. Needs a best configuration of both families."""
    if not isinstance(plan, Plan):
        raise InputError("plan", type(plan).__name__, "a Plan from model.plan(...)")
    check_int("draws", draws, 2, MAX_DRAWS, "each world is one goodput search per style")
    check_int("seed", seed, 0, 2**32 - 1, "the Latin hypercube's random seed")
    inp = plan.inputs
    col = family_best(inp, plan.best, "colocated")
    dis = family_best(inp, plan.best, "disaggregated")
    if col is None or dis is None:
        raise InputError(
            "plan", f"verdict {plan.verdict}", "a plan where both colocated and disaggregated meet the SLOs"
        )
    errors = error_model()
    factors = world_factors(errors, draws, seed)
    scn = inp.scenario
    cols = [n for n in plan.best if style_of(plan.best[n].config).family == "colocated"]
    sets = {n: build_set(scn, [b.config]).perturbed(factors) for n, b in plan.best.items()}
    g = _decided_goodputs(sets, scn.slo, _Rules(cols, dis.style, inp.margin, inp.target_rate_rps))
    return _from_goodputs(plan, g, errors.source)


def _from_goodputs(plan: Plan, g: dict[str, np.ndarray], source: str) -> Robustness:
    """The result from each style's goodput per world ``g`` (the full searches' values, or
    :func:`_decided_goodputs`', which give the same result)."""
    inp = plan.inputs
    col = family_best(inp, plan.best, "colocated")
    dis = family_best(inp, plan.best, "disaggregated")
    cols = [n for n in g if style_of(plan.best[n].config).family == "colocated"]
    g_col = np.max([g[n] for n in cols], axis=0)  # the family rule: the better colocated style
    g_dis = g[dis.style]
    valid = (g_col > 0) | (g_dis > 0)  # worlds where at least one style meets the SLOs
    ratio = np.where(g_col > 0, g_dis / np.maximum(g_col, 1e-300), np.inf)[valid]
    target = inp.target_rate_rps
    meets = (
        (None, None) if target is None else (float(np.mean(g_col >= target)), float(np.mean(g_dis >= target)))
    )
    if not valid.any():
        ratio = np.array([np.nan])
    p5, p50, p95 = (float(v) for v in np.percentile(ratio, [5, 50, 95]))
    recommended = float(np.mean(ratio >= 1.0 + inp.margin)) if valid.any() else 0.0
    named = _named_per_world(g, cols, dis.style, inp.margin)[valid]
    shares = tuple((n, float(np.mean(named == n)) if valid.any() else 0.0) for n in g)
    return Robustness(
        draws=len(g_dis),
        colocated_label=col.label,
        disaggregated_label=dis.label,
        p_neither=float(np.mean(~valid)),
        p_disaggregated_better=float(np.mean(ratio > 1.0)) if valid.any() else 0.0,
        p_disaggregated_recommended=recommended,
        p_colocated_recommended=1.0 - recommended,
        ratio_p5=p5,
        ratio_p50=p50,
        ratio_p95=p95,
        p_colocated_meets_target=meets[0],
        p_disaggregated_meets_target=meets[1],
        source=source,
        p_style_recommended=shares,
    )


STAGES = (3, 6)
"""Halvings of every world's goodput bracket before the worlds the result does not read stop, and
of the rest before the next check (then the full search): see :func:`_decided_goodputs`."""


@dataclass(frozen=True)
class _Rules:
    """What the result reads from the worlds' goodputs: the colocated styles, the disaggregated one,
    the verdict's margin and the target rate (None on a budget)."""

    cols: list[str]
    dis: str
    margin: float
    target: float | None


def _decided_goodputs(sets: dict[str, CandidateSet], slo: SLO, rules: _Rules) -> dict[str, np.ndarray]:
    """Each style's goodput per world, as far as the result can tell: exactly the full search's value
    (model.planner.goodput) where the result reads it, elsewhere a good rate inside the world's
    bracket (the bracket's lower end) where every rule gives the same answer over the whole bracket.

    A world's bracket [lo, hi] holds its full search's value: the search only ever raises lo and lowers
    hi, and a resumed search walks on exactly as the uninterrupted one (Brackets). The rules are
    monotone in each goodput (floating-point division, max and comparison are), so the ratio
    disaggregated / colocated lies in [lo_d / max hi_c, hi_d / max lo_c], and a rule that answers the
    same at both ends answers the same at the value. Every world's bracket is halved ``STAGES[0]``
    times; then only the worlds a rule leaves open (:func:`_undecided`: the ratio's percentile ranks,
    the ratio against 1 and 1 + margin, the colocated rule's lead against the margin, the target)
    are searched on, ``STAGES[1]`` halvings, then fully, until no rule is open. The result computed
    from these values is the one computed from the full searches' values, bit for bit."""
    br = {n: goodput_brackets(s, slo, halvings=STAGES[0]) for n, s in sets.items()}
    stages = iter(STAGES[1:])
    while True:
        need = _undecided({n: _interval(b) for n, b in br.items()}, rules)
        rows = {n: np.nonzero(m & ~br[n].refined())[0] for n, m in need.items()}
        if not any(len(r) for r in rows.values()):
            return {n: b.value() for n, b in br.items()}
        most = next(stages, None)
        for n, r in rows.items():
            if len(r):
                kw = {} if most is None else {"halvings": most}
                part = goodput_brackets(sets[n].take(r), slo, resume=br[n].take(r), **kw)
                br[n] = _merged(br[n], r, part)


def _interval(b: Brackets) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) around each world's full-search goodput: the value itself once refined, 0 where even
    the probe fails."""
    v = b.value()
    return v, np.where(b.refined(), v, np.where(b.ok_min, b.hi, 0.0))


def _merged(b: Brackets, rows: np.ndarray, part: Brackets) -> Brackets:
    """``b`` with the states of ``rows`` replaced by ``part``'s."""
    out = [np.array(v) for v in (b.lo, b.hi, b.halvings, b.ok_min)]
    for dst, src in zip(out, (part.lo, part.hi, part.halvings, part.ok_min), strict=True):
        dst[rows] = src
    return Brackets(*out)


def _percentile_ranks(n: int) -> list[int]:
    """The order statistics (0-based) np.percentile's linear interpolation reads for p5, p50 and
    p95 of n values, with a neighbour either side against rounding of the position."""
    ranks: set[int] = set()
    for p in (5, 50, 95):
        pos = p / 100.0 * (n - 1)
        ranks.update(range(int(np.floor(pos)) - 1, int(np.ceil(pos)) + 2))
    return sorted(k for k in ranks if 0 <= k < n)


def _undecided(iv: dict[str, tuple[np.ndarray, np.ndarray]], rules: _Rules) -> dict[str, np.ndarray]:
    """Per style, the worlds [D] bool whose goodput bracket leaves a rule of the result open
    (:func:`_decided_goodputs`); ``iv`` = (lo, hi) per style."""
    lo, hi = {n: v[0] for n, v in iv.items()}, {n: v[1] for n, v in iv.items()}
    dis, cols, bar = rules.dis, rules.cols, 1.0 + rules.margin
    need = {n: np.zeros(len(lo[dis]), dtype=bool) for n in iv}
    col_lo, col_hi = np.max([lo[n] for n in cols], axis=0), np.max([hi[n] for n in cols], axis=0)

    def ratio_open(mask: np.ndarray) -> None:  # the disaggregated style and any colocated maximum
        need[dis] |= mask
        for n in cols:
            need[n] |= mask & (hi[n] >= col_lo)

    r_lo = np.where(col_hi > 0, lo[dis] / np.maximum(col_hi, 1e-300), np.inf)
    r_hi = np.where(col_lo > 0, hi[dis] / np.maximum(col_lo, 1e-300), np.inf)
    valid = (col_lo > 0) | (lo[dis] > 0)  # exact: a bracket's lo is > 0 where the probe holds
    wide = valid & (r_lo < r_hi)
    ratio_open(wide & (r_lo <= 1.0) & (r_hi > 1.0))
    ratio_open(wide & (r_lo < bar) & (r_hi >= bar))
    if valid.any():
        v_lo, v_hi = r_lo[valid], r_hi[valid]
        for k in _percentile_ranks(len(v_lo)):
            a, b = np.partition(v_lo, k)[k], np.partition(v_hi, k)[k]
            if a != b:  # the k-th smallest ratio lies in [a, b]: every world that may be it
                ratio_open(wide & (r_lo <= b) & (r_hi >= a))
    if rules.target is not None:
        t = rules.target
        for n in cols:
            need[n] |= (col_lo < t) & (t <= col_hi) & (hi[n] >= col_lo)
        need[dis] |= (lo[dis] < t) & (t <= hi[dis])
    # the colocated rule, where the disaggregated style may not be the one named
    dis_named = (lo[dis] > 0) & ((col_hi <= 0) | (r_lo >= bar))
    default = default_colocated()
    for w in np.nonzero(~dis_named)[0]:
        present = [n for n in cols if lo[n][w] > 0]
        if len(present) <= 1:
            continue
        if default in present and len(present) == 2:
            rival = present[0] if present[1] == default else present[1]
            least = style_lead(float(lo[rival][w]), float(hi[default][w]))
            most = style_lead(float(hi[rival][w]), float(lo[default][w]))
            if least >= rules.margin or most < rules.margin:
                continue
        for n in present:
            need[n][w] = True
    return need


def _named_per_world(g: dict[str, np.ndarray], cols: list[str], dis: str, margin: float) -> np.ndarray:
    """The style the rules name in each world from its goodputs: disaggregated when ahead of the
    better colocated style by the margin, else ``pick_colocated`` (model.planner.colocated_rule)."""
    out = []
    for w in range(len(g[dis])):
        best_col = max((g[n][w] for n in cols), default=0.0)
        if g[dis][w] > 0 and (best_col <= 0 or g[dis][w] / best_col >= 1.0 + margin):
            out.append(dis)
            continue
        pick = pick_colocated({n: float(g[n][w]) for n in cols if g[n][w] > 0}, margin)
        out.append(pick.style or "none")
    return np.array(out)
