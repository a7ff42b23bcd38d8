"""Prefill-first busy periods as a decoding request sees them (issue 17, session 14, col1_14).

    PYTHONPATH=. python benchmarks/col1_busy_trace.py INDEX [RATE_FACTOR]

Simulates grid scenario INDEX's colocated (prefill-first) configuration at RATE_FACTOR x its planned
goodput (benchmarks.trace_colocated_tpot.logged_cell) and reports: the prefill steps' length, plain
and weighted by the decode batch each holds up; the batch during prefill against decode time; the
prefill busy periods (runs of back-to-back prefill steps): steps, prompts, work, batch growth by
position; and each measured request's stalls split into (a) the busy period its own prefill step
ends in (the steps after its own, before the first decode step) and (b) later busy periods, against
the planner's parts (a: arrivals during its own step and the wait's left-behind prompts, each with
its cluster; b: lambda_r per second of plain decode, each a busy period). docs/session14/col1_14.md.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.trace_colocated_tpot import colocated_from_argv, logged_cell
from benchmarks.validate_grid import SEED, plan_for, sample_scenario
from model.serving import colocated
from model.serving.registry import build_set


def busy_runs(it: np.ndarray) -> list[np.ndarray]:
    """Index arrays of the runs of back-to-back prefill steps per replica (a prefill busy period)."""
    runs = []
    for r in np.unique(it[:, 0]):
        idx = np.flatnonzero(it[:, 0] == r)
        idx = idx[np.argsort(it[idx, 1])]
        pre = it[idx, 3] > 0
        cur: list[int] = []
        for j, p in zip(idx, pre, strict=True):
            if p:
                cur.append(j)
            elif cur:
                runs.append(np.array(cur))
                cur = []
        if cur:
            runs.append(np.array(cur))
    return runs


def main() -> None:
    index, best, scn, rate, res = colocated_from_argv(sys.argv)
    lat = res.latency
    rep = best.config.replicas if hasattr(best.config, "replicas") else 1
    print(f"grid {index} {best.config.label()} at {rate:.4g} req/s")
    _, tp = lat.percentiles_s((0.9,))
    rho = float(np.ravel(lat.stall_load)[0])
    es = float(lat.stall_sizes_s[0].mean())
    es2 = float((lat.stall_sizes_s[0] ** 2).mean())
    print(
        f"planner: p90 {tp[0] * 1e3:.2f} ms, rho {rho:.3f}, E[s] {es:.3f} s, E[s2] {es2:.3f}, "
        f"batch {res.batch[0]:.2f}"
    )
    rec, it, dt, pre, _step = logged_cell(scn, best, index, rate)
    b = it[:, 4]
    tot = dt.sum()
    print(
        f"sim: prefill time share {dt[pre].sum() / tot:.3f}; step mean {dt[pre].mean():.3f} s, "
        f"batch-weighted {np.sum(dt[pre] * b[pre]) / b[pre].sum():.3f} s"
    )
    bp = np.sum(dt[pre] * b[pre]) / dt[pre].sum()
    bd = np.sum(dt[~pre] * b[~pre]) / dt[~pre].sum()
    bd_step = b[~pre].mean()
    print(
        f"sim batch: prefill time-weighted {bp:.3f}, decode time-weighted {bd:.3f}, "
        f"per decode step {bd_step:.3f}"
    )
    rp = dt[pre].sum() / tot
    seen = np.sum(dt[pre] * b[pre]) / np.sum(dt[~pre] * b[~pre])
    print(
        f"stall per second of plain decode (batch-weighted): sim {seen:.3f}; time average rho/(1-rho) "
        f"{rp / (1 - rp):.3f}; planner {rho / (1 - rho):.3f}"
    )
    runs = busy_runs(it)
    n = np.array([len(r) for r in runs], dtype=float)
    work = np.array([dt[r].sum() for r in runs])
    print(
        f"busy periods {len(runs)}: steps E[N] {n.mean():.3f} E[N(N-1)] {np.mean(n * (n - 1)):.3f}, "
        f"work E {work.mean():.3f} s E2 {np.mean(work**2):.3f}"
    )
    # batch growth by position j within the busy period, weighted by the step's length
    growth = np.concatenate([it[r, 4] - it[r[0], 4] for r in runs])
    lens = np.concatenate([dt[r] for r in runs])
    print(f"batch growth over the run, time-weighted: {np.sum(growth * lens) / lens.sum():.3f}")
    for j in range(5):
        sel = [r[j] for r in runs if len(r) > j]
        if sel:
            sel = np.array(sel)
            print(
                f"  position {j + 1}: {len(sel)} steps, length {dt[sel].mean():.3f} s, "
                f"batch {b[sel].mean():.2f}"
            )
    # the requests' stalls split: own busy period (a) and later (b)
    m = np.flatnonzero(rec.measured & np.isfinite(rec.end_s) & (rec.output_tokens > 1))
    a_s, b_s, plain, gaps = [], [], [], []
    for i in m:
        own = it[it[:, 0] == rec.instance[i]]
        own = own[np.argsort(own[:, 1])]
        w = own[(own[:, 1] >= rec.first_token_s[i] - 1e-9) & (own[:, 2] <= rec.end_s[i] + 1e-9)]
        isp = w[:, 3] > 0
        first_dec = np.argmax(~isp) if (~isp).any() else len(w)
        d = w[:, 2] - w[:, 1]
        a_s.append(d[:first_dec].sum())
        b_s.append(d[first_dec:][isp[first_dec:]].sum())
        plain.append(d[~isp].sum())
        gaps.append(rec.output_tokens[i] - 1)
    a_s, b_s, plain, gaps = map(np.array, (a_s, b_s, plain, gaps))
    print(
        f"sim per request: (a) own busy period {a_s.mean():.3f} s, (b) later {b_s.mean():.3f} s per "
        f"{plain.mean():.3f} s of plain decode (b / plain {b_s.sum() / plain.sum():.3f})"
    )
    p, mu = lat._wait_count
    free = 1 - rho
    own_step = lat.stall_events[0] - rate / rep * (lat.output_tokens - 1) * lat.tpot_base_s[0] / free
    print(
        f"planner per request: (a) wait left-behind {float(p[0]) * float(np.mean(mu[0])) / free * es:.3f} s, "
        f"own-step arrivals ~{np.mean(own_step) * es:.3f} s; (b) per plain second {rho / free:.3f}"
    )
    print(f"TTFT mean sim {np.mean((rec.first_token_s - rec.arrival_s)[m]):.3f} s")


if __name__ == "__main__":
    main()


def left_at_departure(index: int, factor: float = 1.0) -> None:
    """The prompts queued on the replica when a measured request's prefill step ends (left behind),
    the simulated wait and own step, against the planner's lambda_r (phi W + s)."""
    plan = plan_for(sample_scenario(SEED, index))
    best, scn = plan.best["colocated"], plan.inputs.scenario
    rate = best.goodput_rps * factor
    rec, *_ = logged_cell(scn, best, index, rate)
    m = np.flatnonzero(rec.measured & np.isfinite(rec.end_s) & (rec.output_tokens > 1))
    arr, ps, pe, inst = rec.arrival_s, rec.prefill_start_s, rec.prefill_end_s, rec.instance
    left = np.array([np.sum((inst == inst[i]) & (arr < pe[i]) & (ps > pe[i] - 1e-9)) for i in m])
    during_w = np.array([np.sum((inst == inst[i]) & (arr > arr[i]) & (arr < ps[i])) for i in m])
    during_s = np.array([np.sum((inst == inst[i]) & (arr >= ps[i]) & (arr < pe[i])) for i in m])
    print(
        f"sim: wait {np.mean(ps[m] - arr[m]):.3f} s, own step {np.mean(pe[m] - ps[m]):.3f} s; left behind "
        f"{left.mean():.3f} (E[L^2] {np.mean(left**2):.3f}, P0 {np.mean(left == 0):.3f}); arrived in wait "
        f"{during_w.mean():.3f}, in own step {during_s.mean():.3f}"
    )


def gain_check(index: int, factor: float = 1.0) -> None:
    """The simulated slope of a request's stall total on its plain decode time within output
    quintiles (the stalls a slow window draws, model.serving.decode_exposure.stall_gain), against
    the planner's r, and the base's deviation against the TPOT's."""
    plan = plan_for(sample_scenario(SEED, index))
    best, scn = plan.best["colocated"], plan.inputs.scenario
    rate = best.goodput_rps * factor
    seen: dict = {}
    saved = colocated.amplified_spread

    def spy(spread, gain, token_cov=None):  # the planner's terms, read as it builds them
        seen.update(spread=spread, gain=gain, cov=token_cov)
        return saved(spread, gain, token_cov)

    colocated.amplified_spread = spy
    try:
        res = build_set(scn, [best.config]).evaluate(np.array([rate]))
    finally:
        colocated.amplified_spread = saved
    rec, it, *_ = logged_cell(scn, best, index, rate)
    m = np.flatnonzero(rec.measured & np.isfinite(rec.end_s) & (rec.output_tokens > 1))
    x, s, g = [], [], []
    for i in m:
        own = it[it[:, 0] == rec.instance[i]]
        w = own[(own[:, 1] >= rec.first_token_s[i] - 1e-9) & (own[:, 2] <= rec.end_s[i] + 1e-9)]
        d = w[:, 2] - w[:, 1]
        x.append(d[w[:, 3] == 0].sum())
        s.append(d[w[:, 3] > 0].sum())
        g.append(rec.output_tokens[i] - 1)
    x, s, g = map(np.array, (x, s, g))
    edges = np.unique(np.quantile(g, [0.2, 0.4, 0.6, 0.8]))
    bins = np.digitize(g, edges)
    lat = res.latency
    rho = float(np.ravel(lat.stall_load)[0])
    print(
        f"grid {index} at {rate:.4g} req/s; planner r {float(np.mean(seen['gain'][0])):.3f} (rho {rho:.3f})"
    )
    sp = seen["spread"]
    sd_d = float(np.sqrt(sp.variance_s2()[0]))
    tg = np.maximum(scn.output_tokens - 1.0, 1.0)
    for k in np.unique(bins):
        sel = bins == k
        if sel.sum() < 20:
            continue
        xs, ss = x[sel] - x[sel].mean(), s[sel] - s[sel].mean()
        slope = float(np.sum(xs * ss) / max(np.sum(xs * xs), 1e-12))
        corr = float(np.corrcoef(x[sel], s[sel])[0, 1])
        print(
            f"  gaps ~{g[sel].mean():.0f}: n {sel.sum()}, slope dS/dx {slope:.3f} (corr {corr:.3f}), "
            f"sd x/gap {np.std(x[sel] / g[sel]) * 1e3:.2f} ms, Cov(x, S) {np.mean(xs * ss):.4f} s2"
        )
        pl = (bins_pl := np.digitize(tg, edges)) == k
        var_x = float(np.mean((sp.shrink[0][pl] * sd_d * tg[pl]) ** 2))
        cov_a = float(np.mean(seen["cov"][0][pl] * tg[pl] ** 2)) if seen["cov"] is not None else 0.0
        r = float(np.mean(seen["gain"][0][pl]))
        print(
            f"    planner: sd x/gap {np.sqrt(var_x) / tg[pl].mean() * 1e3:.2f} ms, "
            "Cov(x, S) = r Var x + Cov_A "
            f"{r * var_x:.4f} + {cov_a:.4f} s2 (slope {(r * var_x + cov_a) / max(var_x, 1e-12):.3f}); "
            f"{len(bins_pl)} samples"
        )
