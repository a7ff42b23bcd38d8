"""Per-request latency distributions, percentiles and SLO attainment from analytical components.

Each candidate configuration c is described by
- a random queue wait W_c shared by all its requests: P(W > t) = p_c exp(-t / m_c) (the
  exponential-tail form of model.queueing, exact for M/M/c), and a fixed latency d_ci per sampled
  request i (prefill compute, exposed KV transfer, link and admission waits), so
  TTFT_ci = W_c + d_ci; optionally a second, independent wait A_c of the same form,
  P(A > t) = q_c exp(-t / a_c) (a colocated replica's KV-admission queue,
  model.queueing.decode_batch.admission_tail), so TTFT_ci = W_c + A_c + d_ci. The sum of the two
  atom-plus-exponential waits has the tail (convolution of independent variables, Papoulis, sec.
  6-2; the hypoexponential law of two exponential stages, Ross, "Introduction to Probability
  Models", sec. 5.2.4)

      P(W + A > t) = p (1 - q) e^{-t/m} + q (1 - p) e^{-t/a} + p q (m e^{-t/m} - a e^{-t/a}) / (m - a)

  ((1 + t / m) e^{-t/m} for the last factor when m = a; model.queueing.decode_batch.two_wait_exceedance);
- a TPOT made of a base step time b_c plus stalls: during its decode a request meets a Poisson
  number N (mean n_ci) of stall events, each the extra time one other prompt's prefill adds to the
  decode steps (the whole prefill when it pre-empts decodes; the slowdown of its mixed iterations
  with chunking). The stall total spread over the O_i - 1 token gaps gives TPOT_ci. One stall
  (N = 1) takes the stall-size distribution itself (the sampled per-prompt values, exact); two or
  more are approximated by a gamma with the compound-Poisson moments conditioned on N >= 2
  (Ross, "Introduction to Probability Models", sec. 5.3.3: E[sum] = E[N] s1,
  Var[sum] = E[N] Var[S] + Var[N] s1^2). Short outputs hit by one long prefill make the TPOT tail,
  which is why the single-stall term is kept exact.

Stalls feed back (``stall_load`` rho, the fraction of a running request's decode time that other
prompts' stalls take): a stall lengthens the request's decode, and prompts arriving in that extra
time stall it again, so its decode is the busy period of an M/G/1 queue started by its own work
x = (O - 1) b, with the stalls as the jobs. Its stall total has mean lambda x E[s] / (1 - rho) (the
expected count above times E[s]) and variance lambda x E[s^2] / (1 - rho)^3 (busy period started
by work x: Takacs 1962, *Introduction to the Theory of Queues*, ch. 2; Kleinrock 1975, *Queueing
Systems* vol. 1, sec. 5.10, "delay busy period"), 1 / (1 - rho)^2 times the plain compound Poisson
variance. It is modelled as N0 ~ Poisson(n (1 - rho)) primary events each opening a cluster of
stalls with the busy period's first two moments, E[B] = E[s] / (1 - rho) and
E[B^2] = E[s^2] / (1 - rho)^3 (one cluster: the sampled sizes scaled by 1 / (1 - rho)). Behind a
levelling router (R > 1) ``stall_load`` is the clusters' follow-on load rho / (R (1 - u)), the count's
mean kept at rho's (model.queueing.routing.follow_on_load: the joins follow the departures).

With a decode-batch spread (model.queueing.decode_spread) the base is random per request:
TPOT_ci = b_c + s_ci D_c (+ the stall total / (O_i - 1) with stalls), D_c the per-token time's
deviation from its mean under the batch's fluctuation and s_ci the shrink from averaging over the
request's own tokens. The base and the stalls are taken independent (the batch a request decodes in
and the prompts arriving during its decode), so the TPOT law is their convolution
P(b + sD + Y <= x) = E_D[P(Y <= x - b - sD)] (Papoulis, "Probability, Random Variables and
Stochastic Processes", sec. 6-2, the density of a sum of independent variables): the no-stall term
is the spread's law itself (exact); the one-stall term (exact sizes) is averaged over SPREAD_STRATA
equiprobable strata of D (a midpoint quadrature of that integral); the two-or-more-stall gamma takes
the sum's first two moments, its variance plus (O - 1)^2 s^2 Var[D] (moment matching, as for the
compound-Poisson total itself).

Stalls from the request's own TTFT and the router (model.queueing.stall_count.stall_events): the
prompts that arrive at the request's replica while it decodes stall it; those that arrived while it
was prefilled are still queued at its first token and are served first thing in its decode, so they
count too (Poisson arrivals in a fixed interval; PASTA, Wolff 1982). A FCFS departure leaves behind
exactly the customers that arrived during its time in system (Kleinrock 1975, vol. 1, ch. 5), so the
prompts that arrived during its queue wait are queued too; with chunked prefill they are offset, in
the mean, by the prompts that arrive during the last stretch of its decode and are still queued when
it ends (a queue of mean lambda_r W at a random time, Little 1961): a prefill-first replica serves
every prompt at the next iteration, so its window is the request's packed step (those that arrived
while it waited share it). How many of the fleet's arrivals join its replica in that window plus its
plain decode time is the router's (model.queueing.routing.replica_arrivals): a Poisson share
lambda / R (random), every R-th after its own (round-robin), or the share a levelling router leaves a running
request (least-loaded: model.queueing.routing.stall_exposure, which also scales the stall load).

Prefill-first (``wait_stalls``, model.queueing.stall_count): the prompts that reached the replica
during the request's queue wait and did not fit into its step are served first thing in its decode;
their count is Poisson given the wait, mixed over the wait's atom-plus-exponential law (zero-inflated
geometric), added to the Poisson primaries before the zero / one / two-or-more split.

Chunked replicas (``mixed``, model.queueing.mixed_share) replace the stalls by the mixed share F of
the request's iterations: TPOT = b + s D + excess(F), F ~ Beta per request, its law averaged over
the MIXED_STRATA_EDGES strata of D, F's law given D's stratum.

Disaggregated terms (model.queueing.disaggregated_terms): the join residual R of a decode instance
adds R / (O_i - 1) to TPOT (``join_busy`` / ``join_step_s``), and the prompts packed with a waiting
prompt in its prefill step add to its TTFT with its own wait (``packed``, PackedStep).

Attainment is the sample mean of P(TTFT_ci <= T) P(TPOT_ci <= P) (TTFT and TPOT treated as
independent); a percentile is found by bisection on the sample-mean CDF.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.special import gammainc

from model.queueing.decode_batch import two_wait_exceedance
from model.queueing.decode_spread import TpotSpread
from model.queueing.disaggregated_terms import LawRead, PackedStep, join_residual_bounds, join_residual_cdf
from model.queueing.environment import WaitLevels
from model.queueing.mixed_share import MixedShare, MixedTpot, distinct_requests
from model.queueing.percentile_bisection import bisect_quantile, masked_mean, row_extreme
from model.queueing.stall_count import count_law, free_fraction, wait_stall_mean

SPREAD_STRATA = 2
"""Equiprobable strata of the decode-batch deviation D over which the one-stall term is averaged (a
midpoint rule: D at its quartiles 1/4 and 3/4). The no-stall term, which carries the tail of D,
is exact; on the broad grid's cells 4 strata moved no planned goodput by more than 4.3% and left
every cell on the same side of the [0.9, 1.1] band, at ~10% more planner time per stratum."""
MIXED_STRATA_EDGES = (0.0, 0.5, 0.75, 0.875, 0.9375, 1.0)
"""Probability edges of the strata of D over which the chunked mixed-share law is averaged (D at
each stratum's conditional mean, decode_spread.TpotSpread.strata_at, weighted; halved towards the
top to read D's tail, docs/validation.md session 11), F given D's stratum
(model.queueing.mixed_share.MixedShare.given). One Beta CDF per stratum."""


def empirical_cdf_rows(sorted_rows: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise empirical CDF: fraction of ``sorted_rows[c]`` <= y[c, :], for every row c at once.

    Rows are offset so one global ``searchsorted`` serves all of them.
    """
    c, k = sorted_rows.shape
    y = np.broadcast_to(np.asarray(y, dtype=float), (c, np.shape(y)[-1] if np.ndim(y) > 1 else 1))
    finite_max = max(float(np.max(sorted_rows, initial=0.0)), float(np.max(np.where(np.isfinite(y), y, 0.0))))
    span = finite_max + 1.0
    offsets = np.arange(c, dtype=float)[:, None] * span * 2.0
    flat = (sorted_rows + offsets).ravel()
    q = np.clip(np.where(np.isfinite(y), y, span), -span * 0.5, span) + offsets
    idx = np.searchsorted(flat, q.ravel(), side="right").reshape(q.shape)
    return np.clip(idx - np.arange(c)[:, None] * k, 0, k) / k


@dataclass(frozen=True, eq=False)
class LatencyModel:
    """Arrays over candidates (leading axis C) and sampled requests (axis S)."""

    wait_prob: np.ndarray  # [C] P(W > 0); 1 where unstable
    wait_cond_mean_s: np.ndarray  # [C] E[W | W > 0]; inf where unstable
    fixed_s: np.ndarray  # [C, S] deterministic TTFT part per request
    tpot_base_s: np.ndarray  # [C]
    stall_events: np.ndarray  # [C, S] expected stall events during the request's decode
    stall_sizes_s: np.ndarray  # [C, K] sorted sizes of one stall (its distribution); zeros if none
    output_tokens: np.ndarray  # [S]
    stable: np.ndarray  # [C] bool
    spread: TpotSpread | None = None  # decode-batch fluctuation of the base
    stall_load: np.ndarray | None = None  # [C] rho in [0, 1): stalls' share of a request's decode time
    admit_prob: np.ndarray | None = None  # [C] P(A > 0) of a second wait A (module docstring)
    admit_cond_mean_s: np.ndarray | None = None  # [C] E[A | A > 0]
    mixed: MixedShare | None = None  # chunked replicas: the mixed share F of iterations, not stalls
    join_busy: np.ndarray | None = None  # [C] P(an iteration is in flight when the KV lands); disaggregated
    join_step_s: np.ndarray | None = None  # [C] that iteration's length tau ("Join residual")
    levels: WaitLevels | None = None  # the wait per slow environment level (model.queueing.environment)
    packed: PackedStep | None = None  # disaggregated: the prompts sharing a waiting prompt's prefill step
    wait_stalls: np.ndarray | None = None  # [C, S] prefill-first: stalls per second of wait (stall_count)

    @cached_property
    def _gaps(self) -> np.ndarray:
        """[1, S] token gaps a request's TPOT spreads over, max(O - 1, 1)."""
        return np.maximum(self.output_tokens - 1.0, 1.0)[None, :]

    @cached_property
    def _strata(self) -> np.ndarray | None:
        """[M x C, S] stall time each stratum m of the base deviation takes from the absorbable
        total, (O_i - 1) s_ci D_cm, strata stacked along the rows (None without a spread)."""
        if self.spread is None:
            return None
        d = self.spread.strata_s(SPREAD_STRATA).T  # [M, C]
        shrink = self.spread.shrink
        return (d[:, :, None] * shrink[None, :, :] * self._gaps[None]).reshape(-1, shrink.shape[1])

    @cached_property
    def stall_m1_s(self) -> np.ndarray:
        """Mean stall size per candidate."""
        return self.stall_sizes_s.mean(axis=1)

    @cached_property
    def stall_m2_s2(self) -> np.ndarray:
        """Second moment of the stall size per candidate."""
        return (self.stall_sizes_s**2).mean(axis=1)

    @cached_property
    def _free(self) -> np.ndarray:
        """1 - rho per candidate [C] (1 without feedback)."""
        if self.stall_load is None:
            return np.ones(len(self.tpot_base_s))
        return free_fraction(self.stall_load)

    def requests(self, mask: np.ndarray) -> LatencyModel:
        """The same candidates restricted to the sampled requests selected by ``mask`` (axis S)."""
        return LatencyModel(
            self.wait_prob,
            self.wait_cond_mean_s,
            self.fixed_s[:, mask],
            self.tpot_base_s,
            self.stall_events[:, mask],
            self.stall_sizes_s,
            self.output_tokens[mask],
            self.stable,
            None if self.spread is None else self.spread.requests(mask),
            self.stall_load,
            self.admit_prob,
            self.admit_cond_mean_s,
            None if self.mixed is None else self.mixed.requests(mask),
            self.join_busy,
            self.join_step_s,
            None if self.levels is None else self.levels.requests(mask),
            None if self.packed is None else self.packed.requests(mask),
            None if self.wait_stalls is None else np.asarray(self.wait_stalls)[:, mask],
        )

    def row(self, i: int) -> LatencyModel:
        """The model of candidate ``i`` alone (leading axis of length 1)."""
        return self.take(np.array([i]))

    def take(self, idx: np.ndarray) -> LatencyModel:
        """The models of candidates ``idx`` (in that order, repeats allowed) along the leading axis."""
        return LatencyModel(
            self.wait_prob[idx],
            self.wait_cond_mean_s[idx],
            self.fixed_s[idx],
            self.tpot_base_s[idx],
            self.stall_events[idx],
            self.stall_sizes_s[idx],
            self.output_tokens,
            self.stable[idx],
            None if self.spread is None else self.spread.take(idx),
            None if self.stall_load is None else np.asarray(self.stall_load)[idx],
            None if self.admit_prob is None else np.asarray(self.admit_prob)[idx],
            None if self.admit_cond_mean_s is None else np.asarray(self.admit_cond_mean_s)[idx],
            None if self.mixed is None else self.mixed.take(idx),
            None if self.join_busy is None else np.asarray(self.join_busy)[idx],
            None if self.join_step_s is None else np.asarray(self.join_step_s)[idx],
            None if self.levels is None else self.levels.take(idx),
            None if self.packed is None else self.packed.take(idx),
            None if self.wait_stalls is None else np.asarray(self.wait_stalls)[idx],
        )

    def percentiles_s(
        self, qs: tuple[float, ...], masks: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """TTFT and TPOT ``qs``-quantiles of a one-candidate model, all in one vectorised bisection
        (the candidate repeated once per quantile): two arrays of len(qs). ``masks`` [len(qs), S]
        (optional): quantile j over the sampled requests of ``masks[j]`` only (e.g. a prompt-length
        class), as ``self.requests(masks[j])`` would give it."""
        q = np.asarray(qs, dtype=float)
        rep = self.take(np.zeros(len(q), dtype=int))
        return rep.ttft_percentile_s(q, masks), rep.tpot_percentile_s(q, masks)

    @property
    def admit_mean_s(self) -> np.ndarray:
        """E[A] [C]: the second wait's mean (0 without one; inf where unstable)."""
        if self.admit_prob is None or self.admit_cond_mean_s is None:
            return np.zeros(len(self.stable))
        with np.errstate(invalid="ignore"):
            mean = np.where(self.admit_prob > 0, self.admit_prob * self.admit_cond_mean_s, 0.0)
        return np.where(self.stable, mean, np.inf)

    def ttft_cdf(self, t_s: np.ndarray, waiting: LawRead = PackedStep.waiting_cdf) -> np.ndarray:
        """P(TTFT_ci <= t), t broadcast against [C, S]; averaged over ``levels`` if any (their own docs).
        ``waiting``: the packed step's law of a waiting prompt (PackedStep.waiting_cdf, or a bound)."""
        if self.levels is not None:
            return self.levels.mix(lambda p, m: self._ttft_given(t_s, p, m, waiting))
        return self._ttft_given(t_s, self.wait_prob, self.wait_cond_mean_s, waiting)

    def ttft_cdf_bounds(self, t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(lo, hi) around :meth:`ttft_cdf` from the packed count's extremes (PackedStep.waiting_floor
        and waiting_ceiling; the TTFT law rises with the waiting prompt's); None without a packed step."""
        if self.packed is None:
            return None
        return self.ttft_cdf(t_s, PackedStep.waiting_floor), self.ttft_cdf(t_s, PackedStep.waiting_ceiling)

    def _ttft_given(
        self, t_s: np.ndarray, prob: np.ndarray, cond: np.ndarray, waiting: LawRead
    ) -> np.ndarray:
        """:meth:`ttft_cdf` with a queue wait W of P(W > 0) = ``prob`` and E[W | W > 0] = ``cond`` [C]."""
        slack = np.asarray(t_s) - self.fixed_s
        if self.packed is not None:  # the law of the packed count, not its mean (PackedStep.waiting_cdf)
            tail = 1.0 - waiting(self.packed, slack, cond)
        else:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                m = cond[:, None]
                tail = np.where(m > 0, np.exp(-np.maximum(slack, 0.0) / m), 0.0)
        exceed = prob[:, None] * tail
        if self.admit_prob is not None and self.admit_cond_mean_s is not None:
            # candidates with an admission wait: the two waits' sum (the same where q = 0), on the wait
            # the slack leaves a waiting prompt (less the prompts packed with it: PackedStep.wait_slack)
            rows = np.nonzero(np.asarray(self.admit_prob) > 0)[0]
            if len(rows):
                col = (prob, cond, self.admit_prob, self.admit_cond_mean_s)
                sub = (np.asarray(v, dtype=float)[rows, None] for v in col)
                rs = np.broadcast_to(slack, exceed.shape)[rows]
                ws = rs if self.packed is None else self.packed.take(rows).wait_slack(rs)
                exceed[rows] = two_wait_exceedance(ws, *sub)
        cdf = np.where(slack >= 0, 1.0 - exceed, 0.0)
        return np.where(self.stable[:, None], cdf, 0.0)

    @cached_property
    def _stall_law(self) -> tuple[np.ndarray, ...]:
        """The TPOT law's parts that do not depend on x, [C, S] each (computed once per model: a
        percentile bisects on :meth:`tpot_cdf`): token gaps, P(N = 0), P(N = 1), P(N >= 2), and
        the mean, shape and scale of the gamma for the total of two or more stalls."""
        gaps = self._gaps
        n = self.stall_events
        free = self._free[:, None]  # primary events and their clusters (busy periods), see above
        n = n * free
        # + the prompts its wait left queued (model.queueing.stall_count: a mixed Poisson count)
        p0, p1, p2, en, en2 = count_law(n, *self._wait_count)
        s1, s2 = self.stall_m1_s[:, None] / free, self.stall_m2_s2[:, None] / free**3
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            mean = en * s1
            var = en * np.maximum(s2 - s1 * s1, 0.0) + np.maximum(en2 - en * en, 0.0) * s1 * s1
            if self.spread is not None:  # + the base's fluctuation over the gaps (module docstring)
                var = var + (gaps * self.spread.shrink) ** 2 * self.spread.variance_s2()[:, None]
            shape = np.where(var > 0, mean * mean / var, np.inf)
            scale = np.where(mean > 0, var / mean, 0.0)
        gamma = np.isfinite(shape) & (scale > 0)
        return gaps, p0, p1, p2, mean, np.where(np.isfinite(shape), shape, 1.0), scale, gamma

    def tpot_cdf(self, x_s: np.ndarray, requests: np.ndarray | None = None) -> np.ndarray:
        """P(TPOT_ci <= x): no stall, exactly one (empirical sizes), or two or more (gamma). ``requests``
        [C, S] bool: only those entries are read (a chunked law's Beta CDF computed there alone)."""
        n = self.stall_events
        base = self.tpot_base_s[:, None]
        x = np.asarray(x_s, dtype=float)
        if self.mixed is not None:
            return self._mixed_law(x).cdf(requests=requests)
        # no stall: TPOT is the base step time (fluctuating with the decode batch with a spread), plus
        # the join residual over the gaps on a disaggregated decode instance
        atom = self._base_cdf(x - base)
        if not np.any(n > 0) and not np.any(self._wait_count[1] > 0):  # no stalls at all (disaggregated)
            return np.where(self.stable[:, None], np.broadcast_to(atom, n.shape), 0.0)
        gaps, p0, p1, p2, mean, shape, scale, gamma = self._stall_law
        y = np.broadcast_to((x - base) * gaps, n.shape)  # stall time the request can absorb
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            z = np.where(scale > 0, np.maximum(y, 0.0) / scale, np.inf)
            two = np.where(y >= 0, np.where(gamma, gammainc(shape, z), (y >= mean).astype(float)), 0.0)
        if self.spread is None:
            one = self._one_stall_cdf(y)
        else:  # the base fluctuates: the one-stall term averaged over the strata of D (module docstring)
            y_m = np.tile(y, (SPREAD_STRATA, 1)) - self._strata  # [M x C, S]
            one = self._one_stall_cdf(y_m).reshape(SPREAD_STRATA, *n.shape).mean(axis=0)
        cdf = p0 * atom + p1 * one + p2 * two
        return np.where(self.stable[:, None], np.minimum(cdf, 1.0), 0.0)

    def _base_cdf(self, excess_s: np.ndarray, join: LawRead = join_residual_cdf):
        """P(s D + R / (O - 1) <= excess) [C, S]: the batch's fluctuation (a step at 0 without a spread)
        and the join residual R by ``join`` (none without ``join_busy``; disaggregated_terms)."""

        by_output = np.shape(excess_s)[-1] == 1  # one column, shifted by r / (O_i - 1): O_i only

        def law(y: np.ndarray) -> np.ndarray:
            return np.where(y >= 0, 1.0, 0.0) if self.spread is None else self.spread.excess_cdf(y, by_output)

        if self.join_busy is None or self.join_step_s is None:
            return law(excess_s)
        return join(law, excess_s, self.join_busy, self.join_step_s, self._gaps)

    def tpot_join_bounds(self, x_s: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(lo, hi) [C, S] around :meth:`tpot_cdf` at ``x_s`` [C, 1] where TPOT is the base and the join
        residual alone (no stalls, no mixed share; else None): disaggregated_terms.join_residual_bounds."""
        if self.mixed is not None or self.join_busy is None or self.join_step_s is None:
            return None
        if self.stall_events.any():
            return None
        excess = np.asarray(x_s, dtype=float) - self.tpot_base_s[:, None]
        bounds = self._base_cdf(excess, join_residual_bounds)
        return tuple(np.where(self.stable[:, None], b, 0.0) for b in bounds)

    def join_mean_s(self) -> np.ndarray:
        """[C, S] E[R] / (O_i - 1) = u tau / 2 / (O_i - 1): the join residual's mean share of TPOT
        (0 without one)."""
        if self.join_busy is None or self.join_step_s is None:
            return np.zeros((len(self.tpot_base_s), 1))
        busy_step_s = np.asarray(self.join_busy, dtype=float) * np.asarray(self.join_step_s, dtype=float)
        return 0.5 * busy_step_s[:, None] / self._gaps

    def _mixed_law(self, x: np.ndarray) -> MixedTpot:
        """P(b + s D + F extra <= x) on a chunked replica (model.queueing.mixed_share): F's Beta law
        exact, D (the batch's fluctuation) at the MIXED_STRATA_EDGES strata, F given D: the
        MixedTpot at ``x`` [C, 1], on the distinct requests (:attr:`_mixed_distinct`) when x is."""
        share, shift, strata, columns = self._mixed_distinct
        if columns is None or np.shape(x)[1:] not in ((), (1,)):  # x per request: every column
            share, columns = self.mixed, None
            shift, strata = (
                (None, None) if self.spread is None else (self._mixed_strata[0], self._mixed_strata[1:])
            )
        y = np.broadcast_to(x - self.tpot_base_s[:, None], (len(self.stable), share.mean.shape[1]))
        return MixedTpot.at(share, y, shift, self.stable, strata, columns)

    @cached_property
    def _mixed_distinct(self) -> tuple:
        """(share, shift, strata, columns) of :meth:`_mixed_law` on the distinct requests
        (mixed_share.distinct_requests: equal mixed-share fields and batch shrink), columns None
        when every request is distinct."""
        shrink = () if self.spread is None else (self.spread.shrink,)
        cols = distinct_requests(self.mixed, *shrink)
        if cols is None:
            return None, None, None, None
        first, inverse = cols
        if self.spread is None:
            return self.mixed.requests(first), None, None, inverse
        shift, weights, params = self._mixed_strata
        return (
            self.mixed.requests(first),
            shift[..., first],
            (weights, tuple(v[..., first] for v in params)),
            inverse,
        )

    @cached_property
    def _mixed_strata(self) -> tuple:
        """(shift s D [M, C, S], weights [M], F's Beta given each stratum [M, C, S]), built once."""
        w, d, z = self.spread.strata_at(MIXED_STRATA_EDGES)  # [M], [M, C], [M, C]
        return d[:, :, None] * self.spread.shrink[None], w, self.mixed.given(z)

    def tpot_cdf_bounds(self, x_s: np.ndarray) -> MixedTpot | None:
        """The chunked TPOT law at ``x_s`` with cheap bounds on :meth:`tpot_cdf` (MixedTpot.bounds)
        and its exact rows (MixedTpot.cdf); None where the law has no such bounds (stalls)."""
        return None if self.mixed is None else self._mixed_law(np.asarray(x_s, dtype=float))

    @cached_property
    def _one_stall_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted stall sizes, 1 - rho) per row of the one-stall term's y: the candidates' rows, stacked
        SPREAD_STRATA times with a spread (computed once: a percentile bisects on :meth:`tpot_cdf`)."""
        repeats = 1 if self.spread is None else SPREAD_STRATA
        return np.tile(self.stall_sizes_s, (repeats, 1)), np.tile(self._free[:, None], (repeats, 1))

    def _one_stall_cdf(self, y: np.ndarray) -> np.ndarray:
        """P(one stall cluster <= y) for absorbable stall time ``y`` (rows as :attr:`_one_stall_rows`),
        0 where y < 0: the sampled sizes scaled by 1 / (1 - rho)."""
        sizes, free = self._one_stall_rows
        return np.where(y >= 0, empirical_cdf_rows(sizes, y * free), 0.0)

    @cached_property
    def _wait_count(self) -> tuple[np.ndarray, np.ndarray]:
        """(p [C], mu [C, S]) of the count of primaries the request's wait left queued (stall_count)."""
        return wait_stall_mean(self.wait_stalls, self.wait_prob, self.wait_cond_mean_s)

    def mean_tpot_s(self) -> np.ndarray:
        """Sample-mean TPOT per candidate: base + E[stall total] / (O - 1)."""
        gaps = self._gaps
        p, mu = self._wait_count
        events = self.stall_events + (p / self._free)[:, None] * mu
        per = self.tpot_base_s[:, None] + events * self.stall_m1_s[:, None] / gaps
        per = per + self.join_mean_s()
        if self.mixed is not None:
            per = per + self.mixed.mean_extra_s()
        return np.where(self.stable, per.mean(axis=1), np.inf)

    def attainment(self, ttft_slo_s: float | np.ndarray, tpot_slo_s: float | np.ndarray) -> np.ndarray:
        """Fraction of requests meeting both targets, per candidate."""
        ttft = np.broadcast_to(np.asarray(ttft_slo_s, dtype=float), self.stable.shape)[:, None]
        tpot = np.broadcast_to(np.asarray(tpot_slo_s, dtype=float), self.stable.shape)[:, None]
        both = self.ttft_cdf(ttft) * self.tpot_cdf(tpot)
        return np.where(self.stable, both.mean(axis=1), 0.0)

    def ttft_percentile_s(self, q: float | np.ndarray, masks: np.ndarray | None = None) -> np.ndarray:
        """q-quantile (0 < q < 1; a scalar or one per candidate) of TTFT over requests (those of
        ``masks[c]`` for candidate c when given), per candidate; inf where unstable."""
        tails = [self.wait_cond_mean_s]
        if self.admit_cond_mean_s is not None:
            tails.append(np.asarray(self.admit_cond_mean_s, dtype=float))
        hi = row_extreme(self.fixed_s, masks, np.max) + sum(
            np.where(np.isfinite(m), m * (np.log(1.0 / (1.0 - q)) + 5.0), 0.0) for m in tails
        )
        if self.packed is not None:
            hi = hi + row_extreme(self.packed.most_s(), masks, np.max)
        lo = row_extreme(self.fixed_s, masks, np.min)
        return bisect_quantile(
            lambda t: masked_mean(self.ttft_cdf(t[:, None]), masks), lo, hi, q, self.stable
        )

    def tpot_percentile_s(self, q: float | np.ndarray, masks: np.ndarray | None = None) -> np.ndarray:
        """q-quantile (a scalar or one per candidate) of TPOT over requests (those of ``masks[c]``
        when given), per candidate; inf where unstable."""
        gaps = self._gaps
        worst = (
            self.stall_sizes_s.max(axis=1)[:, None] / self._free[:, None]
            + self.stall_events * self.stall_m1_s[:, None]
            + 6.0
            * np.sqrt(np.maximum(self.stall_events, 1.0) * self.stall_m2_s2[:, None])
            / self._free[:, None] ** 2
        )
        lo, hi = self.tpot_base_s, self.tpot_base_s + row_extreme(worst / gaps, masks, np.max)
        if self.mixed is not None:
            hi = hi + self.mixed.top_s()
        if self.join_step_s is not None:
            hi = hi + np.asarray(self.join_step_s, dtype=float)  # R / (O - 1) <= tau
        if self.spread is not None:
            lo = lo + np.minimum(self.spread.dev_s[:, 0], 0.0)
            hi = hi + np.maximum(self.spread.dev_s[:, -1], 0.0)
        return bisect_quantile(
            lambda x: masked_mean(self.tpot_cdf(x[:, None], masks), masks), lo, hi, q, self.stable
        )
