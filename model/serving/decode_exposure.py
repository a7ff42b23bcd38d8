"""A prefill-first request's plain decode time, the window its stalls arrive in (issue 17, col1_14).

The prompts that stall a running request on a prefill-first replica are those that reach its replica
while it decodes: Poisson at lambda_r per second of its plain decode time (PASTA, Wolff 1982), each
opening a busy-period cluster (model.queueing.latency). Its plain decode time is the sum of its own
O - 1 decode steps, each at the batch the request is in when it is taken. Derived here
(docs/session14/col1_14.md): a request's tokens see the batch size-biased, q(n) ~ n p(n) / tau(n)
(the per-token law of model.queueing.decode_spread: n sequences each emit one token per step of
tau(n)), with the decode cohort (the prompts that reached the replica during its wait and packed
step join its batch together when the prefill-first run ends: model.queueing.colocated_base
.cohort_mean) on top, so its mean plain decode time is (O - 1) E_q[tau] (renewal-reward: Ross,
"Introduction to Probability Models", sec. 7.4), the latency model's base, and not (O - 1) tau(E[n])
at the time-average batch. tau rising in n makes the two differ (Jensen), most where the batch is
large and the per-sequence slope of the step is steep.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from model.queueing.decode_batch import interp_rows
from model.queueing.decode_spread import TpotSpread, elasticity


def plain_decode_s(base_per_token_s: np.ndarray, out_tokens: np.ndarray) -> np.ndarray:
    """[C, S] plain decode time of each sampled request: (O_i - 1) x the per-token base E_q[tau]
    (``base_per_token_s`` [C], decode_spread.TpotSpread.mean_s with the cohort), 0 for O_i = 1."""
    base = np.asarray(base_per_token_s, dtype=float)[:, None]
    gaps = np.maximum(np.asarray(out_tokens, dtype=float) - 1.0, 0.0)[None, :]
    return base * gaps


def stall_gain(decode_stall_s: np.ndarray, decode_s: np.ndarray) -> np.ndarray:
    """[C, S] r = E[stall total from the decode window] / plain decode time: the stall seconds each
    second of plain decode draws (lambda_r per_event E[s] / (1 - rho) with the router's exposure: the
    busy period started by work x has mean x rho / (1 - rho), Takacs 1962, ch. 2). 0 where the
    window is empty."""
    x = np.asarray(decode_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, np.asarray(decode_stall_s, dtype=float) / np.where(x > 0, x, 1.0), 0.0)


def overlap_kernel(out_tokens: np.ndarray) -> np.ndarray:
    """[S] K(T_i) = int_0^T_i E[min(D', y)] dy = E[T m - m^2 / 2], m = min(T_i, D'), T_i = O_i - 1 and D'
    = O' - 1 over the sample (token-steps^2): the joiners' overlap with request i's remaining decode,
    integrated over the join point y (y tokens of i left when one joins; it adds to i's batch for
    min(D', y) of them). Exact on the sample (an O(S^2) sum, S the sampled requests; once per sample)."""
    return _kernel(np.ascontiguousarray(out_tokens, dtype=float).tobytes())


@lru_cache(maxsize=64)
def _kernel(output_bytes: bytes) -> np.ndarray:
    """:func:`overlap_kernel` of the sample in ``output_bytes`` (float64), read-only."""
    gaps = np.maximum(np.frombuffer(output_bytes, dtype=float) - 1.0, 0.0)
    m = np.minimum(gaps[:, None], gaps[None, :])  # [i, j]
    out = (gaps[:, None] * m - 0.5 * m * m).mean(axis=1)
    out.flags.writeable = False
    return out


def cluster_joint_moment(m1_s: np.ndarray, m2_s2: np.ndarray, load: np.ndarray) -> np.ndarray:
    """[C] E[N B] of one stall cluster: N its stalls, B its time, a busy period of stalls of moments
    m1, m2 at load rho: E[N B] = m1 / (1 - rho)^2 + rho m2 / (m1 (1 - rho)^3).

    Derived here (docs/session14/col1_14.md) from the busy period's first-step decomposition (Takacs
    1962, ch. 2): B = s + sum_j B_j, N = 1 + sum_j N_j over the A ~ Poisson(lambda s) arrivals during
    the first stall s, so E[NB](1 - rho) = E[s] + rho E[B] + lambda E[s^2] E[N] + lambda^2 E[s^2] E[N]
    E[B] with E[N] = 1 / (1 - rho), E[B] = m1 / (1 - rho), lambda = rho / m1; deterministic s gives
    s / (1 - rho)^3 = s E[N^2] (check)."""
    rho = np.clip(np.asarray(load, dtype=float), 0.0, 0.95)
    m1 = np.asarray(m1_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        extra = np.where(m1 > 0, rho * np.asarray(m2_s2, dtype=float) / np.where(m1 > 0, m1, 1.0), 0.0)
    return m1 / (1.0 - rho) ** 2 + extra / (1.0 - rho) ** 3


def joiner_covariance_s2(
    primary_rate: np.ndarray,
    per_token_s: np.ndarray,
    slope_s: np.ndarray,
    joiners_per_stall: np.ndarray,
    joint: np.ndarray,
    kernel: np.ndarray,
) -> np.ndarray:
    """[C, S] Cov(x, S) carried by the prompts that stall a request and then join its batch.

    Derived here (docs/session14/col1_14.md): on a prefill-first replica each primary stall (rate
    ``primary_rate`` lambda_p [C, S] per second of plain decode) opens a cluster of N stalls of total
    time B, whose k N prompts (``joiners_per_stall`` k [C]) then decode beside the request, each
    adding ``slope_s`` tau' [C] (d tau / d n at the mean batch) to every step of its that they overlap.
    A marked Poisson process has Cov(sum f, sum g) = lambda int E[f g] du (Campbell's theorem, Kingman
    1993, sec. 3.2), so with du = tau dy (``per_token_s`` tau [C], the plain step) Cov(x, S) =
    lambda_p tau tau' k E[N B] K(T) (``joint`` E[N B] [C]: :func:`cluster_joint_moment`; ``kernel`` K [S]:
    :func:`overlap_kernel`)."""
    scale = (
        np.asarray(per_token_s, dtype=float)
        * np.asarray(slope_s, dtype=float)
        * np.asarray(joiners_per_stall, dtype=float)
        * np.asarray(joint, dtype=float)
    )
    return np.asarray(primary_rate, dtype=float) * scale[:, None] * np.asarray(kernel, dtype=float)[None, :]


def amplified_spread(
    spread: TpotSpread, gain: np.ndarray, token_covariance_s2: np.ndarray | None = None
) -> TpotSpread:
    """The base's fluctuation as TPOT sees it on a prefill-first replica: its shrink s scaled to
    s sqrt((1 + r)^2 + 2 Cov_A / (T^2 s^2 Var[D])).

    Derived here (docs/session14/col1_14.md): the request's plain decode time is x = T (b + s D)
    (T = O - 1; decode_spread: D the per-token deviation, s its shrink), and the stalls are a busy
    period started by work x (model.queueing.latency), of conditional mean r x with r = :func:`stall_gain`.
    So TPOT = (x + S) / T = b (1 + r) + s D (1 + r) + (S - r x) / T: a slow window (a large batch) also
    draws more stalls, and the deviation enters TPOT 1 + r times; the prompts that stall the request
    and then join its batch add Cov_A (:func:`joiner_covariance_s2`), 2 Cov_A / T^2 to the variance
    (``token_covariance_s2`` [C, S] = Cov_A / T^2). The latency model keeps the stalls' count at the
    mean window and takes base and stalls independent, so both come in through the shrink (moment
    matching: the sum's first two moments exact, the shape of D kept). No spread variance: 1 + r."""
    factor = 1.0 + np.maximum(np.asarray(gain, dtype=float), 0.0)
    if token_covariance_s2 is not None:
        cov = np.maximum(np.asarray(token_covariance_s2, dtype=float), 0.0)
        base_var = spread.shrink**2 * spread.variance_s2()[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(base_var > 0, 2.0 * cov / np.where(base_var > 0, base_var, 1.0), 0.0)
        factor = np.sqrt(factor**2 + ratio)
    # the spread's table and its shortcuts assume shrink <= 1: the candidate's support D scales by the
    # largest factor F_c, each request's shrink by factor / F_c (the products shrink x D as above)
    top = np.maximum(factor.max(axis=1), 1.0)
    rel = factor / top[:, None]
    return replace(
        spread,
        dev_s=spread.dev_s * top[:, None],
        step_s=spread.step_s * top,
        shrink=spread.shrink * rel,
        inv_shrink=spread.inv_shrink / rel,
    )


def batch_stall_terms(
    window: tuple[np.ndarray, np.ndarray, np.ndarray],
    stalls_s: np.ndarray,
    prompts_per_stall: np.ndarray,
    decode: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    out_tokens: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(gain r [C, S], Cov_A / T^2 [C, S]) for :func:`amplified_spread` on prefill-first candidates.

    ``window``: (the decode window's mean stall count [C, S] (model.queueing.stall_count.stall_events
    over it, clusters included), the plain decode time x [C, S], the clusters' load rho [C]);
    ``stalls_s`` [C, K] the stall sizes; ``prompts_per_stall`` k [C]; ``decode``: (mean batch [C],
    batch grid [G], decode step per token on it [C, G], plain per-token step tau [C]). The slope tau'
    is eps tau(b) / b with eps decode_spread.elasticity (the same secant the batch's relaxation uses)."""
    events, x, load = window
    m1, m2 = stalls_s.mean(axis=1), (stalls_s**2).mean(axis=1)
    gain = stall_gain(events * m1[:, None], x)
    batch, grid, per_token, tau = decode
    b = np.asarray(batch, dtype=float)
    t_b = interp_rows(b, grid, per_token)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(b > 0, elasticity(b, grid, per_token) * t_b / np.where(b > 0, b, 1.0), 0.0)
    rho = np.clip(np.asarray(load, dtype=float), 0.0, 0.95)
    primary = stall_gain(events, x) * (1.0 - rho)[:, None]
    joint = cluster_joint_moment(m1, m2, rho)
    cov = joiner_covariance_s2(primary, tau, slope, prompts_per_stall, joint, overlap_kernel(out_tokens))
    gaps = np.maximum(np.asarray(out_tokens, dtype=float) - 1.0, 1.0)[None, :]
    return gain, cov / gaps**2
