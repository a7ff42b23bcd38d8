"""The prompts that join a request's replica during its own prefill-first step, behind a levelling
router (issue 17; docs/validation.md, "Session 11b: the own-step join law" and session 13, colo15a).

The planner counts a running request's stalls as the prompts joining its replica at x lambda_r
(model.queueing.routing.stall_exposure, the level fleet's exposure). During the request's OWN packed
prefill step that over-counts them at R > 1: the router has just sent the request to the replica with
the lowest load (vLLM's w x waiting + prefilling + running), and while that replica prefills none of
its decodes leaves (prefill-first pauses them), so it stays above the others until the rest of the
fleet climbs back; the next prompts go elsewhere first.

No closed form of that is known (session 11b tried several); the factor is the numerical solution of
the finite-R chain of the idealised router (join the lowest score, ties to the first replica; one
prompt per step, Gamma steps with the packed step's mean and SCV; exponential decode lifetimes frozen
during a replica's prefill; Poisson arrivals), solved by exact event-driven Monte Carlo over a grid of
its only inputs once time is scaled by lambda_r: R, a = lambda_r E[s], y = lambda_r L (the decode
occupancy per replica, Little) and the step's SCV c2. ``benchmarks/own_step_table.py`` writes the
table (``data/own_step_factor.json``, with each point's standard error); here it is interpolated
multilinearly in (log2 R, a, log y, c2), clamped to the table's edges (beyond R = 64 the R = 64 row,
which the chain's factor falls towards, so the clamp keeps more joins: conservative).

The factor replaces x on the own step only where it is lower: F <= x because the chain's reduction is
the mechanism above, while a chain factor above the planner's x (light load, small y) says the level
picture behind x is off there, which is not this law's business (keeping x leaves the planner as it
was). One replica, or a router that does not level: x unchanged (the random router's Poisson joins,
round-robin's every R-th).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from model.hardware.engines import Router
from model.queueing.routing import _LEVELLING, replica_arrivals

__all__ = ["chain_factor", "own_step_exposure", "prefill_first_arrivals"]

TABLE = Path(__file__).parent / "data" / "own_step_factor.json"


@lru_cache(maxsize=1)
def _table() -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The axes (log2 R, a, log y, c2) and the factor array [R, a, y, c2] of the committed table."""
    data = json.loads(TABLE.read_text())
    ax = data["axes"]
    axes = (
        np.log2(np.asarray(ax["replicas"], dtype=float)),
        np.asarray(ax["load"], dtype=float),
        np.log(np.asarray(ax["occupancy"], dtype=float)),
        np.asarray(ax["step_scv"], dtype=float),
    )
    values = np.asarray(data["factor"], dtype=float).reshape(tuple(len(a) for a in axes))
    return axes, values


def chain_factor(
    replicas: np.ndarray, load: np.ndarray, occupancy: np.ndarray, step_scv: np.ndarray
) -> np.ndarray:
    """[C] the chain's own-step factor F (module docstring) at R, a = lambda_r E[s], y = lambda_r L and
    the step's SCV c2, multilinear in (log2 R, a, log y, c2) on the table, clamped to its edges."""
    axes, values = _table()
    points = np.broadcast_arrays(
        np.log2(np.maximum(np.asarray(replicas, dtype=float), 1.0)),
        np.asarray(load, dtype=float),
        np.log(np.maximum(np.asarray(occupancy, dtype=float), 1e-12)),
        np.asarray(step_scv, dtype=float),
    )
    lows, weights = [], []
    for axis, p in zip(axes, points, strict=True):
        p = np.clip(np.where(np.isfinite(p), p, axis[0]), axis[0], axis[-1])
        lo = np.clip(np.searchsorted(axis, p, side="right") - 1, 0, len(axis) - 2)
        lows.append(lo)
        weights.append((p - axis[lo]) / (axis[lo + 1] - axis[lo]))
    out = np.zeros(points[0].shape)
    for corner in range(16):
        bits = [(corner >> d) & 1 for d in range(4)]
        w = np.ones(points[0].shape)
        for d in range(4):
            w = w * (weights[d] if bits[d] else 1.0 - weights[d])
        out = out + w * values[lows[0] + bits[0], lows[1] + bits[1], lows[2] + bits[2], lows[3] + bits[3]]
    return out


def own_step_exposure(
    router: Router,
    replicas: np.ndarray,
    exposure: np.ndarray,
    rate_per_replica: np.ndarray,
    step_mean_s: np.ndarray,
    step_scv: np.ndarray,
    occupancy: np.ndarray,
) -> np.ndarray:
    """[C] the exposure to use on a request's own prefill-first step: min(F, x) for a levelling router
    at R > 1 (F = :func:`chain_factor` at a = lambda_r E[s], y = ``occupancy`` the decode occupancy per
    replica, c2 = ``step_scv``), else ``exposure`` x (module docstring)."""
    x = np.asarray(exposure, dtype=float)
    r = np.asarray(replicas, dtype=float) * np.ones_like(x)
    if router.policy not in _LEVELLING:
        return x
    lam = np.where(np.isfinite(rate_per_replica), np.asarray(rate_per_replica, dtype=float), 0.0)
    f = chain_factor(r, lam * np.asarray(step_mean_s, dtype=float), occupancy, step_scv)
    return np.where(r > 1, np.minimum(f, x), x)


def prefill_first_arrivals(
    router: Router,
    rate_per_replica: np.ndarray,
    step_s: np.ndarray,
    decode_s: np.ndarray,
    replicas: np.ndarray,
    exposure: np.ndarray,
    batch: np.ndarray,
    prob: np.ndarray,
) -> np.ndarray:
    """[C, S] the prompts that join a prefill-first request's replica from its own packed step
    ``step_s`` [C, S] to the end of its decode ``decode_s`` [C, S]: a levelling router's at
    :func:`own_step_exposure` on the step (its mean and SCV over the S samples; y = the decode
    occupancy per replica, ``batch`` [C, K] with ``prob``) and x on the decode window, both linear in
    the window (model.queueing.routing.replica_arrivals); any other router the one window's law
    (round-robin's is not linear in it)."""
    if router.policy not in _LEVELLING:
        return replica_arrivals(router, rate_per_replica, step_s + decode_s, replicas, exposure)
    mean = step_s.mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        scv = np.where(mean > 0, (step_s**2).mean(axis=1) / np.where(mean > 0, mean, 1.0) ** 2 - 1.0, 0.0)
    occupancy = (np.asarray(batch, dtype=float) * np.asarray(prob, dtype=float)).sum(axis=1)
    own = own_step_exposure(
        router, replicas, exposure, rate_per_replica, mean, np.maximum(scv, 0.0), occupancy
    )
    return replica_arrivals(router, rate_per_replica, step_s, replicas, own) + replica_arrivals(
        router, rate_per_replica, decode_s, replicas, exposure
    )
