"""Redundancy of a planned configuration: which pools have no spare instance, and whether the
goodput left after losing one instance still carries the rate the deployment must serve.

Reads the planner's own failure analysis (``BestConfig.failure``, from
``model.planner.plan.failure_impact``) and the style's ``lose_one``; no new modelling. Used by the
web app's verdict card; one line per risk, in the words of DESIGN.md ("failure impact").
"""

from __future__ import annotations

from model.planner.types import BestConfig
from model.serving.registry import style_of
from model.units import format_rate


def single_instance_pools(b: BestConfig) -> tuple[str, ...]:
    """Pools of ``b`` with one instance: losing it leaves nothing to serve that pool's phase
    (the style's ``lose_one`` has no configuration left)."""
    return tuple(pool for pool, rest in style_of(b.config).lose_one(b.config).items() if rest is None)


def redundancy_warnings(b: BestConfig, rate_rps: float | None = None) -> tuple[str, ...]:
    """One line per redundancy risk of ``b``: a pool with a single instance, and, when the
    deployment must carry ``rate_rps`` (a target rate, or a rate being inspected), each pool whose
    loss of one instance leaves a goodput below it. Empty when neither applies or the failure
    analysis was not run."""
    out = [
        f"{b.style}: the {pool} pool has a single instance, so losing it stops serving (no redundancy)."
        for pool in single_instance_pools(b)
    ]
    if rate_rps is not None and rate_rps > 0 and b.failure is not None:
        single = set(single_instance_pools(b))
        for pool, after in b.failure.goodput_after_loss_rps.items():
            if pool not in single and after < rate_rps:
                out.append(
                    f"{b.style}: after losing one {pool} instance, goodput falls to {format_rate(after)}, "
                    f"below the {format_rate(rate_rps)} it must carry."
                )
    return tuple(out)
