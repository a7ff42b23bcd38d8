"""Failure impact of a planned configuration: its goodput with one instance of each pool lost, and
the work in flight on the lost instance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from model.planner.goodput import Brackets, goodput_rps
from model.planner.types import BestConfig, Config, FailureImpact
from model.serving.registry import build_set, style_of
from model.workload.scenario import Scenario

__all__ = ["lost_instance_goodputs", "sweep_states", "with_failures"]


def sweep_states(goodputs: Mapping[str, tuple[Any, Brackets]]) -> dict[Config, tuple[Brackets, int]]:
    """Every configuration a budget sweep searched, with its search's end state: (the style's
    :class:`Brackets`, the configuration's row in them). The ``keep`` best of a style are exact
    there; the others stopped early and can be resumed (model.planner.goodput.search_brackets)."""
    out: dict[Config, tuple[Brackets, int]] = {}
    for cands, brackets in goodputs.values():
        for i, config in enumerate(cands.configs):
            out[config] = (brackets, i)
    return out


def lost_instance_goodputs(
    scn: Scenario,
    configs: Sequence[Config],
    known: Mapping[Config, tuple[Brackets, int]] | None = None,
) -> list[dict[str, float]]:
    """Per configuration and pool, the goodput with one instance of that pool lost (0 when nothing
    is left). A lost-instance configuration the budget sweep searched (``known``: :func:`sweep_states`)
    goes on from the sweep's state: its value where the sweep refined it, else the rest of its
    bisection, the same value its own search gives since a candidate's search does not depend on the
    others'; the rest of one style are searched in one vectorised goodput bisection
    (model.planner.goodput.goodput_rps)."""
    known = {} if known is None else known
    lost = [style_of(c).lose_one(c) for c in configs]
    jobs: dict[tuple[str, bool], list[tuple[int, str, Config, Brackets | None]]] = {}
    out: list[dict[str, float]] = [dict.fromkeys(pools, 0.0) for pools in lost]
    for k, pools in enumerate(lost):
        for pool, c in pools.items():
            if c is None:
                continue
            state = _state(known, c)
            if state is not None and state.refined()[0]:
                out[k][pool] = float(state.value()[0])
            else:
                jobs.setdefault((style_of(c).name, state is not None), []).append((k, pool, c, state))
    for (_, resumed), items in jobs.items():
        resume = _stack([state for *_, state in items]) if resumed else None
        g = goodput_rps(build_set(scn, [c for _, _, c, _ in items]), scn.slo, resume=resume)
        for (k, pool, _, _), value in zip(items, g, strict=True):
            out[k][pool] = float(value)
    return out


def _state(known: Mapping[Config, tuple[Brackets, int]], config: Config) -> Brackets | None:
    """The sweep's state of one configuration (one row), or None if the sweep did not search it."""
    if config not in known:
        return None
    brackets, i = known[config]
    return brackets.take(np.array([i]))


def _stack(rows: Sequence[Brackets]) -> Brackets:
    """One-row states stacked in order."""
    fields = ("lo", "hi", "halvings", "ok_min")
    return Brackets(*(np.concatenate([getattr(r, f) for r in rows]) for f in fields))


def with_failures(
    scn: Scenario, best: dict[str, BestConfig], known: Mapping[Config, tuple[Brackets, int]] | None = None
) -> dict[str, BestConfig]:
    """``best`` with each configuration's failure impact: goodput with one instance lost in each
    pool, and the work in flight on the lost instance. In flight on a decode (or colocated)
    instance: its batch B; their prompts plus the tokens generated so far (on average half the
    output) must be recomputed elsewhere. On a prefill instance: the prompt in service
    (utilisation rho) is recomputed. ``known``: the budget sweep's search states by
    configuration (:func:`sweep_states`)."""
    names = list(best)
    after = lost_instance_goodputs(scn, [best[n].config for n in names], known)
    out = {}
    for name, lost in zip(names, after, strict=True):
        b = best[name]
        inflight, tokens = style_of(b.config).in_flight(b.at_goodput, scn)
        out[name] = replace(b, failure=FailureImpact(lost, inflight, tokens))
    return out
