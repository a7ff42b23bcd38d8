"""The idealised least-loaded chain behind the own-step joins (issue 17, session 11b; docs/validation.md
"Session 11b: the own-step join law").

A check of the mechanism, not a planner law: R replicas fed a Poisson stream of rate R lambda_r, each
prompt routed to the lowest vLLM score w x waiting + prefilling + running (model.sim.colocated's
``Replica.load``, w = 4), ties to the first replica (the simulator's strict ``<``) or at random; a
replica prefills its queued prompts one at a time (steps Gamma-distributed with the planner's mean and
second moment of the packed step), and while it prefills none of its running requests leaves
(prefill-first pauses every decode); a running request leaves at rate 1 / L (exponential lifetime,
L = the planner's decode occupancy per replica over lambda_r, Little). Time advances in steps of
min(s, 1 / (R lambda_r)) / 20 (departures binomial per step).

Measured per prompt: the others tied at the lowest score when it joins (the gap G the fleet must fill
before its replica is lowest again; ``benchmarks.own_step_joins --gap`` measures the same in the
simulator), and the prompts joining its replica during its own prefill step over lambda_r x the step
(the own-step factor; ``benchmarks.own_step_joins`` measures it in the simulator, the planner uses x).
The planner's inputs (x, lambda_r, the packed step's moments, the occupancy) are those of the grid
cell's best colocated configuration at its planned goodput, read at model.serving.colocated's call of
model.queueing.own_step.prefill_first_arrivals (prefill-first only).

Usage: ``PYTHONPATH=. python -m benchmarks.own_step_chain 133,84 [--events 15000] [--random-ties]
[--no-freeze] [--fixed-life] [--pack] [--decode-steps] [--spread-life]``. The ``--bracket`` mode (the
planner with the own-step joins at the chain's factor, benchmarks.own_step_joins.bracket) was retired in
session 14: the planner now counts the own step at the chain's factor itself
(model.queueing.own_step.prefill_first_arrivals).
"""

from __future__ import annotations

import inspect
import random
import sys
from dataclasses import dataclass

import numpy as np

from benchmarks.validate_grid import colocated_best_with
from model.queueing.own_step import prefill_first_arrivals


@dataclass(frozen=True)
class CellInputs:
    """The planner's figures for one cell's best colocated configuration at its planned goodput."""

    replicas: int
    rate_per_replica_rps: float
    step_mean_s: float
    step_second_moment_s2: float
    decode_occupancy: float
    exposure: float
    decode_step_s: float
    output_tokens: tuple[float, ...]


@dataclass(frozen=True)
class ChainResult:
    """Own-step factor (joins during the own step over lambda_r x the step), mean gap, P(gap = 0)."""

    own_step_factor: float
    gap_mean: float
    gap_zero: float


def cell_inputs(index: int) -> CellInputs:
    """The planner's inputs of grid cell ``index`` (a spy on model.serving.colocated's call of
    prefill_first_arrivals: the packed step ``step_s`` = the stalls, the occupancy from ``batch`` and
    ``prob``, x = ``exposure``)."""
    calls: list[dict] = []

    def spy(router, rate_r, step_s, decode_s, replicas, exposure, batch, prob):
        loc = inspect.currentframe().f_back.f_locals
        calls.append(
            {
                "rate": loc["rate"].copy(),
                "rate_r": rate_r.copy(),
                "r": np.broadcast_to(replicas, rate_r.shape).copy(),
                "x": np.broadcast_to(exposure, rate_r.shape).copy(),
                "s": step_s.mean(axis=1),
                "s2": (step_s**2).mean(axis=1),
                "y": (batch * prob).sum(axis=1),
                "t_dec": loc["t_dec"].copy(),
                "out": loc["out_tokens"],
            }
        )
        return prefill_first_arrivals(router, rate_r, step_s, decode_s, replicas, exposure, batch, prob)

    best = colocated_best_with(index, "prefill_first_arrivals", spy)
    for c in reversed(calls):
        hit = np.flatnonzero((c["r"] == best.config.replicas) & np.isclose(c["rate"], best.goodput_rps))
        if len(hit):
            i = hit[-1]
            return CellInputs(
                int(c["r"][i]), float(c["rate_r"][i]), float(c["s"][i]), float(c["s2"][i]), float(c["y"][i]),
                float(c["x"][i]), float(c["t_dec"][i]), tuple(float(o) for o in c["out"]),
            )  # fmt: skip
    raise LookupError(f"cell {index}: the best configuration's evaluation was not seen")


def run_chain(
    cell: CellInputs,
    events: int = 15000,
    first_tie: bool = True,
    freeze: bool = True,
    fixed_life: bool = False,
    pack: bool = False,
    decode_steps: bool = False,
    spread_life: bool = False,
) -> ChainResult:
    """Simulate the idealised chain (module docstring) for about ``events`` arrivals; ``fixed_life``:
    every request decodes for exactly L (of unfrozen time) instead of an exponential lifetime;
    ``pack``: a replica prefills all its queued prompts in one step (the sum of their lengths);
    ``decode_steps``: a replica that is decoding starts a prefill only at the end of its decode step
    (steps of the planner's t_dec back to back, the prompt waiting at weight 4 meanwhile);
    ``spread_life``: with ``fixed_life``, a request decodes for L x O / E[O], O drawn from the
    workload's output lengths (the planner's sample)."""
    seed = 1
    rng, draws = random.Random(seed), np.random.default_rng(seed)
    r, lam_r = cell.replicas, cell.rate_per_replica_rps
    fleet = r * lam_r
    scv = max(cell.step_second_moment_s2 / cell.step_mean_s**2 - 1.0, 1e-6)
    shape, scale = 1.0 / scv, cell.step_mean_s * scv
    dt = min(cell.step_mean_s, 1.0 / fleet) / 20.0
    leave = 1.0 - np.exp(-dt * lam_r / max(cell.decode_occupancy, 1e-9))
    running = np.zeros(r, dtype=int)
    left: list[list[float]] = [[] for _ in range(r)]  # fixed_life: remaining decode time per request
    life = max(cell.decode_occupancy, 1e-9) / lam_r
    outs = cell.output_tokens
    mean_out = float(np.mean(outs))
    ends = np.full(r, -1.0)  # the prefill step in progress ends at (-1: none)
    batch = [0] * r  # prompts in the step in progress
    bound = [0.0] * r  # the decode step in progress ends at
    t_dec = max(cell.decode_step_s, dt)
    queues: list[list[tuple[float, float]]] = [[] for _ in range(r)]  # (step length, join time)
    joins: list[list[float]] = [[] for _ in range(r)]
    steps: list[tuple[int, float, float]] = []
    gaps: list[int] = []
    arrival = rng.expovariate(fleet)
    for n in range(int(events / fleet / dt)):
        t = n * dt
        while arrival < t + dt:
            score = [4.0 * len(queues[i]) + (ends[i] >= 0) + running[i] for i in range(r)]
            low = min(score)
            tied = [i for i in range(r) if score[i] == low]
            i = tied[0] if first_tie else rng.choice(tied)
            gaps.append(len(tied) - 1)
            joins[i].append(arrival)
            queues[i].append((rng.gammavariate(shape, scale), arrival))
            arrival += rng.expovariate(fleet)
        for i in range(r):
            if ends[i] >= 0 and t >= ends[i]:
                running[i] += batch[i]
                left[i].extend(
                    life * (rng.choice(outs) / mean_out if spread_life else 1.0) for _ in range(batch[i])
                )
                ends[i] = -1.0
            free = not decode_steps or t >= bound[i] or not running[i]
            if decode_steps and ends[i] < 0 and t >= bound[i] and not queues[i]:
                bound[i] = t + t_dec  # the next decode step
            if ends[i] < 0 and queues[i] and free:
                taken = queues[i] if pack else queues[i][:1]
                queues[i] = [] if pack else queues[i][1:]
                length = sum(q[0] for q in taken)
                ends[i], batch[i] = t + length, len(taken)
                steps.extend((i, max(t, joined), t + length) for _, joined in taken)
        if fixed_life:
            for i in range(r):
                if not (freeze and ends[i] >= 0) and left[i]:
                    left[i] = [v - dt for v in left[i] if v > dt]
                    running[i] = len(left[i])
            continue
        out = draws.binomial(running, leave)
        if freeze:
            out[ends >= 0] = 0
        running -= out
    times = [np.array(j) for j in joins]
    met, exposed = 0.0, 0.0
    for i, lo, hi in steps[len(steps) // 10 :]:
        met += max(np.searchsorted(times[i], hi) - np.searchsorted(times[i], lo, "right"), 0)
        exposed += lam_r * max(hi - lo, 0.0)
    g = np.array(gaps[len(gaps) // 10 :])
    return ChainResult(met / exposed, float(g.mean()), float(np.mean(g == 0)))


if __name__ == "__main__":
    args = sys.argv[1:]
    count = int(args[args.index("--events") + 1]) if "--events" in args else 15000
    for index in (int(c) for c in args[0].split(",")):
        inp = cell_inputs(index)
        res = run_chain(
            inp,
            count,
            "--random-ties" not in args,
            "--no-freeze" not in args,
            "--fixed-life" in args,
            "--pack" in args,
            "--decode-steps" in args,
            "--spread-life" in args,
        )
        print(
            f"cell {index} R {inp.replicas}: chain own-step factor {res.own_step_factor:.3f} "
            f"(planner x {inp.exposure:.3f}, over x {res.own_step_factor / inp.exposure:.2f}); "
            f"gap {res.gap_mean:.2f} (P(0) {res.gap_zero:.2f})",
            flush=True,
        )
