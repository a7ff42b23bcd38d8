"""Prompt packing: how many waiting prompts an engine puts into one step, and each prompt's share of it.

One function serves every place prompts share a step: a disaggregated prefill instance
(model.serving.disaggregated), a colocated replica's prefill-first step and a colocated replica's
chunked iteration (model.serving.colocated). The engine (vLLM's scheduler, SGLang's PrefillAdder,
TensorRT-LLM's in-flight batching: the engine profile's ``prefill_policy`` "fcfs-token-cap") takes
every waiting prompt first-come-first-served into its next step while their tokens fit in the step's
token cap (``prefill_token_cap`` without chunking, the chunk budget left by the decodes with it), so
the per-step part of a prefill F (step overhead, kernel launches, exposed weight reads, all-reduce
latencies: ``InstanceTables.prefill_fixed_s``) is paid once for the step's k prompts. The simulator
forms its steps the same way (model.sim.colocated, model.sim.disaggregated).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from model.hardware.engines import Router
from model.queueing.memo import memoized
from model.queueing.mgc import erlang_c_unchecked
from model.queueing.routing import routed_mean_wait_unchecked
from model.serving.common import moments
from model.workload.scenario import Scenario

# Damped fixed-point iterations for the batch size (converges to < 1% in a handful).
PREFILL_BATCH_ITERATIONS = 8
PREFILL_BATCH_TOL = 1e-3
"""A candidate's iteration stops once its k moved by no more than this fraction in a step (k is a
mean over sampled prompts; a 0.1% change moves the per-prompt share of F by less than that)."""


def prompts_per_step(scn: Scenario, step_tokens: float | np.ndarray) -> np.ndarray:
    """Cap on the mean prompts one step holds when the queue is long: floor(step tokens / mean
    uncached prompt tokens), at least 1 (an engine always takes one prompt, however long)."""
    mean = max(float(np.mean(uncached_prompt_tokens(scn))), 1.0)
    return np.maximum(np.floor(np.asarray(step_tokens, dtype=float) / mean), 1.0)


# Monte Carlo sequences of FCFS prompts behind a step's first prompt (seeded, so deterministic), the
# most prompts counted in a step, and the points of the grid of mean waiting prompts k on which the
# companions are tabulated.
FILL_DRAWS = 512
FILL_SEED = 0
FILL_MAX_PROMPTS = 256
FILL_GRID = 129


def step_companions(k: np.ndarray, uncached_tokens: np.ndarray, step_tokens: float | None) -> np.ndarray:
    """Prompts in each sampled prompt's step [C, S], itself included, when a step carries k prompts
    on average and its token cap is ``step_tokens`` (None: k for every prompt, no cap).

    The engine fills a step FCFS while the prompts' tokens fit under the cap C (vLLM's
    ``max_num_batched_tokens``, the profile's ``prefill_token_cap``; SGLang's PrefillAdder stops at
    the first prompt that does not fit), so a prompt of u_i tokens is joined by the first j waiting
    prompts only if u_1 + ... + u_j <= C - u_i, and only if j are waiting. With N waiting prompts
    geometric of mean k - 1 (P(N >= j) = q^j, q = 1 - 1 / k) and independent of their lengths,
    E[companions] = sum_j q^j P(u_1 + ... + u_j <= C - u_i) (E[min(N, J)] = sum_j P(N >= j) P(J >= j)
    for the number J that fit; the partial sums are drawn from the sampled prompts). Ours, checked
    against the simulator (docs/queueing.md, "Prefill packing under the token cap"). A long prompt
    runs nearly alone and pays nearly all of its step's per-step part F; with short prompts and a
    large cap it is 1 + (k - 1) = k, the value without the cap. It matters most where F is most of
    the step: attention data parallelism, where a lone prompt runs on one attention rank while the
    others idle (F = 2 S - S(2) ~ 90% of a DEP prefill)."""
    k = np.maximum(np.asarray(k, dtype=float), 1.0)
    u = np.asarray(uncached_tokens, dtype=float)
    if step_tokens is None:
        return np.broadcast_to(k[:, None], (len(k), len(u)))
    table = _companion_table(u.tobytes(), float(step_tokens))  # (values, rises)
    # linear in log k between the tabulated k (geometric, FILL_GRID points from 1 to FILL_MAX_PROMPTS)
    lo, frac = _grid_position(k)
    # np.take with mode="clip" (lo is in range): several times faster than fancy indexing here
    out = np.take(table[1], lo, axis=0, mode="clip")  # the rise to the next tabulated k
    out *= frac[:, None]
    out += np.take(table[0], lo, axis=0, mode="clip")
    # table values are >= 1; linear interpolation of the convex rows can pass k by a hair
    return np.minimum(out, k[:, None], out=out)


@lru_cache(maxsize=64)
def _companion_table(uncached_bytes: bytes, step_tokens: float) -> tuple[np.ndarray, np.ndarray]:
    """Companions 1 + sum_j q^j P(u_1 + ... + u_j <= C - u_i), q = 1 - 1 / k, [K, S] on FILL_GRID
    values of k geometric from 1 to FILL_MAX_PROMPTS, for the sampled uncached prompt lengths (bytes,
    so the table caches on their values), and each row's rise to the next row."""
    u = np.maximum(np.frombuffer(uncached_bytes, dtype=float), 1.0)
    rng = np.random.default_rng(FILL_SEED)
    j_max = int(min(max(step_tokens // float(u.min()), 1.0), FILL_MAX_PROMPTS))
    sums = np.sort(np.cumsum(rng.choice(u, size=(FILL_DRAWS, j_max)), axis=1), axis=0)  # [M, J]
    room = np.maximum(step_tokens - u, 0.0)
    fits = np.stack([np.searchsorted(sums[:, j], room, side="right") for j in range(j_max)], axis=1)
    fits = fits / FILL_DRAWS  # [S, J]: P(the j prompts behind it fit)
    q_grid = 1.0 - 1.0 / np.geomspace(1.0, FILL_MAX_PROMPTS, FILL_GRID)
    powers = q_grid[:, None] ** np.arange(1, j_max + 1)[None, :]  # [K, J]
    table = 1.0 + powers @ fits.T
    rise = np.diff(table, axis=0, append=table[-1:])
    table.flags.writeable = False
    rise.flags.writeable = False
    return table, rise


def _grid_position(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of the tabulated k at or below k, fraction to the next) on the companion table's grid
    (FILL_GRID points geometric from 1 to FILL_MAX_PROMPTS; linear in log k, as step_companions)."""
    pos = np.log(np.maximum(k, 1.0)) / np.log(FILL_MAX_PROMPTS) * (FILL_GRID - 1)
    pos = np.clip(pos, 0.0, FILL_GRID - 1.0)
    lo = np.minimum(np.floor(pos).astype(int), FILL_GRID - 2)
    return lo, pos - lo


@lru_cache(maxsize=64)
def _table_means(uncached_bytes: bytes, step_tokens: float) -> tuple[np.ndarray, np.ndarray]:
    """(1 / companions [K, S], mean companions [K]) on the companion table's grid (cached on the
    prompt lengths' values and the cap)."""
    table = _companion_table(uncached_bytes, step_tokens)[0]
    inverse = 1.0 / table
    mean = table.mean(axis=1)
    inverse.flags.writeable = False
    mean.flags.writeable = False
    return inverse, mean


def prefill_batch(
    scn: Scenario,
    rate_rps: np.ndarray,
    servers: np.ndarray,
    alone_s: np.ndarray,
    fixed_s: np.ndarray,
    cap: np.ndarray | float,
    router: Router,
) -> np.ndarray:
    """Mean number of prompts a colocated replica packs per step (>= 1), per candidate [C] (the
    disaggregated prefill pool takes its k from :func:`pool_batch` since session 11).

    ``servers`` (n) replicas behind ``router`` are fed at ``rate_rps`` (lambda), whose law gives the
    mean queue wait W_q (model.queueing.routing); ``alone_s`` / ``fixed_s`` [C, S] are each sampled
    prompt's time alone and the per-step part of it. A free replica takes every prompt queued for it,
    so a step carries its own prompt plus those that arrived while it waited: k = 1 + (lambda / n) W_q
    (Little's law), at most ``cap``. Each prompt's share of its replica is then v + F / k (v = alone -
    F), which in turn lowers W_q: the fixed point is found by damped iteration from k = 1 (or from the
    cap where the unpacked queue would be unstable).
    """
    lam = np.asarray(rate_rps, dtype=float)
    n = np.asarray(servers, dtype=float)
    variable = alone_s - fixed_s
    cap = np.broadcast_to(np.maximum(np.asarray(cap, dtype=float), 1.0), lam.shape)
    per_server = lam / n
    # from one prompt, or from the cap where the unpacked queue is unstable
    k = np.where(per_server * alone_s.mean(axis=1) < 1.0, 1.0, cap)
    # each candidate iterates until its own k settles, so its value does not depend on which other
    # candidates are evaluated with it (the goodput search evaluates a candidate at several rates)
    moving = np.ones(k.shape, dtype=bool)
    for _ in range(PREFILL_BATCH_ITERATIONS):
        share = variable + fixed_s / k[:, None]
        es, _, scv = moments(share)
        # lam >= 0 and n >= 1 as the caller's queue has them; es is finite (a sum of table times)
        es = np.maximum(es, 1e-12)
        stable, wait_s = routed_mean_wait_unchecked(router, lam, es, scv, n, scn.arrival_scv)
        target = np.where(stable, 1.0 + per_server * wait_s, cap)
        new = np.clip(0.5 * (k + np.clip(target, 1.0, cap)), 1.0, cap)
        settled = np.abs(new - k) <= PREFILL_BATCH_TOL * k
        k = np.where(moving, new, k)
        moving &= ~settled
        if not moving.any():
            break
    return k


POOL_BATCH_BISECTIONS = 14
"""Bisection steps on log k in [0, log FILL_MAX_PROMPTS] for :func:`pool_batch` (bracket 5.5 / 2^14: k
to 0.04% before the secant step inside the last bracket)."""


def step_law(
    alone_s: np.ndarray,
    fixed_s: np.ndarray,
    companions: np.ndarray,
    rate_rps: np.ndarray,
    servers: np.ndarray,
    full_prompts: float,
    fit_weights: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(E[share], its SCV, k_s, E[S], c_S^2) [C] of a prefill instance's steps when sampled prompt i
    shares its step with ``companions`` [C, S] prompts, itself included, in a pool of ``servers`` (n)
    instances fed at ``rate_rps`` (lambda); ``full_prompts`` E[J], the mean prompts of a full step
    (:func:`full_step_prompts`), ``fit_weights`` [S] the companions' law (:func:`companion_weights`).

    A prompt's share of its step is v_i + F_i / c_i (v = alone - F, F the per-step part,
    ``prefill_fixed_s``); a step of k prompts is met by k of them, so the step-weighted mean count is
    k_s = 1 / E[1 / c] and a step lasts E[S] = k_s E[share] on average (so that lambda E[S] / (n k_s)
    = lambda E[share] / n, the busy fraction). Its variance: :func:`step_count_var` for the count and
    the prompts' own lengths (:func:`_step_scv`)."""
    share = alone_s - fixed_s + fixed_s / companions
    es, _, scv = moments(share)
    lengths = companion_lengths(alone_s, fixed_s, fit_weights)
    k_step = 1.0 / (1.0 / companions).mean(axis=1)
    step_s = k_step * es
    lam, n = np.asarray(rate_rps, dtype=float), np.asarray(servers, dtype=float)
    step_scv = _step_scv(lengths[2], step_s, step_count_var(k_step, lam, n, es, lengths, full_prompts))
    return es, scv, k_step, step_s, step_scv


def companion_weights(scn: Scenario, step_tokens: float) -> np.ndarray:
    """The law of a step's prompts beside its first [S] (weights summing to 1): the engine takes a
    waiting prompt beside the head only if it fits under the cap with it (FCFS; the module docstring), so
    sampled prompt j joins a step in proportion to the share of heads i it fits beside, mean_i
    1{u_i + u_j <= C} (u the uncached tokens; a prompt that fits beside none never shares a step).
    Without a binding cap every prompt weighs the same; with long prompts the companions are the short
    ones."""
    return _fit_weights(uncached_prompt_tokens(scn).tobytes(), float(step_tokens))


@lru_cache(maxsize=64)
def _fit_weights(uncached_bytes: bytes, step_tokens: float) -> np.ndarray:
    """:func:`companion_weights` on the prompt lengths' bytes (cached on their values)."""
    u = np.frombuffer(uncached_bytes, dtype=float)
    fits = (np.sort(u)[:, None] + u[None, :] <= step_tokens).mean(axis=0)
    total = float(fits.sum())
    w = fits / total if total > 0 else np.full(len(u), 1.0 / len(u))
    w.flags.writeable = False
    return w


def companion_lengths(
    alone_s: np.ndarray, fixed_s: np.ndarray, fit_weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(E[v], Var[v] of a step's prompts beside its first under ``fit_weights``, Var[alone], E[v] over
    every prompt) [C], v = alone - F: the ``lengths`` of :func:`step_count_var`."""
    v = alone_s - fixed_s
    mean = v @ fit_weights
    var = np.maximum((v * v) @ fit_weights - mean * mean, 0.0)
    return mean, var, alone_s.var(axis=1), v.mean(axis=1)


def step_count_var(
    k_step: np.ndarray,
    rate_rps: np.ndarray,
    servers: np.ndarray,
    share_s: np.ndarray,
    lengths: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    full_prompts: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Var[K], the variance the prompts beside the first add to the step, the E[v] a step's count
    scales) [C] of the prompts per step K (mean k_s = ``k_step``, E[share] = ``share_s``; ``lengths`` =
    (E[v], Var[v], Var[alone], E[v] over every prompt) [C], v = alone - F with the first two over the
    prompts that join a step beside its first, :func:`companion_lengths`; ``full_prompts`` E[J], the mean
    prompts of a full step).

    One instance (n = 1, session 12): a step takes every prompt that arrived during the step before it
    (up to the cap), or one prompt when none did (the instance idled and the next arrival starts a step
    alone), so the counts are a branching chain: K' = N + 1{N = 0}, N ~ Poisson(lambda S), S = F_1 +
    v_1 + v_2 + ... + v_K (a Galton-Watson process with immigration; Athreya & Ney 1972, *Branching
    Processes*, ch. VI). With a = lambda E[v], e_0 = P(N = 0) = k_s (1 - lambda E[share]) (flow balance
    k_s = lambda E[S] + e_0, :func:`pool_batch`), Var[N] = lambda E[S] + lambda^2 Var[S] (a Poisson
    mixture), Var[S] = Var[alone] + (k_s - 1) Var[v] + E[v]^2 Var[K] (a compound sum: the first
    prompt's whole time, the others' v, drawn from the prompts that fit beside a head under the cap:
    with long prompts the companions are the short ones, :func:`companion_weights`) and Cov(N, 1{N =
    0}) = -E[N] e_0, stationarity (Var[K'] = Var[K]) gives

        Var[K] = ((k_s - e_0)(1 - 2 e_0) + e_0 (1 - e_0) + lambda^2 (Var[alone] + (k_s - 1) Var[v]))
                 / (1 - a^2).

    A long step gathers many prompts, which make the next step long: near saturation (a -> 1) the count
    is far more spread than a geometric one of the same mean (the KV-tier splits' one prefill instance
    at 37 req/s: 10.2 simulated, 6.9 by this law at the planned k_s, 3.6 geometric; docs/validation.md,
    session 12). The token cap stops the chain's largest steps: K lies between 1 and the J prompts a
    full step holds, so Var[K] <= (k_s - 1)(E[J] - k_s) (the Bhatia-Davis bound, Bhatia & Davis 2000,
    Amer. Math. Monthly 107(4), for a variable in [1, J], J read at its mean): the lesser of the two is
    taken (prompts longer than the cap run alone, k_s = 1 and no spread, where the chain alone gave
    grid cell 30's RAG steps a spread that doubled their SCV).
    Several instances (n > 1): the number beside the first prompt is geometric of mean k_s - 1 (Poisson
    arrivals over an exponential gap; variance (k_s - 1) k_s) and the step's variance Var[alone] + E[v]^2
    Var[K], the law before session 12: a take there gathers the arrivals since the previous free-up of
    any instance, whose gap mixes n steps (not derived further)."""
    lam = rate_rps / servers
    v_mean, v_var, alone_var, v_all = lengths
    a = np.minimum(lam * v_mean, 1.0 - 1e-9)
    e0 = np.clip(k_step * (1.0 - lam * share_s), 0.0, 1.0)
    beside = np.maximum(k_step - 1.0, 0.0) * v_var
    chain = (k_step - e0) * (1.0 - 2.0 * e0) + e0 * (1.0 - e0) + lam**2 * (alone_var + beside)
    chain = np.minimum(chain / (1.0 - a**2), (k_step - 1.0) * np.maximum(full_prompts - k_step, 0.0))
    one = servers == 1.0
    count_var = np.where(one, np.maximum(chain, 0.0), (k_step - 1.0) * k_step)
    return count_var, np.where(one, beside, 0.0), np.where(one, v_mean, v_all)


def _step_scv(
    alone_var_s2: np.ndarray, step_s: np.ndarray, count: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> np.ndarray:
    """:func:`step_law`'s c_S^2 [C]: (Var[alone] + the prompts beside the first + E[v]^2 Var[K]) / E[S]^2,
    the last two from :func:`step_count_var` (``count``)."""
    count_var, beside, v_count = count
    return (alone_var_s2 + beside + v_count**2 * count_var) / np.maximum(step_s, 1e-12) ** 2


def pool_batch(
    scn: Scenario, rate_rps: np.ndarray, servers: np.ndarray, alone_s: np.ndarray, fixed_s: np.ndarray
) -> np.ndarray:
    """The mean waiting prompts k [C] of a disaggregated prefill pool's steps (the argument of
    :func:`step_companions`) at which the steps' count follows the pool's packing law.

    The pool's n instances share one FCFS queue fed by Poisson arrivals at lambda; a freed instance
    takes the queue up to the token cap, an instance that finds the queue empty idles and the next
    arrival starts a step alone. A prompt that finds all n busy (probability P_W, PASTA: Wolff 1982)
    waits and is taken with the others queued at a free-up, k_q of them per take on average; the
    other 1 - P_W start a step of their own. Counting steps per prompt (lambda / k_s steps per
    second, lambda (1 - P_W) of them alone and lambda P_W / k_q takes):

        1 / k_s = 1 - P_W + P_W / k_q,   k_q = lambda g / (1 - e_0),   g = E[S] / n

    (the takes: free-ups while all n are busy, n / E[S] per busy second, each finding the queue
    non-empty with probability 1 - e_0, carry the lambda P_W waiting prompts). n = 1: P_W = rho =
    lambda E[S] / k_s, so k_s = lambda E[S] + e_0 (the prompts arriving during a step ride in the
    next one, plus one for each step started from idle). The queue is empty at a free-up when nothing
    arrived since it was last emptied, a time G, and the take that emptied it left nobody behind:
    e_0 = phi (1 - p) / (1 - phi p), phi = E[exp(-lambda G)], p the probability that a take leaves
    prompts behind (a geometric series over the takes since the last empty queue). G: one instance's
    step (n = 1) or the pool's gap between step ends, of mean g and squared coefficient of variation
    w c_S^2 + 1 - w, w = 1 / (1 + 4 (1 - rho)^2 (n - 1)) (the superposition of n step-end streams,
    Whitt 1983, "The Queueing Network Analyzer", Bell Syst. Tech. J. 62(9), sec. 4.2), taken gamma:
    phi = (1 + lambda g c_G^2)^(-1 / c_G^2) (its Laplace transform). A take finds N >= 1 prompts, of
    mean lambda g / (1 - phi); with the N - 1 behind the head geometric (:func:`step_companions`' law),
    the token cap leaves some behind with probability p = 1 - E[c] / E[N] (sum_j q^j (f_(j-1) - f_j) =
    1 - c (1 - q) for q = 1 - 1 / E[N], c the capped companions, f_j the chance that the next j fit).
    P_W: Erlang C at the busy fraction (model.queueing.mgc; the pool's P(wait)).

    E[S], c_S^2 and rho come from the steps' companions at k (:func:`step_law`), so k_s(k) rises with
    k while the law's k_s falls (more packing: a lower busy fraction and P_W): the root is found by
    bisection on log k, at most FILL_MAX_PROMPTS (where even full steps cannot carry the load; the
    queue over shares then reports the pool unstable). Checked against the simulator's steps
    (docs/validation.md, session 11): grid cell 0's DEP4 prefill (one instance) k_s 1.82 / 2.09 and busy
    fraction 0.835 / 0.888 planned at 6.5 / 7.5 req/s against 1.73 / 1.99 and 0.832 / 0.887
    simulated, where :func:`prefill_batch`'s waiting-prompts fixed point read 2.29 / 2.58 and 0.73 / 0.79.
    Memoized on the inputs' values (the goodput search asks again for the same pools)."""
    uncached = uncached_prompt_tokens(scn)
    cap = float(scn.engine.prefill_token_cap)
    return _pool_batch(uncached, cap, rate_rps, servers, (alone_s, fixed_s))


@memoized
def _pool_batch(
    uncached: np.ndarray,
    cap_tokens: float,
    rate_rps: np.ndarray,
    servers: np.ndarray,
    step_s: tuple[np.ndarray, np.ndarray],
) -> np.ndarray:
    """:func:`pool_batch` from the uncached prompt tokens, the token cap and the (alone, fixed) step
    times [C, S] (memoized on their values)."""
    alone_s, fixed_s = step_s
    lam = np.asarray(rate_rps, dtype=float)
    n = np.asarray(servers, dtype=float)
    # step_law's means at every tabulated k at once, so that each trial k costs O(C): E[F / c] [C, K]
    # (a matrix product with the table of 1 / c), E[1 / c] and E[c] [K]; read linearly in log k
    # between the table's points, as step_companions reads c
    inverse, mean_c = _table_means(uncached.tobytes(), cap_tokens)
    fixed_over_c = (fixed_s @ inverse.T) / fixed_s.shape[1]
    v_mean = (alone_s - fixed_s).mean(axis=1)
    lengths = companion_lengths(alone_s, fixed_s, _fit_weights(uncached.tobytes(), cap_tokens))
    full_law = _full_law(uncached.tobytes(), cap_tokens)
    full_prompts = float((full_law[0] * full_law[1]).sum())  # E[J], as the caller's full step
    inverse_mean = inverse.mean(axis=1)
    rows = np.arange(len(lam))

    def excess(k: np.ndarray) -> np.ndarray:
        """k_s(k) less the packing law's k_s [C] (increasing in k)."""
        lo, frac = _grid_position(k)
        es = v_mean + fixed_over_c[rows, lo] * (1.0 - frac) + fixed_over_c[rows, lo + 1] * frac
        k_step = 1.0 / (inverse_mean[lo] * (1.0 - frac) + inverse_mean[lo + 1] * frac)
        step_s = k_step * es  # step_law's E[S] and c_S^2
        step_scv = _step_scv(lengths[2], step_s, step_count_var(k_step, lam, n, es, lengths, full_prompts))
        a = lam * es
        busy_all = erlang_c_unchecked(n, np.minimum(a, n))  # 1 where a >= n
        rho = np.minimum(a / n, 1.0)
        w = 1.0 / (1.0 + 4.0 * (1.0 - rho) ** 2 * (n - 1.0))
        c2 = np.maximum(w * step_scv + 1.0 - w, 1e-9)
        x = lam * step_s / n  # arrivals over the mean gap
        phi = (1.0 + x * c2) ** (-1.0 / c2)
        taken = np.maximum(x / np.maximum(1.0 - phi, 1e-12), 1.0)  # E[N | N >= 1]
        t_lo, t_frac = _grid_position(taken)
        fitted = np.minimum(mean_c[t_lo] * (1.0 - t_frac) + mean_c[t_lo + 1] * t_frac, taken)
        left = np.clip(1.0 - fitted / taken, 0.0, 1.0)
        e0 = phi * (1.0 - left) / (1.0 - phi * left)
        kq = x / np.maximum(1.0 - e0, 1e-12)  # prompts per take
        law = 1.0 / (1.0 - busy_all + busy_all / np.maximum(kq, 1.0))
        return k_step - np.maximum(law, 1.0)

    lo = np.zeros(lam.shape)  # log k
    hi = np.full(lam.shape, np.log(FILL_MAX_PROMPTS))
    f_lo, f_hi = excess(np.exp(lo)), excess(np.exp(hi))
    for _ in range(POOL_BATCH_BISECTIONS):
        mid = 0.5 * (lo + hi)
        f_mid = excess(np.exp(mid))
        up = f_mid < 0.0
        lo, f_lo = np.where(up, mid, lo), np.where(up, f_mid, f_lo)
        hi, f_hi = np.where(up, hi, mid), np.where(up, f_hi, f_mid)
    # one secant step inside the last bracket; where an end is -inf (all n busy: the law unbounded) or
    # there is no sign change (the root at k = 1 or beyond FILL_MAX_PROMPTS) the upper end is kept
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where((f_lo < 0.0) & (f_hi > 0.0) & np.isfinite(f_hi), f_lo / (f_lo - f_hi), 1.0)
    return np.exp(lo + np.clip(np.nan_to_num(t, nan=1.0), 0.0, 1.0) * (hi - lo))


def full_step_prompts(scn: Scenario, step_tokens: float) -> tuple[np.ndarray, np.ndarray]:
    """The law of the prompts a full step holds (the queue never empties), per step: (whole counts J >= 1,
    their probabilities). The engine takes the queue FCFS while the prompts' tokens fit under the cap
    and stops at the first that does not (a longer head runs alone): J = max(1, #{j : u_1 + ... + u_j
    <= C}) over FILL_DRAWS seeded sequences of the sampled uncached prompt lengths. The bulk queue's
    J (model.queueing.bulk_wait)."""
    return _full_law(uncached_prompt_tokens(scn).tobytes(), float(step_tokens))


@lru_cache(maxsize=64)
def _full_law(uncached_bytes: bytes, step_tokens: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`full_step_prompts` on the prompt lengths' bytes (cached on their values)."""
    sums = _draw_sums(uncached_bytes, step_tokens)
    held = np.maximum((sums <= step_tokens).sum(axis=1), 1)  # prefix sums are increasing
    counts, seen = np.unique(held, return_counts=True)
    return counts.astype(float), seen / float(FILL_DRAWS)


def _draw_sums(uncached_bytes: bytes, step_tokens: float) -> np.ndarray:
    """[FILL_DRAWS, j] prefix sums of FILL_DRAWS seeded FCFS sequences of the sampled prompt lengths
    (at least 1 token each), long enough for the most prompts the cap can hold (j <= FILL_MAX_PROMPTS):
    the draws :func:`full_step_prompts` and :func:`prompt_room_law` share."""
    u = np.maximum(np.frombuffer(uncached_bytes, dtype=float), 1.0)
    rng = np.random.default_rng(FILL_SEED)
    return np.cumsum(rng.choice(u, size=(FILL_DRAWS, most_prompts(u, step_tokens))), axis=1)


def most_prompts(u: np.ndarray, step_tokens: float) -> int:
    """The most prompts of lengths ``u`` (tokens, >= 1) a step under ``step_tokens`` can hold: the cap
    over the shortest, at least 1, at most FILL_MAX_PROMPTS."""
    return int(min(max(step_tokens // float(u.min()), 1.0), FILL_MAX_PROMPTS))


def room_law(fit: np.ndarray) -> np.ndarray:
    """The law [S, R + 1] of R_i per sampled prompt i from its values ``fit`` [D, S] on D draws (each
    1 / D): P(R_i = r), r = 0 .. max R."""
    width = int(fit.max()) + 1
    flat = (np.arange(fit.shape[1])[None, :] * width + fit).ravel()
    return np.bincount(flat, minlength=fit.shape[1] * width).reshape(fit.shape[1], width) / float(len(fit))


def prompt_room_law(scn: Scenario, step_tokens: float) -> np.ndarray:
    """The law of R_i [S, R + 1] per sampled prompt i: how many queued prompts ahead of it a step can take
    with it, R_i = #{j >= 1 : u_1 + ... + u_j <= C - u_i} (the cap less its own tokens is the room for the
    prompts ahead; FCFS, the engine stops at the first prompt that does not fit), over the same FILL_DRAWS
    seeded sequences as :func:`full_step_prompts` (so R_i <= J draw by draw). A free-up that finds Q ahead
    of it passes it iff Q > R_i (model.queueing.bulk_wait, item 4)."""
    return _room_law(uncached_prompt_tokens(scn).tobytes(), float(step_tokens))


@lru_cache(maxsize=64)
def _room_law(uncached_bytes: bytes, step_tokens: float) -> np.ndarray:
    """:func:`prompt_room_law` on the prompt lengths' bytes (cached on their values)."""
    u = np.maximum(np.frombuffer(uncached_bytes, dtype=float), 1.0)
    sums = _draw_sums(uncached_bytes, step_tokens)  # the draws of _full_law
    room = step_tokens - u
    law = room_law(np.stack([np.searchsorted(row, room, side="right") for row in sums]))  # R_i per draw
    law.flags.writeable = False
    return law


def uncached_prompt_tokens(scn: Scenario) -> np.ndarray:
    """Each sampled prompt's tokens a prefill step computes (less its cached prefix) [S]."""
    return np.asarray(scn.prompt_tokens - scn.cached_tokens, dtype=float)


def packed_behind_s(k: np.ndarray, alone_s: np.ndarray, fixed_s: np.ndarray) -> np.ndarray:
    """Mean time a prompt of a packed step waits for the prompts packed behind it [C, 1] (k [C]; or
    [C, S] with k per sampled prompt, :func:`step_companions`): every
    prompt of a step gets its first token when the step ends (F + the sum of the step's variable
    parts v; the simulator and vLLM return the step's tokens together), while the FCFS queue over
    shares (:func:`prefill_batch`) counts only the work ahead of it. At a uniformly random position
    among k prompts, (k - 1) / 2 of them are behind it: (k - 1) / 2 x E[v], v = alone - F.
    (Batch service: a customer completes with its batch, Chaudhry & Templeton 1983, *A First Course
    in Bulk Queues*, ch. 1.)"""
    k = np.asarray(k, dtype=float)
    k = k if k.ndim == 2 else k[:, None]
    return np.maximum(k - 1.0, 0.0) / 2.0 * (alone_s - fixed_s).mean(axis=1)[:, None]
