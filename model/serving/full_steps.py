"""The token-full prefill steps that pass a waiting prompt (session 12, branch tok13).

A disaggregated prefill pool's waiting prompt is passed by the free-ups whose queue ahead of it
outgrows the step the engine takes (model.queueing.bulk_wait, items 2 and 4). The engine takes the
queue head-first while the prompts' tokens fit under the cap C and stops at the first that does not
(vLLM, SGLang, model.sim.disaggregated), so a step holds J = max(1, #{j : u_1 + ... + u_j <= C})
prompts and lasts, by the planner's own step function (model.serving.packing.step_law: each prompt's
share v_i + F_i / c of a step of c prompts),

    S_J = (1 / J) sum_(i <= J) F(u_i) + sum_(i <= J) v(u_i)      (v = alone - F).

Three things make the passing steps differ from J's law with a fresh head and F-bar + v-bar E[J]
(session 11's values, model.serving.packing.full_step_prompts):

1. *The head is the prompt the last step could not fit.* While the queue outgrows the steps, a step
   starts with the prompt at which the previous one stopped, and that prompt is biased long (it did not
   fit in what was left of C). Consecutive full steps cut one FCFS sequence into segments: Next-Fit bin
   packing (Coffman, Garey & Johnson 1996, "Approximation algorithms for bin packing: a survey", in
   Hochbaum (ed.), *Approximation Algorithms for NP-Hard Problems*, sec. 2.1; its bins are a Markov chain
   in the head's size, Karmarkar 1982, "Probabilistic analysis of some bin-packing problems", FOCS). J's
   law, each step's prompts and the room R_i the prompts ahead leave a waiting prompt (bulk_wait item 4)
   are read on segments of seeded FCFS sequences after NEXT_FIT_WARM_STEPS segments, when the head's law
   has settled (on grid cell 0's code prompts the head averages 3,778 tokens against the population's
   2,058; E[J] 3.16 and P(J = 1) 0.217 against 3.88 and 0.109 with a fresh head).
2. *Composition.* J and the prompts in a step are not independent (a step of one prompt holds a long one;
   J stops before the prompt that overflows, so E[sum_(i <= J) u_i] != E[J] E[u]: Wald's identity holds
   for the stopping time J + 1, not J); on a pool whose per-step part F grows with the prompt (an
   attention-DP prefill, where a lone prompt runs on one rank: F ~ 90% of it) a step's F is its own
   prompts' mean. E[S_J] is taken segment by segment.
3. *Which full steps pass.* A free-up passes a waiting prompt iff the queue ahead Q >= J, with Q
   geometric of ratio s (bulk_wait item 2: P(Q >= j) = s^j), so the passing steps are J's law tilted by
   s^J and the mean length of a pass is

       g(s) = E[S_J s^J] / E[s^J] = sum_j a_j s^j / sum_j p_j s^j,   a_j = E[S_J 1{J = j}],

   the reward of the renewal interval a pass selects (Ross 1996, *Stochastic Processes*, 2nd ed., sec.
   3.6; Wolff 1989, *Stochastic Modeling and the Theory of Queues*, sec. 5.16). g(1) = E[S_J] sets the
   bulk queue's stability (lambda E[S_J] / n < E[J]); model.queueing.bulk_wait.passing_step_s reads g(s).

Every pass is read on the settled segments, the first free-up's too (its head is a leftover when the
free-up before it overflowed, a fresh arrival when it emptied the queue: the settled law is the
heavy-load end). Traced against the simulator in docs/validation.md, "Session 12: token-full prefill
steps".
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from model.serving.packing import (
    FILL_DRAWS,
    FILL_MAX_PROMPTS,
    FILL_SEED,
    most_prompts,
    room_law,
    uncached_prompt_tokens,
)
from model.workload.scenario import Scenario

NEXT_FIT_WARM_STEPS = 4
"""Full steps cut from each seeded sequence before its segments are read: the head's law (a Markov chain
in the leftover prompt) settles within a few steps (on grid cell 0's code prompts the read segments'
mean head is 3,376 tokens with no warm-up, 3,781 / 3,778 / 3,740 after 2 / 4 / 8 steps: the draws'
noise)."""
NEXT_FIT_SEGMENTS = 4
"""Consecutive full steps read per seeded sequence (FILL_DRAWS sequences: 2,048 segments)."""


def full_step_law(scn: Scenario, step_tokens: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(counts J >= 1, their probabilities, [S, R + 1] the law of R_i per sampled prompt i) of consecutive
    token-full steps (module docstring, item 1): the ``full`` argument of model.queueing.bulk_wait (in
    place of model.serving.packing's full_step_prompts / prompt_room_law, whose steps start at a fresh
    head). R_i = #{j >= 1 : u_h + ... + u_(h + j - 1) <= C - u_i} from a segment's head h."""
    law = _segment_law(uncached_prompt_tokens(scn).tobytes(), float(step_tokens))
    return law[0], law[1], law[2]


def full_step_times(
    scn: Scenario, step_tokens: float, alone_s: np.ndarray, fixed_s: np.ndarray
) -> np.ndarray:
    """a_j = E[S_J 1{J = j}] [C, K] of consecutive token-full steps (module docstring), on the counts of
    :func:`full_step_law` (same order), from each sampled prompt's time alone ``alone_s`` and per-step
    part ``fixed_s`` [C, S]. Summed over j: E[S_J]."""
    per_f, per_v = _segment_law(uncached_prompt_tokens(scn).tobytes(), float(step_tokens))[3:]
    fixed = np.asarray(fixed_s, dtype=float)
    return fixed @ per_f + (np.asarray(alone_s, dtype=float) - fixed) @ per_v


def next_fit_segments(u: np.ndarray, step_tokens: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indices [D, L] of FILL_DRAWS seeded FCFS sequences of the sampled prompts ``u``, segment heads
    [D, G], prompts per segment J [D, G]): the sequences cut into consecutive steps FCFS under the cap
    (J = max(1, #{j : u_h + ... + u_(h + j - 1) <= C}), at most the most prompts a step can hold, as
    model.serving.packing's draws), the G = NEXT_FIT_SEGMENTS steps after NEXT_FIT_WARM_STEPS."""
    u = np.maximum(np.asarray(u, dtype=float), 1.0)
    j_max = most_prompts(u, step_tokens)
    steps = NEXT_FIT_WARM_STEPS + NEXT_FIT_SEGMENTS
    rng = np.random.default_rng(FILL_SEED)
    idx = rng.choice(len(u), size=(FILL_DRAWS, steps * j_max))
    cs = np.concatenate([np.zeros((FILL_DRAWS, 1)), np.cumsum(u[idx], axis=1)], axis=1)  # [D, L + 1]
    # rows laid end to end, each shifted past the previous one's end: one searchsorted for all rows
    width = cs.shape[1]
    shift = (np.arange(FILL_DRAWS) * (cs[:, -1].max() + step_tokens + 1.0))[:, None]
    flat = (cs + shift).ravel()
    rows = np.arange(FILL_DRAWS)
    pos = np.zeros(FILL_DRAWS, dtype=int)
    heads, counts = [], []
    for step in range(steps):
        target = cs[rows, pos] + shift[:, 0] + step_tokens
        end = np.searchsorted(flat, target, side="right") - 1 - rows * width  # last prefix within C
        held = np.clip(end - pos, 1, j_max)
        if step >= NEXT_FIT_WARM_STEPS:
            heads.append(pos)
            counts.append(held)
        pos = pos + held
    return idx, np.stack(heads, axis=1), np.stack(counts, axis=1)


@lru_cache(maxsize=64)
def _segment_law(
    uncached_bytes: bytes, step_tokens: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(counts, probabilities, [S, R + 1] R_i's law, [S, K] weight of prompt i's F in a_j, [S, K] weight
    of its v) over the segments of :func:`next_fit_segments` (cached on the lengths' values and the cap):
    in a segment of J = j prompts, F_i counts once per appearance divided by J, v_i once per appearance,
    each segment 1 / segments."""
    u = np.maximum(np.frombuffer(uncached_bytes, dtype=float), 1.0)
    idx, heads, held = next_fit_segments(u, step_tokens)
    total = float(held.size)
    counts, seen = np.unique(held, return_counts=True)
    column = np.searchsorted(counts, held)  # [D, G] each segment's count on J's support
    offset = np.arange(int(held.max()))
    draw = np.broadcast_to(np.arange(idx.shape[0])[:, None, None], (*held.shape, len(offset)))
    inside = offset[None, None, :] < held[:, :, None]  # [D, G, j]
    prompt = idx[draw[inside], (heads[:, :, None] + offset[None, None, :])[inside]]
    col = np.broadcast_to(column[:, :, None], inside.shape)[inside]
    per_v = np.zeros((len(u), len(counts)))
    np.add.at(per_v, (prompt, col), 1.0 / total)
    per_f = np.zeros_like(per_v)
    np.add.at(per_f, (prompt, col), np.broadcast_to(1.0 / held[:, :, None], inside.shape)[inside] / total)
    # R_i from each segment's head: the prefixes u_h + ... that fit in C - u_i
    cs = np.cumsum(u[idx], axis=1)
    base = np.take_along_axis(np.concatenate([np.zeros((idx.shape[0], 1)), cs], axis=1), heads, axis=1)
    room = step_tokens - u  # [S]
    fit = np.zeros((held.size, len(u)), dtype=int)
    for k, (d, g) in enumerate(np.ndindex(*held.shape)):
        h = heads[d, g]
        window = cs[d, h : h + FILL_MAX_PROMPTS] - base[d, g]
        fit[k] = np.searchsorted(window, room, side="right")
    out = (counts.astype(float), seen / total, room_law(fit), per_f, per_v)
    for a in out:
        a.flags.writeable = False
    return out
