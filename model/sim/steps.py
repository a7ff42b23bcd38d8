"""Step times for the simulator from the roofline layer, tabulated so that an event costs no numpy call.

Every number comes from :mod:`model.physics.steps` (``prefill_cost``, ``decode_step_cost``,
``mixed_step_cost``) and :mod:`model.hardware.collectives` (``transfer_time_s``); this module only
decides where to evaluate them and caches the results:

- **Decode**: for a fixed batch B the roofline's compute time and memory time are each affine in
  the per-sequence context (attention FLOPs and KV bytes grow linearly with it; weights, linear
  layers, communication and overhead do not depend on it; :mod:`model.physics.affine` relies
  on the same fact). Two roofline evaluations per batch size therefore give the exact step time at
  any context: max(c0 + c1 x, m0 + m1 x) + fixed, with x = total context / B. Rows are built
  lazily, vectorised over blocks of batch sizes.
- **Mixed (chunked) iterations**: for a fixed (chunk, decode batch) pair, compute and memory time
  are affine in the chunk's prefix length and in the decodes' total context, so three evaluations
  give exact coefficients; they are cached per pair.
- **Prefill of whole prompts**: a single prompt is read from a table over prompt lengths; a batch of
  k prompts of T tokens in total is read from a table per k over T, built from
  ``prefill_cost(dep, T / k, batch=k)``: exact for
  the linear layers, weights, KV writes and logits, but it puts k (T/k)^2 / 2 query-key pairs in
  attention instead of sum_i p_i^2 / 2, i.e. it under-counts attention FLOPs by the spread of the
  prompt lengths in the batch (the roofline's prefill takes equal-length batches).
- **Prefill after a cached prefix** (prefix caching): for k prompts of T new tokens in total, compute
  and memory time are affine in the cached tokens per prompt (attention reads them, FLOPs grow by
  new x cached; model.physics.steps.prefill_cost), so two evaluations (0 and 1 cached token) per
  (k, T) give exact lines in the mean cached prefix, tabulated over T per k. Windowed layers bend
  once the prefix passes their window; the line keeps the slope below it (an overestimate above).
- **KV transfer**: the prompt's KV (prompt x KV bytes/token of the whole instance) crosses
  ``lanes`` = min(TP_prefill, TP_decode) parallel links, each TP rank sending its own heads' share
  (Splitwise sec. 4.3; the planner's model.disaggregated makes the same choice):
  ``transfer_time_s(bytes / lanes, link, messages=layers)`` when sent layer by layer (one message
  per layer), else one message; the last layer's share is ``transfer_time_s(bytes / lanes / layers,
  link)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from model.hardware.collectives import transfer_time_s
from model.hardware.links import Link
from model.llm.attention import KVLayout
from model.physics import decode_tokens
from model.physics.affine import affine_terms
from model.physics.attention import decode_kink_context
from model.physics.deployment import Deployment
from model.physics.steps import decode_step_cost, mixed_step_cost, prefill_cost

# Batch sizes added to the decode table per roofline call.
_DECODE_BLOCK = 256
# Prompt lengths added to the single-prompt prefill table per roofline call.
_PREFILL_BLOCK = 4096


class RooflineSteps:
    """:class:`model.sim.engine.StepTimes` of one :class:`~model.physics.deployment.Deployment`."""

    def __init__(self, dep: Deployment) -> None:
        self.dep = dep
        self.decode_tokens = decode_tokens.tokens_per_decode_step(
            dep
        )  # tokens emitted / verified per sequence per step
        self._c0: list[float] = [0.0]  # index = batch size; entry 0 unused
        self._c1: list[float] = [0.0]
        self._m0: list[float] = [0.0]
        self._m1: list[float] = [0.0]
        self._fixed: list[float] = [0.0]
        # Windowed/sparse layers bend the decode lines once, at the largest window: above it a
        # second set of lines (model.physics.attention.decode_kink_context).
        self._kink = decode_kink_context(dep.arch)[0]
        self._high: list[tuple[float, float, float, float, float]] = [(0.0,) * 5]
        self._prefill1: list[float] = [0.0]  # index = prompt tokens
        self._prefill_k: dict[int, list[float]] = {}  # k prompts -> time by total tokens
        self._cached_k: dict[int, list[tuple[float, float, float, float, float]]] = {}  # lines in the prefix
        self._mixed: dict[tuple[int, int], tuple[float, float, float, float, float, float, float]] = {}

    # ------------------------------------------------------------------ decode
    def _grow_decode(self, batch: int) -> None:
        lo = len(self._c0)
        hi = max(batch + 1, lo + _DECODE_BLOCK)
        b = np.arange(lo, hi, dtype=float)
        t = affine_terms(decode_step_cost(self.dep, b, 1.0), decode_step_cost(self.dep, b, 2.0), 1.0, 2.0)
        self._c0.extend(t.c0.tolist())
        self._c1.extend(t.c1.tolist())
        self._m0.extend(t.m0.tolist())
        self._m1.extend(t.m1.tolist())
        self._fixed.extend(t.fixed.tolist())
        if self._kink:
            _, xa, xb = decode_kink_context(self.dep.arch)
            t = affine_terms(decode_step_cost(self.dep, b, xa), decode_step_cost(self.dep, b, xb), xa, xb)
            self._high.extend(zip(*(v.tolist() for v in t), strict=True))

    def decode_s(self, batch: int, context_tokens: int) -> float:
        if batch >= len(self._c0):
            self._grow_decode(batch)
        x = context_tokens / batch
        if self._kink and x >= self._kink:
            c0, c1, m0, m1, fixed = self._high[batch]
            c, m = c0 + c1 * x, m0 + m1 * x
            return (c if c > m else m) + fixed
        c = self._c0[batch] + self._c1[batch] * x
        m = self._m0[batch] + self._m1[batch] * x
        return (c if c > m else m) + self._fixed[batch]

    # ------------------------------------------------------------------ prefill
    def _grow_prefill(self, tokens: int) -> None:
        lo = len(self._prefill1)
        hi = max(tokens + 1, lo + _PREFILL_BLOCK)
        n = np.arange(lo, hi, dtype=float)
        self._prefill1.extend(prefill_cost(self.dep, n).time_s.tolist())

    def _grow_prefill_k(self, k: int, row: list[float], tokens: int) -> None:
        lo = len(row)
        hi = max(tokens + 1, lo + _PREFILL_BLOCK)
        total = np.maximum(np.arange(lo, hi, dtype=float), k)  # entries below k tokens are unused
        row.extend(prefill_cost(self.dep, total / k, batch=k).time_s.tolist())

    def _grow_cached(self, k: int, row: list, tokens: int) -> None:
        lo = len(row)
        hi = max(tokens + 1, lo + _PREFILL_BLOCK)
        n = np.maximum(np.arange(lo, hi, dtype=float), k) / k
        t = affine_terms(
            prefill_cost(self.dep, n, cached_tokens=0.0, batch=k),
            prefill_cost(self.dep, n, cached_tokens=1.0, batch=k),
            0.0,
            1.0,
        )
        row.extend(zip(*(v.tolist() for v in np.broadcast_arrays(*t)), strict=True))

    def prefill_s(self, prompts: Sequence[int], cached: Sequence[int] | None = None) -> float:
        """One prefill iteration over ``prompts`` new tokens each (after ``cached`` cached ones)."""
        if cached is not None and any(cached):
            k = len(prompts)
            total = sum(prompts)
            row = self._cached_k.setdefault(k, [])
            if total >= len(row):
                self._grow_cached(k, row, total)
            c0, c1, m0, m1, fixed = row[total]
            x = sum(cached) / k
            c, m = c0 + c1 * x, m0 + m1 * x
            return (c if c > m else m) + fixed
        k = len(prompts)
        if k == 1:
            p = prompts[0]
            if p >= len(self._prefill1):
                self._grow_prefill(p)
            return self._prefill1[p]
        total = sum(prompts)
        row = self._prefill_k.get(k)
        if row is None:
            row = self._prefill_k[k] = []
        if total >= len(row):
            self._grow_prefill_k(k, row, total)
        return row[total]

    # ------------------------------------------------------------------ mixed
    def _mixed_coeffs(self, chunk: int, db: int) -> tuple[float, float, float, float, float, float, float]:
        ctx1 = 1.0 if db else 0.0
        cost = mixed_step_cost(
            self.dep,
            chunk_tokens=float(chunk),
            chunk_prefix_tokens=np.array([0.0, 1.0, 0.0]),
            decode_batch=float(db),
            decode_context_tokens=np.array([ctx1, ctx1, 2.0 * ctx1]),
        )
        c, m = cost.compute_s + cost.draft_s, cost.memory_s + cost.draft_s  # drafting on both lines
        cp, mp = c[1] - c[0], m[1] - m[0]
        cd = (c[2] - c[0]) / db if db else 0.0
        md = (m[2] - m[0]) / db if db else 0.0
        c0 = c[0] - cd * db * ctx1
        m0 = m[0] - md * db * ctx1
        fixed = cost.comm_s[0] + cost.overhead_s[0]
        return (float(c0), float(cp), float(cd), float(m0), float(mp), float(md), float(fixed))

    def mixed_s(
        self, chunk_tokens: int, chunk_prefix_tokens: float, decode_batch: int, decode_context_tokens: int
    ) -> float:
        key = (chunk_tokens, decode_batch)
        co = self._mixed.get(key)
        if co is None:
            co = self._mixed_coeffs(chunk_tokens, decode_batch)
            self._mixed[key] = co
        c = co[0] + co[1] * chunk_prefix_tokens + co[2] * decode_context_tokens
        m = co[3] + co[4] * chunk_prefix_tokens + co[5] * decode_context_tokens
        return (c if c > m else m) + co[6]


class KVTransfer:
    """(transfer_s, last_layer_s) of a request's KV over ``lanes`` x ``link``.

    model.hardware.collectives.transfer_time_s is affine in the bytes (alpha-beta model), so it is
    evaluated once at
    0 and 1 byte per token here and applied per request without a numpy call.
    """

    def __init__(
        self, kv_bytes_per_token: float | KVLayout, link: Link, layers: int, layerwise: bool, lanes: int = 1
    ) -> None:
        self.link = link
        self.layers = int(layers)
        self.layerwise = bool(layerwise)
        # A KVLayout (windowed / hybrid model): a request's KV is not proportional to its prompt;
        # the affine coefficients below are then per equivalent token (KVLayout.tokens).
        self._layout = kv_bytes_per_token if isinstance(kv_bytes_per_token, KVLayout) else None
        if self._layout is not None:
            kv_bytes_per_token = self._layout.per_token_bytes
        per_token = float(kv_bytes_per_token) / int(lanes)
        messages = self.layers if self.layerwise else 1
        t = transfer_time_s(np.array([0.0, per_token]), link, messages=messages)
        self._t0, self._t1 = float(t[0]), float(t[1] - t[0])
        if self.layerwise:
            last = transfer_time_s(np.array([0.0, per_token / self.layers]), link)
            self._l0, self._l1 = float(last[0]), float(last[1] - last[0])
        else:
            self._l0 = self._l1 = 0.0

    def wire_s(self, prompt_tokens: int) -> float:
        """The time the request's KV holds the receiving lanes: its bytes plus one message latency.
        Per-layer messages pipeline, so their latencies overlap other layers' bytes and add no busy
        time (the planner's link occupancy, model.serving.disaggregated.transfer_components)."""
        t, _ = self(prompt_tokens)
        messages = self.layers if self.layerwise else 1
        return max(t - (messages - 1) * self.link.latency_s, 0.0)

    def __call__(self, prompt_tokens: int) -> tuple[float, float]:
        n = prompt_tokens if self._layout is None else float(self._layout.tokens(prompt_tokens))
        return self._t0 + self._t1 * n, self._l0 + self._l1 * n
