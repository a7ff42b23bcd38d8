"""Trace one colocated / chunked grid cell's TPOT: the simulator's iterations against the planner.

    PYTHONPATH=. python benchmarks/trace_colocated_tpot.py INDEX STYLE [RATE_FACTOR]

simulates grid scenario INDEX's best STYLE configuration ("colocated" or "colocated-chunked") at
RATE_FACTOR x the planned goodput on the grid's requests and run length
(benchmarks.validate_grid.simulate_cell's), logging every iteration (replica, start, end, mixed or
prefill, decode batch, prompt tokens), and prints: the TPOT percentiles (simulator and planner); the
decode-only step by batch; the mixed share F per request, its first iteration, and the TPOT and batch
by number of mixed iterations; each request's TPOT split into base (its iterations at the
decode-only time of their batch) and excess, their correlation, and the p90 with the excess shuffled
across requests (what an independent convolution of the two gives). docs/validation.md, "Session 10".
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

import numpy as np

from benchmarks.validate_grid import SEED, cell_records_at, plan_for, sample_scenario
from model.planner.types import BestConfig
from model.serving.evaluation import evaluate
from model.sim import colocated as simcol
from model.workload.scenario import Scenario


@contextmanager
def iteration_log():
    """Log (replica, start, end, mixed, decode batch, prompt tokens) of every iteration meanwhile."""
    log: list[tuple[float, ...]] = []
    saved = simcol.Replica._end_chunked, simcol.Replica._end_decode, simcol.Replica._end_prefill

    def end_chunked(self, arg):
        batch, pieces = arg
        chunk = sum(c for _, c in pieces)
        log.append((self.idx, self.iter_start, self.loop.now, float(chunk > 0), batch, chunk))
        return saved[0](self, arg)

    def end_decode(self, batch):
        log.append((self.idx, self.iter_start, self.loop.now, 0.0, batch, 0))
        return saved[1](self, batch)

    def end_prefill(self, batch):
        tokens = sum(self.rec.prompt[r] for r in batch)
        log.append((self.idx, self.iter_start, self.loop.now, 1.0, self.running, tokens))
        return saved[2](self, batch)

    simcol.Replica._end_chunked, simcol.Replica._end_decode, simcol.Replica._end_prefill = (
        end_chunked,
        end_decode,
        end_prefill,
    )
    try:
        yield log
    finally:
        simcol.Replica._end_chunked, simcol.Replica._end_decode, simcol.Replica._end_prefill = saved


def logged_cell(scn: Scenario, best: BestConfig, index: int, rate_rps: float) -> tuple:
    """Grid cell ``index``'s ``best`` configuration simulated at ``rate_rps`` with the iteration log:
    (records, iterations [I, 6] as :func:`iteration_log`, their durations, mixed-or-prefill flags, the
    decode-only step by batch)."""
    with iteration_log() as log:
        rec = cell_records_at(scn, best, index, rate_rps)
    it = np.array(log)
    dt, mixed = it[:, 2] - it[:, 1], it[:, 3] > 0
    step = {b: dt[~mixed & (it[:, 4] == b)].mean() for b in np.unique(it[~mixed, 4])}
    return rec, it, dt, mixed, step


def colocated_from_argv(argv: list[str]):
    """(grid index, best colocated configuration, scenario, rate, the planner's evaluation at it) for
    the trace tools' ``INDEX [FACTOR]`` arguments: the cell's plain colocated best at FACTOR x its
    planned goodput (default 1)."""
    import numpy as np

    from benchmarks.validate_grid import SEED, plan_for, sample_scenario
    from model.serving.registry import build_set

    index = int(argv[1])
    factor = float(argv[2]) if len(argv) > 2 else 1.0
    plan = plan_for(sample_scenario(SEED, index))
    best, scn = plan.best["colocated"], plan.inputs.scenario
    rate = best.goodput_rps * factor
    return index, best, scn, rate, build_set(scn, [best.config]).evaluate(np.array([rate]))


def trace_cells_cli(trace, argv: list[str]) -> None:
    """Print ``trace(cell, factor)`` for each cell of ``CELLS [--factor F]`` (the chunked trace tools)."""
    cells = [int(c) for c in argv[1].split(",")]
    factor = float(argv[argv.index("--factor") + 1]) if "--factor" in argv else 1.0
    for c in cells:
        print(trace(c, factor), flush=True)


def main() -> None:
    index, style = int(sys.argv[1]), sys.argv[2]
    factor = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    s = sample_scenario(SEED, index)
    plan = plan_for(s)
    best, scn = plan.best[style], plan.inputs.scenario
    rate = best.goodput_rps * factor
    ev = evaluate(best.config, scn, rate)
    print(
        f"grid {index} {best.config.label()} at {rate:.4g} req/s; TPOT target {scn.slo.tpot_s * 1e3:.3f} ms"
    )
    print(
        "planner TPOT p50/p90/p99 ms",
        [round(v * 1e3, 3) for v in (ev.tpot_s.p50, ev.tpot_s.p90, ev.tpot_s.p99)],
    )
    rec, it, dt, mixed, step = logged_cell(scn, best, index, rate)
    m = rec.measured & np.isfinite(rec.end_s) & (rec.output_tokens > 1)
    tpot = (rec.end_s - rec.first_token_s)[m] / (rec.output_tokens[m] - 1)
    print("simulator TPOT p50/p90/p99 ms", np.round(np.quantile(tpot, [0.5, 0.9, 0.99]) * 1e3, 3))
    print(
        "decode-only step by batch (ms):",
        {int(b): round(float(v) * 1e3, 3) for b, v in list(step.items())[:8]},
    )
    print(f"mixed iterations {mixed.mean():.3f} of all, {dt[mixed].sum() / dt.sum():.3f} of busy time")
    rows = []
    for i in np.nonzero(m)[0]:
        own = it[it[:, 0] == rec.instance[i]]
        w = own[(own[:, 1] >= rec.first_token_s[i] - 1e-12) & (own[:, 2] <= rec.end_s[i] + 1e-12)]
        if len(w):
            gaps = rec.output_tokens[i] - 1
            b_s = sum(step.get(b, np.nan) for b in w[:, 4]) / gaps
            total = (rec.end_s[i] - rec.first_token_s[i]) / gaps
            rows.append((w[:, 3].mean(), w[0, 3], w[:, 3].sum(), w[:, 4].mean(), total, b_s))
    f, first, n_mix, batch, total, base_s = np.array(rows).T
    mean_f, p90_f, first_mixed = f.mean(), np.quantile(f, 0.9), first.mean()
    print(f"per request: mean F {mean_f:.4f}, p90 F {p90_f:.4f}, first iteration mixed {first_mixed:.3f}")
    for k in np.unique(np.minimum(n_mix, 8)):
        sel = np.minimum(n_mix, 8) == k
        label = f"{int(k)}{'+' if k == 8 else ''} mixed"
        share, t_ms, b_mean = sel.mean(), total[sel].mean() * 1e3, batch[sel].mean()
        print(f"  {label}: {share:.3f} of requests, TPOT {t_ms:.3f} ms, batch {b_mean:.2f}")
    ok = np.isfinite(base_s)
    b, e = base_s[ok], (total - base_s)[ok]
    shuffled = b + np.random.default_rng(0).permutation(e)
    print(
        "base p50/p90 ms",
        np.round(np.quantile(b, [0.5, 0.9]) * 1e3, 3),
        "excess p50/p90 ms",
        np.round(np.quantile(e, [0.5, 0.9]) * 1e3, 3),
    )
    p90, p90_shuffled = np.quantile(b + e, 0.9) * 1e3, np.quantile(shuffled, 0.9) * 1e3
    print(
        f"correlation {np.corrcoef(b, e)[0, 1]:.2f}; p90 {p90:.3f} ms, excess shuffled {p90_shuffled:.3f} ms"
    )


if __name__ == "__main__":
    main()
