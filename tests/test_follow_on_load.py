"""The prefill-first stall clusters' follow-on load behind the router (model.queueing.routing
.follow_on_load; docs/session13/colo15b.md)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from model.hardware.engines import Router
from model.queueing.latency import LatencyModel
from model.queueing.routing import follow_on_load

LEAST = Router("least-loaded", 4.0)


def test_follow_on_load_by_hand():
    """rho_v = min(rho, rho / (R (1 - u))) behind a levelling router with R > 1.
    (a) R = 8, u = 0.6, rho = x u = 0.5: 0.5 / (8 x 0.4) = 0.15625;
    (b) R = 16, u = 0.2, rho = 0.1: 0.1 / (16 x 0.8) = 0.0078125;
    (c) R = 2, u = 0.6, rho = 0.6: 0.6 / (2 x 0.4) = 0.75 > rho, so rho = 0.6 (the cap);
    (d) R = 1: rho = 0.3 kept (no router choice: the M/G/1 busy period)."""
    rho = np.array([0.5, 0.1, 0.6, 0.3])
    u = np.array([0.6, 0.2, 0.6, 0.5])
    r = np.array([8.0, 16.0, 2.0, 1.0])
    got = follow_on_load(LEAST, rho, u, r)
    assert got.tolist() == pytest.approx([0.15625, 0.0078125, 0.6, 0.3])
    for name in ("least-kv", "cache-aware"):
        assert follow_on_load(Router(name), rho, u, r).tolist() == pytest.approx(got.tolist())


def test_routers_that_do_not_level_keep_the_busy_period():
    """Random, round-robin and a shared queue send the fleet's arrivals whatever the replica does:
    rho unchanged at any R."""
    rho, u, r = np.array([0.5, 0.2]), np.array([0.6, 0.3]), np.array([8.0, 32.0])
    for name in ("random", "round-robin", "shared-queue"):
        assert follow_on_load(Router(name), rho, u, r).tolist() == [0.5, 0.2]


def _one_request(stall_load: float) -> LatencyModel:
    """One candidate, one request of 11 tokens (10 gaps), base 10 ms, every stall 100 ms, mean 1.2
    stalls (the count with the busy-period mean already in it, as model.queueing.stall_count.stall_events
    gives it)."""
    return LatencyModel(
        wait_prob=np.array([0.0]),
        wait_cond_mean_s=np.array([0.0]),
        fixed_s=np.zeros((1, 1)),
        tpot_base_s=np.array([0.010]),
        stall_events=np.array([[1.2]]),
        stall_sizes_s=np.full((1, 4), 0.100),
        output_tokens=np.array([11.0]),
        stable=np.array([True]),
        stall_load=np.array([stall_load]),
    )


def test_the_follow_on_load_moves_the_law_not_the_mean():
    """The latency model's primaries are n (1 - rho_v), each a cluster of mean E[s] / (1 - rho_v):
    P(no stall) = exp(-1.2 x 0.5) = 0.548812 at the busy period's rho = 0.5, exp(-1.2 x 0.84375) =
    0.363310 at rho_v = 0.15625 (R = 8, u = 0.6 above), read as P(TPOT <= 10.5 ms) (a stall adds
    >= 10 ms per gap; the two-or-more gamma puts < 1e-4 below it); the mean TPOT 10 ms + 1.2 x 100 ms
    / 10 = 22 ms either way."""
    busy, follow = _one_request(0.5), _one_request(0.15625)
    x = np.array([[0.0105]])
    assert busy.tpot_cdf(x)[0, 0] == pytest.approx(np.exp(-0.6), abs=1e-4)
    assert follow.tpot_cdf(x)[0, 0] == pytest.approx(0.363310, abs=1e-4)
    assert busy.mean_tpot_s()[0] == pytest.approx(0.022)
    assert follow.mean_tpot_s()[0] == pytest.approx(0.022)


def test_colocated_replicas_take_the_follow_on_load(monkeypatch):
    """Llama-3.1-8B code on 4 x TP1 H100 prefill-first at 20 req/s with the exposure held at x = 1
    (so rho = u, the replica's prefill busy fraction): a least-loaded router's latency model carries
    min(u, u / (4 (1 - u))), a random one's u; chunked replicas keep their law."""
    import model.serving.colocated as col
    from model.hardware.catalog import get_engine, get_gpu
    from model.serving.configs import ColocatedConfig
    from model.serving.registry import build_set
    from model.workload.scenario import Scenario
    from model.workload.slo import SLO

    monkeypatch.setattr(col, "stall_exposure", lambda router, batch, prob, r, first=0.0: np.ones(len(r)))
    # prefill-first reads x from model.queueing.light_exposure.spread_exposure
    monkeypatch.setattr(col, "spread_exposure", lambda router, batch, prob, r, first: np.ones(len(r)))
    loads = {}
    for name, weight in (("least-loaded", 4.0), ("random", 1.0)):
        engine = dataclasses.replace(get_engine(None), router=Router(name, weight))
        scn = dataclasses.replace(Scenario.build("llama-3.1-8b", "code", SLO(2.0, 0.05)), engine=engine)
        res = build_set(scn, [ColocatedConfig(get_gpu("h100-sxm"), 1, 4)]).evaluate(np.array([20.0]))
        u = float(res.prefill_busy[0])
        loads[name] = (float(res.latency.stall_load[0]), u)
    rho_v, u = loads["least-loaded"]
    assert 0.0 < u < 1.0
    assert rho_v == pytest.approx(min(u, u / (4.0 * (1.0 - u))), rel=1e-9)
    assert loads["random"][0] == pytest.approx(loads["random"][1], rel=1e-9)
