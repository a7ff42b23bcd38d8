"""Prefill-first stall clusters in the simulator, per grid cell (issue 17, docs/validation.md).

For the colocated (prefill-first) cell of each grid scenario given, simulated at the planner's goodput
on the grid's seeds and run length (benchmarks.validate_grid), from the simulator's request records:

* the prefill busy fraction u of a replica (its prefill-step time over the run);
* the follow-on factor: prompts that join a replica while it runs a prefill step, over lambda_r x that
  step time (lambda_r = lambda / R). A random split gives 1; the latency model's cluster load is
  x u (model.queueing.routing.stall_exposure), a follow-on factor x;
* the mean back-to-back cluster (prefill steps that start as the previous one ends);
* per measured request, its stalls (the prefill steps that start on its replica from its first token
  to its end) and its primaries (those that open a cluster, or the first in that window), their
  variance / mean within quintiles of output length;
* the router's view at each prompt that joins a replica during its prefill step: the replica's score
  (4 x waiting + prefilling + running, rebuilt from the records just before the arrival, the
  simulator's vLLM rule with its lowest-index tie-break) against the lowest of the others': tied,
  strictly lowest, and the share that only the waiting weight sent there (above the others' minimum
  with every request weighted 1).

Usage: ``PYTHONPATH=. python -m benchmarks.stall_followon 84,80,73``.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.validate_grid import REQUESTS, SEED, _lifetime_s, plan_for, run_length, sample_scenario


def _steps(rec, replica: int) -> np.ndarray:
    """[n, 2] (start, end) of the prefill steps of ``replica``, in time order."""
    m = (rec.instance == replica) & np.isfinite(rec.prefill_start_s) & np.isfinite(rec.prefill_end_s)
    return np.unique(np.stack([rec.prefill_start_s[m], rec.prefill_end_s[m]], axis=1), axis=0)


def _router_view(rec, warm: int, replicas: int, weight: float) -> str:
    """Shares of the follow-on joins that found their replica tied with / below the others' minimum
    score, and above it on plain counts (module docstring)."""
    a, inst, ps, pe, end = rec.arrival_s, rec.instance, rec.prefill_start_s, rec.prefill_end_s, rec.end_s
    gaps, plain = [], []
    for r in range(warm, len(a)):
        t, i = a[r], inst[r]
        if i < 0:
            continue
        prev = np.arange(r)
        live = prev[~(end[prev] <= t)]
        if not np.any((inst[live] == i) & (ps[live] <= t) & (pe[live] > t)):
            continue  # not during a prefill step of its replica
        score = np.bincount(inst[live], weights=np.where(ps[live] > t, weight, 1.0), minlength=replicas)
        count = np.bincount(inst[live], minlength=replicas)
        gaps.append(np.delete(score, i).min() - score[i])
        plain.append(np.delete(count, i).min() - count[i])
    g, c = np.array(gaps), np.array(plain)
    return (
        f"follow-on joins {len(g)}: tied {np.mean(g == 0):.2f}, strictly lowest {np.mean(g >= 1):.2f}, "
        f"two or more below {np.mean(g >= 2):.2f}, above on plain counts {np.mean(c < 0):.2f}"
    )


def colocated_records(index: int):
    """(best colocated configuration, scenario, simulator records, requests, warm-up) of scenario
    ``index``'s colocated cell simulated at the planner's goodput (the grid's run length)."""
    from model.sim.simulate import SimOptions, SimRequests, poisson_requests, scenario_options, simulate
    from model.workload.arrivals import scale_to_rate

    s = sample_scenario(SEED, index)
    p = plan_for(s)
    b, scn = p.best["colocated"], p.inputs.scenario
    mean_out = float(np.mean(poisson_requests(scn.workload, 1.0, REQUESTS, seed=s.index).output_tokens))
    n, warm = run_length(b.goodput_rps, _lifetime_s(b, mean_out), REQUESTS)
    base = poisson_requests(scn.workload, 1.0, n, seed=s.index)
    req = SimRequests(scale_to_rate(base.arrival_s, b.goodput_rps), base.prompt_tokens, base.output_tokens)
    opts = {**scenario_options(scn), "options": SimOptions(warmup_requests=warm)}
    return b, scn, simulate(b.config, scn.arch, req, **opts).records, n, warm


def trace(index: int) -> str:
    """One line of figures for scenario ``index``'s colocated cell (module docstring)."""
    b, scn, rec, n, warm = colocated_records(index)
    replicas = int(b.config.replicas)
    t0, t1 = float(rec.arrival_s[warm]), float(rec.arrival_s[-1])
    lam_r = (n - warm) / (t1 - t0) / replicas
    joins = busy_s = 0.0
    clusters: list[int] = []
    stalls = np.full(n, np.nan)
    primaries = np.full(n, np.nan)
    for i in range(replicas):
        steps = _steps(rec, i)
        inside = steps[(steps[:, 0] >= t0) & (steps[:, 1] <= t1)]
        arrivals = np.sort(rec.arrival_s[rec.instance == i])
        during = np.searchsorted(arrivals, inside[:, 1], "left") - np.searchsorted(
            arrivals, inside[:, 0], "right"
        )
        joins += float(during.sum())
        busy_s += float((inside[:, 1] - inside[:, 0]).sum())
        opens = np.ones(len(steps), dtype=bool)
        opens[1:] = np.abs(steps[1:, 0] - steps[:-1, 1]) > 1e-12
        starts = np.flatnonzero(opens)
        clusters += np.diff(np.append(starts, len(steps))).tolist()
        mine = np.flatnonzero((rec.instance == i) & rec.measured & np.isfinite(rec.end_s))
        lo = np.searchsorted(steps[:, 0], rec.first_token_s[mine], "left")
        hi = np.searchsorted(steps[:, 0], rec.end_s[mine], "left")
        cum = np.concatenate([[0], np.cumsum(opens)])
        stalls[mine] = hi - lo
        # the first step in the window counts as a primary even when it continues a cluster
        primaries[mine] = np.where(hi > lo, cum[hi] - cum[lo] + (~opens[np.minimum(lo, len(steps) - 1)]), 0)
    u = busy_s / (replicas * (t1 - t0))
    ok = np.isfinite(stalls) & (rec.output_tokens >= 2)
    edges = np.quantile(rec.output_tokens[ok], [0.2, 0.4, 0.6, 0.8])
    bins = np.digitize(rec.output_tokens[ok], edges)

    def dispersion(values: np.ndarray) -> str:
        out = []
        for k in range(5):
            v = values[ok][bins == k]
            out.append(f"{v.var() / v.mean():.2f}" if len(v) > 1 and v.mean() > 0 else "-")
        return " / ".join(out)

    return (
        f"cell {index} {b.config.label()} at {b.goodput_rps:.3f} req/s: u {u:.3f}; follow-on factor "
        f"{joins / (lam_r * busy_s):.3f} (1 / R = {1 / replicas:.3f}); mean cluster {np.mean(clusters):.3f}; "
        f"stalls per request {np.nanmean(stalls[ok]):.2f}, variance / mean by output quintile "
        f"{dispersion(stalls)}; primaries {dispersion(primaries)}; "
        + _router_view(rec, warm, replicas, scn.engine.router.waiting_weight)
    )


if __name__ == "__main__":
    for cell in sys.argv[1].split(","):
        print(trace(int(cell)), flush=True)
