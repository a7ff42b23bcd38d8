"""Core of the discrete-event simulator: request input, step-time protocol, instance specs, the
heap-based event loop and the per-request recorder.

Time advances from event to event (a binary heap of (time, sequence number, handler, argument));
arrivals are merged in from a sorted array rather than pushed onto the heap. Ties are broken
deterministically: arrivals before other events at the same instant, then events in the order they
were scheduled. Nothing here is random, so a run is a pure function of its inputs.

The model of serving lives in :mod:`model.sim.colocated` and :mod:`model.sim.disaggregated`;
step times come from a :class:`StepTimes` object, which for real runs is
:class:`model.sim.steps.RooflineSteps` (the roofline layer, no second performance model) and in
tests a set of hand-written callables (:class:`CallableSteps`).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from model.errors import InputError, check_whole
from model.hardware.engines import PREEMPTIONS, Router
from model.physics import decode_tokens
from model.physics.decode_tokens import DecodeTokens, decode_steps
from model.workload.prefix import check_routing

__all__ = [
    "CallableSteps",
    "EventLoop",
    "InstanceSpec",
    "Recorder",
    "SimOptions",
    "SimRequests",
    "StepTimes",
    "new_run",
]


class StepTimes(Protocol):
    """Duration of one engine iteration of an instance, seconds.

    - ``prefill_s(prompts, cached=None)``: one prefill-only iteration over prompts of ``prompts``
      new tokens each, after ``cached`` prefix tokens each already in the prefix cache (None: none).
    - ``decode_s(batch, context_tokens)``: one decode iteration of ``batch`` sequences whose KV
      holds ``context_tokens`` tokens in total (each attends to its own context incl. its new token).
    - ``mixed_s(chunk_tokens, chunk_prefix_tokens, decode_batch, decode_context_tokens)``: one
      chunked-prefill iteration (Sarathi-Serve): ``chunk_tokens`` prompt tokens whose attention
      also reads ``chunk_prefix_tokens`` earlier tokens (token-weighted mean over the prompts in
      the chunk), with ``decode_batch`` decodes of ``decode_context_tokens`` total context.
    """

    def prefill_s(self, prompts: Sequence[int], cached: Sequence[int] | None = None) -> float: ...

    def decode_s(self, batch: int, context_tokens: int) -> float: ...

    def mixed_s(
        self, chunk_tokens: int, chunk_prefix_tokens: float, decode_batch: int, decode_context_tokens: int
    ) -> float: ...


@dataclass(frozen=True)
class CallableSteps:
    """:class:`StepTimes` from three plain callables (hand-traceable tests, what-if studies)."""

    prefill: Callable[[Sequence[int]], float]
    decode: Callable[[int, int], float]
    mixed: Callable[[int, float, int, int], float] | None = None

    def prefill_s(self, prompts: Sequence[int], cached: Sequence[int] | None = None) -> float:
        """The callable sees the new (uncached) tokens only."""
        return float(self.prefill(prompts))

    def decode_s(self, batch: int, context_tokens: int) -> float:
        return float(self.decode(batch, context_tokens))

    def mixed_s(
        self, chunk_tokens: int, chunk_prefix_tokens: float, decode_batch: int, decode_context_tokens: int
    ) -> float:
        if self.mixed is None:
            raise InputError("steps.mixed", None, "a mixed-iteration callable for chunked prefill")
        return float(self.mixed(chunk_tokens, chunk_prefix_tokens, decode_batch, decode_context_tokens))


@dataclass(frozen=True)
class InstanceSpec:
    """One serving instance (one model copy on the GPUs of its parallel layout; ``label`` names the
    layout and GPU, e.g. "TP2 h100-sxm"): its step times and limits.

    ``kv_capacity_tokens``: KV-cache tokens the instance holds (model.physics.memory.memory_fit).
    ``max_batched_tokens``: prompt tokens per prefill iteration (vLLM ``max_num_batched_tokens``)
    or, for chunked prefill, the whole token budget per iteration (decodes + chunk).
    ``max_num_seqs``: cap on sequences in the running batch (vLLM ``max_num_seqs``); None = KV only.
    ``preemption``: incremental KV allocation with pre-emption (colocated replicas); None: admit a
    request only when its whole KV fits.
    """

    steps: Any
    kv_capacity_tokens: int
    max_batched_tokens: int
    max_num_seqs: int | None = None
    label: str = ""
    preemption: Any = None  # model.sim.preemption.PreemptionSpec; None: whole-KV admission
    prefix_tiers: tuple = ()  # offload tiers of the prefix caches: (capacity tokens, reload(tokens) s)

    def __post_init__(self) -> None:
        for name in ("prefill_s", "decode_s", "mixed_s"):
            if not callable(getattr(self.steps, name, None)):
                raise InputError(
                    "steps", self.steps, "an object with prefill_s, decode_s and mixed_s methods"
                )
        check_whole("kv_capacity_tokens", self.kv_capacity_tokens, 1)
        check_whole("max_batched_tokens", self.max_batched_tokens, 1)
        if self.max_num_seqs is not None:
            check_whole("max_num_seqs", self.max_num_seqs, 1)


# Backlog (requests waiting for prefill or for decode admission) beyond which a run is stopped and
# reported unstable. A stable queue rarely holds more than a few hundred requests; an overloaded one
# crosses any fixed bound in time proportional to the bound, which keeps memory and run time bounded.
DEFAULT_MAX_QUEUED_REQUESTS = 4096


@dataclass(frozen=True)
class SimOptions:
    """Run controls.

    ``max_queued_requests``: stop and report "unstable" when this many requests wait at once.
    ``max_sim_time_s``: optional stop when simulated time passes this (also "unstable").
    ``warmup_requests``: the first this-many requests (by arrival) are served but left out of the
    summary statistics (the system starts empty).
    ``progress``: called as progress(arrived, total) about every 1% of arrivals.
    ``closed_loop``: None (open loop: the requests' arrival times), or a closed-loop source
    (model.sim.closed_loop.ClosedLoop) whose users send each request when their last one ends.

    ``prefix_routing``: how requests with block ids pick an instance's prefix cache
    (model.workload.prefix.ROUTINGS; model.sim.prefix_cache).
    ``router``: how arrivals are spread over colocated replicas (model.hardware.engines.Router);
    None: the engine profile's (``simulate``'s ``engine``, vLLM by default).
    ``preemption``: what a colocated replica does when its KV runs out, one of
    model.hardware.engines.PREEMPTIONS (model.sim.preemption); None: the engine profile's.
    """

    max_queued_requests: int = DEFAULT_MAX_QUEUED_REQUESTS
    max_sim_time_s: float | None = None
    warmup_requests: int = 0
    progress: Callable[[int, int], None] | None = field(default=None, compare=False)
    closed_loop: Any = None

    prefix_routing: str = "cache-aware"
    router: Router | None = None
    preemption: str | None = None

    def __post_init__(self) -> None:
        check_routing(self.prefix_routing, "prefix_routing")
        if self.preemption is not None and self.preemption not in PREEMPTIONS:
            raise InputError("preemption", self.preemption, f"one of {PREEMPTIONS} or None")
        if self.router is not None and not isinstance(self.router, Router):
            raise InputError(
                "router", type(self.router).__name__, "a Router (model.hardware.engines) or None"
            )
        check_whole("max_queued_requests", self.max_queued_requests, 1)
        check_whole("warmup_requests", self.warmup_requests, 0)
        t = self.max_sim_time_s
        if t is not None and not (isinstance(t, int | float) and not isinstance(t, bool) and t > 0):
            raise InputError("max_sim_time_s", t, "a time > 0 s or None")
        if self.closed_loop is not None and not callable(getattr(self.closed_loop, "event_loop", None)):
            raise InputError("closed_loop", type(self.closed_loop).__name__, "a ClosedLoop or None")


@dataclass(frozen=True, eq=False)
class SimRequests:
    """The requests to replay: arrival times (s, nondecreasing), prompt and output token counts.

    Prefix caching (model.sim.prefix_cache), either of:
    ``cached_tokens``: prompt tokens each request finds cached wherever it runs (a fixed hit rate,
    model.workload.scenario.cached_prompt_tokens); or ``hash_ids``: per request, the hash ids of its
    ``block_tokens``-token KV blocks (Mooncake style: equal id = same prefix block), first its
    prompt's blocks, optionally followed by its output's (cached when the request ends, so the next
    turn of a session can reuse them); each instance then keeps an LRU cache of blocks.
    ``session_ids``: the session each request belongs to (None: no sessions).
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    source: str = ""
    cached_tokens: np.ndarray | None = None
    hash_ids: tuple[tuple, ...] | None = None
    block_tokens: int = 512
    session_ids: np.ndarray | None = None

    def __post_init__(self) -> None:
        a = np.asarray(self.arrival_s, dtype=float)
        p = np.asarray(self.prompt_tokens)
        o = np.asarray(self.output_tokens)
        if a.ndim != 1 or a.size == 0:
            raise InputError("requests", f"{a.size} arrivals", "at least one request (an empty trace)")
        if p.shape != a.shape or o.shape != a.shape:
            raise InputError("requests", f"shapes {a.shape}, {p.shape}, {o.shape}", "equal-length 1-D arrays")
        if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(np.diff(a) < 0):
            raise InputError(
                "arrival_s", "unsorted, negative or non-finite", "finite times >= 0, nondecreasing"
            )
        for name, v in (("prompt_tokens", p), ("output_tokens", o)):
            if not np.all(np.isfinite(v)) or np.any(v < 1) or np.any(v != np.round(v)):
                raise InputError(name, "non-integer or < 1", "whole token counts >= 1")
        object.__setattr__(self, "arrival_s", a)
        object.__setattr__(self, "prompt_tokens", p.astype(np.int64))
        object.__setattr__(self, "output_tokens", o.astype(np.int64))
        self._check_prefix(p)

    def _check_prefix(self, p: np.ndarray) -> None:
        n = p.size
        check_whole("block_tokens", self.block_tokens, 1)
        if self.cached_tokens is not None:
            c = np.asarray(self.cached_tokens)
            if c.shape != p.shape or not np.all(np.isfinite(c)) or np.any(c < 0) or np.any(c >= p):
                raise InputError(
                    "cached_tokens",
                    "wrong shape or out of range",
                    "whole tokens per request in [0, prompt - 1]",
                )
            object.__setattr__(self, "cached_tokens", np.round(c).astype(np.int64))
        if self.hash_ids is not None:
            ids = self.hash_ids
            if self.cached_tokens is not None:
                raise InputError(
                    "hash_ids", "with cached_tokens", "either hash_ids or cached_tokens, not both"
                )
            if (
                not isinstance(ids, tuple | list)
                or len(ids) != n
                or not all(isinstance(x, tuple | list) for x in ids)
            ):
                raise InputError(
                    "hash_ids", f"{type(ids).__name__}", f"one list of block ids per request ({n})"
                )
            object.__setattr__(self, "hash_ids", tuple(tuple(x) for x in ids))
        if self.session_ids is not None:
            sids = np.asarray(self.session_ids, dtype=object)
            if sids.shape != p.shape:
                raise InputError("session_ids", f"shape {sids.shape}", f"one session id per request ({n})")
            object.__setattr__(self, "session_ids", sids)

    def at_times(self, arrival_s: np.ndarray) -> SimRequests:
        """The same requests (lengths, cache hits, block ids, sessions) at other arrival times."""
        return dataclasses.replace(self, arrival_s=arrival_s)

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    @property
    def span_s(self) -> float:
        """Time from first to last arrival."""
        return float(self.arrival_s[-1] - self.arrival_s[0])


class EventLoop:
    """Heap-based event loop with arrivals merged from a sorted list; see the module docstring."""

    __slots__ = ("_heap", "_seq", "arrival", "n", "now", "options", "queued", "stop_reason")

    def __init__(self, arrival_s: list[float], options: SimOptions) -> None:
        self._heap: list[tuple[float, int, Callable[[Any], None], Any]] = []
        self._seq = 0
        self.arrival = arrival_s
        self.n = len(arrival_s)
        self.now = 0.0
        self.options = options
        self.queued = 0  # requests waiting for prefill or for decode admission
        self.stop_reason = ""

    def at(self, t: float, fn: Callable[[Any], None], arg: Any) -> None:
        """Call ``fn(arg)`` at time ``t``."""
        heapq.heappush(self._heap, (t, self._seq, fn, arg))
        self._seq += 1

    def run(self, on_arrival: Callable[[int], None]) -> None:
        """Process arrivals and events until none are left or a stop bound is hit."""
        heap, arrival, n = self._heap, self.arrival, self.n
        pop = heapq.heappop
        opts = self.options
        max_q = opts.max_queued_requests
        max_t = math.inf if opts.max_sim_time_s is None else float(opts.max_sim_time_s)
        progress = opts.progress
        tick = max(n // 100, 1)
        i = 0
        while True:
            if i < n and (not heap or arrival[i] <= heap[0][0]):
                self.now = arrival[i]
                on_arrival(i)
                i += 1
                if progress is not None and i % tick == 0:
                    progress(i, n)
                if self.queued > max_q:
                    self.stop_reason = (
                        f"unstable: more than {max_q} requests queued at t = {self.now:.3g} s "
                        f"(after {i} of {n} arrivals)"
                    )
                    return
            elif heap:
                t, _, fn, arg = pop(heap)
                self.now = t
                fn(arg)
            else:
                return
            if self.now > max_t:
                self.stop_reason = f"unstable: simulated time passed max_sim_time_s = {max_t:g} s"
                return


class Recorder:
    """Per-request timestamps, filled in during a run (plain lists for speed; NaN = never happened)."""

    def __init__(self, req: SimRequests) -> None:
        n = len(req)
        nan = math.nan
        self.arrival: list[float] = req.arrival_s.tolist()
        self.prompt: list[int] = req.prompt_tokens.tolist()
        self.output: list[int] = req.output_tokens.tolist()
        self.prefill_start = [nan] * n
        self.prefill_end = [nan] * n
        self.decode_admit = [nan] * n  # disaggregated: decode KV reserved
        self.transfer_start = [nan] * n
        self.transfer_end = [nan] * n
        self.first_token = [nan] * n
        self.end = [nan] * n
        self.instance = [-1] * n  # replica (colocated) or decode instance (disaggregated)
        self.prefill_instance = [-1] * n
        self.log_start = [-1] * n  # index of token 2 in the instance's token log
        self.last_step = [-1] * n  # index of the decode step emitting the last token
        self.rejected = [False] * n
        self.cached = [0] * n  # prompt tokens found in the prefix cache where the prefill ran
        self.decode_held = [0] * n  # disaggregated: prompt tokens the decode instance already held
        self.preempted = [0] * n  # times pre-empted (model.sim.preemption)
        self.seg_ref = [nan] * n  # time of the last token before the current decode segment (NaN: first)
        self.itl_before = [0.0] * n  # largest inter-token gap before the current decode segment
        self.hash_ids = req.hash_ids
        self.fixed_cached = req.cached_tokens.tolist() if req.cached_tokens is not None else None
        self.block_tokens = int(req.block_tokens)


def new_run(requests: SimRequests, options: SimOptions) -> tuple[Recorder, EventLoop]:
    """The recorder and event loop of one run: arrivals at the requests' times, or driven by
    completions when ``options.closed_loop`` is set (model.sim.closed_loop)."""
    rec = Recorder(requests)
    if options.closed_loop is not None:
        return rec, options.closed_loop.event_loop(rec, options)
    return rec, EventLoop(rec.arrival, options)


def per_step_tokens(steps: Any) -> DecodeTokens:
    """Tokens per decode step of an instance: a :class:`~model.sim.steps.RooflineSteps` carries the
    physics' decision for its Deployment (:func:`model.physics.decode_tokens.tokens_per_decode_step`);
    other step-time objects get the same function's default."""
    tokens = getattr(steps, "decode_tokens", None)
    return tokens if isinstance(tokens, DecodeTokens) else decode_tokens.tokens_per_decode_step()


def schedule_finish(inst: Any, r: int, first_step: int) -> None:
    """Book the decode iteration (index ``first_step`` + steps - 1 in ``inst.log``) that emits request
    ``r``'s last token: decode_steps(output) = output - 1 iterations after its first token."""
    last = first_step + int(decode_steps(inst.rec.output[r], inst.decode_tokens)) - 1
    inst.rec.last_step[r] = last
    inst.finish.setdefault(last, []).append(r)


def retire_finished(inst: Any, batch: int, now: float) -> int:
    """Book-keeping after a decode iteration on a continuous-batching instance (colocated replica or
    decode instance): log the step, grow the live context by one token per running sequence, and
    release the sequences whose last token this step emitted (their end time, context and KV
    reservation). Each sequence's context grows by the tokens a step emits (``inst.decode_tokens``,
    one without speculation). Returns how many finished.

    ``inst`` carries ``on_finish`` (None, or called with each finished request: its prefix cache
    keeps the blocks), ``log`` (step end times), ``ctx`` (live context tokens), ``kv`` (reserved KV
    tokens), ``running``, ``rec`` (the Recorder) and ``finish`` (step index -> requests ending there).
    """
    inst.log.append(now)
    emitted = inst.decode_tokens.emitted
    inst.ctx += batch * emitted
    done = inst.finish.pop(len(inst.log) - 1, None)
    if not done:
        return 0
    rec = inst.rec
    for r in done:
        rec.end[r] = now
        if inst.on_finish is not None:
            inst.on_finish(r)
        tokens = rec.prompt[r] + rec.output[r]
        inst.ctx -= rec.prompt[r] + 1 + decode_steps(rec.output[r], inst.decode_tokens) * emitted
        inst.kv -= tokens
    inst.running -= len(done)
    return len(done)
