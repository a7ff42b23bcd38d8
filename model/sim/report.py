"""Simulator results: per-request records (numpy arrays), summaries and the per-request CSV.

Metric definitions (DESIGN.md, same as the planner):
- TTFT = first token - arrival (queue wait + prefill + decode-admission wait + exposed transfer);
- TPOT = (end - first token) / (output tokens - 1), for requests with at least two output tokens;
- ITL = each gap between consecutive output tokens; ``max_itl_s`` is a request's largest gap;
- SLO attainment = fraction of measured requests meeting both targets; a request that was rejected
  (its KV can never fit) or unfinished when an unstable run stopped counts as a miss;
- utilisation = busy time / (instances x makespan), makespan = last event - first arrival.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from model.sim.engine import Recorder
from model.workload.slo import SLO

PERCENTILES = (50.0, 90.0, 99.0)


@dataclass(frozen=True, eq=False)
class RequestRecords:
    """One entry per request, in arrival order; NaN where a stage never happened."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    instance: np.ndarray  # colocated replica or decode instance (-1: never routed)
    prefill_instance: np.ndarray  # disaggregated prefill instance (-1 otherwise)
    prefill_start_s: np.ndarray
    prefill_end_s: np.ndarray
    decode_admit_s: np.ndarray
    transfer_start_s: np.ndarray
    transfer_end_s: np.ndarray
    first_token_s: np.ndarray
    end_s: np.ndarray
    max_itl_s: np.ndarray
    rejected: np.ndarray
    measured: np.ndarray  # False for warm-up requests
    cached_tokens: np.ndarray | None = None  # prompt tokens found in the prefix cache where prefill ran
    decode_held_tokens: np.ndarray | None = None  # disaggregated: prompt tokens the decode side held
    preemptions: np.ndarray | None = None  # times each request was pre-empted (None: never)

    @property
    def prefix_hit_rate(self) -> float:
        """Cached prompt tokens / prompt tokens over the measured requests that started prefill."""
        if self.cached_tokens is None:
            return 0.0
        started = self.measured & np.isfinite(self.prefill_start_s)
        total = float(self.prompt_tokens[started].sum())
        return float(self.cached_tokens[started].sum()) / total if total > 0 else 0.0

    request_overhead_s: float = 0.0  # client-side time per request (model.hardware.overheads.request_s)

    @property
    def completed(self) -> np.ndarray:
        return np.isfinite(self.end_s)

    @property
    def ttft_s(self) -> np.ndarray:
        """First token - arrival, plus the engine's per-request client overhead (TTFT as a user
        measures it; a constant shift, so the engine-side replay is unchanged)."""
        return self.first_token_s - self.arrival_s + self.request_overhead_s

    @property
    def tpot_s(self) -> np.ndarray:
        """(end - first token) / (O - 1); NaN for one-token outputs and unfinished requests."""
        gaps = self.output_tokens - 1.0
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(gaps > 0, (self.end_s - self.first_token_s) / gaps, np.nan)

    @property
    def queue_wait_s(self) -> np.ndarray:
        """Arrival -> prefill start (chunked: first chunk)."""
        return self.prefill_start_s - self.arrival_s

    @property
    def prefill_s(self) -> np.ndarray:
        return self.prefill_end_s - self.prefill_start_s

    @property
    def decode_admission_wait_s(self) -> np.ndarray:
        """Prefill end -> decode KV reserved (0 if reserved earlier; NaN when colocated)."""
        return np.maximum(self.decode_admit_s - self.prefill_end_s, 0.0)

    @property
    def transfer_exposed_s(self) -> np.ndarray:
        """Part of TTFT spent on the KV transfer after the prefill and the admission wait ended."""
        return self.first_token_s - np.maximum(self.prefill_end_s, self.decode_admit_s)

    def meets(self, slo: SLO) -> np.ndarray:
        """Per request: finished with TTFT <= target and (TPOT <= target or a single output token)."""
        tpot = self.tpot_s
        ok_tpot = np.where(self.output_tokens > 1, tpot <= slo.tpot_s, True)
        return self.completed & (self.ttft_s <= slo.ttft_s) & ok_tpot

    def write_csv(self, path: str | Path) -> None:
        """One row per request with every timestamp and the derived TTFT, TPOT, max ITL (seconds)."""
        cols = {
            "request": np.arange(self.arrival_s.size),
            **{
                f.name: getattr(self, f.name)
                for f in fields(self)
                if f.name != "request_overhead_s" and getattr(self, f.name) is not None
            },
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "queue_wait_s": self.queue_wait_s,
        }
        names = list(cols)
        arrays = [np.asarray(cols[k]) for k in names]
        with Path(path).open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(names)
            for row in zip(*(a.tolist() for a in arrays), strict=True):
                w.writerow(["" if isinstance(v, float) and math.isnan(v) else v for v in row])


@dataclass(frozen=True)
class PoolStats:
    """Utilisation and KV high-water mark of one pool (colocated replicas, prefill or decode pool)."""

    name: str
    instances: int
    utilisation: float
    kv_high_water_tokens: int
    kv_capacity_tokens: int

    @property
    def kv_high_water_fraction(self) -> float:
        return self.kv_high_water_tokens / self.kv_capacity_tokens if self.kv_capacity_tokens else 0.0


@dataclass(frozen=True)
class SimSummary:
    """Percentiles (p50, p90, p99) and rates over the measured requests of one run."""

    architecture: str
    config: str
    requests: int
    measured: int
    completed: int
    rejected: int
    stable: bool
    stop_reason: str
    makespan_s: float
    offered_rate_rps: float
    throughput_rps: float
    output_tokens_per_s: float
    ttft_s: tuple[float, float, float]
    tpot_s: tuple[float, float, float]
    max_itl_s: tuple[float, float, float]
    mean_queue_wait_s: float
    mean_prefill_s: float
    mean_decode_admission_wait_s: float
    mean_transfer_exposed_s: float
    pools: tuple[PoolStats, ...]
    link_utilisation: float
    prefill_kv_held_high_water_tokens: int
    slo: SLO | None
    attainment: float
    meets_slo: bool | None
    preemptions: int = 0  # pre-emptions over the run (model.sim.preemption; 0 under whole-KV admission)


def _pct(x: np.ndarray) -> tuple[float, float, float]:
    x = x[np.isfinite(x)]
    if x.size == 0:
        return (math.nan, math.nan, math.nan)
    return tuple(float(v) for v in np.percentile(x, PERCENTILES))  # type: ignore[return-value]


def max_itl(rec: Recorder, logs: list[list[float]]) -> np.ndarray:
    """Largest inter-token gap per request from its instance's iteration log.

    Token 1 is at ``first_token``; the decode steps emitting tokens 2 .. O at log[k0 .. k1] (k0 =
    ``log_start``, k1 = ``last_step`` = k0 + O - 2 with one token per step).
    Range maxima of the log's differences come from one ``np.maximum.reduceat`` per instance. A
    pre-empted request (model.sim.preemption) has its gaps before its last decode segment in
    ``itl_before`` and that segment's first gap measured from ``seg_ref``, its last token before it.
    """
    n = len(rec.arrival)
    out = np.full(n, np.nan)
    inst = np.asarray(rec.instance)
    k0 = np.asarray(rec.log_start)
    k1 = np.asarray(rec.last_step)
    o = np.asarray(rec.output)
    first = np.asarray(rec.first_token)
    seg_ref = np.asarray(rec.seg_ref)
    first = np.where(np.isnan(seg_ref), first, seg_ref)
    end = np.asarray(rec.end)
    done = np.isfinite(end)
    out[done & (o == 1)] = 0.0
    for i, log in enumerate(logs):
        sel = np.flatnonzero(done & (inst == i) & (o >= 2) & (k0 >= 0))
        if sel.size == 0:
            continue
        t = np.asarray(log)
        g0 = t[k0[sel]] - first[sel]
        out[sel] = g0
        long = sel[k1[sel] > k0[sel]]
        if long.size:
            d = np.append(np.diff(t), 0.0)
            lo = k0[long]
            hi = k1[long]
            idx = np.empty(2 * long.size, dtype=np.int64)
            idx[0::2], idx[1::2] = lo, hi
            rng_max = np.maximum.reduceat(d, idx)[0::2]
            out[long] = np.maximum(out[long], rng_max)
    before = np.asarray(rec.itl_before)
    hit = done & (before > 0)
    out[hit] = np.fmax(out[hit], before[hit])
    return out


def records_from(rec: Recorder, logs: list[list[float]], warmup: int, spec: Any = None) -> RequestRecords:
    """The records of one run; ``spec`` (an InstanceSpec whose steps carry a Deployment) gives the
    per-request client overhead added to TTFT."""
    dep = getattr(getattr(spec, "steps", None), "dep", None)
    request_s = dep.engine_overheads.request_s if dep is not None else 0.0
    n = len(rec.arrival)
    measured = np.arange(n) >= warmup
    return RequestRecords(
        arrival_s=np.asarray(rec.arrival),
        prompt_tokens=np.asarray(rec.prompt, dtype=np.int64),
        output_tokens=np.asarray(rec.output, dtype=np.int64),
        instance=np.asarray(rec.instance, dtype=np.int64),
        prefill_instance=np.asarray(rec.prefill_instance, dtype=np.int64),
        prefill_start_s=np.asarray(rec.prefill_start),
        prefill_end_s=np.asarray(rec.prefill_end),
        decode_admit_s=np.asarray(rec.decode_admit),
        transfer_start_s=np.asarray(rec.transfer_start),
        transfer_end_s=np.asarray(rec.transfer_end),
        first_token_s=np.asarray(rec.first_token),
        end_s=np.asarray(rec.end),
        max_itl_s=max_itl(rec, logs),
        rejected=np.asarray(rec.rejected, dtype=bool),
        measured=measured,
        cached_tokens=np.asarray(rec.cached, dtype=np.int64),
        decode_held_tokens=np.asarray(rec.decode_held, dtype=np.int64),
        preemptions=np.asarray(rec.preempted, dtype=np.int64) if any(rec.preempted) else None,
        request_overhead_s=request_s,
    )


def summarise(
    records: RequestRecords,
    *,
    architecture: str,
    config: str,
    stop_reason: str,
    makespan_s: float,
    pools: tuple[PoolStats, ...],
    link_utilisation: float,
    prefill_kv_held_high_water_tokens: int,
    slo: SLO | None,
) -> SimSummary:
    """Summary statistics of one run over the measured (non-warm-up) requests."""
    m = records.measured
    done = records.completed & m
    span = float(records.arrival_s[-1] - records.arrival_s[0])
    n_m = int(m.sum())
    offered = (records.arrival_s.size - 1) / span if span > 0 else math.inf
    attainment = float(records.meets(slo)[m].mean()) if slo is not None and n_m else math.nan
    stable = not stop_reason
    meets_slo: bool | None = None
    if slo is not None:
        q = slo.percentile
        # unfinished requests count as infinitely late; no interpolation across them
        ttft_all = np.where(done, records.ttft_s, np.inf)[m]
        tpot_all = np.where(done, np.where(records.output_tokens > 1, records.tpot_s, 0.0), np.inf)[m]
        ttft_q = float(np.percentile(ttft_all, q, method="inverted_cdf")) if n_m else math.inf
        tpot_q = float(np.percentile(tpot_all, q, method="inverted_cdf")) if n_m else math.inf
        meets_slo = bool(
            stable and attainment >= slo.attainment and ttft_q <= slo.ttft_s and tpot_q <= slo.tpot_s
        )

    def mean(x: np.ndarray) -> float:
        x = x[done & np.isfinite(x)]
        return float(x.mean()) if x.size else math.nan

    return SimSummary(
        architecture=architecture,
        config=config,
        requests=int(records.arrival_s.size),
        measured=n_m,
        completed=int(done.sum()),
        rejected=int((records.rejected & m).sum()),
        stable=stable,
        stop_reason=stop_reason,
        makespan_s=makespan_s,
        offered_rate_rps=offered,
        throughput_rps=int(records.completed.sum()) / makespan_s if makespan_s > 0 else math.nan,
        output_tokens_per_s=(
            float(records.output_tokens[records.completed].sum()) / makespan_s if makespan_s > 0 else math.nan
        ),
        ttft_s=_pct(np.where(done, records.ttft_s, np.nan)),
        tpot_s=_pct(np.where(done, records.tpot_s, np.nan)),
        max_itl_s=_pct(np.where(done, records.max_itl_s, np.nan)),
        mean_queue_wait_s=mean(records.queue_wait_s),
        mean_prefill_s=mean(records.prefill_s),
        mean_decode_admission_wait_s=mean(records.decode_admission_wait_s),
        mean_transfer_exposed_s=mean(records.transfer_exposed_s),
        pools=pools,
        link_utilisation=link_utilisation,
        prefill_kv_held_high_water_tokens=prefill_kv_held_high_water_tokens,
        slo=slo,
        attainment=attainment,
        meets_slo=meets_slo,
        preemptions=int(records.preemptions.sum()) if records.preemptions is not None else 0,
    )
