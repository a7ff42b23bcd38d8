"""Two candidate laws for the prefill-first stalls behind the levelling router (issue 17, session 10;
docs/validation.md, "Session 10: the router's follow-on and the primaries' dispersion"). A research
tool, not used by the planner: both laws were derived, checked against the simulator
(benchmarks.stall_followon) and not merged.

1. The follow-on factor f (prompts that join a replica during its prefill step over lambda_r x the
   step time) from a continuous-time Markov chain of one tagged replica against the other R - 1
   (``follow_on_chain``). The others are held as counts on the levels -1 .. J relative to the tagged
   replica's request count (level J collects everything above), plus the number of others holding a
   waiting prompt (the router's score weighs a waiting prompt w = 4 against a running request,
   model.sim.colocated.Replica.load, so such a replica is out of the race until its prompt starts,
   after a mean t_b: the planner's mean prompt wait plus half a decode step). The tagged replica
   cycles decode -> wait (its own prompt waits for the decode step in progress, mean t_dec / 2) ->
   prefill (mean u / lambda_r, no departures) -> decode; a prompt that joins it during its prefill
   step waits behind it, so the replica leaves the race until a new step starts. Arrivals (rate R
   lambda_r) go to the lowest level, a tie between the tagged replica and b others to the tagged one
   with probability 1 / (b + 1); every replica's requests leave at the balance rate lambda_r (the
   tagged one at lambda_r / (1 - u) while it decodes). Mean-field in the departures (a replica leaves
   at its balance rate whatever its level), exact in the router's integer ties: the birth-death
   construction of Kleinrock 1975, vol. 1, ch. 3, on the join-the-shortest-queue rule of Winston 1977
   (J. Appl. Prob. 14(1)). Its state space grows as R^(J + 2): cheap for R <= 8, not for R >= 16.
2. The primaries' dispersion d (variance / mean of the joins to the request's replica over its plain
   window W) from the replica's flow balance, joins = departures + the change of its count
   (``renewal_dispersion``): behind a levelling router the replica holds N / R + eps requests, so
   Var[joins] = x y V_e(t) (1 - 2 / R) + 2 Var[N / R] (1 - P(X_e > t)), with x y the other requests
   a running request shares its replica with (session 10: model.queueing.routing.stall_exposure; since
   session 14 the tool reads the planner's prefill-first x, model.queueing.light_exposure
   .spread_exposure), t = lambda_r W / y
   the window in request lifetimes, V_e(t) the variance of an equilibrium renewal count with the
   lifetimes' law (Cox 1962, "Renewal Theory", sec. 4.5: Var N_e(t) = t / mu + (2 / mu) int_0^t H(u)
   du - (t / mu)^2, H the renewal function, solved on a grid by the discretised renewal equation),
   P(X_e > t) the autocorrelation of an M/G/inf count at lag t (the equilibrium residual lifetime's
   survival; Takacs 1962, ch. 3), and 1 - 2 / R the covariance of the replica's departures with the
   fleet's count. The lifetimes' law is the output law's (O - 1, for O >= 2, mean one).

Usage: ``PYTHONPATH=. python -m benchmarks.router_rank 84,73`` (per cell: today's x, the chain's f,
the predicted primaries' variance / mean by output quintile); with ``--windows``, the simulator's joins
over a request's own window against a randomly started one (:func:`own_windows`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from benchmarks.validate_grid import colocated_best_with


def _compositions(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Every tuple of ``parts`` non-negative integers summing to ``total``."""
    if parts == 1:
        yield (total,)
        return
    for first in range(total + 1):
        for rest in _compositions(total - first, parts - 1):
            yield (first, *rest)


def follow_on_chain(
    replicas: int, rate_r: float, times_s: tuple[float, float, float], busy: float, levels: int = 3
) -> float:
    """f of the tagged-replica chain (module docstring, item 1): ``times_s`` = (own prompt's wait t_w,
    mean prefill step u / lambda_r, others' blocked time t_b), ``busy`` u, ``levels`` J."""
    t_w, e_s, t_b = times_s
    others, nl = replicas - 1, levels + 2
    index = {
        (ph, s): k
        for k, (ph, s) in enumerate((ph, s) for ph in range(4) for s in _compositions(others, nl + 1))
    }
    rows, cols, vals, follow = [], [], [], []
    lam, own = replicas * rate_r, rate_r / max(1.0 - busy, 1e-9)

    def add(i: int, prof: list[int], phase: int, rate: float) -> None:
        if rate > 0:
            rows.append(i), cols.append(index[(phase, tuple(prof))]), vals.append(rate)

    # phases: 0 decode, 1 own prompt waiting, 2 prefill (in the race), 3 prefill with a prompt waiting
    for (ph, s), i in index.items():
        lv, q = list(s[:nl]), s[nl]
        low = next((j for j in range(nl) if lv[j] > 0), None)
        if low is not None and low < 1:  # another replica below the tagged one takes it
            add(i, [*lv[:low], lv[low] - 1, *lv[low + 1 :], q + 1], ph, lam)
        else:
            pick = 1.0 / (lv[1] + 1) if ph in (0, 2) else 0.0
            if pick:
                up = [0] * nl
                for j in range(nl):
                    up[max(j - 1, 0)] += lv[j]
                up[0] += q
                add(i, [*up, 0], 1 if ph == 0 else 3, lam * pick)
                if ph == 2:
                    follow.append((i, lam * pick))
            if low is not None:
                nxt = lv.copy()
                nxt[low] -= 1
                nxt[min(low + 1, nl - 1)] += 1
                add(i, [*nxt, q], ph, lam * (1.0 - pick))
        for j in range(1, nl):  # the others' departures
            if lv[j]:
                nxt = lv.copy()
                nxt[j - 1] += 1
                nxt[j] -= 1
                add(i, [*nxt, q], ph, lv[j] * rate_r)
        if q:
            add(i, [*lv[:1], lv[1] + 1, *lv[2:], q - 1], ph, q / t_b)
        if ph in (0, 1):  # the tagged replica's own departure
            down = [0] * nl
            for j in range(nl):
                down[min(j + 1, nl - 1)] += lv[j]
            down[min(2, nl - 1)] += q
            add(i, [*down, 0], ph, own)
        if ph == 1:
            add(i, [*lv, q], 2, 1.0 / t_w)
        if ph in (2, 3):
            add(i, [*lv, q], 0 if ph == 2 else 2, 1.0 / e_s)
    n = len(index)
    gen = sp.coo_matrix((vals, (rows, cols)), shape=(n, n)).tocsr()
    gen.setdiag(0)
    gen = gen - sp.diags(np.asarray(gen.sum(axis=1)).ravel())
    a = gen.T.tolil()
    a[0, :] = 1.0
    rhs = np.zeros(n)
    rhs[0] = 1.0
    p = spla.spsolve(a.tocsc(), rhs)
    in_step = sum(p[i] for (ph, _), i in index.items() if ph >= 2)
    return float(sum(p[i] * r for i, r in follow) / (rate_r * in_step))


def renewal_variance(life: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(V_e(t), P(X_e > t)) on the uniform ``grid`` for lifetimes ``life`` (module docstring, item 2)."""
    mu, h = float(life.mean()), grid[1] - grid[0]
    cdf = np.searchsorted(np.sort(life), grid, side="right") / len(life)
    pmf = np.diff(np.concatenate([[0.0], cdf]))
    ren = np.zeros(len(grid))
    for k in range(len(grid)):  # H(t_k) = F(t_k) + sum_j H(t_(k - j)) f_j
        ren[k] = cdf[k] + (np.dot(ren[:k][::-1], pmf[1 : k + 1]) if k else 0.0)
    integral = np.concatenate([[0.0], np.cumsum((ren[1:] + ren[:-1]) / 2.0 * h)])
    var = np.maximum(grid / mu + 2.0 / mu * integral - (grid / mu) ** 2, 0.0)
    surv = 1.0 - cdf
    resid = 1.0 - np.concatenate([[0.0], np.cumsum((surv[1:] + surv[:-1]) / 2.0 * h)]) / mu
    return var, np.clip(resid, 0.0, 1.0)


def renewal_dispersion(c: dict, exposure: float) -> np.ndarray:
    """Per sampled request, the predicted variance / mean of the joins over its window (item 2)."""
    y = float((c["batch"] * c["prob"]).sum())
    var_y = max(float((c["batch"] ** 2 * c["prob"]).sum()) - y * y, 0.0)
    out = c["out"].astype(float)
    life = out[out >= 2] - 1.0
    grid = np.linspace(0.0, max(8.0, 1.2 * (out.max() - 1.0) / life.mean()), 1501)
    v_e, resid = renewal_variance(life / life.mean(), grid)
    t = c["rate_r"] * (c["stalls"] + c["t_dec"] * (out - 1.0)) / y
    mean = exposure * y * t
    var = exposure * y * np.interp(t, grid, v_e) * (1.0 - 2.0 / c["R"]) + 2.0 * var_y * (
        1.0 - np.interp(t, grid, resid)
    )
    return var / np.maximum(mean, 1e-12)


def planner_inputs(index: int) -> dict:
    """The planner's arrays for the best colocated configuration of grid cell ``index``, read from
    model.serving.colocated.evaluate_colocated at the prefill-first call of spread_exposure
    (model.queueing.light_exposure; the caller's locals)."""
    import inspect

    from model.queueing.light_exposure import spread_exposure as original

    calls: list[dict] = []

    def spy(router, batch, prob, replicas, before_first):
        loc = inspect.currentframe().f_back.f_locals
        if not loc["chunked"]:
            names = ("rate", "rate_r", "stalls", "t_dec", "busy", "out_tokens")
            calls.append({"router": router, "batch": batch, "prob": prob, "queue": loc["queue"].mean_wait_s})
            calls[-1].update(
                {k: loc[k] for k in names}
                | {"replicas": np.broadcast_to(replicas, loc["rate"].shape)}
                | {"before_first": np.broadcast_to(before_first, loc["rate"].shape)}
            )
        return original(router, batch, prob, replicas, before_first)

    best = colocated_best_with(index, "spread_exposure", spy)
    r = float(best.config.replicas)
    call, row = next(
        (c, int(np.flatnonzero(hit)[-1]))
        for c in reversed(calls)
        if np.any(hit := (c["replicas"] == r) & np.isclose(c["rate"], best.goodput_rps))
    )
    per = {
        k: v[row] for k, v in call.items() if isinstance(v, np.ndarray) and v.shape[:1] == call["rate"].shape
    }
    return {**per, "router": call["router"], "out": call["out_tokens"], "R": r, "label": best.config.label()}


def report(index: int) -> str:
    """One line per cell (module docstring)."""
    from model.queueing.light_exposure import spread_exposure

    c = planner_inputs(index)
    r = int(c["R"])
    x = float(
        spread_exposure(
            c["router"], c["batch"][None], c["prob"][None], np.array([c["R"]]), np.array([c["before_first"]])
        )[0]
    )
    times = (c["t_dec"] / 2.0, c["busy"] / c["rate_r"], c["queue"] + c["t_dec"] / 2.0)
    f = f"{follow_on_chain(r, c['rate_r'], times, c['busy']):.3f}" if r <= 8 else "- (R > 8)"
    d = renewal_dispersion(c, x)
    out = c["out"]
    ok = out >= 2
    bins = np.digitize(out[ok], np.quantile(out[ok], [0.2, 0.4, 0.6, 0.8]))
    m = x * c["rate_r"] * (c["stalls"] + c["t_dec"] * (out - 1.0))
    disp = []
    for k in range(5):
        mk, dk = m[ok][bins == k], d[ok][bins == k]
        disp.append(f"{((mk * dk).mean() + mk.var()) / mk.mean():.2f}" if len(mk) > 1 else "-")
    return (
        f"cell {index} {c['label']}: u {c['busy']:.3f}; x {x:.3f}; chain f {f}; "
        f"predicted primaries var / mean {' / '.join(disp)}"
    )


def own_windows(index: int) -> str:
    """The prompts that join a measured request's replica from its own arrival to its end, against a
    window of the same length starting at a uniformly drawn time on the same replica (mean and variance
    / mean by output quintile; docs/validation.md, "The mean is an offset, not a scaled rate"), on the
    simulator's records at the planner's goodput (benchmarks.stall_followon's run)."""
    from benchmarks.stall_followon import colocated_records

    b, _, rec, _, warm = colocated_records(index)
    a, inst, end, out = rec.arrival_s, rec.instance, rec.end_s, rec.output_tokens
    t0, t1 = float(a[warm]), float(a[-1])
    per = [np.sort(a[inst == i]) for i in range(int(b.config.replicas))]
    ok = np.flatnonzero(rec.measured & np.isfinite(end) & (out >= 2) & (inst >= 0) & (end - a < t1 - t0))
    draw = np.random.default_rng(1)
    own, other = np.zeros(len(ok)), np.zeros(len(ok))
    for j, r in enumerate(ok):
        arr, length = per[inst[r]], end[r] - a[r]
        own[j] = np.searchsorted(arr, end[r], "left") - np.searchsorted(arr, a[r], "right")
        start = draw.uniform(t0, t1 - length)
        other[j] = np.searchsorted(arr, start + length, "left") - np.searchsorted(arr, start, "right")
    bins = np.digitize(out[ok], np.quantile(out[ok], [0.2, 0.4, 0.6, 0.8]))
    parts = []
    for k in range(5):
        o, q = own[bins == k], other[bins == k]
        if len(o) > 1:
            own_k, other_k = (
                f"{o.mean():.2f} ({o.var() / o.mean():.2f})",
                f"{q.mean():.2f} ({q.var() / q.mean():.2f})",
            )
            parts.append(f"q{k + 1} {own_k} / {other_k}")
    return f"cell {index}: joins from own arrival (var / mean) / from a random start: " + "; ".join(parts)


if __name__ == "__main__":
    show = own_windows if "--windows" in sys.argv else report
    for cell in sys.argv[1].split(","):
        print(show(int(cell)), flush=True)
