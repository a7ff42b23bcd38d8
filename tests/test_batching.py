"""Tests for model.batching: the decode-pool Little's-law fixed point, the KV cap and the admission queue."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.batching import decode_pool
from model.errors import InputError
from model.queueing import mgc_wait


def affine(b: np.ndarray) -> np.ndarray:
    """s(B) = 20 ms + 0.1 ms per sequence."""
    return 0.02 + 1e-4 * b


def test_affine_fixed_point_by_hand():
    # B = lambda L (s0 + k B)  =>  B = lambda L s0 / (1 - lambda L k).
    # lambda = 5/s, L = 200: demand 1000 tok/s, B = 20 / (1 - 0.1) = 22.222..., TPOT = 0.0222... s.
    # lambda = 20/s: demand 4000, B = 80 / 0.6 = 133.33, TPOT = 0.03333 s.
    r = decode_pool(np.array([0.0, 5.0, 20.0]), 200, affine, 256, scv_output_tokens=0.6)
    np.testing.assert_allclose(r.batch_size, [0.0, 200 / 9, 400 / 3], rtol=1e-9)
    np.testing.assert_allclose(r.tpot_s, [0.02, 0.02 + 1e-4 * 200 / 9, 0.02 + 1e-4 * 400 / 3], rtol=1e-9)
    np.testing.assert_allclose(r.tokens_per_s, [0.0, 1000.0, 4000.0])
    np.testing.assert_allclose(r.cap_utilisation, r.batch_size / 256)
    np.testing.assert_allclose(r.residence_s, 200 * r.step_time_s)
    assert r.stable.all()


def test_littles_law_holds():
    rates = np.linspace(0.1, 27.0, 40)
    r = decode_pool(rates, 200, affine, 256)
    np.testing.assert_allclose(r.batch_size, rates * r.residence_s, rtol=1e-9)


def test_cap_and_admission_queue():
    # cap 256: s(256) = 0.0456 s, throughput limit 256 / 0.0456 = 5614.0 tok/s = 28.07 req/s at L = 200.
    r = decode_pool(np.array([28.0, 28.2, 40.0]), 200, affine, 256, scv_output_tokens=0.6)
    assert r.stable.tolist() == [True, False, False]
    assert r.batch_size[1:].tolist() == [256.0, 256.0]
    np.testing.assert_allclose(r.tokens_per_s[1:], 256 / 0.0456)
    assert np.all(np.isinf(r.admission.mean_wait_s[1:]))
    # admission = M/G/c on the 256 slots with service L s(cap) = 9.12 s, SCV 0.6
    ref = mgc_wait(28.0, 200 * 0.0456, 0.6, 256)
    np.testing.assert_allclose(r.admission.mean_wait_s[0], ref.mean_wait_s)
    assert r.admission.mean_wait_s[0] > 0


def test_vectorised_over_output_lengths():
    r = decode_pool(np.array([[1.0], [10.0]]), np.array([50.0, 500.0]), affine, 1024)
    assert r.batch_size.shape == (2, 2)
    # demand 10 * 500 = 5000 tok/s: B = 100 / (1 - 0.5) = 200
    assert r.batch_size[1, 1] == pytest.approx(200.0)


def test_least_fixed_point_with_a_step_in_step_time():
    # step time jumps at B = 64 (say a kernel tile change); throughput B/s(B) still rises.
    def stepped(b):
        return np.where(b < 64, 0.01, 0.02) + 1e-5 * b

    r = decode_pool(3.0, 100, stepped, 512)
    # below 64: B = 300 (0.01 + 1e-5 B) => B = 3 / 0.997 = 3.009
    assert float(r.batch_size) == pytest.approx(3 / 0.997, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(0.0, 27.9), out=st.floats(20, 400))
def test_batch_monotone_in_demand(rate, out):
    r = decode_pool(np.array([rate, rate * 1.01 + 1e-3]), out, affine, 100_000)
    assert r.batch_size[0] <= r.batch_size[1]


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"rate_rps": -1.0}, "rate_rps"),
        ({"mean_output_tokens": 0.0}, "mean_output_tokens"),
        ({"max_batch": 0}, "max_batch"),
        ({"step_time_s": lambda b: 0.05 - 1e-4 * b}, "step_time_s"),
        ({"step_time_s": lambda b: 0.0 * b}, "step_time_s"),
        ({"step_time_s": 0.02}, "step_time_s"),
    ],
)
def test_bad_input(kwargs, field):
    args = {"rate_rps": 1.0, "mean_output_tokens": 100.0, "step_time_s": affine, "max_batch": 64} | kwargs
    with pytest.raises(InputError) as err:
        decode_pool(**args)
    assert err.value.field == field
