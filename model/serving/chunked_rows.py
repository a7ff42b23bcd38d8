"""Chunked-prefill table reads of the colocated evaluation (model.serving.colocated): a chunked
table per sampled request at each candidate's decode batch, the busy period's iteration, and the
per-token time tau(B) with the prefill-busy fraction on the batch grid (docs/model.md, "Chunked
prefill"). Tables of one deployment and chunk budget are read once (a robustness world's scaled copies
share their deployment, model.serving.candidates.scaled_tables)."""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np

from model.physics.steps import mixed_step_cost
from model.queueing.interference import shared_token_time_s
from model.serving.common import decode_token_rows, emitted_rows
from model.serving.phase_tables import BATCH_GRID, MIN_CHUNK_FRACTION, InstanceTables
from model.workload.scenario import Scenario

__all__ = ["busy_iteration_s", "chunked_grid_means", "chunked_per_token", "chunked_rows", "layout_groups"]


def layout_groups(
    tables: Sequence[InstanceTables], table_index: np.ndarray
) -> list[tuple[np.ndarray, InstanceTables]]:
    """(rows, representative tables) per deployment and chunk budget: the candidates whose tables differ
    at most by ``chunk_time_factor`` (a robustness world's scaled copies share their deployment,
    model.serving.candidates.scaled_tables), so per-table work runs once per layout."""
    groups: dict[tuple[int, int | None], list[int]] = {}
    for t_i in np.unique(table_index):
        groups.setdefault((id(tables[t_i].dep), tables[t_i].chunk_tokens), []).append(int(t_i))
    return [(np.nonzero(np.isin(table_index, m))[0], tables[m[0]]) for m in groups.values()]


def chunked_rows(
    tables: Sequence[InstanceTables], table_index: np.ndarray, batch: np.ndarray, attr: str
) -> np.ndarray:
    """A chunked table ``attr`` [Gc, S] per sampled request [C, S] at each candidate's decode batch
    (linear in B between grid points). Tables of one deployment and chunk budget that differ only by
    their ``chunk_time_factor`` (a robustness world's scaled copies, model.serving.candidates
    .scaled_tables) are read once and scaled per row (``attr`` a time; "chunked_free" is a fraction)."""
    out = np.empty((len(table_index), tables[0].prefill_s.shape[0]))
    for rows, t in layout_groups(tables, table_index):
        grid, table = t.chunk_batch_grid, getattr(t, attr)
        b = np.clip(batch[rows], grid[0], grid[-1])
        idx = np.clip(np.searchsorted(grid, b, side="right") - 1, 0, len(grid) - 2)
        w = np.clip((b - grid[idx]) / (grid[idx + 1] - grid[idx]), 0.0, 1.0)[:, None]
        out[rows] = table[idx] * (1.0 - w) + table[idx + 1] * w
        factor = np.array([tables[i].chunk_time_factor for i in table_index[rows]])
        if attr != "chunked_free" and np.any(factor != t.chunk_time_factor):
            out[rows] *= (factor / t.chunk_time_factor)[:, None]
    return out


def busy_iteration_s(
    scn: Scenario,
    tables: Sequence[InstanceTables],
    table_index: np.ndarray,
    batch: np.ndarray,
    queued: np.ndarray,
) -> np.ndarray:
    """[C] a chunked iteration inside a busy period at decode batch b: it carries the prompts queued
    then, ``queued`` = L / u of them (the M/G/1 number in system given it is busy; Little: L =
    lambda_r (W + E[S])), E[u] uncached tokens each, up to the room max(c - b, c / 16)
    (model.serving.phase_tables), at the mean prefix of a prompt's chunks (max(u - room, 0) / 2 past its
    cached part), with b decodes (model.physics.steps.mixed_step_cost, the tables' step, times the
    tables' ``chunk_time_factor``). One cost call per deployment and chunk budget: the scaled tables
    of a robustness world share their deployment."""
    out = np.empty(len(table_index))
    uncached = scn.prompt_tokens - scn.cached_tokens
    for rows, t in layout_groups(tables, table_index):
        b = np.maximum(np.floor(batch[rows]), 1.0)
        room = np.maximum(t.chunk_tokens - b, t.chunk_tokens * MIN_CHUNK_FRACTION)
        tokens = np.clip(float(uncached.mean()) * np.maximum(queued[rows], 1.0), 1.0, room)
        prefix = (
            float(scn.cached_tokens.mean())
            + np.maximum(uncached[None, :] - room[:, None], 0.0).mean(axis=1) / 2
        )
        cost = mixed_step_cost(
            t.dep,
            chunk_tokens=tokens,
            chunk_prefix_tokens=prefix,
            decode_batch=b,
            decode_context_tokens=max(scn.decode_context_tokens, 1.0),
        )
        factor = np.array([tables[i].chunk_time_factor for i in table_index[rows]])
        out[rows] = np.asarray(cost.time_s, dtype=float) * factor
    return out


_GRID_MEANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def chunked_grid_means(t: InstanceTables, prompt: np.ndarray, key: bytes) -> tuple[np.ndarray, ...]:
    """A chunked table's means over the sampled requests on BATCH_GRID (inf past its last batch):
    prefill time, iterations (ceil(prompt / room)), shareable part and free room of the last
    iteration. They do not depend on the rate, so they are kept per table (and prompt sample) for the
    goodput search's many evaluations; ``key`` = ``prompt.tobytes()``)."""
    hit = _GRID_MEANS.get(t)
    if hit is not None and hit[0] == key:
        return hit[1]
    grid = t.chunk_batch_grid
    inside = grid[-1] >= BATCH_GRID
    room = np.maximum(t.chunk_tokens - grid, 1.0)
    per_row = (
        t.chunked_prefill_s.mean(axis=1),
        np.ceil(prompt[None, :] / room[:, None]).mean(axis=1),
        t.chunked_fixed_s.mean(axis=1),
        t.chunked_free.mean(axis=1),
    )
    out = []
    for row in per_row:
        dst = np.full(len(BATCH_GRID), np.inf)
        dst[inside] = np.interp(BATCH_GRID[inside], grid, row)
        out.append(dst)
    _GRID_MEANS[t] = (key, tuple(out))
    return tuple(out)


def chunked_per_token(
    scn: Scenario,
    tables: Sequence[InstanceTables],
    table_index: np.ndarray,
    rate_per_replica: np.ndarray,
    packed: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """tau(B) on BATCH_GRID [C, G], plus the prefill-busy fraction u(B) and mean mixed step [C, G].

    ``packed`` [C, G]: 1 - 1/k for k prompts per packed iteration (0: each prompt in its own
    iterations); a prompt's share of the work and of the iterations loses that fraction of its last
    iteration's shareable part and free room (``InstanceTables.chunked_fixed_s`` / ``chunked_free``).
    """
    prompt = scn.prompt_tokens - scn.cached_tokens
    key = prompt.tobytes()
    grids = [chunked_grid_means(t, prompt, key) for t in tables]
    es, chunks_g, fixed_g, free_g = (np.stack([g[i] for g in grids]) for i in range(4))
    p = np.asarray(packed, dtype=float)
    es, chunks = es[table_index], chunks_g[table_index]
    inside = np.isfinite(es)
    es = np.where(inside, es - p * np.where(inside, fixed_g[table_index], 0.0), np.inf)
    chunks = np.where(inside, chunks - p * np.where(inside, free_g[table_index], 0.0), np.inf)
    emitted = emitted_rows(tables)[table_index][:, None]
    # per emitted token: a mixed iteration's decodes emit as many tokens as a decode-only step
    # (speculative decoding: model.physics.decode_tokens)
    with np.errstate(invalid="ignore"):
        mix = np.where(np.isfinite(es), es / np.maximum(chunks, 1e-12), np.inf) / emitted
    dec = decode_token_rows(tables)[table_index]
    with np.errstate(invalid="ignore", over="ignore"):
        u = np.where(np.isfinite(es), rate_per_replica[:, None] * es, np.inf)
    return shared_token_time_s(dec, u, mix), u, mix
