"""Goodput: the highest request rate whose SLO attainment stays at or above the target.

DistServe's definition (Zhong et al. OSDI 2024, sec. 2.1): a rate is good when at least the
attainment target of requests meet both the TTFT and the TPOT target; pdplan also requires the
chosen percentile of TTFT and of TPOT to be within its target (the one test:
model.serving.common.check_slo) (with percentile 90 and attainment
0.9 the two coincide for most workloads). The search is a vectorised bisection over all
candidates at once, between 0 and each candidate's stability limit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from model.serving.common import slo_ok
from model.serving.registry import build_set
from model.serving.style import CandidateSet
from model.workload.scenario import Scenario
from model.workload.slo import SLO

__all__ = ["config_goodput", "goodput_rps", "slo_ok"]

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
    gpus = np.asarray(cands.n_gpus, dtype=float)
    n = len(gpus)
    if n == 0:
        return np.zeros(0)
    lo = np.zeros(n)
    hi = np.full(n, start_rps) * gpus
    probe_min = 1e-6 * gpus
    ok_min = slo_ok(cands.evaluate(probe_min), slo)
    searching = ok_min.copy()
    for _ in range(_DOUBLINGS):
        if not searching.any():
            break
        ok = slo_ok(cands.evaluate(hi), slo)
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
        ok = slo_ok(cands.evaluate(mid), slo)
        lo = np.where(active & ok, mid, lo)
        hi = np.where(active & ~ok, mid, hi)
    return np.where(ok_min, lo, 0.0)


def config_goodput(scn: Scenario, config: Any) -> float:
    """Goodput (req/s) of one configuration under ``scn``'s SLOs (0 for None), e.g.
    ``model.config_goodput(model.Scenario.build("llama-3.1-8b", "chat", model.SLO(0.5, 0.05)), cfg)``."""
    if config is None:
        return 0.0
    return float(goodput_rps(build_set(scn, [config]), scn.slo)[0])
