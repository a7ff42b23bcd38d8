"""A colocated replica's decode-only base law: its batch, the level fleet's whole batches, the cohort.

The per-request TPOT base of a colocated replica is the plain decode step t_dec(N) averaged over the
request's own tokens (model.queueing.decode_spread, items 1-3, on the replica's birth-death batch with
the prefill interference in the per-token time). This module builds that batch law for the colocated
styles: :func:`base_step_occupancy` (the step at each batch), :func:`replica_split` (chunked: whole
batches of a level fleet) and :func:`cohort_spread` (the prompts that reach the request's replica
between its arrival and its first decode step decode beside it: prefill-first from its first step for
its whole window, chunked from their own last chunk; docs/model.md, "Prefill-first decode cohort",
and docs/session13/cohort15.md for the chunked case and the overlap), its mean
:func:`cohort_mean` thinned by the members' overlap :func:`overlap_weight`.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import poisson

from model.queueing.decode_batch import interp_rows, whole_rows
from model.queueing.decode_spread import Occupancy, TpotSpread, occupancy, token_weights, tpot_spread

# Companions beyond the request's own cohort count tabulated (j = 0 .. COHORT_MAX; the Poisson tail
# above is put at COHORT_MAX: P(C > 4) < 0.4% for a mean c <= 1, the grid's range: at most 0.67,
# grid cell 25's chunked replica).
COHORT_MAX = 4


def base_step_occupancy(
    demand_tokens_per_s: np.ndarray,
    grid: np.ndarray,
    per_token_s: np.ndarray,
    step_s: np.ndarray,
    cap: np.ndarray,
    mean_batch: np.ndarray,
    instances: np.ndarray,
) -> Occupancy:
    """A colocated replica's batch law with the plain decode step t_dec(N) (no prefill in it) at each
    support point: the occupancy follows the per-token time *with* prefill interference
    ``per_token_s`` (it sets how fast sequences leave, item 1), the step times are those of the decode
    step ``step_s`` at the same batches (the prefill stalls are the latency model's separate term).
    ``instances`` replicas behind the least-loaded router (the simulator's rule keeps them level as
    for a decode pool). Its support also gives the router's stall exposure
    (model.queueing.routing.stall_exposure); :func:`tpot_spread` of it is the base's fluctuation.
    Weighting each batch by n p(n) / tau(n) with tau or with t_dec is the same law when the prefill
    share 1 - t_dec / tau does not vary across the window (prefill-first); with chunking it is the
    step-level approximation."""
    # past the last batch prefill keeps up with (tau = inf; the cap stays below it) hold tau flat
    finite = np.isfinite(per_token_s)
    top = np.max(np.where(finite, per_token_s, 0.0), axis=1, keepdims=True)
    tau = np.where(finite, per_token_s, np.where(top > 0, top, 1.0))
    occ = occupancy(demand_tokens_per_s, grid, tau, cap, mean_batch, instances)
    step = interp_rows(np.maximum(occ.batch, 1.0), grid, step_s)
    return Occupancy(occ.batch, occ.prob, step, occ.elasticity)


def replica_split(occ: Occupancy, grid: np.ndarray, step_s: np.ndarray) -> Occupancy:
    """The batch law a sequence of a level fleet sees, in whole batches (chunked; session 11): at the
    per-replica batch x = N / R of ``occ`` a level fleet has k = floor(x) sequences on a fraction
    1 - f of its replicas and k + 1 on f = x - k (model.queueing.routing.pair_moment), so each point
    splits into whole batches k and k + 1 with probabilities P (1 - f) and P f per replica, whose
    per-token weights n p(n) / t(n) (:func:`tpot_spread`) are the fleet's sequences at each: a
    sequence's step is t(k) or t(k + 1), not their average, the table t(ceil g) read at whole
    batches (model.queueing.decode_batch.whole_rows). A batch below one is a batch-1 step."""
    x = np.maximum(np.asarray(occ.batch, dtype=float), 0.0)
    k = np.floor(x)
    f = x - k
    batch = np.concatenate([k, k + 1.0], axis=1)
    prob = np.concatenate([occ.prob * (1.0 - f), occ.prob * f], axis=1)
    order = np.argsort(batch, axis=1, kind="stable")
    batch = np.take_along_axis(batch, order, axis=1)
    prob = np.take_along_axis(prob, order, axis=1)
    step = whole_rows(np.maximum(batch, 1.0), grid, step_s)
    return Occupancy(batch, prob, step, occ.elasticity)


def overlap_weight(output_tokens: np.ndarray) -> float:
    """The share of a request's decode window a cohort member spends beside it, E[min(D, D')] / E[D]
    with D = O - 1, D' = O' - 1 the decode steps of the request and of the member, independent draws
    of the workload's output sample (the members start decoding with the request, so one stays beside
    it for min(D, D') of its D steps; a member's weight in the request's per-token batch, summed over
    the requests' tokens, is E[min(D, D')] / E[D]). On the sample's empirical law, sorted ascending
    d_(1) <= .. <= d_(m): E[min(D, D')] = sum_k (2 (m - k) + 1) d_(k) / m^2 (the ordered pairs whose
    smaller member is the k-th: (k, k) and 2 (m - k) others; order statistics, David & Nagaraja,
    "Order Statistics", 3rd ed., 2003, sec. 2.1). Equal outputs give 1; a request with no decode step
    (O = 1 throughout) 1."""
    d = np.sort(np.maximum(np.asarray(output_tokens, dtype=float).ravel() - 1.0, 0.0))
    m = d.size
    mean = float(d.mean()) if m else 0.0
    if mean <= 0:
        return 1.0
    k = np.arange(1, m + 1, dtype=float)
    return float(((2.0 * (m - k) + 1.0) * d).sum() / (m * m) / mean)


def frozen_share(decode_step_s: np.ndarray, mixed_step_s: np.ndarray) -> np.ndarray:
    """[C] the share of a chunked prefill's time that the running decodes' token clock loses,
    1 - t_dec / t_mix (t_dec the decode-only iteration, t_mix the mean mixed iteration, each one token
    for every running decode). The birth-death batch (model.queueing.decode_spread) takes births at
    lambda tau per token, evenly in the token clock; a mixed iteration of t_mix holds lambda t_mix
    arrivals in one token, lambda (t_mix - t_dec) of them beyond those an iteration at the decode
    step holds, and a prompt that arrives during a prefill starts decoding a few tokens after it (its
    own chunks), so the excess births of a request's prefill span cluster at its first decode tokens
    like the births of a prefill-first step, which freezes the batch for all of its time (t_dec / t_mix
    = 0: share 1). A prefill that runs beside the decodes without slowing them (share 0) leaves the
    birth-death law exact: benchmarks/cohort_mc.py's separate prefill server (docs/validation.md,
    session 12). A mixed iteration no longer than the decode step (or none: t_mix = 0) gives 0."""
    dec = np.asarray(decode_step_s, dtype=float)
    mix = np.asarray(mixed_step_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(mix > 0, 1.0 - dec / np.where(mix > 0, mix, 1.0), 0.0)
    return np.clip(share, 0.0, 1.0)


def cohort_mean(
    rate_s: np.ndarray,
    wait_s: np.ndarray,
    step_s: np.ndarray,
    frozen: np.ndarray | float,
    output_tokens: np.ndarray,
) -> np.ndarray:
    """[C] the mean cohort c of :func:`cohort_spread`, lambda x (W + 2 E[step]) x frozen x w.

    The prompts joining the request's replica at ``rate_s`` (lambda_r x the router's cohort share,
    model.queueing.routing.cohort_exposure) while it waits (mean ``wait_s`` W) and while its own
    prefill runs (mean ``step_s``: prefill-first its packed step, chunked its chunked prefill S_c),
    plus the prompt whose prefill was in progress when it arrived (lambda E[step], PASTA, Wolff
    1982: it starts decoding just before the request), a Poisson count of mean lambda x the
    interval's mean length (Kingman, "Poisson Processes", 1993, sec. 2.1; Wald's identity for the
    random length, independent of the later arrivals), over the ``frozen`` share of that time that
    the decodes' token clock loses (:func:`frozen_share`; prefill-first 1), each member kept with the
    probability that it still decodes at a uniform token of the request's window,
    :func:`overlap_weight` w (the thinning theorem, Kingman sec. 5.1: the kept members are Poisson
    of mean c w)."""
    wait = np.where(np.isfinite(wait_s), np.maximum(wait_s, 0.0), 0.0)
    span = (wait + 2.0 * np.maximum(np.asarray(step_s, dtype=float), 0.0)) * np.asarray(frozen, dtype=float)
    return np.maximum(np.asarray(rate_s, dtype=float), 0.0) * span * overlap_weight(output_tokens)


def cluster_dispersion(companions: np.ndarray) -> np.ndarray:
    """[C] the index of dispersion Var N / E[N] of the other requests' batch when births come in the
    clusters the cohort describes: 1 + c, c the mean cohort (:func:`cohort_mean`).

    Births arrive in clusters of X prompts (those that start decoding together), the clusters as a
    Poisson process; the number in an infinite-server system with batch arrivals (M^X/G/inf, members
    served independently) has E[N] = lambda_b E[X] E[S] and Var N = E[N] + lambda_b E[X (X - 1)]
    E[min(S, S')] (Liu & Templeton, "Autocorrelations in infinite server batch arrival queues",
    Queueing Systems 14, 1993, eq. 2.5; Takacs 1962 ch. 3), so Var N / E[N] = 1 + (E[X (X - 1)] /
    E[X]) E[min(S, S')] / E[S]. A random member's cluster holds E[X (X - 1)] / E[X] others (the
    size-biased cluster less the member itself: Feller vol. 2, sec. I.4, the inspection paradox), the
    unthinned cohort mean, and E[min(S, S')] / E[S] is :func:`overlap_weight` w, so the index is
    1 + c with c = c_0 w, :func:`cohort_mean`'s c. On benchmarks/cohort_mc.py with a step flat in the
    batch (no feedback through the step) the per-token variance is 0.591, the cohort law with
    N Poisson 0.549 and with N's variance times 1 + c 0.575 (docs/session13/cohort16.md)."""
    return 1.0 + np.maximum(np.asarray(companions, dtype=float), 0.0)


def cohort_spread(
    occ: Occupancy,
    companions: np.ndarray,
    grid: np.ndarray,
    step_s: np.ndarray,
    output_tokens: np.ndarray,
    whole: bool = False,
) -> TpotSpread:
    """The base's TPOT law of a colocated replica with the request's decode cohort (docs/model.md,
    "Prefill-first decode cohort"; docs/session13/cohort15.md).

    A prefill-first engine prefills every waiting prompt before the next decode step, so the prompts
    that reach the request's replica while it waits or is prefilled, and those whose own prefill was
    in progress when it arrived, start decoding at the same decode step as the request (a cluster of
    births, each prefill freezing the batch while the next prompts queue) and share its batch for its
    whole window, each while it still decodes: C companions, Poisson of mean ``companions`` c [C]
    (:func:`cohort_mean`: the replica's arrivals over the wait and twice the packed step, scaled by
    model.queueing.routing.cohort_exposure, thinned by the members' overlap). The
    birth-death batch (model.queueing.decode_spread, items 1-2) takes its births one at a time, so
    its per-token law q of the batch N lacks them; the request's batch is N + C, C independent of N
    (Poisson arrivals in disjoint intervals; Kingman, "Poisson Processes", 1993, ch. 2), its per-token
    law the convolution q * Poisson(c) (Papoulis, sec. 6-2). C does not average out over the window
    (the cohort stays beside the request from its first decode step: an M^X/G/inf batch arrival,
    Takacs 1962, ch. 3, whose members leave independently, at min(D, D') of the request's D steps;
    taken with the thinned mean c, whose per-token presence E[min(D, D')] / E[D] the window average
    keeps, not averaged), N does by the variance factor g_i of item 3, so
    the request's time-average batch has variance g_i V + c (V = Var_q[N]) against V + c per token,
    and its shrink is sqrt((g_i V + c) / (V + c)): the law's shape that of the convolution, its
    variance both parts'. The other requests' births come in the same clusters (each arrival's
    cohort is formed as the request's is), so their count N is an M^X/G/inf count, whose variance is
    the Poisson one times the index of dispersion 1 + c (:func:`cluster_dispersion`): the window
    average's variance is g_i V (1 + c) + c, its shrink sqrt((g_i V (1 + c) + c) / (V + c)), at most 1
    (the law's shape stays the convolution's; the spread's table assumes shrink <= 1).
    The step at N + j is read as :func:`base_step_occupancy` reads it, or with
    ``whole`` at whole batches as :func:`replica_split` does (chunked: ``occ`` its whole-batch law).
    The Poisson tail above COHORT_MAX companions is put at COHORT_MAX.

    Chunked (session 13): a chunked replica serves its queue first-come-first-served, chunking the
    prompts into the room the decodes leave (Sarathi-Serve, Agrawal et al. OSDI 2024, sec. 4.2), so
    the prompts that reach the replica during the request's wait and its own chunked prefill are
    still queued or in their chunks at its first decode step and start decoding right after it, each
    after its own chunks (short beside the decode window): the same cluster of births, joined a few
    iterations late rather than at the same step, as far as the mixed iterations stop the decodes'
    token clock: c is lambda_r x share x (W + 2 E[S_c]) x (1 - t_dec / t_mix), S_c the chunked
    prefill span (:func:`cohort_mean`, :func:`frozen_share`; model.serving.colocated)."""
    c = np.maximum(np.asarray(companions, dtype=float), 0.0)
    _, q, _ = token_weights(occ)
    mean_n = (q * occ.batch).sum(axis=1)
    var_n = np.maximum((q * occ.batch**2).sum(axis=1) - mean_n**2, 0.0)
    j = np.arange(COHORT_MAX + 1, dtype=float)
    pj = poisson.pmf(j[None, :], c[:, None])
    pj[:, -1] += np.maximum(1.0 - pj.sum(axis=1), 0.0)
    rows = len(c)
    batch = (occ.batch[:, :, None] + j[None, None, :]).reshape(rows, -1)
    weight = (q[:, :, None] * pj[:, None, :]).reshape(rows, -1)
    order = np.argsort(batch, axis=1, kind="stable")
    batch = np.take_along_axis(batch, order, axis=1)
    weight = np.take_along_axis(weight, order, axis=1)
    read = whole_rows if whole else interp_rows
    step = np.maximum.accumulate(read(np.maximum(batch, 1.0), grid, step_s), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        # the time law whose per-token weights n p(n) / t(n) (decode_spread.tpot_spread) are q * Poisson
        prob = np.where(batch > 0, weight * step / np.where(batch > 0, batch, 1.0), 0.0)
    spread = tpot_spread(Occupancy(batch, prob, step, occ.elasticity), output_tokens)
    g = spread.shrink**2
    total = (var_n + c)[:, None]
    others = (var_n * cluster_dispersion(c))[:, None]  # the other requests' batch, clustered too
    with np.errstate(divide="ignore", invalid="ignore"):
        g_cohort = np.where(total > 0, (g * others + c[:, None]) / np.where(total > 0, total, 1.0), g)
    shrink = np.sqrt(np.clip(g_cohort, 0.0, 1.0))
    inv = 1.0 / np.maximum(shrink, 1e-12)
    return TpotSpread(spread.mean_s, spread.dev_s, spread.cdf, shrink, inv, spread.step_s, spread.table)
