"""Planner vs simulator goodput per numeric format (docs/validation.md, "Precision formats").

Llama-3.1-8B chat, whole-prompt prefill configurations, the same SLOs as the speculation grid:
bf16, FP8 (W8A8 + FP8 KV) and int4 group-128 weights on H100; NVFP4 weights + NVFP4 KV on B200.
Run: python -m benchmarks.format_agreement
"""

from __future__ import annotations

from benchmarks.steady import STEADY_REQUESTS
from model.hardware.catalog import get_gpu, get_link
from model.planner.goodput import config_goodput
from model.serving.configs import ColocatedConfig, DisaggregatedConfig
from model.sim.engine import SimOptions
from model.sim.requests import poisson_requests
from model.sim.simulate import goodput
from model.workload.scenario import Scenario
from model.workload.slo import SLO

# (gpu, weight dtype, KV dtype)
FORMATS = (
    ("h100-sxm", "bf16", None),
    ("h100-sxm", "fp8", "fp8"),
    ("h100-sxm", "int4", None),
    ("b200", "nvfp4", "nvfp4"),
)


def cells() -> list[tuple[str, str, str | None, str, object, SLO]]:
    """(gpu, dtype, kv_dtype, configuration name, configuration, SLO) of the grid."""
    out = []
    for gpu_name, dtype, kv in FORMATS:
        g, ib = get_gpu(gpu_name), get_link("ib-ndr-400")
        out.append((gpu_name, dtype, kv, "2 x TP1 prefill-first", ColocatedConfig(g, 1, 2), SLO(0.5, 0.02)))
        out.append(
            (
                gpu_name,
                dtype,
                kv,
                "2 x TP1 prefill + 1 x TP1 decode",
                DisaggregatedConfig(g, 1, 2, g, 1, 1, ib),
                SLO(0.5, 0.015),
            )
        )
    return out


def agreement(
    dtype: str, kv: str | None, config: object, slo: SLO, n: int = STEADY_REQUESTS
) -> tuple[float, float]:
    """(planner goodput, simulator goodput) of one cell."""
    scn = Scenario.build("llama-3.1-8b", "chat", slo, dtype=dtype, kv_dtype=kv)
    g_plan = config_goodput(scn, config)
    g_sim = goodput(
        config,
        "llama-3.1-8b",
        poisson_requests("chat", 1.0, n, seed=0),
        slo,
        start_rps=max(g_plan, 0.5),
        options=SimOptions(warmup_requests=n // 4),
        weight_dtype=dtype,
        kv_dtype=kv,
        rel_tol=0.03,
    ).rate_rps
    return g_plan, g_sim


if __name__ == "__main__":
    for gpu, dtype, kv, name, config, slo in cells():
        p, s = agreement(dtype, kv, config, slo)
        print(
            f"| {gpu} | {dtype} / {kv or 'default'} KV | {name} | {p:.2f} | {s:.2f} | {p / s:.2f} |",
            flush=True,
        )
