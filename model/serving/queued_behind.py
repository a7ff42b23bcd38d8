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
    replica, of the lambda_r share (W + t_step / 2) that arrived by its step's start (mean wait
    ``wait_s``, decode step ``step_s``) its step leaves :func:`left_behind`, k [C] to a step."""
    arrived = np.asarray(rate_r, dtype=float) * share * (np.asarray(wait_s, dtype=float) + step_s / 2.0)
    return wait_stall_rate(rate_r, share, left_behind(scn, arrived), k)


def left_behind(scn: Scenario, arrived: np.ndarray) -> np.ndarray:
    """[C, S] the share phi of the prompts that reached a replica while a sampled prompt waited that
    its prefill-first step leaves queued (model.queueing.stall_count), ``arrived`` [C] their mean
    lambda_r (W + t_step / 2). Its step takes them FCFS while they fit under the engine's
    ``prefill_token_cap`` beside it: N behind it geometric of mean ``arrived``, E[min(N, J_i)] =
    :func:`step_companions` (k = 1 + arrived) - 1 of them ride with it, so phi_i = 1 - that / arrived:
    0 without a cap (every waiting prompt shares its step), 1 where a step holds one prompt."""
    a = np.maximum(np.asarray(arrived, dtype=float), 0.0)
    ride = step_companions(1.0 + a, uncached_prompt_tokens(scn), float(scn.engine.prefill_token_cap)) - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a[:, None] > 0, np.clip(1.0 - ride / a[:, None], 0.0, 1.0), 0.0)
