"""Goodput: the highest request rate whose SLO attainment stays at or above the target.

DistServe's definition (Zhong et al. OSDI 2024, sec. 2.1): a rate is good when at least the
attainment target of requests meet both the TTFT and the TPOT target; pdplan also requires the
chosen percentile of TTFT and of TPOT to be within its target (the one test:
model.serving.common.check_slo) (with percentile 90 and attainment
0.9 the two coincide for most workloads). The search is a vectorised bisection over all
candidates at once, between 0 and each candidate's stability limit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from model.serving.common import slo_ok
from model.serving.registry import build_set
from model.serving.style import CandidateSet
from model.workload.scenario import Scenario
from model.workload.slo import SLO

__all__ = ["config_goodput", "goodput_rps", "highest_rate_rps", "slo_ok", "stability_limit_rps"]

# The "vanishing load" every search starts from: a rate per GPU so low that no queue forms; a
# candidate that misses the SLOs here misses them at every rate (goodput 0).
PROBE_RPS_PER_GPU = 1e-6
_DOUBLINGS = 40
_BISECTIONS = 16
GOODPUT_RTOL = 2.0**-10
"""Relative width (about 0.1%) at which a candidate's goodput bracket counts as found: well below
the model's own error (docs/validation.md) and the 10% verdict margin; the bisection stops once
every bracket is this narrow (at most ``_BISECTIONS`` halvings)."""


def goodput_rps(cands: CandidateSet, slo: SLO, *, start_rps: float = 0.25) -> np.ndarray:
    """Highest good rate per candidate (0 when even a tiny rate misses the SLOs).

    Bracket by doubling from ``start_rps`` (per GPU), then bisect until every bracket is narrower
    than ``GOODPUT_RTOL`` of its upper end (the lower end is returned: a rate known to be good).
    Attainment falls as the rate rises (queues and batches grow), so the good set is an interval
    from 0.
    """
    return highest_rate_rps(cands, lambda res: slo_ok(res, slo), start_rps=start_rps)


def stability_limit_rps(cands: CandidateSet, *, start_rps: float = 0.25) -> np.ndarray:
    """Highest rate per candidate at which its queues stay stable (0 when none is): the same
    doubling and bisection as :func:`goodput_rps`, on ``stable`` instead of the SLO test."""
    return highest_rate_rps(cands, lambda res: np.asarray(res.stable, dtype=bool), start_rps=start_rps)


def highest_rate_rps(
    cands: CandidateSet, good: Callable[[Any], np.ndarray], *, start_rps: float = 0.25
) -> np.ndarray:
    """Highest rate per candidate at which ``good(cands.evaluate(rates))`` holds, for a test that
    holds on an interval of rates from 0 (0 when even a tiny rate fails it).

    Bracket by doubling from ``start_rps`` per GPU, then bisect (vectorised over candidates).
    """
    gpus = np.asarray(cands.n_gpus, dtype=float)
    n = len(gpus)
    if n == 0:
        return np.zeros(0)
    lo = np.zeros(n)
    hi = np.full(n, start_rps) * gpus
    probe_min = PROBE_RPS_PER_GPU * gpus
    ok_min = good(cands.evaluate(probe_min))
    searching = ok_min.copy()
    for _ in range(_DOUBLINGS):
        if not searching.any():
            break
        ok = _good_where(cands, good, hi, searching)
        grow = searching & ok
        lo = np.where(grow, hi, lo)
        hi = np.where(grow, hi * 2.0, hi)
        searching = grow
    lo = np.where(ok_min, np.maximum(lo, probe_min), 0.0)
    active = ok_min
    for _ in range(_BISECTIONS):
        if not np.any(active & (hi - lo > GOODPUT_RTOL * hi)):
            break
        mid = 0.5 * (lo + hi)
        ok = _good_where(cands, good, mid, active)
        lo = np.where(active & ok, mid, lo)
        hi = np.where(active & ~ok, mid, hi)
    return np.where(ok_min, lo, 0.0)


def _good_where(
    cands: CandidateSet, good: Callable[[Any], np.ndarray], rates: np.ndarray, mask: np.ndarray
) -> np.ndarray:
    """``good`` at ``rates`` for the candidates in ``mask`` (False elsewhere): only those are
    evaluated (each candidate's evaluation is independent of the others', so the subset gives the
    same values as the whole set)."""
    if mask.all():
        return np.asarray(good(cands.evaluate(rates)), dtype=bool)
    out = np.zeros(len(mask), dtype=bool)
    keep = np.nonzero(mask)[0]
    out[keep] = np.asarray(good(cands.subset(mask).evaluate(rates[keep])), dtype=bool)
    return out


def config_goodput(scn: Scenario, config: Any) -> float:
    """Goodput (req/s) of one configuration under ``scn``'s SLOs (0 for None), e.g.
    ``model.config_goodput(model.Scenario.build("llama-3.1-8b", "chat", model.SLO(0.5, 0.05)), cfg)``."""
    if config is None:
        return 0.0
    return float(goodput_rps(build_set(scn, [config]), scn.slo)[0])
