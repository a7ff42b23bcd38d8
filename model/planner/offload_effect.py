"""What KV offload tiers do to the recommended configuration's prefills: one reason line.

For the instance that runs prefill (a colocated replica or the prefill pool): how much of the
prefix working set HBM and each tier hold (model.physics.kv_tiers.prefix_placement), the prefix
hit rate that leaves, and the mean reload time a hit from each tier costs.
"""

from __future__ import annotations

import numpy as np

from model.planner.types import BestConfig
from model.serving.phase_tables import instance_tables
from model.serving.registry import style_of
from model.units import format_bytes, format_time
from model.workload.scenario import Scenario, cached_prompt_tokens


def offload_reason(scn: Scenario, best: BestConfig) -> str | None:
    """One sentence on the KV offload tiers in ``best`` (None when none are given)."""
    off = scn.kv_offload
    if off is None:
        return None
    pools = style_of(best.config).sim_layout(best.config).pools
    pool = next((p for p in pools if p.role in ("replica", "prefill")), pools[0])
    role = "prefill" if pool.role == "prefill" else "colocated"
    tables = instance_tables(scn, pool.gpu, pool.parallel, pool.chunk_tokens, role)
    dep, place = tables.dep, tables.prefix
    h = scn.workload.prefix_cache_hit_rate
    names = ("HBM", *(t.kind for t in off.tiers))
    held = ", ".join(f"{n} {s:.0%}" for n, s in zip(names, place.stored, strict=True))
    ws = (
        "unbounded (all in HBM)"
        if off.working_set_tokens is None
        else f"{off.working_set_tokens:,.0f} tokens"
    )
    hit = float(np.mean(cached_prompt_tokens(scn.prompt_tokens, h)))
    per_gpu = hit * dep.kv_bytes_per_token_per_gpu
    reloads = "; ".join(
        f"a hit from {t.kind} reloads {format_bytes(per_gpu)} per GPU in "
        f"{format_time(t.reload_time_s(per_gpu))}"
        for t in off.tiers
    )
    return (
        f"KV offload ({off.label}) in {best.label}: prefix working set {ws}; held by {held}; "
        f"prefix hit rate {h:.0%} -> {h * place.served_fraction:.0%} served"
        + (
            f"; {reloads} (mean {format_time(float(np.mean(place.reload_time_s(hit))))} per request)."
            if reloads
            else "."
        )
    )


# Pre-emptions per request at the goodput from which the verdict's reasons mention them.
PREEMPTION_MATERIAL = 0.05


def preemption_reason(scn: Scenario, best: BestConfig) -> str | None:
    """One sentence on pre-emption in ``best`` when its engine pre-empts (recompute / swap) at least
    PREEMPTION_MATERIAL times per request at its goodput (docs/model.md, KV offload tiers)."""
    ev = best.at_goodput
    k = float(getattr(ev, "preemptions_per_request", 0.0))
    policy = scn.engine.preemption
    if policy == "none" or k < PREEMPTION_MATERIAL:
        return None
    resume = (
        "re-prefills its prompt and tokens so far"
        if policy == "recompute"
        else "swaps its KV to CPU and back"
    )
    return (
        f"KV cache full part of the time in {best.label} at {best.goodput_rps:.3g} req/s: "
        f"{k:.2f} pre-emptions per request ({scn.engine.name} pre-empts by {policy}: the newest running "
        f"request {resume}); more KV per instance (a larger TP degree, an FP8 KV cache, a GPU with "
        "more memory) avoids them."
    )
