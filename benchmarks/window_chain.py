"""The decode-window exposure and decode occupancy of the idealised least-loaded chain (issue 17,
session 13, branch colo16; docs/session13/colo16.md).

The chain of ``benchmarks.own_step_table`` (R replicas, Poisson arrivals, vLLM's score 4 x waiting +
prefilling + running, ties to the first; a replica prefills its queue one Gamma step at a time (mean a,
SCV c2, time in 1 / lambda_r) and none of its running requests leaves while it prefills; otherwise each
leaves at rate 1 / y0, y0 = lambda_r (O - 1) t_dec the decode occupancy without stalls), measuring
instead of the own-step factor:

* x_win: the prompts that join a replica, each counted once per running request there (each stalls
  them all), over lambda_r x the running requests' total time: the decode window's exposure (the
  planner's x of model.queueing.routing.stall_exposure, in the flow-balance form E[K(K-1)] / E[K]^2);
* the decode occupancy per replica (time average of the running count) and before the first token
  (waiting + prefilling).

A diagnostic (not wired into the planner). Usage: ``PYTHONPATH=. python -m benchmarks.window_chain
R,a,y0,c2 [R,a,y0,c2 ...] [--arrivals N]``.
"""

from __future__ import annotations

import math
import random
import sys
from bisect import bisect_right
from itertools import accumulate

WAITING_WEIGHT = 4.0  # vLLM's router weighs a waiting request 4 x a running one (model.sim.colocated)


def window_chain(
    replicas: int, load: float, y0: float, step_scv: float, arrivals: int = 40000, seed: int = 1
) -> tuple[float, float, float]:
    """(x_win, decode occupancy per replica, before-first per replica) of the chain."""
    rng = random.Random(seed)
    c2 = max(step_scv, 1e-6)
    shape, scale = 1.0 / c2, load * c2
    r, life = replicas, max(y0, 1e-9)
    run, score, wfree = [0] * r, [0.0] * r, [0] * r
    queue: list[list[float]] = [[] for _ in range(r)]
    end = [math.inf] * r
    free, t, te, n = 0, 0.0, math.inf, 0
    ta = rng.expovariate(r)
    warm = arrivals // 10
    hits, run_time, first_time, t_warm = 0.0, 0.0, 0.0, None
    in_first = 0
    while n < arrivals:
        td = t + rng.expovariate(free / life) if free > 0 else math.inf
        t_next = min(ta, te, td)
        if t_warm is not None:
            run_time += sum(run) * (t_next - t)
            first_time += in_first * (t_next - t)
        if ta <= te and ta <= td:
            t, n = ta, n + 1
            if n == warm:
                t_warm = t
            i = score.index(min(score))
            if t_warm is not None:
                hits += run[i]
            in_first += 1
            if end[i] != math.inf:
                queue[i].append(rng.gammavariate(shape, scale))
                score[i] += WAITING_WEIGHT
            else:
                s = rng.gammavariate(shape, scale)
                end[i] = t + s
                score[i] += 1.0
                free, wfree[i] = free - wfree[i], 0
                te = min(te, t + s)
            ta = t + rng.expovariate(r)
        elif te <= td:
            t = te
            i = end.index(te)
            run[i] += 1
            in_first -= 1
            if queue[i]:
                s = queue[i].pop(0)
                end[i] = t + s
                score[i] += 1.0 - WAITING_WEIGHT
            else:
                end[i] = math.inf
                wfree[i] = run[i]
                free += run[i]
            te = min(end)
        else:
            t = td
            i = bisect_right(list(accumulate(wfree)), rng.random() * free)
            run[i] -= 1
            wfree[i] -= 1
            free -= 1
            score[i] -= 1.0
    span = (t - t_warm) * r
    return hits / run_time, run_time / span, first_time / span


def main(argv: list[str]) -> None:
    arrivals = int(argv[argv.index("--arrivals") + 1]) if "--arrivals" in argv else 40000
    for arg in argv:
        if arg.count(",") == 3:
            rr, a, y0, c2 = arg.split(",")
            x, occ, first = window_chain(int(rr), float(a), float(y0), float(c2), arrivals)
            print(
                f"R {rr} a {a} y0 {y0} c2 {c2}: x_win {x:.3f}, decoding {occ:.3f}, before first {first:.3f}"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
