"""Which part of the prefill-first planner's TPOT tail is too large (issue 17, session 13, colo15b).

    PYTHONPATH=. python -m benchmarks.tpot_parts 133,84 [--factor 1.0]

For the colocated (prefill-first) cell of each grid scenario given, at FACTOR x the planner's goodput,
the simulator's iterations (benchmarks.trace_colocated_tpot.logged_cell, the grid's seeds and run
length) against the planner's latency model (model.serving.candidates: one candidate at that rate),
by quintile of output length:

* share of requests over the TPOT target (simulator / planner: 1 - the planner's TPOT CDF at the target);
* stalls per request: prefill steps on the request's replica from its first token to its end
  (simulator) against the planner's mean count (``LatencyModel.stall_events``: primaries over 1 - rho);
  the simulator's variance / mean within the quintile against the planner's (Poisson primaries, each a
  busy-period cluster: Var / mean = E[C^2] / E[C] with E[C] = 1 / (1 - rho), E[C^2] = (1 + rho) /
  (1 - rho)^3 for a cluster counted in stalls of equal size, i.e. (1 + rho) / (1 - rho)^2);
* one stall's mean length (simulator: a prefill step in the window; planner: E[s]);
* the base TPOT (simulator: the request's decode-only iterations at the decode-only time of their
  batch, over O - 1; planner: the spread's mean) and its p90;
* the stall time per request: mean and standard deviation, and its variance over (mean x the
  planner's E[s]) (simulator / planner: n E[s] and n E[s^2] / (1 - rho)^2 with the planner's mean
  count n, the latency model's primaries n (1 - rho) each a busy-period cluster).

"rho" is the load the latency model's clusters carry (``LatencyModel.stall_load``: since session 13
the follow-on load of model.queueing.routing.follow_on_load behind a levelling router).
docs/session13/colo15b.md.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.trace_colocated_tpot import logged_cell
from benchmarks.validate_grid import SEED, plan_for, sample_scenario
from model.planner.types import BestConfig
from model.queueing.latency import LatencyModel
from model.serving.registry import build_set
from model.workload.scenario import Scenario


def planner_parts(
    scn: Scenario, best: BestConfig, rate: float
) -> tuple[LatencyModel, np.ndarray, np.ndarray, float]:
    """(latency model, per-request P(TPOT > target) [S], mean stalls [S], rho) of one candidate."""
    cands = build_set(scn, [best.config])
    res = cands.evaluate(np.array([rate]))
    lat = res.latency
    miss = 1.0 - lat.tpot_cdf(np.full((1, 1), scn.slo.tpot_s))[0]
    rho = float(np.clip(lat.stall_load[0], 0.0, 0.95)) if lat.stall_load is not None else 0.0
    return lat, miss, lat.stall_events[0], rho


def trace(index: int, factor: float) -> str:
    s = sample_scenario(SEED, index)
    plan = plan_for(s)
    best, scn = plan.best["colocated"], plan.inputs.scenario
    rate = best.goodput_rps * factor
    lat, p_miss, p_n, rho = planner_parts(scn, best, rate)
    rec, it, _dt, _mixed, step = logged_cell(scn, best, index, rate)
    target = scn.slo.tpot_s
    m = np.flatnonzero(rec.measured & np.isfinite(rec.end_s) & (rec.output_tokens > 1) & (rec.instance >= 0))
    rows = []
    by_rep = {int(r): it[it[:, 0] == r] for r in np.unique(it[:, 0])}
    for i in m:
        own = by_rep[int(rec.instance[i])]
        w = own[(own[:, 1] >= rec.first_token_s[i] - 1e-12) & (own[:, 2] <= rec.end_s[i] + 1e-12)]
        gaps = rec.output_tokens[i] - 1
        pre = w[:, 3] > 0
        dur = w[:, 2] - w[:, 1]
        base = sum(step.get(b, np.nan) for b in w[~pre, 4]) / gaps
        total = (rec.end_s[i] - rec.first_token_s[i]) / gaps
        rows.append((rec.output_tokens[i], total, base, pre.sum(), dur[pre].sum()))
    out, tpot, base, n_st, st_s = np.array(rows).T
    edges = np.quantile(out, [0.2, 0.4, 0.6, 0.8])
    q_sim = np.digitize(out, edges)
    q_pl = np.digitize(lat.output_tokens, edges)
    disp_pl = (1 + rho) / (1 - rho) ** 2
    lines = [
        f"cell {index} {best.config.label()} at {rate:.4g} req/s (x{factor}); TPOT target "
        f"{target * 1e3:.2f} ms; rho {rho:.3f}; planner E[s] {lat.stall_m1_s[0] * 1e3:.1f} ms, "
        f"base mean {lat.tpot_base_s[0] * 1e3:.2f} ms",
        f"  all: miss sim {np.mean(tpot > target):.3f} / planner {p_miss.mean():.3f}; stalls "
        f"{n_st.mean():.2f} / {p_n.mean():.2f}; "
        f"sim stall len {st_s.sum() / max(n_st.sum(), 1) * 1e3:.1f} ms; "
        f"sim TPOT p90 {np.quantile(tpot, 0.9) * 1e3:.2f} ms",
    ]
    for q in range(5):
        a, b = q_sim == q, q_pl == q
        if not a.any() or not b.any():
            continue
        var_mean = n_st[a].var() / max(n_st[a].mean(), 1e-12)
        ok = a & np.isfinite(base)
        if not ok.any():
            ok = a
        lines.append(
            f"  q{q} out {out[a].mean():7.0f}/{lat.output_tokens[b].mean():7.0f}: "
            f"miss {np.mean(tpot[a] > target):.3f}"
            f"/{p_miss[b].mean():.3f}; stalls {n_st[a].mean():.2f}/{p_n[b].mean():.2f} var/mean "
            f"{var_mean:.2f}/{disp_pl:.2f}; P0 {np.mean(n_st[a] == 0):.2f}/"
            f"{np.exp(-p_n[b] * (1 - rho)).mean():.2f}; stall len "
            f"{st_s[a].sum() / max(n_st[a].sum(), 1) * 1e3:.1f} ms; base {base[ok].mean() * 1e3:.2f} "
            f"p90 {np.quantile(base[ok], 0.9) * 1e3:.2f} ms; excess p90 "
            f"{np.quantile((tpot - base)[ok], 0.9) * 1e3:.2f} ms"
        )
        s1, s2 = float(lat.stall_m1_s[0]), float(lat.stall_m2_s2[0])
        ey, vy = p_n[b] * s1, p_n[b] * s2 / (1 - rho) ** 2
        lines.append(
            f"      stall time per request: mean {st_s[a].mean() * 1e3:.0f}/{ey.mean() * 1e3:.0f} ms, "
            f"sd {st_s[a].std() * 1e3:.0f}/{np.sqrt(vy.mean() + ey.var()) * 1e3:.0f} ms; "
            f"var/(mean E[s]) {st_s[a].var() / max(st_s[a].mean() * s1, 1e-18):.2f}/"
            f"{(vy.mean() + ey.var()) / max(ey.mean() * s1, 1e-18):.2f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    cells = [int(c) for c in sys.argv[1].split(",")]
    fac = float(sys.argv[sys.argv.index("--factor") + 1]) if "--factor" in sys.argv else 1.0
    for cell in cells:
        print(trace(cell, fac), flush=True)
