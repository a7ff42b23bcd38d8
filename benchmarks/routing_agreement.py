"""Planner against simulator under each request router (docs/queueing.md, "Routing"): mean prompt
wait and p90 TTFT of R colocated replicas at one rate, the same engine profile (vLLM) with only its
router changed. 4,000 Poisson requests per run (a fifth left out), seed 1.
Run: PYTHONPATH=. python benchmarks/routing_agreement.py (a few minutes on 2 cores).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from model.hardware.catalog import get_engine, get_gpu
from model.hardware.engines import Router
from model.physics.speculation import Speculation
from model.serving.configs import ColocatedConfig
from model.serving.evaluation import evaluate
from model.sim.simulate import SimOptions, poisson_requests, simulate
from model.workload.scenario import Scenario
from model.workload.slo import SLO

H100 = get_gpu("h100-sxm")
EAGLE3 = Speculation("eagle", 3, (0.8,))
CASES = [
    ("llama-3.1-8b", "rag", ColocatedConfig(H100, 1, 2), 1.0, None),
    ("llama-3.1-8b", "rag", ColocatedConfig(H100, 1, 2), 1.6, None),
    ("llama-3.1-8b", "chat", ColocatedConfig(H100, 1, 2, 512), 26.0, EAGLE3),
    ("llama-3.1-8b", "code", ColocatedConfig(H100, 1, 4), 12.0, None),
]
ROUTERS = [
    Router("random"),
    Router("round-robin"),
    Router("shared-queue"),
    Router("least-loaded"),
    Router("least-loaded", 4),
]
N = 4000


def main() -> None:
    n = N
    for m, wl, cfg, rate, spec in CASES:
        reqs = poisson_requests(wl, rate, n, seed=1)
        for r in ROUTERS:
            eng = dataclasses.replace(get_engine("vllm"), router=r)
            scn = dataclasses.replace(Scenario.build(m, wl, SLO(5, 0.1), engine=eng), speculation=spec)
            ev = evaluate(cfg, scn, rate)
            s = simulate(
                cfg, m, reqs, engine=eng, options=SimOptions(warmup_requests=n // 5), speculation=spec
            )
            rec = s.records
            mm = rec.measured & np.isfinite(rec.first_token_s)
            wait = np.nanmean((rec.prefill_start_s - rec.arrival_s)[mm])
            p90 = np.percentile(rec.ttft_s[mm], 90)
            name = r.policy + (f" x{r.waiting_weight:g}" if r.policy == "least-loaded" else "")
            planned, ttft = ev.ttft_s.p90, float(p90)
            cells = (
                f"{m} {wl}, {cfg.label()}, {rate:g} req/s",
                name,
                f"{ev.prefill_utilisation:.2f}",
                f"{ev.queue_wait_s * 1e3:.0f} / {wait * 1e3:.0f}",
                f"{planned:.3f} / {ttft:.3f} ({planned / ttft - 1:+.0%})",
            )
            print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
