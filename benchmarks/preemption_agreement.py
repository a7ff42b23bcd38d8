"""Planner vs simulator goodput with pre-emption under tight KV (docs/validation.md, "KV offload
tiers", pre-emption grid): engines that allocate KV as tokens appear and pre-empt when it runs out
("recompute", vLLM V1; "swap" to a cpu tier, vLLM V0), against whole-KV admission ("none").

Cells: Llama-3.1-8B BF16 on one RTX 4090 (~35k KV tokens) and Llama-3.1-70B FP8 on 2 x L40S, prompts
uniform 500-1500 and outputs uniform 800-2400 tokens, TTFT 2 s / TPOT 50 ms (70B: 100 ms).
Run: python -m benchmarks.preemption_agreement [--requests N]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from model.hardware.catalog import get_engine, get_gpu
from model.hardware.engines import with_preemption
from model.hardware.kv_offload import node_for_gpu, parse_kv_offload
from model.planner.goodput import config_goodput
from model.serving.configs import ColocatedConfig
from model.sim.engine import SimOptions
from model.sim.requests import poisson_requests
from model.sim.simulate import goodput, simulate
from model.sim.tiers import PrefixReuse
from model.workload.plain import workload_from_lengths
from model.workload.scenario import Scenario
from model.workload.slo import SLO

WORKLOAD = workload_from_lengths(isl_dist="uniform:low=500,high=1500", osl_dist="uniform:low=800,high=2400")


def cells() -> list[tuple[str, str, ColocatedConfig, str, SLO, str, str | None]]:
    """(model, name, configuration, policy, SLO, weight dtype, tiers) of the grid."""
    g4090, l40s = get_gpu("rtx-4090"), get_gpu("l40s")
    slo8, slo70 = SLO(2.0, 0.05), SLO(2.0, 0.10)
    out = []
    for policy, tiers in (("none", None), ("recompute", None), ("swap", "cpu:64GB")):
        out.append(
            (
                "llama-3.1-8b",
                "1 x RTX 4090, chunked 2048",
                ColocatedConfig(g4090, 1, 1, 2048),
                policy,
                slo8,
                "bf16",
                tiers,
            )
        )
    for policy in ("none", "recompute"):
        out.append(
            (
                "llama-3.1-8b",
                "1 x RTX 4090, prefill-first",
                ColocatedConfig(g4090, 1, 1),
                policy,
                slo8,
                "bf16",
                None,
            )
        )
        out.append(
            (
                "llama-3.1-70b",
                "1 x TP2 L40S FP8, chunked 2048",
                ColocatedConfig(l40s, 2, 1, 2048),
                policy,
                slo70,
                "fp8",
                None,
            )
        )
    return out


def agreement(
    model: str, config: ColocatedConfig, policy: str, slo: SLO, dtype: str, tiers: str | None, n: int
) -> tuple[float, float, int]:
    """(planner goodput, simulator goodput, simulator pre-emptions at its goodput) of one cell."""
    eng = with_preemption(get_engine("vllm"), policy)
    off = parse_kv_offload(tiers, node_for_gpu(config.gpu.name)) if tiers else None
    scn = dataclasses.replace(Scenario.build(model, WORKLOAD, slo, engine=eng, dtype=dtype), kv_offload=off)
    g_plan = config_goodput(scn, config)
    kw = {"engine": eng, "weight_dtype": dtype, "options": SimOptions(warmup_requests=n // 4)}
    if off is not None:
        kw["prefix"] = PrefixReuse(0.0, off)
    res = goodput(
        config,
        model,
        poisson_requests(WORKLOAD, 1.0, n, seed=0),
        slo,
        start_rps=max(g_plan, 0.05),
        rel_tol=0.03,
        **kw,
    )
    at = simulate(config, model, poisson_requests(WORKLOAD, res.rate_rps, n, seed=0), slo=slo, **kw).summary
    return g_plan, res.rate_rps, at.preemptions


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=800)
    n = ap.parse_args().requests
    print(
        "| model | configuration | policy | planner req/s | simulator req/s | planner / simulator "
        "| sim pre-emptions per request |"
    )
    print("|---|---|---|---|---|---|---|")
    for model, name, config, policy, slo, dtype, tiers in cells():
        t = time.time()
        p, s, pre = agreement(model, config, policy, slo, dtype, tiers, n)
        label = policy + (f" ({tiers})" if tiers else "")
        print(
            f"| {model} | {name} | {label} | {p:.3f} | {s:.3f} | {p / s:.2f} | {pre / n:.2f} "
            f"| ({time.time() - t:.0f} s)",
            flush=True,
        )
