"""Per-instance cost tables for one scenario, computed once from the roofline layer.

The planner evaluates thousands of candidates at many request rates; the phase costs they need
depend only on (GPU kind, instance layout, chunk size), so they are tabulated here: unchunked prefill time per
sampled request, decode step time on a grid of batch sizes, chunked-prefill time on a grid of
(decode batch x prompt length), and the memory fit. Every number comes from model.physics and
model.memory (no second performance model).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache, partial

import numpy as np

from model.hardware.gpus import GPU
from model.hardware.parallelism import Parallelism
from model.physics import decode_tokens
from model.physics.affine import affine_max_sum, affine_terms
from model.physics.attention import chunk_line_kink
from model.physics.deployment import Deployment
from model.physics.kv_tiers import PrefixPlacement, prefix_placement
from model.physics.memory import MemoryFit, memory_fit
from model.physics.steps import decode_step_cost, mixed_step_cost, prefill_cost
from model.queueing.decode_batch import head_of_line_room
from model.queueing.memo import clear_memos
from model.workload.scenario import Scenario, cached_prompt_tokens

# Decode batch grid shared by every table: 0, then 1 .. 131072 geometrically (a batch below one
# sequence still runs a batch-1 step); above every KV capacity in the catalog.
BATCH_GRID = np.concatenate([[0.0], np.geomspace(1.0, 131072.0, 127)])
# Prompt-length grid points for chunked-prefill tables (interpolated per sampled request).
CHUNK_LENGTH_POINTS = 24
# Smallest prompt chunk per iteration, as a fraction of the token budget, that the chunked model
# tabulates; a decode batch leaving less room than this is treated as saturating the budget.
MIN_CHUNK_FRACTION = 1.0 / 16.0
# The chunked-prefill token budgets the planner tries by default (model.serving.enumeration).
DEFAULT_CHUNK_OPTIONS = (256, 512, 1024, 2048, 4096)


@dataclass(frozen=True, eq=False)
class InstanceTables:
    """Tabulated costs of one instance kind (GPU, layout, optional chunk budget) under a scenario."""

    dep: Deployment
    fit: MemoryFit
    fits: bool
    reason: str
    kv_capacity_tokens: float
    max_batch: float  # sequences at the decode context that fit in the KV cache, within the engine's cap
    prefill_s: np.ndarray  # [S] unchunked prefill time per sampled request
    decode_step_s: np.ndarray  # [G] decode step time on BATCH_GRID at the decode context
    chunk_tokens: int | None = None
    chunk_batch_grid: np.ndarray | None = None  # [Gc] decode batches tabulated for chunking
    chunked_prefill_s: np.ndarray | None = None  # [Gc, S] chunked prefill time per request at batch
    prefill_fixed_s: np.ndarray | None = None  # [S] per-step part of prefill_s that batching shares
    chunked_fixed_s: np.ndarray | None = (
        None  # [Gc, S] part of a prompt's last chunked iteration packing shares
    )
    chunked_free: np.ndarray | None = (
        None  # [Gc, S] fraction of the last iteration's room left to other prompts
    )
    prefix: PrefixPlacement | None = None  # where the reused prefixes live (model.physics.kv_tiers)
    # the factor its chunked times were scaled by (a robustness world, model.serving.candidates
    # .scaled_tables): costs computed from ``dep`` directly take it too
    chunk_time_factor: float = 1.0
    # sequences a saturated cache holds under FCFS head-of-line admission (colocated replicas: the KV
    # batch scaled by decode_batch.head_of_line_room, at most max_num_seqs; other roles max_num_seqs;
    # 0 where the model does not fit)
    saturated_batch: float = np.inf

    @property
    def decode_token_s(self) -> np.ndarray:
        """[G] decode time per output token on BATCH_GRID: step time / tokens emitted per step
        (:func:`model.physics.decode_tokens.tokens_per_decode_step`; the step time with one token)."""
        return self.decode_step_s / decode_tokens.tokens_per_decode_step(self.dep).emitted


def deployment(scn: Scenario, gpu: GPU, parallel: Parallelism | int) -> Deployment:
    """The scenario's model on ``gpu`` GPUs laid out as ``parallel`` (a whole number = TP-only),
    with the engine profile's per-step overhead and the scenario's speculative decoding."""
    return Deployment(
        scn.arch,
        gpu,
        parallel=parallel,
        weight_dtype=scn.weight_dtype,
        kv_dtype=scn.kv_dtype_resolved,
        overheads=scn.engine.overheads(gpu),
        speculation=scn.speculation,
    )


# The unchunked prefill and decode tables depend on the instance's layout, not on its chunk budget
# or role: computed once per (scenario, GPU, layout) and shared by every chunk option (a colocated
# layout is tabulated for each of its chunk budgets) and by the prefill / decode pools.
@lru_cache(maxsize=256)
def _prefill_table(
    scn: Scenario, gpu: GPU, parallel: Parallelism | int, pool: bool = False, served: float = 1.0
) -> tuple[Deployment, np.ndarray]:
    """(deployment, unchunked prefill time per sampled prompt): a prefill-pool instance (``pool``)
    finds ``scn.prefill_pool_cached_tokens`` cached, a colocated replica ``scn.cached_tokens``; only
    the ``served`` fraction of those hits is still held anywhere (KV offload tiers)."""
    dep = deployment(scn, gpu, parallel)
    prompt = scn.prompt_tokens
    cached = scn.prefill_pool_cached_tokens if pool else scn.cached_tokens
    if served < 1.0:  # part of the working set fits nowhere: those hits are misses
        cached = np.floor(cached * served)
    pre = np.asarray(prefill_cost(dep, prompt - cached, cached_tokens=cached).time_s, dtype=float)
    pre.flags.writeable = False
    return dep, pre


@lru_cache(maxsize=256)
def _decode_table(scn: Scenario, gpu: GPU, parallel: Parallelism | int) -> np.ndarray:
    dep = _prefill_table(scn, gpu, parallel)[0]
    b = np.maximum(BATCH_GRID, 1.0)
    dec = np.asarray(decode_step_cost(dep, b, scn.decode_context_tokens).time_s, dtype=float)
    dec.flags.writeable = False
    return dec


def clear_table_caches() -> None:
    """Forget every cached table (benchmarks time the cold path with it)."""
    for cached in (_instance_tables, _prefill_table, _decode_table, _chunked_tables, _chunked_packing):
        cached.cache_clear()
    _SHARED.clear()
    clear_memos()  # model.queueing.memo: the memoized pool solves


_SHARED: dict[tuple, Scenario] = {}
_SHARED_MAX = 64  # scenarios remembered (oldest forgotten first), as the table caches are bounded


def table_scenario(scn: Scenario) -> Scenario:
    """The scenario the table caches key on: the first one seen that equals ``scn`` in every field
    but its SLO (the tables depend on the model, workload sample, formats and engine, never on the
    targets), so a re-plan with new targets (the web app's Apply, a sweep over SLOs) reuses the
    tables. Fields compare as their types do (a preset Workload by identity: model.get_workload
    returns one object per preset); a scenario with an unhashable field keys on itself."""
    key = tuple(getattr(scn, f.name) for f in fields(scn) if f.name != "slo")
    try:
        shared = _SHARED.get(key)
    except TypeError:
        return scn
    if shared is None:
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.pop(next(iter(_SHARED)))
        _SHARED[key] = shared = scn
    return shared


def chunked_prefill_sum_s(
    dep: Deployment,
    prompt_tokens: np.ndarray,
    chunk_tokens: np.ndarray,
    decode_batch: np.ndarray,
    decode_context_tokens: float,
    cached_tokens: np.ndarray | float = 0.0,
) -> np.ndarray:
    """Chunked prefill time, summed in closed form instead of chunk by chunk.

    Same quantity as :func:`model.physics.generation.chunked_prefill_time_s`: the sum over chunks i of
    mixed_step_cost(chunk = c, prefix = i c) plus the last partial chunk. In a mixed step only the
    attention FLOPs and the prefix KV read grow with the prefix, both linearly, so the compute and
    memory times of full chunk i are A_c + B_c i and A_m + B_m i while communication and overhead
    stay fixed; the sum of max(A_c + B_c i, A_m + B_m i) over i splits at the one index where the
    two lines cross, leaving arithmetic series (:func:`model.physics.affine.affine_max_sum`). Exact
    under that linearity (tests compare with the chunk-by-chunk sum); O(1) per prompt, not O(n / c).
    Sliding-window and top-k layers stop growing once the prefix passes their window: the chunks from
    there on get their own lines (:func:`model.physics.attention.chunk_line_kink`).
    """
    n, c, db, cached = np.broadcast_arrays(
        np.asarray(prompt_tokens, float),
        np.asarray(chunk_tokens, float),
        np.asarray(decode_batch, float),
        np.asarray(cached_tokens, float),
    )
    ctx = float(max(decode_context_tokens, 1.0))
    full = np.floor(n / c)
    rest = n - full * c

    def step(chunk, prefix):
        return mixed_step_cost(
            dep, chunk_tokens=chunk, chunk_prefix_tokens=prefix, decode_batch=db, decode_context_tokens=ctx
        )

    t = affine_terms(step(c, cached), step(c, cached + c), 0.0, 1.0)  # lines over chunk index i
    kink, period = chunk_line_kink(dep.arch)
    if not kink:
        total = affine_max_sum(t.c0, t.c1, t.m0, t.m1, np.zeros_like(full), full - 1.0) + full * t.fixed
    else:  # windowed layers: a second pair of lines from the first chunk whose prefix passes the window
        i_k = np.clip(np.ceil((kink - cached) / c), 0.0, full)
        # chunked-local layers: lines through mid-period points (the period's average), m chunks apart
        m = np.maximum(np.round(period / c), 1.0) if period else np.ones_like(c)
        xa = i_k + (m - 1.0) / 2.0 if period else i_k
        hi = affine_terms(step(c, cached + xa * c), step(c, cached + (xa + m) * c), xa, xa + m)
        total = (
            affine_max_sum(t.c0, t.c1, t.m0, t.m1, np.zeros_like(full), i_k - 1.0)
            + affine_max_sum(hi.c0, hi.c1, hi.m0, hi.m1, i_k, full - 1.0)
            + full * t.fixed
        )
    tail = np.where(rest > 0, step(np.maximum(rest, 1.0), cached + full * c).time_s, 0.0)
    return np.asarray(total + tail, dtype=float)


def _chunk_grid(chunk: int) -> np.ndarray:
    """Decode batches tabulated for a chunk budget: those that leave room for a prompt chunk."""
    return BATCH_GRID[chunk * (1.0 - MIN_CHUNK_FRACTION) > BATCH_GRID]


@lru_cache(maxsize=256)
def _chunked_tables(
    scn: Scenario, gpu: GPU, parallel: Parallelism | int, chunks: tuple[int, ...], hit_rate: float
) -> dict[int, np.ndarray]:
    """Chunked prefill time [Gc, S] of each chunk budget in ``chunks``: tabulated on a geometric grid
    of prompt lengths (with the cached prefix at ``hit_rate`` at each length), interpolated at every
    sampled prompt. Every budget's rows (decode batch b, room max(c - b, c / 16)) go through one
    vectorised :func:`chunked_prefill_sum_s` (row-wise, so the same values as one call per budget)."""
    dep = _prefill_table(scn, gpu, parallel)[0]
    prompt = scn.prompt_tokens
    lengths = np.unique(
        np.geomspace(max(prompt.min(), 1.0), max(prompt.max(), 2.0), CHUNK_LENGTH_POINTS).round()
    )
    cached = cached_prompt_tokens(lengths, hit_rate)
    grids = [_chunk_grid(c) for c in chunks]
    rooms = [np.maximum(c - g, c * MIN_CHUNK_FRACTION) for c, g in zip(chunks, grids, strict=True)]
    room = np.concatenate(rooms)
    table = chunked_prefill_sum_s(
        dep,
        (lengths - cached)[None, :],
        room[:, None],
        np.concatenate(grids)[:, None],
        scn.decode_context_tokens,
        cached[None, :],
    )
    rows = np.stack([np.interp(prompt, lengths, row) for row in table])
    rows.flags.writeable = False
    ends = np.cumsum([len(g) for g in grids])
    return dict(zip(chunks, np.split(rows, ends[:-1]), strict=True))


# Points of the per-row grid of last-chunk sizes on which the packable part of a chunked iteration is
# tabulated (interpolated at every sampled prompt's last chunk).
LAST_CHUNK_POINTS = 12


@lru_cache(maxsize=256)
def _chunked_packing(
    scn: Scenario, gpu: GPU, parallel: Parallelism | int, chunks: tuple[int, ...], hit_rate: float
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per chunk budget, ([Gc, S] shareable time, [Gc, S] free room) of each sampled prompt's last
    chunked iteration at each tabulated decode batch.

    A prompt of u uncached tokens ends with a chunk of r = u - floor(u / c) c tokens (c the room the
    decodes leave; r = c when it divides evenly), leaving the fraction 1 - r / c of that iteration to
    the next prompts (the engine packs them in: model.sim.colocated). The iteration's per-step part,
    F = 2 t(r) - t(2 r) with t the mixed-step time at the row's decode batch and the mean prefix
    (the same two-in-one-step rule as ``prefill_fixed_s``), is what such packing shares; the
    shareable time is F (1 - r / c). F is tabulated on a geometric grid of r per row and interpolated.
    """
    dep = _prefill_table(scn, gpu, parallel)[0]
    prompt = scn.prompt_tokens
    cached = cached_prompt_tokens(prompt, hit_rate)
    uncached = np.maximum(prompt - cached, 1.0)
    ctx = float(max(scn.decode_context_tokens, 1.0))
    # every budget's rows in one pass (row-wise, so the same values as one pass per budget)
    grids = [_chunk_grid(c) for c in chunks]
    grid = np.concatenate(grids)
    room = np.concatenate(
        [np.maximum(c - g, c * MIN_CHUNK_FRACTION) for c, g in zip(chunks, grids, strict=True)]
    )[:, None]  # [G, 1]
    full = np.floor(uncached[None, :] / room)
    rest = uncached[None, :] - full * room
    rest = np.where(rest > 0, rest, room)
    full = np.where(rest >= room, np.maximum(full - 1.0, 0.0), full)
    prefix = (cached[None, :] + full * room).mean(axis=1, keepdims=True)
    r_grid = np.geomspace(np.ones(len(grid)), room[:, 0], LAST_CHUNK_POINTS, axis=1)

    def step(tokens: np.ndarray) -> np.ndarray:
        cost = mixed_step_cost(
            dep,
            chunk_tokens=tokens,
            chunk_prefix_tokens=prefix,
            decode_batch=grid[:, None],
            decode_context_tokens=ctx,
        )
        return np.asarray(cost.time_s, dtype=float)

    one = step(r_grid)
    fixed_grid = np.clip(2.0 * one - step(2.0 * r_grid), 0.0, one)
    # linear interpolation in r on each row's geometric grid: position log(r) / log(room) x (P - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        pos = np.log(rest) / np.log(np.maximum(room, 1.0 + 1e-12)) * (LAST_CHUNK_POINTS - 1)
    pos = np.clip(np.nan_to_num(pos), 0.0, LAST_CHUNK_POINTS - 1)
    lo = np.minimum(np.floor(pos).astype(int), LAST_CHUNK_POINTS - 2)
    w = (rest - np.take_along_axis(r_grid, lo, 1)) / (
        np.take_along_axis(r_grid, lo + 1, 1) - np.take_along_axis(r_grid, lo, 1)
    )
    w = np.clip(np.nan_to_num(w), 0.0, 1.0)
    fixed = np.take_along_axis(fixed_grid, lo, 1) * (1.0 - w) + np.take_along_axis(fixed_grid, lo + 1, 1) * w
    free = 1.0 - rest / room
    shared = fixed * free
    shared.flags.writeable = False
    free.flags.writeable = False
    ends = np.cumsum([len(g) for g in grids])[:-1]
    return dict(zip(chunks, zip(np.split(shared, ends), np.split(free, ends), strict=True), strict=True))


def instance_tables(
    scn: Scenario, gpu: GPU, parallel: Parallelism | int, chunk_tokens: int | None, role: str
) -> InstanceTables:
    """Tables for an instance of ``gpu`` GPUs laid out as ``parallel`` in ``role`` "colocated",
    "prefill" or "decode" (cached on the layout value, a whole number = TP-only, and on the scenario
    without its SLO: :func:`table_scenario`). Prefix caching: a prefill instance finds
    ``scn.prefill_pool_cached_tokens`` cached, a colocated replica ``scn.cached_tokens``
    (model.workload.sessions: they differ for multi-turn sessions).

    The engine profile (``scn.engine``) sets the decode-only activation workspace and caps the
    running batch at its max running sequences on ``gpu`` (``Engine.max_num_seqs_on``), as the
    simulator does (model.sim.simulate)."""
    return _instance_tables(table_scenario(scn), gpu, parallel, chunk_tokens, role)


@lru_cache(maxsize=256)
def _instance_tables(
    scn: Scenario, gpu: GPU, parallel: Parallelism | int, chunk_tokens: int | None, role: str
) -> InstanceTables:
    dep = _prefill_table(scn, gpu, parallel)[0]
    prompt = scn.prompt_tokens
    cached = scn.prefill_pool_cached_tokens if role == "prefill" else scn.cached_tokens
    if role == "decode":
        batched = scn.engine.decode_batched_tokens
    elif chunk_tokens is not None:
        batched = chunk_tokens
    else:
        # An unchunked prefill step batches prompts up to the engine's token cap (a longer prompt runs
        # alone), so the engine sizes its activation workspace for max(cap, longest prompt): vLLM's
        # profile run is a forward pass of max_num_batched_tokens (>= max_model_len unchunked), as the
        # simulator's instances (model.sim.simulate.simulate: max(prefill_token_cap, longest)).
        batched = float(max(scn.engine.prefill_token_cap, np.max(prompt)))
    fit = memory_fit(dep, max_batched_tokens=batched, gpu_memory_utilization=scn.gpu_memory_utilization)
    capacity = float(fit.kv_capacity_tokens)
    fits, reason = bool(fit.fits), fit.reason
    longest = float(np.max(prompt + scn.output_tokens)) if role != "prefill" else float(np.max(prompt))
    if fits and capacity < longest:
        fits = False
        reason = f"KV cache holds {capacity:,.0f} tokens, less than the longest request ({longest:,.0f})"
    # The KV a running sequence takes: its prompt and tokens so far under incremental allocation
    # (pre-emption engines), its whole prompt + output reserved at admission on a colocated replica
    # under whole-KV admission (policy "none"; the simulator's model.sim.colocated._reserve), where
    # the cap is the mean number of reservations the cache holds, not rounded down (a cache of
    # tokens shared by reservations of varying sizes holds more or fewer than that at times).
    if role == "colocated" and scn.engine.preemption == "none":
        kv_batch = float(fit.max_batch(max(scn.reserved_context_tokens, 1.0), whole=False))
    else:
        kv_batch = float(fit.max_batch(max(scn.decode_context_tokens, 1.0)))
    # A colocated replica admits its head prompt only when the prompt's KV fits (whole prompt + output
    # under policy "none", the prompt under incremental allocation), first come first served: while
    # one waits, the renewal age of the head sizes stays free, so a saturated cache holds fewer
    # sequences than ``kv_batch`` (model.queueing.decode_batch.head_of_line_room): the decode demand
    # must stay below that (the saturation rule, Baccelli & Foss 1995).
    p, o = scn.requests
    usable = head_of_line_room(capacity, p + o if scn.engine.preemption == "none" else p)
    saturated = kv_batch * usable if role == "colocated" else np.inf
    max_batch = min(kv_batch, float(scn.engine.max_num_seqs_on(gpu))) if fits else 0.0
    saturated = min(saturated, float(scn.engine.max_num_seqs_on(gpu))) if fits else 0.0
    # KV offload tiers: the hits whose prefix this instance still holds, and their reload time
    place = prefix_placement(dep, capacity, scn.kv_offload)
    reload = place.reload_time_s(cached)  # the reused prefix, reloaded when found in a tier
    served = float(place.served_fraction)
    hit_rate = scn.workload.prefix_cache_hit_rate * served
    if served < 1.0:
        cached = np.floor(cached * served)
    pre = _prefill_table(scn, gpu, parallel, role == "prefill", served)[1]
    dec = _decode_table(scn, gpu, parallel) if role != "prefill" else np.zeros_like(BATCH_GRID)
    # every role's tables: each prompt's prefill with its prefix reload, the decode steps, the placement
    tables = partial(
        InstanceTables,
        dep,
        fit,
        fits,
        reason,
        capacity,
        max_batch,
        pre + reload,
        dec,
        prefix=place,
        saturated_batch=saturated,
    )
    if role == "prefill" or (role == "colocated" and chunk_tokens is None):
        # Two identical prompts in one step cost 2 S - F: F is the part paid once per step (overhead,
        # kernel launches, exposed weight reads, all-reduce latency), which a batch of prompts shares
        # (model.serving.packing: a prefill instance's and a prefill-first replica's steps).
        two = np.asarray(
            prefill_cost(dep, prompt - cached, cached_tokens=cached, batch=2).time_s, dtype=float
        )
        return tables(prefill_fixed_s=np.clip(2.0 * pre - two, 0.0, pre))
    if chunk_tokens is None or role != "colocated":
        return tables()
    grid = _chunk_grid(chunk_tokens)
    if fits:  # tabulated with the planner's default budgets of the same layout, in one pass
        chunks = tuple(sorted({*DEFAULT_CHUNK_OPTIONS, int(chunk_tokens)}))
        table = _chunked_tables(scn, gpu, parallel, chunks, hit_rate)[chunk_tokens] + reload[None, :]
        shared, free = _chunked_packing(scn, gpu, parallel, chunks, hit_rate)[chunk_tokens]
    else:  # never evaluated (the planner drops infeasible candidates): skip the costly table
        table = np.broadcast_to(pre, (len(grid), len(pre))).copy()
        shared = free = np.zeros_like(table)
    return tables(
        chunk_tokens=chunk_tokens,
        chunk_batch_grid=grid,
        chunked_prefill_s=table,
        chunked_fixed_s=shared,
        chunked_free=free,
    )
