"""The length of the token-full prefill steps that pass a waiting prompt (session 12, branch tok13).

A disaggregated prefill pool's waiting prompt is passed by the free-ups whose queue ahead of it
outgrows the step the engine takes (model.queueing.bulk_wait, item 2): the engine takes the queue
head-first while the prompts' tokens fit under the cap C and stops at the first that does not
(model.serving.packing.full_step_prompts), so a full step holds J = max(1, #{j : u_1 + ... + u_j <=
C}) prompts and lasts, by the planner's own step function (model.serving.packing.step_law: each
prompt's share v_i + F_i / c of a step of c prompts),

    S_J = (1 / J) sum_(i <= J) F(u_i) + sum_(i <= J) v(u_i)      (v = alone - F).

Two things make the passing steps longer than F-bar + v-bar E[J] (the session-11 value, population
means):

1. *Composition.* J and the prompts in the step are not independent: a step of few prompts holds
   long ones (a long head runs alone), and on a pool whose per-step part F grows with the prompt (an
   attention-DP prefill, where a lone prompt runs on one rank: F ~ 90% of it) a step's F is its own
   prompts' mean, not the population's. E[S_J] is taken over the same seeded FCFS draws that give J's
   law (model.serving.packing._draw_sums), draw by draw.
2. *Which full steps pass.* A free-up that finds Q prompts ahead of a waiting prompt passes it iff Q
   exceeds the step it takes, with Q geometric of ratio s (bulk_wait item 2: P(Q >= j) = s^j, PASTA
   and Little's law on the waiting room), so among the full steps those that pass a prompt are
   weighted by s^J: the step's own J is small (long prompts) more often than in J's law. The mean
   length of a passing step is

       g(s) = E[S_J s^J] / E[s^J] = sum_j a_j s^j / sum_j p_j s^j,   a_j = E[S_J 1{J = j}],

   the size-biased (here s^J-tilted) mean of a renewal reward (Ross 1996, *Stochastic Processes*,
   2nd ed., sec. 3.6: the reward of the interval covering a point, here of the free-up that passes;
   Wolff 1989, *Stochastic Modeling and the Theory of Queues*, sec. 5.16, the waiting-time paradox).
   g(1) = E[S_J], the unweighted full step, which sets the bulk queue's stability (lambda E[S_J] / n
   < E[J]). This module gives a_j [C, K] on J's support; model.queueing.bulk_wait reads g(s) in its
   mean-value equation (``passing_step_s``).

Traced on grid cell 0's DEP4 prefill (docs/validation.md, "Session 12: token-full prefill steps"):
the planner's step function on the simulator's own steps reads 0.222 s per step against the
simulator's 0.222 s and, on the steps that leave a queue, 0.340 s against 0.339 s, so the step time
of a given composition is right; F-bar + v-bar E[J] read 0.257 s for those steps.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from model.serving.packing import (
    FILL_DRAWS,
    FILL_MAX_PROMPTS,
    FILL_SEED,
    full_step_prompts,
    uncached_prompt_tokens,
)
from model.workload.scenario import Scenario


def full_step_times(
    scn: Scenario, step_tokens: float, alone_s: np.ndarray, fixed_s: np.ndarray
) -> np.ndarray:
    """a_j = E[S_J 1{J = j}] [C, K] of a prefill instance's token-full steps (module docstring), on the
    counts j of :func:`model.serving.packing.full_step_prompts` (same order), from each sampled prompt's
    time alone ``alone_s`` and per-step part ``fixed_s`` [C, S]. Summed over j: E[S_J]."""
    counts = full_step_prompts(scn, step_tokens)[0]
    per_f, per_v = _step_weights(uncached_prompt_tokens(scn).tobytes(), float(step_tokens), counts.tobytes())
    fixed = np.asarray(fixed_s, dtype=float)
    return fixed @ per_f + (np.asarray(alone_s, dtype=float) - fixed) @ per_v


def draw_indices(uncached_bytes: bytes, step_tokens: float) -> np.ndarray:
    """[FILL_DRAWS, j] sampled-prompt indices of the seeded FCFS sequences whose token prefix sums are
    model.serving.packing._draw_sums (the same generator and draws: Generator.choice of an array
    indexes it with choice of its length)."""
    u = np.maximum(np.frombuffer(uncached_bytes, dtype=float), 1.0)
    rng = np.random.default_rng(FILL_SEED)
    j_max = int(min(max(step_tokens // float(u.min()), 1.0), FILL_MAX_PROMPTS))
    return rng.choice(len(u), size=(FILL_DRAWS, j_max))


@lru_cache(maxsize=64)
def _step_weights(
    uncached_bytes: bytes, step_tokens: float, counts_bytes: bytes
) -> tuple[np.ndarray, np.ndarray]:
    """([S, K] weight of prompt i's F, [S, K] weight of its v) in a_j: over the draws whose step holds
    J = j prompts, F_i counts once per appearance among the first J divided by J, v_i once per
    appearance, each draw 1 / FILL_DRAWS (cached on the lengths' values, the cap and the counts)."""
    u = np.maximum(np.frombuffer(uncached_bytes, dtype=float), 1.0)
    counts = np.frombuffer(counts_bytes, dtype=float)
    idx = draw_indices(uncached_bytes, step_tokens)
    held = np.maximum((np.cumsum(u[idx], axis=1) <= step_tokens).sum(axis=1), 1)  # J per draw
    in_step = np.arange(idx.shape[1])[None, :] < held[:, None]  # [D, j]
    column = np.searchsorted(counts, held)  # the draw's count on J's support
    per_v = np.zeros((len(u), len(counts)))
    np.add.at(per_v, (idx[in_step], np.broadcast_to(column[:, None], idx.shape)[in_step]), 1.0)
    per_f = np.zeros_like(per_v)
    weight = np.broadcast_to((1.0 / held)[:, None], idx.shape)[in_step]
    np.add.at(per_f, (idx[in_step], np.broadcast_to(column[:, None], idx.shape)[in_step]), weight)
    per_f /= FILL_DRAWS
    per_v /= FILL_DRAWS
    per_f.flags.writeable = False
    per_v.flags.writeable = False
    return per_f, per_v
