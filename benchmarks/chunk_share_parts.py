"""The chunked planner's mixed share F against the simulator's (issue 17, session 13, chov16).

    PYTHONPATH=. python -m benchmarks.chunk_share_parts 46,65 [--factor 1.0]

For the colocated-chunked cell of each grid scenario given, at FACTOR x the planner's goodput, the
simulator's iterations (benchmarks.trace_colocated_tpot.logged_cell, the grid's seeds and run length)
against the planner's latency model (``LatencyModel.mixed``: F ~ Beta, model.queueing.mixed_share),
by quintile of output length: the mean and standard deviation of F (the share of the request's
iterations, first token to end, that carry prompt chunks), the share of requests over the TPOT
target, and the correlation of F with the request's mean decode batch (the simulator's; the
planner's r). docs/session13/chov16.md.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.trace_colocated_tpot import logged_cell, trace_cells_cli
from benchmarks.validate_grid import SEED, plan_for, sample_scenario
from model.serving.registry import build_set


def trace(index: int, factor: float) -> str:
    s = sample_scenario(SEED, index)
    plan = plan_for(s)
    best, scn = plan.best["colocated-chunked"], plan.inputs.scenario
    rate = best.goodput_rps * factor
    res = build_set(scn, [best.config]).evaluate(np.array([rate]))
    lat = res.latency
    mx = lat.mixed
    p_miss = 1.0 - lat.tpot_cdf(np.full((1, 1), scn.slo.tpot_s))[0]
    p_mean, conc = mx.mean[0], mx.alpha[0] + mx.beta[0]
    p_sd = np.sqrt(p_mean * (1 - p_mean) / (conc + 1))
    rec, it, _dt, mixed, _step = logged_cell(scn, best, index, rate)
    m = np.flatnonzero(rec.measured & np.isfinite(rec.end_s) & (rec.output_tokens > 1) & (rec.instance >= 0))
    by_rep = {int(r): it[it[:, 0] == r] for r in np.unique(it[:, 0])}
    f_sim, b_sim, tp = [], [], []
    for i in m:
        own = by_rep.get(int(rec.instance[i]))
        if own is None:
            f_sim.append(np.nan)
            b_sim.append(np.nan)
            tp.append(np.nan)
            continue
        w = own[(own[:, 1] >= rec.first_token_s[i] - 1e-12) & (own[:, 2] <= rec.end_s[i] + 1e-12)]
        f_sim.append(w[:, 3].mean() if len(w) else np.nan)
        b_sim.append(w[:, 4].mean() if len(w) else np.nan)
        tp.append((rec.end_s[i] - rec.first_token_s[i]) / (rec.output_tokens[i] - 1))
    f_sim, b_sim, tp = map(np.asarray, (f_sim, b_sim, tp))
    out = rec.output_tokens[m]
    # planner's sampled requests, matched by output length quantile
    p_out = lat.output_tokens if lat.output_tokens.ndim == 1 else lat.output_tokens[0]
    lines = [
        f"grid {index} {best.config.label()} at {rate:.4g} req/s (x{factor}); "
        f"miss sim {np.mean(tp > scn.slo.tpot_s):.3f} / planner {np.mean(p_miss):.3f}; "
        f"p90 TPOT sim {np.nanquantile(tp, 0.9) * 1e3:.2f} ms, target {scn.slo.tpot_s * 1e3:.2f}",
        f"  mixed iterations sim {np.mean(mixed):.3f}, planner E[F] {np.mean(p_mean):.3f};"
        f" planner r {np.mean(mx.corr[0]):.3f}",
        "  q: out | F mean sim/planner | F sd sim/planner | var ratio | corr(F,batch) sim",
    ]
    qs = np.quantile(out, [0, 0.2, 0.4, 0.6, 0.8, 1.0])
    pq = np.quantile(p_out, [0, 0.2, 0.4, 0.6, 0.8, 1.0])
    for k in range(5):
        sel = (out >= qs[k]) & (out <= qs[k + 1]) & np.isfinite(f_sim)
        ps = (p_out >= pq[k]) & (p_out <= pq[k + 1])
        fs = f_sim[sel]
        c = np.corrcoef(fs, b_sim[sel])[0, 1] if sel.sum() > 3 and fs.std() > 0 else np.nan
        pm = p_mean[ps].mean()
        psd = np.sqrt(np.mean(p_sd[ps] ** 2 + (p_mean[ps] - pm) ** 2))
        lines.append(
            f"  q{k}: {np.median(out[sel]):7.0f} | {fs.mean():.3f} / {pm:.3f} | {fs.std():.3f} / {psd:.3f}"
            f" | {fs.var() / max(psd**2, 1e-12):.2f} | {c:.2f} (r {np.mean(mx.corr[0][ps]):.2f})"
        )
    return "\n".join(lines)


def main() -> None:
    trace_cells_cli(trace, sys.argv)


if __name__ == "__main__":
    main()
