"""The join residual of a disaggregated decode instance (model.queueing.latency, "Join residual").

A request whose KV lands while an iteration is in flight joins at the next iteration boundary, so
its first token gap holds the residual R of that iteration: TPOT = b + R / (O - 1), R = 0 with
probability 1 - u, else uniform on [0, tau] (read at JOIN_STRATA = 8 midpoints). Values below are
derived by hand for b = 10 ms, tau = 10 ms, u = 0.5.
"""

from __future__ import annotations

import numpy as np
import pytest

from model.queueing.disaggregated_terms import JOIN_STRATA
from model.queueing.latency import LatencyModel


def _model(outputs: list[float], busy: float | None = 0.5) -> LatencyModel:
    s = len(outputs)
    return LatencyModel(
        wait_prob=np.array([0.0]),
        wait_cond_mean_s=np.array([0.0]),
        fixed_s=np.full((1, s), 0.1),
        tpot_base_s=np.array([0.010]),
        stall_events=np.zeros((1, s)),
        stall_sizes_s=np.zeros((1, 1)),
        output_tokens=np.array(outputs),
        stable=np.array([True]),
        join_busy=None if busy is None else np.array([busy]),
        join_step_s=None if busy is None else np.array([0.010]),
    )


def test_join_residual_cdf_by_hand() -> None:
    assert JOIN_STRATA == 8
    lat = _model([3.0])  # 2 gaps: R / 2 uniform on [0, 5 ms], midpoints 0.3125, 0.9375, ... 4.6875 ms
    cdf = lambda x: float(lat.tpot_cdf(np.array([[x]]))[0, 0])  # noqa: E731
    assert cdf(0.00999) == 0.0  # below the step: nobody
    assert cdf(0.010) == pytest.approx(0.5)  # the idle half (R = 0) only
    # excess 2.6 ms: 4 of the 8 midpoints (0.3125, 0.9375, 1.5625, 2.1875 ms) -> 0.5 + 0.5 x 4/8
    assert cdf(0.0126) == pytest.approx(0.75)
    assert cdf(0.0150) == pytest.approx(1.0)
    # p90: 0.5 + 0.5 k / 8 >= 0.9 needs k = 7 midpoints, the 7th at 6.5 / 8 x 5 ms = 4.0625 ms
    _, tpot = lat.percentiles_s((0.9,))
    assert tpot[0] == pytest.approx(0.0140625, abs=1e-9)


def test_join_residual_mean_and_long_outputs() -> None:
    # E[TPOT] = b + u tau / 2 / (O - 1): 10 + 0.5 x 10 / 2 / 2 = 11.25 ms (O = 3) and 10.0025 ms (O = 1001)
    lat = _model([3.0, 1001.0])
    assert float(lat.mean_tpot_s()[0]) == pytest.approx((0.01125 + 0.0100025) / 2)
    # a 1000-gap request absorbs the whole residual: its TPOT is within tau / 1000 of the step
    long = lat.requests(np.array([False, True]))
    assert float(long.tpot_cdf(np.array([[0.01001]]))[0, 0]) == pytest.approx(1.0)
    # without a join term the law is the step alone (the colocated styles, and the model before)
    plain = _model([3.0], busy=None)
    assert float(plain.tpot_cdf(np.array([[0.010]]))[0, 0]) == 1.0
    assert float(plain.mean_tpot_s()[0]) == pytest.approx(0.010)


def test_join_residual_scales_with_busy_fraction() -> None:
    # u = 1: every request meets a busy iteration; at excess 2.6 ms, 4/8 of them are within it
    lat = _model([3.0], busy=1.0)
    assert float(lat.tpot_cdf(np.array([[0.0126]]))[0, 0]) == pytest.approx(0.5)
    lat0 = _model([3.0], busy=0.0)
    assert float(lat0.tpot_cdf(np.array([[0.010]]))[0, 0]) == pytest.approx(1.0)
