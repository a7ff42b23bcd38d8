"""Run length of the planner-vs-simulator agreement benchmarks (docs/validation.md).

A chat request lives ~O x TPOT = 217 x 20 ms ~ 4 s in the decode batch, so a run must be long
against that for the batch to reach its steady state before the measured requests: with 800-1,500
requests and 10% warm-up, runs at 60-200 req/s end within one to five lifetimes, and the measured
requests meet a batch still filling up (p90 TPOT 17.6 ms at 200 req/s on 2 x B200 NVFP4 with 800
requests, 33.5 ms with 4,000: the short run's goodput was 1.4x too high). Every agreement benchmark
therefore simulates STEADY_REQUESTS requests and leaves out the first quarter (STEADY_WARMUP;
session runs a third, as their caches start empty).
"""

STEADY_REQUESTS = 6000
STEADY_WARMUP = STEADY_REQUESTS // 4
