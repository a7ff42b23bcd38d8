"""The wait of a prompt in a disaggregated prefill pool: a bulk-service queue, not a queue of shares.

The pool's n instances share one FCFS prompt queue and a freed instance takes every queued prompt
into its next step, up to the engine's token cap (J prompts of mean length: vLLM's
``max_num_batched_tokens``; model.sim.disaggregated does the same). This is the bulk-service queue
M/G^(1,J)/n (Chaudhry & Templeton 1983, *A First Course in Bulk Queues*, ch. 1 and 4; Neuts 1967,
"A general class of bulk queues with Poisson input", Ann. Math. Stat. 38, the "general bulk service
rule" with minimum 1 and maximum J): a freed server ends the wait of up to J prompts at once. A queue
over per-prompt shares (M/G/n, model.queueing.mgc) instead lets prompts leave one share at a time,
so its conditional wait carries the factor 1 / (1 - rho) of a queue that clears one by one (Kleinrock
1975, vol. 1, sec. 3.5), where the bulk queue clears at the next free instance unless more than J
prompts wait.

Law. A prompt waits only when all n instances are busy (P(W > 0): Erlang C over the shares, the
busy fraction rho = lambda E[share] / n, model.queueing.mgc). Given that, with S an instance's step
(mean E[S], squared coefficient of variation c_S^2) and g = E[S] / n the mean time between free-ups:

1. First free-up. n = 1: the residual life of the step in progress, E[S^2] / (2 E[S]) = E[S] (1 +
   c_S^2) / 2 (Kleinrock 1975, vol. 1, sec. 5.2). n >= 2: the first of n step ends; the n
   instances' step ends superpose towards a Poisson process of rate 1 / g (Palm-Khintchine theorem:
   Khintchine 1960, *Mathematical Methods in the Theory of Queueing*, ch. 5; Cox 1962, *Renewal
   Theory*, sec. 6.3), so its mean is g.
2. Full steps ahead. While all are busy a free-up takes min(Q, J) of the Q queued prompts. At the
   free-up epochs Q is the bulk-service chain Q' = max(Q + A - J, 0)-like with A ~ the arrivals in a
   gap, whose queue length has a geometric tail P(Q >= q) = r^q, r = 1 / z0 with z0 > 1 the
   dominant root of z^J = G*(lambda (1 - z)), G* the gap's Laplace-Stieltjes transform (Bailey 1954,
   "On queueing processes with bulk service", J. R. Stat. Soc. B 16; Chaudhry & Templeton 1983,
   ch. 4; exact for exponential gaps, the M/M^(1,J)/1 queue of Gross, Shortle, Thompson & Harris
   2008, *Fundamentals of Queueing Theory*, 4th ed., sec. 3.3.2, whose root equation is
   (1/g) r^(J+1) - (lambda + 1/g) r + lambda = 0). The gap is taken gamma of mean g and squared
   coefficient of variation c_g^2 (two moments: G*(s) = (1 + s g c_g^2)^(-1 / c_g^2)), c_g^2 that of a
   superposition of n renewal streams of c_S^2 by Whitt's QNA hybrid, c_g^2 = w c_S^2 + 1 - w, w =
   1 / (1 + 4 (1 - rho)^2 (n - 1)) (Whitt 1983, "The queueing network analyzer", Bell Syst. Tech. J.
   62(9), sec. 4.2; Albin 1984): busy back to back at high load, the instances' step ends stagger and
   the gaps are as regular as the steps; c_g^2 = c_S^2 for n = 1. The prompt leaves at the free-up
   that reaches it, M = floor(Q / J) + 1, P(M > m) = r^(m J): E[M - 1] = r^J / (1 - r^J).
   So E[W | W > 0] = E[first free-up] + g r^J / (1 - r^J), its law taken exponential (a geometric
   number of exponential gaps is exponential) as model.queueing.mgc's.
3. Prompts ahead in its step: Q mod J of them. By Little's law on the waiting room and PASTA,
   E[Q | W > 0] = lambda E[W | W > 0] = q; with Q geometric of that mean (ratio s = q / (1 + q)),
   E[Q mod J] = s / (1 - s) - J s^J / (1 - s^J) (the geometric law folded modulo J): lambda times the
   first free-up's mean (the age of the gap, whose mean equals its residual's) when nothing overflows,
   about (J - 1) / 2 when the queue is long. Those behind it arrive during its wait
   (model.queueing.disaggregated_terms, "Packed step").

Limits (hand-derived in tests/test_bulk_wait.py): n = 1, J = 1 with exponential steps: r = rho and
the M/M/1 conditional wait E[S] / (1 - rho); with deterministic steps r is the M/D/1 queue's decay
rate (z0 = exp(rho (z0 - 1))) and the mean the geometric-tail approximation of the Pollaczek-Khinchine
value E[S] / (2 (1 - rho)), within 4% at rho = 0.9 (exact in heavy traffic); J -> infinity (no cap)
the first free-up alone, with lambda g prompts ahead. Non-Poisson arrivals scale the wait by Kingman's
factor (c_a^2 + c_S^2) / (1 + c_S^2), as model.queueing.mgc does (Whitt 1993, sec. 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ROOT_BISECTIONS = 60
"""Bisection steps for the root r in (0, 1) (its bracket halves each step: 2^-60, exact in floats)."""


@dataclass(frozen=True)
class BulkWait:
    """Per candidate [C]: E[W | W > 0] of the bulk queue (s) and the mean prompts ahead of a waiting
    prompt in its step."""

    cond_mean_s: np.ndarray
    ahead: np.ndarray


def queue_ratio(load: np.ndarray, step_prompts: np.ndarray, gap_scv: np.ndarray) -> np.ndarray:
    """The geometric ratio r in (0, 1) of the bulk queue [C] (module docstring, item 2): r = 1 / z0,
    z0 > 1 the root of z^J = (1 - x c (z - 1))^(-1 / c), x = ``load`` the mean arrivals per gap, J =
    ``step_prompts``, c = ``gap_scv`` (c = 0: z^J = exp(x (z - 1))); 1 where x >= J (the queue grows).

    In r: h(r) = -J ln r + log1p(-x c (1 / r - 1)) / c is (J - x)(1 - r) + o(1 - r) > 0 below r = 1
    and tends to -inf as r -> 0 (or at r = x c / (1 + x c), the gap transform's pole): bisection."""
    x = np.asarray(load, dtype=float)
    big_j = np.asarray(step_prompts, dtype=float)
    c = np.asarray(gap_scv, dtype=float)
    ok = x < big_j
    lo, hi = np.zeros(np.broadcast_shapes(x.shape, big_j.shape, c.shape)), np.ones(1)
    for _ in range(ROOT_BISECTIONS):
        r = 0.5 * (lo + hi)
        arg = x * (1.0 / r - 1.0)  # the gap's transform at lambda (1 - z), z = 1 / r
        with np.errstate(divide="ignore", invalid="ignore"):
            log_g = np.where(c > 1e-9, np.log1p(np.maximum(-c * arg, -1.0)) / np.maximum(c, 1e-9), -arg)
        above = -big_j * np.log(r) + log_g > 0.0
        lo, hi = np.where(above, lo, r), np.where(above, r, hi)
    return np.where(ok, 0.5 * (lo + hi), 1.0)


def bulk_wait(
    rate_rps: np.ndarray,
    step_mean_s: np.ndarray,
    step_scv: np.ndarray,
    servers: np.ndarray,
    step_prompts: np.ndarray,
    busy: np.ndarray,
    scv_arrival: float = 1.0,
) -> BulkWait:
    """E[W | W > 0] and the prompts ahead in the step of the bulk-service prefill queue (module
    docstring) [C]: ``rate_rps`` lambda, ``step_mean_s`` E[S] and ``step_scv`` c_S^2 of an instance's
    step, ``servers`` n, ``step_prompts`` J (whole prompts a full step takes, >= 1), ``busy`` rho (an
    instance's busy fraction, for the gaps' regularity). Inf where the queue grows (lambda E[S] / n >= J)."""
    lam = np.asarray(rate_rps, dtype=float)
    scv = np.asarray(step_scv, dtype=float)
    n = np.asarray(servers, dtype=float)
    big_j = np.maximum(np.asarray(step_prompts, dtype=float), 1.0)
    gap = np.asarray(step_mean_s, dtype=float) / n  # mean time between free-ups while all are busy
    rho = np.clip(np.asarray(busy, dtype=float), 0.0, 1.0)
    w = 1.0 / (1.0 + 4.0 * (1.0 - rho) ** 2 * (n - 1.0))  # QNA's superposition weight (item 2)
    r = queue_ratio(lam * gap, big_j, w * scv + 1.0 - w)
    with np.errstate(divide="ignore", invalid="ignore"):
        full = r**big_j / (1.0 - r**big_j)  # E[free-ups after the first]
        first = np.where(n <= 1.0, (1.0 + scv) / 2.0, 1.0) * gap
        kingman = (scv_arrival + scv) / (1.0 + scv)
        cond = np.where(r < 1.0, (first + gap * full) * kingman, np.inf)
        s = lam * cond / (1.0 + lam * cond)  # the queue's geometric ratio from its mean (item 3)
        ahead = np.where(r < 1.0, s / (1.0 - s) - big_j * s**big_j / (1.0 - s**big_j), np.inf)
    return BulkWait(cond, np.maximum(ahead, 0.0))
