"""The number of prefill stalls a running request meets on a prefill-first replica, and its law.

A request decoding on a replica whose prefill steps pre-empt the decodes (prefill-first) is stalled
by (model.queueing.latency's module docstring):

* the prompts that join its replica while it decodes, a Poisson number for a fixed window, each
  opening a busy-period cluster (the stall load rho; :func:`stall_events`);
* the prompts that were queued behind it when it got its first token. A FCFS departure leaves behind
  exactly the customers that arrived during its time in system (Kleinrock 1975, *Queueing Systems*
  vol. 1, ch. 5): those that arrived during its own prefill step, and those that arrived during its
  queue wait W and did not fit into its step. Prefill-first serves them first thing in its decode,
  back to back (the prefill queue's busy period going on: each is a primary of the same busy-period
  law as the others).

The wait's share: a step packs the waiting prompts FCFS while their tokens fit under the engine's
token cap (model.serving.packing.step_companions), so of the A = lambda_r (W + t_step / 2) prompts
that reached the replica while it waited (and during the decode step in progress, mean residual
t_step / 2) its step takes E[min(N, J_i)] (N behind it, geometric of mean A; J_i the number that fit
beside its own u_i tokens) and leaves phi_i = 1 - E[min(N, J_i)] / A of them behind, in the mean
(model.serving.queued_behind.left_behind): phi = 0 when the cap does not bind (the session-10 law, where
every waiting prompt shares the request's step), phi = 1 when a step holds one prompt (long prompts
with a cap near their length). :func:`wait_stall_rate` is phi lambda_r x the router's share / k:
primary stalls per second of the request's own wait (the left-behind prompts packed k to a step as
the others).

The wait W is random (model.queueing.latency: W = 0 with probability 1 - p, else exponential of mean
m), so the left-behind count M is a mixed Poisson: given W = w, Poisson(a w); unconditionally
P(M = 0) = 1 - p + p / (1 + a m) and P(M = j) = p (1 - theta) theta^j for j >= 1, theta =
a m / (1 + a m) (a Poisson count mixed over an exponential mean is geometric: Johnson, Kemp & Kotz,
*Univariate Discrete Distributions*, 3rd ed. 2005, sec. 5.2 and 8.3.2; Greenwood & Yule 1920), with
E[M] = p mu and E[M^2] = p (mu + 2 mu^2), mu = a m. The request's primaries are N = Poisson(n) + M
(independent: the prompts after its first token against those before it), whose P(N = 0),
P(N = 1) and moments given N >= 2 feed the latency model's zero / one / two-or-more stall terms
(:func:`count_law`). Its dispersion is what the wait adds: requests that waited long meet a burst
of queued prompts (docs/session13/pf15.md, the simulator's stall counts of grid cells 24 and 134).
"""

from __future__ import annotations

import numpy as np

MAX_STALL_LOAD = 0.95
"""Largest stall load rho the feedback uses (the moments grow as 1 / (1 - rho)^3; a decode that
stalls 95% of its time is far past any SLO anyway)."""


def free_fraction(stall_load: np.ndarray) -> np.ndarray:
    """1 - rho: the share of a running request's decode time its stalls leave free (rho clipped to
    [0, MAX_STALL_LOAD]); the busy-period feedback divides by it (model.queueing.latency)."""
    return 1.0 - np.clip(np.asarray(stall_load, dtype=float), 0.0, MAX_STALL_LOAD)


def stall_events(arrivals: np.ndarray, per_event: np.ndarray, stall_load: np.ndarray) -> np.ndarray:
    """[C, S] ``LatencyModel.stall_events`` from the prompts that join a request's replica from its own
    prefill start to the end of its plain decode time, ``arrivals`` [C, S]
    (model.queueing.routing.replica_arrivals over its prefill window plus (O - 1) t_dec; module
    docstring): ``per_event`` [C] stalls per prompt (1 / k with k prompts per packed step). They are
    the primary events: each opens a busy-period cluster, and the latency model's count is the
    primaries over 1 - rho (its ``stall_load``), so the primaries are divided by 1 - rho here (mean
    stall total count x per_event x E[s] / (1 - rho))."""
    free = free_fraction(stall_load)
    return (np.asarray(per_event, dtype=float) / free)[:, None] * np.asarray(arrivals, dtype=float)


def wait_stall_rate(rate_r: np.ndarray, share: np.ndarray, left: np.ndarray, k: np.ndarray) -> np.ndarray:
    """[C, S] primary stalls per second of a request's queue wait (module docstring): the prompts
    reaching its replica meanwhile, lambda_r x ``share`` [C] (the router's, model.queueing.routing
    .cohort_exposure), the share ``left`` [C, S] its own step leaves queued (phi,
    model.serving.queued_behind.left_behind), one stall per k [C] of them (prompts per packed step)."""
    lam = (
        np.asarray(rate_r, dtype=float)
        * np.asarray(share, dtype=float)
        / np.maximum(np.asarray(k, dtype=float), 1.0)
    )
    return lam[:, None] * np.asarray(left, dtype=float)


def wait_stall_mean(
    wait_rate: np.ndarray | None, wait_prob: np.ndarray, wait_mean_s: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(p [C], mu [C, S]) of the left-behind count M (module docstring): P(W > 0) and the mean count
    given W > 0, ``wait_rate`` [C, S] x E[W | W > 0] (zeros without a rate, or where the wait is not
    finite)."""
    p = np.asarray(wait_prob, dtype=float)
    if wait_rate is None:
        return np.zeros_like(p), np.zeros((len(p), 1))
    m = np.asarray(wait_mean_s, dtype=float)
    ok = np.isfinite(m) & np.isfinite(p)
    mu = np.asarray(wait_rate, dtype=float) * np.where(ok, m, 0.0)[:, None]
    return np.where(ok, p, 0.0), np.where(ok[:, None], mu, 0.0)


def count_law(
    n: np.ndarray, p: np.ndarray, mu: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(P(N = 0), P(N = 1), P(N >= 2), E[N | N >= 2], E[N^2 | N >= 2]) [C, S] of the primaries
    N = Poisson(``n`` [C, S]) + M, M the wait's mixed count (``p`` [C], ``mu`` [C, S] or [C, 1]; module
    docstring). With mu = 0 the plain Poisson law: E[N; N >= 2] = n - P1, E[N^2; N >= 2] = n + n^2 - P1."""
    p, mu = np.asarray(p, dtype=float)[:, None], np.asarray(mu, dtype=float)
    e = np.exp(-n)
    m0 = 1.0 - p + p / (1.0 + mu)
    m1 = p * mu / (1.0 + mu) ** 2
    p0 = e * m0
    p1 = n * e * m0 + e * m1
    mean = n + p * mu
    second = n + n * n + 2.0 * n * p * mu + p * (mu + 2.0 * mu * mu)
    small = (n < 1e-4) & (mu * p < 1e-4)
    p2 = np.where(small, (n * n + 2.0 * n * p * mu) / 2.0 + p * mu * mu, np.maximum(1.0 - p0 - p1, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        en = np.where(p2 > 0, (mean - p1) / p2, 2.0)
        en2 = np.where(p2 > 0, (second - p1) / p2, 4.0)
    return p0, p1, p2, np.where(small, 2.0, en), np.where(small, 4.0, en2)
