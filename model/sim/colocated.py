"""Colocated serving in the simulator: R replicas, each running prefill and decode with continuous
batching, without or with chunked prefill.

Scheduling per replica (iteration-level, Orca, Yu et al. OSDI 2022, sec. 3.2):

- **No chunking (vLLM's default scheduler, prefill first)**: when requests wait and the head one
  can be admitted, the next iteration is a prefill-only step over waiting prompts taken FCFS up to
  ``max_batched_tokens`` prompt tokens (a longer prompt runs alone); every running decode stalls
  for its whole duration (the interference DistServe, Zhong et al. OSDI 2024, sec. 2.2, measures).
  Otherwise the iteration decodes one token for every running sequence.
- **Chunked prefill (Sarathi-Serve, Agrawal et al. OSDI 2024, sec. 4)**: every iteration carries
  all running decodes (one token each) plus prompt chunks filling the rest of the token budget
  ``max_batched_tokens``: first the prompt already being prefilled, then newly admitted prompts
  FCFS, several per iteration if they fit (vLLM's chunked-prefill scheduler does the same).

KV capacity: a request is admitted only if its whole KV (prompt + output tokens) fits next to the
reservations of the requests already admitted, so the running batch can never outgrow the cache and
nothing is pre-empted (policy "queue": head-of-line FCFS waiting). This reserves more than vLLM,
which allocates blocks as tokens appear and pre-empts by recompute when it runs out (Kwon et al.
SOSP 2023, sec. 4.5); at high KV occupancy the simulator therefore admits fewer requests than vLLM.
With the engine's pre-emption policy "recompute" or "swap" (``InstanceSpec.preemption``) a replica
does as vLLM does instead: admission while the prompt fits, KV allocated as tokens appear, the most
recently admitted running request pre-empted when it runs out (model.sim.preemption).

The first output token comes from the prefill iteration (it samples from the last prompt
position); tokens 2 .. O come from the next O - 1 decode (or mixed) iterations.

Routing follows the engine profile's router (model.hardware.engines.Router; the planner's prefill
queue follows the same one, model.queueing.routing): "round-robin" (arrival i to replica i mod R),
"random" (uniform, seeded), "least-loaded" (the lowest waiting_weight x waiting + running requests,
prompts in prefill counted as running as in vLLM's data-parallel balancer; lowest index on ties),
"least-kv" (the fewest KV tokens reserved plus waiting prompt tokens), "shared-queue" (one FCFS queue;
idle replicas are woken on arrival, lowest index first, and every replica takes its next prompts
from the head at its iteration boundary) and "cache-aware" (prefix caches below; least-loaded
without block ids).

Prefix caching (model.sim.prefix_cache): when requests carry block ids, each replica keeps an LRU
block cache and the prefix routing rule (``prefix_routing``, cache-aware by default) picks the
replica; a prompt whose prefix is cached computes only the rest (its first chunk starts after the
cached prefix; without chunking the prefill step reads the cached prefix), and the token budget
counts uncached tokens only (vLLM's ``max_num_batched_tokens`` counts scheduled tokens).
"""

from __future__ import annotations

import random
from collections import deque

from model.hardware.catalog import get_engine
from model.hardware.engines import Router
from model.sim import preemption
from model.sim.engine import (
    EventLoop,
    InstanceSpec,
    Recorder,
    per_step_tokens,
    retire_finished,
    schedule_finish,
)
from model.sim.prefix_cache import PoolCaches


class Replica:
    """One colocated replica's scheduler state."""

    def __init__(
        self, idx: int, spec: InstanceSpec, loop: EventLoop, rec: Recorder, chunked: bool, caches: PoolCaches
    ) -> None:
        self.idx = idx
        self.caches = caches
        self.on_finish = (lambda r: caches.store_all(idx, r)) if caches.active else None
        self.spec = spec
        self.steps = spec.steps
        self.decode_tokens = per_step_tokens(spec.steps)
        self.loop = loop
        self.rec = rec
        self.chunked = chunked
        self.kv_cap = spec.kv_capacity_tokens
        self.budget = spec.max_batched_tokens
        self.max_seqs = spec.max_num_seqs if spec.max_num_seqs is not None else 1 << 62
        self.waiting: deque[int] = deque()
        self.waiting_tokens = 0  # prompt tokens of the requests in ``waiting`` (least-kv)
        self.in_prefill = 0  # prompts in the prefill step in progress (prefill first)
        self.prefilling: list[list[int]] = []  # chunked: [request, prompt tokens done]
        self.busy = False
        self.kicked = False
        self.running = 0
        self.ctx = 0  # total KV tokens of running sequences
        self.kv = 0  # reserved KV tokens
        self.kv_high_water = 0
        self.log: list[float] = []  # end time of every token-emitting iteration
        self.finish: dict[int, list[int]] = {}
        self.busy_s = 0.0
        self.iter_start = 0.0
        # incremental KV allocation and pre-emption (model.sim.preemption); None: whole-KV admission
        self.pre = spec.preemption
        self.live: dict[int, None] = {}  # running requests in admission order
        self.base: dict[int, int] = {}  # KV tokens each running request held when it joined
        self.resume: dict[int, int] = {}  # pre-empted, to recompute: tokens it had generated
        self.swapped: dict[int, int] = {}  # pre-empted, swapped to the cpu tier: KV tokens
        self.resumeq: deque[int] = deque()  # pre-empted requests, served before new arrivals
        self.swap_used = 0
        self.pending_s = 0.0  # swap copies to add to the next iteration
        self.preemptions = 0

    def load(self, waiting_weight: float = 1.0) -> float:
        """Requests here, a waiting one weighted ``waiting_weight`` against a running one (prompts
        being prefilled count as running, as vLLM's scheduler lists them)."""
        queued = len(self.waiting) + len(self.resumeq)
        return waiting_weight * queued + len(self.prefilling) + self.in_prefill + self.running

    def kv_load(self) -> int:
        """KV tokens reserved by admitted requests plus the prompt tokens waiting here."""
        return self.kv + self.waiting_tokens

    def enqueue(self, r: int) -> None:
        self.waiting.append(r)
        self.waiting_tokens += self.rec.prompt[r]
        self.wake()

    def wake(self) -> None:
        """Start an iteration at the end of the current instant if idle."""
        if not self.busy and not self.kicked:
            # Start at the end of the current instant, so simultaneous arrivals share a batch.
            self.kicked = True
            self.loop.at(self.loop.now, self._kick, None)

    def _kick(self, _: None) -> None:
        self.kicked = False
        if not self.busy:
            self.start()

    # ------------------------------------------------------------------ shared
    def _reserve(self, r: int) -> bool:
        """Reserve request ``r``'s KV if it fits: its whole KV, or (pre-emption) its prefill's."""
        room = 0  # V1 schedules the running decodes' next tokens before new prompts
        if self.pre is not None:
            need = preemption.prefill_tokens(self, r)
            room = self.running * self.decode_tokens.emitted
        else:
            need = self.rec.prompt[r] + self.rec.output[r]
        if self.kv + need + room > self.kv_cap:
            return False
        self.kv += need
        if self.kv > self.kv_high_water:
            self.kv_high_water = self.kv
        return True

    def _head(self) -> int | None:
        """The next request to prefill: a pre-empted one to recompute, else the head of the queue."""
        if self.resumeq:
            return self.resumeq[0] if self.resumeq[0] in self.resume else None
        return self.waiting[0] if self.waiting else None

    def _take(self, r: int) -> None:
        """Remove the head request ``r`` from the waiting queue into this replica."""
        if self.resumeq and self.resumeq[0] == r:
            self.resumeq.popleft()
            return
        self.waiting.popleft()
        self.waiting_tokens -= self.rec.prompt[r]
        self.rec.instance[r] = self.idx

    def _first_token(self, r: int, now: float) -> None:
        if self.pre is not None:
            preemption.first_token(self, r, now)
            return
        rec = self.rec
        rec.prefill_end[r] = now
        rec.first_token[r] = now
        out = rec.output[r]
        if out == 1:
            rec.end[r] = now
            self.kv -= rec.prompt[r] + 1
            return
        self.running += 1
        self.ctx += rec.prompt[r] + 1
        k = len(self.log)
        rec.log_start[r] = k
        schedule_finish(self, r, k)

    def _decoded(self, batch: int, now: float) -> None:
        """Book-keeping after an iteration that emitted one token for ``batch`` running sequences."""
        if batch == 0:  # a prefill-only iteration: no sequence emitted a token
            self.log.append(now)
            return
        if self.pre is not None:
            preemption.retire(self, batch, now)
            return
        retire_finished(self, batch, now)

    def start(self) -> None:
        if self.chunked:
            self._start_chunked()
        else:
            self._start_plain()

    # ------------------------------------------------------------------ prefill first, no chunking
    def _start_plain(self) -> None:
        loop, rec = self.loop, self.rec
        now = loop.now
        if self.pre is not None:
            preemption.swap_in(self)
        if self._head() is not None:
            batch: list[int] = []
            tokens = 0
            room = self.max_seqs - self.running
            cached: list[int] = []
            while len(batch) < room and (r := self._head()) is not None:
                resumed = r in self.resume
                c = 0 if resumed else self.caches.cached(self.idx, r)
                p = (preemption.prefill_tokens(self, r) if resumed else rec.prompt[r]) - c
                if batch and tokens + p > self.budget:
                    break
                if not self._reserve(r):
                    break
                self._take(r)
                batch.append(r)
                cached.append(c)
                tokens += p
                if not resumed:
                    rec.cached[r] = c
                    rec.prefill_start[r] = now
            if batch:
                loop.queued -= len(batch)
                self.in_prefill = len(batch)
                new = [(preemption.prefill_tokens(self, r) if self.pre else rec.prompt[r]) for r in batch]
                new = [n - c for n, c in zip(new, cached, strict=True)]
                dt = self.steps.prefill_s(new, cached) if any(cached) else self.steps.prefill_s(new)
                dt += self._pending() + sum(self.caches.reload_s.pop(r, 0.0) for r in batch)
                self.busy = True
                self.iter_start = now
                loop.at(now + dt, self._end_prefill, batch)
                return
        if self.pre is not None:
            preemption.make_room(self)
        if self.running:
            dt = self.steps.decode_s(self.running, self.ctx) + self._pending()
            self.busy = True
            self.iter_start = now
            loop.at(now + dt, self._end_decode, self.running)
            return
        self.busy = False

    def _pending(self) -> float:
        """Swap copies booked since the last iteration (pre-emption "swap"), added to this one."""
        dt, self.pending_s = self.pending_s, 0.0
        return dt

    def _end_prefill(self, batch: list[int]) -> None:
        now = self.loop.now
        self.busy_s += now - self.iter_start
        self.in_prefill = 0
        for r in batch:
            if r not in self.resume:
                self.caches.store_prompt(self.idx, r)
            self._first_token(r, now)
        self._start_plain()

    def _end_decode(self, batch: int) -> None:
        now = self.loop.now
        self.busy_s += now - self.iter_start
        self._decoded(batch, now)
        self._start_plain()

    # ------------------------------------------------------------------ chunked prefill
    def _start_chunked(self) -> None:
        loop, rec = self.loop, self.rec
        now = loop.now
        preempted = False
        if self.pre is not None:
            preempted = preemption.make_room(self)
            preemption.swap_in(self)
        budget = self.budget - self.running
        pieces: list[tuple[list[int], int]] = []
        chunk = 0
        prefix_weighted = 0
        for entry in self.prefilling:
            if budget <= 0:
                break
            c = min(self._target(entry[0]) - entry[1], budget)
            pieces.append((entry, c))
            chunk += c
            prefix_weighted += c * entry[1]
            budget -= c
        while (
            budget > 0
            and not preempted
            and (r := self._head()) is not None
            and self.running + len(self.prefilling) < self.max_seqs
        ):
            if not self._reserve(r):
                break
            self._take(r)
            loop.queued -= 1
            hit = 0
            if r not in self.resume:
                rec.prefill_start[r] = now
                hit = self.caches.cached(self.idx, r)
                rec.cached[r] = hit
            entry = [r, hit]
            self.pending_s += self.caches.reload_s.pop(r, 0.0)  # its tier hits come back first
            self.prefilling.append(entry)
            c = min(self._target(r) - hit, budget)
            pieces.append((entry, c))
            chunk += c
            prefix_weighted += c * hit
            budget -= c
        if chunk == 0 and self.running == 0:
            self.busy = False
            return
        if chunk == 0:
            dt = self.steps.decode_s(self.running, self.ctx)
        else:
            dt = self.steps.mixed_s(chunk, prefix_weighted / chunk, self.running, self.ctx)
        dt += self._pending()
        self.busy = True
        self.iter_start = now
        loop.at(now + dt, self._end_chunked, (self.running, pieces))

    def _end_chunked(self, arg: tuple[int, list[tuple[list[int], int]]]) -> None:
        batch, pieces = arg
        now = self.loop.now
        self.busy_s += now - self.iter_start
        self._decoded(batch, now)
        for entry, c in pieces:
            entry[1] += c
        while self.prefilling and self.prefilling[0][1] >= self._target(self.prefilling[0][0]):
            r = self.prefilling.pop(0)[0]
            if r not in self.resume:
                self.caches.store_prompt(self.idx, r)
            self._first_token(r, now)
        self._start_chunked()

    def _target(self, r: int) -> int:
        """Tokens request ``r``'s prefill covers (its prompt; plus its generated tokens on a recompute)."""
        return preemption.prefill_tokens(self, r) if self.pre is not None else self.rec.prompt[r]


def run_colocated(
    spec: InstanceSpec,
    replicas: int,
    chunked: bool,
    loop: EventLoop,
    rec: Recorder,
    prefix_routing: str = "cache-aware",
    router: Router | None = None,
) -> list[Replica]:
    """Replay ``rec``'s requests through ``replicas`` colocated replicas; returns their final state.
    ``router`` (None: the default engine's, vLLM's) spreads the arrivals (module
    docstring); requests with block ids pick a replica by ``prefix_routing`` instead, unless the
    router is a shared queue."""
    router = router or get_engine(None).router
    cap = spec.kv_capacity_tokens
    caches = PoolCaches(rec, replicas, cap, prefix_routing, tiers=spec.prefix_tiers)
    pool = [Replica(i, spec, loop, rec, chunked, caches) for i in range(replicas)]
    policy, weight = router.policy, router.waiting_weight
    if policy == "shared-queue":
        shared: deque[int] = deque()
        for rep in pool:
            rep.waiting = shared
    draw = random.Random(0).randrange
    turn = [0]

    def least(load) -> Replica:
        best, best_load = pool[0], load(pool[0])
        for rep in pool[1:]:
            x = load(rep)
            if x < best_load:
                best, best_load = rep, x
        return best

    def pick(r: int) -> Replica:
        if replicas == 1:
            return pool[0]
        p = caches.pick(r, [rep.load() for rep in pool], balance=True) if caches.active else None
        if p is not None:
            return pool[p]
        if policy == "round-robin":
            turn[0] += 1
            return pool[(turn[0] - 1) % replicas]
        if policy == "random":
            return pool[draw(replicas)]
        if policy == "least-kv":
            return least(Replica.kv_load)
        return least(lambda rep: rep.load(weight))

    def on_arrival(r: int) -> None:
        if rec.prompt[r] + rec.output[r] > cap:
            rec.rejected[r] = True
            return
        loop.queued += 1
        if policy == "shared-queue":
            shared.append(r)
            for rep in pool:  # idle replicas take from the head now, busy ones when their step ends
                rep.wake()
            return
        best = pick(r)
        rec.instance[r] = best.idx
        best.enqueue(r)

    loop.run(on_arrival)
    return pool
