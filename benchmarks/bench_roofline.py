"""Timing of the cost model: one estimate in-process, and 100k estimates vectorised.

Run: ``.venv/bin/python benchmarks/bench_roofline.py``. Figures are recorded in docs/model.md.
"""

from __future__ import annotations

import time

import numpy as np

from model.hardware.catalog import get_gpu
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.estimate import estimate
from model.physics.generation import chunked_prefill_time_s, mean_tpot_s
from model.physics.memory import memory_fit
from model.physics.steps import decode_step_cost, prefill_cost

N = 100_000


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    estimate("llama-3.1-70b", "h100-sxm", tp=4, isl=2048, osl=256, batch=8)  # warm the catalog caches
    one = best_of(lambda: estimate("llama-3.1-70b", "h100-sxm", tp=4, isl=2048, osl=256, batch=8), 50)
    print(f"one estimate (in-process, warm catalog): {one * 1e3:.3f} ms")

    rng = np.random.default_rng(0)
    batch = rng.integers(1, 257, N).astype(float)
    isl = rng.integers(1, 32769, N).astype(float)
    osl = rng.integers(2, 4097, N).astype(float)
    dep = Deployment(get_model("llama-3.1-70b"), get_gpu("h100-sxm"), parallel=4)

    def vectorised() -> None:
        prefill_cost(dep, isl, batch=batch)
        decode_step_cost(dep, batch, isl + osl / 2)
        mean_tpot_s(dep, batch, isl, osl)
        memory_fit(dep).max_batch(isl + osl)

    t = best_of(vectorised, 5)
    print(
        f"{N:,} estimates vectorised (prefill + decode step + TPOT + max batch): {t * 1e3:.1f} ms "
        f"({t / N * 1e9:.0f} ns per estimate)"
    )

    # The planner's chunked-prefill grid: prompt lengths x chunk sizes, decodes riding along.
    n = np.arange(128, 32768, 64.0)[:, None]
    c = np.array([256, 512, 1024, 2048, 4096, 8192.0])[None, :]
    t = best_of(lambda: chunked_prefill_time_s(dep, n, c, decode_batch=16, decode_context_tokens=2000), 7)
    print(f"chunked_prefill_time_s on a {n.size} x {c.size} grid: {t * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
