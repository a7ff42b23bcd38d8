"""Prompts that join a request's replica during its own prefill step and during its decode window
(issue 17, session 11, docs/validation.md "Session 11: colocated R > 1 under-prediction").

For the colocated (prefill-first) cell of each grid scenario given, simulated at the planner's goodput
on the grid's seeds and run length (benchmarks.stall_followon.colocated_records), per measured request:
the prompts that join its replica while its own packed prefill step runs (prefill start -> prefill end)
and while it decodes (first token -> end), each over lambda_r x the span's length (lambda_r = the
measured rate / R: 1 for a random split), against the planner's factors, read at
model.serving.colocated's call of model.queueing.own_step.prefill_first_arrivals (the prefill-first
joins): the own step's, min(chain factor, x) for a levelling router at R > 1
(model.queueing.own_step.own_step_exposure), and the decode window's, x
(model.queueing.light_exposure.spread_exposure). Means per output quintile as joins / lambda_r x span.

``--gap``: at each measured prompt's join, the other replicas whose vLLM score (4 x waiting + prefilling +
running, rebuilt from the records as benchmarks.stall_followon does) is below the picked replica's score
plus one (its own request during its step), those tied with it, against the level picture's R - 1 -
(N mod R) (N the fleet's requests).

Usage: ``PYTHONPATH=. python -m benchmarks.own_step_joins 84,133`` (``--gap``). The ``--bracket PHI``
mode (the own step's joins scaled to PHI x by a patch of replica_arrivals) was retired in session 14:
the planner now counts the own step at the chain's factor (own_step.prefill_first_arrivals).
"""

from __future__ import annotations

import inspect
import sys

import numpy as np

from benchmarks.stall_followon import colocated_records
from benchmarks.validate_grid import colocated_best_with
from model.queueing.own_step import own_step_exposure, prefill_first_arrivals


def planner_exposure(index: int) -> tuple[float, float, float, float]:
    """(own-step factor, x, decode occupancy per replica, requests before their first token per replica)
    of the best colocated configuration of grid cell ``index`` at its planned goodput (a spy on
    evaluate_colocated's call of prefill_first_arrivals, prefill-first only)."""
    calls: list[tuple] = []

    def spy(router, rate_r, step_s, decode_s, replicas, exposure, batch, prob):
        loc = inspect.currentframe().f_back.f_locals
        r = np.asarray(replicas, dtype=float) * np.ones(len(rate_r))
        x = np.asarray(exposure, dtype=float) * np.ones(len(rate_r))
        y = (batch * prob).sum(axis=1)
        mean = step_s.mean(axis=1)
        scv = np.maximum((step_s**2).mean(axis=1) / np.maximum(mean, 1e-12) ** 2 - 1.0, 0.0)
        own = own_step_exposure(router, r, x, rate_r, mean, scv, y)
        first = np.asarray(loc["before_first"], dtype=float) * np.ones(len(rate_r))
        calls.append((loc["rate"], r, own, x, y, first))
        return prefill_first_arrivals(router, rate_r, step_s, decode_s, replicas, exposure, batch, prob)

    best = colocated_best_with(index, "prefill_first_arrivals", spy)
    r = float(best.config.replicas)
    for rate, reps, own, x, y, first in reversed(calls):
        hit = np.flatnonzero((reps == r) & np.isclose(rate, best.goodput_rps))
        if len(hit):
            i = hit[-1]
            return float(own[i]), float(x[i]), float(y[i]), float(first[i])
    raise LookupError(f"cell {index}: the best configuration's evaluation was not seen")


def trace(index: int) -> str:
    """One block of figures for scenario ``index``'s colocated cell (module docstring)."""
    own, x, y, first = planner_exposure(index)
    b, _, rec, n, warm = colocated_records(index)
    replicas = int(b.config.replicas)
    a, inst = rec.arrival_s, rec.instance
    lam_r = (n - warm) / (float(a[-1]) - float(a[warm])) / replicas
    per = [np.sort(a[inst == i]) for i in range(replicas)]
    ok = np.flatnonzero(rec.measured & np.isfinite(rec.end_s) & (rec.output_tokens >= 2) & (inst >= 0))
    out = rec.output_tokens[ok].astype(float)
    bins = np.digitize(out, np.quantile(out, [0.2, 0.4, 0.6, 0.8]))
    lines = [
        f"cell {index} {b.config.label()}: planner own step {own:.3f}, decode x {x:.3f} "
        f"(decode {y:.2f} + before first {first:.2f} per replica)"
    ]
    spans = {
        "own step": (rec.prefill_start_s, rec.prefill_end_s),
        "decode": (rec.first_token_s, rec.end_s),
    }
    for name, (lo, hi) in spans.items():
        joins = np.array(
            [
                max(
                    np.searchsorted(per[inst[r]], hi[r], "left")
                    - np.searchsorted(per[inst[r]], lo[r], "right"),
                    0,
                )
                for r in ok
            ],
            dtype=float,
        )
        random = lam_r * np.maximum(hi[ok] - lo[ok], 0.0)
        quint = " ".join(f"{joins[bins == q].mean():.2f}/{random[bins == q].mean():.2f}" for q in range(5))
        lines.append(
            f"  {name}: factor {joins.sum() / max(random.sum(), 1e-12):.3f} "
            f"(joins / lambda_r x span {joins.mean():.3f} / {random.mean():.3f}; by output quintile {quint})"
        )
    return "\n".join(lines)


def gap(index: int) -> str:
    """One line: the others below / tied with the picked replica once its prompt counts (module docstring)."""
    b, scn, rec, _, warm = colocated_records(index)
    replicas, weight = int(b.config.replicas), scn.engine.router.waiting_weight
    a, inst, start, end = rec.arrival_s, rec.instance, rec.prefill_start_s, rec.end_s
    below, tied, level = [], [], []
    for r in range(warm, len(a)):
        t, i = a[r], inst[r]
        if i < 0:
            continue
        prev = np.arange(max(0, r - 4000), r)
        live = prev[~(end[prev] <= t) & (inst[prev] >= 0)]
        score = np.bincount(inst[live], weights=np.where(start[live] > t, weight, 1.0), minlength=replicas)
        others = np.delete(score, i)
        below.append(np.sum(others < score[i] + 1.0))
        tied.append(np.sum(others == score[i] + 1.0))
        level.append(replicas - 1 - len(live) % replicas)
    g = np.array(below)
    return (
        f"cell {index} R {replicas}: others below the picked replica's new score {g.mean():.2f} (P(0) "
        f"{np.mean(g == 0):.2f}, P(1) {np.mean(g == 1):.2f}); tied {np.mean(tied):.2f}; level picture "
        f"{np.mean(level):.2f}"
    )


if __name__ == "__main__":
    show = gap if "--gap" in sys.argv else trace
    for cell in (int(c) for c in sys.argv[1].split(",")):
        print(show(cell), flush=True)
