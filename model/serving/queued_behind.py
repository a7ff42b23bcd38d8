"""The prompts a prefill-first request's queue wait leaves queued behind its step (issue 17, session 13).

A prefill-first replica packs the waiting prompts into its next step FCFS while their tokens fit under
the engine's cap (model.serving.packing); the prompts that reached the replica while a request waited
and did not fit beside it are served after its step, first thing in its decode: each stalls it
(model.queueing.stall_count, where the count's law is). This module reads the packing law for them.
"""

from __future__ import annotations

import numpy as np

from model.queueing.stall_count import wait_stall_rate
from model.serving.packing import step_companions, uncached_prompt_tokens
from model.workload.scenario import Scenario


def wait_stall_rows(
    scn: Scenario,
    rate_r: np.ndarray,
    share: np.ndarray,
    wait_s: np.ndarray,
    step_s: np.ndarray,
    k: np.ndarray,
) -> np.ndarray:
    """[C, S] a prefill-first request's primary stalls per second of its queue wait
    (model.queueing.stall_count.wait_stall_rate): lambda_r x the router's ``share`` [C] reach its
    replica; of the lambda_r share (W + t_step / 2) that arrived behind it by its step's start (mean
    wait ``wait_s``, decode step ``step_s``), with lambda_r share W queued ahead of it, its step leaves
    :func:`left_behind`; k [C] of them to a step."""
    lam = np.asarray(rate_r, dtype=float) * share
    wait = np.maximum(np.asarray(wait_s, dtype=float), 0.0)
    left = left_behind(scn, lam * (wait + np.asarray(step_s, dtype=float) / 2.0), lam * wait)
    return wait_stall_rate(rate_r, share, left, k)


def left_behind(scn: Scenario, behind: np.ndarray, ahead: np.ndarray) -> np.ndarray:
    """[C, S] the share phi of the prompts that arrived behind a sampled prompt while it waited that
    its prefill-first step leaves queued (model.queueing.stall_count); ``behind`` [C] their mean
    lambda_r (W + t_step / 2), ``ahead`` [C] the mean queued ahead of it when it arrived, lambda_r W
    (Little 1961; an arrival sees the time average, PASTA, Wolff 1982). The step takes the queue FCFS
    from its head while the prompts fit under the engine's ``prefill_token_cap``
    (model.serving.packing.step_companions: E[min(N, J_i)] for N waiting geometric of mean k - 1, J_i
    the number that fit beside the prompt's own u_i tokens), so those behind it ride only after every
    one ahead: E[min(N_a + N_b, J)] - E[min(N_a, J)] of them, the sums taken geometric of the summed
    mean (ours: the companion law's own approximation, its head's room read at the sampled prompt's).
    phi_i = 1 - that / behind: 0 without a cap (every waiting prompt shares its step), 1 where a step
    holds one prompt. Checked against the simulator's records (docs/session13/pf15.md: grid cells
    134 and 67, simulated phi 0.61 / 0.68 against 0.57 / 0.52 here and 0.45 / 0.43 with nobody
    ahead)."""
    b = np.maximum(np.asarray(behind, dtype=float), 0.0)
    a = np.maximum(np.asarray(ahead, dtype=float), 0.0)
    u, cap = uncached_prompt_tokens(scn), float(scn.engine.prefill_token_cap)
    ride = step_companions(1.0 + a + b, u, cap) - step_companions(1.0 + a, u, cap)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b[:, None] > 0, np.clip(1.0 - ride / b[:, None], 0.0, 1.0), 0.0)
