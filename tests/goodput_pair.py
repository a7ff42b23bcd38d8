"""The planner's and the simulator's goodput of one colocated configuration on seeded Poisson requests
(the check tests/test_whole_kv.py and tests/test_kv_saturation.py share)."""

from __future__ import annotations

from model.planner.goodput import config_goodput
from model.sim.engine import SimOptions
from model.sim.requests import poisson_requests
from model.sim.simulate import goodput


def planned_and_simulated(scn, cfg, workload, n_requests: int, model_name: str = "llama-3.1-8b"):
    """(planned, simulated) goodput in req/s: the simulator's search starts at the planner's goodput,
    a quarter of the requests warm up, bisection to 3%."""
    g_plan = config_goodput(scn, cfg)
    g_sim = goodput(
        cfg,
        model_name,
        poisson_requests(workload, 1.0, n_requests, seed=0),
        scn.slo,
        start_rps=g_plan,
        engine=scn.engine,
        options=SimOptions(warmup_requests=n_requests // 4),
        rel_tol=0.03,
    ).rate_rps
    return g_plan, g_sim
