"""Monte Carlo of one prefill-first replica's decode batch: does a prefill that freezes the batch widen it?

    PYTHONPATH=. python benchmarks/cohort_mc.py [PREFILL_S ...]

One replica, Poisson arrivals at grid cell 105's simulated rate (0.2029 req/s), outputs of 400
tokens, the decode step of Mixtral 1 x TP2 H200 at batches 1 .. 16 as the simulator ran it (4.64,
5.93, 6.91, 7.67, 8.25 ms at 1 .. 5; benchmarks/trace_colocated_tpot.py 105). Each arrival's
prefill takes PREFILL_S (default 0 and 0.123 s, the latter cell 105's: 2.5% of the time) either
freezing the batch (prefill-first: the engine prefills every waiting prompt before the next decode
step) or on a separate server (the request joins the batch when its prefill ends, nothing frozen).
Prints the per-token batch law's mean and variance, the variance of each request's own
token-average batch, and the same from the planner's laws: the birth-death chain (tau = t_dec /
(1 - lambda P)) with the M/G/inf variance factor g = 2/3 (equal outputs), and with the decode cohort
Poisson(2 lambda P) (model.queueing.colocated_base.cohort_spread). docs/validation.md, "Session 12".
"""

from __future__ import annotations

import sys

import numpy as np
from scipy.stats import poisson

# the simulator's decode step at batches 1 .. 5; 6 .. 16 a smooth extension (batches above 5 are rare
# here: the time-average batch is about lambda x 400 tokens x 5 ms = 0.4, the per-token one 1.4)
STEP_S = (
    np.array(
        [4.639, 5.929, 6.914, 7.669, 8.252, 8.7, 9.1, 9.5, 9.8, 10.1, 10.4, 10.6, 10.8, 11.0, 11.2, 11.4]
    )
    * 1e-3
)
RATE_RPS, OUTPUT, REQUESTS, WARM = 0.2029, 400, 25_000, 2_000


def decode_step(running: list[list[float]], tokens: np.ndarray, averages: list[float]) -> list[list[float]]:
    """One decode step of the batch ``running`` ([tokens left, batch sum, steps] per request): each
    request emits a token at batch n (``tokens[n]`` += n), the finished ones add their window-average
    batch to ``averages``; returns the requests still running."""
    n = len(running)
    tokens[n] += n
    for r in running:
        r[0] -= 1
        r[1] += n
        r[2] += 1
    averages += [r[1] / r[2] for r in running if r[0] <= 0]
    return [r for r in running if r[0] > 0]


def batch_moments(tokens: np.ndarray, averages: list[float]) -> tuple[float, float, float]:
    """(mean, variance) of the batch seen per token and the variance of the window averages past the
    warm-up."""
    q = tokens / tokens.sum()
    n = np.arange(len(q))
    mean = float((q * n).sum())
    return mean, float((q * (n - mean) ** 2).sum()), float(np.var(averages[WARM:]))


def simulate(prefill_s: float, freeze: bool, seed: int = 11) -> tuple[float, float, float]:
    """(per-token mean batch, its variance, variance of the requests' own token-average batch)."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / RATE_RPS, REQUESTS))
    t, i, free_at = 0.0, 0, 0.0
    running: list[list[float]] = []  # [tokens left, batch sum, steps]
    joining: list[float] = []  # separate prefill server: when each prompt joins
    tokens = np.zeros(64)
    averages: list[float] = []
    while i < REQUESTS or running or joining:
        if freeze:
            while i < REQUESTS and arrivals[i] <= t:
                t += prefill_s
                running.append([OUTPUT - 1, 0.0, 0])
                i += 1
        else:
            while i < REQUESTS and arrivals[i] <= t:
                free_at = max(free_at, arrivals[i]) + prefill_s
                joining.append(free_at)
                i += 1
            while joining and joining[0] <= t:
                joining.pop(0)
                running.append([OUTPUT - 1, 0.0, 0])
        if not running:
            t = max(t, min([*arrivals[i : i + 1], *joining[:1]]))
            continue
        n = len(running)
        t += STEP_S[min(n, len(STEP_S)) - 1]
        running = decode_step(running, tokens, averages)
    return batch_moments(tokens, averages)


def per_token_law(tau: np.ndarray) -> tuple[np.ndarray, float]:
    """The birth-death batch law with per-token time tau[n - 1] at batch n (p_n proportional to
    prod lambda E[O] tau / k, Kleinrock 1975, vol. 1, eq. 3.11), seen per token (weight n / tau):
    (that law, its variance)."""
    p = np.ones(len(tau) + 1)
    for k in range(1, len(p)):
        p[k] = p[k - 1] * RATE_RPS * OUTPUT * tau[k - 1] / k
    n = np.arange(len(p))
    q = np.zeros(len(p))
    q[1:] = n[1:] * p[1:] / tau
    q /= q.sum()
    return q, float((q * n * n).sum() - (q * n).sum() ** 2)


def with_cohort_variance(q: np.ndarray, cohort: float) -> float:
    """The variance of the per-token batch law ``q`` plus an independent Poisson(``cohort``) count."""
    qc = np.convolve(q, poisson.pmf(np.arange(6), cohort))
    m = np.arange(len(qc))
    return float((qc * m * m).sum() / qc.sum() - ((qc * m).sum() / qc.sum()) ** 2)


def planner_laws(prefill_s: float) -> tuple[float, float, float, float]:
    """(chain per-token variance, chain window variance, cohort per-token variance, cohort window
    variance): the birth-death law with g = 2/3, and with the cohort Poisson(2 lambda P)."""
    q, v = per_token_law(STEP_S / (1.0 - RATE_RPS * prefill_s))
    c = 2.0 * RATE_RPS * prefill_s
    vc = with_cohort_variance(q, c)
    g = 2.0 / 3.0
    return v, g * v, vc, g * v + (vc - v)


def main() -> None:
    for prefill_s in [float(a) for a in sys.argv[1:]] or [0.0, 0.123]:
        for freeze in (True, False):
            mean, var, window = simulate(prefill_s, freeze)
            label = "frozen" if freeze else "separate"
            print(f"P = {prefill_s:.3f} s {label}: per-token mean {mean:.3f} var {var:.3f}; ", end="")
            print(f"window var {window:.3f}")
        v, w, vc, wc = planner_laws(prefill_s)
        print(f"  birth-death law: per-token var {v:.3f}, window var {w:.3f}; ", end="")
        print(f"with the cohort {vc:.3f}, {wc:.3f}")


if __name__ == "__main__":
    main()
