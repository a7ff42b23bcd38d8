"""Disaggregated serving, analytically: a prefill pool and a decode pool joined by a link.

Prefill pool: n_p instances share one FCFS queue (DistServe, Zhong et al. OSDI 2024, sec. 3.1 models
a prefill instance as M/D/1). A freed instance takes the queued prompts up to the engine's
``prefill_token_cap`` (model.serving.packing), sharing the per-step fixed cost: the busy fraction and
P(wait) come from the M/G/n_p queue over each prompt's share of its step, the wait itself from the
bulk-service queue M/G^(1,J)/n_p (model.queueing.bulk_wait), and a waiting prompt's TTFT carries the
prompts packed in its step with it (model.queueing.disaggregated_terms, PackedStep). A session
workload below its implied pool rate misses whole histories in bursts (while the live sessions'
footprint is high): the queue is then averaged over the footprint's levels
(model.queueing.environment, pointwise stationary approximation), each level with its own miss
share and the pool's bulk-service correction of the wait.

Each request's prompt KV (prompt tokens x KV bytes per token, the whole replica's heads) then
crosses the link on min(TP_p, TP_d) parallel lanes, each lane one GPU's link (a TP rank sends its
own heads' KV, Splitwise sec. 4.3 / Mooncake's transfer engine):
T = messages x latency + bytes / (lanes x bandwidth x efficiency).

Layer-wise sending (Splitwise, Patel et al. ISCA 2024, sec. 4.3) pipelines the transfer of layer l
with the compute of layers l+1..N. With per-layer compute c = S / N and per-layer transfer
t = latency + T_bw / N, the last layer's KV lands at S + t when t <= c, or c + N t otherwise, so
the exposed time is max(t, N t - S + c). Whole-request sending exposes latency + T_bw.

Each prefill instance's lanes send its transfers FCFS and each decode instance's lanes receive
theirs: an M/G/1 queue at each end with the link occupancy per request (latency + bytes / bandwidth)
as service (Pollaczek-Khinchine mean wait, model.queueing.mgc.mg1_wait); both waits add to TTFT and
either end at utilisation >= 1 is unstable. The decode pool is n_d continuous-batching instances:
B = (lambda / n_d) E[O] t_dec(B), capped by KV capacity and the engine's max running sequences, with
the slot admission queue of model.decode_batch; a request's TPOT follows the batch's fluctuation
around B (model.queueing.decode_spread), not the step at B alone, and its first token gap holds the
residual of the iteration in flight when its KV lands (it joins at the next iteration boundary;
model.queueing.latency, "Join residual").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from model.hardware.collectives import alpha_beta_time_s
from model.queueing.bulk_wait import bulk_wait
from model.queueing.decode_batch import admission_wait, interp_rows, solve_batch
from model.queueing.decode_spread import decode_tpot_spread
from model.queueing.disaggregated_terms import PackedStep
from model.queueing.environment import environment_waits, level_weights
from model.queueing.latency import LatencyModel
from model.queueing.mgc import mg1_wait, mgc_wait
from model.serving.common import (
    StyleResult,
    busy_fraction,
    decode_token_rows,
    first_reason,
    moments,
    stack,
    wait_tail,
)
from model.serving.full_steps import full_step_law, full_step_times
from model.serving.packing import (
    companion_weights,
    full_step_prompts,
    pool_batch,
    prompt_room_law,
    step_companions,
    step_law,
    uncached_prompt_tokens,
)
from model.serving.phase_tables import BATCH_GRID, InstanceTables
from model.workload.scenario import Scenario


def transfer_components(
    scn: Scenario,
    prefill_s: np.ndarray,
    lanes: np.ndarray,
    bandwidth_eff_bytes_per_s: np.ndarray,
    latency_s: np.ndarray,
    layerwise: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(KV bytes [S], exposed transfer time [C, S], link occupancy [C, S]) per sampled request.

    With prefix caching the decode instance may already hold the KV of earlier turns
    (``Scenario.transfer_kv_bytes``; vLLM's KV connectors and Dynamo's router pull only the blocks
    the decode worker lacks): only the rest crosses the link.

    Infinite bandwidth (a same-GPU link) gives zero transfer time.
    """
    kv_bytes = scn.transfer_kv_bytes  # the prompt's KV less what the decode instance holds
    layers = float(scn.arch.num_layers)
    bw = (np.asarray(lanes, dtype=float) * np.asarray(bandwidth_eff_bytes_per_s, dtype=float))[:, None]
    lat = np.asarray(latency_s, dtype=float)[:, None]
    # The alpha-beta time of model.hardware.collectives (one message each), per layer and whole.
    per_layer = alpha_beta_time_s(kv_bytes[None, :] / layers, bw, lat)
    pipelined = np.maximum(per_layer, layers * per_layer - prefill_s + prefill_s / layers)
    whole = alpha_beta_time_s(kv_bytes[None, :], bw, lat)
    lw = np.asarray(layerwise, dtype=bool)[:, None]
    exposed = np.where(lw, pipelined, whole)
    # The wire is busy for the bytes plus one message latency: per-layer messages pipeline, so their
    # latencies overlap the bytes of other layers and do not add busy time.
    occupancy = whole
    same_gpu = np.isinf(bw)
    return kv_bytes, np.where(same_gpu, 0.0, exposed), np.where(same_gpu, 0.0, occupancy)


def evaluate_disaggregated(
    scn: Scenario,
    prefill_tables: Sequence[InstanceTables],
    decode_tables: Sequence[InstanceTables],
    prefill_index: np.ndarray,
    decode_index: np.ndarray,
    n_prefill: np.ndarray,
    n_decode: np.ndarray,
    lanes: np.ndarray,
    bandwidth_eff_bytes_per_s: np.ndarray,
    latency_s: np.ndarray,
    layerwise: np.ndarray,
    rate_rps: np.ndarray,
    miss_levels: np.ndarray | None = None,
) -> StyleResult:
    """Analytical state of disaggregated candidates (arrays over candidates). ``miss_levels`` [C, K]:
    a session workload's history-miss probability in each level of the live footprint, a slow
    environment of the prefill queue (model.queueing.environment); None: one stationary queue."""
    pi = np.asarray(prefill_index, dtype=int)
    di = np.asarray(decode_index, dtype=int)
    n_p = np.asarray(n_prefill, dtype=float)
    n_d = np.asarray(n_decode, dtype=float)
    rate = np.asarray(rate_rps, dtype=float)
    n = len(pi)
    out_tokens = scn.output_tokens
    eo = float(out_tokens.mean())
    scv_o = float(out_tokens.var() / eo**2)

    alone = stack(prefill_tables, "prefill_s")[pi]
    fixed_p = stack(prefill_tables, "prefill_fixed_s")[pi]
    # The prefill pool packs FCFS under the engine's token cap: each prompt shares its step's per-step
    # part with the prompts that fit beside it (model.serving.packing.step_companions), at the queue
    # length where the steps' count follows the pool's packing law (model.serving.packing.pool_batch).
    cap_tokens = float(scn.engine.prefill_token_cap)
    batch_k = pool_batch(scn, rate, n_p, alone, fixed_p)
    companions = step_companions(batch_k, uncached_prompt_tokens(scn), cap_tokens)
    share = alone - fixed_p + fixed_p / companions  # a prompt's share of its batched step
    # P(wait) and stability from the queue over shares (Erlang C at the pool's busy fraction); the wait
    # itself is the bulk-service queue's: a freed instance takes the queue up to the token cap
    # (model.queueing.bulk_wait). An instance's step holds k_s prompts and lasts E[S] = k_s E[share]
    # (model.serving.packing.step_law); a full step (the queue longer than the cap) holds J prompts,
    # J's law that of the companions at a queue that never empties, per step.
    # E[J] of a full step from a fresh head: the bound on one instance's step-count variance (step_law)
    fresh_j, fresh_p = full_step_prompts(scn, cap_tokens)
    full_prompts = float((fresh_j * fresh_p).sum())
    es, scv, _, step_s, step_scv = step_law(
        alone, fixed_p, companions, rate, n_p, full_prompts, companion_weights(scn, cap_tokens)
    )
    rho_p = rate * es / n_p
    queue = mgc_wait(rate, np.maximum(es, 1e-12), scv, n_p, scn.arrival_scv)
    v_mean = (alone - fixed_p).mean(axis=1)
    # J's law, each prompt's own room R_i for the prompts ahead of it (its passes, bulk_wait item 4) and a
    # full step's length by J (its own prompts' F and v), on consecutive token-full steps, each starting
    # at the prompt the last one could not fit; the bulk wait tilts the lengths by s^J to the steps that
    # pass a waiting prompt (model.serving.full_steps); the first free-up's head is a leftover or a fresh
    # arrival (the prompts of model.serving.packing's draws; bulk_wait item 5)
    full = (
        *full_step_law(scn, cap_tokens),
        fresh_j,
        fresh_p,
        prompt_room_law(scn, cap_tokens),
    )
    full_times = full_step_times(scn, cap_tokens, alone, fixed_p)
    bulk = bulk_wait(rate, step_s, step_scv, n_p, full, full_times, rho_p, scn.arrival_scv)
    service = alone
    kv_bytes, exposed, occupancy = transfer_components(
        scn, service, lanes, bandwidth_eff_bytes_per_s, latency_s, layerwise
    )
    eocc, _, scv_occ = moments(occupancy)
    # Both ends queue: a prefill instance's lanes send lambda / n_p transfers per second and a decode
    # instance's lanes receive lambda / n_d; each end is an M/G/1 over the same occupancy, and the
    # busier end bounds the link (an end at utilisation >= 1 is unstable).
    link_rho = np.zeros_like(rate)
    link_wait = np.zeros_like(rate)
    link_ok = np.ones(rate.shape, dtype=bool)
    for instances in (n_p, n_d):
        end_rate = rate / instances
        rho_end = end_rate * eocc
        end = mg1_wait(end_rate, np.maximum(eocc, 1e-300), scv_occ)
        ok_end = (rho_end < 1) | (eocc == 0)
        link_ok &= ok_end
        link_rho = np.maximum(link_rho, rho_end)
        link_wait = link_wait + np.where(eocc == 0, 0.0, np.where(ok_end, end.mean_wait_s, np.inf))

    dec = decode_token_rows(decode_tables)[di]
    max_batch = stack(decode_tables, "max_batch")[di]
    rate_d = rate / n_d
    sol = solve_batch(rate_d * eo, BATCH_GRID, dec, max_batch)
    t_dec = sol.per_token_s
    spread = decode_tpot_spread(
        rate_d * eo, BATCH_GRID, dec, max_batch, sol.batch, out_tokens, np.broadcast_to(n_d, rate.shape)
    )
    tau_cap = interp_rows(max_batch, BATCH_GRID, dec)
    adm_mean, adm_ok = admission_wait(rate_d, eo, scv_o, max_batch, tau_cap)

    fits_p = np.array([t.fits for t in prefill_tables])[pi]
    fits_d = np.array([t.fits for t in decode_tables])[di]
    below_cap = sol.below_cap & adm_ok
    stable = fits_p & fits_d & queue.stable & link_ok & below_cap & (rate > 0)
    reasons = first_reason(
        [
            (fits_p, "prefill instance does not fit in memory"),
            (fits_d, "decode instance does not fit in memory"),
            (queue.stable, "prefill pool saturated (utilisation >= 1)"),
            (link_ok, "KV link saturated (utilisation >= 1)"),
            (below_cap, "decode demand exceeds the decode pool's KV-cache capacity"),
        ],
        n,
    )
    prob, share_cond = wait_tail(queue, stable)
    cond = np.where(stable, bulk.cond_mean_s, np.inf)
    missed = scn.prefill_pool_missed
    levels = None
    if miss_levels is not None and 0.0 < float(missed.mean()) < 1.0:
        weight = level_weights(missed, miss_levels)
        # each level's share-queue wait with the pool's bulk-service correction (bulk / share queue)
        bulk_ratio = np.where(stable & (share_cond > 0), cond / np.where(stable, share_cond, 1.0), 1.0)
        levels = environment_waits(rate, share, weight, n_p, scn.arrival_scv).scaled(bulk_ratio)
    extra = np.where(np.isfinite(link_wait), link_wait, 0.0) + np.where(np.isfinite(adm_mean), adm_mean, 0.0)
    # + the engine's per-request client overhead (tokenise, HTTP; model.hardware.overheads)
    # The prompts packed with a waiting prompt in its step: those queued ahead of it that the step takes
    # and those that arrive during its wait, up to the token cap's room beside it
    # (model.queueing.disaggregated_terms, "Packed step").
    uncached = uncached_prompt_tokens(scn)
    room = np.floor(np.maximum(cap_tokens - uncached, 0.0) / max(float(uncached.mean()), 1.0))[None, :]
    ahead = np.minimum(bulk.ahead[:, None], room)
    # One instance: a waiting prompt waits out the step in progress (uniform residual on its length L =
    # 2 K g = E[S] (1 + c_S^2), the length-biased mean step) unless passed (model.queueing.
    # disaggregated_terms, "One instance").
    step_len = np.where(n_p == 1, 2.0 * bulk.first_s, 0.0)
    # n_p = 1: g_J E[passes_i | passed], the passes given one; prompt i's own wait m_i = m x own_scale
    packed = PackedStep(
        rate,
        v_mean,
        np.broadcast_to(room, alone.shape),
        ahead,
        step_len,
        bulk.own_pass_s,
        step_scv,
        bulk.full_s,
        bulk.own_scale,
    )
    fixed = service + exposed + (extra + scn.engine.request_s)[:, None]
    latency = LatencyModel(
        wait_prob=prob,
        wait_cond_mean_s=cond,
        fixed_s=fixed,
        tpot_base_s=spread.mean_s,
        stall_events=np.zeros_like(fixed),
        stall_sizes_s=np.zeros((n, 1)),
        output_tokens=out_tokens,
        stable=stable,
        spread=spread,
        # the join residual: the KV lands in a busy iteration (P = the instance's busy fraction) of the
        # step at the mean batch (model.queueing.latency, "Join residual")
        packed=packed,
        join_busy=busy_fraction(sol.batch),
        join_step_s=interp_rows(sol.batch, BATCH_GRID, stack(decode_tables, "decode_step_s")[di]),
        levels=levels,
    )
    wait_mean = prob * cond if levels is None else levels.mean_wait_s
    return StyleResult(
        latency=latency,
        stable=stable,
        queue_wait_mean_s=np.where(stable, wait_mean, np.inf),
        prefill_mean_s=es,
        transfer_mean_s=exposed.mean(axis=1),
        link_wait_mean_s=link_wait,
        admission_wait_mean_s=adm_mean,
        batch=sol.batch,
        max_batch=max_batch,
        tpot_mean_s=latency.mean_tpot_s(),
        prefill_busy=np.minimum(rho_p, 1.0),
        decode_busy=busy_fraction(sol.batch),
        link_utilisation=np.minimum(link_rho, 1.0),
        kv_bytes_per_request=np.full(n, float(kv_bytes.mean())),
        unstable_reason=reasons,
        max_itl_s=np.where(stable, np.maximum(t_dec, spread.quantile_s(0.99)), np.inf),
    )
