"""Planning with speculative decoding: one plan per drafted-token count k, and the best of them.

Speculation changes every decode step (model.physics.speculation), so a plan is made per option
and the options are ranked as the planner ranks configurations: on a budget by the goodput of the
recommended configuration, for a target rate by its GPUs (or cost), ties to the smaller k.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from model.errors import InputError
from model.limits import MAX_OPTIONS
from model.physics.speculation import Speculation
from model.planner.alternatives import DEFAULT_TOP
from model.planner.plan import PlanRequest, plan
from model.planner.types import Plan


@dataclass(frozen=True)
class SpeculationSearch:
    """Each option's plan and the chosen one (``best``: index into ``options``)."""

    options: tuple[Speculation | None, ...]
    plans: tuple[Plan, ...]
    best: int

    @property
    def plan(self) -> Plan:
        """The chosen option's plan."""
        return self.plans[self.best]


def _score(p: Plan) -> tuple[float, float]:
    """Higher is better: (goodput on a budget, or minus GPUs / cost for a target rate; 0 for none)."""
    b = p.best.get(p.verdict)
    if b is None:
        return (float("-inf"), 0.0)
    if p.inputs.gpus is not None:
        return (b.goodput_rps, 0.0)
    size = b.n_gpus if p.inputs.objective == "gpus" else b.cost_usd_per_hour
    return (-float(size), b.goodput_rps)


def search_speculation(
    request: PlanRequest,
    options: Sequence[Speculation | None],
    *,
    thresholds: bool = True,
    top: int = DEFAULT_TOP,
) -> SpeculationSearch:
    """Plan ``request`` once per speculation option (None: off) and pick the best, e.g. k in 1..4 of
    one drafter: ``search_speculation(req, [Speculation("eagle", k, (0.7,)) for k in (1, 2, 3, 4)])``."""
    if not isinstance(request, PlanRequest):
        raise InputError("request", type(request).__name__, "a PlanRequest")
    opts = tuple(options)
    if not opts or len(opts) > MAX_OPTIONS:
        raise InputError("speculation options", len(opts), f"1 to {MAX_OPTIONS} options")
    plans = tuple(plan(replace(request, speculation=o), thresholds=thresholds, top=top) for o in opts)
    scores = [_score(p) for p in plans]
    best = max(range(len(opts)), key=lambda i: (scores[i], -i))
    return SpeculationSearch(opts, plans, best)
