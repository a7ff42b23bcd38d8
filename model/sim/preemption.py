"""Incremental KV allocation and pre-emption on a colocated replica (vLLM's scheduler), for the engine
policies "recompute" and "swap" (model.hardware.engines.PREEMPTIONS; "none" keeps whole-KV admission
in model.sim.colocated and never calls this module).

What vLLM does (Kwon et al., "Efficient Memory Management for Large Language Model Serving with
PagedAttention", SOSP 2023, sec. 4.5; vLLM V1 vllm/v1/core/sched/scheduler.py ``schedule``):

- **Admission** while the prompt's KV fits (``allocate_slots`` for the prompt tokens): the output's
  KV is not reserved.
- **Growth**: every decode iteration allocates one KV slot per running sequence (tokens per step
  with speculative decoding); a sequence holds prompt + tokens generated so far.
- **Pre-emption**: when the running sequences' next slots do not fit, the most recently admitted
  running request is pre-empted (``preempted_req = self.running.pop()`` under FCFS) until they do;
  its KV is freed and it goes back to the head of the queue (``waiting.prepend_request``). No new
  request is admitted in an iteration that pre-empted (V1 schedules waiting requests only when
  nothing was pre-empted).
- **Resume by recompute** (V1's only mode; V0's default for single-sequence requests): the request
  is prefilled again over its prompt and the tokens it had generated (``num_computed_tokens = 0``),
  and that prefill yields its next token.
- **Resume by swap** (V0 ``preemption_mode="swap"``): its KV is copied to the CPU tier at pre-emption
  and back before it runs again, each copy at the tier's bandwidth per GPU
  (:meth:`model.hardware.kv_offload.KVTier.reload_time_s`), added to the iteration that moves it
  (V0 runs the block copies before the step's forward pass). A swap that does not fit in the
  instance's share of the CPU tier falls back to recompute (V0 aborts the request instead).

Granularity: tokens, not 16-token blocks (a block rounds each sequence's KV up by < 16 tokens).
A recompute re-prefills everything: with vLLM V1's automatic prefix caching (on by default) the
freed blocks keep their hashes until a new allocation evicts them, so a request resumed soon after
may find part of its KV still cached; the cost here is an upper bound.
Preempted requests wait in a per-replica queue served before new arrivals (their KV, or their
claim to it, stays with the replica even behind a shared queue).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from model.errors import InputError
from model.hardware.engines import PREEMPTIONS, check_swap_tier
from model.hardware.kv_offload import KVOffload, KVTier
from model.physics.deployment import Deployment
from model.physics.kv_tiers import tier_tokens


@dataclass(frozen=True)
class PreemptionSpec:
    """A replica's pre-emption: ``policy`` "recompute" or "swap"; for swap the cpu ``tier``, the
    KV tokens of the instance's share of it and the KV bytes per token per GPU."""

    policy: str
    tier: KVTier | None = None
    swap_capacity_tokens: float = 0.0
    kv_bytes_per_token_per_gpu: float = 0.0

    def swap_time_s(self, tokens: float) -> float:
        """One copy of ``tokens`` of KV between HBM and the cpu tier (either direction)."""
        if self.tier is None:
            return 0.0
        return self.tier.reload_time_s(tokens * self.kv_bytes_per_token_per_gpu)


def preemption_spec(policy: str, offload: KVOffload | None, dep: Deployment) -> PreemptionSpec | None:
    """The spec of ``policy`` on an instance of ``dep`` (None for "none"); "swap" needs a cpu tier in
    ``offload`` (one clear error naming the field otherwise)."""
    if policy not in PREEMPTIONS:
        raise InputError("preemption", policy, f"one of {PREEMPTIONS}")
    if policy == "none":
        return None
    if policy == "recompute":
        return PreemptionSpec("recompute")
    check_swap_tier(policy, offload)
    cpu = [i for i, t in enumerate(offload.tiers) if t.kind == "cpu"]
    tokens = tier_tokens(dep, offload)[cpu[0]]
    return PreemptionSpec("swap", offload.tiers[cpu[0]], float(tokens), dep.kv_bytes_per_token_per_gpu)


def prefill_tokens(rep: Any, r: int) -> int:
    """Tokens request ``r``'s next prefill on ``rep`` computes: its prompt, plus the tokens it had
    generated when it resumes by recompute."""
    return rep.rec.prompt[r] + rep.resume.get(r, 0)


def join(rep: Any, r: int, held: int, remaining: int) -> None:
    """Request ``r`` joins the running batch of ``rep`` holding ``held`` KV tokens with ``remaining``
    output tokens still to decode (book its last decode step)."""
    rec = rep.rec
    k = len(rep.log)
    rep.running += 1
    rep.ctx += held
    rep.base[r] = held
    rep.live[r] = None
    rec.log_start[r] = k
    last = k + math.ceil(remaining / rep.decode_tokens.emitted) - 1
    rec.last_step[r] = last
    rep.finish.setdefault(last, []).append(r)


def first_token(rep: Any, r: int, now: float) -> None:
    """Request ``r``'s prefill on ``rep`` ended at ``now`` with a token: its first, or (resumed by
    recompute) the one after those it had generated."""
    rec = rep.rec
    g = rep.resume.pop(r, None)
    done = 0 if g is None else g
    if g is None:
        rec.prefill_end[r] = now
        rec.first_token[r] = now
    else:  # the gap since its last token before the pre-emption is one inter-token gap
        rec.itl_before[r] = max(rec.itl_before[r], now - _ref(rec, r))
        rec.seg_ref[r] = now
    held = rec.prompt[r] + done + 1
    rep.kv += 1
    remaining = rec.output[r] - done - 1
    if remaining <= 0:
        rec.end[r] = now
        rec.log_start[r] = -1
        rep.kv -= held
        return
    join(rep, r, held, remaining)


def _ref(rec: Any, r: int) -> float:
    ref = rec.seg_ref[r]
    return rec.first_token[r] if ref != ref else ref  # NaN: the first token


def make_room(rep: Any) -> bool:
    """Before an iteration that decodes: pre-empt the most recently admitted running requests until
    every running sequence's next tokens fit; True when something was pre-empted."""
    need = rep.decode_tokens.emitted
    any_ = False
    while rep.live and rep.kv + rep.running * need > rep.kv_cap:
        _preempt(rep, next(reversed(rep.live)))
        any_ = True
    return any_


def _preempt(rep: Any, r: int) -> None:
    rec, log = rep.rec, rep.log
    k = rec.log_start[r]
    steps = len(log) - k
    held = rep.base.pop(r) + steps * rep.decode_tokens.emitted
    rep.finish[rec.last_step[r]].remove(r)
    del rep.live[r]
    rep.running -= 1
    rep.ctx -= held
    rep.kv -= held
    if steps > 0:  # the gaps of the segment it decoded
        gaps = [log[k] - _ref(rec, r)] + [log[i + 1] - log[i] for i in range(k, len(log) - 1)]
        rec.itl_before[r] = max(rec.itl_before[r], max(gaps))
        rec.seg_ref[r] = log[-1]
    rec.preempted[r] += 1
    rep.preemptions += 1
    generated = int(min(held - rec.prompt[r], rec.output[r] - 1))
    spec = rep.pre
    if spec.policy == "swap" and rep.swap_used + held <= spec.swap_capacity_tokens:
        rep.swapped[r] = held
        rep.swap_used += held
        rep.pending_s += spec.swap_time_s(held)
    else:
        rep.resume[r] = generated
    rep.resumeq.appendleft(r)
    rep.loop.queued += 1


def swap_in(rep: Any) -> None:
    """Bring swapped requests at the head of ``rep``'s resume queue back while their KV fits (the copy
    time goes on the next iteration)."""
    rec = rep.rec
    q = rep.resumeq
    while q and q[0] in rep.swapped and rep.running < rep.max_seqs:
        r = q[0]
        held = rep.swapped[r]
        if rep.kv + held + (rep.running + 1) * rep.decode_tokens.emitted > rep.kv_cap:
            return
        q.popleft()
        rep.loop.queued -= 1
        del rep.swapped[r]
        rep.swap_used -= held
        rep.pending_s += rep.pre.swap_time_s(held)
        rep.kv += held
        join(rep, r, held, rec.output[r] - (held - rec.prompt[r]))


def retire(rep: Any, batch: int, now: float) -> None:
    """:func:`model.sim.engine.retire_finished` under incremental allocation: each finished request
    frees the KV it holds (prompt + tokens so far), not a reservation."""
    rep.log.append(now)
    emitted = rep.decode_tokens.emitted
    rep.ctx += batch * emitted
    rep.kv += batch * emitted
    if rep.kv > rep.kv_high_water:
        rep.kv_high_water = rep.kv
    done = rep.finish.pop(len(rep.log) - 1, None)
    if not done:
        return
    rec = rep.rec
    for r in done:
        rec.end[r] = now
        if rep.on_finish is not None:
            rep.on_finish(r)
        held = rep.base.pop(r) + (len(rep.log) - rec.log_start[r]) * emitted
        del rep.live[r]
        rep.ctx -= held
        rep.kv -= held
    rep.running -= len(done)
