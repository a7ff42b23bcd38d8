"""Prefill-first TPOT split per request, simulator against planner (issue 17, session 13, pf15).

    PYTHONPATH=. python benchmarks/pf15_stall_trace.py INDEX [RATE_FACTOR]

Simulates grid scenario INDEX's colocated (prefill-first) configuration at RATE_FACTOR x its planned
goodput on the grid's requests (benchmarks.validate_grid.cell_records_at, with the iteration log of
benchmarks.trace_colocated_tpot) and splits each measured request's decode window (first token to end)
into its decode-only iterations (base) and the prefill steps its replica ran meanwhile (stalls):
their number, their total, the prompts per step, and how many of them ran back to back (a burst:
a prefill step that starts as the previous one ends). Beside it, the planner's law at the same rate:
its mean stall count per request, its stall sizes, its base, and the TPOT percentiles; and the
simulator's TPOT p90 with each part swapped for an independent draw of the planner's (Poisson
stall counts of the planner's mean; the planner's sizes), to locate which part is short; and the
simulated share of the prompts arriving during a request's wait that its step leaves queued (phi,
model.serving.queued_behind). docs/session13/pf15.md.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.trace_colocated_tpot import colocated_from_argv, logged_cell
from model.sim.report import RequestRecords


def left_share(rec: RequestRecords, measured: np.ndarray) -> float:
    """The simulator's phi: of the prompts that reached a measured request's replica between its
    arrival and its prefill step's start, the share prefilled in a later step (left behind)."""
    arr, start, inst = rec.arrival_s, rec.prefill_start_s, rec.instance
    arrived = left = 0
    for i in measured:
        others = np.flatnonzero((inst == inst[i]) & (arr > arr[i]) & (arr < start[i]))
        arrived += len(others)
        left += int(np.sum(start[others] > start[i] + 1e-9))
    return left / max(arrived, 1)


def main() -> None:
    index, best, scn, rate, res = colocated_from_argv(sys.argv)
    lat = res.latency
    target = scn.slo.tpot_s
    print(f"grid {index} {best.config.label()} at {rate:.4g} req/s; TPOT target {target * 1e3:.2f} ms")
    _, tp = lat.percentiles_s((0.5, 0.9, 0.99))
    print("planner TPOT p50/p90/p99 ms", np.round(np.ravel(tp) * 1e3, 2))
    out_shape = lat.stall_events[0].shape
    free = 1 - (lat.stall_load[0] if lat.stall_load is not None else 0.0)
    # the planner's expected stall count per sampled request, the wait's left-behind ones included
    events = (
        lat.stall_events[0] + lat._wait_count[0][0] * np.broadcast_to(lat._wait_count[1][0], out_shape) / free
    )
    n_pl = events * free
    load = float(np.ravel(lat.stall_load)[0])
    q50, q90 = np.quantile(lat.stall_sizes_s[0], [0.5, 0.9]) * 1e3
    print(
        f"planner: base {lat.tpot_base_s[0] * 1e3:.2f} ms, stall load {load:.3f}, "
        f"mean stall size {lat.stall_sizes_s[0].mean() * 1e3:.1f} ms (p50/p90 {q50:.1f} / {q90:.1f})"
    )
    rec, it, _dt, _mixed, _step = logged_cell(scn, best, index, rate)
    m = np.flatnonzero(rec.measured & np.isfinite(rec.end_s) & (rec.output_tokens > 1))
    rows = []
    for i in m:
        own = it[it[:, 0] == rec.instance[i]]
        w = own[(own[:, 1] >= rec.first_token_s[i] - 1e-9) & (own[:, 2] <= rec.end_s[i] + 1e-9)]
        pre = w[w[:, 3] > 0]
        gaps = rec.output_tokens[i] - 1
        total = rec.end_s[i] - rec.first_token_s[i]
        stall = float((pre[:, 2] - pre[:, 1]).sum())
        back = int(np.sum(np.abs(pre[1:, 1] - pre[:-1, 2]) < 1e-9)) if len(pre) > 1 else 0
        first_is_pre = float(len(w) > 0 and w[0, 3] > 0)
        ttft = rec.first_token_s[i] - rec.arrival_s[i]
        rows.append((gaps, total / gaps, len(pre), stall, (total - stall) / gaps, back, first_is_pre, ttft))
    g, tpot, n, stall, base, back, first, ttft = np.array(rows).T
    print(f"simulator: {len(g)} requests, TTFT p50/p90 {np.quantile(ttft, [0.5, 0.9]).round(2)} s")
    print("simulator TPOT p50/p90/p99 ms", np.round(np.quantile(tpot, [0.5, 0.9, 0.99]) * 1e3, 2))
    print("simulator base p50/p90 ms", np.round(np.quantile(base, [0.5, 0.9]) * 1e3, 2))
    pre_all = it[it[:, 3] > 0]
    sizes = pre_all[:, 2] - pre_all[:, 1]
    s50, s90 = np.quantile(sizes, [0.5, 0.9]) * 1e3
    print(
        f"simulator prefill steps: mean {sizes.mean() * 1e3:.1f} ms (p50/p90 {s50:.1f} / {s90:.1f}); "
        f"first decode iteration a prefill step {first.mean():.3f}"
    )
    # the planner's mean count per request, by output quintile, against the simulator's
    edges = np.quantile(g, [0.2, 0.4, 0.6, 0.8])
    bins = np.digitize(g, edges)
    out = scn.output_tokens - 1.0
    pl_bins = np.digitize(out, edges)
    print("by output quintile: gaps | sim stalls mean var/mean back-to-back | planner n | sim stall s")
    for k in range(5):
        s = bins == k
        p = pl_bins == k
        print(
            f"  {g[s].mean():7.0f} | {n[s].mean():.3f} {n[s].var() / max(n[s].mean(), 1e-9):.2f} "
            f"{back[s].mean():.3f} | {events[p].mean() if p.any() else float('nan'):.3f} "
            f"| {stall[s].mean():.3f}"
        )
    # which requests miss the target: their stall count and base
    miss = tpot > target
    print(
        f"sim misses {miss.mean():.3f}: stalls {n[miss].mean():.2f} (others {n[~miss].mean():.2f}), base "
        f"{base[miss].mean() * 1e3:.2f} ms (others {base[~miss].mean() * 1e3:.2f}), gaps {g[miss].mean():.0f}"
    )
    rng = np.random.default_rng(0)
    # swap: the simulator's base with Poisson counts of the planner's mean and the planner's sizes
    pl_n_per = np.interp(g, np.sort(out), events[np.argsort(out)])
    draws = rng.poisson(pl_n_per)
    pl_sizes = lat.stall_sizes_s[0]
    swap = np.array([rng.choice(pl_sizes, k).sum() if k else 0.0 for k in draws])
    sim_counts = np.array([rng.choice(pl_sizes, int(k)).sum() for k in n])
    print(
        "p90 ms: sim",
        round(np.quantile(tpot, 0.9) * 1e3, 2),
        "| sim base + planner stalls",
        round(np.quantile(base + swap / g, 0.9) * 1e3, 2),
        "| sim base + sim counts x planner sizes",
        round(np.quantile(base + sim_counts / g, 0.9) * 1e3, 2),
        "| planner base + sim stalls",
        round(np.quantile(lat.tpot_base_s[0] + stall / g, 0.9) * 1e3, 2),
    )
    rho = float(np.ravel(lat.stall_load)[0]) if lat.stall_load is not None else 0.0
    es, es2 = lat.stall_sizes_s[0].mean(), (lat.stall_sizes_s[0] ** 2).mean()
    print("by output quintile: sim E[S] sd[S] P(S=0) | planner E[S] sd[S] P(N=0), Poisson (S: stall total)")
    for k in range(5):
        s, p = bins == k, pl_bins == k
        npl = events[p].mean()
        sd_pl = np.sqrt(npl * es2 / max(1 - rho, 1e-9) ** 2)
        print(
            f"  {stall[s].mean():.3f} {stall[s].std():.3f} {np.mean(n[s] == 0):.3f} | {npl * es:.3f} "
            f"{sd_pl:.3f} {np.exp(-npl * (1 - rho)):.3f}"
        )
    ps, pe = rec.prefill_start_s, rec.prefill_end_s
    steps_k = np.array([np.sum((ps == a) & (pe == b)) for a, b in pre_all[:, 1:3]])
    tokens = rec.prompt_tokens[m].mean()
    print(f"sim prompts per prefill step {steps_k.mean():.3f}; prompt tokens {tokens:.0f}")
    own_pf = (pe - ps)[m]
    c_own, c_ttft = np.corrcoef(own_pf, n)[0, 1], np.corrcoef(ttft, n / g)[0, 1]
    print(f"corr(own prefill, stall count) {c_own:.3f}, corr(ttft, stalls per gap) {c_ttft:.3f}")
    p_w, mu_w = float(lat._wait_count[0][0]), float(np.mean(lat._wait_count[1][0]))
    w_p, w_m = lat.wait_prob[0], lat.wait_cond_mean_s[0]
    print(f"planner wait: P(W > 0) {w_p:.3f}, E[W | W > 0] {w_m:.2f} s, left-behind")
    print(f"  stalls given a wait {mu_w:.3f} (total, with clusters, {p_w * mu_w / max(1 - rho, 1e-9):.3f})")
    per_stall = [f"{stall[bins == q].sum() / max(n[bins == q].sum(), 1):.2f}" for q in range(5)]
    print(f"simulator stall seen per stall by quintile (s): {' / '.join(per_stall)}; planner {es:.2f}")
    print(f"left behind by the wait: simulated phi {left_share(rec, m):.3f}")
    print(f"planner n(mean over requests) {events.mean():.3f}, primaries {n_pl.mean():.3f}")


if __name__ == "__main__":
    main()
