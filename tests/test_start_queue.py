"""The prompts queued at a chunked request's first token (model.queueing.start_queue, session 14, chov14):
hand-derived values of Q's moments, the start coverage a_D and c, and the gain kappa."""

from __future__ import annotations

import numpy as np
import pytest

from model.queueing.start_queue import start_coverage, start_queue_gain, start_queue_moments


def test_queue_moments_by_hand() -> None:
    # lambda 2 /s; W = 0 w.p. 1/2 else exponential of mean 0.1 s: E[W] = 0.05, Var[W] = 0.5 * 0.01 * 1.5
    # = 0.0075; S: E 0.05 s, E[S^2] 0.004, Var 0.0015. E[Q] = 2 * 0.1 = 0.2; Var[Q] = 0.2 + 4 * 0.009 = 0.236
    mean, var = start_queue_moments(
        np.array([2.0]), np.array([0.5]), np.array([0.1]), (np.array([0.05]), np.array([0.004]))
    )
    assert mean[0] == pytest.approx(0.2)
    assert var[0] == pytest.approx(0.236)


def test_queue_moments_without_arrivals_or_wait() -> None:
    # no arrivals: no queue; deterministic S and no wait: Poisson, Var = E = lambda E[S] = 0.3
    mean, var = start_queue_moments(
        np.array([0.0, 3.0]),
        np.array([0.0, 0.0]),
        np.array([np.inf, 0.0]),
        (np.full(2, 0.1), np.full(2, 0.01)),
    )
    assert mean == pytest.approx([0.0, 0.3])
    assert var == pytest.approx([0.0, 0.3])


def test_start_coverage_by_hand() -> None:
    # 256 outputs of 5 and 256 of 21: the OTHER_POINTS midpoint quantiles are half 5, half 21.
    out = np.array([5.0] * 256 + [21.0] * 256)
    a_d, c = start_coverage(out)
    # O = 21 (T = 20): a_D = (5 / 20 + 1) / 2 = 0.625; c = (5/20 - 25/800 + 1/2) / 2 = 0.359375
    assert a_d[-1] == pytest.approx(0.625)
    assert c[-1] == pytest.approx(0.359375)
    # O = 5 (T = 4): every other outlives the window: a_D = 1, c = 1/2
    assert a_d[0] == pytest.approx(1.0)
    assert c[0] == pytest.approx(0.5)


def test_gain_by_hand() -> None:
    # Var[Q] 0.3, p = 2 iterations, arrivals 0.01 / 0.05 per decode-only / mixed iteration, n = 100,
    # E[F] 0.05, a_D 1, c 1/2: x = 0.02, b = 0.0198, a_F = 0.02, mu = 100 (0.0025 + 0.0095) = 1.2;
    # kappa = 0.3 * 0.02 / (0.5 * 0.0198 * 1.2) = 0.505050...
    k = start_queue_gain(
        np.array([0.3]),
        np.array([2.0]),
        (np.array([0.01]), np.array([0.05])),
        np.array([[100.0]]),
        np.array([[0.05]]),
        (np.array([1.0]), np.array([0.5])),
    )
    assert k[0, 0] == pytest.approx(0.3 * 0.02 / (0.5 * 0.0198 * 1.2))
    assert k[0, 0] == pytest.approx(0.50505050505)
    # long equal outputs: kappa -> 2 Var[Q] / mu (b -> a_F, c = 1/2, a_D = 1)
    k_long = start_queue_gain(
        np.array([0.3]),
        np.array([2.0]),
        (np.array([0.01]), np.array([0.05])),
        np.array([[1e6]]),
        np.array([[0.05]]),
        (np.array([1.0]), np.array([0.5])),
    )
    assert k_long[0, 0] == pytest.approx(2 * 0.3 / (1e6 * 0.012), rel=1e-5)


def test_gain_zero_without_queue_or_arrivals() -> None:
    k = start_queue_gain(
        np.array([0.0, 0.3]),
        np.array([2.0, 2.0]),
        (np.array([0.01, 0.0]), np.array([0.05, 0.0])),
        np.full((2, 1), 100.0),
        np.zeros((2, 1)),
        (np.array([1.0]), np.array([0.5])),
    )
    assert k[:, 0] == pytest.approx([0.0, 0.0])
