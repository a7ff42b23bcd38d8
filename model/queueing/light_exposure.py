"""A prefill-first replica's decode occupancy and its stall exposure, solved together (session 13, colo16).

Two parts of the level law (model.queueing.routing.stall_exposure) that matter where a replica holds
about one request or fewer (issue 17, cells 133, 1, 4, 41: docs/session13/colo16.md):

1. **The occupancy's per-token time.** A running request's decode time is (O - 1) t_dec plus the stalls
   that hit it, and the latency model counts those as the prompts joining its replica at x lambda_r
   (x the exposure), each holding it for its share of a packed step: its stall load is x u
   (u = lambda_r E[share], the replica's prefill-busy fraction; ``LatencyModel.stall_load`` before the
   cluster thinning). So its mean per-token time is t_dec / (1 - x u), the busy-period form of
   model.queueing.interference.shared_token_time_s with the load that stalls *it* (Takacs 1962, ch. 2:
   a decode window of length w stretched by the busy periods of the stalls arriving in it, w / (1 - rho)).
   t_dec / (1 - u) charges every decode with the replica's whole prefill time, which holds only when
   every prompt stalls every running request (one replica, random routing: x = 1). Behind a levelling
   router at light load most prompts land on replicas with nothing decoding (colo15b's trace of cell
   133: 81% of the joins on empty replicas; 0.57 decoding requests per replica in the simulator
   against the planner's 0.92), and those stall nobody. By Little's law the decode occupancy per
   replica is lambda_r E[O] tau, so it falls with tau; x rises with the occupancy (more replicas at two
   requests), so the two are a fixed point, solved by iteration from x (the value at t_dec / (1 - u);
   benchmarks/consistent_occupancy.py); both maps are monotone, so the iterates fall monotonically to
   the fixed point (Tarski; the first iterate is the upper bound).

2. **The fluctuation of the requests before their first token.** The router levels every request a
   replica holds (vLLM's load: waiting, prefilling, running; model.sim.colocated.Replica.load); the
   level law took the requests before their first token as a mean shift ``before_first`` =
   lambda_r (W + E[prefill]) per replica. Their fleet count is the number in a system entered at rate
   R lambda_r and left after W + S: Poisson of mean R x before_first when the wait is short (the
   M/G/inf occupancy is Poisson of mean lambda E[S] whatever the law of S: Palm 1943; Takacs 1962,
   "Introduction to the Theory of Queues"; its variance at least its mean otherwise). Independent of
   the decoding count (the thinning of a Poisson stream into requests in prefill and in decode:
   Kingman 1993, ch. 5), it widens the fleet's count N, and with
   N / R near one a wider N puts more replicas at two (the level pair moment is convex, kinked at the
   integers): x rises. The count is summed exactly over mean +- ``SPAN_SD`` standard deviations when
   that takes at most ``POINTS`` integers (a fleet mean up to ~25); wider laws are binned into
   ``POINTS`` runs of equal width, each run's Poisson mass at its middle (the pair moment is smooth
   over such a wide law); the mass is renormalised over the window.

Nothing is fitted. Wired (model.serving.colocated, prefill-first behind a levelling router with
R > 1): part 2, :func:`spread_exposure`. Part 1 is derived and tested but not wired, so it lives in
benchmarks/consistent_occupancy.py: fed to the level law it under-counts the joins on light long-prompt
cells (the level law misses the unlevelling by departures between arrivals; benchmarks/window_chain.py;
docs/session13/colo16.md, variant A).
"""

from __future__ import annotations

import numpy as np
from scipy.special import pdtr

from model.hardware.engines import Router
from model.queueing.routing import _LEVELLING, pair_moment

# The Poisson count of requests before their first token: its window (standard deviations either side)
# and the most points it is summed on (exact up to this many integers, binned beyond).
SPAN_SD = 6.0
POINTS = 64


def spread_exposure(
    router: Router,
    batch: np.ndarray,
    prob: np.ndarray,
    replicas: np.ndarray,
    before_first: np.ndarray,
) -> np.ndarray:
    """x [C] of model.queueing.routing.stall_exposure with the fleet's requests before their first token
    Poisson of mean R ``before_first`` (part 2 of the module docstring) instead of a mean shift.

    K = N_dec / R + M / R at the support points ``batch`` [C, K] (N_dec / R, probabilities ``prob``) and
    the points M_j of Poisson(R before_first) (module docstring); x = E[pair(K)] / E[K]^2, clipped to
    [0, 1]; 1 for the routers that do not level and for one replica."""
    r = np.asarray(replicas, dtype=float) * np.ones(np.shape(batch)[0])
    if router.policy not in _LEVELLING:
        return np.ones_like(r)
    p = np.asarray(prob, dtype=float)
    m, w = before_first_points(r, before_first)
    y = np.asarray(batch, dtype=float)[:, :, None] + (m / r[:, None])[:, None, :]  # [C, K, M]
    pw = p[:, :, None] * w[:, None, :]
    mean = (pw * y).sum(axis=(1, 2))
    pairs = (pw * pair_moment(y)).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(mean > 0, pairs / np.where(mean > 0, mean, 1.0) ** 2, 0.0)
    return np.where(r > 1, np.clip(x, 0.0, 1.0), 1.0)


def before_first_points(replicas: np.ndarray, before_first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(points [C, POINTS], weights [C, POINTS]) of the fleet's count before the first token, Poisson of
    mean R ``before_first`` [C] on its window of mean +- SPAN_SD standard deviations: POINTS runs of
    equal width (one integer each when the window holds at most POINTS) from the window's low end, each
    run's mass (CDF difference) at its middle, renormalised."""
    mu = np.maximum(np.asarray(replicas, dtype=float) * np.asarray(before_first, dtype=float), 0.0)
    low = np.maximum(np.floor(mu - SPAN_SD * np.sqrt(mu)), 0.0)
    high = np.ceil(mu + SPAN_SD * np.sqrt(mu)) + 1.0
    width = np.maximum(np.ceil((high - low + 1.0) / POINTS), 1.0)
    start = low[:, None] + width[:, None] * np.arange(POINTS)[None, :]  # [C, M]
    # pdtr(k, m): the Poisson CDF (nan below k = 0, where the CDF is 0)
    upper = pdtr(start + width[:, None] - 1.0, mu[:, None])
    below = np.where(start >= 1.0, pdtr(np.maximum(start - 1.0, 0.0), mu[:, None]), 0.0)
    cdf = upper - below
    total = cdf.sum(axis=1, keepdims=True)
    return start + (width[:, None] - 1.0) / 2.0, cdf / np.where(total > 0, total, 1.0)
