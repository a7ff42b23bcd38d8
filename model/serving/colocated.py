"""Colocated serving, analytically: R replicas of a TP group that run both phases.

Without chunking (vLLM's default prefill-first scheduler): waiting prompts are packed into one
prefill step (first-come-first-served up to the engine's ``prefill_token_cap``) that pre-empts the
running decodes for its whole duration (DistServe, Zhong et al. OSDI 2024, sec. 2.2). A step of k
prompts takes F + sum of their own parts v (F = the per-step part of a prefill, shared:
model.serving.packing), so a prompt's share of its replica is v + F / k; k counts the prompts queued
behind prefill work plus those that arrive during the decode step in progress. Prompts queue over the
replicas (service = that share; arrival burstiness from the scenario's
inter-arrival SCV, Poisson by default) whose law follows the engine's router: one shared G/G/R queue,
or R queues at lambda / R (model.queueing.routing; docs/queueing.md, "Routing"); decodes
run in the time prefill leaves, so the per-token time is tau(B) = t_dec(B) / (1 - rho_p) with
rho_p = (lambda / R) E[share] (model.queueing.interference.shared_token_time_s), and a running
request stalls once per packed step.

With chunked prefill (Sarathi-Serve, Agrawal et al. OSDI 2024): every iteration carries the
decode batch B plus up to (C - B) prompt tokens. A prompt's prefill takes its chunked-prefill time
S_c(L; B) from the roofline layer (prefix KV re-read per chunk, overhead per iteration); the room its
last iteration leaves is filled by the next prompts when they wait (the shared part of that
iteration: ``InstanceTables.chunked_fixed_s``), which lowers its share of the work and of the
iterations by 1 - 1/k, the probability that a prompt waits then (N waiting geometric of mean
k - 1); prompts queue behind the router with that share; the prefill-busy fraction
u = (lambda / R) E[share] splits iterations into mixed ones (mean t_mix = E[share] / E[chunks]) and
decode-only ones (t_dec), so tau(B) = 1 / (u / t_mix + (1 - u) / t_dec) (the same function). Both
fixed points B = (lambda / R) E[O] tau(B) are solved on the batch grid (model.queueing.decode_batch),
with the packing k tabulated on the same grid.

The TPOT's base is the plain decode step t_dec(N) at the replica's fluctuating batch N (the
birth-death occupancy of model.queueing.decode_spread, sequences leaving at tau; the R replicas
behind the least-loaded router as one pool), and the prefill's share comes on top: the latency model
convolves the two (model.queueing.latency; Papoulis sec. 6-2). With chunking it is the mixed share F
of the request's iterations (model.queueing.mixed_share: the replica's prefill busy / idle
alternation over the request's decode window, its mixed iterations rising from the mean mixed
iteration to a busy period's with F). Without chunking it is the stalls, which are those of the prompts
arriving at the request's replica while it decodes, plus those that arrived during its own TTFT and
are still queued at its first token (prefill-first: during its packed step; chunked: during its
prefill iterations), served first thing in its decode; how many of the fleet's prompts join the
request's replica follows the router (model.queueing.routing.replica_arrivals, stall_exposure:
a least-loaded router keeps the replicas level, so a running request shares its replica's prefills
with fewer arrivals than a random split sends it; fewer still during its own prefill-first step, the
replica just picked as the lowest and frozen: model.queueing.own_step).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from model.queueing.colocated_base import (
    base_step_occupancy,
    cohort_mean,
    cohort_spread,
    frozen_share,
    replica_split,
)
from model.queueing.decode_batch import admission_queue, interp_rows, solve_batch
from model.queueing.interference import shared_token_time_s
from model.queueing.latency import LatencyModel
from model.queueing.light_exposure import spread_exposure
from model.queueing.mixed_share import MixedShare, alternation, mixed_share
from model.queueing.overlap import arrival_correlation
from model.queueing.own_step import prefill_first_arrivals
from model.queueing.routing import (
    chunked_follow_on_load,
    cohort_exposure,
    follow_on_load,
    replica_arrivals,
    routed_wait,
    stall_exposure,
)
from model.queueing.stall_count import stall_events
from model.queueing.start_queue import start_queue_gain, start_queue_moments
from model.serving.chunked_rows import busy_iteration_s, chunked_per_token, chunked_rows
from model.serving.common import (
    StyleResult,
    busy_fraction,
    decode_token_rows,
    emitted_rows,
    first_reason,
    moments,
    stack,
    wait_tail,
)
from model.serving.decode_exposure import amplified_spread, plain_decode_s, stall_gain
from model.serving.kv_saturation import saturated_holds
from model.serving.packing import FILL_MAX_PROMPTS, packed_behind_s, prefill_batch, prompts_per_step
from model.serving.phase_tables import BATCH_GRID, InstanceTables
from model.serving.preemption import colocated_resume
from model.serving.queued_behind import wait_stall_rows
from model.workload.scenario import Scenario


def _mixed_share(
    rate_r: np.ndarray,
    share_moments_s: tuple[np.ndarray, np.ndarray],
    iteration_s: tuple[np.ndarray, np.ndarray, np.ndarray],
    emitted: np.ndarray,
    out_tokens: np.ndarray,
    pool_share: np.ndarray,
    follow_on: Callable[[np.ndarray], np.ndarray] | None = None,
    start_var: np.ndarray | None = None,
) -> MixedShare:
    """The chunked replicas' TPOT excess over the plain step [C, S] (model.queueing.mixed_share): F
    the mixed share of the request's (O - 1) / e iterations, its mixed iterations' mean time rising
    from the mean mixed iteration T_mix at F = E[F] to a busy period's iteration T_full at F = 1.
    ``iteration_s`` = (T_dec, T_mix, T_full) [C]. F and the batch deviation D both count the prompts
    arriving in the window: corr r = rho_D sqrt(p) rho_F (model.queueing.overlap.arrival_correlation,
    mixed_share.arrival_share_correlation), p = ``pool_share`` [C] the share of
    the pool's arrivals (whose count drives the levelled batch) that join the request's replica (a
    Poisson thinning: corr of the two counts sqrt(p), Kingman 1993, ch. 5, the colouring theorem).
    ``follow_on``: the busy period's follow-on load from u (model.queueing.routing
    .chunked_follow_on_load; None: Poisson joins). ``start_var`` [C]: Var[Q] of the prompts queued at
    the window's start, a second common cause, and each prompt's join delayed by its prefill (r times
    model.queueing.start_queue.start_queue_gain; None: neither)."""
    t_dec, t_mix, t_full = iteration_s
    alt = alternation(rate_r, share_moments_s, t_dec, t_mix, follow_on)
    # computed once per distinct output length (a request's law depends on it alone), then spread
    outputs, inverse = np.unique(out_tokens, return_inverse=True)
    laws = mixed_share(alt, (outputs[None, :] - 1.0) / emitted[:, None])
    mean, alpha, beta, rho_f = (v[:, inverse.reshape(-1)] for v in laws)
    corr = arrival_correlation(out_tokens)[None, :] * np.sqrt(np.clip(pool_share, 0.0, 1.0))[:, None] * rho_f
    if start_var is not None:
        gain = start_queue_gain(start_var, alt.prompt_iterations, alt.arrivals, emitted, mean, out_tokens)
        corr = corr * gain
    per_token = (t_dec / emitted, t_mix / emitted, t_full / emitted)
    return MixedShare.build(mean, alpha, beta, per_token, corr)


def _decode_batch(
    scn: Scenario,
    tables: Sequence[InstanceTables],
    table_index: np.ndarray,
    rate_r: np.ndarray,
    max_batch: np.ndarray,
    packed: np.ndarray,
    prefill_means_s: tuple[np.ndarray, np.ndarray] | None,
):
    """(batch solution, tau grid [C, G], mixed-step grid [C, G] or None, batch cap [C]) at the
    prefill load the packing leaves, ``packed`` = 1 - 1/k [C, G] on BATCH_GRID: chunked from the
    tables, prefill-first from the mean prefill alone and its mean per-step part ``prefill_means_s``
    ([C] each; a prompt's share of a packed step is alone - per-step part x (1 - 1/k))."""
    dec = decode_token_rows(tables)[table_index]
    if prefill_means_s is None:
        tau, _u, mix_grid = chunked_per_token(scn, tables, table_index, rate_r, packed)
    else:
        alone_mean, fixed_mean = prefill_means_s
        share = alone_mean[:, None] - fixed_mean[:, None] * packed
        tau, mix_grid = shared_token_time_s(dec, rate_r[:, None] * share), None
    # The batch cannot grow past the last batch at which prefill still keeps up (finite tau).
    finite = np.isfinite(tau)
    last_finite = np.where(
        finite.any(axis=1), BATCH_GRID[len(BATCH_GRID) - 1 - np.argmax(finite[:, ::-1], axis=1)], 0.0
    )
    max_batch = np.minimum(max_batch, np.floor(last_finite))
    return (
        solve_batch(rate_r * float(scn.output_tokens.mean()), BATCH_GRID, tau, max_batch),
        tau,
        mix_grid,
        max_batch,
    )


def evaluate_colocated(
    scn: Scenario,
    tables: Sequence[InstanceTables],
    table_index: np.ndarray,
    replicas: np.ndarray,
    rate_rps: np.ndarray,
) -> StyleResult:
    """Analytical state of colocated candidates (all chunked, or all unchunked, per ``tables``)."""
    table_index = np.asarray(table_index, dtype=int)
    n = len(table_index)
    replicas = np.asarray(replicas, dtype=float) * np.ones(n)  # [C], one per candidate
    rate = np.asarray(rate_rps, dtype=float)
    chunked = tables[0].chunk_tokens is not None
    out_tokens = scn.output_tokens
    eo = float(out_tokens.mean())
    scv_o = float(out_tokens.var() / eo**2)
    rate_r = rate / replicas
    dec = decode_token_rows(tables)[table_index]
    max_batch = stack(tables, "max_batch")[table_index]
    fits = np.array([t.fits for t in tables])[table_index]
    emitted = emitted_rows(tables)[table_index]
    uncached = scn.prompt_tokens - scn.cached_tokens

    if chunked:
        # The token budget holds the decode tokens too: the batch cannot outgrow the tabulated room.
        budget_cap = np.array([t.chunk_batch_grid[-1] for t in tables])[table_index]
        max_batch = np.minimum(max_batch, np.floor(budget_cap))
        chunk_tokens = np.array([t.chunk_tokens for t in tables])[table_index]
    else:
        alone = stack(tables, "prefill_s")[table_index]
        fixed_p = stack(tables, "prefill_fixed_s")[table_index]

    def packed_parts(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(alone [C, S], shareable part [C, S]) at decode batch ``b``."""
        if not chunked:
            return alone, fixed_p
        return (
            chunked_rows(tables, table_index, b, "chunked_prefill_s"),
            chunked_rows(tables, table_index, b, "chunked_fixed_s"),
        )

    # Prompts per step: those that queued behind busy prefill work (k_q, model.serving.packing's fixed
    # point, at the unpacked decode batch when chunked) plus those that arrived during the decode
    # step in progress (mean residual t_step / 2), on the batch grid, within the step's cap (the
    # engine's prefill token cap). Chunked: 1 - 1 / k is the probability that a prompt waits when a
    # prompt's last iteration is scheduled (N waiting geometric of mean k - 1, as in
    # model.serving.packing.step_companions), which is when the engine fills that iteration's room
    # with it (Sarathi-Serve's stall-free batching, Agrawal et al. OSDI 2024, sec. 4.2: decodes, then
    # the prompt in prefill, then new prompts up to the token budget; vLLM docs, "Optimization and
    # Tuning", Chunked Prefill: pending prefills are chunked into the budget the decodes leave).
    # Uncapped: however few prompts one iteration holds, the room is filled whenever one waits
    # (docs/validation.md, "Session 11: chunked prefill capacity").
    step_grid = dec * emitted[:, None]
    if chunked:
        sol, _tau, _mix, _cap = _decode_batch(
            scn, tables, table_index, rate_r, max_batch, np.zeros((n, len(BATCH_GRID))), None
        )
        b_q = sol.batch
        cap_grid = np.full(step_grid.shape, float(FILL_MAX_PROMPTS))
        prefill_means = None
    else:
        b_q = np.zeros(n)
        cap_grid = np.broadcast_to(prompts_per_step(scn, scn.engine.prefill_token_cap), step_grid.shape)
        prefill_means = (alone.mean(axis=1), fixed_p.mean(axis=1))
    own, shareable = packed_parts(b_q)
    k_q = prefill_batch(
        scn, rate, replicas, own, shareable, interp_rows(b_q, BATCH_GRID, cap_grid), router=scn.engine.router
    )
    k_grid = np.clip(k_q[:, None] + rate_r[:, None] * step_grid / 2.0, 1.0, cap_grid)
    sol, tau, mix_grid, max_batch = _decode_batch(
        scn, tables, table_index, rate_r, max_batch, 1.0 - 1.0 / k_grid, prefill_means
    )
    b = sol.batch
    k = interp_rows(b, BATCH_GRID, k_grid)
    packed = 1.0 - 1.0 / k
    t_dec = interp_rows(b, BATCH_GRID, dec)
    tau_cap = interp_rows(max_batch, BATCH_GRID, tau)
    adm = admission_queue(rate_r, eo, scv_o, max_batch, tau_cap)
    service, shareable = packed_parts(b)
    # A prompt's share of its server: its time alone less the shared part's (1 - 1/k).
    share = service - shareable * packed[:, None]
    es, es2, scv = moments(share)
    busy = rate_r * es

    if chunked:
        t_mix = interp_rows(b, BATCH_GRID, np.where(np.isfinite(mix_grid), mix_grid, 0.0))
        per_token = interp_rows(b, BATCH_GRID, np.where(np.isfinite(tau), tau, 0.0))
        # One prompt's stall on a running request: its share of the mixed iterations' extra time over
        # plain decode steps, share - chunks x t_dec (its iterations less the packed part of its last).
        chunk_room = np.maximum(chunk_tokens - b, 1.0)
        chunks = np.ceil(uncached[None, :] / chunk_room[:, None])
        chunks = chunks - chunked_rows(tables, table_index, b, "chunked_free") * packed[:, None]
        step = t_dec * emitted  # one decode iteration
        stalls = np.maximum(share - chunks * step[:, None], 0.0)
        residual = np.zeros(n)
        max_itl = np.maximum(t_mix, t_dec)
        per_event = np.ones(n)
    else:
        per_token = shared_token_time_s(t_dec, busy)
        # A running request stalls once per packed step of k prompts: F + sum of their variable parts
        # (the sampled prompt's time alone plus k - 1 others' variable parts).
        stalls = service + ((k - 1.0) * (service - shareable).mean(axis=1))[:, None]
        # A prompt waits for the decode step in progress to end: mean residual t_dec / 2.
        residual = t_dec / 2.0
        max_itl = t_dec + np.quantile(stalls, 0.99, axis=1)
        per_event = 1.0 / k
    # the stalls' share of a running request's decode time, 1 - t_dec / tau: a stall lengthens the
    # decode and so draws more stalls (busy-period spread, model.queueing.latency)
    stall_load = np.where(
        np.isfinite(per_token) & (per_token > 0), 1.0 - t_dec / np.where(per_token > 0, per_token, 1.0), 0.0
    )
    # The queue over shares counts the prompts served with it; its own compute is its time alone. The
    # engine's router decides whether the replicas share one queue or each keeps its own
    # (model.queueing.routing).
    router = scn.engine.router
    queue = routed_wait(router, rate, np.maximum(es, 1e-12), scv, replicas, scn.arrival_scv)
    # The plain decode step fluctuates with the replica's batch (model.queueing.decode_spread), whose
    # sequences leave at the per-token time with prefill in it, tau; the stalls come on top.
    occ = base_step_occupancy(rate_r * eo, BATCH_GRID, tau, dec, max_batch, b, replicas)
    # Stalls (prefill-first; chunked replicas have none, their TPOT excess is the mixed share below):
    # the prompts that join the request's replica from its own packed step (those arriving while it
    # waited share it) to the end of its plain decode time ((O - 1) E_q[tau] with the cohort, set below:
    # decode_exposure), as the router sends them (model.queueing.routing.replica_arrivals; a levelling
    # router's exposure also scales the stall load), one stall per packed step
    # (model.queueing.stall_count.stall_events).
    # The router levels every request a replica holds (waiting, in prefill and decoding: the load
    # vLLM's router counts, model.sim.colocated.Replica.load), so its count is the decode occupancy
    # plus the requests before their first token, lambda_r (W + E[prefill time]) per replica (Little).
    wait_s = np.where(np.isfinite(queue.mean_wait_s), queue.mean_wait_s, 0.0)
    before_first = rate_r * (wait_s + service.mean(axis=1))
    if chunked:
        exposure = stall_exposure(router, occ.batch, occ.prob, replicas, before_first)
        stall_load = exposure * stall_load
        cluster_load = stall_load
    else:
        # the requests before their first token as a Poisson count, not a mean (light_exposure); the
        # own packed step at the chain's factor (own_step); clusters that follow departures behind a
        # levelling router at rho / (R (1 - u)), the mean kept (routing.follow_on_load)
        exposure = spread_exposure(router, occ.batch, occ.prob, replicas, before_first)
        stall_load = exposure * stall_load
        cluster_load = follow_on_load(router, stall_load, busy, replicas)
    # a saturated KV cache must hold the decodes and the prompts in prefill (model.serving.kv_saturation)
    below_cap = sol.below_cap & adm.stable & saturated_holds(scn, tables, table_index, rate_r, b, service)
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
    # + client overhead (model.hardware.overheads); prefill-first: the prompts packed behind it in its
    # step end with it (model.serving.packing)
    behind = np.zeros((n, 1)) if chunked else packed_behind_s(k, service, shareable)
    # the KV-admission wait enters the TTFT law as its own atom + exponential tail (LatencyModel)
    fixed = service + behind + (residual + scn.engine.request_s)[:, None]
    # Decode cohort (colocated_base.cohort_mean / cohort_spread, routing.cohort_exposure): W + 2 E[step]
    # of arrivals over the frozen share (prefill-first 1; chunked 1 - t_dec / t_mix). Chunked reads a
    # step at its replica's whole batch (replica_split). Prefill-first: its wait's left-behind stalls.
    frozen = frozen_share(t_dec, t_mix) if chunked else 1.0
    share = cohort_exposure(router, replicas)
    cohort = cohort_mean(
        rate_r * share, wait_s, (service if chunked else stalls).mean(axis=1), frozen, out_tokens
    )
    base = replica_split(occ, BATCH_GRID, dec) if chunked else occ
    spread = cohort_spread(base, cohort, BATCH_GRID, dec, out_tokens, whole=chunked)
    if chunked:  # no stall clusters: the mixed share below carries the TPOT excess
        events = np.zeros((n, out_tokens.size))
    else:  # plain decode at the per-token base with the cohort (decode_exposure)
        decode_s = plain_decode_s(spread.mean_s, out_tokens)
        joins = prefill_first_arrivals(
            router, rate_r, stalls, decode_s, replicas, exposure, occ.batch, occ.prob
        )
        events = stall_events(joins, per_event, stall_load)
        # a slow decode window draws more stalls: the deviation enters TPOT 1 + r times
        dec_stall = stall_events(
            replica_arrivals(router, rate_r, decode_s, replicas, exposure), per_event, stall_load
        )
        spread = amplified_spread(spread, stall_gain(dec_stall * stalls.mean(axis=1)[:, None], decode_s))
    wait_stalls = None if chunked else wait_stall_rows(scn, rate_r, share, wait_s, t_dec * emitted, k)
    mixed = None
    if chunked:
        # The TPOT above the plain step comes from the mixed share F of the request's iterations
        # (model.queueing.mixed_share), in place of the stall clusters.
        # prompts in system while the replica is busy, L / u (L = lambda_r (W + E[S]), Little)
        in_busy = np.where(
            busy > 0,
            rate_r
            * (np.where(np.isfinite(queue.mean_wait_s), queue.mean_wait_s, 0.0) + es)
            / np.maximum(busy, 1e-12),
            1.0,
        )
        t_full = busy_iteration_s(scn, tables, table_index, b, in_busy)
        # the prompts that join a running request's replica: exposure x lambda_r (the router levels them)
        mixed = _mixed_share(
            rate_r * exposure,
            (es, es2),
            (step, t_mix * emitted, t_full),
            emitted,
            out_tokens,
            exposure / replicas,
            # joins follow departures behind a levelling router: the busy period thins (chov16)
            lambda u: chunked_follow_on_load(router, u, step / (t_mix * emitted), replicas),
            # the prompts queued at the window's start raise F and the batch together (chov14)
            start_queue_moments(rate_r * exposure, prob, cond, (es, es2))[1],
        )
    # incremental KV with pre-emption (engine policy "recompute" / "swap"): the resumes' TPOT share
    resume = colocated_resume(scn, tables, table_index, (rate_r, tau, max_batch, b), service, spread.mean_s)
    latency = LatencyModel(
        wait_prob=prob,
        wait_cond_mean_s=cond,
        fixed_s=fixed,
        tpot_base_s=spread.mean_s if resume is None else spread.mean_s + resume.tpot_extra_s,
        stall_events=events,
        stall_sizes_s=np.sort(stalls, axis=1),
        output_tokens=out_tokens,
        stable=stable,
        spread=spread,
        stall_load=cluster_load,
        admit_prob=adm.prob,
        admit_cond_mean_s=adm.cond_mean_s,
        mixed=mixed,
        wait_stalls=wait_stalls,
    )
    zeros = np.zeros(n)
    decode_busy = np.minimum(busy + (1.0 - np.minimum(busy, 1.0)) * busy_fraction(b), 1.0)
    return StyleResult(
        latency=latency,
        stable=stable,
        queue_wait_mean_s=np.where(stable, queue.mean_wait_s, np.inf),
        prefill_mean_s=service.mean(axis=1) + residual,
        transfer_mean_s=zeros,
        link_wait_mean_s=zeros,
        admission_wait_mean_s=adm.mean_s,
        batch=b,
        max_batch=max_batch,
        tpot_mean_s=latency.mean_tpot_s(),
        prefill_busy=np.minimum(busy, 1.0),
        decode_busy=decode_busy,
        link_utilisation=zeros,
        kv_bytes_per_request=np.full(n, float(np.mean(scn.kv_bytes_per_request(scn.prompt_tokens)))),
        unstable_reason=reasons,
        max_itl_s=np.where(stable, max_itl, np.inf),
        preemptions_per_request=zeros if resume is None else resume.per_request,
    )
