"""The planner's pre-emption terms for a colocated candidate set (engine policy "recompute" or
"swap"; model.queueing.preemption states the model): pre-emptions per request from the time the KV
cache is full, and the resume work, a recompute's prefill or a swap's two copies over the cpu tier.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from model.hardware.engines import check_swap_tier
from model.hardware.kv_offload import KVTier
from model.queueing.decode_spread import occupancy
from model.queueing.preemption import (
    ResumeTerms,
    full_probability,
    held_kv_moments,
    preemptions_per_request,
    resume_terms,
)
from model.serving.phase_tables import BATCH_GRID, InstanceTables
from model.workload.scenario import Scenario

# Standard deviations of the running sequences' KV sum below the capacity past which a candidate is
# taken never to pre-empt (a normal tail beyond 6 sd is < 1e-9).
FULL_SD = 6.0


def swap_tier(scn: Scenario) -> KVTier:
    """The cpu tier a "swap" engine swaps to (model.hardware.engines.check_swap_tier: one clear error
    naming the field without one)."""
    check_swap_tier(scn.engine.preemption, scn.kv_offload)
    return next(t for t in scn.kv_offload.tiers if t.kind == "cpu")


def colocated_resume(
    scn: Scenario,
    tables: Sequence[InstanceTables],
    table_index: np.ndarray,
    state: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    service_s: np.ndarray,
    base_tpot_s: np.ndarray,
) -> ResumeTerms | None:
    """Pre-emption terms [C] of colocated candidates, None under whole-KV admission ("none").

    ``state``: (rate per replica [C], per-token time rows tau [C, G] on BATCH_GRID, batch cap [C],
    mean batch [C]); ``service_s`` [C, S]: each sampled prompt's prefill at the decode batch (a
    recompute's work); ``base_tpot_s`` [C]: the TPOT base without pre-emption."""
    policy = scn.engine.preemption
    if policy == "none":
        return None
    rate_r, tau, cap, batch = state
    eo = float(scn.output_tokens.mean())
    mean_prompt = float(scn.prompt_tokens.mean())
    capacity = np.array([t.kv_capacity_tokens for t in tables])[table_index]
    held = held_kv_moments(scn.prompt_tokens, scn.output_tokens)
    # Candidates whose cache stays > FULL_SD standard deviations below full even at the batch cap
    # never pre-empt (P(full) < 1e-9): skip their occupancy law (most candidates on large GPUs).
    n_cap = np.maximum(np.asarray(cap, dtype=float), 0.0)
    tight = capacity - mean_prompt / 2.0 < n_cap * held[0] + FULL_SD * np.sqrt(n_cap * held[1])
    if not tight.any():
        return None
    k = np.zeros(len(capacity))
    t = np.nonzero(tight)[0]
    occ = occupancy(rate_r[t] * eo, BATCH_GRID, tau[t], cap[t], batch[t])
    p_full = full_probability(occ.batch, occ.prob, capacity[t], held, mean_prompt)
    k[t] = preemptions_per_request(p_full, mean_prompt, eo)
    if policy == "recompute":
        work = service_s.mean(axis=1)
    else:
        tier = swap_tier(scn)
        per_gpu = np.array([t.dep.kv_bytes_per_token_per_gpu for t in tables])[table_index]
        work = 2.0 * (tier.latency_s + mean_prompt * per_gpu / tier.bandwidth_bytes_per_s)
    gaps = float(np.mean(np.maximum(scn.output_tokens - 1.0, 1.0)))
    return resume_terms(k, rate_r, work, base_tpot_s, gaps)
