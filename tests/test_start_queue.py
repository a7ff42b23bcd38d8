"""The prompts queued at a chunked request's first token (model.queueing.start_queue, session 14, chov14):
hand-derived values of Q's moments, the start coverage a_D and c, and the gain kappa."""

from __future__ import annotations

import numpy as np
import pytest

from model.queueing.start_queue import _read, start_coverage, start_queue_gain, start_queue_moments


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
    # 256 outputs of 5 and 256 of 21: the OTHER_POINTS midpoint quantiles are half 5, half 21, so
    # G(v) = E[min(O', v)] = v up to 5, (5 + v) / 2 up to 21, 13 past it; H = int G.
    out = np.array([5.0] * 256 + [21.0] * 256)
    table = start_coverage(out)
    g, h = _read(table, np.array([3.0, 10.0, 20.0, 30.0]))
    assert g == pytest.approx([3.0, 7.5, 12.5, 13.0])
    # H(3) = 4.5; H(10) = 12.5 + int_5^10 (5 + v) / 2 = 43.75; H(20) = 143.75 (c at T = 20: 143.75 / 400
    # = 0.359375 = E[min(U, O')] / T); H(21) = 143.75 + 12.75; H(30) = H(21) + 9 * 13 = 156.5 + 117
    assert h == pytest.approx([4.5, 43.75, 143.75, 156.5 + 117.0])


ARRIVALS = (np.array([0.01]), np.array([0.05]))  # per decode-only / mixed iteration


def test_gain_by_hand() -> None:
    # Var[Q] 0.3, p = 2 iterations, e = 1, E[F] 0.05, equal outputs 101 (T = n = 100): x = 0.02,
    # b = 0.0198, a_F = 0.02, mu = 100 (0.0025 + 0.0095) = 1.2; the join after d = 2 tokens:
    # a_D = min(101, 98) / 100 = 0.98, c_p = 98^2 / 2 / 100^2 = 0.4802, c = 1/2;
    # factor = (0.4802 + 0.3 * 0.02 * 0.98 / (0.0198 * 1.2)) / 0.5 = (0.4802 + 0.247475) / 0.5
    k = start_queue_gain(
        np.array([0.3]), np.array([2.0]), ARRIVALS, np.ones(1), np.array([[0.05]]), np.array([101.0])
    )
    assert k[0, 0] == pytest.approx((0.4802 + 0.3 * 0.02 * 0.98 / (0.0198 * 1.2)) / 0.5)
    assert k[0, 0] == pytest.approx(1.4553494949)


def test_gain_waits_for_the_queued_prefill() -> None:
    # the 5 / 21 sample; request O = 21 (T = 20), p = 10, e = 1: n = 20, x = 1/2, b = 0.375, a_F = 0.5,
    # joins after d = 10 tokens: a_D = G(10) / 20 = 0.375, c_p = H(10) / 400 = 0.109375, c = 0.359375;
    # mu = 20 * 0.012 = 0.24: queued term 0.3 * 0.5 * 0.375 / (0.375 * 0.24) = 0.625
    out = np.array([5.0] * 256 + [21.0] * 256)
    mean = np.full((1, len(out)), 0.05)
    k = start_queue_gain(np.array([0.3]), np.array([10.0]), ARRIVALS, np.ones(1), mean, out)
    assert k[0, -1] == pytest.approx((0.109375 + 0.625) / 0.359375)
    # request O = 5 (T = n = 4 < p): every prompt's prefill outlasts the window, none joins it: 0
    assert k[0, 0] == pytest.approx(0.0)
    # two tokens per iteration (e = 2), p = 2: n = 10, d = 4 tokens: a_D = G(16) / 20 = 0.525,
    # c_p = H(16) / 400 = 97.75 / 400; x = 0.2, b = 0.18, a_F = 0.2, mu = 10 * 0.012 = 0.12
    k2 = start_queue_gain(np.array([0.3]), np.array([2.0]), ARRIVALS, np.full(1, 2.0), mean, out)
    assert k2[0, -1] == pytest.approx((97.75 / 400 + 0.3 * 0.2 * 0.525 / (0.18 * 0.12)) / 0.359375)


def test_gain_without_queue_is_the_delay_alone() -> None:
    # Var[Q] = 0 (or no arrivals): c_p / c = 0.4802 / 0.5 (equal outputs 101, d = 2 tokens)
    k = start_queue_gain(
        np.array([0.0, 0.3]),
        np.array([2.0, 2.0]),
        (np.array([0.01, 0.0]), np.array([0.05, 0.0])),
        np.ones(2),
        np.zeros((2, 1)),
        np.array([101.0]),
    )
    assert k[:, 0] == pytest.approx([0.9604, 0.9604])
