"""Tabulate the own-step factor of the idealised least-loaded chain (issue 17, session 13, branch colo15a).

The chain is ``benchmarks.own_step_chain``'s (docs/validation.md, "Session 11b: the own-step join
law"), solved event by event instead of in time steps by ``benchmarks.levelled_chain`` (exact,
Gillespie's direct method, time in units of 1 / lambda_r): R replicas fed a Poisson stream of rate R,
each prompt routed to the lowest vLLM score w x waiting + prefilling + running (w = 4, ties to the
first replica); a replica prefills its queued prompts one at a time, each step Gamma-distributed with
mean a = lambda_r E[s] and SCV c2 (the packed step's two moments); while it prefills none of its
running requests leaves (prefill-first pauses every decode); otherwise each running request leaves at
rate 1 / y (exponential lifetime; y = lambda_r L, the decode occupancy per replica, Little).

Measured: the own-step factor F = the prompts that join a replica during a prefill step there over
lambda_r x that step (summed over steps after a 10% warm-up; the replicas start at floor(y) running
each, the level occupancy, to shorten it), with the standard error of 20 batch means. F is the chain's
replacement for the planner's exposure x on a request's own packed step
(model.queueing.own_step). Inputs: R, a, y, c2 (the chain has no others once time is scaled by
lambda_r). Writes ``model/queueing/data/own_step_factor.json``.

Usage: ``PYTHONPATH=. python -m benchmarks.own_step_table [--arrivals 20000] [--check R,a,y,c2]
[--validate N]`` (``--check``: one point, printed with its standard error, not written;
``--validate``: the committed table's interpolant against fresh chain runs at N random points).
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

from benchmarks.levelled_chain import STEP_END, LevelledChain

OUT = Path(__file__).resolve().parents[1] / "model" / "queueing" / "data" / "own_step_factor.json"
REPLICAS = (2, 4, 8, 16, 32, 64)
LOAD = (0.03, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9)  # a = lambda_r E[s], the replica's prefill utilisation
OCCUPANCY = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0, 16.0, 64.0)  # y = lambda_r L
STEP_SCV = (0.0, 1.0, 3.0)
ARRIVALS = 20000
BATCHES = 20


def own_step_factor(
    replicas: int, load: float, occupancy: float, step_scv: float, arrivals: int = ARRIVALS, seed: int = 1
) -> tuple[float, float]:
    """(F, its standard error) of the chain (module docstring) over ``arrivals`` fleet arrivals."""
    chain = LevelledChain(replicas, load, occupancy, step_scv, seed, running=int(occupancy))
    warm = arrivals // 10
    size = (arrivals - warm) // BATCHES + 1
    joins, exposed = [0.0] * BATCHES, [0.0] * BATCHES
    while chain.arrivals < arrivals:
        if chain.advance()[0] == STEP_END and chain.arrivals > warm:
            b = min((chain.arrivals - warm) // size, BATCHES - 1)
            joins[b] += chain.finished[0]
            exposed[b] += chain.finished[1]
    means = [j / e for j, e in zip(joins, exposed, strict=True) if e > 0]
    mid = sum(means) / len(means)
    se = math.sqrt(sum((v - mid) ** 2 for v in means) / (len(means) - 1) / len(means))
    return sum(joins) / sum(exposed), se


def validate(points: int, arrivals: int, seed: int = 2026) -> None:
    """Print the committed table's interpolant (model.queueing.own_step.chain_factor) against fresh
    chain runs at ``points`` random inputs (R log-uniform on 2-64, a uniform on 0.03-0.9, y
    log-uniform on 0.1-64, c2 uniform on 0-3), and the error's median and maximum."""
    import numpy as np

    from model.queueing.own_step import chain_factor

    rng = np.random.default_rng(seed)
    errors = []
    for k in range(points):
        r = round(2.0 ** float(rng.uniform(1, 6)))
        a, y = rng.uniform(0.03, 0.9), float(np.exp(rng.uniform(np.log(0.1), np.log(64.0))))
        c2 = rng.uniform(0.0, 3.0)
        table = float(chain_factor(np.array([r]), np.array([a]), np.array([y]), np.array([c2]))[0])
        f, se = own_step_factor(r, a, y, c2, arrivals, 1000 + k)
        errors.append(abs(table - f))
        print(f"R {r:2d} a {a:.2f} y {y:6.2f} c2 {c2:.2f}: table {table:.3f} chain {f:.3f} +- {se:.3f}")
    print(f"|table - chain|: median {np.median(errors):.3f}, max {max(errors):.3f}")


def main(argv: list[str]) -> None:
    """Tabulate (or ``--check`` one point, or ``--validate`` the table)."""
    arrivals = int(argv[argv.index("--arrivals") + 1]) if "--arrivals" in argv else ARRIVALS
    if "--validate" in argv:
        validate(int(argv[argv.index("--validate") + 1]), arrivals)
        return
    if "--check" in argv:
        r, a, y, c2 = (float(v) for v in argv[argv.index("--check") + 1].split(","))
        f, se = own_step_factor(int(r), a, y, c2, arrivals)
        print(f"R {int(r)} a {a} y {y} c2 {c2}: F {f:.4f} +- {se:.4f}")
        return
    start = time.process_time()
    factor, error, seed = [], [], 0
    for r in REPLICAS:
        for a in LOAD:
            for y in OCCUPANCY:
                for c2 in STEP_SCV:
                    seed += 1
                    f, se = own_step_factor(r, a, y, c2, arrivals, seed)
                    factor.append(round(f, 4))
                    error.append(round(se, 4))
            print(f"R {r} a {a}: {time.process_time() - start:.0f} s CPU", flush=True)
    OUT.write_text(
        json.dumps(
            {
                "source": "benchmarks/own_step_table.py",
                "arrivals": arrivals,
                "axes": {"replicas": REPLICAS, "load": LOAD, "occupancy": OCCUPANCY, "step_scv": STEP_SCV},
                "factor": factor,
                "standard_error": error,
            }
        )
        + "\n"
    )
    print(f"wrote {OUT}: {len(factor)} points, {time.process_time() - start:.0f} s CPU")


if __name__ == "__main__":
    main(sys.argv[1:])
