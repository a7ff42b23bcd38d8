"""The joiners' covariance on a prefill-first replica (issue 17, session 14, col1_14): derived and
tested, NOT wired into the planner (docs/session14/col1_14.md, "Screen": entered through the base's
shrink it widens the no-stall term too and pushes light-load and TEP cells out of the band; the
placement per stall is the follow-on).

The prompts that stall a request then join its batch: Cov_A(x, S) = lambda_p tau tau' k E[N B] K(T)
(Campbell's theorem), read by model.serving.decode_exposure.amplified_spread's ``token_covariance_s2``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from model.queueing.decode_batch import interp_rows
from model.queueing.decode_spread import elasticity
from model.serving.decode_exposure import stall_gain


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
