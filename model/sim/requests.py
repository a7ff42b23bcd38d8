"""Request sequences for the simulator: sampled from a workload preset, or taken from a trace."""

from __future__ import annotations

import numbers

import numpy as np

from model.errors import InputError
from model.limits import MAX_SIM_REQUESTS, check_int, checked
from model.sim.engine import SimRequests
from model.workload.arrivals import ArrivalProcess, Poisson, scale_to_rate
from model.workload.presets import Workload, get_workload
from model.workload.scenario import cached_prompt_tokens
from model.workload.traces import Trace

__all__ = ["poisson_requests", "trace_requests"]


@checked
def poisson_requests(
    workload: str | Workload,
    rate_rps: float,
    n: int,
    seed: int = 0,
    arrivals: ArrivalProcess | None = None,
) -> SimRequests:
    """n requests with lengths from ``workload`` and arrivals from ``arrivals`` (default Poisson(rate)).

    Deterministic for a seed: lengths and arrival gaps come from separate generators seeded from
    ``seed``, so changing the rate rescales the same gaps.
    """
    wl = workload if isinstance(workload, Workload) else get_workload(workload)
    check_int("requests", n, 1, MAX_SIM_REQUESTS, "the simulator's per-request records bound memory")
    proc = arrivals if arrivals is not None else Poisson(rate_rps)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InputError("seed", seed, "a whole number >= 0")
    len_rng, arr_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(2))
    prompt, output = wl.sample_requests(n, len_rng)
    h = wl.prefix_cache_hit_rate
    cached = cached_prompt_tokens(prompt, h).astype(np.int64) if h > 0 else None
    return SimRequests(
        proc.arrival_times_s(n, arr_rng),
        prompt,
        output,
        source=f"{wl.name} @ {rate_rps:g}/s",
        cached_tokens=cached,
    )


@checked
def trace_requests(trace: Trace, n: int | None = None, rate_rps: float | None = None) -> SimRequests:
    """The first ``n`` requests of a trace, optionally time-scaled to ``rate_rps`` (burst shape kept)."""
    if not isinstance(trace, Trace):
        raise InputError("trace", type(trace).__name__, "a Trace (see model.workload.traces.load_trace)")
    if n is not None:
        check_int("requests", n, 1, MAX_SIM_REQUESTS, "the simulator's per-request records bound memory")
    m = len(trace) if n is None else min(int(n), len(trace))
    if m < 1:
        raise InputError("requests", n, "at least one request")
    t = trace.arrival_s[:m]
    if rate_rps is not None:
        if m < 2:
            raise InputError("rate_rps", rate_rps, "a trace of at least two requests to rescale")
        t = scale_to_rate(t, rate_rps)
    return SimRequests(
        t,
        trace.prompt_tokens[:m],
        trace.output_tokens[:m],
        source=trace.source,
        hash_ids=trace.hash_ids[:m] if trace.hash_ids is not None else None,
        session_ids=trace.session_ids[:m] if trace.session_ids is not None else None,
    )
