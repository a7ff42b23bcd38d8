"""A colocated replica's decode-only base law: its batch, the level fleet's whole batches, the cohort.

The per-request TPOT base of a colocated replica is the plain decode step t_dec(N) averaged over the
request's own tokens (model.queueing.decode_spread, items 1-3, on the replica's birth-death batch with
the prefill interference in the per-token time). This module builds that batch law for the colocated
styles: :func:`base_step_occupancy` (the step at each batch), :func:`replica_split` (chunked: whole
batches of a level fleet) and :func:`cohort_spread` (prefill-first: the prompts whose prefills run
back to back with the request's own start decoding beside it for its whole window; docs/model.md,
"Prefill-first decode cohort").
"""

from __future__ import annotations

import numpy as np
from scipy.stats import poisson

from model.queueing.decode_batch import interp_rows, whole_rows
from model.queueing.decode_spread import Occupancy, TpotSpread, occupancy, token_weights, tpot_spread

# Companions beyond the request's own cohort count tabulated (j = 0 .. COHORT_MAX; the Poisson tail
# above is put at COHORT_MAX: P(C > 4) < 0.4% for a mean c <= 1, the prefill-first cells' range).
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


def cohort_spread(
    occ: Occupancy, companions: np.ndarray, grid: np.ndarray, step_s: np.ndarray, output_tokens: np.ndarray
) -> TpotSpread:
    """The base's TPOT law of a prefill-first replica with the request's decode cohort (docs/model.md,
    "Prefill-first decode cohort").

    A prefill-first engine prefills every waiting prompt before the next decode step, so the prompts
    that reach the request's replica while it waits or is prefilled, and those whose own prefill was
    in progress when it arrived, start decoding at the same decode step as the request (a cluster of
    births, each prefill freezing the batch while the next prompts queue) and share its batch for its
    whole window: C companions, Poisson of mean ``companions`` c [C] (model.serving.colocated: the
    replica's arrivals over the wait and twice the packed step, scaled by
    model.queueing.routing.cohort_exposure). The
    birth-death batch (model.queueing.decode_spread, items 1-2) takes its births one at a time, so
    its per-token law q of the batch N lacks them; the request's batch is N + C, C independent of N
    (Poisson arrivals in disjoint intervals; Kingman, "Poisson Processes", 1993, ch. 2), its per-token
    law the convolution q * Poisson(c) (Papoulis, sec. 6-2). C does not average out over the window
    (the cohort stays beside the request from its first decode step: an M^X/G/inf batch arrival,
    whose members overlap fully; Takacs 1962, ch. 3), N does by the variance factor g_i of item 3, so
    the request's time-average batch has variance g_i V + c (V = Var_q[N]) against V + c per token,
    and its shrink is sqrt((g_i V + c) / (V + c)): the law's shape that of the convolution, its
    variance both parts'. The step at N + j is read as :func:`base_step_occupancy` reads it. The
    Poisson tail above COHORT_MAX companions is put at COHORT_MAX."""
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
    step = np.maximum.accumulate(interp_rows(np.maximum(batch, 1.0), grid, step_s), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        # the time law whose per-token weights n p(n) / t(n) (decode_spread.tpot_spread) are q * Poisson
        prob = np.where(batch > 0, weight * step / np.where(batch > 0, batch, 1.0), 0.0)
    spread = tpot_spread(Occupancy(batch, prob, step, occ.elasticity), output_tokens)
    g = spread.shrink**2
    total = (var_n + c)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        g_cohort = np.where(total > 0, (g * var_n[:, None] + c[:, None]) / np.where(total > 0, total, 1.0), g)
    shrink = np.sqrt(np.clip(g_cohort, 0.0, 1.0))
    inv = 1.0 / np.maximum(shrink, 1e-12)
    return TpotSpread(spread.mean_s, spread.dev_s, spread.cdf, shrink, inv, spread.step_s, spread.table)
