"""The session cache's footprint law (model.workload.sessions.history_hit_probability) and the
hit / miss split of the prefill service (history_split_cached_tokens), against hand-derived values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from model.workload.lengths import Fixed
from model.workload.presets import get_workload
from model.workload.sessions import (
    SessionShape,
    cached_implied_hit_rates,
    capacity_hit_rate,
    history_hit_probability,
    history_split_cached_tokens,
)


def _gamma_cdf(k: float, x: float, terms: int = 400) -> float:
    """Regularised lower incomplete gamma P(k, x) by its series x^k e^-x sum x^n / Gamma(k + n + 1)."""
    total, term = 0.0, 1.0 / math.gamma(k + 1.0)
    for n in range(terms):
        total += term
        term *= x / (k + n + 1.0)
    return total * x**k * math.exp(-x)


def test_footprint_of_single_turn_sessions_written_out():
    """One-turn sessions of a fixed 1,600-token prompt (no system prompt), a 16-token answer streamed
    at 0.03 s per token and no think time: every gap is G = 0.48 s, every turn is a session's last,
    so the histories referenced within G number Poisson(lambda G) = 4.8 at 10 req/s, each 1,600
    tokens: footprint mean 4.8 x 1,600 = 7,680, variance 4.8 x 1,600^2 (Campbell). The gamma with
    those moments has shape 4.8 and scale 1,600, so a cache of 8,000 tokens keeps a history with
    probability P(4.8, 8,000 / 1,600 = 5)."""
    shape = SessionShape(0, Fixed(1600), Fixed(1600), Fixed(16), 1.0, 0.0)
    s = float(history_hit_probability(shape, np.array([10.0]), np.array([8000.0]), False)[0])
    assert s == pytest.approx(_gamma_cdf(4.8, 5.0), rel=1e-9)
    assert 0.5 < s < 0.6  # P(4.8, 5) = 0.5494...
    # twice the cache: P(4.8, 10) = 0.976; no cache beyond the system prompt: 0; no load: 1
    s2 = float(history_hit_probability(shape, np.array([10.0]), np.array([16000.0]), False)[0])
    assert s2 == pytest.approx(_gamma_cdf(4.8, 10.0), rel=1e-9)
    assert 0.97 < s2 < 0.98
    assert float(history_hit_probability(shape, np.array([10.0]), np.array([0.0]), False)[0]) == 0.0
    assert float(history_hit_probability(shape, np.array([0.0]), np.array([8000.0]), False)[0]) == 1.0


def test_capacity_hit_rate_falls_with_load_on_the_agentic_prefill_pool():
    """Agentic sessions on a 400k-token prefill instance: at 3 req/s the live histories fit (the
    implied rate holds); by 5 req/s (live footprint ~ lambda x 6.5 s x 13.8k tokens = 450k) it falls
    towards what the simulator's LRU measured (0.956 / 0.928 / 0.891 at 3.0 / 4.5 / 5.0 req/s,
    docs/validation.md), never above the implied rate and never below the system prompt's share."""
    shape = get_workload("agentic").sessions
    imp = cached_implied_hit_rates(shape)
    h = [capacity_hit_rate(shape, r, 401056, imp.prefill_pool, False) for r in (3.0, 4.5, 5.0)]
    assert imp.prefill_pool - 0.02 < h[0] <= imp.prefill_pool
    assert h[0] > h[1] > h[2] > imp.system
    assert h[2] < imp.prefill_pool - 0.05


def test_history_split_is_a_whole_hit_or_miss_mixture_written_out():
    """Four prompts (5k, 10k, 20k, 40k tokens) of a shape with a 4,096-token system prompt, at the rate
    halfway between the system prompt's share and an implied 0.9: half the requests (ranks 1 and 3
    by length, evenly spread: 10k and 40k) keep only the system prompt's 4,096 tokens, the others
    floor(0.9 P). Uncached tokens 500 / 5,904 / 2,000 / 35,904: mean 11,077, second moment
    (500^2 + 5,904^2 + 2,000^2 + 35,904^2) / 4 = 332,051,108, where caching the same fraction of every
    prompt would leave each the same share."""
    shape = get_workload("agentic").sessions
    h_sys = cached_implied_hit_rates(shape).system
    p = np.array([5000.0, 10000.0, 20000.0, 40000.0])
    h = h_sys + 0.5 * (0.9 - h_sys)
    cached = history_split_cached_tokens(shape, p, h, 0.9)
    np.testing.assert_array_equal(cached, [4500.0, 4096.0, 18000.0, 4096.0])
    u = p - cached
    assert float(np.mean(u)) == 11077.0
    assert float(np.mean(u * u)) == 332051108.0
    # at the implied rate nothing misses: the uniform fraction of every prompt
    np.testing.assert_array_equal(history_split_cached_tokens(shape, p, 0.9, 0.9), np.floor(0.9 * p))
