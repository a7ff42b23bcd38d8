"""The idealised least-loaded chain of ``benchmarks.own_step_table`` and ``benchmarks.window_chain``,
event by event (issue 17, session 13): one implementation, each script measuring its own quantities.

In dimensionless form (time in units of 1 / lambda_r): R replicas fed a Poisson stream of rate R, each
prompt routed to the lowest vLLM score w x waiting + prefilling + running (model.sim.colocated's
``Replica.load``, w = 4; ties to the first replica, the simulator's strict ``<``); a replica prefills
its queued prompts one at a time, each step Gamma-distributed with mean a and SCV c2; while it prefills
none of its running requests leaves (prefill-first pauses every decode); otherwise each running request
leaves at rate 1 / y (exponential lifetime). Gillespie's direct method (Gillespie 1977, J. Phys. Chem.
81(25)) with the step ends as scheduled events: the departure rate is constant between events, so the
run is exact. The random draws come in a fixed order (the first arrival time; then per event the next
departure time when any request may leave; at an arrival its step, then the next arrival time; at a
departure the uniform that picks its replica), so a seed fixes the run.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from itertools import accumulate

WAITING_WEIGHT = 4.0
"""vLLM's router weighs a waiting request 4 x a running one (model.sim.colocated.Replica.load)."""

ARRIVAL, STEP_END, DEPARTURE = 0, 1, 2
"""The kinds of event ``LevelledChain.advance`` reports."""


class LevelledChain:
    """The chain's state (module docstring): R replicas with ``running`` decoding requests each at t = 0.

    Per replica: ``run`` (running requests), ``score`` (the router's load), ``queue`` (the waiting
    prompts' step lengths), ``end`` (the current prefill step's end, inf when not prefilling),
    ``joined`` and ``length`` (the prompts that joined during the current step, and its length),
    ``wfree`` (its running requests free to leave: ``run`` where not prefilling, else 0); ``free`` is
    their sum, ``t`` the time of the last event, ``arrivals`` the prompts arrived so far.
    """

    def __init__(
        self, replicas: int, load: float, occupancy: float, step_scv: float, seed: int, running: int = 0
    ) -> None:
        self.rng = random.Random(seed)
        c2 = max(step_scv, 1e-6)
        self.shape, self.scale = 1.0 / c2, load * c2
        self.life = max(occupancy, 1e-9)
        r = replicas
        self.run, self.score, self.wfree = [running] * r, [float(running)] * r, [running] * r
        self.queue: list[list[float]] = [[] for _ in range(r)]
        self.end, self.joined, self.length = [math.inf] * r, [0] * r, [0.0] * r
        self.free, self.t, self.te, self.arrivals = running * r, 0.0, math.inf, 0
        self.finished = (0, 0.0)  # the last ended step's (prompts joined during it, its length)
        self.ta = self.rng.expovariate(r)

    def advance(self) -> tuple[int, int]:
        """Run the next event: its kind (ARRIVAL, STEP_END or DEPARTURE) and replica. At a step end,
        ``finished`` holds the ended step's (prompts joined during it, its length)."""
        td = self.t + self.rng.expovariate(self.free / self.life) if self.free > 0 else math.inf
        if self.ta <= self.te and self.ta <= td:
            return ARRIVAL, self._arrive()
        if self.te <= td:
            return STEP_END, self._end_step()
        return DEPARTURE, self._depart(td)

    def _start(self, i: int, s: float) -> None:
        self.end[i], self.length[i], self.joined[i] = self.t + s, s, 0

    def _arrive(self) -> int:
        """An arrival joins the lowest score: queues behind a step there, or starts one."""
        self.t, self.arrivals = self.ta, self.arrivals + 1
        score = self.score
        i = score.index(min(score))
        if self.end[i] != math.inf:
            self.joined[i] += 1
            self.queue[i].append(self.rng.gammavariate(self.shape, self.scale))
            score[i] += WAITING_WEIGHT
        else:
            s = self.rng.gammavariate(self.shape, self.scale)
            self._start(i, s)
            score[i] += 1.0
            self.free, self.wfree[i] = self.free - self.wfree[i], 0
            self.te = min(self.te, self.t + s)
        self.ta = self.t + self.rng.expovariate(len(score))
        return i

    def _end_step(self) -> int:
        """A prefill step ends: its prompt starts decoding; the next queued step starts, or decoding
        resumes."""
        self.t = self.te
        i = self.end.index(self.te)
        self.run[i] += 1
        self.finished = (self.joined[i], self.length[i])
        if self.queue[i]:
            self._start(i, self.queue[i].pop(0))
            self.score[i] += 1.0 - WAITING_WEIGHT
        else:
            self.end[i] = math.inf
            self.wfree[i] = self.run[i]
            self.free += self.run[i]
        self.te = min(self.end)
        return i

    def _depart(self, td: float) -> int:
        """A running request leaves a replica that is not prefilling (picked by its share of them)."""
        self.t = td
        i = bisect_right(list(accumulate(self.wfree)), self.rng.random() * self.free)
        self.run[i] -= 1
        self.wfree[i] -= 1
        self.free -= 1
        self.score[i] -= 1.0
        return i
