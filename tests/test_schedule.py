"""Load over a day (model.fleet): rate curves, scaling tables, and the schedule's arithmetic.

The hand-checked cases use a written-out scaling table so every replica count and GPU-hour can be
derived by hand; the planner-backed cases check the lookup against model.config_goodput of each
size, and the property tests check that more traffic never needs fewer GPU-hours.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import model
from model.errors import InputError
from model.fleet.capacity import Capacity, capacity_of
from model.fleet.curve import DiurnalShape, curve_from_trace, diurnal_curve, load_curve_csv, rate_curve
from model.fleet.schedule import ENGINE_START_S, Schedule, ScheduleOptions, provision, schedule, window_max
from model.limits import MAX_CURVE_ROWS
from model.llm.arch import total_params
from model.workload.traces import load_trace

TRACES = Path("/work/shared/traces")


def _colocated_table() -> Capacity:
    """TP2 replicas at 2.5 USD per GPU-hour carrying 2, 4.5, 7 and 9 req/s (1..4 replicas)."""
    return Capacity(
        "colocated",
        "4 x TP2",
        ("replica",),
        np.array([[1.0], [2.0], [3.0], [4.0]]),
        (2,),
        (5.0,),
        np.array([2.0, 4.5, 7.0, 9.0]),
        1e9,
    )


def _step(first: float, second: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    curve = rate_curve([0.0, 3600.0], [first, second], 7200.0)
    return curve.bins(600.0)


def test_step_up_hand_checked() -> None:
    """3 req/s for an hour, then 8 req/s for an hour; 600 s bins, reaction 120 s, hold 900 s.

    Need: 3 req/s -> 2 replicas (4.5 >= 3 > 2); 8 req/s -> 4 replicas (9 >= 8 > 7).
    Scale-up early: the bin [3000, 3600) sees 3600 within its end + 120 s, so it runs 4 replicas.
    Provisioned: 5 bins x 2 replicas, then 7 bins x 4 replicas; a replica is 2 GPUs, a bin 1/6 h:
    GPU-hours = 5 x 4 / 6 + 7 x 8 / 6 = 76 / 6 = 12.667; cost = GPU-hours x 2.5 = 31.667 USD.
    Static for the peak: 4 replicas = 8 GPUs x 2 h = 16 GPU-hours; saving 20 / 6 = 3.333.
    """
    start, end, rate = _step(3.0, 8.0)
    s = provision(_colocated_table(), start, end, rate, reaction_s=120.0, hold_s=900.0)
    assert s.need[:, 0].tolist() == [2] * 6 + [4] * 6
    assert s.provisioned[:, 0].tolist() == [2] * 5 + [4] * 7
    assert s.gpu_hours == pytest.approx(76 / 6, rel=1e-12)
    assert s.cost_usd == pytest.approx(76 / 6 * 2.5, rel=1e-12)
    assert (s.static_gpus, s.static_gpu_hours) == (8, pytest.approx(16.0))
    assert s.savings_gpu_hours == pytest.approx(20 / 6)
    assert s.uncovered_bins == 0


def test_step_down_waits_for_the_hold() -> None:
    """8 then 3 req/s, hold 900 s: the bins starting at 3600 and 4200 s still see a 4-replica bin
    ending after their start - 900 s (3000 < 3600 and 3600 > 3300), the bin at 4800 s does not.
    Provisioned: 8 bins x 4 replicas, 4 x 2: GPU-hours = (8 x 8 + 4 x 4) / 6 = 80 / 6."""
    start, end, rate = _step(8.0, 3.0)
    s = provision(_colocated_table(), start, end, rate, reaction_s=120.0, hold_s=900.0)
    assert s.provisioned[:, 0].tolist() == [4] * 8 + [2] * 4
    assert s.gpu_hours == pytest.approx(80 / 6, rel=1e-12)


def test_no_reaction_no_hold_follows_the_need() -> None:
    start, end, rate = _step(8.0, 3.0)
    s = provision(_colocated_table(), start, end, rate, reaction_s=0.0, hold_s=0.0)
    assert s.provisioned[:, 0].tolist() == s.need[:, 0].tolist() == [4] * 6 + [2] * 6


def test_rate_above_the_table_is_counted_not_hidden() -> None:
    start, end, rate = _step(3.0, 10.0)
    s = provision(_colocated_table(), start, end, rate, reaction_s=0.0, hold_s=0.0)
    assert s.uncovered_bins == 6 and s.need[-1, 0] == 4


def test_disaggregated_pair_is_the_fewest_gpus() -> None:
    """Prefill TP2, decode TP4: (2, 1) = 8 GPUs carries 3 req/s, (1, 2) = 10 GPUs only 2.5: a rate
    of 2.8 takes (2, 1); 1.5 takes (1, 1) = 6 GPUs; 4 takes (2, 2) = 12 GPUs."""
    cap = Capacity(
        "disaggregated",
        "2 x TP2 + 2 x TP4",
        ("prefill", "decode"),
        np.array([[1.0, 1.0], [2.0, 1.0], [1.0, 2.0], [2.0, 2.0]]),
        (2, 4),
        (5.0, 10.0),
        np.array([2.0, 3.0, 2.5, 5.0]),
        1e9,
    )
    pick = cap.smallest(np.array([1.5, 2.8, 4.0, 6.0]))
    assert pick.tolist() == [0, 1, 3, -1]
    assert cap.n_gpus[pick[:3]].tolist() == [6, 8, 12]


def test_window_max_matches_a_loop() -> None:
    rng = np.random.default_rng(1)
    v = rng.integers(0, 9, size=(50, 2)).astype(float)
    lo = rng.integers(0, 50, size=50)
    hi = np.minimum(50, lo + 1 + rng.integers(0, 10, size=50))
    expected = np.array([v[a:b].max(axis=0) for a, b in zip(lo, hi, strict=True)])
    assert np.array_equal(window_max(v, lo, hi), expected)


# --- curves ---------------------------------------------------------------------------------


def test_bins_split_rows_without_straddling() -> None:
    c = rate_curve([0.0, 90.0], [1.0, 2.0], 100.0)
    start, end, rate = c.bins(40.0)
    assert start.tolist() == [0.0, 30.0, 60.0, 90.0]
    assert end.tolist() == [30.0, 60.0, 90.0, 100.0]
    assert rate.tolist() == [1.0, 1.0, 1.0, 2.0]
    assert c.mean_rps == pytest.approx((90 * 1 + 10 * 2) / 100)


def test_diurnal_preset_peak_and_trough() -> None:
    c = diurnal_curve(10.0)
    assert c.peak_rps == pytest.approx(10.0)
    assert c.duration_s == 86400.0 and len(c.rate_rps) == 288
    assert 0.25 * 10 < c.rate_rps.min() < 0.35 * 10  # about the 0.3 trough fraction
    hour_of_peak = c.start_s[np.argmax(c.rate_rps)] / 3600
    assert 13 <= hour_of_peak <= 15
    flat = diurnal_curve(4.0, DiurnalShape(trough_fraction=1.0))
    assert np.allclose(flat.rate_rps, 4.0)


@pytest.mark.skipif(not (TRACES / "azure_llm_2023_conv.csv").exists(), reason="shared traces absent")
def test_curve_from_a_real_trace_keeps_every_request() -> None:
    trace = load_trace(TRACES / "azure_llm_2023_conv.csv")
    c = curve_from_trace(trace, 60.0)
    widths = np.diff(np.append(c.start_s, c.end_s))
    assert np.sum(c.rate_rps * widths) == pytest.approx(len(trace))
    assert len(c.rate_rps) == int(np.ceil(trace.duration_s / 60.0))


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("time_s,rate_rps\n", "day.csv"),
        ("time_s,rate_rps\n0,1\n60,2\n60,3\n", "day.csv row 3 time_s"),
        ("time_s,rate_rps\n0,1\n60,-2\n", "day.csv row 2 rate_rps"),
        ("time_s,rate_rps\n0,1\n60,fast\n", "day.csv row 2 rate_rps"),
        ("time_s,rate_rps\n0,1\n30,nan\n", "day.csv row 2 rate_rps"),
        ("when,rate_rps\n0,1\n", "day.csv header"),
        ("", "day.csv"),
        ("time_s,rate_rps\n0,1\n", "curve"),
    ],
)
def test_bad_curve_csv_names_the_row_and_field(text: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        load_curve_csv("day.csv", text)
    assert err.value.field == field


def test_too_many_rows_names_the_limit() -> None:
    with pytest.raises(InputError, match="MAX_CURVE_ROWS"):
        rate_curve(np.arange(MAX_CURVE_ROWS + 1.0), np.ones(MAX_CURVE_ROWS + 1))
    with pytest.raises(InputError, match="at least one row"):
        rate_curve([], [])


# --- with the planner ----------------------------------------------------------------------

_REQ = {"workload": "chat", "ttft_slo_s": 0.5, "tpot_slo_s": 0.05, "tp_options": (1, 2), "samples": 400}


@cache
def _step_schedule() -> Schedule:
    curve = rate_curve([0.0, 3600.0], [2.0, 12.0], 7200.0)
    return schedule(
        curve, "llama-3.1-8b", "a100-80gb-sxm", options=ScheduleOptions(resolution_s=600.0), **_REQ
    )


def test_step_schedule_matches_each_sizes_goodput() -> None:
    """Each bin's colocated replica count is the smallest R whose goodput (model.config_goodput of
    that configuration alone) carries the bin's rate; R - 1 replicas do not."""
    result = _step_schedule()
    scn = result.plan.inputs.scenario
    for name in ("colocated", "colocated-chunked"):
        s = result.styles[name]
        best = result.plan.best[name].config
        for rate in (2.0, 12.0):
            r = int(s.need[result.rate_rps == rate][0, 0])
            assert model.config_goodput(scn, replace(best, replicas=r)) >= rate * (1 - 1e-4)
            if r > 1:
                assert model.config_goodput(scn, replace(best, replicas=r - 1)) < rate
        assert s.static_gpus == result.plan.best[name].n_gpus
    assert result.fewest_gpu_hours in result.styles


def test_reaction_time_is_weights_over_storage_plus_engine_start() -> None:
    """Llama-3.1-70B bf16 on an HGX H100 node: 2 bytes x params / 56 GB/s + 60 s."""
    arch = model.get_model("llama-3.1-70b")
    curve = rate_curve([0.0, 600.0], [1.0, 2.0], 1200.0)
    result = schedule(
        curve,
        "llama-3.1-70b",
        "h100-sxm",
        node="hgx-h100-8",
        options=ScheduleOptions(resolution_s=600.0),
        **{**_REQ, "tp_options": (4, 8)},
    )
    expected = 2 * total_params(arch) / 56e9 + ENGINE_START_S
    for s in result.styles.values():
        assert s.reaction_s == pytest.approx(expected, rel=1e-9)


def test_schedule_refuses_a_budget_or_a_target_rate() -> None:
    curve = rate_curve([0.0, 60.0], [1.0, 2.0])
    with pytest.raises(InputError, match="peak rate"):
        schedule(curve, "llama-3.1-8b", "a100-80gb-sxm", gpus=8, **_REQ)
    with pytest.raises(InputError, match="resolution_s"):
        schedule(curve, "llama-3.1-8b", "a100-80gb-sxm", options=ScheduleOptions(resolution_s=0.0), **_REQ)


@cache
def _tables() -> tuple[Capacity, ...]:
    result = _step_schedule()
    scn = result.plan.inputs.scenario
    return tuple(capacity_of(b, scn) for b in result.plan.best.values())


@settings(max_examples=60, deadline=None)
@given(
    rates=st.lists(st.floats(0.0, 14.0), min_size=1, max_size=24),
    extra=st.lists(st.floats(0.0, 5.0), min_size=24, max_size=24),
    reaction=st.floats(0.0, 1800.0),
    hold=st.floats(0.0, 3600.0),
    which=st.integers(0, 2),
)
def test_a_higher_curve_never_needs_fewer_gpu_hours(rates, extra, reaction, hold, which) -> None:
    """Invariant: raising the rate anywhere never lowers the GPU-hours (nor the cost) of any style."""
    tables = _tables()
    cap = tables[which % len(tables)]
    t = np.arange(len(rates)) * 600.0
    low = np.asarray(rates)
    high = low + np.asarray(extra[: len(rates)])
    end = t + 600.0
    a = provision(cap, t, end, low, reaction, hold)
    b = provision(cap, t, end, high, reaction, hold)
    assert b.gpu_hours >= a.gpu_hours - 1e-9
    assert b.cost_usd >= a.cost_usd - 1e-9
    assert np.all(b.n_gpus >= a.n_gpus)


def test_too_many_bins_is_refused_before_any_work() -> None:
    c = rate_curve([0.0, 86400.0], [1.0, 2.0])  # two days
    with pytest.raises(InputError, match="MAX_SCHEDULE_BINS"):
        c.bins(0.1)  # 1.7M bins
