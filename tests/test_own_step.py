"""The own-step factor of prefill-first colocated replicas behind a levelling router
(model.queueing.own_step; its table from benchmarks/own_step_table.py; docs/session13/colo15a.md)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.own_step_table import own_step_factor
from model.hardware.engines import Router
from model.queueing.own_step import TABLE, chain_factor, own_step_exposure, prefill_first_arrivals
from model.queueing.routing import replica_arrivals

LEAST = Router("least-loaded", 4.0)


def _table() -> tuple[dict, np.ndarray, np.ndarray]:
    data = json.loads(TABLE.read_text())
    shape = tuple(len(v) for v in data["axes"].values())
    return data["axes"], np.reshape(data["factor"], shape), np.reshape(data["standard_error"], shape)


def test_one_replica_chain_is_poisson():
    """With one replica every prompt joins it, so the prompts joining during a step are the Poisson
    arrivals in it: F = 1 (within 4 standard errors of the Monte Carlo)."""
    f, se = own_step_factor(1, 0.3, 2.0, 1.0, arrivals=20000, seed=5)
    assert f == pytest.approx(1.0, abs=4 * se + 0.01)


def test_empty_fleet_sends_nothing_to_the_busy_replica():
    """Below one decode per replica (y = 0.1) at light load the other replicas mostly hold nothing, so a
    prompt never picks the one prefilling (score >= 1) over an empty one: F near 0."""
    f, _ = own_step_factor(8, 0.1, 0.1, 1.0, arrivals=20000, seed=6)
    assert f < 0.02


def test_interpolation_hits_the_nodes():
    """At a table node the multilinear interpolation returns the node's value."""
    axes, values, _ = _table()
    i, j, k, m = 3, 2, 7, 1
    got = chain_factor(
        np.array([axes["replicas"][i]]),
        np.array([axes["load"][j]]),
        np.array([axes["occupancy"][k]]),
        np.array([axes["step_scv"][m]]),
    )
    assert got[0] == pytest.approx(values[i, j, k, m], abs=1e-12)


@pytest.mark.parametrize(
    ("replicas", "load", "occupancy", "scv"),
    [(16, 0.229, 1.614, 0.55), (8, 0.414, 2.447, 0.68), (32, 0.524, 1.667, 0.19)],
)
def test_interpolation_against_a_fresh_chain(replicas, load, occupancy, scv):
    """Off the nodes (grid cells 1, 17 and 9's planner inputs) the table's interpolant lies within 8%
    (+ 3 standard errors) of a fresh chain run with another seed."""
    table = chain_factor(np.array([replicas]), np.array([load]), np.array([occupancy]), np.array([scv]))[0]
    fresh, se = own_step_factor(replicas, load, occupancy, scv, arrivals=40000, seed=99)
    assert table == pytest.approx(fresh, rel=0.08, abs=3 * se)


def test_table_is_a_share_and_falls_with_replicas():
    """F in [0, 1.05] everywhere (1 up to Monte Carlo noise); at moderate load (a = 0.2 - 0.5) and one
    or more decodes per replica the chain's factor falls with R (more replicas to refill first),
    point by point beyond 3 standard errors of the difference or equal within them."""
    axes, values, errors = _table()
    assert values.min() >= 0.0 and values.max() <= 1.05
    a = [i for i, v in enumerate(axes["load"]) if 0.2 <= v <= 0.5]
    y = [i for i, v in enumerate(axes["occupancy"]) if v >= 1.0]
    sub = values[:, a][:, :, y]
    err = errors[:, a][:, :, y]
    rise = np.diff(sub, axis=0)
    noise = 3.0 * np.hypot(err[1:], err[:-1]) + 0.01
    assert np.all(rise <= noise)


def test_exposure_limits():
    """min(F, x) for a levelling router at R > 1; x with one replica or a router that does not level;
    never above x and never below 0."""
    x = np.array([0.9, 0.9, 0.2])
    r = np.array([1.0, 16.0, 16.0])
    lam, s, scv, y = np.full(3, 2.0), np.full(3, 0.2), np.full(3, 1.0), np.full(3, 4.0)
    own = own_step_exposure(LEAST, r, x, lam, s, scv, y)
    f = chain_factor(r, lam * s, y, scv)
    assert own[0] == 0.9  # one replica
    assert own[1] == pytest.approx(f[1]) and f[1] < 0.9  # R = 16, a = 0.4, y = 4: F ~ 0.38
    assert own[2] == pytest.approx(min(f[2], 0.2))
    assert np.all((own >= 0) & (own <= x))
    for name in ("random", "round-robin", "shared-queue"):
        assert own_step_exposure(Router(name), r, x, lam, s, scv, y).tolist() == x.tolist()


def test_arrivals_split_the_window():
    """A levelling router: joins = min(F, x) lambda_r x step + x lambda_r x decode window; by hand at
    R = 16, lambda_r = 2, x = 0.9, a step of 0.2 s (SCV 0), a decode window of 1.5 s, y = 4
    (a level fleet of 4 per replica): F lambda_r 0.2 + 0.9 x 2 x 1.5 = 0.4 F + 2.7. Round-robin keeps
    the single window's law (not linear in it)."""
    lam, r, x = np.array([2.0]), np.array([16.0]), np.array([0.9])
    step, decode = np.array([[0.2, 0.2]]), np.array([[1.5, 1.5]])
    batch, prob = np.array([[4.0]]), np.array([[1.0]])
    f = chain_factor(r, np.array([0.4]), np.array([4.0]), np.array([0.0]))[0]
    got = prefill_first_arrivals(LEAST, lam, step, decode, r, x, batch, prob)
    assert got[0].tolist() == pytest.approx([0.4 * min(f, 0.9) + 2.7] * 2)
    rr = Router("round-robin")
    assert prefill_first_arrivals(rr, lam, step, decode, r, x, batch, prob)[0].tolist() == pytest.approx(
        replica_arrivals(rr, lam, step + decode, r, x)[0].tolist()
    )
