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

import numpy as np


def plain_decode_s(base_per_token_s: np.ndarray, out_tokens: np.ndarray) -> np.ndarray:
    """[C, S] plain decode time of each sampled request: (O_i - 1) x the per-token base E_q[tau]
    (``base_per_token_s`` [C], decode_spread.TpotSpread.mean_s with the cohort), 0 for O_i = 1."""
    base = np.asarray(base_per_token_s, dtype=float)[:, None]
    gaps = np.maximum(np.asarray(out_tokens, dtype=float) - 1.0, 0.0)[None, :]
    return base * gaps
