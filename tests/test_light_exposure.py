"""The prefill-first occupancy / exposure fixed point (model.queueing.light_exposure, session 13 colo16)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import poisson

from benchmarks.consistent_occupancy import consistent_occupancy
from model.hardware.engines import Router
from model.queueing.decode_spread import Occupancy
from model.queueing.light_exposure import spread_exposure
from model.queueing.routing import pair_moment, stall_exposure

LEAST = Router(policy="least-loaded")


def test_no_prompts_before_first_token_is_the_level_law() -> None:
    # R = 2, the fleet at 1.5 per replica: one replica holds 1, the other 2: E[K(K-1)] = 1, x = 1 / 2.25
    x = spread_exposure(LEAST, np.array([[1.5]]), np.array([[1.0]]), np.array([2.0]), np.array([0.0]))
    assert x[0] == pytest.approx(1.0 / 2.25)
    rng = np.random.default_rng(3)
    batch = np.sort(rng.uniform(0, 4, (5, 7)), axis=1)
    prob = rng.uniform(0, 1, (5, 7))
    prob /= prob.sum(axis=1, keepdims=True)
    r = np.array([2.0, 4.0, 8.0, 16.0, 64.0])
    got = spread_exposure(LEAST, batch, prob, r, np.zeros(5))
    assert got == pytest.approx(stall_exposure(LEAST, batch, prob, r, 0.0))


def test_poisson_spread_against_the_exact_sum() -> None:
    # nothing decoding at a fixed 0.6 per replica on 16 replicas, before-first 0.4 per replica: the exact
    # E over M ~ Poisson(6.4) of pair(0.6 + M / 16) against the 16-point quadrature
    r, dec, bf = 16.0, 0.6, 0.4
    m = np.arange(0, 80)
    pm = poisson.pmf(m, r * bf)
    y = dec + m / r
    exact = (pm * pair_moment(y)).sum() / (pm * y).sum() ** 2
    got = spread_exposure(LEAST, np.array([[dec]]), np.array([[1.0]]), np.array([r]), np.array([bf]))[0]
    assert got == pytest.approx(exact, rel=1e-4)
    # the spread raises x where the fleet holds about one request per replica (the shift gives 0 here)
    assert (
        stall_exposure(LEAST, np.array([[dec]]), np.array([[1.0]]), np.array([r]), np.array([bf]))[0] == 0.0
    )
    assert got > 0.05


def test_non_levelling_routers_and_one_replica_keep_one() -> None:
    batch, prob = np.array([[0.5, 1.0]]), np.array([[0.5, 0.5]])
    assert spread_exposure(Router(policy="random"), batch, prob, np.array([4.0]), np.array([0.3]))[0] == 1.0
    assert spread_exposure(LEAST, batch, prob, np.array([1.0]), np.array([0.3]))[0] == 1.0


def _one_point(demand: float):
    def occupancy_at(grid: np.ndarray) -> Occupancy:
        b = demand * grid[:, :1]
        return Occupancy(b, np.ones_like(b), grid[:, :1], np.zeros(len(b)))

    return occupancy_at


def test_constant_exposure_gives_the_consistent_token_time() -> None:
    # t_dec = 1, tau = 2 (u = 0.5), x = 0.5: t_dec / (1 - x u) = 1 / 0.75
    dec, tau = np.array([[1.0]]), np.array([[2.0]])
    occ, x, grid = consistent_occupancy(_one_point(0.4), dec, tau, lambda o: np.array([0.5]))
    assert grid[0, 0] == pytest.approx(4.0 / 3.0)
    assert occ.batch[0, 0] == pytest.approx(0.4 * 4.0 / 3.0)
    assert x[0] == 0.5


def test_fixed_point_iterates_fall_towards_the_root() -> None:
    # x = batch = 0.4 g, g = 1 / (1 - 0.5 x): 0.2 g^2 - g + 1 = 0, root g* = (1 - sqrt(0.2)) / 0.4 = 1.382;
    # from g0 = 2 the iterates are 1 / 0.6, 1 / (2 / 3), 1 / 0.7 (three iterations): 1.4286, above g*
    dec, tau = np.array([[1.0]]), np.array([[2.0]])
    _occ, x, grid = consistent_occupancy(_one_point(0.4), dec, tau, lambda o: o.batch[:, 0])
    assert grid[0, 0] == pytest.approx(1.0 / 0.7)
    assert (1.0 - np.sqrt(0.2)) / 0.4 < grid[0, 0] < 2.0
    assert x[0] == pytest.approx(0.4 / 0.7)


def test_x_of_one_keeps_the_planners_token_time() -> None:
    dec, tau = np.array([[1.0, 2.0]]), np.array([[1.25, np.inf]])
    _occ, _x, grid = consistent_occupancy(_one_point(0.4), dec, tau, lambda o: np.array([1.0]))
    assert grid[0, 0] == pytest.approx(1.25)
    assert np.isinf(grid[0, 1])
