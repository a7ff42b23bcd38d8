"""The decode-window exposure and decode occupancy of the idealised least-loaded chain (issue 17,
session 13, branch colo16; docs/session13/colo16.md).

The chain of ``benchmarks.levelled_chain``, shared with ``benchmarks.own_step_table`` (R replicas,
Poisson arrivals, vLLM's score 4 x waiting + prefilling + running, ties to the first; a replica
prefills its queue one Gamma step at a time (mean a, SCV c2, time in 1 / lambda_r) and none of its
running requests leaves while it prefills; otherwise each leaves at rate 1 / y0, y0 = lambda_r (O - 1)
t_dec the decode occupancy without stalls; started empty), measuring instead of the own-step factor:

* x_win: the prompts that join a replica, each counted once per running request there (each stalls
  them all), over lambda_r x the running requests' total time: the decode window's exposure (the
  planner's x of model.queueing.routing.stall_exposure, in the flow-balance form E[K(K-1)] / E[K]^2);
* the decode occupancy per replica (time average of the running count) and before the first token
  (waiting + prefilling).

A diagnostic (not wired into the planner). Usage: ``PYTHONPATH=. python -m benchmarks.window_chain
R,a,y0,c2 [R,a,y0,c2 ...] [--arrivals N]``.
"""

from __future__ import annotations

import sys

from benchmarks.levelled_chain import ARRIVAL, STEP_END, LevelledChain


def window_chain(
    replicas: int, load: float, y0: float, step_scv: float, arrivals: int = 40000, seed: int = 1
) -> tuple[float, float, float]:
    """(x_win, decode occupancy per replica, before-first per replica) of the chain."""
    chain = LevelledChain(replicas, load, y0, step_scv, seed)
    warm = arrivals // 10
    hits, run_time, first_time, t_warm = 0.0, 0.0, 0.0, None
    in_first = 0  # waiting + prefilling, fleet-wide
    while chain.arrivals < arrivals:
        t, decoding, counting = chain.t, sum(chain.run), t_warm is not None
        kind, i = chain.advance()
        if counting:  # the state held over (t, chain.t)
            run_time += decoding * (chain.t - t)
            first_time += in_first * (chain.t - t)
        if kind == ARRIVAL:
            if chain.arrivals == warm:
                t_warm = chain.t
            if t_warm is not None:
                hits += chain.run[i]
            in_first += 1
        elif kind == STEP_END:
            in_first -= 1
    span = (chain.t - t_warm) * replicas
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
