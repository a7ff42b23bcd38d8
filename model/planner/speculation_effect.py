"""What speculative decoding does to the recommended configuration's decode: one reason line.

At the configuration's own decode batch and context: the step with speculation (the (k + 1)-token
verify step plus k drafting passes, model.physics.speculation) against the plain one-token step,
and the tokens each yields, so the per-token time ratio is
(t_verify + t_draft) / emitted / t_plain.
"""

from __future__ import annotations

from dataclasses import replace

from model.physics.decode_tokens import tokens_per_decode_step
from model.physics.steps import decode_step_cost
from model.planner.types import BestConfig
from model.serving.phase_tables import deployment
from model.serving.registry import style_of
from model.units import format_time
from model.workload.scenario import Scenario


def speculation_reason(scn: Scenario, best: BestConfig) -> str | None:
    """One sentence on speculative decoding in ``best`` (None when speculation is off)."""
    spec = scn.speculation
    if spec is None:
        return None
    pools = style_of(best.config).sim_layout(best.config).pools
    pool = next((p for p in pools if p.role in ("replica", "decode")), pools[-1])
    dep = deployment(scn, pool.gpu, pool.parallel)
    plain = replace(dep, speculation=None)
    batch = max(best.at_goodput.decode_batch, 1.0)
    ctx = scn.decode_context_tokens
    step = decode_step_cost(dep, batch, ctx)
    base = float(decode_step_cost(plain, batch, ctx).time_s)
    emitted = tokens_per_decode_step(dep).emitted
    per_token = float(step.time_s) / emitted
    return (
        f"Speculative decoding ({spec.label}) in {best.label} at batch {batch:.0f}: a step verifies "
        f"{spec.verify_width} tokens per sequence in {format_time(float(step.time_s) - float(step.draft_s))} "
        f"plus {format_time(float(step.draft_s))} of drafting, and yields {emitted:.2f} tokens: "
        f"{format_time(per_token)} per token against {format_time(base)} without it "
        f"(x{per_token / base:.2f})."
    )
