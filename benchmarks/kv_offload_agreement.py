"""Planner vs simulator goodput with KV offload tiers (docs/validation.md, "KV offload tiers").

Llama-3.1-8B on H100 (node hgx-h100-8), chat with a prefix hit rate of 0.7 and a 20M-token prefix
working set, with no tier, a CPU tier, and CPU + NVMe tiers; whole-prompt prefill configurations
(the simulator draws each prompt's tier, model.sim.tiers). Run: python -m benchmarks.kv_offload_agreement
"""

from __future__ import annotations

import dataclasses

from benchmarks.steady import STEADY_REQUESTS
from model.hardware.catalog import get_gpu, get_link
from model.hardware.kv_offload import parse_kv_offload
from model.planner.goodput import config_goodput
from model.serving.configs import ColocatedConfig, DisaggregatedConfig
from model.sim.engine import SimOptions
from model.sim.requests import poisson_requests
from model.sim.simulate import goodput
from model.sim.tiers import PrefixReuse
from model.workload.presets import get_workload
from model.workload.scenario import Scenario
from model.workload.slo import SLO

HIT_RATE = 0.7
SPECS = ("working-set:20M", "cpu:2TB,working-set:20M", "cpu:2TB,nvme:30TB,working-set:20M")


def cells() -> list[tuple[str, str, object, SLO]]:
    """(spec, configuration name, configuration, SLO) of the grid."""
    h100, ib = get_gpu("h100-sxm"), get_link("ib-ndr-400")
    configs = (
        ("2 x TP1 prefill-first", ColocatedConfig(h100, 1, 2), SLO(0.5, 0.02)),
        (
            "1 x TP1 prefill + 2 x TP1 decode",
            DisaggregatedConfig(h100, 1, 1, h100, 1, 2, ib),
            SLO(0.5, 0.015),
        ),
    )
    return [(s, n, c, slo) for s in SPECS for n, c, slo in configs]


def agreement(spec: str, config: object, slo: SLO, n: int = STEADY_REQUESTS) -> tuple[float, float]:
    """(planner goodput, simulator goodput) of one cell."""
    wl = dataclasses.replace(get_workload("chat"), prefix_cache_hit_rate=HIT_RATE)
    off = parse_kv_offload(spec, "hgx-h100-8")
    scn = dataclasses.replace(Scenario.build("llama-3.1-8b", wl, slo), kv_offload=off)
    g_plan = config_goodput(scn, config)
    g_sim = goodput(
        config,
        "llama-3.1-8b",
        poisson_requests(wl, 1.0, n, seed=0),
        slo,
        start_rps=max(g_plan, 0.5),
        options=SimOptions(warmup_requests=n // 4),
        prefix=PrefixReuse(HIT_RATE, off),
        rel_tol=0.03,
    ).rate_rps
    return g_plan, g_sim


if __name__ == "__main__":
    for spec, name, config, slo in cells():
        p, s = agreement(spec, config, slo)
        print(f"| {spec} | {name} | {p:.2f} | {s:.2f} | {p / s:.2f} |", flush=True)
