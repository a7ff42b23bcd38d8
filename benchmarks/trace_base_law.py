"""Trace one prefill-first (or chunked) grid cell's decode-only TPOT base: the simulator against the planner.

    PYTHONPATH=. python benchmarks/trace_base_law.py INDEX STYLE [RATE_FACTOR]

simulates grid scenario INDEX's best STYLE configuration at RATE_FACTOR x the planned goodput
(benchmarks.trace_colocated_tpot's iteration log) and prints, per measured request, its base (the
mean decode-only step time of the batches of its own decode-only iterations) and its token-average
batch, against the planner's base law at the same rate (model.queueing.decode_spread's TpotSpread,
read by sampling): quantiles, the per-token batch law in the measured span, and the variance ratio
Var[request's batch average] / Var[per-token batch] against the planner's mean g. docs/validation.md,
"Session 12".
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.trace_colocated_tpot import logged_cell
from benchmarks.validate_grid import SEED, plan_for, sample_scenario
from model.serving.registry import build_set


def planner_base(scn, config, rate: float, draws: int = 200_000) -> tuple[np.ndarray, float]:
    """(samples of the planner's per-request base, its mean g = shrink^2) at ``rate``."""
    spread = build_set(scn, [config]).evaluate(np.array([rate])).latency.spread
    mass = np.diff(spread.cdf[0], prepend=0.0)
    rng = np.random.default_rng(1)
    i = rng.integers(0, spread.shrink.shape[1], draws)
    k = rng.choice(len(mass), draws, p=mass / mass.sum())
    return spread.mean_s[0] + spread.shrink[0, i] * spread.dev_s[0, k], float((spread.shrink[0] ** 2).mean())


def main() -> None:
    index, style = int(sys.argv[1]), sys.argv[2]
    factor = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    plan = plan_for(sample_scenario(SEED, index))
    best, scn = plan.best[style], plan.inputs.scenario
    rate = best.goodput_rps * factor
    print(
        f"grid {index} {best.config.label()} at {rate:.4g} req/s; TPOT target {scn.slo.tpot_s * 1e3:.3f} ms"
    )
    planned, g = planner_base(scn, best.config, rate)
    print("planner base p50/p90/p99 ms", np.round(np.quantile(planned, [0.5, 0.9, 0.99]) * 1e3, 3))
    rec, it, _, mixed, step = logged_cell(scn, best, index, rate)
    m = rec.measured & np.isfinite(rec.end_s) & (rec.output_tokens > 1)
    rows = []
    for j in np.nonzero(m)[0]:
        own = it[(it[:, 0] == rec.instance[j]) & ~mixed]
        w = own[(own[:, 1] >= rec.first_token_s[j] - 1e-12) & (own[:, 2] <= rec.end_s[j] + 1e-12)]
        if len(w):
            rows.append((w[:, 4].mean(), np.mean([step[b] for b in w[:, 4]])))
    batch, base = np.array(rows).T
    print("simulator base p50/p90/p99 ms", np.round(np.quantile(base, [0.5, 0.9, 0.99]) * 1e3, 3))
    span = (~mixed) & (it[:, 1] >= rec.first_token_s[m].min()) & (it[:, 2] <= rec.end_s[m].max())
    n = it[span, 4]
    mean_n = (n * n).sum() / n.sum()
    var_n = (n * (n - mean_n) ** 2).sum() / n.sum()
    values, counts = np.unique(n, return_counts=True)
    law = {
        int(v): round(float(x), 4)
        for v, x in zip(values, values * counts / (values * counts).sum(), strict=True)
    }
    print(f"simulator per-token batch law {dict(list(law.items())[:6])}: mean {mean_n:.3f} var {var_n:.3f}")
    alone = np.mean(batch <= 1)
    print(f"request's batch average: mean {batch.mean():.3f} var {batch.var():.3f}, P(alone) {alone:.3f}")
    print(f"Var[average] / Var[per-token] {batch.var() / var_n:.3f}; planner's mean g {g:.3f}")


if __name__ == "__main__":
    main()
