"""Closed-loop (fixed-concurrency) queueing: N users with think time Z in front of a serving system
whose open-loop response time is known, by mean value analysis (MVA).

The network has two stations: a think (delay) station of mean Z and the serving system. Exact MVA
for a single-class closed network (Reiser & Lavenberg 1980, "Mean-value analysis of closed
multichain queuing networks", J. ACM 27(2); Lazowska et al. 1984, *Quantitative System
Performance*, ch. 6, algorithm 6.1) rests on the arrival theorem (Lavenberg & Reiser 1980; Sevcik &
Mitrani 1981): a request arriving at the serving system with n users in the network sees it as the
time-average state with n - 1 users. For n = 1, 2, ..., N:

    R(n) = response of a request that finds Q(n-1) requests in the serving system
    X(n) = n / (Z + R(n))           (response-time law, Harchol-Balter 2013, sec. 6.6)
    Q(n) = X(n) R(n)                (Little's law),  Q(0) = 0.

For a single exponential FCFS server, R(n) = (1 + Q(n-1)) / mu, which gives the machine-repairman
(M/M/1//N) results exactly. An LLM serving system is not a product-form station: pdplan takes
R(n) from its *open-loop* model (:class:`ResponseCurve`): the mean response at the arrival rate
lambda whose open-loop mean population lambda R_open(lambda) equals Q(n-1) (what the arrival
sees). For M/M/1 this is again (1 + Q) / mu, so the method is exact there; for M/M/c and for the
serving models it is an approximation (accuracy against the exact M/M/c//N and the simulator:
docs/planner.md, "Fixed concurrency"). Past :data:`EXACT_USERS` users the recursion's one step
per user gives way to Schweitzer-Bard approximate MVA at each user count asked (Q(N-1) taken as
(N-1)/N Q(N), corrected by its exact error at the last recursion step scaled as 1/N), whose error
fades as N grows. The think-time distribution does not enter: MVA uses only
the mean (the delay station is insensitive to its distribution in product-form networks, Baskett,
Chandy, Muntz & Palacios 1975, J. ACM 22(2)).

Latency *distributions* at N users are the open model's at that equivalent rate lambda_eq(N)
(Poisson arrivals with the same mean population): the open model lets the population exceed N,
so its tails are somewhat longer than the closed system's (conservative). Beyond the last tabulated
rate (the open model near its stability limit) the extra population waits ahead of the request:
R = R_K + (Q - L_K) / lambda_K, the queue draining at the highest stable rate (bottleneck law,
Lazowska et al. sec. 5.2); ``extra_wait_s`` reports that part. The throughput is held at the
service capacity (the open model's stability limit; asymptotic bound X <= 1 / D_max, ibid.):
without it the open-model closure would give X = lambda_eq N / (N - 1) at Z = 0, up to 1 / (N - 1)
past the capacity near saturation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from model.errors import InputError
from model.limits import MAX_CONCURRENCY

__all__ = [
    "EXACT_USERS",
    "ClosedLoopResult",
    "ClosedLoopState",
    "ResponseCurve",
    "closed_loop_mva",
    "open_rate_grid",
    "schweitzer_state",
]


def open_rate_grid(limit_rps: np.ndarray, to_limit: bool = False) -> np.ndarray:
    """Rates at which to tabulate the open model, [C, K]. Up to a stability limit (default): 0,
    then utilisations 0.05 .. 0.9 of the limit, then 1 - 0.1 x 2^(-j/2) up to 1 - 1e-4 (the
    population grows like 1 / (1 - rho), so the top points reach populations in the thousands).
    ``to_limit``: 25 even steps from 0 to the limit itself (a rate known to be stable, such as the
    goodput)."""
    if to_limit:
        rho = np.linspace(0.0, 1.0, 25)
    else:
        rho = np.concatenate([np.linspace(0.0, 0.9, 19), 1.0 - 0.1 * 2.0 ** (-np.arange(1, 27) / 2.0)])
    return np.asarray(limit_rps, dtype=float)[:, None] * rho[None, :]


@dataclass(frozen=True, eq=False)
class ResponseCurve:
    """The open-loop mean response time of C candidates tabulated at K rates each ([C, K] arrays,
    rates increasing from 0, all stable): ``population`` = rate x response (Little's law);
    ``capacity_rps`` [C], the service capacity (stability limit) that bounds the closed-loop
    throughput (default: the last tabulated rate)."""

    rate_rps: np.ndarray
    response_s: np.ndarray
    population: np.ndarray
    capacity_rps: np.ndarray

    @classmethod
    def build(
        cls, rate_rps: np.ndarray, response_s: np.ndarray, capacity_rps: np.ndarray | None = None
    ) -> ResponseCurve:
        """From rates and mean responses ([C, K], K >= 2); responses must be finite and > 0.
        Responses and populations are made nondecreasing along the rates (a queue only grows
        with load; this removes rounding wiggles of the numeric model)."""
        rate = np.atleast_2d(np.asarray(rate_rps, dtype=float))
        resp = np.atleast_2d(np.asarray(response_s, dtype=float))
        if rate.shape != resp.shape or rate.shape[1] < 2:
            shapes = f"shapes {rate.shape}, {resp.shape}"
            raise InputError("response curve", shapes, "equal [C, K >= 2] arrays")
        if not (np.all(np.isfinite(resp)) and np.all(resp > 0)):
            raise InputError("response_s", "non-finite or <= 0", "finite mean response times > 0 s")
        if not (np.all(np.isfinite(rate)) and np.all(np.diff(rate, axis=1) >= 0) and np.all(rate >= 0)):
            raise InputError("rate_rps", "unsorted or negative", "rates >= 0, increasing along each row")
        resp = np.maximum.accumulate(resp, axis=1)
        pop = np.maximum.accumulate(rate * resp, axis=1)
        cap = rate[:, -1] if capacity_rps is None else np.asarray(capacity_rps, dtype=float).reshape(-1)
        if cap.shape != rate[:, -1].shape or not np.all(cap >= rate[:, -1]):
            raise InputError(
                "capacity_rps", "below the tabulated rates", "one capacity >= the last rate per row"
            )
        return cls(rate, resp, pop, cap)

    def at_population(self, seen: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(response_s, equivalent rate_rps, extra_wait_s) per candidate for a request that finds
        ``seen`` [C] requests in the system: linear interpolation in the population, and past the
        last point the extra requests drain at the last rate (extra_wait_s > 0 there only)."""
        pop, resp, rate, slope_r, slope_l = self._segments
        c, k = pop.shape
        seg = np.maximum((pop < seen[:, None]).sum(axis=1) - 1, 0)  # k - 1: past the last point
        flat = np.arange(c) * k + seg
        dq = np.maximum(seen - pop.ravel()[flat], 0.0)
        r = resp.ravel()[flat] + dq * slope_r.ravel()[flat]
        lam = rate.ravel()[flat] + dq * slope_l.ravel()[flat]
        extra = np.where(seg == k - 1, dq * slope_r[:, -1], 0.0)
        return r, lam, extra

    @cached_property
    def _segments(self) -> tuple[np.ndarray, ...]:
        """Per point, the slopes dR/dL and d(rate)/dL of the segment starting there; the last
        point's segment runs past the curve with dR/dL = 1 / last rate and a constant rate."""
        pop, resp, rate = self.population, self.response_s, self.rate_rps
        dp = np.diff(pop, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            sr = np.where(dp > 0, np.diff(resp, axis=1) / dp, 0.0)
            sl = np.where(dp > 0, np.diff(rate, axis=1) / dp, 0.0)
            last = np.where(rate[:, -1] > 0, 1.0 / rate[:, -1], np.inf)
        slope_r = np.concatenate([sr, last[:, None]], axis=1)
        slope_l = np.concatenate([sl, np.zeros((pop.shape[0], 1))], axis=1)
        return pop, resp, rate, slope_r, slope_l


@dataclass(frozen=True, eq=False)
class ClosedLoopState:
    """MVA state of C candidates at one user count each (arrays of one shape: [C] or [C, M]):
    ``throughput_rps`` X(n), ``response_s`` R(n), ``seen`` Q(n - 1) (mean requests an arrival finds
    in the serving system), ``rate_rps`` the equivalent open-loop rate whose latency distributions
    apply, ``extra_wait_s`` waiting past the tabulated curve (module docstring)."""

    throughput_rps: np.ndarray
    response_s: np.ndarray
    seen: np.ndarray
    rate_rps: np.ndarray
    extra_wait_s: np.ndarray

    def column(self, j: int) -> ClosedLoopState:
        """The [C] state at level ``j`` of a [C, M] state."""
        return ClosedLoopState(*(np.asarray(getattr(self, f))[:, j] for f in _STATE_FIELDS))


_STATE_FIELDS = ("throughput_rps", "response_s", "seen", "rate_rps", "extra_wait_s")


@dataclass(frozen=True, eq=False)
class ClosedLoopResult:
    """MVA results of C candidates: ``levels`` [C, M] at the user counts ``users`` [M];
    ``max_users`` [C], the largest n whose equivalent rate stays within ``limit_rps`` (the
    open-loop goodput) and on the tabulated curve (0 when even one user misses; -1 when no limit
    was given), with the state there (``at_max``; zeros where max_users < 1); ``capped`` [C]: the
    search stopped at ``cap`` users with the limit still met."""

    users: np.ndarray
    levels: ClosedLoopState
    max_users: np.ndarray
    at_max: ClosedLoopState
    capped: np.ndarray


EXACT_USERS = 1024
"""The exact MVA recursion runs up to this many users (one vectorised step each); larger user
counts use the Schweitzer-Bard approximation, whose error vanishes as N grows (module docstring)."""

_STATE_BISECTIONS = 50


def _state(curve: ResponseCurve, think_s: float, n: np.ndarray, seen: np.ndarray) -> tuple[np.ndarray, ...]:
    """(X, R, seen, rate, extra) at ``n`` users for an arrival that finds ``seen`` requests. The
    throughput is held at the service capacity (the asymptotic bound X <= 1 / D_max, Lazowska et al.
    sec. 5.2), the response then following from the response-time law R = N / X - Z: the open-model
    closure gives X = lambda_eq N / (N - 1) at Z = 0, which near saturation would pass the capacity
    by up to 1 / (N - 1). The difference joins ``extra``."""
    r, lam, extra = curve.at_population(seen)
    x = n / (think_s + r)
    cap = curve.capacity_rps
    over = x > cap
    x_held = np.where(over, cap, x)
    with np.errstate(divide="ignore", invalid="ignore"):
        r_held = np.where(over, n / np.where(over, cap, 1.0) - think_s, r)
    return x_held, r_held, seen, lam, extra + (r_held - r)


def schweitzer_state(
    curve: ResponseCurve, think_s: float, users: np.ndarray, offset: np.ndarray | float = 0.0
) -> tuple[np.ndarray, ...]:
    """Approximate MVA at ``users`` [C] users (Schweitzer 1979; Bard 1979; Lazowska et al. 1984,
    sec. 6.4.2): the arrival sees Q(N - 1) ~ (N - 1) / N Q(N) (+ ``offset``), so Q(N) solves
    Q = N R(seen) / (Z + R(seen)), found by bisection on [0, N] (the right side rises with Q and
    stays within [0, N]). :func:`closed_loop_mva` passes as ``offset`` the approximation's exact
    error at the last user count of its exact recursion (scaled as 1 / N), so the two join without
    a step.
    Returns (X, R, seen, rate, extra) as :func:`closed_loop_mva`."""
    n = np.asarray(users, dtype=float)

    def seen(q: np.ndarray) -> np.ndarray:
        return np.maximum(q * (n - 1.0) / n + offset, 0.0)

    lo, hi = np.zeros_like(n), n.copy()
    for _ in range(_STATE_BISECTIONS):
        q = 0.5 * (lo + hi)
        r = curve.at_population(seen(q))[0]
        up = n * r / (think_s + r) > q
        lo, hi = np.where(up, q, lo), np.where(up, hi, q)
    return _state(curve, think_s, n, seen(0.5 * (lo + hi)))


def closed_loop_mva(
    curve: ResponseCurve,
    think_s: float,
    levels: Sequence[int],
    limit_rps: np.ndarray | None = None,
    cap: int = MAX_CONCURRENCY,
) -> ClosedLoopResult:
    """Closed-network MVA at the user counts ``levels`` and, with ``limit_rps``, the largest user
    count whose equivalent rate stays within it (up to ``cap``): the exact recursion over
    n = 1 .. :data:`EXACT_USERS` (one vectorised step over candidates per user), then
    :func:`schweitzer_state` per level and a bisection over user counts for the maximum."""
    if not (isinstance(think_s, int | float) and np.isfinite(think_s) and think_s >= 0):
        raise InputError("think_time", think_s, "a mean think time >= 0 s")
    want = sorted({int(n) for n in levels})
    if not want or want[0] < 1 or want[-1] > cap:
        raise InputError("concurrency", list(levels), f"user counts in [1, {cap}]")
    c = curve.rate_rps.shape[0]
    index = {n: j for j, n in enumerate(want)}
    at_levels = [np.zeros((c, len(want))) for _ in _STATE_FIELDS]
    at_max = [np.zeros(c) for _ in _STATE_FIELDS]
    limit = None if limit_rps is None else np.asarray(limit_rps, dtype=float)
    max_users = np.full(c, -1 if limit is None else 0, dtype=np.int64)
    searching = np.ones(c, dtype=bool) if limit is not None else np.zeros(c, dtype=bool)

    def within(state: tuple[np.ndarray, ...]) -> np.ndarray:
        return (limit > 0) & (state[3] <= limit) & (state[4] <= 0)

    seen = last_seen = np.zeros(c)
    n = 0
    stop = min(EXACT_USERS, cap)
    while n < min(want[-1], stop) or (searching.any() and n < stop):
        n += 1
        state = _state(curve, think_s, np.full(c, float(n)), seen)
        j = index.get(n)
        if j is not None:
            for arr, value in zip(at_levels, state, strict=True):
                arr[:, j] = value
        if limit is not None:
            ok = searching & within(state)
            max_users = np.where(ok, n, max_users)
            for arr, value in zip(at_max, state, strict=True):
                arr[ok] = value[ok]
            searching = ok
        last_seen, seen = seen, state[0] * state[1]
    # Schweitzer's error at n, Q(n-1) - (n-1)/n Q(n) = Q(n)/n - dQ/dn, carried on as ~1/N: it is
    # ~0 below the knee (Q proportional to N) and -X Z / N above it (dQ/dN ~ 1, Q ~ N - X Z).
    error_at_n = last_seen - seen * (n - 1.0) / n

    def approx(users: np.ndarray) -> tuple[np.ndarray, ...]:
        return schweitzer_state(curve, think_s, users, error_at_n * n / users)

    for users in (u for u in want if u > n):
        for arr, value in zip(at_levels, approx(np.full(c, float(users))), strict=True):
            arr[:, index[users]] = value
    if limit is not None and searching.any() and n < cap:
        lo = np.where(searching, n, 0).astype(np.int64)  # known within the limit
        hi = np.where(searching, cap + 1, 0).astype(np.int64)  # assumed past it
        while np.any(hi - lo > 1):
            mid = (lo + hi) // 2
            ok = within(approx(np.maximum(mid, 1).astype(float)))
            lo, hi = np.where(searching & ok, mid, lo), np.where(searching & ~ok, mid, hi)
        max_users = np.where(searching, lo, max_users)
        top = approx(np.maximum(lo, 1).astype(float))
        for arr, value in zip(at_max, top, strict=True):
            arr[searching] = value[searching]
        searching = searching & (lo >= cap)
    return ClosedLoopResult(
        np.array(want), ClosedLoopState(*at_levels), max_users, ClosedLoopState(*at_max), searching.copy()
    )
