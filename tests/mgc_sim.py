"""A small FCFS G/G/c discrete-event simulator used as the oracle for model.queueing tests.

Test-only code (not part of the model). Two vectorised recursions:

* c = 1: Lindley's recursion W_{n+1} = max(0, W_n + S_n - T_{n+1}) solved in closed form as
  W_n = U_n - min_{k <= n} U_k with U the cumulative sum of S_{n-1} - T_n (Lindley 1952; Asmussen
  2003, *Applied Probability and Queues*, sec. III.6), one numpy pass per chain.
* c > 1: FCFS assignment to the earliest-free server (equivalent to the Kiefer-Wolfowitz workload
  recursion, Kiefer & Wolfowitz 1955; Asmussen 2003, sec. XII.2), stepping all independent chains
  at once: each Python step handles one customer of every chain.

Statistics discard a warm-up prefix of every chain; independent chains give a standard error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Sampler = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]


@dataclass(frozen=True)
class SimStats:
    """Waiting-time statistics of one simulated configuration."""

    mean_wait_s: float
    mean_wait_se_s: float
    prob_wait: float
    p50_wait_s: float
    p90_wait_s: float
    p99_wait_s: float
    n_customers: int


def exp_sampler(mean_s: float) -> Sampler:
    return lambda rng, shape: rng.exponential(mean_s, shape)


def det_sampler(value_s: float) -> Sampler:
    return lambda rng, shape: np.full(shape, value_s)


def lognormal_sampler(mean_s: float, scv: float) -> Sampler:
    """Lognormal with the given mean and SCV: sigma^2 = ln(1 + scv), mu = ln(mean) - sigma^2/2."""
    sigma2 = np.log1p(scv)
    mu = np.log(mean_s) - sigma2 / 2.0
    return lambda rng, shape: rng.lognormal(mu, np.sqrt(sigma2), shape)


def gamma_sampler(mean_s: float, scv: float) -> Sampler:
    """Gamma with the given mean and SCV: shape k = 1/scv, scale = mean * scv."""
    return lambda rng, shape: rng.gamma(1.0 / scv, mean_s * scv, shape)


def simulate_waits(
    interarrival: Sampler,
    service: Sampler,
    servers: int,
    n_per_chain: int,
    n_chains: int,
    warmup: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Waits of customers warmup..n_per_chain-1 of each chain, shape (n_chains, n_per_chain - warmup)."""
    t_gap = interarrival(rng, (n_chains, n_per_chain))
    s = service(rng, (n_chains, n_per_chain))
    if servers == 1:
        x = np.empty_like(s)
        x[:, 0] = 0.0
        x[:, 1:] = s[:, :-1] - t_gap[:, 1:]
        u = np.cumsum(x, axis=1)
        w = u - np.minimum(np.minimum.accumulate(u, axis=1), 0.0)
        return w[:, warmup:]
    arrivals = np.cumsum(t_gap, axis=1)
    free = np.zeros((n_chains, servers))
    rows = np.arange(n_chains)
    waits = np.empty((n_chains, n_per_chain))
    for i in range(n_per_chain):
        t = arrivals[:, i]
        j = free.argmin(axis=1)
        f = free[rows, j]
        start = np.maximum(f, t)
        waits[:, i] = start - t
        free[rows, j] = start + s[:, i]
    return waits[:, warmup:]


def summarise(waits: np.ndarray) -> SimStats:
    chain_means = waits.mean(axis=1)
    se = float(chain_means.std(ddof=1) / np.sqrt(len(chain_means))) if len(chain_means) > 1 else float("nan")
    flat = waits.ravel()
    p50, p90, p99 = np.quantile(flat, [0.5, 0.9, 0.99])
    return SimStats(
        float(flat.mean()), se, float(np.mean(flat > 0)), float(p50), float(p90), float(p99), flat.size
    )


def simulate_mgc(
    rate_rps: float,
    service: Sampler,
    servers: int,
    n_customers: int,
    rng: np.random.Generator,
    *,
    n_chains: int = 32,
    warmup_fraction: float = 0.2,
    interarrival: Sampler | None = None,
) -> SimStats:
    """Simulate an FCFS queue with Poisson (or given) arrivals; ``n_customers`` over all chains."""
    n_per_chain = max(10, n_customers // n_chains)
    gaps = interarrival if interarrival is not None else exp_sampler(1.0 / rate_rps)
    waits = simulate_waits(
        gaps, service, servers, n_per_chain, n_chains, int(warmup_fraction * n_per_chain), rng
    )
    return summarise(waits)
