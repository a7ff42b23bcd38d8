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

import numpy as np

from model.queueing.decode_spread import TpotSpread


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
