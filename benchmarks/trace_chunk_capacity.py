"""Trace one chunked grid cell's prefill capacity: the simulator's mixed iterations against the planner.

    PYTHONPATH=. python -m benchmarks.trace_chunk_capacity INDEX [RATE_FACTOR]

simulates grid scenario INDEX's best "colocated-chunked" configuration at RATE_FACTOR x the planned
goodput (the grid's requests and run length, benchmarks.validate_grid) and prints, per replica over the
measured span: the prefill-busy fraction (time in iterations that carry prompt tokens), the mean mixed
iteration (time, prompt tokens, decode batch, prompts per iteration), mixed iterations per prompt and
mixed time per prompt; next to the planner's terms at the same rate (model.serving.colocated: the
busy fraction u = lambda_r E[share], the mean mixed iteration E[share] / E[chunks], the chunks per
prompt, the decode batch, the packing k). docs/validation.md, "Session 11: chunked prefill capacity".
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

import numpy as np

from benchmarks.validate_grid import SEED, cell_records_at, plan_for, sample_scenario
from model.queueing.mgc import mgc_wait
from model.queueing.routing import blend_weight, leg_inputs
from model.serving import colocated as plancol
from model.serving.evaluation import evaluate
from model.sim import colocated as simcol


@contextmanager
def chunk_log():
    """Log (replica, start, end, decode batch, prompt tokens, prompts) of every chunked iteration."""
    log: list[tuple[float, ...]] = []
    saved = simcol.Replica._end_chunked

    def end_chunked(self, arg):
        batch, pieces = arg
        chunk = sum(c for _, c in pieces)
        log.append((self.idx, self.iter_start, self.loop.now, batch, chunk, len(pieces)))
        return saved(self, arg)

    simcol.Replica._end_chunked = end_chunked
    try:
        yield log
    finally:
        simcol.Replica._end_chunked = saved


@contextmanager
def planner_spy():
    """Capture the planner's chunked terms (model.serving.colocated._mixed_share's arguments)."""
    seen: dict[str, np.ndarray] = {}
    saved = plancol._mixed_share, plancol.routed_wait, plancol.prefill_batch

    def spy(rate_r, share_moments_s, iteration_s, *rest):
        seen["es"] = share_moments_s[0]
        seen["step"], seen["t_mix"], seen["t_full"] = iteration_s
        return saved[0](rate_r, share_moments_s, iteration_s, *rest)

    def wait_spy(router, rate_rps, es, scv, replicas, scv_arrival=1.0):
        seen["wait_args"] = (router, rate_rps, es, scv, replicas, scv_arrival)
        return saved[1](router, rate_rps, es, scv, replicas, scv_arrival)

    def batch_spy(*args, **kwargs):
        seen["k_q"] = saved[2](*args, **kwargs)
        return seen["k_q"]

    plancol._mixed_share, plancol.routed_wait, plancol.prefill_batch = spy, wait_spy, batch_spy
    try:
        yield seen
    finally:
        plancol._mixed_share, plancol.routed_wait, plancol.prefill_batch = saved


def wait_legs(seen: dict) -> str:
    """The planner's routed wait split into its round-robin and shared-queue legs
    (model.queueing.routing.routed_wait) and the packing k at the unpacked batch."""
    router, rate_rps, es, scv, replicas, scv_a = seen["wait_args"]
    rate, servers, scv_leg = leg_inputs(router, rate_rps, replicas, scv_a)
    own = mgc_wait(rate, es, scv, servers, scv_leg)
    shared = mgc_wait(rate_rps, es, scv, replicas, scv_a)
    f = blend_weight(router, own.utilisation, replicas)
    return (
        f"  wait legs: per-replica {float(own.mean_wait_s[0]) * 1e3:.1f} ms, shared"
        f" {float(shared.mean_wait_s[0]) * 1e3:.1f} ms, blend weight {float(f[0]):.3f};"
        f" k at the unpacked batch {float(seen['k_q'][0]):.3f}"
    )


def main() -> None:
    index = int(sys.argv[1])
    factor = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    s = sample_scenario(SEED, index)
    plan = plan_for(s)
    best, scn = plan.best["colocated-chunked"], plan.inputs.scenario
    rate = best.goodput_rps * factor
    with planner_spy() as seen:
        ev = evaluate(best.config, scn, rate)
    replicas = best.config.replicas
    rate_r = rate / replicas
    es = float(seen["es"][0])
    print(f"grid {index} {best.config.label()} at {rate:.4g} req/s ({rate_r:.4g} per replica)")
    print(
        f"planner: u {ev.prefill_utilisation:.3f}, E[share] {es * 1e3:.3f} ms,"
        f" t_mix {float(seen['t_mix'][0]) * 1e3:.3f} ms, E[chunks] {es / float(seen['t_mix'][0]):.3f},"
        f" decode step {float(seen['step'][0]) * 1e3:.3f} ms, t_full {float(seen['t_full'][0]) * 1e3:.3f} ms"
    )
    print(
        f"  TTFT p90 {ev.ttft_s.p90 * 1e3:.1f} ms (SLO {scn.slo.ttft_s * 1e3:.1f}), mean queue wait"
        f" {ev.queue_wait_s * 1e3:.1f} ms, mean prefill {ev.prefill_s * 1e3:.1f} ms,"
        f" decode batch {ev.decode_batch:.2f}"
    )
    print(wait_legs(seen))
    with chunk_log() as log:
        rec = cell_records_at(scn, best, index, rate)
    it = np.array(log)
    m = rec.measured & np.isfinite(rec.first_token_s)
    t0, t1 = float(rec.arrival_s[m].min()), float(rec.arrival_s[m].max())
    it = it[(it[:, 1] >= t0) & (it[:, 2] <= t1)]
    span = t1 - t0
    dt, mixed = it[:, 2] - it[:, 1], it[:, 4] > 0
    prompts = float(np.sum((rec.prefill_start_s >= t0) & (rec.prefill_start_s <= t1)))
    uncached = scn.prompt_tokens - scn.cached_tokens
    print(
        f"simulator over {span:.1f} s: prefill-busy {dt[mixed].sum() / span / replicas:.3f},"
        f" busy {dt.sum() / span / replicas:.3f}"
    )
    print(
        f"  mixed iteration {dt[mixed].mean() * 1e3:.3f} ms, prompt tokens {it[mixed, 4].mean():.1f},"
        f" decode batch {it[mixed, 3].mean():.2f}, prompts {it[mixed, 5].mean():.3f};"
        f" decode-only iteration {dt[~mixed].mean() * 1e3 if (~mixed).any() else float('nan'):.3f} ms,"
        f" batch {it[~mixed, 3].mean() if (~mixed).any() else float('nan'):.2f}"
    )
    print(
        f"  per prompt ({prompts:.0f}): mixed iterations {mixed.sum() / prompts:.3f}, mixed time"
        f" {dt[mixed].sum() / prompts * 1e3:.3f} ms, prompt tokens {it[mixed, 4].sum() / prompts:.1f}"
        f" (scenario mean uncached {uncached.mean():.1f})"
    )
    full = it[mixed, 4] >= 0.98 * (best.config.chunk_tokens - it[mixed, 3])
    print(f"  mixed iterations at the full room: {full.mean():.3f}")
    arrivals = float(np.sum((rec.arrival_s >= t0) & (rec.arrival_s <= t1)))
    ttft = (rec.first_token_s - rec.arrival_s)[m]
    wait = (rec.prefill_start_s - rec.arrival_s)[m]
    own = (rec.first_token_s - rec.prefill_start_s)[m]
    print(
        f"  queue wait mean {wait.mean() * 1e3:.1f} ms, P(wait > 1 ms) {(wait > 1e-3).mean():.3f},"
        f" p90 {np.quantile(wait, 0.9) * 1e3:.1f} ms; prefill mean {own.mean() * 1e3:.1f} ms,"
        f" p90 {np.quantile(own, 0.9) * 1e3:.1f} ms; TTFT p90 {np.quantile(ttft, 0.9) * 1e3:.1f} ms"
    )
    quarters = [round(float(np.quantile(q, 0.9)) * 1e3, 1) for q in np.array_split(ttft, 4)]
    print(
        f"  arrivals per replica-second {arrivals / span / replicas:.4g} (nominal {rate_r:.4g});"
        f" TTFT p90 by quarter of the measured requests (ms): {quarters}"
        f" SLO {scn.slo.ttft_s * 1e3:.1f}"
    )


if __name__ == "__main__":
    main()
