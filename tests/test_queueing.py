"""Tests for model.queueing: exact cases by hand, stability, bad input, and approximations vs simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.errors import InputError, UnstableError
from model.queueing.mgc import (
    cosmetatos_md_factor,
    erlang_b,
    erlang_c,
    md1_wait,
    mg1_wait,
    mgc_wait,
    mmc_wait,
)
from tests.mgc_sim import det_sampler, exp_sampler, lognormal_sampler, simulate_mgc


def erlang_b_recursive(c: int, a: float) -> float:
    """Oracle: B(0) = 1, B(k) = a B(k-1) / (k + a B(k-1)) (Jagerman 1974), a loop in plain Python."""
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return b


def erlang_c_recursive(c: int, a: float) -> float:
    b = erlang_b_recursive(c, a)
    rho = a / c
    return b / (1 - rho * (1 - b))


# ---------------------------------------------------------------------------------------------- Erlang


def test_erlang_c_hand_values():
    # c=1: C = rho. c=2, a=1: B = (1/2)/(1+1+1/2) = 0.2, C = 0.2/(1-0.5*0.8) = 1/3.
    # c=3, a=2: B = (8/6)/(1+2+2+8/6) = 4/19, C = (4/19)/(1-(2/3)(15/19)) = 4/9.
    got = erlang_c([1, 2, 3], [0.5, 1.0, 2.0])
    np.testing.assert_allclose(got, [0.5, 1 / 3, 4 / 9], rtol=1e-12)
    np.testing.assert_allclose(erlang_b(3, 2.0), 4 / 19, rtol=1e-12)


@pytest.mark.parametrize(
    "c,rho",
    [
        (1, 0.5),
        (5, 0.3),
        (50, 0.9),
        (500, 0.99),
        (2000, 0.999),
        (10_000, 0.9999),
        (10_000, 1 - 1e-7),
        (10_000, 0.5),
    ],
)
def test_erlang_c_matches_recursion_large_c(c, rho):
    a = rho * c
    np.testing.assert_allclose(erlang_c(c, a), erlang_c_recursive(c, a), rtol=1e-9)


def test_erlang_c_edges():
    assert erlang_c(4, 0.0) == 0.0
    assert erlang_c(4, 4.0) == 1.0  # saturated: everybody waits
    assert erlang_c(4, 9.0) == 1.0
    assert not np.any(np.isnan(erlang_c(np.arange(1, 10_001), 0.999 * np.arange(1, 10_001))))


@settings(max_examples=60, deadline=None)
@given(c=st.integers(1, 3000), rho=st.floats(0.0, 0.99999))
def test_erlang_c_is_a_probability_above_erlang_b(c, rho):
    pw = float(erlang_c(c, rho * c))
    pb = float(erlang_b(c, rho * c))
    assert 0.0 <= pb <= pw <= 1.0


# ---------------------------------------------------------------------------------------------- exact cases


def test_mm1_by_hand():
    # M/M/1, rho = 0.5, E[S] = 1: W = rho/(mu - lambda) = 0.5/0.5 = 1; P(W>t) = 0.5 exp(-0.5 t).
    r = mmc_wait(0.5, 1.0, 1)
    assert float(r.mean_wait_s) == pytest.approx(1.0)
    assert float(r.prob_wait) == pytest.approx(0.5)
    assert float(r.p50_wait_s) == 0.0  # P(W>0) = 0.5 <= 0.5
    assert float(r.p90_wait_s) == pytest.approx(math.log(0.5 / 0.1) / 0.5)
    assert float(r.p99_wait_s) == pytest.approx(math.log(0.5 / 0.01) / 0.5)
    assert float(r.prob_wait_exceeds(2.0)) == pytest.approx(0.5 * math.exp(-1.0))
    assert float(r.mean_sojourn_s) == pytest.approx(2.0)


def test_mm2_by_hand():
    # M/M/2, a = 1 (rho = 0.5), E[S] = 2 s: C = 1/3, c mu - lambda = 2/2 - 0.5 = 0.5 /s,
    # W = (1/3)/0.5 = 2/3 s, p90 = ln((1/3)/0.1)/0.5.
    r = mmc_wait(0.5, 2.0, 2)
    assert float(r.mean_wait_s) == pytest.approx(2 / 3)
    assert float(r.p90_wait_s) == pytest.approx(math.log(10 / 3) / 0.5)
    assert float(r.quantile_wait_s(0.95)) == pytest.approx(math.log((1 / 3) / 0.05) / 0.5)


def test_md1_and_mg1_by_hand():
    # M/D/1, rho = 0.5, D = 2 s: W = rho D / (2(1-rho)) = 1 s.
    assert float(md1_wait(0.25, 2.0).mean_wait_s) == pytest.approx(1.0)
    # M/G/1, rho = 0.8, E[S] = 1, cs2 = 3: W = 0.8 * 1 * 4 / (2 * 0.2) = 8 s.
    r = mg1_wait(0.8, 1.0, 3.0)
    assert float(r.mean_wait_s) == pytest.approx(8.0)
    assert float(r.prob_wait) == pytest.approx(0.8)


@settings(max_examples=50, deadline=None)
@given(rho=st.floats(0.01, 0.99), es=st.floats(1e-3, 10.0), scv=st.floats(0.0, 5.0))
def test_both_mgc_methods_reduce_to_pollaczek_khinchine_for_one_server(rho, es, scv):
    exact = float(mg1_wait(rho / es, es, scv).mean_wait_s)
    for m in ("kimura", "allen-cunneen"):
        assert float(mgc_wait(rho / es, es, scv, 1, method=m).mean_wait_s) == pytest.approx(exact, rel=1e-9)


@settings(max_examples=50, deadline=None)
@given(c=st.integers(1, 200), rho=st.floats(0.01, 0.99))
def test_mgc_with_exponential_service_is_mmc(c, rho):
    es = 0.3
    exact = mmc_wait(rho * c / es, es, c)
    for m in ("kimura", "allen-cunneen"):
        approx = mgc_wait(rho * c / es, es, 1.0, c, method=m)
        np.testing.assert_allclose(approx.mean_wait_s, exact.mean_wait_s, rtol=1e-9)
        np.testing.assert_allclose(approx.p99_wait_s, exact.p99_wait_s, rtol=1e-9)


@settings(max_examples=50, deadline=None)
@given(c=st.integers(2, 100), rho=st.floats(0.05, 0.98), scv=st.floats(0.0, 1.0))
def test_kimura_lies_between_md_and_mm(c, rho, scv):
    lam = rho * c
    wm = float(mmc_wait(lam, 1.0, c).mean_wait_s)
    wd = float(mgc_wait(lam, 1.0, 0.0, c).mean_wait_s)
    wg = float(mgc_wait(lam, 1.0, scv, c).mean_wait_s)
    assert wd * (1 - 1e-9) <= wg <= wm * (1 + 1e-9)
    np.testing.assert_allclose(wd, wm * float(cosmetatos_md_factor(rho, c)) / 2, rtol=1e-9)


@settings(max_examples=40, deadline=None)
@given(c=st.integers(1, 64), scv=st.floats(0.0, 4.0), r1=st.floats(0.0, 0.97), dr=st.floats(0.001, 0.02))
def test_mean_wait_grows_with_rate(c, scv, r1, dr):
    w = mgc_wait(np.array([r1, r1 + dr]) * c, 1.0, scv, c).mean_wait_s
    assert w[0] <= w[1]


# ---------------------------------------------------------------------------------------------- stability


def test_unstable_entries_are_infinite_not_nan():
    r = mgc_wait(np.array([0.0, 1.0, 1.9, 2.0, 3.0]), 1.0, 0.5, 2, scv_arrival=2.0)
    assert r.stable.tolist() == [True, True, True, False, False]
    np.testing.assert_allclose(r.utilisation, [0, 0.5, 0.95, 1.0, 1.5])
    for f in ("mean_wait_s", "p50_wait_s", "p90_wait_s", "p99_wait_s", "cond_mean_wait_s"):
        arr = getattr(r, f)
        assert not np.any(np.isnan(arr)), f
        assert np.all(np.isinf(arr[3:])), f
        assert np.all(np.isfinite(arr[:3])), f
    assert r.mean_wait_s[0] == 0.0 and r.p99_wait_s[0] == 0.0
    assert np.all(r.prob_wait[3:] == 1.0)
    assert not np.any(np.isnan(mmc_wait([0.0, 5.0], 1.0, 5).mean_wait_s))
    assert np.isinf(md1_wait(1.0, 1.0).mean_wait_s)


def test_strict_raises_naming_utilisation():
    with pytest.raises(UnstableError, match=r"utilisation 1\.25"):
        mgc_wait(2.5, 1.0, 1.0, 2, strict=True)
    with pytest.raises(UnstableError, match="utilisation 1"):
        mmc_wait([0.1, 3.0], 1.0, 3, strict=True)
    assert float(mmc_wait(1.0, 1.0, 2, strict=True).mean_wait_s) == pytest.approx(1 / 3)


def test_broadcasting_shapes():
    rates = np.linspace(0.1, 7.9, 50)[:, None]
    servers = np.array([1, 2, 4, 8])[None, :]
    r = mgc_wait(rates, 1.0, 0.7, servers)
    assert r.mean_wait_s.shape == (50, 4) == r.p90_wait_s.shape == r.stable.shape
    assert r.stable[-1].tolist() == [False, False, False, True]


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"rate_rps": -1.0}, "rate_rps"),
        ({"rate_rps": float("nan")}, "rate_rps"),
        ({"servers": 0}, "servers"),
        ({"servers": 2.5}, "servers"),
        ({"mean_service_s": 0.0}, "mean_service_s"),
        ({"scv_service": -0.1}, "scv_service"),
        ({"scv_arrival": -1.0}, "scv_arrival"),
        ({"method": "guess"}, "method"),
    ],
)
def test_bad_input_names_field_and_value(kwargs, field):
    args = {"rate_rps": 1.0, "mean_service_s": 1.0, "scv_service": 1.0, "servers": 2} | kwargs
    with pytest.raises(InputError) as err:
        mgc_wait(**args)
    assert err.value.field == field
    assert field in str(err.value)
    if field == "rate_rps" and kwargs[field] == -1.0:
        assert "-1.0" in str(err.value)


def test_quantile_level_validated():
    with pytest.raises(InputError, match="q"):
        mmc_wait(1.0, 1.0, 2).quantile_wait_s(1.0)


# ---------------------------------------------------------------------------------------------- vs simulation

FLOOR = 0.05  # errors are relative to max(simulated value, 0.05 E[S]); see docs/queueing.md


def _check_close(model: float, sim: float, se: float, tol: float) -> None:
    denom = max(sim, FLOOR)  # E[S] = 1 in these cases
    assert abs(model - sim) <= tol * denom + 3 * se, (model, sim, se)


def test_simulator_reproduces_mmc_exact():
    rng = np.random.default_rng(7)
    s = simulate_mgc(8 * 0.8, exp_sampler(1.0), 8, 1_000_000, rng)
    exact = mmc_wait(6.4, 1.0, 8)
    _check_close(float(exact.mean_wait_s), s.mean_wait_s, s.mean_wait_se_s, 0.04)
    _check_close(float(exact.p90_wait_s), s.p90_wait_s, s.mean_wait_se_s, 0.05)
    assert s.prob_wait == pytest.approx(float(exact.prob_wait), abs=0.015)


# Known breakdown (docs/queueing.md): deterministic service, c = 2, rho = 0.3. P(W>0) = 0.14 sits just
# above 1 - 0.9, so p90 falls on the knee of the distribution, where the exponential tail (SCV 1) is
# too spread for the much less variable conditional wait of M/D/c: the model's p90 is ~27% low.
KNOWN_P90_MISS = {("det", 2, 0.3)}


def _marks(dist: str, c: int, rho: float) -> list:
    marks = [pytest.mark.slow] if rho > 0.9 else []
    if (dist, c, rho) in KNOWN_P90_MISS:
        marks.append(pytest.mark.xfail(strict=True, reason="p90 at the P(W>0) knee; see docs/queueing.md"))
    return marks


CASES = [
    pytest.param(dist, c, rho, marks=_marks(dist, c, rho), id=f"{dist}-c{c}-rho{rho}")
    for dist in ("det", "lognormal")
    for c in (1, 2, 8, 32)
    for rho in (0.3, 0.6, 0.8, 0.9, 0.95)
]


@pytest.mark.parametrize("dist,c,rho", CASES)
def test_kimura_against_simulation(dist, c, rho):
    """Mean wait within 10% and p90 within 15% for rho <= 0.9 (20% / 20% at rho = 0.95)."""
    scv = 0.0 if dist == "det" else 1.0
    svc = det_sampler(1.0) if dist == "det" else lognormal_sampler(1.0, scv)
    rng = np.random.default_rng(1000 * c + int(100 * rho) + (0 if dist == "det" else 7))
    n = 2_000_000 if rho > 0.9 else 1_000_000
    sim = simulate_mgc(rho * c, svc, c, n, rng, n_chains=32)
    model = mgc_wait(rho * c, 1.0, scv, c)
    tol_mean, tol_p90 = (0.20, 0.20) if rho > 0.9 else (0.10, 0.15)
    _check_close(float(model.mean_wait_s), sim.mean_wait_s, sim.mean_wait_se_s, tol_mean)
    _check_close(float(model.p90_wait_s), sim.p90_wait_s, sim.mean_wait_se_s, tol_p90)


def test_percentiles_in_one_bisection_equal_one_at_a_time():
    """LatencyModel.percentiles_s (one stacked bisection for several quantiles) gives exactly the
    quantiles that ttft_percentile_s / tpot_percentile_s give one by one."""
    from model.queueing.latency import LatencyModel

    rng = np.random.default_rng(3)
    s = 64
    lat = LatencyModel(
        wait_prob=np.array([0.0, 0.4]),
        wait_cond_mean_s=np.array([0.0, 0.2]),
        fixed_s=rng.uniform(0.05, 0.4, (2, s)),
        tpot_base_s=np.array([0.02, 0.03]),
        stall_events=rng.uniform(0.0, 3.0, (2, s)),
        stall_sizes_s=np.sort(rng.uniform(0.01, 0.1, (2, 16)), axis=1),
        output_tokens=rng.integers(2, 400, s).astype(float),
        stable=np.array([True, True]),
    )
    for i in (0, 1):
        sub = lat.row(i)
        ttft, tpot = sub.percentiles_s((0.5, 0.9, 0.99))
        for k, q in enumerate((0.5, 0.9, 0.99)):
            assert ttft[k] == sub.ttft_percentile_s(q)[0]
            assert tpot[k] == sub.tpot_percentile_s(q)[0]
        assert ttft[0] < ttft[1] < ttft[2] and tpot[0] < tpot[1] < tpot[2]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.floats(0.0, 500.0), min_size=1, max_size=8),
    st.floats(1e-4, 2.0),
    st.floats(0.0, 4.0),
    st.integers(1, 64),
    st.floats(0.0, 3.0),
)
def test_unchecked_mean_wait_is_mgc_wait(rates, es, scv, servers, scv_a):
    """The packing fixed point's unchecked Kimura mean wait gives mgc_wait's values exactly."""
    from model.queueing.mgc import mgc_mean_wait_unchecked

    rate = np.array(rates)
    want = mgc_wait(rate, es, scv, servers, scv_a)
    stable, mean = mgc_mean_wait_unchecked(rate, np.array(es), np.array(scv), np.array(float(servers)), scv_a)
    np.testing.assert_array_equal(stable, want.stable)
    np.testing.assert_array_equal(mean, want.mean_wait_s)


def test_stall_feedback_by_hand():
    """Busy-period spread of colocated stalls (model.queueing.latency): a request expecting n = 2
    stalls of 40 ms during its 101-token decode, base 10 ms. Without feedback P(no stall) = e^-2 =
    0.1353; with stall load rho = 0.5 the stalls come as n (1 - rho) = 1 primary event (P(none) =
    e^-1 = 0.3679), each a cluster of mean 40 / 0.5 = 80 ms, so the mean TPOT is unchanged:
    10 + 2 x 40 / 100 = 10.8 ms. One cluster alone (P = e^-1 = 0.3679) is the stall size scaled by
    1 / (1 - rho): 80 ms spread over 100 gaps, a step of e^-1 in the CDF at TPOT 10.8 ms (two or
    more clusters follow the compound-Poisson gamma)."""
    from model.queueing.latency import LatencyModel

    base, n, s = 0.010, 2.0, 0.040

    def lat(load):
        return LatencyModel(
            wait_prob=np.array([0.0]),
            wait_cond_mean_s=np.array([0.0]),
            fixed_s=np.array([[0.1]]),
            tpot_base_s=np.array([base]),
            stall_events=np.array([[n]]),
            stall_sizes_s=np.array([[s]]),
            output_tokens=np.array([101.0]),
            stable=np.array([True]),
            stall_load=None if load is None else np.array([load]),
        )

    plain, fed = lat(None), lat(0.5)
    assert plain.mean_tpot_s()[0] == pytest.approx(0.0108) == fed.mean_tpot_s()[0]
    at_base = np.array([[base + 1e-9]])
    assert plain.tpot_cdf(at_base)[0, 0] == pytest.approx(math.exp(-2.0))
    assert fed.tpot_cdf(at_base)[0, 0] == pytest.approx(math.exp(-1.0))

    # one cluster is one step of height P(one) = e^-1 at 80 ms of stall (10.8 ms TPOT); without the
    # feedback the step of height P(one) = 2 e^-2 sits at 40 ms (10.4 ms)
    def step(model, tpot):
        up, down = (model.tpot_cdf(np.array([[tpot + d]]))[0, 0] for d in (1e-7, -1e-7))
        return up - down

    assert step(fed, 0.0108) == pytest.approx(math.exp(-1.0), abs=1e-3)
    assert step(plain, 0.0104) == pytest.approx(2.0 * math.exp(-2.0), abs=1e-3)
    # the tail widens: p90 with feedback above the plain compound Poisson one
    assert fed.tpot_percentile_s(0.9)[0] > plain.tpot_percentile_s(0.9)[0]
