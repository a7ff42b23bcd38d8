"""Steady-state continuous-batching batch size on a tabulated step-time curve, vectorised over
candidates, and the KV-capacity admission queue.

For each candidate the per-token time tau(B) (decode step time, possibly inflated by prefill
stalls or mixed iterations) is known on the shared grid ``BATCH_GRID``. Little's law on the
batch gives the fixed point B = lambda * E[O] * tau(B) (Yu et al., "Orca", OSDI 2022, for the
iteration-level batching; Little 1961 for the law). The least root is found on the grid and
refined by linear interpolation: no iteration, so thousands of candidates solve in one pass.
This is the vectorised decode-pool model (Little's-law batch fixed point; the tests
check they agree).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.queueing.mgc import mgc_wait


@dataclass(frozen=True, eq=False)
class BatchSolution:
    """Arrays over candidates: mean batch, per-token time, and whether a root exists below the cap."""

    batch: np.ndarray
    per_token_s: np.ndarray
    below_cap: np.ndarray


def interp_rows(x: np.ndarray, grid: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Linear interpolation of each row of ``values`` [C, G] (on the common ``grid``) at x [C] (or at
    every column of x [C, K])."""
    x = np.asarray(x, dtype=float)
    idx = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, len(grid) - 2)
    x0, x1 = grid[idx], grid[idx + 1]
    w = np.clip((x - x0) / (x1 - x0), 0.0, 1.0)
    rows = np.arange(values.shape[0]).reshape((-1,) + (1,) * (x.ndim - 1))
    a, b = values[rows, idx], values[rows, idx + 1]
    with np.errstate(invalid="ignore"):
        mixed = a * (1.0 - w) + b * w
    return np.where(w <= 0, a, np.where(w >= 1, b, mixed))


def whole_rows(n: np.ndarray, grid: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each row of ``values`` [C, G], a per-token time of whole sequences tabulated on ``grid`` as
    t(ceil(g)) (model.physics.steps: a step runs whole sequences), read at whole batches n [C, K]
    (>= 1): t(n) at the largest grid point at or below n when it lies above n - 1 (there
    ceil(g) = n exactly), else linearly at n (a grid coarser than one sequence, where the table is
    smooth). :func:`interp_rows` between the grid points around an integer n mixes t(n) with
    t(n + 1): a MoE step whose experts read grow from one sequence to two (Mixtral 1 x TP2 H200
    4.64 -> 5.93 -> 6.91 ms at 1, 2, 3) read 6.32 ms at 2."""
    n = np.asarray(n, dtype=float)
    idx = np.clip(np.searchsorted(grid, n, side="right") - 1, 0, len(grid) - 1)
    rows = np.arange(values.shape[0]).reshape((-1,) + (1,) * (n.ndim - 1))
    return np.where(grid[idx] > n - 1.0, values[rows, idx], interp_rows(n, grid, values))


def batch_rows(x: np.ndarray, grid: np.ndarray, values: np.ndarray, whole: np.ndarray | bool) -> np.ndarray:
    """``values`` [C, G] read at per-instance batches x [C, K]: on the rows where ``whole`` [C] (one
    instance, whose batch is a whole number of sequences) at the nearest whole batch by
    :func:`whole_rows`, elsewhere (a pool's average N / R) by :func:`interp_rows`. On grid cell 72
    (Mixtral, one H200) the linear read put t(2) at 9.53 ms, between t(2) = 8.77 and t(3) = 10.66
    ms; the simulator's batch-2 step is 8.77 ms (docs/validation.md, session 11, branch ovl11)."""
    lin = interp_rows(x, grid, values)
    one = np.broadcast_to(np.asarray(whole, dtype=bool), (values.shape[0],))
    if not one.any():
        return lin
    return np.where(one[:, None], whole_rows(np.maximum(np.rint(x), 1.0), grid, values), lin)


def solve_batch(
    demand_tokens_per_s: np.ndarray, grid: np.ndarray, per_token_s: np.ndarray, max_batch: np.ndarray
) -> BatchSolution:
    """Least B in [0, max_batch] with B = demand x tau(B); tau given on ``grid`` as rows [C, G].

    f(B) = B - demand tau(B) is negative at B = 0; the first grid point where f >= 0 brackets the
    root, refined linearly. No root below ``max_batch`` -> ``below_cap`` False and B = max_batch.
    """
    demand = np.asarray(demand_tokens_per_s, dtype=float)[:, None]
    with np.errstate(invalid="ignore"):
        f = np.where(np.isfinite(per_token_s), grid[None, :] - demand * per_token_s, -np.inf)
    valid = np.isfinite(per_token_s) & (grid[None, :] <= np.asarray(max_batch, dtype=float)[:, None])
    crossed = (f >= 0) & valid
    has = crossed.any(axis=1)
    first = np.where(has, np.argmax(crossed, axis=1), len(grid) - 1)
    lo = np.maximum(first - 1, 0)
    rows = np.arange(len(first))
    f0, f1 = f[rows, lo], f[rows, first]
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(f1 != f0, -f0 / (f1 - f0), 1.0)
    # the point below the crossing is not finite (tau jumps from inf: prefill saturated there, as a
    # chunked row's tabulated prefill work can be a little above 1 between two points where it is below)
    w = np.clip(np.where((first == 0) | ~np.isfinite(f0), 1.0, w), 0.0, 1.0)
    b = grid[lo] + w * (grid[first] - grid[lo])
    b = np.where(has, b, np.asarray(max_batch, dtype=float))
    tau = interp_rows(b, grid, per_token_s)
    return BatchSolution(batch=b, per_token_s=tau, below_cap=has)


@dataclass(frozen=True, eq=False)
class AdmissionWait:
    """The KV-admission queue's wait per candidate [C]: mean, P(wait > 0), E[wait | wait > 0] (the
    exponential-tail form of model.queueing.mgc) and stability; (inf, 1, inf) where unstable."""

    mean_s: np.ndarray
    prob: np.ndarray
    cond_mean_s: np.ndarray
    stable: np.ndarray


def head_of_line_room(capacity_tokens: float, reservation_tokens: np.ndarray) -> float:
    """The share of a KV cache of ``capacity_tokens`` that whole-KV reservations of sizes
    ``reservation_tokens`` (one per request: prompt + output under whole-KV admission, the prompt
    under incremental allocation, where the head waits for its prompt's blocks) can use under FCFS
    head-of-line admission: 1 - E[s^2] / (2 E[s] C), at least 0.

    Derivation (docs/session13/chunk15.md). A saturated cache admits the head request as soon as the
    free room reaches its size s and no later request passes it (the simulator's
    model.sim.colocated._reserve; vLLM's scheduler, Kwon et al. SOSP 2023 sec. 4.2 and 4.5, FCFS;
    TensorRT-LLM's GUARANTEED_NO_EVICT). With many
    sequences running, completions free room at a near-steady rate (a fluid), so on the axis of the
    room freed so far the admissions are the renewal epochs of the head sizes s_1, s_2, ..., and the
    free room is the renewal process's age. Its time average is E[s^2] / (2 E[s]) (renewal-reward:
    Ross, "Introduction to Probability Models", 11th ed., sec. 7.5, the average age; Kleinrock 1975,
    vol. 1, eq. 5.11, the mean residual life), room the reservations never occupy, so the mean
    number of reservations the cache holds is (C - E[s^2] / (2 E[s])) / E_res, not C / E_res.
    Sizes of equal length waste s / 2 (an integer number of reservations fits; the fluid view
    averages over the freeing), widely spread ones (long-tailed prompts) far more than E[s]."""
    s = np.asarray(reservation_tokens, dtype=float)
    if capacity_tokens <= 0 or s.size == 0 or float(s.mean()) <= 0:
        return 0.0
    age = float(np.mean(s * s) / (2.0 * s.mean()))
    return max(1.0 - age / float(capacity_tokens), 0.0)


def admission_queue(
    rate_per_instance_rps: np.ndarray,
    mean_output_tokens: float,
    output_scv: float,
    max_batch: np.ndarray,
    per_token_at_cap_s: np.ndarray,
) -> AdmissionWait:
    """The admission wait of an instance whose KV cache holds ``max_batch`` sequences.

    The ``max_batch`` slots are the servers of an M/G/c queue with service E[O] x tau(max_batch)
    and the output-length SCV (docs/queueing.md; Kimura's M/G/c approximation); its wait is an atom
    at 0 and an exponential tail, P(W > t) = P(W > 0) exp(-t / E[W | W > 0]), P(W > 0) the Erlang C
    probability (model.queueing.mgc; Tijms 2003, *A First Course in Stochastic Models*, sec. 5.5).
    A whole ``max_batch`` is a slot count; a fractional one (whole-KV admission: the mean number of
    reservations a cache of tokens holds, model.serving.phase_tables) is taken as that mean number of
    servers, with Jagerman's continuous Erlang B (``whole_servers=False``; whole values unchanged).
    """
    cap = np.maximum(np.asarray(max_batch, dtype=float), 1.0)
    service = mean_output_tokens * np.asarray(per_token_at_cap_s, dtype=float)
    finite = np.isfinite(service)
    service = np.where(finite, np.maximum(service, 1e-12), 1.0)
    res = mgc_wait(
        np.asarray(rate_per_instance_rps, dtype=float), service, output_scv, cap, whole_servers=False
    )
    ok = res.stable & finite & (np.asarray(max_batch) >= 1)
    prob = np.where(ok, np.nan_to_num(res.prob_wait, nan=0.0), 1.0)
    cond = np.where(ok, np.where(prob > 0, res.cond_mean_wait_s, 0.0), np.inf)
    return AdmissionWait(np.where(ok, res.mean_wait_s, np.inf), prob, cond, ok)


def admission_wait(
    rate_per_instance_rps: np.ndarray,
    mean_output_tokens: float,
    output_scv: float,
    max_batch: np.ndarray,
    per_token_at_cap_s: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(mean admission wait, stable) of :func:`admission_queue`."""
    res = admission_queue(
        rate_per_instance_rps, mean_output_tokens, output_scv, max_batch, per_token_at_cap_s
    )
    return res.mean_s, res.stable


def two_wait_exceedance(
    t_s: np.ndarray, p: np.ndarray, m_s: np.ndarray, q: np.ndarray, a_s: np.ndarray
) -> np.ndarray:
    """P(W + A > t) for independent W (P(W > 0) = ``p``, exponential of mean ``m_s`` given W > 0) and
    A (``q``, ``a_s``), broadcast; t < 0 gives 1 (model.queueing.latency's module docstring: the
    hypoexponential tail of the two exponential stages, Ross sec. 5.2.4, mixed with the atoms at 0)."""
    t = np.maximum(np.asarray(t_s, dtype=float), 0.0)
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    m, a = np.asarray(m_s, dtype=float), np.asarray(a_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        em = np.where(m > 0, np.exp(-t / np.where(m > 0, m, 1.0)), 0.0)
        ea = np.where(a > 0, np.exp(-t / np.where(a > 0, a, 1.0)), 0.0)
        close = np.abs(m - a) <= 1e-9 * np.maximum(m, a)
        both = np.where(close, (1.0 + t / np.where(m > 0, m, 1.0)) * em, (m * em - a * ea) / (m - a))
        both = np.where((m > 0) & (a > 0), both, np.where(m > 0, em, ea))
        both = np.where(np.isposinf(m) | np.isposinf(a), 1.0, both)  # an unstable wait never ends
        em = np.where(np.isposinf(m), 1.0, em)
        ea = np.where(np.isposinf(a), 1.0, ea)
    out = p * (1.0 - q) * em + q * (1.0 - p) * ea + p * q * both
    return np.where(np.asarray(t_s) < 0, 1.0, np.clip(out, 0.0, 1.0))
