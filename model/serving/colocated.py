"""Colocated serving, analytically: R replicas of a TP group that run both phases.

Without chunking (vLLM's default prefill-first scheduler): a new prompt's prefill pre-empts the
running decodes for its whole duration (DistServe, Zhong et al. OSDI 2024, sec. 2.2). Prefills
queue in a G/G/R queue over the replicas (service = prefill time; arrival burstiness from the
scenario's inter-arrival SCV, Poisson by default; a least-loaded router is close to one shared
queue); decodes run in the time prefill leaves, so the per-token time is
tau(B) = t_dec(B) / (1 - rho_p) with rho_p = (lambda / R) E[S_prefill]
(model.queueing.interference.shared_token_time_s).

With chunked prefill (Sarathi-Serve, Agrawal et al. OSDI 2024): every iteration carries the
decode batch B plus up to (C - B) prompt tokens. A prompt's prefill takes its chunked-prefill time
S_c(L; B) from the roofline layer (prefix KV re-read per chunk, overhead per iteration); prompts
queue in an M/G/R queue with that service; the prefill-busy fraction u = (lambda / R) E[S_c]
splits iterations into mixed ones (mean t_mix = E[S_c] / E[chunks]) and decode-only ones
(t_dec), so tau(B) = 1 / (u / t_mix + (1 - u) / t_dec) (the same function). Both fixed points
B = (lambda / R) E[O] tau(B) are solved on the batch grid (model.queueing.decode_batch).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from model.physics.decode_tokens import tokens_per_decode_step
from model.queueing.decode_batch import admission_wait, interp_rows, solve_batch
from model.queueing.interference import shared_token_time_s
from model.queueing.latency import LatencyModel
from model.queueing.mgc import mgc_wait
from model.serving.common import StyleResult, busy_fraction, first_reason, moments, stack, wait_tail
from model.serving.phase_tables import BATCH_GRID, InstanceTables
from model.workload.scenario import Scenario


def _chunked_service(
    tables: Sequence[InstanceTables], table_index: np.ndarray, batch: np.ndarray
) -> np.ndarray:
    """S_c per sampled request [C, S] at each candidate's decode batch (linear in B between grid points)."""
    out = np.empty((len(table_index), tables[0].prefill_s.shape[0]))
    for t_i in np.unique(table_index):
        rows = np.nonzero(table_index == t_i)[0]
        t = tables[t_i]
        grid, table = t.chunk_batch_grid, t.chunked_prefill_s
        b = np.clip(batch[rows], grid[0], grid[-1])
        idx = np.clip(np.searchsorted(grid, b, side="right") - 1, 0, len(grid) - 2)
        w = np.clip((b - grid[idx]) / (grid[idx + 1] - grid[idx]), 0.0, 1.0)[:, None]
        out[rows] = table[idx] * (1.0 - w) + table[idx + 1] * w
    return out


def _emitted(t: InstanceTables) -> float:
    """Tokens a decoding sequence gains per iteration (1 without speculative decoding)."""
    return tokens_per_decode_step(t.dep).emitted


def _chunked_per_token(
    scn: Scenario, tables: Sequence[InstanceTables], table_index: np.ndarray, rate_per_replica: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """tau(B) on BATCH_GRID [C, G], plus the prefill-busy fraction u(B) and mean mixed step [C, G]."""
    prompt = scn.prompt_tokens - scn.cached_tokens
    es = np.full((len(tables), len(BATCH_GRID)), np.inf)
    mix = np.full((len(tables), len(BATCH_GRID)), np.inf)
    for k, t in enumerate(tables):
        grid = t.chunk_batch_grid
        inside = grid[-1] >= BATCH_GRID
        mean_s = t.chunked_prefill_s.mean(axis=1)
        room = np.maximum(t.chunk_tokens - grid, 1.0)
        chunks = np.ceil(prompt[None, :] / room[:, None]).mean(axis=1)
        es[k, inside] = np.interp(BATCH_GRID[inside], grid, mean_s)
        # per emitted token: a mixed iteration's decodes emit as many tokens as a decode-only step
        # (speculative decoding: model.physics.decode_tokens)
        mix[k, inside] = np.interp(BATCH_GRID[inside], grid, mean_s / chunks) / _emitted(t)
    es, mix = es[table_index], mix[table_index]
    dec = stack(tables, "decode_token_s")[table_index]
    with np.errstate(invalid="ignore", over="ignore"):
        u = np.where(np.isfinite(es), rate_per_replica[:, None] * es, np.inf)
    return shared_token_time_s(dec, u, mix), u, mix


def evaluate_colocated(
    scn: Scenario,
    tables: Sequence[InstanceTables],
    table_index: np.ndarray,
    replicas: np.ndarray,
    rate_rps: np.ndarray,
) -> StyleResult:
    """Analytical state of colocated candidates (all chunked, or all unchunked, per ``tables``)."""
    table_index = np.asarray(table_index, dtype=int)
    replicas = np.asarray(replicas, dtype=float)
    rate = np.asarray(rate_rps, dtype=float)
    n = len(table_index)
    chunked = tables[0].chunk_tokens is not None
    out_tokens = scn.output_tokens
    eo = float(out_tokens.mean())
    scv_o = float(out_tokens.var() / eo**2)
    rate_r = rate / replicas
    dec = stack(tables, "decode_token_s")[table_index]
    max_batch = stack(tables, "max_batch")[table_index]
    fits = np.array([t.fits for t in tables])[table_index]

    if chunked:
        # The token budget holds the decode tokens too: the batch cannot outgrow the tabulated room.
        budget_cap = np.array([t.chunk_batch_grid[-1] for t in tables])[table_index]
        max_batch = np.minimum(max_batch, np.floor(budget_cap))
        tau, _u_grid, mix_grid = _chunked_per_token(scn, tables, table_index, rate_r)
    else:
        service = stack(tables, "prefill_s")[table_index]
        es, _es2, scv = moments(service)
        rho_p = rate_r * es
        tau = shared_token_time_s(dec, rho_p[:, None])
    # The batch cannot grow past the last batch at which prefill still keeps up (finite tau).
    finite = np.isfinite(tau)
    last_finite = np.where(
        finite.any(axis=1), BATCH_GRID[len(BATCH_GRID) - 1 - np.argmax(finite[:, ::-1], axis=1)], 0.0
    )
    max_batch = np.minimum(max_batch, np.floor(last_finite))
    sol = solve_batch(rate_r * eo, BATCH_GRID, tau, max_batch)
    b = sol.batch
    t_dec = interp_rows(b, BATCH_GRID, dec)
    tau_cap = interp_rows(max_batch, BATCH_GRID, tau)
    adm_mean, adm_ok = admission_wait(rate_r, eo, scv_o, max_batch, tau_cap)

    if chunked:
        service = _chunked_service(tables, table_index, b)
        es, _es2, scv = moments(service)
        busy = rate_r * es
        t_mix = interp_rows(b, BATCH_GRID, np.where(np.isfinite(mix_grid), mix_grid, 0.0))
        per_token = interp_rows(b, BATCH_GRID, np.where(np.isfinite(tau), tau, 0.0))
        # One prompt's stall on a running request: its mixed iterations' extra time over plain
        # decode steps, S_c - chunks x t_dec.
        chunk_room = np.maximum(np.array([t.chunk_tokens for t in tables])[table_index] - b, 1.0)
        chunks = np.ceil((scn.prompt_tokens - scn.cached_tokens)[None, :] / chunk_room[:, None])
        step = t_dec * np.array([_emitted(t) for t in tables])[table_index]  # one decode iteration
        stalls = np.maximum(service - chunks * step[:, None], 0.0)
        residual = np.zeros(n)
        max_itl = np.maximum(t_mix, t_dec)
    else:
        busy = rho_p
        per_token = shared_token_time_s(t_dec, busy)
        stalls = service
        # A prompt waits for the decode step in progress to end: mean residual t_dec / 2.
        residual = t_dec / 2.0
        max_itl = t_dec + np.quantile(service, 0.99, axis=1)
    # Prompts arriving while a request decodes: Poisson, rate lambda / R over its (O - 1) x tau.
    events = np.where(np.isfinite(per_token), rate_r * per_token, 0.0)[:, None] * (out_tokens[None, :] - 1.0)
    queue = mgc_wait(rate, np.maximum(es, 1e-12), scv, replicas, scn.arrival_scv)
    below_cap = sol.below_cap & adm_ok
    stable = fits & (busy < 1) & queue.stable & below_cap & (rate > 0) & (max_batch >= 1)
    reasons = first_reason(
        [
            (fits, "does not fit in memory"),
            (busy < 1, "prefill work saturates the replicas (utilisation >= 1)"),
            (queue.stable, "prefill queue unstable"),
            (below_cap, "decode demand exceeds the KV-cache capacity"),
        ],
        n,
    )
    prob, cond = wait_tail(queue, stable)
    # + the engine's per-request client overhead (tokenise, HTTP; model.hardware.overheads)
    fixed = (
        service + (residual + np.where(np.isfinite(adm_mean), adm_mean, 0.0) + scn.engine.request_s)[:, None]
    )
    latency = LatencyModel(
        wait_prob=prob,
        wait_cond_mean_s=cond,
        fixed_s=fixed,
        tpot_base_s=t_dec,
        stall_events=events,
        stall_sizes_s=np.sort(stalls, axis=1),
        output_tokens=out_tokens,
        stable=stable,
    )
    zeros = np.zeros(n)
    decode_busy = np.minimum(busy + (1.0 - np.minimum(busy, 1.0)) * busy_fraction(b), 1.0)
    return StyleResult(
        latency=latency,
        stable=stable,
        queue_wait_mean_s=np.where(stable, queue.mean_wait_s, np.inf),
        prefill_mean_s=es + residual,
        transfer_mean_s=zeros,
        link_wait_mean_s=zeros,
        admission_wait_mean_s=adm_mean,
        batch=b,
        max_batch=max_batch,
        tpot_mean_s=latency.mean_tpot_s(),
        prefill_busy=np.minimum(busy, 1.0),
        decode_busy=decode_busy,
        link_utilisation=zeros,
        kv_bytes_per_request=np.full(n, float(np.mean(scn.kv_bytes_per_request(scn.prompt_tokens)))),
        unstable_reason=reasons,
        max_itl_s=np.where(stable, max_itl, np.inf),
    )
