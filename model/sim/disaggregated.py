"""Disaggregated serving in the simulator: a prefill pool, a KV link, a decode pool.

- **Prefill pool** (DistServe, Zhong et al. OSDI 2024, sec. 4; Splitwise, Patel et al. ISCA 2024,
  sec. 4): one FCFS queue feeds every prefill instance; an idle instance takes the waiting prompts
  FCFS up to ``max_batched_tokens`` prompt tokens (a longer prompt runs alone) as one prefill
  iteration. A shared queue served by whichever instance frees first is the least-loaded routing
  rule with exact knowledge, and makes the pool an FCFS multi-server queue (M/G/c-like).
- **Decode routing and admission** (DistServe sec. 4.3, pull-based): each request is routed to the
  decode instance with the fewest reserved plus pending KV tokens, and waits there (FCFS) until its
  whole KV (prompt + output tokens) fits; then the decode instance reserves it and the KV transfer
  starts. With ``layerwise`` the request is routed when its prefill starts, so the transfer can run
  alongside the prefill (Splitwise sec. 4.3: each layer's KV is sent once it is computed); without
  it, when its prefill ends.
- **Link**: each prefill instance sends over its own ``link``; transfers from one prefill instance
  are serialised FCFS (not bandwidth-shared). A transfer of T seconds
  (model.hardware.collectives.transfer_time_s: one message per layer when layer-wise, one message otherwise)
  starts at max(reservation, link free, data ready) where data is ready once the first layer is
  computed (layer-wise: prefill start + prefill time / layers) or at prefill end, and ends at
  start + T, but not before prefill end + T_last (the last layer's share, which cannot leave
  before the prefill finishes). For a lone request this exposes max(T_last, T + S/N - S) of
  the transfer, the pipelining bound of the planner's model.disaggregated.
- **Receiving lanes**: each decode instance receives over its own lanes, which carry one
  transfer's bytes at a time, FCFS in the order the transfers become ready (at start above): a
  transfer's start is also the lanes' first free time, and it holds them for its bytes plus one
  message latency (KVTransfer.wire_s; per-layer messages pipeline). So the pool's transfers into one
  decode instance cannot exceed its lanes' bandwidth: one NIC port per GPU in the link profiles
  (InfiniBand NDR 400 Gbit/s: 50 GB/s a port). This is the planner's receiving-end queue
  (model.serving.disaggregated, an M/G/1 at each end); the sending link does not wait for it (a
  NIC serves several queue pairs at once), so the two ends delay a transfer independently.
- **Decode pool**: continuous batching; a request whose KV has arrived joins at the next
  iteration boundary. Its first token is delivered then (TTFT includes queue wait, prefill, the
  decode-admission wait and the exposed transfer, as the planner defines it); tokens 2 .. O come
  from its next O - 1 decode iterations.

Prefix caching (model.sim.prefix_cache): with block ids, each prefill instance and each decode
instance keeps an LRU block cache. An idle prefill instance with the longest cached prefix of the
head request takes it (cache-aware; Mooncake's KV-cache-centric scheduler, Qin et al. FAST 2025,
sec. 5) and computes only the uncached part; the decode instance is picked by the same routing rule
over the decode caches (which hold earlier turns it decoded), and only the KV it lacks crosses the
link. A fixed hit rate (``cached_tokens``) shortens prefill only: decode instances hold nothing.

Prefill-side KV: a prompt's KV stays on its prefill instance from prefill start until its transfer
ends; an instance takes a batch only if that KV fits next to what it still holds (otherwise the
queue waits for transfers to drain, the back-pressure DistServe's pull-based transfer creates).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from model.sim.engine import (
    EventLoop,
    InstanceSpec,
    Recorder,
    per_step_tokens,
    retire_finished,
    schedule_finish,
)
from model.sim.prefix_cache import PoolCaches

# (transfer_s, last_layer_s) of a request's KV, from its prompt tokens.
TransferFn = Callable[[int], tuple[float, float]]


class DecodeInstance:
    """Continuous-batching decode instance with FCFS KV admission."""

    def __init__(
        self, idx: int, spec: InstanceSpec, loop: EventLoop, rec: Recorder, caches: PoolCaches
    ) -> None:
        self.idx = idx
        self.on_finish = (lambda r: caches.store_all(idx, r)) if caches.active else None
        self.steps = spec.steps
        self.decode_tokens = per_step_tokens(spec.steps)
        self.loop = loop
        self.rec = rec
        self.kv_cap = spec.kv_capacity_tokens
        self.max_seqs = spec.max_num_seqs if spec.max_num_seqs is not None else 1 << 62
        self.pending: deque[int] = deque()
        self.pending_tokens = 0
        self.admitted = 0  # reserved but not finished (transferring, joining or running)
        self.joins: list[int] = []
        self.busy = False
        self.kicked = False
        self.running = 0
        self.ctx = 0
        self.kv = 0
        self.kv_high_water = 0
        self.log: list[float] = []
        self.finish: dict[int, list[int]] = {}
        self.busy_s = 0.0
        self.iter_start = 0.0
        self.recv_free = 0.0  # when the receiving lanes have carried every transfer ready so far
        self.on_admit: Callable[[int], None] = lambda r: None

    def load_tokens(self) -> int:
        return self.kv + self.pending_tokens

    def enqueue(self, r: int) -> None:
        self.pending.append(r)
        self.pending_tokens += self.rec.prompt[r] + self.rec.output[r]
        self.loop.queued += 1
        self.try_admit()

    def try_admit(self) -> None:
        rec, pending = self.rec, self.pending
        while pending and self.admitted < self.max_seqs:
            r = pending[0]
            need = rec.prompt[r] + rec.output[r]
            if self.kv + need > self.kv_cap:
                return
            pending.popleft()
            self.pending_tokens -= need
            self.loop.queued -= 1
            self.kv += need
            self.admitted += 1
            if self.kv > self.kv_high_water:
                self.kv_high_water = self.kv
            rec.decode_admit[r] = self.loop.now
            self.on_admit(r)

    def join(self, r: int) -> None:
        """The request's KV has arrived: deliver its first token, batch it from the next iteration."""
        rec = self.rec
        now = self.loop.now
        rec.first_token[r] = now
        if rec.output[r] == 1:
            rec.end[r] = now
            self.kv -= rec.prompt[r] + 1
            self.admitted -= 1
            self.try_admit()
            return
        self.joins.append(r)
        if not self.busy and not self.kicked:
            # Start at the end of the current instant, so simultaneous joins share an iteration.
            self.kicked = True
            self.loop.at(now, self._kick, None)

    def _kick(self, _: None) -> None:
        self.kicked = False
        if not self.busy:
            self.start()

    def start(self) -> None:
        rec = self.rec
        if self.joins:
            k = len(self.log)
            for r in self.joins:
                self.running += 1
                self.ctx += rec.prompt[r] + 1
                rec.log_start[r] = k
                schedule_finish(self, r, k)
            self.joins.clear()
        if self.running == 0:
            self.busy = False
            return
        now = self.loop.now
        self.busy = True
        self.iter_start = now
        self.loop.at(now + self.steps.decode_s(self.running, self.ctx), self._end, self.running)

    def _end(self, batch: int) -> None:
        now = self.loop.now
        self.busy_s += now - self.iter_start
        done = retire_finished(self, batch, now)
        if done:
            self.admitted -= done
            self.try_admit()
        self.start()


class PrefillPool:
    """Shared FCFS queue, ``n`` prefill instances, one outgoing link per instance."""

    def __init__(
        self,
        spec: InstanceSpec,
        n: int,
        decode: list[DecodeInstance],
        transfer: TransferFn,
        layerwise: bool,
        layers: int | None,
        loop: EventLoop,
        rec: Recorder,
        caches: tuple[PoolCaches, PoolCaches],
    ) -> None:
        self.caches, self.decode_caches = caches
        self.steps = spec.steps
        self.first_layer = 0.0 if layers is None else 1.0 / layers
        self.cap = spec.max_batched_tokens
        self.max_seqs = spec.max_num_seqs if spec.max_num_seqs is not None else 1 << 62
        self.n = n
        self.decode = decode
        self.transfer = transfer
        # the receiving lanes' busy time per transfer (KVTransfer.wire_s; a plain callable: its whole time)
        self.wire_s: Callable[[int], float] | None = getattr(transfer, "wire_s", None)
        self.layerwise = layerwise
        self.loop = loop
        self.rec = rec
        self.queue: deque[int] = deque()
        self.idle = list(range(n))
        self.kv_cap = spec.kv_capacity_tokens
        self.busy_s = [0.0] * n
        self.link_free = [0.0] * n
        self.link_busy_s = [0.0] * n
        self.held = [0] * n  # prompt KV tokens waiting on the prefill side
        self.held_high_water = [0] * n
        self.kicked = False
        for d in decode:
            d.on_admit = self._admitted

    def arrive(self, r: int) -> None:
        self.queue.append(r)
        self.loop.queued += 1
        if self.idle and not self.kicked:
            # Dispatch at the end of the current instant, so simultaneous arrivals share a batch.
            self.kicked = True
            self.loop.at(self.loop.now, self._kick, None)

    def _kick(self, _: None) -> None:
        self.kicked = False
        self._dispatch()

    def _dispatch(self) -> None:
        loop, rec, queue, held = self.loop, self.rec, self.queue, self.held
        while queue and self.idle:
            # The idle instance holding the least KV takes the head, if its prompt's KV fits there
            # (with block ids: the one with the longest cached prefix of the head, by the routing rule).
            i = min(self.idle, key=held.__getitem__)
            if self.caches.active:
                i = self._by_cache(queue[0])
            room = self.kv_cap - held[i]
            if rec.prompt[queue[0]] > room:
                return  # retried when a transfer frees prefill-side KV
            self.idle.remove(i)
            now = loop.now
            batch = [queue.popleft()]
            cached = [self.caches.cached(i, batch[0])]
            tokens = rec.prompt[batch[0]]  # KV held here until sent
            computed = tokens - cached[0]  # tokens the step computes (the engine's token cap)
            while queue and len(batch) < self.max_seqs and tokens + rec.prompt[queue[0]] <= room:
                c = self.caches.cached(i, queue[0])
                if computed + rec.prompt[queue[0]] - c > self.cap:
                    break
                r = queue.popleft()
                batch.append(r)
                cached.append(c)
                tokens += rec.prompt[r]
                computed += rec.prompt[r] - c
            loop.queued -= len(batch)
            new = [rec.prompt[r] - c for r, c in zip(batch, cached, strict=True)]
            dt = self.steps.prefill_s(new, cached) if any(cached) else self.steps.prefill_s(new)
            end = now + dt
            self.busy_s[i] += dt
            self.held[i] += tokens
            if self.held[i] > self.held_high_water[i]:
                self.held_high_water[i] = self.held[i]
            for r, c in zip(batch, cached, strict=True):
                rec.cached[r] = c
                rec.prefill_start[r] = now
                rec.prefill_end[r] = end  # known now: the step time is deterministic
                rec.prefill_instance[r] = i
            loop.at(end, self._end, (i, batch))
            if self.layerwise:
                for r in batch:
                    self._route(r)

    def _by_cache(self, r: int) -> int:
        """The idle prefill instance the prefix routing rule picks for request ``r`` (load: KV held)."""
        loads = [float(h) if i in self.idle else math.inf for i, h in enumerate(self.held)]
        pick = self.caches.pick(r, loads)
        return pick if pick in self.idle else min(self.idle, key=self.held.__getitem__)

    def _route(self, r: int) -> None:
        best = self.decode[0]
        pick = self.decode_caches.pick(r, [float(d.load_tokens()) for d in self.decode])
        if pick is not None:
            best = self.decode[pick]
        elif len(self.decode) > 1:
            best_load = best.load_tokens()
            for d in self.decode[1:]:
                load = d.load_tokens()
                if load < best_load:
                    best, best_load = d, load
        self.rec.instance[r] = best.idx
        best.enqueue(r)

    def _end(self, arg: tuple[int, list[int]]) -> None:
        i, batch = arg
        for r in batch:
            self.caches.store_prompt(i, r)
        if not self.layerwise:
            for r in batch:
                self._route(r)
        self.idle.append(i)
        self._dispatch()

    def _admitted(self, r: int) -> None:
        """Decode KV reserved for ``r``: schedule its transfer on its prefill instance's link."""
        rec = self.rec
        i = rec.prefill_instance[r]
        now = self.loop.now
        ps, pe = rec.prefill_start[r], rec.prefill_end[r]
        ready = ps + self.first_layer * (pe - ps) if self.layerwise else pe
        held = self.decode_caches.cached(rec.instance[r], r)  # already on the decode instance
        rec.decode_held[r] = held
        t, t_last = self.transfer(rec.prompt[r] - held)
        start = max(now, self.link_free[i], ready)
        self.link_free[i] = max(start + t, rec.prefill_end[r] + t_last)
        self.link_busy_s[i] += t
        busy_s = t if self.wire_s is None else self.wire_s(rec.prompt[r] - held)
        if start <= now:
            self._on_wire((r, t, t_last, busy_s))
        else:
            self.loop.at(start, self._on_wire, (r, t, t_last, busy_s))

    def _on_wire(self, arg: tuple[int, float, float, float]) -> None:
        """The KV of request ``r`` (transfer ``t``, last layer ``t_last``) is ready to leave: the decode
        instance's receiving lanes carry it after the transfers that were ready before it (FCFS),
        ``busy_s`` long (its bytes and one message latency)."""
        r, t, t_last, busy_s = arg
        rec = self.rec
        now = self.loop.now
        dec = self.decode[rec.instance[r]]
        lanes_start_s = max(now, dec.recv_free)
        dec.recv_free = lanes_start_s + busy_s
        end = max(lanes_start_s + t, rec.prefill_end[r] + t_last)
        rec.transfer_start[r] = lanes_start_s
        rec.transfer_end[r] = end
        self.loop.at(end, self._arrived, r)

    def _arrived(self, r: int) -> None:
        i = self.rec.prefill_instance[r]
        self.held[i] -= self.rec.prompt[r]
        if self.queue and i in self.idle and not self.kicked:
            self.kicked = True
            self.loop.at(self.loop.now, self._kick, None)
        self.decode[self.rec.instance[r]].join(r)


def run_disaggregated(
    prefill: InstanceSpec,
    n_prefill: int,
    decode: InstanceSpec,
    n_decode: int,
    transfer: TransferFn,
    layerwise: bool,
    layers: int | None,
    loop: EventLoop,
    rec: Recorder,
    prefix_routing: str = "cache-aware",
) -> tuple[PrefillPool, list[DecodeInstance]]:
    """Replay ``rec``'s requests through the pools; returns their final state."""
    pc = PoolCaches(rec, n_prefill, prefill.kv_capacity_tokens, prefix_routing)
    dc = PoolCaches(rec, n_decode, decode.kv_capacity_tokens, prefix_routing, decode=True)
    dpool = [DecodeInstance(i, decode, loop, rec, dc) for i in range(n_decode)]
    ppool = PrefillPool(prefill, n_prefill, dpool, transfer, layerwise, layers, loop, rec, (pc, dc))
    p_cap, d_cap = prefill.kv_capacity_tokens, decode.kv_capacity_tokens

    def on_arrival(r: int) -> None:
        if rec.prompt[r] > p_cap or rec.prompt[r] + rec.output[r] > d_cap:
            rec.rejected[r] = True
            return
        ppool.arrive(r)

    loop.run(on_arrival)
    return ppool, dpool
