"""Monte Carlo of one chunked replica's decode batch: do the prompts chunked in during a request's wait
and prefill form a decode cohort, and how large is it?

    PYTHONPATH=. python benchmarks/cohort_mc_chunked.py [PREFILL_S:CHUNKS ...]

benchmarks/cohort_mc.py's replica (grid cell 105's rate 0.2029 req/s, 400-token outputs, the Mixtral
1 x TP2 H200 decode step), with chunked prefill: each arrival's prefill of PREFILL_S runs as CHUNKS
chunks, one per iteration, first-come-first-served; an iteration with a chunk takes the chunk's time
plus the decode step of the running batch (each running request gains one token), one without takes
the decode step; a prompt decodes from the iteration after its last chunk. Prints the per-token batch
law's variance and the variance of each request's own token-average batch, against the planner's
laws: the birth-death chain at tau(n) = 1 / (u / t_mix + (1 - u) / t_dec) (model.serving.colocated),
with g = 2/3 (equal outputs), without a cohort, with the cohort of
model.queueing.colocated_base.cohort_mean (c = lambda (W + 2 S) (1 - t_dec / t_mix), W the M/D/1
wait of S = CHUNKS t_mix) and with that cohort unscaled (frozen share 1). docs/session13/cohort15.md.
"""

from __future__ import annotations

import sys
from collections import deque

import numpy as np

from benchmarks.cohort_mc import (
    OUTPUT,
    RATE_RPS,
    REQUESTS,
    STEP_S,
    batch_moments,
    decode_step,
    per_token_law,
    with_cohort_variance,
)


def simulate(prefill_s: float, chunks: int, seed: int = 11) -> tuple[float, float, float]:
    """(per-token mean batch, its variance, variance of the requests' own token-average batch)."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / RATE_RPS, REQUESTS))
    chunk_s = prefill_s / chunks
    t, i = 0.0, 0
    queue: deque[int] = deque()  # chunks left of each prompt waiting or in prefill
    running: list[list[float]] = []  # [tokens left, batch sum, steps]
    tokens = np.zeros(64)
    averages: list[float] = []
    while i < REQUESTS or running or queue:
        while i < REQUESTS and arrivals[i] <= t:
            queue.append(chunks)
            i += 1
        n = len(running)
        if not queue and not n:
            t = arrivals[i]
            continue
        t += (STEP_S[min(n, len(STEP_S)) - 1] if n else 0.0) + (chunk_s if queue else 0.0)
        if n:
            running = decode_step(running, tokens, averages)
        if queue:
            queue[0] -= 1
            if queue[0] == 0:
                queue.popleft()
                running.append([OUTPUT - 1, 0.0, 0])
    return batch_moments(tokens, averages)


def planner_laws(prefill_s: float, chunks: int) -> dict[str, tuple[float, float]]:
    """(per-token variance, window variance) of the birth-death law with no cohort, with the frozen
    share's cohort and with the unscaled one."""
    t_mix = prefill_s / chunks + STEP_S
    s = chunks * t_mix[0]  # the prefill span at the light batch (the request's own: batch ~1)
    u = RATE_RPS * chunks * t_mix
    tau = 1.0 / (u / t_mix + (1.0 - u) / STEP_S)
    q, v = per_token_law(tau)
    wait = RATE_RPS * s * s / (2.0 * (1.0 - RATE_RPS * s))  # M/D/1 (Pollaczek-Khinchine)
    frozen = float(1.0 - (q[1:] * STEP_S / t_mix).sum())  # 1 - t_dec / t_mix at the per-token batch
    g = 2.0 / 3.0
    out = {"none": (v, g * v)}
    for label, c in (("frozen", RATE_RPS * (wait + 2 * s) * frozen), ("unscaled", RATE_RPS * (wait + 2 * s))):
        vc = with_cohort_variance(q, c)
        out[f"{label} c={c:.4f}"] = (vc, g * v + (vc - v))
    return out


def main() -> None:
    for arg in sys.argv[1:] or ["0.136:2", "0.123:8", "0.123:24"]:
        prefill_s, chunks = float(arg.split(":")[0]), int(arg.split(":")[1])
        mean, var, window = simulate(prefill_s, chunks)
        print(f"P = {prefill_s:.3f} s in {chunks} chunks: per-token mean {mean:.3f} var {var:.3f}; ", end="")
        print(f"window var {window:.3f}")
        for label, (vt, vw) in planner_laws(prefill_s, chunks).items():
            print(f"  law {label}: per-token var {vt:.3f}, window var {vw:.3f}")


if __name__ == "__main__":
    main()
