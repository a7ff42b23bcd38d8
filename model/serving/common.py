"""Pieces shared by the colocated and disaggregated analytical models."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from model.physics.decode_tokens import tokens_per_decode_step
from model.queueing.latency import LatencyModel
from model.queueing.mgc import WaitResult
from model.queueing.mixed_refine import REFINE_SHARES, StagedCdf
from model.serving.phase_tables import InstanceTables
from model.workload.slo import SLO


@dataclass(frozen=True, eq=False)
class StyleResult:
    """Analytical state of C candidates at their request rates (arrays over candidates).

    TTFT components are means over the sampled requests; ``latency`` gives distributions.
    """

    latency: LatencyModel
    stable: np.ndarray
    queue_wait_mean_s: np.ndarray
    prefill_mean_s: np.ndarray
    transfer_mean_s: np.ndarray
    link_wait_mean_s: np.ndarray
    admission_wait_mean_s: np.ndarray
    batch: np.ndarray
    max_batch: np.ndarray
    tpot_mean_s: np.ndarray
    prefill_busy: np.ndarray  # fraction of time the prefill path is busy, per prefill instance
    decode_busy: np.ndarray  # fraction of time a decode instance has a non-empty batch
    link_utilisation: np.ndarray
    kv_bytes_per_request: np.ndarray
    unstable_reason: np.ndarray  # str per candidate, "" when stable
    max_itl_s: np.ndarray  # longest gap between two tokens of a request (a step plus the worst stall)
    # expected pre-emptions per request (engine policy recompute / swap; model.queueing.preemption);
    # None where the style does not model them
    preemptions_per_request: np.ndarray | None = None

    @property
    def ttft_mean_s(self) -> np.ndarray:
        lat = self.latency
        return np.where(
            self.stable, lat.fixed_s.mean(axis=1) + self.queue_wait_mean_s + lat.admit_mean_s, np.inf
        )


def stack(tables: Sequence[InstanceTables], attr: str) -> np.ndarray:
    """Stack one attribute of every table along a new leading axis."""
    return np.stack([np.asarray(getattr(t, attr), dtype=float) for t in tables])


def emitted_rows(tables: Sequence[InstanceTables]) -> np.ndarray:
    """[T] tokens a decoding sequence gains per step of each table's deployment
    (model.physics.decode_tokens.tokens_per_decode_step; 1 without speculative decoding), looked
    up once per deployment (a robustness world's scaled tables share theirs)."""
    per_dep: dict[int, float] = {}
    for t in tables:
        if id(t.dep) not in per_dep:
            per_dep[id(t.dep)] = float(tokens_per_decode_step(t.dep).emitted)
    return np.array([per_dep[id(t.dep)] for t in tables])


def decode_token_rows(tables: Sequence[InstanceTables]) -> np.ndarray:
    """``stack(tables, "decode_token_s")``, [T, G]: each table's decode step times over its
    deployment's tokens per step (:func:`emitted_rows`), the same division row by row."""
    return stack(tables, "decode_step_s") / emitted_rows(tables)[:, None]


def moments(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row mean, second moment and squared coefficient of variation of [C, S] samples."""
    m1 = samples.mean(axis=1)
    m2 = (samples**2).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        scv = np.where(m1 > 0, np.maximum(m2 / m1**2 - 1.0, 0.0), 0.0)
    return m1, m2, scv


def wait_tail(res: WaitResult, stable: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P(W>0), E[W|W>0]) of a wait result, forced to (1, inf) where the candidate is unstable."""
    prob = np.where(stable, res.prob_wait, 1.0)
    cond = np.where(stable, res.cond_mean_wait_s, np.inf)
    return prob, cond


def first_reason(checks: Sequence[tuple[np.ndarray, str]], n: int) -> np.ndarray:
    """Per candidate, the text of the first failed check (``ok`` False), else ""."""
    out = np.full(n, "", dtype=object)
    for ok, text in reversed(checks):
        out = np.where(np.asarray(ok, dtype=bool), out, text)
    return out


def busy_fraction(mean_batch: np.ndarray) -> np.ndarray:
    """P(batch non-empty) = 1 - exp(-B): the occupancy of an M/G/infinity system is Poisson with
    mean B (Kleinrock 1975, vol. 1, sec. 4.4), used for the decode GPUs' busy time."""
    return 1.0 - np.exp(-np.asarray(mean_batch, dtype=float))


@dataclass(frozen=True, eq=False)
class SLOCheck:
    """The SLO test of C candidates (arrays over candidates): ``attainment`` is the fraction of
    requests meeting both targets (0 where unstable), ``ttft_ok`` / ``tpot_ok`` whether the chosen
    percentile of each is within its target, ``ok`` all of them and stability."""

    attainment: np.ndarray
    ttft_ok: np.ndarray
    tpot_ok: np.ndarray
    ok: np.ndarray


def check_slo(latency: LatencyModel, stable: np.ndarray, slo: SLO) -> SLOCheck:
    """The one SLO test (planner, goodput search and single evaluations all call it).

    DistServe's goodput criterion (Zhong et al. OSDI 2024, sec. 2.1): at least ``slo.attainment`` of
    requests meet both the TTFT and the TPOT target; pdplan also requires the ``slo.percentile``-th
    percentile of TTFT and of TPOT each to be within its target.
    """
    shape = np.shape(stable)
    ttft_cdf = latency.ttft_cdf(np.full(shape, slo.ttft_s)[:, None])
    tpot_cdf = latency.tpot_cdf(np.full(shape, slo.tpot_s)[:, None])
    return _check(ttft_cdf, tpot_cdf, stable, slo)


def _check(ttft_cdf: np.ndarray, tpot_cdf: np.ndarray, stable: np.ndarray, slo: SLO) -> SLOCheck:
    """:func:`check_slo` from the two CDFs at the targets [C, S]."""
    q = slo.percentile / 100.0
    both = (ttft_cdf * tpot_cdf).mean(axis=1)
    ttft_ok = ttft_cdf.mean(axis=1) >= q
    tpot_ok = tpot_cdf.mean(axis=1) >= q
    ok = stable & (both >= slo.attainment) & ttft_ok & tpot_ok
    return SLOCheck(np.where(stable, both, 0.0), ttft_ok, tpot_ok, ok)


BOUND_MARGIN = 1e-9
"""How far the bounds of :func:`slo_ok` must clear a target (attainment or percentile level) to
decide a candidate: far above the rounding of the CDFs, so a decided candidate's outcome is the
exact test's."""


def slo_ok(res: StyleResult, slo: SLO) -> np.ndarray:
    """Per candidate: stable, attainment >= target, and both percentiles within their targets
    (:func:`check_slo`'s ``ok``). Where the latency model bounds the TPOT law cheaply
    (LatencyModel.tpot_cdf_bounds, a MixedTpot: a chunked replica's mixed share), the TTFT test is
    computed exactly first and the TPOT law is built only for the candidates that pass it (a
    candidate's CDFs depend on its own row alone, LatencyModel.take); those the bounds already decide
    (the TPOT and attainment tests passed, or failed, whatever the exact law inside them) skip the
    exact TPOT law, and the others take the exact test on exact CDFs computed in stages
    (:func:`_staged_ok`), so every outcome is :func:`check_slo`'s. Models without the chunked bounds
    take :func:`_ok_by_rows` (the disaggregated laws' own bounds)."""
    return slo_ok_rows(res.latency, np.asarray(res.stable, dtype=bool), slo)


def slo_ok_rows(lat: LatencyModel, stable: np.ndarray, slo: SLO) -> np.ndarray:
    """:func:`slo_ok` on a latency model and its candidates' ``stable`` flags (e.g. some rows of an
    evaluation: LatencyModel.take)."""
    if lat.mixed is None:
        return _ok_by_rows(lat, stable, slo)
    shape = np.shape(stable)
    q = slo.percentile / 100.0
    ttft_cdf = lat.ttft_cdf(np.full(shape, slo.ttft_s)[:, None])
    ok = np.zeros(shape, dtype=bool)
    rows = np.nonzero(stable & (ttft_cdf.mean(axis=1) >= q))[0]
    if len(rows) == 0:
        return ok
    sub = lat if len(rows) == len(stable) else lat.take(rows)
    bounds = sub.tpot_cdf_bounds(np.full(len(rows), slo.tpot_s)[:, None])
    ttft_cdf = ttft_cdf[rows]
    passes, fails = _bound_verdict(ttft_cdf, *bounds.bounds(), slo)
    ok[rows[passes]] = True
    rest = np.nonzero(~passes & ~fails)[0]
    if len(rest):
        staged = StagedCdf.build(bounds, rest)
        ok[rows[rest]] = _staged_ok(staged, ttft_cdf[rest], stable[rows[rest]], slo)
    return ok


def _bound_verdict(
    ttft_cdf: np.ndarray, lo: np.ndarray, hi: np.ndarray, slo: SLO
) -> tuple[np.ndarray, np.ndarray]:
    """(passes, fails) [C] of candidates whose TTFT test passed, from lower / upper bounds ``lo`` /
    ``hi`` [C, S] on their TPOT CDF at the target: the TPOT percentile and the attainment (the mean of
    the TTFT CDF times the TPOT CDF; both means are monotone in every entry) settled by BOUND_MARGIN
    whatever the exact law inside the bounds."""
    q, att, eps = slo.percentile / 100.0, slo.attainment, BOUND_MARGIN
    passes = (lo.mean(axis=1) >= q + eps) & ((ttft_cdf * lo).mean(axis=1) >= att + eps)
    fails = (hi.mean(axis=1) < q - eps) | ((ttft_cdf * hi).mean(axis=1) < att - eps)
    return passes, fails


def _staged_ok(law: StagedCdf, ttft_cdf: np.ndarray, stable: np.ndarray, slo: SLO) -> np.ndarray:
    """:func:`check_slo`'s ``ok`` of candidates whose TTFT test passed, from their TPOT law's
    bounds tightened in stages by exact entries (model.queueing.mixed_refine.StagedCdf): a candidate
    leaves once its bounds settle the TPOT and attainment tests (by BOUND_MARGIN), and the ones left
    at the end take the exact test on the exact CDFs (entry for entry MixedTpot.cdf)."""
    ok = np.zeros(len(ttft_cdf), dtype=bool)
    left = np.arange(len(ttft_cdf))
    for step in REFINE_SHARES:
        law, lo, hi = law.bounds(step)
        passes, fails = _bound_verdict(ttft_cdf[left], lo, hi, slo)
        ok[left[passes]] = True
        keep = ~passes & ~fails
        if not keep.any():
            return ok
        if not keep.all():
            law, left = law.take(keep), left[keep]
    ok[left] = _check(ttft_cdf[left], law.cdf(), stable[left], slo).ok
    return ok


def _ok_by_rows(lat: LatencyModel, stable: np.ndarray, slo: SLO) -> np.ndarray:
    """:func:`check_slo`'s ``ok`` with each CDF computed only where it can decide: on the stable
    candidates, first on cheap bounds where the model has them (LatencyModel.ttft_cdf_bounds: the
    packed count at its extremes; LatencyModel.tpot_join_bounds: two reads of the base's law instead
    of nine), which decide a candidate when its tests pass or fail whatever the exact law inside them
    (by BOUND_MARGIN), then on the exact laws of the rows left open, as :func:`slo_ok` does with the
    chunked bounds. A candidate's CDFs depend on its own row alone (LatencyModel.take), so every
    outcome is :func:`check_slo`'s."""
    ok = np.zeros(np.shape(stable), dtype=bool)
    rows = np.nonzero(stable)[0]
    if len(rows) == 0:
        return ok
    sub = lat if len(rows) == len(stable) else lat.take(rows)
    q, att, eps = slo.percentile / 100.0, slo.attainment, BOUND_MARGIN
    bounds = sub.ttft_cdf_bounds(np.full(len(rows), slo.ttft_s)[:, None])
    exact_ttft = bounds is None
    lo_t, hi_t = (sub.ttft_cdf(np.full(len(rows), slo.ttft_s)[:, None]),) * 2 if exact_ttft else bounds
    keep = np.nonzero(lo_t.mean(axis=1) >= q if exact_ttft else hi_t.mean(axis=1) >= q - eps)[0]
    if len(keep) == 0:  # every TTFT percentile test failed
        return ok
    sub = sub if len(keep) == len(rows) else sub.take(keep)
    rows, lo_t, hi_t = rows[keep], lo_t[keep], hi_t[keep]
    tpot_x = np.full(len(rows), slo.tpot_s)[:, None]
    bounds = sub.tpot_join_bounds(tpot_x)
    exact_tpot = bounds is None
    lo_p, hi_p = (sub.tpot_cdf(tpot_x),) * 2 if exact_tpot else bounds
    if exact_ttft and exact_tpot:
        ok[rows] = _check(lo_t, lo_p, np.ones(len(rows), dtype=bool), slo).ok
        return ok
    passes = (lo_t.mean(axis=1) >= q + eps) & (lo_p.mean(axis=1) >= q + eps)
    passes &= (lo_t * lo_p).mean(axis=1) >= att + eps
    fails = (hi_t.mean(axis=1) < q - eps) | (hi_p.mean(axis=1) < q - eps)
    fails |= (hi_t * hi_p).mean(axis=1) < att - eps
    ok[rows[passes]] = True
    rest = np.nonzero(~passes & ~fails)[0]
    if len(rest):
        sub = sub.take(rest)
        ttft = lo_t[rest] if exact_ttft else sub.ttft_cdf(np.full(len(rest), slo.ttft_s)[:, None])
        tpot = lo_p[rest] if exact_tpot else sub.tpot_cdf(tpot_x[rest])
        ok[rows[rest]] = _check(ttft, tpot, np.ones(len(rest), dtype=bool), slo).ok
    return ok
