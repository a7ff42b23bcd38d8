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
from dataclasses import dataclass
from typing import Any

import numpy as np

from model.serving.common import slo_ok, slo_ok_rows
from model.serving.registry import build_set
from model.serving.style import CandidateSet
from model.workload.scenario import Scenario
from model.workload.slo import SLO

__all__ = [
    "Brackets",
    "config_goodput",
    "goodput_brackets",
    "goodput_rps",
    "highest_rate_rps",
    "slo_ok",
    "stability_limit_rps",
]

# The "vanishing load" every search starts from: a rate per GPU so low that no queue forms; a
# candidate that misses the SLOs here misses them at every rate (goodput 0).
PROBE_RPS_PER_GPU = 1e-6
_DOUBLINGS = 40
_BISECTIONS = 16
GOODPUT_RTOL = 2.0**-9
"""Relative width (about 0.2%) at which a candidate's goodput bracket counts as found: well below
the model's own error (docs/validation.md) and the 10% verdict margin (2^-9 rather than 2^-10 since
session 7: a bracket from the doubling is 2 wide, so nine halvings are three evaluations of three
bisection levels where ten took four; best goodputs of the golden plans moved by <= 0.1%); each
candidate's bisection stops once its own bracket is this narrow (at most ``_BISECTIONS`` halvings),
so a candidate's goodput does not depend on the other candidates searched with it."""


@dataclass(frozen=True)
class Brackets:
    """Each candidate's search state, [C] arrays: ``lo`` a rate that holds, ``hi`` one that fails
    (after the doublings), the bisection ``halvings`` so far, and ``ok_min`` (holds at the probe).
    A search resumed from a state walks on exactly as the uninterrupted one would, so a candidate a
    ``keep`` search left unrefined reaches, resumed, the same goodput as its own full search."""

    lo: np.ndarray
    hi: np.ndarray
    halvings: np.ndarray
    ok_min: np.ndarray

    def value(self) -> np.ndarray:
        """The goodput per candidate: the bracket's lower end (0 where even the probe fails)."""
        return np.where(self.ok_min, self.lo, 0.0)

    def take(self, idx: np.ndarray) -> Brackets:
        """The states of candidates ``idx``, in that order."""
        return Brackets(self.lo[idx], self.hi[idx], self.halvings[idx], self.ok_min[idx])

    def refined(self) -> np.ndarray:
        """True where the bracket needs no more halving (its value is the exact goodput)."""
        return ~_refining(self.ok_min, self.lo, self.hi, self.halvings, None)


def goodput_rps(
    cands: CandidateSet,
    slo: SLO,
    *,
    start_rps: float = 0.25,
    keep: int | None = None,
    resume: Brackets | None = None,
) -> np.ndarray:
    """Highest good rate per candidate (0 when even a tiny rate misses the SLOs).

    Bracket by doubling from ``start_rps`` (per GPU), then bisect until each bracket is narrower
    than ``GOODPUT_RTOL`` of its upper end (the lower end is returned: a rate known to be good).
    Attainment falls as the rate rises (queues and batches grow), so the good set is an interval
    from 0. ``keep``: only the ``keep`` best goodputs are needed exactly (see
    :func:`highest_rate_rps`); ``resume``: go on from these states (:class:`Brackets`).
    """
    return goodput_brackets(cands, slo, start_rps=start_rps, keep=keep, resume=resume).value()


def goodput_brackets(
    cands: CandidateSet,
    slo: SLO,
    *,
    start_rps: float = 0.25,
    keep: int | None = None,
    resume: Brackets | None = None,
    halvings: int = _BISECTIONS,
) -> Brackets:
    """:func:`goodput_rps` with the search's end states (for a later search to resume).
    ``halvings``: stop each bisection after that many halvings in all (a resumed search then walks
    on exactly as the uninterrupted one; model.planner.robustness narrows only the worlds it needs)."""
    return search_brackets(cands, _SloTest(slo), start_rps, keep, resume, halvings)


@dataclass(frozen=True)
class _SloTest:
    """The SLO test (model.serving.common.slo_ok) as the search's ``good``, also on some rows of an
    evaluation only (:meth:`rows`): a candidate's test reads its own row alone
    (LatencyModel.take), so the search tests only the trial rates its walk reads (:class:`_Trials`)."""

    slo: SLO

    def __call__(self, res: Any) -> np.ndarray:
        return slo_ok(res, self.slo)

    def rows(self, res: Any, idx: np.ndarray) -> np.ndarray:
        """The test on rows ``idx`` of the evaluation ``res``."""
        if len(idx) == len(res.stable):
            return slo_ok(res, self.slo)
        return slo_ok_rows(res.latency.take(idx), np.asarray(res.stable)[idx], self.slo)


def stability_limit_rps(cands: CandidateSet, *, start_rps: float = 0.25) -> np.ndarray:
    """Highest rate per candidate at which its queues stay stable (0 when none is): the same
    doubling and bisection as :func:`goodput_rps`, on ``stable`` instead of the SLO test."""
    return highest_rate_rps(cands, lambda res: np.asarray(res.stable, dtype=bool), start_rps=start_rps)


def highest_rate_rps(
    cands: CandidateSet,
    good: Callable[[Any], np.ndarray],
    *,
    start_rps: float = 0.25,
    keep: int | None = None,
) -> np.ndarray:
    """Highest rate per candidate at which ``good(cands.evaluate(rates))`` holds, for a test that
    holds on an interval of rates from 0 (0 when even a tiny rate fails it).

    Bracket by doubling from ``start_rps`` per GPU, then bisect each candidate until its bracket is
    narrow (vectorised over candidates). When the set can repeat its candidates (``take``), one
    evaluation tries several doublings, or several levels of the bisection tree (every midpoint the
    next levels could visit), per candidate, walked exactly as one level per evaluation would be
    (docs/planner.md, "Multisection").

    ``keep``: a candidate stops being refined once its bracket's upper end (a rate that fails) is at
    or below the lower end (a rate that holds) of ``keep`` other candidates: it cannot be among the
    ``keep`` best, and its value is then its bracket's lower end (a good rate, below its exact
    goodput). The ``keep`` best, in order, are exact.
    """
    return search_brackets(cands, good, start_rps, keep, None).value()


def search_brackets(
    cands: CandidateSet,
    good: Callable[[Any], np.ndarray],
    start_rps: float,
    keep: int | None,
    resume: Brackets | None,
    most_halvings: int = _BISECTIONS,
) -> Brackets:
    """The search of :func:`highest_rate_rps`, returning each candidate's end state; with ``resume``
    (states of these candidates from an earlier search, e.g. one with ``keep``) the probe and the
    doublings are skipped and the bisection goes on from there, up to ``most_halvings`` halvings."""
    gpus = np.asarray(cands.n_gpus, dtype=float)
    n = len(gpus)
    if n == 0:
        return Brackets(np.zeros(0), np.zeros(0), np.zeros(0, dtype=int), np.zeros(0, dtype=bool))
    if resume is not None:
        lo, hi, ok_min = resume.lo.astype(float), resume.hi.astype(float), resume.ok_min
        halvings = resume.halvings.astype(int)
    else:
        lo, hi, ok_min = _bracket(cands, good, gpus, start_rps)
        halvings = np.zeros(n, dtype=int)
    _bisect(cands, good, (lo, hi, halvings), ok_min, keep, min(most_halvings, _BISECTIONS))
    return Brackets(lo, hi, halvings, ok_min)


def _bracket(
    cands: CandidateSet, good: Callable[[Any], np.ndarray], gpus: np.ndarray, start_rps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The probe and the doublings: (lo, hi, ok_min), each candidate's bracket [lo, hi] of a rate
    that holds and one that fails (lo at least the probe rate where the probe holds)."""
    n = len(gpus)
    lo = np.zeros(n)
    hi = np.full(n, start_rps) * gpus
    probe_min = PROBE_RPS_PER_GPU * gpus
    everyone = np.arange(n)
    if hasattr(cands, "take"):  # the probe rides along with the first doublings: one evaluation
        s = min(_levels(cands, n, _DOUBLING_TRIES), _DOUBLINGS)
        trial = np.concatenate([probe_min[:, None], hi[:, None] * 2.0 ** np.arange(s)], axis=1)
        ok = _good_at(cands, good, everyone, trial)
        ok_min = ok.read(everyone, np.zeros(n, dtype=int))
        lo, hi, searching, done = _doublings(ok_min.copy(), everyone, ok, lo, hi, 0, 1)
    else:
        ok_min = good(cands.evaluate(probe_min))
        searching, done = ok_min.copy(), 0
    while done < _DOUBLINGS and searching.any():
        rows = np.nonzero(searching)[0]
        s = min(_levels(cands, len(rows), _DOUBLING_TRIES), _DOUBLINGS - done)
        trial = hi[rows, None] * 2.0 ** np.arange(s)  # hi, 2 hi, 4 hi, ... (exact in binary)
        ok = _good_at(cands, good, rows, trial)
        lo, hi, searching, done = _doublings(searching, rows, ok, lo, hi, done, 0)
    ok_min = np.asarray(ok_min, dtype=bool)
    return np.where(ok_min, np.maximum(lo, probe_min), 0.0), hi, ok_min


def _bisect(
    cands: CandidateSet,
    good: Callable[[Any], np.ndarray],
    state: tuple[np.ndarray, np.ndarray, np.ndarray],
    ok_min: np.ndarray,
    keep: int | None,
    most: int = _BISECTIONS,
) -> None:
    """Halve each bracket (``state`` = lo, hi, halvings, updated in place) until it is narrow or has
    been halved ``most`` times, by multisection (several levels of the bisection tree per evaluation,
    walked as one level each)."""
    lo, hi, halvings = state
    while True:
        active = _refining(ok_min, lo, hi, halvings, keep, most)
        if not active.any():
            break
        rows = np.nonzero(active)[0]
        s = min(_levels(cands, len(rows), _TREE_LEVELS), most - int(halvings[rows].min()))
        bounds = _midpoint_tree(lo[rows], hi[rows], s)  # [A, 2^s + 1]
        ok = _good_at(cands, good, rows, bounds[:, 1:-1])
        here = np.arange(len(rows))
        a = np.zeros(len(rows), dtype=int)
        b = np.full(len(rows), 2**s)
        for _ in range(s):
            go = (hi[rows] - lo[rows] > GOODPUT_RTOL * hi[rows]) & (halvings[rows] < most)
            c = (a + b) // 2
            mid_ok = np.zeros(len(rows), dtype=bool)
            mid_ok[go] = ok.read(here[go], c[go] - 1)
            mid = bounds[here, c]
            lo[rows] = np.where(go & mid_ok, mid, lo[rows])
            hi[rows] = np.where(go & ~mid_ok, mid, hi[rows])
            a, b = np.where(go & mid_ok, c, a), np.where(go & ~mid_ok, c, b)
            halvings[rows] += go


def _doublings(
    searching: np.ndarray,
    rows: np.ndarray,
    ok: _Trials,
    lo: np.ndarray,
    hi: np.ndarray,
    done: int,
    first: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Walk the results ``ok`` of trials hi, 2 hi, 4 hi, ... (its columns from ``first`` on) of
    candidates ``rows`` as one-rate doublings would: a candidate still searching whose trial held
    moves its bracket up (lo = hi, hi = 2 hi); the first trial that fails stops it (the trials after
    it are not tested). Returns (lo, hi, searching, done)."""
    n = len(lo)
    for j in range(first, ok.shape[1]):
        grow = np.zeros(n, dtype=bool)
        here = np.nonzero(searching[rows])[0]
        grow[rows[here]] = ok.read(here, np.full(len(here), j))
        lo = np.where(grow, hi, lo)
        hi = np.where(grow, hi * 2.0, hi)
        searching = grow
        done += 1
        if not searching.any():
            break
    return lo, hi, searching, done


def _refining(
    ok_min: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    halvings: np.ndarray,
    keep: int | None,
    most: int = _BISECTIONS,
) -> np.ndarray:
    """Candidates whose bracket still needs halving: good at the probe, wider than
    ``GOODPUT_RTOL``, within ``most`` (``_BISECTIONS``) halvings, and (with ``keep``) possibly among
    the ``keep`` best."""
    active = ok_min & (hi - lo > GOODPUT_RTOL * hi) & (halvings < most)
    if keep is not None and 0 < keep < len(lo):
        kth_lo = np.partition(lo, len(lo) - keep)[len(lo) - keep]  # keep candidates hold here or above
        active &= hi > kth_lo
    return active


# Rows (candidate x trial rate) one multi-rate evaluation may hold: an evaluation's cost is mostly
# per call up to a few hundred rows for the colocated styles and grows with the rows for the
# disaggregated one (benchmarks/bench_planner.py; docs/planner.md, "Multisection").
_ROW_BUDGET = 256
_TREE_LEVELS = 3  # bisection levels per evaluation at most (7 trial rates per candidate)
_DOUBLING_TRIES = 4  # doublings per evaluation at most


def _levels(cands: CandidateSet, n_rows: int, most: int) -> int:
    """Levels (trial rates) per evaluation: 1 for a set that cannot repeat its candidates, else as
    many as ``most`` while the rows stay within the budget (2^s - 1 rates for s bisection levels;
    doublings count one rate per level and use the same rule)."""
    if not hasattr(cands, "take"):
        return 1
    s = 1
    while s < most and n_rows * (2 ** (s + 1) - 1) <= _ROW_BUDGET:
        s += 1
    return s


def _midpoint_tree(lo: np.ndarray, hi: np.ndarray, levels: int) -> np.ndarray:
    """[A, 2^levels + 1] bracket ends and every midpoint a ``levels``-deep bisection can visit, in
    order; each midpoint is 0.5 (left + right) of its two neighbours one level up, the very value the
    one-level bisection computes from its bracket."""
    pts = np.stack([lo, hi], axis=1)
    for _ in range(levels):
        mids = 0.5 * (pts[:, :-1] + pts[:, 1:])
        out = np.empty((len(pts), 2 * pts.shape[1] - 1))
        out[:, 0::2] = pts
        out[:, 1::2] = mids
        pts = out
    return pts


def _good_at(
    cands: CandidateSet, good: Callable[[Any], np.ndarray], rows: np.ndarray, rates: np.ndarray
) -> _Trials:
    """``good`` of candidate ``rows[i]`` at each rate of ``rates[i]`` ([A, R] -> [A, R] bool, read
    through :class:`_Trials`); each candidate's evaluation is independent of the others', so any
    grouping gives the same values."""
    n_rates = rates.shape[1]
    if len(rows) == len(cands.configs) and n_rates == 1:
        sub = cands
    elif hasattr(cands, "take"):
        sub = cands.take(np.repeat(rows, n_rates))
    else:
        mask = np.zeros(len(cands.configs), dtype=bool)
        mask[rows] = True
        sub = cands.subset(mask)
    return _Trials(sub.evaluate(rates.reshape(-1)), good, (len(rows), n_rates))


class _Trials:
    """The outcomes [A, R] of ``good`` on one evaluation of A candidates at R trial rates each: all
    at once, or, where ``good`` has a row-wise form (``good.rows``, e.g. :class:`_SloTest`), only
    those the search reads, each once (the walk reads one trial per bisection level or doubling of a
    candidate, e.g. 3 of the 7 of a three-level multisection)."""

    def __init__(self, res: Any, good: Callable[[Any], np.ndarray], shape: tuple[int, int]) -> None:
        self.shape = shape
        self._res, self._good = res, getattr(good, "rows", None)
        size = shape[0] * shape[1]
        self._known = np.zeros(size, dtype=bool)
        self._ok = np.zeros(size, dtype=bool)
        if self._good is None:
            self._ok[:] = np.asarray(good(res), dtype=bool).reshape(-1)
            self._known[:] = True

    def read(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """The outcomes at (candidate ``i``, trial ``j``) pairs, tested on first read."""
        flat = np.asarray(i, dtype=int) * self.shape[1] + np.asarray(j, dtype=int)
        todo = np.unique(flat[~self._known[flat]])
        if len(todo):
            self._ok[todo] = np.asarray(self._good(self._res, todo), dtype=bool)
            self._known[todo] = True
        return self._ok[flat]


def config_goodput(scn: Scenario, config: Any) -> float:
    """Goodput (req/s) of one configuration under ``scn``'s SLOs (0 for None), e.g.
    ``model.config_goodput(model.Scenario.build("llama-3.1-8b", "chat", model.SLO(0.5, 0.05)), cfg)``."""
    if config is None:
        return 0.0
    return float(goodput_rps(build_set(scn, [config]), scn.slo)[0])
