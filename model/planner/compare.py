"""Two plans side by side: GPUs, goodput, cost per million output tokens, energy per output token
and verdict of each, and their differences (``model.compare``, ``pdplan compare``, the app's pinned
scenario).

Each side is the recommended configuration of a plan (its verdict's best, model.planner.verdict),
with its metrics at its goodput (model.serving.evaluation: energy and cost per output token are
GPU power x time and GPU price x time over the output tokens served). A side comes from a
:class:`~model.planner.types.Plan`, from `pdplan plan --json` output (or the app's results JSON,
which holds the same keys; read as is, not re-planned) or from an app scenario file (re-planned,
model.planner.scenario_file).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.errors import InputError, PdplanError, short
from model.planner.plan import plan as run_plan
from model.planner.scenario_file import is_scenario, read_json, scenario_request
from model.planner.types import Plan
from model.units import format_count, format_money, format_rate, format_si

# The metrics compared, in table order: (field of PlanSummary, label).
METRICS = (
    ("n_gpus", "GPUs"),
    ("goodput_rps", "goodput"),
    ("cost_usd_per_million_output_tokens", "cost per 1M output tokens"),
    ("energy_j_per_output_token", "energy per output token"),
)


@dataclass(frozen=True)
class PlanSummary:
    """One side of a comparison: the plan's verdict and its recommended configuration's numbers
    (None when the verdict is "none")."""

    source: str
    verdict: str
    label: str | None
    n_gpus: int | None
    goodput_rps: float | None
    cost_usd_per_hour: float | None
    cost_usd_per_million_output_tokens: float | None
    energy_j_per_output_token: float | None
    model: str
    gpu: str
    workload: str


@dataclass(frozen=True)
class Difference:
    """One metric on both sides: ``delta`` = b - a and ``ratio`` = b / a (None where undefined)."""

    metric: str
    a: float | None
    b: float | None
    delta: float | None
    ratio: float | None


@dataclass(frozen=True)
class Comparison:
    """Two plan summaries and the difference of each metric of :data:`METRICS` (b relative to a)."""

    a: PlanSummary
    b: PlanSummary
    differences: tuple[Difference, ...]
    verdict_changed: bool

    def difference(self, metric: str) -> Difference:
        """The :class:`Difference` of one metric (a field name of PlanSummary)."""
        for d in self.differences:
            if d.metric == metric:
                return d
        raise InputError("metric", metric, f"one of {[m for m, _ in METRICS]}")


def summarise(p: Plan, source: str = "plan") -> PlanSummary:
    """The comparison's view of a Plan."""
    scn = p.inputs.scenario
    b = p.best.get(p.verdict)
    ev = b.at_goodput if b is not None else None
    return PlanSummary(
        source,
        p.verdict,
        b.label if b else None,
        b.n_gpus if b else None,
        b.goodput_rps if b else None,
        b.cost_usd_per_hour if b else None,
        ev.cost_usd_per_million_output_tokens if ev else None,
        ev.energy_j_per_output_token if ev else None,
        scn.arch.name,
        p.inputs.gpu.name,
        scn.workload.name,
    )


def _number(obj: dict, key: str, where: str) -> float | None:
    value = obj.get(key)
    if value is None or value == "inf":
        return math.inf if value == "inf" else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{where}: {key}", short(value), "a number")
    return float(value)


def summary_from_json(obj: Any, where: str) -> PlanSummary:
    """The comparison's view of `pdplan plan --json` output (model.planner.report.plan_dict)."""
    if not (
        isinstance(obj, dict) and isinstance(obj.get("verdict"), str) and isinstance(obj.get("best"), dict)
    ):
        raise InputError(
            where, "(file)", 'an app scenario file or `pdplan plan --json` output (keys "verdict", "best")'
        )
    inputs = obj.get("inputs") if isinstance(obj.get("inputs"), dict) else {}
    verdict = obj["verdict"]
    b = obj["best"].get(verdict)
    if verdict != "none" and not isinstance(b, dict):
        raise InputError(f"{where}: best", short(verdict), f'an entry for the verdict "{verdict}"')
    b = b or {}
    gpus = _number(b, "n_gpus", where)
    return PlanSummary(
        where,
        short(verdict),
        short(b["label"]) if isinstance(b.get("label"), str) else None,
        int(gpus) if gpus is not None and math.isfinite(gpus) else None,
        _number(b, "goodput_rps", where),
        _number(b, "cost_usd_per_hour", where),
        _number(b, "cost_usd_per_million_output_tokens", where),
        _number(b, "energy_j_per_output_token", where),
        short(inputs.get("model", "?")),
        short(inputs.get("gpu", "?")),
        short(inputs.get("workload", "?")),
    )


def load_summary(path: str | Path) -> PlanSummary:
    """A side from a file: an app scenario file (re-planned) or `pdplan plan --json` output."""
    where = Path(path).name or str(path)
    obj = read_json(path, short(str(path)))
    if is_scenario(obj):
        try:
            return summarise(run_plan(scenario_request(obj, where), thresholds=False), where)
        except PdplanError as err:  # name the file in what the planner's own checks refuse
            if str(err).startswith(where):
                raise
            raise PdplanError(f"{where}: {err}") from None
    return summary_from_json(obj, where)


def _side(x: Plan | PlanSummary | str | Path, name: str) -> PlanSummary:
    if isinstance(x, Plan):
        return summarise(x, name)
    if isinstance(x, PlanSummary):
        return x
    if isinstance(x, str | Path):
        return load_summary(x)
    raise InputError(name, type(x).__name__, "a Plan, a PlanSummary, or a scenario / plan JSON file path")


def _difference(metric: str, a: float | None, b: float | None) -> Difference:
    both = a is not None and b is not None and math.isfinite(a) and math.isfinite(b)
    delta = b - a if both else None
    ratio = b / a if both and a != 0 else None
    return Difference(metric, a, b, delta, ratio)


def compare(a: Plan | PlanSummary | str | Path, b: Plan | PlanSummary | str | Path) -> Comparison:
    """Compare two plans (Plans, summaries, or paths of app scenario files / `pdplan plan --json`
    output): GPUs, goodput, cost per million output tokens, energy per output token and verdict of
    each recommended configuration, with b - a and b / a."""
    sa, sb = _side(a, "a"), _side(b, "b")
    diffs = tuple(_difference(m, getattr(sa, m), getattr(sb, m)) for m, _ in METRICS)
    return Comparison(sa, sb, diffs, sa.verdict != sb.verdict)


# ---------------------------------------------------------------------------------------------
# the side-by-side table (CLI and app)


def _shown(metric: str, x: float | None) -> str:
    if x is None:
        return "-"
    if metric == "n_gpus":
        return format_count(x, "GPU")
    if metric == "goodput_rps":
        return format_rate(x)
    if metric == "cost_usd_per_million_output_tokens":
        return format_money(x)
    return format_si(x, "J", small=True)


def _change(metric: str, d: Difference) -> str:
    if d.delta is None:
        return "-"
    sign = "+" if d.delta >= 0 else "-"
    if metric == "cost_usd_per_million_output_tokens":
        text = sign + format_money(abs(d.delta))
    elif metric == "n_gpus":
        text = f"{d.delta:+,.0f}"
    else:
        text = sign + _shown(metric, abs(d.delta))
    return text + (f" ({d.ratio - 1:+.0%})" if d.ratio is not None else "")


def comparison_rows(c: Comparison) -> tuple[list[list[str]], list[str]]:
    """Rows and header of the side-by-side table: verdict, configuration, model / GPU, workload and
    one row per metric, each with a, b and the change b - a (with b / a - 1 in parentheses)."""
    rows = [
        ["verdict", c.a.verdict, c.b.verdict, "changed" if c.verdict_changed else "same"],
        ["configuration", c.a.label or "-", c.b.label or "-", ""],
        ["model / GPU", f"{c.a.model} / {c.a.gpu}", f"{c.b.model} / {c.b.gpu}", ""],
        ["workload", c.a.workload, c.b.workload, ""],
    ]
    for metric, label in METRICS:
        d = c.difference(metric)
        rows.append([label, _shown(metric, d.a), _shown(metric, d.b), _change(metric, d)])
    return rows, ["", f"a: {c.a.source}", f"b: {c.b.source}", "b - a"]
