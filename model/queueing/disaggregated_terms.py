"""Two latency terms of disaggregated serving that the colocated styles do not have.

Join residual (disaggregated decode, ``join_busy`` / ``join_step_s``): a request whose KV lands on its
decode instance while an iteration is in flight delivers its first token then but joins the batch at
the next iteration boundary (continuous batching admits at iteration boundaries: Yu et al., "Orca",
OSDI 2022, sec. 4.2; DistServe sec. 4.3), so its first token gap holds the iteration's residual R on
top of its own decode steps: TPOT_ci = b_c + s_ci D_c + R / (O_i - 1). By PASTA (Wolff 1982) the KV
lands in a busy iteration with the instance's busy probability u_c, and the residual of an
iteration of near-constant length tau_c is uniform on [0, tau_c] (the residual life of a renewal
process, Kleinrock 1975, vol. 1, sec. 5.2: density (1 - F(r)) / E[tau]); idle (1 - u_c), R = 0.
R is independent of D; its uniform law is integrated by a JOIN_STRATA-point midpoint rule
(the convolution of Papoulis sec. 6-2).

Packed step (disaggregated prefill pool, :class:`PackedStep`): the pool serves one FCFS queue and a
freed instance takes the waiting prompts FCFS up to the token cap; every prompt of a step gets its
first token when the step ends. A prompt that waited W > 0 shares its step with the prompts queued
ahead of it that the step still takes (A of them) and with those that arrived during its own wait
(FCFS: none of them left before it), N ~ Poisson(lambda W) given W (lambda the pool's whole rate), up to
the cap's room beside it: TTFT_ci = d_ci + W + E[v] (A_i + min(N, J_i - A_i)) (v a prompt's compute less
the per-step part, J_i the whole mean-length prompts the token cap fits beside prompt i; Chaudhry &
Templeton 1983, *A First Course in Bulk Queues*, ch. 1: a customer completes with its batch). A prompt
that found an instance idle (W = 0) starts at once, alone. A_i is its mean given W > 0
(model.queueing.bulk_wait, the queue's remainder modulo a full step) and N is replaced by its
conditional mean E[min(N, J_i - A_i) | W] (concave in W: the map W -> W + E[v] E[min(N, J) | W] is
increasing), so P(TTFT > t) is the wait's tail at the map's inverse.

One instance (n_p = 1, session 11): a prompt that finds the instance busy waits for the step in progress
to end unless the queue ahead of it fills the next step (model.queueing.bulk_wait, item 2: passed with
probability psi = E[s^J]). Not passed (1 - psi), its wait is the residual R of the step in progress, whose
length L is length-biased (a Poisson arrival lands in a step with probability proportional to its
length; PASTA, Wolff 1982): given L, R is uniform on [0, L] (Kleinrock 1975, vol. 1, sec. 5.2), so the wait
is bounded by the step, and the prompts in its next step are the others that arrived during that step,
K ~ Poisson(lambda L), independent of R given L (the arrivals of a Poisson process over an interval
around an arrival epoch are Poisson, Palm's theorem). The step is taken gamma of mean E[S] and squared
coefficient of variation c_S^2, so L is gamma of shape 1 / c_S^2 + 1 and mean E[S] (1 + c_S^2) (the
length-biased gamma; E[R] = E[S] (1 + c_S^2) / 2, the M/G/1 residual); L is read at the conditional means
of equal-probability strata.
Passed (psi), the wait is the residual plus a geometric number N >= 1 (mean 1 / (1 - psi)) of full
steps g_J apart (the M/G^(1,J)/1 waiting time, Chaudhry & Templeton 1983, ch. 4, has a geometric tail in
the steps passed): taken as the first full step g_J, which every passed prompt waits, plus an exponential
of mean E[L] / 2 + g_J psi / (1 - psi) (the residual and the further passes), m_p = E[L] / 2 + g_J / (1 -
psi) in all. For Poisson arrivals the mixture's mean
is bulk_wait's m = E[L] / 2 + g_J psi / (1 - psi); where m carries Kingman's factor (bursty arrivals) the
weight of the passed branch is the one that keeps the mean m, (m - E[L] / 2) (1 - psi) / g_J, at most 1
(then the exponential law of mean m, as on several instances). Per prompt (session 11,
model.queueing.bulk_wait item 4): m is prompt i's own m_i = m x ``wait_scale`` (a long prompt, less room
beside the prompts ahead, is passed more often), so the weight is its own psi_i and ``pass_s`` its own
g_J E[passes_i] / psi_i. The exponential law of mean m used before overstated the tail of a wait
bounded by one step (grid cell 62: the simulated W | W > 0 quantiles p50 / p90 / p99 0.18 / 0.38 /
0.80 s, the exponential's 0.17 / 0.55 / 1.11).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import gammainc, gammaincc, gammaincinv

LawRead = Callable[..., np.ndarray | tuple[np.ndarray, np.ndarray]]
"""A CDF (or a (lo, hi) bound pair) read by :class:`model.queueing.latency.LatencyModel`:
PackedStep.waiting_cdf / waiting_floor / waiting_ceiling, join_residual_cdf / join_residual_bounds."""

JOIN_STRATA = 8
"""Midpoints r_m = tau (m + 1/2) / JOIN_STRATA of the join residual's uniform law on [0, tau] (module
docstring, "Join residual"): the CDF of R / (O - 1) is read in steps of 1/JOIN_STRATA of its range,
an error of at most 1 / (2 JOIN_STRATA) of the busy share in any one request's P(TPOT <= x)."""
PACKED_TERMS = 24
"""Companion counts t = 0 .. PACKED_TERMS - 1 summed one by one in :meth:`PackedStep.waiting_cdf`; the
rest (at most (1 + T (1 - q)) q^T of the law, q = lambda m / (1 + lambda m)) is put at the cap's room,
the most it can add (conservative)."""
LENGTH_STRATA = 8
"""Equal-probability strata of the length-biased step in progress (one instance,
:meth:`PackedStep.unpassed_cdf`), each read at its conditional mean (so E[L], and the residual's mean
E[L] / 2, are kept exactly)."""
BEHIND_NEWTON_STEPS = 8
"""Newton steps for the wait that fills a TTFT slack with packed-behind prompts (converging monotonically
from below after the first: the map is increasing and concave)."""


def join_residual_cdf(
    law: Callable[[np.ndarray], np.ndarray],
    excess_s: np.ndarray,
    busy: np.ndarray,
    step_s: np.ndarray,
    gaps: np.ndarray,
) -> np.ndarray:
    """P(X + R / gaps <= excess) [C, S] for X of CDF ``law`` and the join residual R: 0 with probability
    1 - ``busy`` [C], else uniform on [0, ``step_s``] [C] (module docstring, "Join residual"), read at
    JOIN_STRATA midpoints; ``gaps`` [1, S] the token gaps O - 1."""
    u = np.asarray(busy, dtype=float)[:, None]
    tau = np.asarray(step_s, dtype=float)[:, None]
    inside = np.zeros(np.broadcast_shapes(np.shape(excess_s), gaps.shape, u.shape))
    for m in range(JOIN_STRATA):
        inside = inside + law(excess_s - tau * ((m + 0.5) / JOIN_STRATA) / gaps)
    return (1.0 - u) * law(excess_s) + u * inside / JOIN_STRATA


def join_residual_bounds(
    law: Callable[[np.ndarray], np.ndarray],
    excess_s: np.ndarray,
    busy: np.ndarray,
    step_s: np.ndarray,
    gaps: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds (lo, hi) [C, S] on :func:`join_residual_cdf` (same arguments) from two reads of ``law``
    instead of JOIN_STRATA + 1: R lies in [0, tau] and ``law`` is a CDF (nondecreasing), so every
    stratum's term lies between law(excess - tau / gaps) and law(excess), and so does their mix with
    the idle term, whatever the busy probability (``busy``, unused)."""
    tau = np.asarray(step_s, dtype=float)[:, None]
    lo = law(excess_s - tau / gaps)
    return lo, np.broadcast_to(law(excess_s), lo.shape)


def packed_wait_s(slack_s: np.ndarray, rate_rps: np.ndarray, v_s: np.ndarray, most: np.ndarray) -> np.ndarray:
    """The wait w [C, S] that fills a TTFT slack y = ``slack_s`` when the prompts packed behind a prompt
    add h(w) = E[v] E[min(N, J_i)], N ~ Poisson(lambda w) (module docstring, "Packed behind";
    ``rate_rps`` lambda [C], ``v_s`` E[v] [C], ``most`` J_i [C, S]): the root of w + h(w) = y by
    Newton's method from w = y (w + h is increasing and concave, so the iterates rise to the root
    after the first step). E[min(N, J)] = x P(N <= J - 1) + J P(N > J) (E[N; N <= J] = x P(N <= J - 1)
    for a Poisson of mean x); its derivative in x is P(N <= J - 1). A negative slack is returned as is."""
    lam = np.asarray(rate_rps, dtype=float)[:, None]
    v = np.asarray(v_s, dtype=float)[:, None]
    big_j = np.asarray(most, dtype=float)
    y = np.maximum(np.asarray(slack_s, dtype=float), 0.0)
    w = y.copy()
    some = big_j > 0
    jj = np.maximum(big_j, 1.0)
    for _ in range(BEHIND_NEWTON_STEPS):
        x = lam * w
        below = gammaincc(jj, x)  # P(N <= J - 1)
        mean_min = np.where(some, x * below + big_j * (1.0 - gammaincc(jj + 1.0, x)), 0.0)
        slope = 1.0 + np.where(some, v * lam * below, 0.0)
        w = np.clip(w - (w + v * mean_min - y) / slope, 0.0, y)
    return np.where(np.asarray(slack_s) < 0, slack_s, w)


@dataclass(frozen=True, eq=False)
class PackedStep:
    """The prompts sharing a waiting prompt's prefill step (module docstring, "Packed step")."""

    rate_rps: np.ndarray  # [C] lambda: prompts reaching the prefill queue per second
    v_s: np.ndarray  # [C] E[v]: a packed prompt's compute less the per-step part
    room: np.ndarray  # [C, S] J_i: whole mean-length prompts the token cap fits beside prompt i
    ahead: np.ndarray  # [C, S] A_i: mean prompts ahead of it in its step, given it waited (<= J_i)
    step_len_s: np.ndarray | None = None  # [C] one instance: L, the step in progress (0: n_p >= 2)
    pass_s: np.ndarray | None = None  # [C] or [C, S] one instance: the passes' mean given one
    step_scv: np.ndarray | None = None  # [C] one instance: c_S^2 of a step
    full_step_s: np.ndarray | None = None  # [C] one instance: g_J, a full step (the least a pass adds)
    wait_scale: np.ndarray | None = None  # [C, S] m_i / m: prompt i's conditional wait over the pool's

    def take(self, idx: np.ndarray) -> PackedStep:
        """Candidates ``idx`` along the leading axis."""
        one = (self.step_len_s, self.pass_s, self.step_scv, self.full_step_s, self.wait_scale)
        return PackedStep(
            self.rate_rps[idx], self.v_s[idx], self.room[idx], self.ahead[idx], *(_rows(a, idx) for a in one)
        )

    def requests(self, mask: np.ndarray) -> PackedStep:
        """Sampled requests ``mask`` only."""
        one = (self.step_len_s, self.pass_s, self.step_scv, self.full_step_s, self.wait_scale)
        cols = (a[:, mask] if a is not None and a.ndim == 2 else a for a in one)
        return PackedStep(self.rate_rps, self.v_s, self.room[:, mask], self.ahead[:, mask], *cols)

    def cond_s(self, cond_s: np.ndarray) -> np.ndarray:
        """Prompt i's E[W | W > 0] [C, S] (or [C, 1]) from the pool's [C]: times ``wait_scale`` (its own
        passes, model.queueing.bulk_wait item 4) where given."""
        m = np.asarray(cond_s, dtype=float)
        m = m if m.ndim == 2 else m[:, None]
        if self.wait_scale is None:
            return m
        with np.errstate(invalid="ignore"):
            return np.where(np.isfinite(m), m * self.wait_scale, m)

    @property
    def _full(self) -> np.ndarray:
        """g_J [C] (0, no shift, when not given)."""
        return np.zeros(len(self.rate_rps)) if self.full_step_s is None else self.full_step_s

    def wait_slack(self, slack_s: np.ndarray) -> np.ndarray:
        """The wait [C, S] a waiting prompt may have within a TTFT slack (``slack_s`` = t - d): the slack
        less the prompts ahead of it in its step, then filled by :func:`packed_wait_s` with those that
        arrive behind it; negative where even W = 0+ misses."""
        ahead_s = self.v_s[:, None] * self.ahead
        behind = np.maximum(self.room - self.ahead, 0.0)
        return packed_wait_s(slack_s - ahead_s, self.rate_rps, self.v_s, behind)

    def waiting_cdf(self, slack_s: np.ndarray, cond_s: np.ndarray) -> np.ndarray:
        """P(W + E[v] min(K, J_i) <= y | W > 0) [C, S] at y = ``slack_s``, E[W | W > 0] = ``cond_s`` [C]:
        on one instance (``step_len_s`` > 0) the mixture of :meth:`unpassed_cdf` and the exponential
        law of a passed prompt, the first full step g_J (``full_step_s``) then an exponential, of mean m_p
        = E[L] / 2 + G in all (G = ``pass_s``), weighted w = (m - E[L] / 2) / G so that the mixture's mean
        is m (w = psi for Poisson arrivals; w = 1 and the unshifted exponential of mean m where the
        passes alone exceed G), module docstring "One instance"; else :meth:`exponential_cdf`."""
        m = self.cond_s(cond_s)  # [C, S] (or [C, 1])
        if self.step_len_s is None or not np.any(self.step_len_s > 0):
            return self.exponential_cdf(slack_s, m)
        half = np.minimum(0.5 * self.step_len_s[:, None], m)  # E[L] / 2, at most m (smooth arrivals shrink m)
        pass_s = self.pass_s if self.pass_s.ndim == 2 else self.pass_s[:, None]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            psi = np.clip(np.where(pass_s > 0, (m - half) / pass_s, 1.0), 0.0, 1.0)
            m_passed = np.where(psi < 1.0, half + pass_s, m)
        one = (self.step_len_s[:, None] > 0) & np.isfinite(m)
        shift = np.where(one & (psi < 1.0), self._full[:, None], 0.0)  # a passed prompt waits a full step
        y = np.asarray(slack_s, dtype=float)
        out = self.exponential_cdf(y - shift, np.maximum(np.where(one, m_passed, m) - shift, 0.0))
        rows = np.nonzero(one.any(axis=1))[0]
        y = np.broadcast_to(y, out.shape)
        half = np.broadcast_to(half, out.shape)
        psi = np.broadcast_to(psi, out.shape)
        unpassed = self.take(rows).unpassed_cdf(y[rows], 2.0 * half[rows])
        mixed = (1.0 - psi[rows]) * unpassed + psi[rows] * out[rows]
        out[rows] = np.where(np.broadcast_to(one, out.shape)[rows], mixed, out[rows])
        return out

    def unpassed_cdf(self, slack_s: np.ndarray, step_len_s: np.ndarray) -> np.ndarray:
        """P(R + E[v] min(K, J_i) <= y) [C, S] at y = ``slack_s`` for a prompt that waits on one instance
        and is not passed (module docstring, "One instance"): the step in progress L length-biased,
        gamma of mean ``step_len_s`` = E[S] (1 + c_S^2) and shape 1 / c_S^2 + 1 (``step_scv`` c_S^2; a
        gamma step's length-biased law), read at the conditional means of LENGTH_STRATA equal-probability
        strata; given L, R uniform
        on [0, L] and K ~ Poisson(lambda L) independent of R, summed over K < min(J_i, PACKED_TERMS) by
        the pmf recursion, the rest at the cap's room E[v] J_i (conservative, as :meth:`exponential_cdf`)."""
        lam = np.asarray(self.rate_rps, dtype=float)[:, None]
        v = np.asarray(self.v_s, dtype=float)[:, None]
        mean_l = np.asarray(step_len_s, dtype=float)
        mean_l = mean_l if mean_l.ndim == 2 else mean_l[:, None]  # [C, S] or [C, 1]
        scv = np.zeros(len(mean_l)) if self.step_scv is None else np.asarray(self.step_scv, dtype=float)
        y = np.asarray(slack_s, dtype=float)
        room = self.room
        top = min(int(room.max(initial=0.0)), PACKED_TERMS)
        out = np.zeros(np.broadcast_shapes(y.shape, room.shape))
        for frac in _strata_fracs(scv.tobytes()):
            big_l = np.maximum(
                np.where(scv[:, None] > 1e-6, mean_l * np.asarray(frac)[..., None], mean_l), 1e-300
            )
            if top == 0:  # no packed prompt: every count is at the cap (J_i = 0), the loop adds nothing
                out += np.clip((y - v * room) / big_l, 0.0, 1.0) / LENGTH_STRATA
                continue
            pmf = np.broadcast_to(np.exp(-lam * big_l), out.shape).copy()  # P(K = 0)
            mean_k = lam * big_l  # E[K | L]
            below = np.zeros(out.shape)  # P(K < min(k, J_i)) so far
            part = np.zeros(out.shape)
            for k in range(top):
                inside = k < room
                if not inside.any():
                    break
                term = pmf if inside.all() else np.where(inside, pmf, 0.0)
                part += term * np.clip((y - v * k) / big_l, 0.0, 1.0)
                below += term
                pmf = pmf * mean_k / (k + 1.0)
            part += np.maximum(1.0 - below, 0.0) * np.clip((y - v * room) / big_l, 0.0, 1.0)
            out += part / LENGTH_STRATA
        return np.where(y >= 0, np.clip(out, 0.0, 1.0), 0.0)

    def exponential_cdf(self, slack_s: np.ndarray, cond_s: np.ndarray) -> np.ndarray:
        """P(W + E[v] min(K, J_i) <= y | W > 0) [C, S] at y = ``slack_s`` (module docstring, "Packed
        step", the law of the count): W exponential of mean m = ``cond_s`` [C] (rate theta = 1 / m);
        the prompts ahead, geometric of ratio q = lambda m / (1 + lambda m) (model.queueing.bulk_wait,
        item 3), are the arrivals over the gap's age, independent of W, and those behind, N ~
        Poisson(lambda W), over its residual, so K = ahead + N and with theta' = theta + lambda,
        P(K = t, W <= w) = sum_b (1 - q) q^(t - b) (theta / theta') (lambda / theta')^b P(Gamma(b + 1,
        theta') <= w) = (1 - q)^2 q^t E[min(Poisson(theta' w), t + 1)] (lambda / theta' = q; the sum of
        regularized incomplete gammas is the truncated Poisson mean, x P(N <= t) + (t + 1) P(N >= t +
        2)); K >= J_i puts E[v] J_i on the step. Summed over t < PACKED_TERMS."""
        lam = np.asarray(self.rate_rps, dtype=float)[:, None]
        v = np.asarray(self.v_s, dtype=float)[:, None]
        m = np.asarray(cond_s, dtype=float)
        m = m if m.ndim == 2 else m[:, None]  # [C, S] (a per-prompt wait) or [C, 1]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            q = np.where(np.isfinite(m), lam * m / (1.0 + lam * m), 1.0)
            big = np.where(m > 0, (lam + 1.0 / m), np.inf)
        y = np.asarray(slack_s, dtype=float)
        room = self.room
        w_cap = np.maximum(y - v * room, 0.0)
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.where(m > 0, -np.expm1(-w_cap / m), 1.0)  # P(W <= y - E[v] J_i): K at the cap
        top = min(int(room.max(initial=0.0)), PACKED_TERMS)
        if top == 0:  # no packed prompt: the sum below is empty
            return np.where(y >= 0, np.clip(out, 0.0, 1.0), 0.0)
        # Every element takes every term, on whole arrays (no gathers): a term is exactly 0 where t >=
        # J_i (weight 0), where x_t = 0 (then x_c = 0 too: both means are 0) and where q = 0 (weight
        # 0). At m = 0 (theta' infinite) every term is 0 (out is 1 there): weight 0 and theta' set to 0,
        # so that no nan arises (at m = inf, q = 1: weight 0 again).
        finite = np.isfinite(big)
        big = np.where(finite, big, 0.0)
        x_c = big * w_cap  # the same Poisson mean for every t: its CDF by the pmf recursion
        pmf_c = np.exp(-x_c)
        cdf_c = pmf_c.copy()  # P(N <= t) at x_c, t = 0
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            head = (1.0 - q) ** 2
            for t in range(top):
                below = (t < room) & finite
                weight = np.where(below, head * q**t, 0.0)
                x_t = np.maximum(y - v * t, 0.0)
                x_t *= big
                pmf_c *= x_c
                pmf_c /= t + 1.0  # P(N = t + 1) at x_c
                term = _truncated_poisson_mean(x_t, t)
                term -= _min_mean(x_c, t, cdf_c, pmf_c)
                term *= weight
                out += term
                cdf_c += pmf_c
        return np.where(y >= 0, np.clip(out, 0.0, 1.0), 0.0)

    def waiting_floor(self, slack_s: np.ndarray, cond_s: np.ndarray) -> np.ndarray:
        """A lower bound on :meth:`waiting_cdf` [C, S]: P(W <= y - E[v] J_i), every count at the cap
        (min(K, J_i) <= J_i), W of the same law as :meth:`waiting_cdf`'s."""
        y = np.asarray(slack_s, dtype=float)
        return np.where(y >= 0, self._wait_cdf(y - self.most_s(), cond_s), 0.0)

    def waiting_ceiling(self, slack_s: np.ndarray, cond_s: np.ndarray) -> np.ndarray:
        """An upper bound on :meth:`waiting_cdf` [C, S]: P(W <= y), no prompt packed with it."""
        return self._wait_cdf(slack_s, cond_s)

    def _wait_cdf(self, w_s: np.ndarray, cond_s: np.ndarray) -> np.ndarray:
        """P(W <= w) [C, S] for the wait alone (0 for w < 0): exponential of mean ``cond_s`` on pools
        of several instances, the one-instance mixture of :meth:`waiting_cdf` (read with no room for
        packed prompts, so K adds nothing) where ``step_len_s`` > 0."""
        w = np.asarray(w_s, dtype=float)
        if self.step_len_s is None or not np.any(self.step_len_s > 0):
            return _exp_within(w, self.cond_s(cond_s), w)
        return replace(self, room=np.zeros_like(self.room)).waiting_cdf(w, cond_s)

    def most_s(self) -> np.ndarray:
        """[C, S] the most the packed prompts add to a TTFT: E[v] J_i."""
        return self.v_s[:, None] * self.room


@functools.lru_cache(maxsize=256)
def _strata_fracs(scv_bytes: bytes) -> tuple[np.ndarray, ...]:
    """E[L | stratum j] / E[L] [C] for the LENGTH_STRATA equal-probability strata of the length-biased
    gamma step of squared CV c_S^2 (``scv_bytes``: the float64 bytes of c_S^2 [C]; cached, as the
    goodput bisection asks again for the same candidates), shape 1 / c_S^2 + 1: E[L; stratum] =
    E[L] P(Gamma(shape + 1) in it), so the strata keep E[L] (:meth:`PackedStep.unpassed_cdf`)."""
    scv = np.frombuffer(scv_bytes, dtype=float)
    shape = 1.0 / np.maximum(scv, 1e-6) + 1.0
    edges = [gammaincinv(shape, j / LENGTH_STRATA) for j in range(LENGTH_STRATA)] + [np.inf]
    below_edge = [gammainc(shape + 1.0, u) for u in edges]
    fracs = tuple(LENGTH_STRATA * (below_edge[j + 1] - below_edge[j]) for j in range(LENGTH_STRATA))
    for f in fracs:
        f.setflags(write=False)
    return fracs


def _rows(a: np.ndarray | None, idx: np.ndarray) -> np.ndarray | None:
    """``a`` at candidates ``idx`` (None stays None)."""
    return None if a is None else a[idx]


def _exp_within(w_s: np.ndarray, cond_s: np.ndarray, slack_s: np.ndarray) -> np.ndarray:
    """P(W <= w) [C, S] for W exponential of mean ``cond_s`` [C] (1 at mean 0), 0 where the slack
    y = ``slack_s`` is negative (as :meth:`PackedStep.waiting_cdf`)."""
    m = np.asarray(cond_s, dtype=float)
    m = m if m.ndim == 2 else m[:, None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        within = np.where(m > 0, -np.expm1(-np.maximum(np.asarray(w_s, dtype=float), 0.0) / m), 1.0)
    return np.where(np.asarray(slack_s) >= 0, np.clip(within, 0.0, 1.0), 0.0)


def _truncated_poisson_mean(x: np.ndarray, t: int) -> np.ndarray:
    """E[min(N, t + 1)] for N ~ Poisson(x), t >= 0 whole: x P(N <= t) + (t + 1) P(N >= t + 2) (the
    identity of :func:`packed_wait_s`), with P(N <= t) = sum_{k <= t} p_k and P(N = t + 1) from the pmf
    recursion p_0 = e^-x, p_k = p_{k-1} x / k (Johnson, Kemp & Kotz, *Univariate Discrete
    Distributions*, 3rd ed., sec. 4.2: the Poisson CDF is the regularized upper incomplete gamma
    Q(t + 1, x), summed here in t + 2 array passes instead of one incomplete-gamma call per t; the
    two agree to a few units in the last place). x = inf gives nan."""
    pmf = np.exp(-x)
    cdf = pmf.copy()
    for k in range(1, t + 2):
        pmf *= x
        pmf /= k
        if k <= t:
            cdf += pmf
    return _min_mean(x, t, cdf, pmf)


def _min_mean(x: np.ndarray, t: int, cdf: np.ndarray, pmf: np.ndarray) -> np.ndarray:
    """E[min(N, t + 1)] = x P(N <= t) + (t + 1) (1 - P(N <= t) - P(N = t + 1)) for N ~ Poisson(x), from
    ``cdf`` = P(N <= t) and ``pmf`` = P(N = t + 1)."""
    return x * cdf + (t + 1.0) * (1.0 - cdf - pmf)
