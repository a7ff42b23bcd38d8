"""Simulator vs the queueing layer: a prefill pool with one prompt per batch is an FCFS G/G/c queue.

With output length 1 and free transfers/decodes, the prefill queue wait is the queue's waiting time,
so model.queueing's exact M/D/1 (Pollaczek-Khinchine) and M/M/c (Erlang C) results are oracles.
Four independent seeded runs of 25,000 customers each (first 10% dropped as warm-up) are pooled;
the tolerances are about three standard errors of the pooled mean at these loads.
"""

from __future__ import annotations

import numpy as np
import pytest

from model.queueing.mgc import md1_wait, mmc_wait
from model.sim.simulate import CallableSteps, InstanceSpec, SimOptions, SimRequests, simulate_disaggregated

N = 25_000
SEEDS = (11, 12, 13, 14)
BIG = 10**9
MS_PER_TOKEN = 1e-3  # prefill service time = 1 ms per prompt token


def queue_waits(rate_rps: float, servers: int, prompts_of, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate_rps, N))
    prompts = prompts_of(rng)
    requests = SimRequests(arrivals, prompts, np.ones(N, dtype=int))
    prefill = InstanceSpec(CallableSteps(lambda ps: MS_PER_TOKEN * sum(ps), lambda b, c: 0.0), BIG, BIG, 1)
    decode = InstanceSpec(CallableSteps(lambda ps: 0.0, lambda b, c: 0.0), BIG, BIG)
    res = simulate_disaggregated(
        prefill,
        servers,
        decode,
        1,
        lambda n: (0.0, 0.0),
        requests,
        layerwise=False,
        options=SimOptions(warmup_requests=N // 10),
    )
    r = res.records
    return r.queue_wait_s[r.measured]


def pooled(rate_rps: float, servers: int, prompts_of) -> np.ndarray:
    return np.concatenate([queue_waits(rate_rps, servers, prompts_of, s) for s in SEEDS])


def test_md1_prefill_queue_matches_pollaczek_khinchine():
    # D = 1000 tokens x 1 ms = 1 s, lambda = 0.7: E[W] = rho D / (2 (1 - rho)) = 0.7 / 0.6 = 1.1667 s.
    w = pooled(0.7, 1, lambda rng: np.full(N, 1000))
    oracle = md1_wait(0.7, 1.0)
    assert float(oracle.mean_wait_s) == pytest.approx(0.7 / 0.6)
    assert w.mean() == pytest.approx(0.7 / 0.6, rel=0.06)
    assert (w > 1e-12).mean() == pytest.approx(0.7, abs=0.015)  # P(W > 0) = rho


def test_mmc_prefill_pool_matches_erlang_c():
    # Geometric prompt lengths with mean 1000 -> service ~ exponential, mean 1 s; c = 3, a = 2.1.
    # Erlang C(3, 2.1) = 0.4923; E[W] = C / (c mu - lambda) = 0.4923 / 0.9 = 0.547 s.
    w = pooled(2.1, 3, lambda rng: rng.geometric(1.0 / 1000.0, N))
    oracle = mmc_wait(2.1, 1.0, 3)
    assert float(oracle.prob_wait) == pytest.approx(0.4923, abs=1e-4)
    assert w.mean() == pytest.approx(float(oracle.mean_wait_s), rel=0.06)
    assert (w > 1e-12).mean() == pytest.approx(float(oracle.prob_wait), abs=0.015)
    assert np.percentile(w, 90) == pytest.approx(float(oracle.p90_wait_s), rel=0.06)
