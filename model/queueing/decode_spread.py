"""Fluctuation of the continuous-batching decode batch and its effect on TPOT, vectorised over candidates.

Under Poisson arrivals the number N of sequences in a decode instance's batch is a random variable,
not its mean. Model (assumptions stated; docs/model.md "Decode-batch fluctuation"):

1. **Occupancy.** With n sequences running, every one gains a token per step of per-token time
   tau(n): the batch is a processor-sharing-like (symmetric) queue whose total service rate is
   n / tau(n) tokens/s. Requests arrive at rate lambda and need O tokens each. As a birth-death
   process (births lambda, deaths n / (E[O] tau(n)); exact for geometric O, and insensitive to the
   shape of O for a symmetric queue at token granularity: Kelly, "Reversibility and Stochastic
   Networks", 1979, sec. 3.3) the stationary distribution is (Kleinrock, "Queueing Systems" vol. 1,
   1975, eq. 3.11)

       p(n) = p(0) prod_{k=1..n} a(k) / k,      a(k) = lambda E[O] tau(k).

   With tau constant this is Poisson(a), the M/G/inf occupancy. The engine's cap c (max running
   sequences, or the KV cache) holds N at c; requests beyond it wait for a slot (the admission wait
   of model.queueing.decode_batch), during which the batch stays at c with the geometric tail
   p(c + j) = p(c) rho^j, rho = a(c) / c (the M/M/c queue's waiting states, Gross & Harris,
   "Fundamentals of Queueing Theory", 4th ed., sec. 2.3), so P(batch = c) gets the atom
   p(c) rho / (1 - rho) added: an Erlang-C-style truncation. A cap never lets the batch exceed c.
2. **Batch seen by a token.** A decoding request sees the batch it is in: the customer-average
   (size-biased) law n p(n) / E[N] of a symmetric queue; it emits one token per tau(n), so per
   emitted token the law is q(n) proportional to n p(n) / tau(n). Its mean per-token time is then
   E_q[tau] = E[N] / (lambda E[O]) (Little's law on the decode tokens).
3. **Averaging over a request's own tokens.** TPOT is the mean of tau(N) over the request's O
   tokens. N relaxes on the timescale of one decode: for the M/G/inf occupancy the autocovariance is
   lambda E[(S - t)+] (Eick, Massey & Whitt, "The physics of the Mt/G/inf queue", Oper. Res. 41(4),
   1993), so in token units the correlation is r(t) = E[(O - t)+] / E[O] over the sampled outputs;
   a state-dependent tau slows the relaxation by 1 / (1 - eps), eps = d ln tau / d ln n at the mean
   batch (the linear-noise approximation of the birth-death process; van Kampen, "Stochastic
   Processes in Physics and Chemistry", ch. X). The variance of a time average over T tokens is
   Var x g(T), g(T) = (2 / T^2) int_0^T (T - t) r((1 - eps) t) dt (Papoulis, "Probability, Random
   Variables and Stochastic Processes", sec. 9-5, mean of a stationary process over an interval).
   The request's TPOT is modelled as E_q[tau] + sqrt(g(O_i)) (tau(N) - E_q[tau]), N ~ q: its
   spread shrinks with the variance factor and keeps the shape (skew, cap) of the per-token law.
4. **Light batch: the overlap law** (disaggregated decode pools, ``light=True``). At a batch of a
   few sequences a request decodes alone most of the time and shares its instance only while
   another request's decode overlaps its own; its TPOT is the time average of the step over its own
   lifetime, so it has an atom at the alone step (no overlap at all) and, once shared, a continuous
   law of the shared time fraction, not a scaled copy of the one-token law (docs/model.md,
   "Light-batch decode average"). The other requests form an M/G/inf process (Poisson arrivals,
   sojourns S from the output law); those that overlap a window of length T are a Poisson number of
   mean lambda (E[S] + T) (the coverage count, Hall 1988; Takacs 1962; model.queueing.overlap), so
   P(never shared) = exp(-lambda E[S] (1 + T / E[S])). In token units lambda E[S] = m = -ln alpha,
   alpha the per-token probability of decoding alone (the q-mass at a per-instance batch <= 1; e^{-m}
   for the M/G/inf, where a running request sees Poisson(m) others), and T / E[S] = (O_i - 1) / E[O]:

       P0_i = alpha^(1 + (O_i - 1) / E[O]).

   The others' count integrated over the window is the compound Poisson of the overlap lengths
   (model.queueing.overlap: one overlap's law exact, two or more a gamma with the compound Poisson's
   moments), F its time average (mean m), and the request's TPOT is the step at 1 + c F others, tau
   linear between integer batches: exact when the count spends the window at two adjacent levels
   (at light batch: alone, or with one other), conservative otherwise (the step is concave in the
   batch: Jensen); c keeps Little's mean E_q[tau] to first order (model.queueing.overlap.light_law).
   The request's law is alpha x this law
   + (1 - alpha) x item 3's law: alpha = e^{-m} weights the alone / overlap picture by the share of
   tokens it describes, so the law is the overlap law as the batch -> 0 and item 3's (with the cap's
   waiting states, which the M/G/inf count does not have) where no token decodes alone (alpha = 0,
   heavy batch); no threshold switches between them.

So the p90 TPOT lies between the step at the mean batch and the step at the p90 batch, nearer the
latter for short outputs. Arrays: C candidates, K support points of the occupancy, S sampled requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np
from scipy.special import gammaln

from model.queueing.decode_batch import batch_rows, interp_rows
from model.queueing.overlap import LightLaw, OverlapLaw, light_law, overlap_law

# Support points of the occupancy law per candidate: integers when the window around the mean batch
# is narrow, evenly spaced integers (each weighted by the integers it stands for) when wide.
SUPPORT_POINTS = 32
# Uniform points on which each candidate's per-token law is tabulated for the CDF lookups of the
# planner's hot path (a step CDF read at the grid point at or below: conservative by < 1/1023 of the
# law's range). The range runs from the batch-0/1 step to the step 8 SD above the mean batch, which on
# a MoE decode table (experts read grow with the batch) is tens of ms, while a tight TPOT target leaves
# a slack of a few tenths of a ms over the mean step: at 128 points one table step (0.18 ms on grid
# cells 42 and 68) was half that slack, and the read left out the next batch's atom for every request
# whose shrunk deviation fell in the step below it (docs/validation.md, "Broad grid", session 9).
# 1024 and 8192 points give planned goodputs within 0.8% on the eleven under-predicted disaggregated
# scenarios of session 8 (one chunked cell 4%).
CDF_POINTS = 1024
# The window: mean -/+ these many standard deviations of the linearised occupancy (sqrt(m / (1 - eps))).
_BELOW_SD, _ABOVE_SD = 6.0, 8.0
# Elasticity of tau above which the linearised relaxation is not trusted (the batch is near saturation).
_MAX_ELASTICITY = 0.95
# Lag grid (in mean outputs) on which the variance factor g is tabulated once per scenario.
_LAG_GRID = np.concatenate([[0.0], np.geomspace(1e-3, 1e3, 96)])
# Per-instance batches 1 .. LIGHT_LEVELS at which the light-batch law (item 4) reads the step (held at
# the top one beyond): the time-average count of others F has mean m = -ln alpha and weight alpha =
# e^-m, so F above 7 carries at most about max_m e^-m P(Poisson(m) >= 8) < 2e-4 of a request's CDF.
LIGHT_LEVELS = 8
# Elasticities at which each sampled request's shrink sqrt(g((1 - eps)(O - 1))) is tabulated once per
# scenario; a candidate takes the nearest (eps within 0.005: g moves by < 0.2%).
_EPS_GRID = np.linspace(0.0, _MAX_ELASTICITY, 96)


@dataclass(frozen=True, eq=False)
class TpotSpread:
    """Per-request TPOT law from the decode-batch fluctuation, arrays over candidates.

    ``TPOT_ci = mean_s[c] + shrink[c, i] x D_c`` with D_c on the sorted support ``dev_s[c]`` (per-token
    time minus its mean) with cumulative probabilities ``cdf[c]``; ``table`` holds P(D <= lo + m step)
    on CDF_POINTS uniform points from lo = ``dev_s[c, 0]`` (:meth:`cdf_at`). With ``alone`` (alpha [C],
    the per-token probability of decoding alone) and ``alone_power`` ([S], 1 + (O_i - 1) / E[O]) the
    law is blended with the light-batch overlap law (module docstring, item 4); None or alpha = 0:
    item 3's law alone.
    """

    mean_s: np.ndarray  # [C] E_q[tau], the per-token time averaged over tokens
    dev_s: np.ndarray  # [C, K] tau(n_k) - mean, ascending
    cdf: np.ndarray  # [C, K] P(D <= dev_s[c, k])
    shrink: np.ndarray  # [C, S] sqrt of the variance factor of request i's own average
    inv_shrink: np.ndarray  # [C, S] 1 / shrink
    step_s: np.ndarray  # [C] spacing of the uniform table
    table: np.ndarray  # [C, 1 + CDF_POINTS]: 0, then P(D <= dev_s[c, 0] + m step) for m = 0 ..
    alone: np.ndarray | None = None  # [C] alpha: P(a token decodes at a per-instance batch <= 1)
    overlap: OverlapLaw | None = None  # [S] the requests' overlap law (model.queueing.overlap)
    levels: np.ndarray | None = None  # [C, LIGHT_LEVELS] step at per-instance batch 1, 2, .. minus mean_s

    def excess_cdf(self, excess_s: np.ndarray, by_output: bool = False) -> np.ndarray:
        """P(TPOT_ci - mean_s[c] <= excess[c]) for excess [C, 1] (or [C, S]), every request i: item 3's
        law (:meth:`shape_cdf`), blended with the light-batch overlap law where alpha > 0 (module
        docstring, item 4). ``by_output``: the caller's [C, S] excess varies with O_i only (no check)."""
        out = self.shape_cdf(excess_s)
        light = self._light
        if light is None:
            return out
        out = np.array(out, dtype=float)  # a writable copy
        rows, weight = light.rows, light.alpha
        out[rows] = (
            weight * light.cdf(np.asarray(excess_s, dtype=float)[rows], by_output)
            + (1.0 - weight) * out[rows]
        )
        return out

    @cached_property
    def _light(self) -> LightLaw | None:
        """Item 4's law for the candidates with alpha > 0 (model.queueing.overlap.light_law)."""
        if self.alone is None or self.overlap is None or self.levels is None:
            return None
        return light_law(self.alone, self.levels, self.overlap)

    def shape_cdf(self, excess_s: np.ndarray) -> np.ndarray:
        """Item 3's law alone: P(shrink_ci D_c <= excess[c]) for excess [C, 1] (or [C, S]): the
        uniform table read at or below excess / shrink (0 below the support). The planner's hot path."""
        excess = np.asarray(excess_s, dtype=float)
        if excess.ndim == 2 and excess.shape[1] == 1:
            # one threshold per candidate: rows whose whole law lies below (above) it need no lookup
            # (shrink <= 1 only pulls D towards 0)
            e = excess[:, 0]
            inside = ~((e >= self.dev_s[:, -1]) | (e < self.dev_s[:, 0]))
            if not inside.all():
                out = np.repeat((e >= self.dev_s[:, -1]).astype(float)[:, None], self.shrink.shape[1], axis=1)
                if inside.any():
                    rows = np.nonzero(inside)[0]
                    out[rows] = self._lookup(excess[rows], rows)
                return out
        return self._lookup(excess, None)

    def _lookup(self, excess: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        """The table read at excess / shrink for ``rows`` (None: every candidate)."""
        sel = slice(None) if rows is None else rows
        inv_step = 1.0 / self.step_s[sel]
        pos = (excess * inv_step[:, None]) * self.inv_shrink[sel]
        pos += (1.0 - self.dev_s[sel, 0] * inv_step)[:, None]
        np.clip(pos, 0.0, float(CDF_POINTS), out=pos)
        idx = pos.astype(np.intp)
        base = np.arange(len(self.step_s)) if rows is None else rows
        idx += (base * (CDF_POINTS + 1))[:, None]  # rows of the flattened table
        return np.take(self.table.ravel(), idx)

    def strata_s(self, points: int) -> np.ndarray:
        """[C, points] deviations D at the middles (m + 1/2) / points of ``points`` equiprobable strata of
        the per-token law (its quantiles there): a ``points``-point quadrature of D for the colocated
        styles' convolution with prefill stalls (model.queueing.latency)."""
        return self.quantiles_s((np.arange(points, dtype=float) + 0.5) / points)

    def strata_at(self, edges: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(probabilities [M], D [M, C], z [M, C]) of the strata between the probability ``edges``: D
        at each stratum's conditional mean E[D | e_i < U <= e_(i+1)] = (1 / w_i) int Q(u) du over the
        band (Q the quantile function; the centroid of the stratum, Graf & Luschgy, "Foundations of
        Quantization for Probability Distributions", 2000, sec. 4.1: the strata keep E[D], and on a
        law with atoms the level moves continuously with the atoms' masses, where the band's middle
        quantile jumps a whole atom when an atom's CDF crosses the middle level: grid cell 105
        chunked, docs/session13/cohort16.md), z = D in standard deviations of this quadrature
        itself (centred and scaled over the strata, so a law regressed on z keeps its variance:
        model.queueing.mixed_share.MixedShare.given)."""
        e = np.asarray(edges, dtype=float)
        w = np.diff(e)
        # the mass of each support point inside each band: |[F(k-1), F(k)] n [e_i, e_(i+1)]|
        hi = np.minimum(self.cdf[None, :, :], e[1:, None, None])  # [M, C, K]
        lo = np.maximum(
            np.concatenate([np.zeros_like(self.cdf[:, :1]), self.cdf[:, :-1]], axis=1)[None],
            e[:-1, None, None],
        )
        d = (np.maximum(hi - lo, 0.0) * self.dev_s[None]).sum(axis=2) / w[:, None]
        dc = d - w @ d
        return w, d, dc / np.sqrt(np.maximum(w @ (dc * dc), 1e-300))[None]

    def quantiles_s(self, levels: np.ndarray) -> np.ndarray:
        """[C, len(levels)] deviations D at the probability ``levels`` (the support point where the
        per-token law's CDF first reaches each level)."""
        u = np.asarray(levels, dtype=float)
        idx = (self.cdf[:, :, None] >= u[None, None, :] - 1e-12).argmax(axis=1)  # [C, len(levels)]
        return np.take_along_axis(self.dev_s, idx, axis=1)

    def variance_s2(self) -> np.ndarray:
        """Var[D] per candidate (the per-token law's variance, before a request's own averaging)."""
        mass = np.diff(self.cdf, axis=1, prepend=0.0)
        return (mass * self.dev_s**2).sum(axis=1)

    def quantile_s(self, q: float) -> np.ndarray:
        """q-quantile of the per-token time itself (a request of one token, no averaging), per candidate."""
        idx = np.argmax(self.cdf >= q - 1e-12, axis=1)
        return self.mean_s + self.dev_s[np.arange(len(idx)), idx]

    def requests(self, mask: np.ndarray) -> TpotSpread:
        """The same candidates restricted to the sampled requests selected by ``mask``."""
        return TpotSpread(
            self.mean_s,
            self.dev_s,
            self.cdf,
            self.shrink[:, mask],
            self.inv_shrink[:, mask],
            self.step_s,
            self.table,
            self.alone,
            None if self.overlap is None else self.overlap.requests(mask),
            self.levels,
        )

    def take(self, idx: np.ndarray) -> TpotSpread:
        """Candidates ``idx`` (in that order, repeats allowed) along the leading axis."""
        return TpotSpread(
            self.mean_s[idx],
            self.dev_s[idx],
            self.cdf[idx],
            self.shrink[idx],
            self.inv_shrink[idx],
            self.step_s[idx],
            self.table[idx],
            None if self.alone is None else self.alone[idx],
            self.overlap,
            None if self.levels is None else self.levels[idx],
        )


@dataclass(frozen=True, eq=False)
class Occupancy:
    """Stationary law of the running batch per candidate: support ``batch`` [C, K] (ascending) and
    ``prob`` [C, K]; ``tau_s`` the per-token time at each support point (batch >= 1) and
    ``elasticity`` d ln tau / d ln n at the mean batch [C]."""

    batch: np.ndarray
    prob: np.ndarray
    tau_s: np.ndarray
    elasticity: np.ndarray

    def mean(self) -> np.ndarray:
        """E[N] per candidate."""
        return (self.batch * self.prob).sum(axis=1)

    def quantile(self, q: float) -> np.ndarray:
        """Smallest support point with P(N <= n) >= q, per candidate."""
        idx = np.argmax(np.cumsum(self.prob, axis=1) >= q - 1e-12, axis=1)
        return self.batch[np.arange(len(idx)), idx]


def elasticity(mean_batch: np.ndarray, grid: np.ndarray, per_token_s: np.ndarray) -> np.ndarray:
    """eps = d ln tau / d ln n around the mean batch m, in [0, 0.95]: the secant of ln tau over
    [m / 1.5, 1.5 m], wide enough to span the integer steps of a MoE decode table (whose expert count
    changes only with whole sequences). The table runs a batch below one as a batch-1 step, so at
    light load (m <= 2/3: the batch mostly 0 or 1) eps is 0, the M/G/inf relaxation."""
    m = np.maximum(np.asarray(mean_batch, dtype=float), 1e-3)
    both = interp_rows(np.stack([m / 1.5, m * 1.5], axis=1), grid, per_token_s)
    lo, hi = both[:, 0], both[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.log(hi / lo) / np.log(2.25)
    return np.clip(np.where(np.isfinite(eps), eps, 0.0), 0.0, _MAX_ELASTICITY)


def occupancy(
    demand_tokens_per_s: np.ndarray,
    grid: np.ndarray,
    per_token_s: np.ndarray,
    cap: np.ndarray,
    mean_batch: np.ndarray,
    instances: np.ndarray | None = None,
    whole: bool = False,
) -> Occupancy:
    """p(n) of the birth-death batch (module docstring, item 1) on SUPPORT_POINTS points per candidate.

    ``demand_tokens_per_s`` = lambda E[O] per instance; ``per_token_s`` rows tau on ``grid``; ``cap``
    the most sequences the instance runs (max running sequences, KV); ``mean_batch`` the fixed point
    B = lambda E[O] tau(B) (model.queueing.decode_batch.solve_batch), around which the window sits.
    Each point n_j stands for the run of integers in (n_{j-1}, n_j] and carries run x p at the run's
    middle, log p(n) - log p(n_0) = sum of ln a(k) over (n_0, n] - ln(n! / n_0!) (ln a taken at the
    run's middle; exact when every run is one integer). The cap's waiting states add the atom
    p(c) rho / (1 - rho) at n = c (one more support point, K + 1 in all).

    ``instances`` (default 1 per candidate): a pool of R decode instances behind a least-loaded router
    (the simulator's rule, model.sim.disaggregated: each request goes to the instance holding the
    fewest KV tokens) keeps the running sequences spread evenly, so the pool is one birth-death
    process over its total N with births R lambda and deaths N / (E[O] tau(N / R)), each sequence in
    a batch of about N / R (a batch below one is a batch-1 step: with N < R every sequence runs
    alone). Independent instances fed a Poisson split (lambda / R each, random routing) would fluctuate
    more: at a mean batch of 0.1 on 3 instances a request shares its instance ~10% of the time, on a
    least-loaded pool only when 4 or more are running (~0.03%). The returned ``batch`` is N / R, the
    per-instance batch. ``whole``: tau at whole batches on one instance (decode_batch.batch_rows).
    """
    inst = np.ones(len(np.atleast_1d(cap))) if instances is None else np.asarray(instances, dtype=float)
    c_one = np.maximum(np.floor(np.asarray(cap, dtype=float)), 1.0)
    lam_eo = (np.asarray(demand_tokens_per_s, dtype=float) * inst)[:, None]  # the pool's demand
    c = c_one * inst  # the pool's cap on running sequences
    m = np.clip(np.asarray(mean_batch, dtype=float), 0.0, c_one)
    eps = elasticity(m, grid, per_token_s)
    m = m * inst
    sd = np.sqrt(np.maximum(m, 1.0) / (1.0 - eps))
    lo = np.floor(np.clip(m - _BELOW_SD * sd, 0.0, c))
    hi = np.minimum(c, np.ceil(m + _ABOVE_SD * sd + 3.0))
    step = np.maximum(1.0, np.ceil((hi - lo) / (SUPPORT_POINTS - 1)))
    j = np.arange(SUPPORT_POINTS, dtype=float)[None, :]
    n = np.minimum(lo[:, None] + j * step[:, None], hi[:, None])  # [C, K]; repeats of hi weigh 0
    run = np.diff(n, axis=1, prepend=n[:, :1] - 1.0)  # integers each point stands for (1 at j = 0)
    mid = np.where(run > 0, n - (run - 1.0) / 2.0, n)  # the middle of the run: where its mass sits
    per_instance = np.maximum(mid / inst[:, None], 1.0)
    tau = batch_rows(np.column_stack([per_instance, c_one]), grid, per_token_s, whole & (inst == 1.0))
    tau_mid, tau_c = tau[:, :-1], tau[:, -1]  # at the runs' middles, and at the cap
    rows = np.arange(len(c))
    last = np.argmax(n >= hi[:, None], axis=1)  # the point that reaches hi
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_a = np.log(np.maximum(lam_eo * tau_mid, 1e-300))
        inc = np.where(run > 0, run * log_a, 0.0)
        inc[:, 0] = 0.0
        through = np.cumsum(inc, axis=1)  # sum of ln a(k) for k in (lo, n_j]
        log_fact = gammaln(lo + 1.0)[:, None]
        # log p at the run's middle (back from n_j by (run - 1) / 2 steps of ln a) and at n_j = hi
        ell = through - np.maximum(run - 1.0, 0.0) / 2.0 * log_a - (gammaln(mid + 1.0) - log_fact)
        ell_hi = through[rows, last] - (gammaln(hi + 1.0) - log_fact[:, 0])
        ell = np.where(np.isfinite(ell), ell, -np.inf)
        top = ell.max(axis=1, keepdims=True)
        shift = np.where(np.isfinite(top), top, 0.0)
        w = np.exp(ell - shift) * np.maximum(run, 0.0)  # run is 1 at j = 0
        # waiting states beyond the cap: the batch stays at c (geometric tail, ratio a(c) / c)
        rho = np.clip(lam_eo[:, 0] * tau_c / c, 0.0, 0.999)
        atom = np.where(hi >= c, np.exp(ell_hi - shift[:, 0]) * rho / (1.0 - rho), 0.0)
        atom = np.where(np.isfinite(atom), atom, 0.0)
        w = np.concatenate([w, atom[:, None]], axis=1)
        n = np.concatenate([mid, c[:, None]], axis=1) / inst[:, None]
        total = w.sum(axis=1, keepdims=True)
        prob = np.where(total > 0, w / np.where(total > 0, total, 1.0), 0.0)
    return Occupancy(batch=n, prob=prob, tau_s=tau, elasticity=eps)


def variance_factor(output_tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lags in tokens, g(lag)) for these sampled outputs (:func:`_variance_table`, cached per sample)."""
    o = np.ascontiguousarray(output_tokens, dtype=float)
    return _variance_table(o.tobytes())


@lru_cache(maxsize=64)
def _variance_table(output_bytes: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(lags in tokens, g(lag)): the variance factor of a T-token average of the occupancy, tabulated.

    g(T) = (2 / T^2) int_0^T (T - t) r(t) dt with r(t) = E[(O - t)+] / E[O] (module docstring, item
    3), in closed form per sampled output O: int_0^T (T - t)(O - t)+ dt = T^2 O / 2 - T^3 / 6 when
    O >= T, T O^2 / 2 - O^3 / 6 otherwise; g(0) = 1 and g(T) ~ E[O^2] / (E[O] T) for long T.
    """
    o = np.frombuffer(output_bytes, dtype=float)[None, :]
    eo = float(o.mean())
    t = (_LAG_GRID * eo)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        inner = np.where(o >= t, t * t * o / 2.0 - t**3 / 6.0, t * o * o / 2.0 - o**3 / 6.0)
        g = np.where(t[:, 0] > 0, 2.0 * inner.mean(axis=1) / (eo * t[:, 0] ** 2), 1.0)
    lags, g = t[:, 0], np.clip(g, 0.0, 1.0)
    lags.flags.writeable = False
    g.flags.writeable = False
    return lags, g


def token_weights(occ: Occupancy) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tau [C, B] the step time made nondecreasing in the batch (a running maximum over the ascending
    support; an infinite step read as 0 there), q [C, B] the per-token batch law n p(n) / tau(n)
    normalised (module docstring, item 2), its row totals [C, 1] before normalising (0: nothing above
    batch 0 in the window, or unstable; q is then 0)) of the occupancy ``occ``."""
    tau = np.maximum.accumulate(np.where(np.isfinite(occ.tau_s), occ.tau_s, 0.0), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = occ.batch * occ.prob / np.where(tau > 0, tau, np.inf)
        qs = q.sum(axis=1, keepdims=True)
        q = np.where(qs > 0, q / np.where(qs > 0, qs, 1.0), 0.0)
    return tau, q, qs


def tpot_spread(occ: Occupancy, output_tokens: np.ndarray, steps_s: np.ndarray | None = None) -> TpotSpread:
    """The per-request TPOT law (module docstring, items 2 and 3) from the occupancy ``occ``; with
    ``steps_s`` ([C, B]: the per-token time at per-instance batches 1 .. B) blended with the
    light-batch overlap law (item 4).

    The step time is taken nondecreasing in the batch (a running maximum over the ascending support
    enforces it), so the support of the per-token time is sorted with the batch's.
    """
    tau, q, qs = token_weights(occ)
    empty = qs[:, 0] <= 0  # nothing above batch 0 in the window (or unstable): a lone request
    q[empty, 0] = 1.0
    mean = (q * tau).sum(axis=1)
    dev = tau - mean[:, None]
    cdf = np.minimum(np.cumsum(q, axis=1), 1.0)
    # the uniform table: each support point's mass goes to the first table point at or above it
    lo = dev[:, 0]
    span = dev[:, -1] - lo
    step = np.where(span > 0, span / (CDF_POINTS - 1), 1.0)
    bins = np.clip(np.ceil((dev - lo[:, None]) / step[:, None] - 1e-9), 0, CDF_POINTS - 1).astype(np.intp)
    flat = (bins + CDF_POINTS * np.arange(len(lo))[:, None]).ravel()
    mass = np.bincount(flat, weights=q.ravel(), minlength=len(lo) * CDF_POINTS)
    table = np.minimum(np.cumsum(mass.reshape(len(lo), CDF_POINTS), axis=1), 1.0)
    table = np.concatenate([np.zeros((len(lo), 1)), table], axis=1)
    rows, inv_rows = _shrink_table(np.ascontiguousarray(output_tokens, dtype=float).tobytes())
    pick = np.rint(occ.elasticity / (_EPS_GRID[1] - _EPS_GRID[0])).astype(np.intp)
    pick = np.clip(pick, 0, len(_EPS_GRID) - 1)
    if steps_s is None:
        return TpotSpread(mean, dev, cdf, rows[pick], inv_rows[pick], step, table)
    # item 4: alpha, the tokens decoded at a per-instance batch <= 1 (a batch below one is a batch-1
    # step). On a pool of R levelled instances only 2R - N of N tokens are alone for R < N < 2R;
    # counting those as alone put grid cell 26's shared requests at half the simulator's (its router
    # levels KV tokens, and the pool shares more than the level law's N > R; docs/validation.md,
    # session 10), so the per-token law's own batch is kept.
    alone = np.clip(np.where(occ.batch <= 1.0 + 1e-9, q, 0.0).sum(axis=1), 0.0, 1.0)
    levels = np.maximum.accumulate(np.asarray(steps_s, dtype=float), axis=1) - mean[:, None]
    ov = overlap_law(output_tokens)
    return TpotSpread(mean, dev, cdf, rows[pick], inv_rows[pick], step, table, alone, ov, levels)


@lru_cache(maxsize=64)
def _shrink_table(output_bytes: bytes) -> tuple[np.ndarray, np.ndarray]:
    """sqrt(g((1 - eps)(O_i - 1))) and its inverse, [len(_EPS_GRID), S], for the sampled outputs."""
    out = np.frombuffer(output_bytes, dtype=float)
    lags, g = _variance_table(output_bytes)
    gaps = np.maximum(out - 1.0, 1.0)
    shrink = np.sqrt(np.interp((1.0 - _EPS_GRID)[:, None] * gaps[None, :], lags, g))
    inv = 1.0 / np.maximum(shrink, 1e-12)
    shrink.flags.writeable = False
    inv.flags.writeable = False
    return shrink, inv


def decode_tpot_spread(
    demand_tokens_per_s: np.ndarray,
    grid: np.ndarray,
    per_token_s: np.ndarray,
    cap: np.ndarray,
    mean_batch: np.ndarray,
    output_tokens: np.ndarray,
    instances: np.ndarray | None = None,
) -> TpotSpread:
    """The per-request TPOT law of C decode pools (``instances`` each, behind a least-loaded router;
    per-instance demand, cap and mean batch): :func:`occupancy` then :func:`tpot_spread` with the
    light-batch overlap law (module docstring, item 4)."""
    occ = occupancy(demand_tokens_per_s, grid, per_token_s, cap, mean_batch, instances, whole=True)
    # item 4's step at per-instance batches 1 .. LIGHT_LEVELS (held at the cap), read as tau above
    c = np.maximum(np.floor(np.asarray(cap, dtype=float)), 1.0)[:, None]
    levels = np.minimum(np.arange(1.0, LIGHT_LEVELS + 1.0)[None, :], c)
    steps = batch_rows(levels, grid, per_token_s, instances is None or np.asarray(instances) == 1.0)
    return tpot_spread(occ, output_tokens, np.where(np.isfinite(steps), steps, np.inf))
