"""Whether a colocated replica's KV cache can hold its load when saturated (the saturation rule).

A replica admits its head prompt only when the prompt's KV fits (the simulator's
model.sim.colocated._reserve: the whole prompt + output under whole-KV admission, engine policy
"none"; the prompt under incremental allocation, where the decodes' tokens grow into the free room),
first come first served. The queue of prompts is stable only if the saturated replica (a prompt
always waiting) holds the load: Baccelli & Foss 1995, "On the saturation rule for the stability of
queues", J. Appl. Prob. 32(2). Saturated, the cache's C tokens hold, on average (Little's law, each
term tokens x the time they are held):

* the decoding sequences: b x E_ctx (the planner's decode batch b at the decode context E_ctx,
  model.workload.scenario: E[O (P + O / 2)] / E[O] incremental, E[O (P + O)] / E[O] whole-KV);
* the prompts in prefill, which hold their KV from admission to their first token:
  lambda_r E[s T_pf], s the tokens reserved at admission (P, or P + O whole-KV) and T_pf the
  request's prefill time on the replica at batch b (its chunked iterations, or its prefill step);
* the head's unfilled room: the renewal age of the head sizes, E[s^2] / (2 E[s])
  (model.queueing.decode_batch.head_of_line_room).

so the load is held while b + lambda_r E[s T_pf] / E_ctx < (C - E[s^2] / (2 E[s])) / E_ctx, i.e.
b + lambda_r E[s T_pf] / E_ctx < saturated_batch (model.serving.phase_tables.InstanceTables).
docs/session13/chunk15.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from model.serving.common import stack
from model.serving.phase_tables import InstanceTables
from model.workload.scenario import Scenario


def prefill_held_sequences(scn: Scenario, rate_r: np.ndarray, prefill_s: np.ndarray) -> np.ndarray:
    """[C] the KV the prompts in prefill hold, in decode-context sequences: lambda_r E[s T_pf] / E_ctx
    (module docstring), ``prefill_s`` [C, S] each sampled request's prefill time at the solved batch."""
    whole = scn.engine.preemption == "none"
    held = scn.prompt_tokens + scn.output_tokens if whole else scn.prompt_tokens
    ctx = scn.reserved_context_tokens if whole else scn.decode_context_tokens
    token_s = np.mean(np.asarray(prefill_s, dtype=float) * held[None, :], axis=1)
    return np.asarray(rate_r, dtype=float) * token_s / max(ctx, 1.0)


def saturated_holds(
    scn: Scenario,
    tables: Sequence[InstanceTables],
    table_index: np.ndarray,
    rate_r: np.ndarray,
    batch: np.ndarray,
    prefill_s: np.ndarray,
) -> np.ndarray:
    """[C] whether each candidate's saturated cache holds its decode batch ``batch`` and its prompts in
    prefill (module docstring)."""
    saturated = stack(tables, "saturated_batch")[table_index]
    return np.asarray(batch, dtype=float) + prefill_held_sequences(scn, rate_r, prefill_s) < saturated
