"""Failure impact of a planned configuration: its goodput with one instance of each pool lost, and
the work in flight on the lost instance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from model.planner.goodput import goodput_rps
from model.planner.types import BestConfig, Config, FailureImpact
from model.serving.registry import build_set, style_of
from model.workload.scenario import Scenario

__all__ = ["exact_goodputs", "lost_instance_goodputs", "with_failures"]


def exact_goodputs(goodputs: Mapping[str, tuple[Any, np.ndarray]], keep: int) -> dict[Config, float]:
    """The goodputs a budget sweep found exactly, by configuration: the ``keep`` best of each style
    (model.planner.goodput.highest_rate_rps refines those to the end; the others keep a good rate
    below their goodput)."""
    out: dict[Config, float] = {}
    for cands, g in goodputs.values():
        for i in np.argsort(-np.asarray(g), kind="stable")[:keep]:
            out[cands.configs[int(i)]] = float(g[i])
    return out


def lost_instance_goodputs(
    scn: Scenario, configs: Sequence[Config], known: Mapping[Config, float] | None = None
) -> list[dict[str, float]]:
    """Per configuration and pool, the goodput with one instance of that pool lost (0 when nothing
    is left). A lost-instance configuration whose goodput ``known`` holds (the budget sweep searched
    it already: each candidate's search is independent of the others', so it is the same value) is
    taken from there; the others of one style are searched in one vectorised goodput bisection
    (model.planner.goodput.goodput_rps) instead of one search each."""
    known = {} if known is None else known
    lost = [style_of(c).lose_one(c) for c in configs]
    jobs: dict[str, list[tuple[int, str, Config]]] = {}
    out: list[dict[str, float]] = [dict.fromkeys(pools, 0.0) for pools in lost]
    for k, pools in enumerate(lost):
        for pool, c in pools.items():
            if c is not None and c in known:
                out[k][pool] = known[c]
            elif c is not None:
                jobs.setdefault(style_of(c).name, []).append((k, pool, c))
    for items in jobs.values():
        g = goodput_rps(build_set(scn, [c for _, _, c in items]), scn.slo)
        for (k, pool, _), value in zip(items, g, strict=True):
            out[k][pool] = float(value)
    return out


def with_failures(
    scn: Scenario, best: dict[str, BestConfig], known: Mapping[Config, float] | None = None
) -> dict[str, BestConfig]:
    """``best`` with each configuration's failure impact: goodput with one instance lost in each
    pool, and the work in flight on the lost instance. In flight on a decode (or colocated)
    instance: its batch B; their prompts plus the tokens generated so far (on average half the
    output) must be recomputed elsewhere. On a prefill instance: the prompt in service
    (utilisation rho) is recomputed. ``known``: goodputs already found by configuration
    (:func:`exact_goodputs`)."""
    names = list(best)
    after = lost_instance_goodputs(scn, [best[n].config for n in names], known)
    out = {}
    for name, lost in zip(names, after, strict=True):
        b = best[name]
        inflight, tokens = style_of(b.config).in_flight(b.at_goodput, scn)
        out[name] = replace(b, failure=FailureImpact(lost, inflight, tokens))
    return out
