"""The wait of a prompt in a disaggregated prefill pool: a bulk-service queue, not a queue of shares.

The pool's n instances share one FCFS prompt queue and a freed instance takes every queued prompt
into its next step, up to the engine's token cap (J prompts of mean length: vLLM's
``max_num_batched_tokens``; model.sim.disaggregated does the same). This is the bulk-service queue
M/G^(1,J)/n (Chaudhry & Templeton 1983, *A First Course in Bulk Queues*, ch. 1 and 4; Neuts 1967,
"A general class of bulk queues with Poisson input", Ann. Math. Stat. 38, the "general bulk service
rule" with minimum 1 and maximum J): a freed server ends the wait of up to J prompts at once. A queue
over per-prompt shares (M/G/n, model.queueing.mgc) instead lets prompts leave one share at a time,
so its conditional wait carries the factor 1 / (1 - rho) of a queue that clears one by one (Kleinrock
1975, vol. 1, sec. 3.5), where the bulk queue clears at the next free instance unless more than J
prompts wait.

Law. A prompt waits only when all n instances are busy (P(W > 0): Erlang C over the shares, the
busy fraction rho = lambda E[share] / n, model.queueing.mgc). Given that, with S an instance's step
(mean E[S], squared coefficient of variation c_S^2), g = E[S] / n the mean time between free-ups and
g_J = E[S_J] / n that between the ends of full steps (S_J a step that took a full J prompts):

1. First free-up. n = 1: the residual life of the step in progress, E[S^2] / (2 E[S]) = E[S] (1 +
   c_S^2) / 2 (Kleinrock 1975, vol. 1, sec. 5.2). n >= 2: the first of n step ends, g for
   exponential steps (the minimum of n exponential residuals), shorter for regular steps whose ends
   stagger; its mean is taken as K g with K Kimura's M/G/c ratio at the busy fraction
   (model.queueing.mgc: Kimura 1994 with Cosmetatos' M/D/c factor; K = (1 + c_S^2) / 2 at n = 1, so
   item 1 is exact there).
2. Free-ups that pass it. A free-up takes min(Q, J) of the Q prompts queued (J the prompts a full
   step holds under the token cap, random: model.serving.packing.full_step_prompts), so a prompt that
   found Q ahead is passed by the free-ups that take the prompts ahead of it. Those free-ups end
   steps that started while the queue held at least a full step, i.e. full steps: they come g_J
   apart. By Little's law on the waiting room and PASTA, E[Q | W > 0] = lambda E[W | W > 0]; with Q
   geometric of that mean (ratio s = q / (1 + q), q = lambda E[W | W > 0]; the M/M/1 queue's law,
   Kleinrock 1975, vol. 1, sec. 3.2) it is passed by the first free-up with P(Q >= J_1) = E[s^J];
   the geometric law is memoryless, so the prompts still ahead of it after a pass are again
   geometric of ratio s and each later free-up passes it with the same probability (J independent
   from step to step): E[free-ups passed] = psi / (1 - psi), psi = E[s^J]. So the conditional wait m
   solves the mean-value equation
       m = K g + g_J psi / (1 - psi),   psi = E[s^J],   s = lambda m / (1 + lambda m),
   the bulk-service form of the residual-time derivation of the Pollaczek-Khinchine mean
   (W = R + E[Lq] E[S] with Lq = lambda W: Bertsekas & Gallager 1992, *Data Networks*, 2nd ed.,
   sec. 3.5; for J = 1 it needs no law of Q, E[free-ups passed] = E[Q]). The right side rises from
   K g at s = 0 and grows like g_J lambda m / E[J] for large m, so a root exists iff lambda g_J <
   E[J], i.e. lambda (E[F] / E[J] + E[v]) < n: full steps carry the load (the bulk queue's stability,
   Chaudhry & Templeton 1983, ch. 4); found by bisection on s. The law of W | W > 0 is taken
   exponential of mean m, as model.queueing.mgc's (a geometric number of gaps).
3. Prompts ahead in its step: Q mod J of them, geometric Q of ratio s folded modulo J (for the law:
   model.queueing.disaggregated_terms, PackedStep); its mean s / (1 - s) - J s^J / (1 - s^J) at J =
   E[J] is lambda m when nothing overflows (the gap's age, whose mean equals its residual's) and
   about (J - 1) / 2 when the queue is long. Those behind it arrive during its wait.

4. Per prompt (session 11, the ``full`` law's optional third entry). A free-up takes the queue head-first
   FCFS and stops at the first prompt that does not fit under the cap C (model.sim.disaggregated, vLLM),
   so it passes prompt i (u_i tokens) iff the prompts ahead of it fill C - u_i without it: Q > R_i, R_i =
   #{j >= 1 : u_1 + ... + u_j <= C - u_i} over the prompts ahead (model.serving.packing.prompt_room_law;
   R_i <= T, the prompts a full take holds, T = max(1, #{j : u_1 + ... + u_j <= C}), J's law). From Q
   geometric (ratio s) the first free-up passes it with psi_i = P(Q > R_i) = E[s^(R_i + 1)]; it passed
   either because the step filled before reaching it (Q > T, probability omega_0 = E[s^(T + 1)]; the Q - T
   still ahead are 1 + geometric, memoryless) or because it did not fit beside all of them (R_i < Q <=
   T; it is then the head and the next free-up takes it: one pass). From the state "at least one ahead"
   a free-up passes it with phi_i = E[s^R_i] and overflows with omega = E[s^T], so (a renewal argument
   on that state) E[passes_i] = psi_i + omega_0 phi_i / (1 - omega). The mean-value equation keeps the
   pool's m = s / (1 - s) / lambda = K g + g_J E_i[passes_i] (Little's law over all prompts: linear in
   psi_i and phi_i, so it is the pooled law of R), and prompt i's own wait is m_i = K g + g_J
   E[passes_i] (``own_scale`` = m_i / m; with Kingman's factor on both). R_i = J - 1 for every prompt,
   J fixed, gives s^J / (1 - s^J), item 2's law; J = 1 (R = 0) the M/G/1 E[Q] = s / (1 - s).

5. Leftover heads (session 12, tok13; ``full``'s six entries). After an overflow the head ahead of a
   waiting prompt is the prompt the last step could not fit, biased long, so the laws of T and R_i after
   an overflow (phi_i, omega) are those of consecutive token-full steps (Next-Fit bin packing:
   model.serving.full_steps), and the full steps' length g_J = g(s) = E[S_J s^J] / E[s^J] their own
   (:func:`passing_step_s`). The first free-up's head is a leftover iff the free-up before it overflowed:
   a two-state chain whose leftover share is x = w_f / (1 - w_s + w_f), w = E[s^(T + 1)] on the fresh (f:
   model.serving.packing's draws) and leftover (s) laws, so psi_i and omega_0 are read on the mixture (1 -
   x) fresh + x leftover. With one law for both, items 4 and 5 agree exactly.

6. Early passes (session 13, dis15). The free-ups that pass a waiting prompt are not all ends of full
   steps: the first n of them after its arrival end the n steps in progress at that instant (each
   instance's current step, started before it arrived, full or not), and only later free-ups end the full
   steps started during its wait. The ends of n independent stationary step sequences form a
   superposition whose rate is n / E[S] (each instance ends a step at rate 1 / E[S]; the Palm rate of a
   superposition of stationary renewal processes, Cox 1962, *Renewal Theory*, sec. 6.3, Khintchine
   1960), so the passes k = 1 .. n - 1 (the gaps from free-up k to k + 1, k + 1 <= n) come g = E[S] / n
   apart and the later ones g_J / n apart:
       m = K g + g E[min(P, n - 1)] + (g_J / n) E[(P - n + 1)^+],
   E[min(P, n - 1)] = sum_(k < n) P(P >= k) = psi + omega_0 phi (1 - omega^(n - 2)) / (1 - omega) on item
   4's chain (P(P >= 1) = psi, P(P >= k) = omega_0 omega^(k - 2) phi for k >= 2; :func:`_early_passes`).
   n = 1: no early pass (items 1-5 unchanged); J = 1 with S_J = S: every pass g apart, Kimura's M/G/n
   again. Traced in the simulator (benchmarks/trace_prefill_wait.py; docs/session13/dis15.md): the gap
   from the first free-up to the second after a waiting arrival is 0.0459 s on grid cell 111's pool
   against E[S] / n = 0.0505 and g_J / n = 0.0819 s; 0.0188 on cell 98's against 0.0193 and 0.0294;
   0.091 on the Mixtral golden's (3 x TP2 H200) against 0.062 and 0.113 (later gaps rise towards g_J / n).

Limits (hand-derived in tests/test_bulk_wait.py and tests/test_prompt_passes.py): J = 1 and S_J = S: m =
K g / (1 - lambda g), Kimura's M/G/n conditional wait (model.queueing.mgc), at n = 1 the
Pollaczek-Khinchine E[S] (1 + c_S^2) / (2 (1 - rho)) (M/D/1 at c_S^2 = 0, M/M/1 at 1); J -> infinity (no
cap): the first free-up alone, K g, with lambda K g prompts ahead. Non-Poisson arrivals scale the wait
by Kingman's factor (c_a^2 + c_S^2) / (1 + c_S^2), as model.queueing.mgc does (Whitt 1993, sec. 2).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from model.queueing.memo import memoized
from model.queueing.mgc import _kimura_ratio

ROOT_BISECTIONS = 60
"""Bisection steps for the queue's ratio s in (0, 1) (its bracket halves each step: 2^-60)."""


@dataclass(frozen=True)
class BulkWait:
    """Per candidate [C]: E[W | W > 0] of the bulk queue (s) and the mean prompts ahead of a waiting
    prompt in its step."""

    cond_mean_s: np.ndarray
    ahead: np.ndarray
    passed: np.ndarray | None = None  # [C] psi = E[s^J]: P(a free-up passes a waiting prompt) (item 2)
    first_s: np.ndarray | None = None  # [C] K g: the mean wait for the first free-up (item 1)
    own_passed: np.ndarray | None = None  # [C, S] psi_i: P(prompt i is passed at least once) (item 4)
    own_scale: np.ndarray | None = None  # [C, S] m_i / m: prompt i's E[W | W > 0] over the pool's (item 4)
    own_pass_s: np.ndarray | None = None  # [C, S] g_J E[passes_i | passed]: the passes' mean given one
    full_s: np.ndarray | None = None  # [C] g_J at the root: the mean full step that passes (session 12)


@memoized
def bulk_wait(
    rate_rps: np.ndarray,
    step_mean_s: np.ndarray,
    step_scv: np.ndarray,
    servers: np.ndarray,
    full: tuple[np.ndarray, ...],
    full_step_s: np.ndarray,
    busy: np.ndarray,
    scv_arrival: float = 1.0,
) -> BulkWait:
    """E[W | W > 0] and the prompts ahead in the step of the bulk-service prefill queue (module
    docstring) [C]: ``rate_rps`` lambda, ``step_mean_s`` E[S] and ``step_scv`` c_S^2 of an instance's
    step, ``servers`` n, ``full`` the law of J (whole prompts a full step takes: counts >= 1 and their
    probabilities, model.serving.packing.full_step_prompts; optionally a third entry, the per-prompt
    law of R_i [S, R + 1], model.serving.packing.prompt_room_law, for item 4's per-prompt passes; and
    optionally the same three at a fresh head, the first three then after an overflow: item 5),
    ``full_step_s`` E[S_J] [C] the mean length of a full step (those that end while the queue outgrows a
    step), or [C, K] a_j = E[S_J 1{J = j}] on J's counts, whose passing step g_J = g(s) tilts by s^J
    (:func:`passing_step_s`, model.serving.full_steps), ``busy`` rho (an instance's busy fraction, for
    Kimura's ratio). Inf where the queue grows (lambda E[S_J] / n >= E[J]). Memoized on the inputs'
    values (model.queueing.memo): the goodput search asks again for the same pools (a hit returns the
    same read-only result)."""
    lam = np.asarray(rate_rps, dtype=float)
    scv = np.asarray(step_scv, dtype=float)
    n = np.asarray(servers, dtype=float)
    counts, probs = (np.asarray(a, dtype=float)[None, :] for a in full[:2])
    own = None if len(full) < 3 else np.asarray(full[2], dtype=float)  # [S, R + 1] P(R_i = r)
    # item 4's laws (counts, probs, R_i's) after an overflow, and at a fresh head where given (item 5)
    laws = None if own is None else _head_laws(full)
    pooled = None if laws is None else tuple((c, p, r.mean(axis=0)[None, :]) for c, p, r in laws)
    gap = np.asarray(step_mean_s, dtype=float) / n  # mean time between free-ups while all are busy
    rho = np.clip(np.asarray(busy, dtype=float), 1e-9, 1.0 - 1e-9)
    first = _kimura_ratio(rho, n, scv) * gap  # (1 + c_S^2) / 2 at n = 1 (item 1)
    early_gap = gap  # item 6: the steps in progress at the arrival end g = E[S] / n apart
    mean_j = float((counts * probs).sum())
    full_steps = np.asarray(full_step_s, dtype=float)

    def full_gap(s: np.ndarray) -> np.ndarray:
        """g_J / n [C] at ratio s: between the free-ups that pass a prompt."""
        if full_steps.ndim == 1:
            return full_steps / n
        return passing_step_s(full_steps, full[0], full[1], s) / n

    stable = lam * full_gap(np.ones(lam.shape)) < mean_j  # g(1) = E[S_J]

    fast = None if pooled is None or full_steps.ndim == 1 else _PooledTerms.build(pooled, full_steps)

    def excess(s: np.ndarray) -> np.ndarray:
        """Right side less left side of the mean-value equation at ratio s [C] (decreasing at the root)."""
        if fast is not None:  # items 4 and 5 pooled, and g(s), from one table of powers of s
            steps, g, early = fast(s, n)
            spaced = early_gap * early + g / n * (steps - early)  # item 6
            return first + spaced - s / (1.0 - s) / np.maximum(lam, 1e-300)
        if pooled is not None:  # item 4 averaged over the prompts (linear in psi_i, phi_i)
            steps, early = (a[:, 0] for a in _own_passes(s, *pooled, servers=n))
        else:
            passed = (probs * s[:, None] ** counts).sum(axis=1)  # P(Q >= J) = E[s^J]
            steps = passed / (1.0 - passed)  # E[free-ups passed]: geometric (item 2)
            early = _early_passes(passed, passed, passed, passed, n)  # P(passes >= k) = psi^k
        spaced = early_gap * early + full_gap(s) * (steps - early)  # item 6
        return first + spaced - s / (1.0 - s) / np.maximum(lam, 1e-300)

    lo, hi = np.zeros(lam.shape), np.ones(lam.shape)
    for _ in range(ROOT_BISECTIONS):
        s = 0.5 * (lo + hi)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            up = excess(s) > 0.0
        lo, hi = np.where(up, s, lo), np.where(up, hi, s)
    s = np.where(lam > 0, 0.5 * (lo + hi), 0.0)
    kingman = (scv_arrival + scv) / (1.0 + scv)
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = np.where(lam > 0, s / (1.0 - s) / np.maximum(lam, 1e-300), first)
        folded = s / (1.0 - s) - mean_j * s**mean_j / (1.0 - s**mean_j)  # E[Q mod J] at J's mean
        passed = (probs * s[:, None] ** counts).sum(axis=1)  # psi at the root
    ahead = np.where(stable, np.maximum(folded, 0.0), np.inf)
    gap = full_gap(s)
    out = BulkWait(
        np.where(stable, cond * kingman, np.inf), ahead, np.where(stable, passed, 1.0), first, full_s=gap * n
    )
    if own is None:
        return out
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        psi_i = _own_passes(s, *laws, first_only=True)  # [C, S] P(the first free-up passes i)
        steps_i, early_i = _own_passes(s, *laws, servers=n)  # [C, S]
        mean_steps, mean_early = _own_passes(s, *pooled, servers=n)  # [C, 1]
        f, e, g = first[:, None], early_gap[:, None], gap[:, None]  # item 6: the first n - 1 passes g apart
        own_m = f + e * early_i + g * (steps_i - early_i)
        scale = own_m / (f + e * mean_early + g * (mean_steps - mean_early))
        pass_s = np.where(psi_i > 0, gap[:, None] * steps_i / psi_i, gap[:, None])
    ok = stable[:, None] & np.isfinite(scale)
    return replace(
        out,
        own_passed=np.where(ok, psi_i, 1.0),
        own_scale=np.where(ok, scale, 1.0),
        own_pass_s=np.where(ok, pass_s, np.inf),
    )


Law = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class _PooledTerms:
    """The pooled E[passes] of :func:`_own_passes` and g(s) of :func:`passing_step_s` [C] as polynomials
    in s read from one table of powers s^0 .. s^(P - 1) per trial s (a speed device for the root search:
    the same values to rounding). ``coef`` [P, 5]: E[s^R] and E[s^T] after an overflow, the same at a
    fresh head, and p_j at power j - j_min; ``step_times`` [C, P]: a_j at power j - j_min."""

    coef: np.ndarray
    step_times: np.ndarray

    @classmethod
    def build(cls, pooled: tuple[Law, Law], full_steps: np.ndarray) -> _PooledTerms:
        (c_s, p_s, r_s), (c_f, p_f, r_f) = pooled
        powers = int(max(c_s.max(), c_f.max(), r_s.shape[1] - 1, r_f.shape[1] - 1)) + 1
        coef = np.zeros((powers, 5))
        coef[: r_s.shape[1], 0] = r_s[0]
        np.add.at(coef[:, 1], c_s[0].astype(int), p_s[0])
        coef[: r_f.shape[1], 2] = r_f[0]
        np.add.at(coef[:, 3], c_f[0].astype(int), p_f[0])
        shift = (c_s[0] - c_s[0].min()).astype(int)
        np.add.at(coef[:, 4], shift, p_s[0])
        step_times = np.zeros((full_steps.shape[0], powers))
        step_times[:, shift] = full_steps
        return cls(coef, step_times)

    def __call__(self, s: np.ndarray, servers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(pooled E[passes], g(s), pooled E[min(passes, n - 1)] of item 6) [C] at ratio s [C], ``servers``
        n [C]."""
        log_s = np.log(np.maximum(s, 1e-300))[:, None]
        table = np.exp(log_s * np.arange(self.coef.shape[0], dtype=float)[None, :])  # [C, P]
        phi_s, omega_s, phi_f, omega_f, tilt = (table @ self.coef).T
        psi, omega_0 = _first_free_up(s, phi_s, omega_s, phi_f, omega_f)
        g = (table * self.step_times).sum(axis=1) / tilt
        early = _early_passes(psi, omega_0, phi_s, omega_s, servers)
        return psi + omega_0 * phi_s / (1.0 - omega_s), g, early


def _head_laws(full: tuple[np.ndarray, ...]) -> tuple[Law, Law]:
    """((counts [1, K], probs [1, K], R_i's laws [S, R + 1]) after an overflow, the same at a fresh head)
    from ``full``'s three or six entries (the fresh head's law repeats the first where not given)."""

    def law(entries: tuple[np.ndarray, ...]) -> Law:
        return tuple(
            np.asarray(a, dtype=float)[None, :] if a.ndim == 1 else a for a in map(np.asarray, entries)
        )

    settled = law(full[:3])
    return (settled, settled) if len(full) < 6 else (settled, law(full[3:6]))


def _own_passes(
    s: np.ndarray, settled: Law, fresh: Law, first_only: bool = False, servers: np.ndarray | None = None
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """E[free-ups passing prompt i] [C, G] (items 4 and 5) at ratio s [C]: psi_i + omega_0 phi_i / (1 -
    omega), with phi_i = E[s^R_i] and omega = E[s^T] on the law after an overflow (``settled``: counts T,
    probs [1, K], R_i's laws [G, R + 1]), and the first free-up's psi_i = E[s^(R_i + 1)] and omega_0 =
    E[s^(T + 1)] on the mixture (1 - x) ``fresh`` + x ``settled``, x = w_f / (1 - w_s + w_f) the share of
    free-ups whose head is a leftover (w = E[s^(T + 1)] on each law: a free-up leaves a leftover head
    iff it overflows, a two-state chain; item 5). ``first_only``: psi_i alone. ``servers`` n [C]:
    (E[passes_i], E[min(passes_i, n - 1)]) (item 6)."""
    log_s = np.log(np.maximum(s, 1e-300))[:, None]

    def moments(law: Law) -> tuple[np.ndarray, np.ndarray]:
        counts, probs, own = law
        phi = np.exp(log_s * np.arange(own.shape[1], dtype=float)[None, :]) @ own.T  # [C, G] E[s^R_i]
        return phi, (probs * np.exp(log_s * counts)).sum(axis=1, keepdims=True)  # E[s^T]

    phi_s, omega_s = moments(settled)
    phi_f, omega_f = (phi_s, omega_s) if fresh is settled else moments(fresh)
    psi, omega_0 = _first_free_up(s[:, None], phi_s, omega_s, phi_f, omega_f)
    if first_only:
        return psi
    total = psi + omega_0 * phi_s / (1.0 - omega_s)
    if servers is None:
        return total
    return total, _early_passes(psi, omega_0, phi_s, omega_s, np.asarray(servers, dtype=float)[:, None])


def _early_passes(
    psi: np.ndarray, omega_0: np.ndarray, phi: np.ndarray, omega: np.ndarray, servers: np.ndarray
) -> np.ndarray:
    """E[min(P, n - 1)] (item 6) of the passes P of items 4 and 5: P(P >= 1) = psi and, from the state "at
    least one ahead" entered with probability omega_0 and kept with omega, P(P >= k) = omega_0 omega^(k -
    2) phi for k >= 2, so the sum over k = 1 .. n - 1 is psi + omega_0 phi (1 - omega^(n - 2)) / (1 -
    omega) (0 at n = 1; psi at n = 2). Item 2's geometric P (P(P >= k) = psi^k) is psi = omega_0 = phi =
    omega."""
    n = np.asarray(servers, dtype=float)
    late = np.maximum(n - 2.0, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(omega < 1.0, (1.0 - omega**late) / (1.0 - omega), late)  # sum_(k < n - 2) omega^k
    tail = np.where(n > 2.0, omega_0 * phi * ratio, 0.0)
    return np.where(n >= 2.0, psi + tail, 0.0)


def _first_free_up(
    s: np.ndarray, phi_s: np.ndarray, omega_s: np.ndarray, phi_f: np.ndarray, omega_f: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(psi_i, omega_0) of the first free-up (item 5) at ratio ``s``: E[s^(R_i + 1)] and E[s^(T + 1)] on
    the mixture (1 - x) fresh + x leftover of the laws' phi = E[s^R_i] and omega = E[s^T] (``_s``
    after an overflow, ``_f`` at a fresh head), x = w_f / (1 - w_s + w_f), w = s omega on each law."""
    x = s * omega_f / (1.0 - s * omega_s + s * omega_f)
    return s * ((1.0 - x) * phi_f + x * phi_s), s * ((1.0 - x) * omega_f + x * omega_s)


def passing_step_s(
    step_times: np.ndarray, counts: np.ndarray, probs: np.ndarray, s: np.ndarray
) -> np.ndarray:
    """g(s) = sum_j a_j s^j / sum_j p_j s^j [C]: the mean full step that passes a waiting prompt when the
    queue ahead of it is geometric of ratio ``s`` [C] (a free-up passes it iff Q >= J, P = s^J, so the
    passing steps are J's law tilted by s^J: model.serving.full_steps); ``step_times`` a_j = E[S_J 1{J =
    j}] [C, K], ``counts`` j and ``probs`` p_j [K] (J's law). At s = 1 the unweighted E[S_J]."""
    j = np.asarray(counts, dtype=float).reshape(-1)
    log_s = np.log(np.clip(np.asarray(s, dtype=float), 1e-300, 1.0))[:, None]
    tilt = np.exp(log_s * (j - j.min())[None, :])  # s^(j - j_min) on both sides: finite at small s
    return (step_times * tilt).sum(axis=1) / (np.asarray(probs, dtype=float).reshape(1, -1) * tilt).sum(
        axis=1
    )
