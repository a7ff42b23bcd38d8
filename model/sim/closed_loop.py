"""Closed-loop (fixed-concurrency) runs of the simulator: N users, each sending its next request
when its last one completes, after a think time drawn from the chosen distribution.

The schedulers (model.sim.colocated, model.sim.disaggregated) are unchanged: the run's event loop
(:class:`ClosedLoopEvents`, built by model.sim.engine.new_run when ``SimOptions.closed_loop`` is
set) issues arrivals as heap events instead of reading them from a sorted array, and the recorder's
end-time list notifies it when a request finishes (or is rejected at arrival because its KV can
never fit), so that user's next request arrives one think time later. Requests are numbered in
the order they are issued and take their lengths from the given request sequence in that order;
the given arrival times are ignored.

Start and end: every user starts with one think time (none when the mean is 0: all N requests
arrive at t = 0, as a benchmark client starts), so the first rounds are not steady: the first
``warmup`` requests (default 2N) are left out of the statistics. Once the last request has been
scheduled (at the completion that starts its user's think time), each later completion takes its
user out, and the population drains. The closed-loop throughput is therefore measured over the
window in which all N users are active: completions between the first measured arrival and that
moment, divided by that time (Lazowska et al. 1984, *Quantitative System Performance*, sec. 3.2,
operational throughput X = C / T over a measurement interval).
TTFT/TPOT percentiles and SLO attainment are over the measured requests (model.sim.report), the
last N of which run while the population drains (a small optimistic bias; use many more requests
than users).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from model.errors import InputError
from model.limits import MAX_SIM_REQUESTS, check_int
from model.sim.engine import EventLoop, Recorder, SimOptions, SimRequests
from model.sim.report import RequestRecords, SimSummary
from model.sim.requests import poisson_requests
from model.workload.concurrency import Concurrency, as_concurrency
from model.workload.presets import Workload
from model.workload.slo import SLO

__all__ = [
    "ClosedLoop",
    "ClosedLoopEvents",
    "ClosedLoopSimResult",
    "closed_loop_throughput",
    "default_requests",
    "default_warmup",
    "simulate_concurrency",
]

# Requests per user by default (and at least DEFAULT_MIN_REQUESTS): enough rounds that the
# warm-up (2 per user) and the drain (1 per user) are a small part of the run.
REQUESTS_PER_USER = 20
DEFAULT_MIN_REQUESTS = 2000


class _NotifyingList(list):
    """A list that calls ``hook(index)`` after an element is set (the recorder's end times)."""

    def __init__(self, values: list, hook: Callable[[int], None]) -> None:
        super().__init__(values)
        self.hook = hook

    def __setitem__(self, i: Any, value: Any) -> None:
        super().__setitem__(i, value)
        self.hook(i)


@dataclass(frozen=True)
class ClosedLoop:
    """The closed-loop source of a run (``SimOptions(closed_loop=ClosedLoop(Concurrency(64)))``):
    ``load`` users and think times, ``seed`` for the think-time draws."""

    load: Concurrency
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.load, Concurrency):
            raise InputError("concurrency", type(self.load).__name__, "a Concurrency (model.Concurrency)")
        check_int("seed", self.seed, 0, 2**63 - 1)

    def event_loop(self, rec: Recorder, options: SimOptions) -> ClosedLoopEvents:
        """The event loop of one run over ``rec``'s requests (called by model.sim.engine.new_run)."""
        return ClosedLoopEvents(rec, options, self.load, np.random.default_rng(self.seed))


class ClosedLoopEvents(EventLoop):
    """An event loop whose arrivals come from N users (see the module docstring)."""

    def __init__(
        self, rec: Recorder, options: SimOptions, load: Concurrency, rng: np.random.Generator
    ) -> None:
        if load.users > len(rec.arrival):
            raise InputError("concurrency", load.users, f"at most the {len(rec.arrival)} requests of the run")
        rec.arrival[:] = [math.nan] * len(rec.arrival)
        super().__init__(rec.arrival, options)
        self.rec = rec
        self.load = load
        self.rng = rng
        self.issued = 0
        self.scheduled = load.users  # arrivals issued or on the heap
        self.user = [-1] * len(rec.arrival)
        self.full_until = math.nan  # time the last request was issued
        self._on_arrival: Callable[[int], None] = lambda r: None
        rec.end = _NotifyingList(rec.end, self._finished)

    def _think_s(self) -> float:
        return float(self.load.think_times_s(1, self.rng)[0])

    def run(self, on_arrival: Callable[[int], None]) -> None:
        """Start every user after one think time, then process events until none are left."""
        self._on_arrival = on_arrival
        for user, t in enumerate(self.load.think_times_s(self.load.users, self.rng)):
            self.at(float(t), self._arrive, user)
        heap, pop = self._heap, heapq.heappop
        opts = self.options
        max_t = math.inf if opts.max_sim_time_s is None else float(opts.max_sim_time_s)
        progress = opts.progress
        tick = max(self.n // 100, 1)
        while heap:
            t, _, fn, arg = pop(heap)
            self.now = t
            fn(arg)
            if progress is not None and fn == self._arrive and self.issued % tick == 0:
                progress(self.issued, self.n)
            if self.now > max_t:
                self.stop_reason = f"unstable: simulated time passed max_sim_time_s = {max_t:g} s"
                return

    def _arrive(self, user: int) -> None:
        r = self.issued
        self.issued += 1
        self.arrival[r] = self.now
        self.user[r] = user
        if self.issued == self.n:
            self.full_until = self.now
        self._on_arrival(r)
        if self.rec.rejected[r]:
            self._finished(r)

    def _finished(self, r: int) -> None:
        if self.scheduled < self.n:
            self.scheduled += 1
            self.at(self.now + self._think_s(), self._arrive, self.user[r])


def closed_loop_throughput(records: RequestRecords, warmup: int, users: int) -> tuple[float, float]:
    """(throughput req/s, window s) over the time all ``users`` are active: from the arrival of
    request ``warmup`` to the completion that scheduled the last request (the (n - N)-th, counting
    a rejection as a completion at its arrival), after which users leave; (nan, 0) when empty."""
    arrival = records.arrival_s
    n = arrival.size
    finish = np.where(records.rejected, arrival, records.end_s)
    finish = np.sort(finish[np.isfinite(finish)])
    if not 0 <= warmup < n - users <= finish.size:
        return math.nan, 0.0
    t0, t1 = float(arrival[warmup]), float(finish[n - users - 1])
    if not t1 > t0:
        return math.nan, 0.0
    done = (finish > t0) & (finish <= t1)
    return float(done.sum()) / (t1 - t0), t1 - t0


def default_requests(load: Concurrency) -> int:
    """Requests of a closed-loop run by default: 20 per user, at least 2,000 (at most the cap)."""
    return min(max(REQUESTS_PER_USER * load.users, DEFAULT_MIN_REQUESTS), MAX_SIM_REQUESTS)


def default_warmup(load: Concurrency, requests: int) -> int:
    """Warm-up requests by default: the first two rounds (2N), at most half the run."""
    return min(2 * load.users, requests // 2)


@dataclass(frozen=True, eq=False)
class ClosedLoopSimResult:
    """A closed-loop run: the usual ``summary`` and ``records`` (model.sim.report), the users and
    think time (``concurrency``), the steady-window ``throughput_rps`` and its ``window_s``,
    ``output_tokens_per_s`` over the same window and the mean response (arrival to last token) of
    the measured requests."""

    summary: SimSummary
    records: RequestRecords
    concurrency: Concurrency
    throughput_rps: float
    window_s: float
    output_tokens_per_s: float
    response_mean_s: float


def simulate_concurrency(
    config: Any,
    model: Any,
    workload: str | Workload,
    concurrency: int | Concurrency,
    *,
    requests: int | None = None,
    seed: int = 0,
    slo: SLO | None = None,
    **sim_kwargs: Any,
) -> ClosedLoopSimResult:
    """Simulate ``concurrency`` users (an int, or a model.Concurrency with a think time) sending
    ``workload``'s requests to ``config`` serving ``model``, e.g.
    ``model.simulate_concurrency(cfg, "llama-3.1-8b", "chat", 64, slo=model.SLO(0.5, 0.05))``.

    ``requests``: how many (default 20 per user, at least 2,000); lengths drawn with ``seed`` (the
    think times with ``seed`` too). The first 2N are warm-up unless ``sim_kwargs`` holds
    ``options`` with its own ``warmup_requests``; other ``sim_kwargs`` go to model.sim.simulate
    (engine, weight_dtype, kv_dtype, speculation, ...).
    """
    from model.sim.simulate import simulate

    load = as_concurrency(concurrency)
    n = requests if requests is not None else default_requests(load)
    check_int("requests", n, load.users + 1, MAX_SIM_REQUESTS, "more requests than users")
    options = sim_kwargs.pop("options", None)
    if options is not None and not isinstance(options, SimOptions):
        raise InputError("options", type(options).__name__, "a SimOptions or None")
    if options is None:
        options = SimOptions(warmup_requests=default_warmup(load, n))
    options = replace(options, closed_loop=ClosedLoop(load, seed))
    reqs: SimRequests = poisson_requests(workload, 1.0, n, seed=seed)
    res = simulate(config, model, reqs, slo=slo, options=options, **sim_kwargs)
    rec = res.records
    x, window = closed_loop_throughput(rec, options.warmup_requests, load.users)
    m = rec.measured & rec.completed
    response = float(np.mean(rec.end_s[m] - rec.arrival_s[m])) if m.any() else math.nan
    tokens = float(np.mean(rec.output_tokens[m])) if m.any() else math.nan
    return ClosedLoopSimResult(res.summary, rec, load, x, window, x * tokens, response)
