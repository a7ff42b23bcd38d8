"""Where the simulator's F-batch correlation comes from on a chunked cell (issue 17, session 14, chov14).

    PYTHONPATH=. python -m benchmarks.chunk_corr_parts 26,72 [--factor 1.0]

For the colocated-chunked cell of each grid scenario given, at FACTOR x the planner's goodput, the
simulator's iterations (benchmarks.trace_colocated_tpot.logged_cell) per measured request i on its
replica: F (the mixed share of its window's iterations), B (its window's mean decode batch), N (the
prompts reaching its replica during its window), Q (the prompts on its replica queued or prefilling
at its first token: arrived before it, first token after it) and B0 (the batch of its first
iteration). Prints the correlations of (F, B) with N and Q, the part of corr(F, B) left after
regressing both on N (what the planner's r = rho_D rho_F takes as 0), and the TPOT p90 with the
excess over the batch's decode-only step shuffled across requests (the independent convolution).
docs/session14/chov14.md.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.trace_colocated_tpot import logged_cell, trace_cells_cli
from benchmarks.validate_grid import SEED, plan_for, sample_scenario


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(a, b)[0, 1]) if a.std() > 0 and b.std() > 0 else float("nan")


def _resid(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """y less its least-squares line on the columns of x (with an intercept)."""
    a = np.column_stack([np.ones(len(y)), x])
    return y - a @ np.linalg.lstsq(a, y, rcond=None)[0]


def trace(index: int, factor: float) -> str:
    s = sample_scenario(SEED, index)
    plan = plan_for(s)
    best, scn = plan.best["colocated-chunked"], plan.inputs.scenario
    rate = best.goodput_rps * factor
    rec, it, _dt, _mixed, step = logged_cell(scn, best, index, rate)
    m = np.flatnonzero(rec.measured & np.isfinite(rec.end_s) & (rec.output_tokens > 1) & (rec.instance >= 0))
    by_rep = {int(r): it[it[:, 0] == r] for r in np.unique(it[:, 0])}
    rows = []
    for i in m:
        r = int(rec.instance[i])
        own = by_rep.get(r)
        if own is None:
            continue
        w = own[(own[:, 1] >= rec.first_token_s[i] - 1e-12) & (own[:, 2] <= rec.end_s[i] + 1e-12)]
        if len(w) < 1:
            continue
        same = rec.instance == r
        t0, t1 = rec.first_token_s[i], rec.end_s[i]
        n_in = np.sum(same & (rec.arrival_s >= t0) & (rec.arrival_s < t1))
        q0 = np.sum(same & (rec.arrival_s < t0) & (rec.first_token_s > t0))
        gaps = rec.output_tokens[i] - 1
        base = sum(step.get(b, np.nan) for b in w[:, 4]) / gaps
        rows.append((w[:, 3].mean(), w[:, 4].mean(), n_in, q0, w[0, 4], (t1 - t0) / gaps, base, len(w)))
    f, b, n, q, b0, tpot, base, iters = np.array(rows).T
    out = [f"grid {index} {best.config.label()} at {rate:.4g} req/s (x{factor}); {len(f)} requests"]
    qs = np.quantile(iters, [0, 0.2, 0.4, 0.6, 0.8, 1.0])
    out.append(
        "  q: iters | corr F,B | F,N  B,N  (prod) | F,Q  B,Q  B0,Q | F,B given N | F,B given N,Q"
        " | E[Q] Var[Q]"
        " | E[N] Var[N] | dM/dN dM/dQ (mixed iterations per prompt)"
    )
    for k in range(5):
        sel = (iters >= qs[k]) & (iters <= qs[k + 1])
        fs, bs, ns, qq = f[sel], b[sel], n[sel], q[sel]
        rfn, rbn = _corr(fs, ns), _corr(bs, ns)
        given_n = _corr(_resid(fs, ns), _resid(bs, ns))
        a = np.column_stack([np.ones(sel.sum()), ns, qq])
        slope = np.linalg.lstsq(a, fs * iters[sel], rcond=None)[0]
        given_nq = _corr(_resid(fs, np.column_stack([ns, qq])), _resid(bs, np.column_stack([ns, qq])))
        out.append(
            f"  q{k}: {np.median(iters[sel]):6.0f} | {_corr(fs, bs):5.2f}"
            f" | {rfn:5.2f} {rbn:5.2f} ({rfn * rbn:5.2f})"
            f" | {_corr(fs, qq):5.2f} {_corr(bs, qq):5.2f} {_corr(b0[sel], qq):5.2f} | {given_n:5.2f}"
            f" | {given_nq:5.2f} | {qq.mean():.3f} {qq.var():.3f} | {ns.mean():.2f} {ns.var():.2f}"
            f" | {slope[1]:.2f} {slope[2]:.2f}"
        )
    ok = np.isfinite(base)
    e = (tpot - base)[ok]
    shuffled = base[ok] + np.random.default_rng(0).permutation(e)
    out.append(
        f"  TPOT p90 {np.quantile(tpot[ok], 0.9) * 1e3:.3f} ms, excess shuffled "
        f"{np.quantile(shuffled, 0.9) * 1e3:.3f} ms, target {scn.slo.tpot_s * 1e3:.3f}; "
        f"corr(base, excess) {_corr(base[ok], e):.2f}"
    )
    return "\n".join(out)


def main() -> None:
    trace_cells_cli(trace, sys.argv)


if __name__ == "__main__":
    main()
