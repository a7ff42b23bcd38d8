"""Pre-emption under incremental KV allocation (the engine policies "recompute" and "swap",
model.hardware.engines.PREEMPTIONS), analytically: how often a request is pre-empted and what its
resume costs, vectorised over candidates. The simulator's counterpart is model.sim.preemption.

Model (docs/model.md, "KV offload tiers"; assumptions stated):

1. **Held KV and capacity.** Under incremental allocation a running request holds its prompt plus
   the tokens it has generated. A request of prompt P and output O spends O steps in the batch at
   P + 1 .. P + O, so a random running sequence (length-biased by O, Little's law) holds on average
   E[O (P + O / 2)] / E[O] tokens (:func:`held_kv_tokens`; ``Scenario.decode_context_tokens``): the
   KV cache of C tokens runs C / that many sequences on average, the planner's decode-batch cap.
2. **When the cache is full.** Admission is greedy (a prompt is admitted as soon as it fits), so
   while requests wait for KV the cache is full up to a headroom H below the next prompt's size:
   H ~ Uniform(0, E[P]). The running sequences consume the headroom at their token rate, and the
   consumption between two completions is D ~ Exponential(E[O]) tokens (completions of n running
   sequences at n / E[O] per emitted token each: memoryless). Each time the consumption passes
   the headroom the most recently admitted request is pre-empted, freeing about its prompt
   (E[P]: it has just started). Pre-emptions per admitted request while full:

       pi = E[(D - H)+] / E[P] = E[O]^2 (1 - exp(-E[P] / E[O])) / E[P]^2

   (E[(D - h)+] = E[O] exp(-h / E[O]) for the exponential, averaged over h uniform on (0, E[P])).
   For E[O] << E[P] this is ~ E[O]^2 / E[P]^2 (the reflected-random-walk limit: pushes at the
   lower boundary at rate sigma^2 / (2 b) of a zero-drift walk in a box of width b = E[P] with
   sigma^2 ~ 2 E[O]^2 per completion); for E[O] >> E[P], ~ E[O] / E[P].
   The cache is full when the running sequences' KV leaves less than the mean headroom: with n
   running, their KV S_n is a sum of n held amounts (mean and variance of a random running
   sequence's, :func:`held_kv_moments`; held = P + u O with u uniform, length-biased by O), taken
   normal (central limit theorem), so P(full | n) = P(S_n > C - E[P] / 2), averaged over the
   decode batch's occupancy law (model.queueing.decode_spread.occupancy; :func:`full_probability`).
   Pre-emptions per request = P(full) x pi (:func:`preemptions_per_request`).
3. **Resume.** A pre-empted request waits for the next completion to free its KV (mean 1 / lambda
   per replica: completions at the arrival rate, memoryless), then resumes: recompute re-prefills
   its prompt and generated tokens (about the prompt's prefill time); swap copies its KV out to the
   cpu tier and back, 2 x (latency + E[P] x KV bytes per token per GPU / bandwidth)
   (:meth:`model.hardware.kv_offload.KVTier.reload_time_s`). The recompute's prefill and the
   swap's copies stall the replica's running decodes (they share its iterations): a busy fraction
   lambda x pre-emptions per request x resume work, which inflates the per-token time by
   1 / (1 - busy); the pre-empted request's own pause (wait + resume) is spread over its tokens in
   the mean (:func:`resume_terms`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import erfc


def held_kv_moments(prompt_tokens: np.ndarray, output_tokens: np.ndarray) -> tuple[float, float]:
    """(mean, variance) of the KV tokens a random running sequence holds under incremental
    allocation: held = P + u O, u ~ Uniform(0, 1), requests weighted by O (the steps they run), so
    mean E[O (P + O / 2)] / E[O] and second moment E[O (P^2 + P O + O^2 / 3)] / E[O] (items 1-2)."""
    p = np.asarray(prompt_tokens, dtype=float)
    o = np.asarray(output_tokens, dtype=float)
    w = float(np.sum(o))
    mean = float(np.sum(o * (p + o / 2.0)) / w)
    second = float(np.sum(o * (p * p + p * o + o * o / 3.0)) / w)
    return mean, max(second - mean * mean, 0.0)


def preemptions_while_full(mean_prompt_tokens: float, mean_output_tokens: float) -> float:
    """pi = E[O]^2 (1 - exp(-E[P] / E[O])) / E[P]^2: pre-emptions per admitted request while the KV
    cache is full (item 2 of the module docstring)."""
    p = max(float(mean_prompt_tokens), 1.0)
    o = max(float(mean_output_tokens), 1e-9)
    return o * o * -np.expm1(-p / o) / (p * p)


def full_probability(
    batch: np.ndarray,
    prob: np.ndarray,
    capacity_tokens: np.ndarray,
    held: tuple[float, float],
    mean_prompt_tokens: float,
) -> np.ndarray:
    """P(KV cache full) [C]: sum_n p(n) P(S_n > C - E[P] / 2), S_n ~ Normal(n m, n v) with ``held`` =
    (m, v) (:func:`held_kv_moments`), over the occupancy law (support ``batch`` [C, K], ``prob``
    [C, K]; model.queueing.decode_spread.occupancy) and the KV ``capacity_tokens`` C [C] (item 2)."""
    m, v = held
    n = np.maximum(np.asarray(batch, dtype=float), 0.0)
    room = np.asarray(capacity_tokens, dtype=float)[:, None] - mean_prompt_tokens / 2.0
    sd = np.sqrt(np.maximum(n * v, 1e-12))
    tail = 0.5 * erfc((room - n * m) / (sd * np.sqrt(2.0)))
    tail = np.where(n > 0, tail, 0.0)
    return np.clip(np.sum(prob * tail, axis=1), 0.0, 1.0)


def preemptions_per_request(
    p_full: np.ndarray, mean_prompt_tokens: float, mean_output_tokens: float
) -> np.ndarray:
    """Expected pre-emptions of a request: P(full) x pi [C]."""
    return np.asarray(p_full, dtype=float) * preemptions_while_full(mean_prompt_tokens, mean_output_tokens)


@dataclass(frozen=True, eq=False)
class ResumeTerms:
    """Per candidate [C]: pre-emptions per request, the pause of one pre-emption (wait for room +
    resume work), the busy fraction the resumes take from the running decodes, and the TPOT added
    (the per-token inflation of the base plus the pauses spread over a request's tokens)."""

    per_request: np.ndarray
    pause_s: np.ndarray
    busy: np.ndarray
    tpot_extra_s: np.ndarray


def resume_terms(
    per_request: np.ndarray,
    rate_per_replica_rps: np.ndarray,
    resume_work_s: np.ndarray,
    base_tpot_s: np.ndarray,
    mean_gaps: float,
) -> ResumeTerms:
    """The costs of item 3 of the module docstring. ``resume_work_s`` [C]: the work one resume puts on
    the replica (recompute: the prompt's prefill; swap: the copy out and back); ``base_tpot_s`` [C]:
    the TPOT without pre-emption; ``mean_gaps``: E[O - 1] over the sampled requests."""
    lam = np.asarray(rate_per_replica_rps, dtype=float)
    k = np.asarray(per_request, dtype=float)
    work = np.asarray(resume_work_s, dtype=float)
    with np.errstate(divide="ignore"):
        wait = np.where(lam > 0, 1.0 / np.where(lam > 0, lam, 1.0), 0.0)
    pause = wait + work
    busy = np.clip(lam * k * work, 0.0, 0.99)
    base = np.asarray(base_tpot_s, dtype=float)
    extra = base * busy / (1.0 - busy) + k * pause / max(float(mean_gaps), 1.0)
    return ResumeTerms(k, pause, busy, extra)
