"""The consistent occupancy of a prefill-first replica behind a levelling router: part 1 of
model.queueing.light_exposure's module docstring (the occupancy's per-token time t_dec / (1 - x u) and the
exposure x as a fixed point; Takacs 1962, ch. 2; Little's law; monotone iterates, Tarski). Derived and
tested (tests/test_light_exposure.py) but not wired into the planner: fed to the level law it under-counts
the joins on light long-prompt cells (docs/session13/colo16.md, variant A), so it is kept here as a
diagnostic beside benchmarks/window_chain.py."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from model.queueing.decode_spread import Occupancy

# Fixed-point iterations of (occupancy, exposure); the iterates fall monotonically.
ITERATIONS = 3


def consistent_occupancy(
    occupancy_at: Callable[[np.ndarray], Occupancy],
    dec: np.ndarray,
    tau: np.ndarray,
    exposure_at: Callable[[Occupancy], np.ndarray],
    start: Occupancy | None = None,
) -> tuple[Occupancy, np.ndarray, np.ndarray]:
    """(occupancy, exposure x [C], per-token grid [C, G]) at the fixed point of part 1.

    ``tau`` [C, G] the per-token time t_dec / (1 - u) on the batch grid and ``dec`` [C, G] t_dec there, so
    u = 1 - t_dec / tau on the grid; the consistent per-token time is t_dec / (1 - x u).
    ``occupancy_at`` maps a per-token grid to the replica's batch law, ``exposure_at`` a batch law to x.
    Where tau is not finite (prefill does not keep up) it stays as it is. ``start``: the batch law at
    ``tau``, when already computed."""
    finite = np.isfinite(tau) & (tau > 0)
    u = np.where(finite, 1.0 - dec / np.where(finite, tau, 1.0), 0.0)
    occ = occupancy_at(tau) if start is None else start
    x = exposure_at(occ)
    grid = tau
    for _ in range(ITERATIONS):
        grid = np.where(finite, dec / np.maximum(1.0 - x[:, None] * u, 1e-12), tau)
        occ = occupancy_at(grid)
        x = exposure_at(occ)
    return occ, x, grid
