"""Prompts that join a request's replica during its own prefill step and during its decode window
(issue 17, session 11, docs/validation.md "Session 11: colocated R > 1 under-prediction").

For the colocated (prefill-first) cell of each grid scenario given, simulated at the planner's goodput
on the grid's seeds and run length (benchmarks.stall_followon.colocated_records), per measured request:
the prompts that join its replica while its own packed prefill step runs (prefill start -> prefill end)
and while it decodes (first token -> end), each over lambda_r x the span's length (lambda_r = the
measured rate / R: 1 for a random split), against the planner's exposure x
(model.queueing.routing.stall_exposure), which scales both spans alike
(model.serving.colocated: replica_arrivals over the packed step plus (O - 1) t_dec). Means per output
quintile as joins / lambda_r x span.

``--bracket PHI`` (a diagnostic, not a law): the planner with the prompts that join during a request's
own step counted at PHI x the planner's x lambda_r (levelling routers, R > 1, prefill-first only; a patch
of model.serving.colocated's replica_arrivals), the cell's simulated goodput in
benchmarks/results/grid_session10.json over the new planned goodput (no simulation).

``--gap``: at each measured prompt's join, the other replicas whose vLLM score (4 x waiting + prefilling +
running, rebuilt from the records as benchmarks.stall_followon does) is below the picked replica's score
plus one (its own request during its step), those tied with it, against the level picture's R - 1 -
(N mod R) (N the fleet's requests).

Usage: ``PYTHONPATH=. python -m benchmarks.own_step_joins 84,133`` (``--bracket 0``, ``--gap``).
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

import numpy as np

from benchmarks.stall_followon import colocated_records
from benchmarks.validate_grid import colocated_best_with
from model.queueing.routing import replica_arrivals, stall_exposure

GRID = Path(__file__).parent / "results" / "grid_session10.json"


def planner_exposure(index: int) -> tuple[float, float, float]:
    """(x, decode occupancy per replica, requests before their first token per replica) of the best
    colocated configuration of grid cell ``index`` at its planned goodput (evaluate_colocated's call)."""
    calls: list[tuple] = []

    def spy(router, batch, prob, replicas, before_first=0.0):
        loc = inspect.currentframe().f_back.f_locals
        x = stall_exposure(router, batch, prob, replicas, before_first)
        if not loc["chunked"]:
            r = np.broadcast_to(replicas, loc["rate"].shape)
            calls.append(
                (loc["rate"], r, x, (batch * prob).sum(axis=1), np.broadcast_to(before_first, x.shape))
            )
        return x

    best = colocated_best_with(index, "stall_exposure", spy)
    r = float(best.config.replicas)
    for rate, reps, x, y, first in reversed(calls):
        hit = np.flatnonzero((reps == r) & np.isclose(rate, best.goodput_rps))
        if len(hit):
            return float(x[hit[-1]]), float(y[hit[-1]]), float(first[hit[-1]])
    raise LookupError(f"cell {index}: the best configuration's evaluation was not seen")


def trace(index: int) -> str:
    """One block of figures for scenario ``index``'s colocated cell (module docstring)."""
    x, y, first = planner_exposure(index)
    b, _, rec, n, warm = colocated_records(index)
    replicas = int(b.config.replicas)
    a, inst = rec.arrival_s, rec.instance
    lam_r = (n - warm) / (float(a[-1]) - float(a[warm])) / replicas
    per = [np.sort(a[inst == i]) for i in range(replicas)]
    ok = np.flatnonzero(rec.measured & np.isfinite(rec.end_s) & (rec.output_tokens >= 2) & (inst >= 0))
    out = rec.output_tokens[ok].astype(float)
    bins = np.digitize(out, np.quantile(out, [0.2, 0.4, 0.6, 0.8]))
    lines = [
        f"cell {index} {b.config.label()}: planner x {x:.3f} "
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


def bracket(index: int, phi: float) -> str:
    """One line: grid cell ``index``'s colocated planned goodput with the own-step joins at ``phi`` x
    (module docstring), and the grid's simulated goodput over it."""

    def patched(router, rate_r, window, replicas, exposure):
        loc = inspect.currentframe().f_back.f_locals
        if loc["chunked"] or router.policy not in ("least-loaded", "least-kv", "cache-aware"):
            return replica_arrivals(router, rate_r, window, replicas, exposure)
        keep = np.where(np.asarray(replicas, dtype=float) * np.ones(len(rate_r)) > 1, phi, 1.0)
        return replica_arrivals(
            router, rate_r, window - (1.0 - keep)[:, None] * loc["stalls"], replicas, exposure
        )

    best = colocated_best_with(index, "replica_arrivals", patched)
    grid = {s["scenario"]["index"]: s for s in json.loads(GRID.read_text())["results"]}
    c = next(c for c in grid[index]["cells"] if c["style"] == "colocated")
    same = "" if c["config"] == best.config.label() else f" (now {best.config.label()})"
    planned, simulated = c["goodput_planner"], c["goodput_sim"]
    return (
        f"cell {index} {c['config']}: planned {planned:.3f} -> {best.goodput_rps:.3f} req/s{same}; "
        f"simulated / planned {simulated / planned:.3f} -> {simulated / best.goodput_rps:.3f}"
    )


if __name__ == "__main__":
    cells = [int(c) for c in sys.argv[1].split(",")]
    if "--bracket" in sys.argv:
        phi = float(sys.argv[sys.argv.index("--bracket") + 1])
        for cell in cells:
            print(bracket(cell, phi), flush=True)
    else:
        show = gap if "--gap" in sys.argv else trace
        for cell in cells:
            print(show(cell), flush=True)
