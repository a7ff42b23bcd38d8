"""Benchmark: mean and p90 wait for 1M (rate, servers) pairs in one vectorised call.

Run with ``pytest benchmarks/bench_queueing.py --benchmark-enable``
or ``python -m benchmarks.bench_queueing``.
"""

from __future__ import annotations

import time

import numpy as np

from model.queueing.mgc import erlang_c, mgc_wait

N = 1_000_000


def _grid(n: int = N) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    servers = rng.integers(1, 1025, n)
    rate = rng.uniform(0.05, 0.99, n) * servers  # mean service 1 s: utilisation 0.05..0.99
    return rate, servers


def _run(rate: np.ndarray, servers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r = mgc_wait(rate, 1.0, 0.8, servers)
    return r.mean_wait_s, r.p90_wait_s


def test_bench_mgc_1m(benchmark):
    rate, servers = _grid()
    mean, p90 = benchmark(_run, rate, servers)
    assert mean.shape == (N,) and np.all(np.isfinite(p90))


def test_bench_erlang_c_1m(benchmark):
    rate, servers = _grid()
    pw = benchmark(erlang_c, servers, rate)
    assert np.all((pw >= 0) & (pw <= 1))


def main() -> None:
    rate, servers = _grid()
    _run(rate[:1000], servers[:1000])
    best = min(_timed(rate, servers) for _ in range(5))
    print(f"mgc_wait (Kimura) mean+p90 for {N:,} (rate, servers) pairs: best of 5 = {best * 1e3:.0f} ms")


def _timed(rate: np.ndarray, servers: np.ndarray) -> float:
    t0 = time.perf_counter()
    _run(rate, servers)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
