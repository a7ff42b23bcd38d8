"""Mixture-of-experts routing: how many distinct experts a batch of tokens touches."""

from __future__ import annotations

import numpy as np

from model.errors import InputError


def expected_experts_touched(
    num_experts: int, experts_per_token: int, tokens: float | np.ndarray
) -> np.ndarray:
    """Expected number of distinct routed experts that ``tokens`` tokens activate in one MoE layer.

    E_touched = E x (1 - (1 - k/E)^T), assuming uniform, independent routing: each token picks k
    distinct experts of E, so one expert is missed by a token with probability 1 - k/E and by all
    T tokens with probability (1 - k/E)^T; linearity of expectation sums over the E experts (the
    occupancy problem, Feller, "An Introduction to Probability Theory and Its Applications",
    vol. 1, ch. II: occupancy of cells). T = 1 gives k; T -> infinity gives E. Real routers are
    skewed, so this is an upper bound on the distinct experts a batch reads (skew concentrates
    tokens on fewer experts).
    """
    if num_experts < 1 or not (1 <= experts_per_token <= num_experts):
        raise InputError("experts_per_token", experts_per_token, f"1..num_experts ({num_experts})")
    t = np.asarray(tokens, dtype=float)
    if np.any(t < 0) or not np.all(np.isfinite(t)):
        raise InputError("tokens", tokens, "finite numbers >= 0")
    miss = 1.0 - experts_per_token / num_experts
    return num_experts * (1.0 - np.power(miss, t))
