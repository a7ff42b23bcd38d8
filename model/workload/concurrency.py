"""Closed-loop (fixed-concurrency) load: N users, each sending its next request when its last one
completes, after a think time.

This is how benchmark clients load a server (vLLM ``benchmark_serving --max-concurrency``,
genai-perf/aiperf ``--concurrency``, the Dynamo recipes): the offered rate is not an input but
follows from the latency, X = N / (R + Z) (the response-time law of an interactive system,
Harchol-Balter 2013, *Performance Modeling and Design of Computer Systems*, sec. 6.6; Lazowska et
al. 1984, *Quantitative System Performance*, sec. 3.2). ``think_time_s`` is the mean think time Z
(0: back-to-back requests, the benchmark clients' default); ``think`` its distribution,
"exponential" or "fixed". The analytical model uses only the mean (model.queueing.closed_loop);
the simulator draws each think time from the distribution (model.sim.closed_loop).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.errors import InputError
from model.limits import MAX_CONCURRENCY, MAX_THINK_TIME_S, check_int, check_real

__all__ = ["THINK_DISTRIBUTIONS", "Concurrency", "as_concurrency"]

THINK_DISTRIBUTIONS = ("exponential", "fixed")


@dataclass(frozen=True)
class Concurrency:
    """N concurrent users (``users``), each thinking ``think_time_s`` on average (distribution
    ``think``: "exponential" or "fixed") between the end of one request and the next.

    Errors name the field: ``concurrency`` (a whole number in [1, MAX_CONCURRENCY]),
    ``think_time`` (seconds in [0, MAX_THINK_TIME_S]) and ``think``.
    """

    users: int
    think_time_s: float = 0.0
    think: str = "exponential"

    def __post_init__(self) -> None:
        users = self.users
        if isinstance(users, np.integer):
            users = int(users)
        check_int("concurrency", users, 1, MAX_CONCURRENCY, "users of a closed-loop run")
        object.__setattr__(self, "users", users)
        z = check_real("think_time", self.think_time_s, 0.0, MAX_THINK_TIME_S)
        object.__setattr__(self, "think_time_s", z)
        if self.think not in THINK_DISTRIBUTIONS:
            raise InputError("think", self.think, f"one of {', '.join(THINK_DISTRIBUTIONS)}")

    def think_times_s(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` think times drawn from the distribution (all 0 when the mean is 0)."""
        if self.think_time_s == 0.0:
            return np.zeros(n)
        if self.think == "fixed":
            return np.full(n, self.think_time_s)
        return rng.exponential(self.think_time_s, n)

    def label(self) -> str:
        """E.g. "64 users" or "64 users, think 2 s (exponential)"."""
        text = f"{self.users} user{'s' if self.users != 1 else ''}"
        if self.think_time_s > 0:
            text += f", think {self.think_time_s:g} s ({self.think})"
        return text


def as_concurrency(
    concurrency: int | Concurrency, think_time_s: float = 0.0, think: str = "exponential"
) -> Concurrency:
    """A Concurrency as given, or built from a user count and the think time (errors name the field)."""
    if isinstance(concurrency, Concurrency):
        return concurrency
    if isinstance(concurrency, bool) or not isinstance(concurrency, int | np.integer):
        raise InputError(
            "concurrency", concurrency, f"a whole number of users in [1, {MAX_CONCURRENCY}] or a Concurrency"
        )
    return Concurrency(int(concurrency), think_time_s, think)
