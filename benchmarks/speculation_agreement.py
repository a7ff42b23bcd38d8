"""Planner vs simulator goodput with and without speculative decoding (docs/validation.md,
"Speculative decoding"): EAGLE k = 3 at acceptance 0.8 on H100, 6,000 Poisson requests per trial
(1,500 warm-up: benchmarks/steady.py).
Run: python -m benchmarks.speculation_agreement [--planner-only] [--cell N] (about 10 minutes on
2 cores; ``--cell N`` runs row N of the table only, 0 = Llama-3.1-8B 2 x TP1 chunk 512).
"""

from __future__ import annotations

import dataclasses
import sys

from benchmarks.steady import STEADY_REQUESTS
from model.hardware.catalog import get_gpu, get_link
from model.physics.speculation import Speculation
from model.planner.goodput import config_goodput
from model.serving.configs import ColocatedConfig, DisaggregatedConfig
from model.sim.simulate import SimOptions, goodput, poisson_requests
from model.workload.scenario import Scenario
from model.workload.slo import SLO

EAGLE3 = Speculation("eagle", 3, (0.8,))


def cells() -> list[tuple[str, str, SLO, str, object]]:
    """(model, workload, SLO, configuration name, configuration) of the table."""
    h, ib = get_gpu("h100-sxm"), get_link("ib-ndr-400")
    return [
        ("llama-3.1-8b", "chat", SLO(0.5, 0.02), "2 x TP1, chunk 512", ColocatedConfig(h, 1, 2, 512)),
        ("llama-3.1-8b", "chat", SLO(0.5, 0.02), "2 x TP1, prefill-first", ColocatedConfig(h, 1, 2)),
        (
            "llama-3.1-8b",
            "chat",
            SLO(0.5, 0.015),
            "2 x TP1 prefill + 1 x TP1 decode, IB NDR",
            DisaggregatedConfig(h, 1, 2, h, 1, 1, ib),
        ),
        ("llama-3.1-70b", "chat", SLO(1.0, 0.03), "1 x TP4, chunk 2048", ColocatedConfig(h, 4, 1, 2048)),
        (
            "llama-3.1-70b",
            "code",
            SLO(2.0, 0.03),
            "2 x TP4 prefill + 1 x TP4 decode, IB NDR",
            DisaggregatedConfig(h, 4, 2, h, 4, 1, ib),
        ),
    ]


def agreement(
    name: str, wl: str, slo: SLO, config: object, spec: Speculation | None, n: int = STEADY_REQUESTS
) -> tuple[float, float]:
    """(planner goodput, simulator goodput) of one cell; ``n`` 0 skips the simulator (nan)."""
    scn = dataclasses.replace(Scenario.build(name, wl, slo), speculation=spec)
    g_plan = config_goodput(scn, config)
    if n == 0:
        return g_plan, float("nan")
    g_sim = goodput(
        config,
        name,
        poisson_requests(wl, 1.0, n, seed=0),
        slo,
        start_rps=max(g_plan, 0.5),
        options=SimOptions(warmup_requests=n // 4),
        speculation=spec,
        rel_tol=0.03,
    ).rate_rps
    return g_plan, g_sim


if __name__ == "__main__":
    n = 0 if "--planner-only" in sys.argv else STEADY_REQUESTS
    rows = cells()
    if "--cell" in sys.argv:
        rows = [rows[int(sys.argv[sys.argv.index("--cell") + 1])]]
    for name, wl, slo, label, cfg in rows:
        row = []
        for spec in (None, EAGLE3):
            p, s = agreement(name, wl, slo, cfg, spec, n)
            row.append(f"{p:.2f} / {s:.2f} ({p / s:.2f})")
        print(
            f"| {name}, {wl}, {slo.ttft_s:g} s / {slo.tpot_s * 1e3:.0f} ms | {label} | {' | '.join(row)} |",
            flush=True,
        )
