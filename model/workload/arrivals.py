"""Arrival processes: Poisson, gamma renewal (bursty), trace replay and trace rescaling.

Every process has ``arrival_times_s(n, rng) -> np.ndarray`` (n nondecreasing times, seconds), a
mean rate ``rate_rps`` and the squared coefficient of variation of its inter-arrival times
``scv`` (the ``scv_arrival`` argument of :func:`model.queueing.mgc_wait`).

Renewal processes start at time 0 with an ordinary (not stationary) first gap, so the first
arrival is one inter-arrival time after 0 (Cox 1962, *Renewal Theory*, sec. 1.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from model.errors import InputError

__all__ = ["ArrivalProcess", "GammaRenewal", "Poisson", "TraceReplay", "scale_to_rate"]


def _check_rate(rate_rps: float) -> float:
    if isinstance(rate_rps, bool) or not isinstance(rate_rps, int | float | np.floating | np.integer):
        raise InputError("rate_rps", rate_rps, "a finite arrival rate > 0 requests/s")
    r = float(rate_rps)
    if not (math.isfinite(r) and r > 0):
        raise InputError("rate_rps", rate_rps, "a finite arrival rate > 0 requests/s")
    return r


def _check_n_rng(n: object, rng: object) -> tuple[int, np.random.Generator]:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise InputError("n", n, "an integer >= 0")
    if not isinstance(rng, np.random.Generator):
        raise InputError("rng", rng, "a numpy.random.Generator, e.g. np.random.default_rng(0)")
    return int(n), rng


class ArrivalProcess:
    """Base class: ``arrival_times_s``, ``rate_rps`` and ``scv``."""

    rate_rps: float

    @property
    def scv(self) -> float:
        """Squared coefficient of variation of inter-arrival times."""
        raise NotImplementedError

    def arrival_times_s(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """The first n arrival times, seconds, nondecreasing."""
        raise NotImplementedError


@dataclass(frozen=True)
class Poisson(ArrivalProcess):
    """Poisson process: i.i.d. exponential gaps with mean 1 / rate (SCV 1)."""

    rate_rps: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate_rps", _check_rate(self.rate_rps))

    @property
    def scv(self) -> float:
        return 1.0

    def arrival_times_s(self, n: int, rng: np.random.Generator) -> np.ndarray:
        n, rng = _check_n_rng(n, rng)
        return np.cumsum(rng.exponential(1.0 / self.rate_rps, n))


@dataclass(frozen=True)
class GammaRenewal(ArrivalProcess):
    """Renewal process with gamma gaps of mean 1/rate and coefficient of variation ``cv``.

    Gamma shape k = 1 / cv^2, scale theta = cv^2 / rate (mean k theta = 1/rate, SCV 1/k = cv^2).
    cv > 1 is burstier than Poisson, cv < 1 more regular, cv = 1 is Poisson. BurstGPT (Wang et al.
    2024, sec. 3) fits gamma inter-arrivals to ChatGPT/GPT-4 traffic.
    """

    rate_rps: float
    cv: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate_rps", _check_rate(self.rate_rps))
        cv = self.cv
        if isinstance(cv, bool) or not isinstance(cv, int | float) or not (math.isfinite(cv) and cv > 0):
            raise InputError("cv", cv, "a finite coefficient of variation > 0")

    @property
    def scv(self) -> float:
        return float(self.cv) ** 2

    def arrival_times_s(self, n: int, rng: np.random.Generator) -> np.ndarray:
        n, rng = _check_n_rng(n, rng)
        k = 1.0 / self.scv
        return np.cumsum(rng.gamma(k, 1.0 / (k * self.rate_rps), n))


@dataclass(frozen=True, eq=False)
class TraceReplay(ArrivalProcess):
    """Replay recorded arrival times (rebased to start at 0; sorted).

    With ``loop=True`` a request count beyond the trace repeats it, each copy shifted by the trace
    span plus one mean gap; otherwise asking for more arrivals than recorded is an error.
    """

    timestamps: np.ndarray
    loop: bool = False

    def __post_init__(self) -> None:
        t = np.asarray(self.timestamps, dtype=float)
        if t.ndim != 1 or t.size < 2:
            raise InputError("timestamps", f"array of shape {t.shape}", "a 1-D array of at least 2 times")
        if not np.all(np.isfinite(t)):
            raise InputError("timestamps", float(t[~np.isfinite(t)][0]), "finite times in seconds")
        t = np.sort(t, kind="stable")
        t = t - t[0]
        if t[-1] <= 0:
            raise InputError("timestamps", "all equal", "times spanning a positive duration")
        object.__setattr__(self, "timestamps", t)

    @property
    def rate_rps(self) -> float:  # type: ignore[override]
        """(n - 1) / span of the recorded arrivals."""
        return (self.timestamps.size - 1) / float(self.timestamps[-1])

    @property
    def scv(self) -> float:
        gaps = np.diff(self.timestamps)
        return float(gaps.var() / gaps.mean() ** 2)

    def arrival_times_s(self, n: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """The first n recorded arrivals (``rng`` is accepted for a common interface and unused)."""
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise InputError("n", n, "an integer >= 0")
        m = self.timestamps.size
        if n <= m:
            return self.timestamps[:n].copy()
        if not self.loop:
            raise InputError("n", n, f"<= {m} recorded arrivals (or TraceReplay(..., loop=True))")
        period = float(self.timestamps[-1]) + 1.0 / self.rate_rps
        reps = -(-n // m)
        tiled = (self.timestamps[None, :] + period * np.arange(reps)[:, None]).ravel()
        return tiled[:n]


def scale_to_rate(timestamps: np.ndarray, rate_rps: float) -> np.ndarray:
    """Stretch or compress arrival times so their mean rate (n - 1) / span becomes ``rate_rps``.

    t'_i = (t_i - t_0) * r_trace / rate: keeps the burst shape (gap SCV unchanged) while moving
    the load, the usual way to replay a trace at a target rate (BurstGPT README, "scale the average
    RPS"; Vidur, Agrawal et al. MLSys 2024, sec. 5).
    """
    rate = _check_rate(rate_rps)
    replay = TraceReplay(np.asarray(timestamps, dtype=float))
    return replay.timestamps * (replay.rate_rps / rate)
