"""model.sim.check: confirm or contradict the analytical verdict from one simulator run.

Summaries are written by hand; the expected decisions follow from the rule in the module
docstring with the numbers shown (tolerance 2 sqrt(p (1 - p) / n))."""

from __future__ import annotations

import math

import pytest

from model.sim.check import TAIL_FLAG_RATIO, check_verdict, sampling_tolerance
from model.sim.report import SimSummary


def _summary(
    attainment: float, measured: int = 900, stable: bool = True, ttft_p99_s: float = 0.6
) -> SimSummary:
    return SimSummary(
        "disaggregated", "cfg", 1000, measured, measured, 0, stable, "" if stable else "queue grew",
        100.0, 27.0, 27.0, 5000.0, (0.2, 0.4, ttft_p99_s), (0.02, 0.03, 0.04), (0.03, 0.05, 0.08),
        0.01, 0.2, 0.0, 0.0, (), 0.1, 0, None, attainment, None,
    )  # fmt: skip


def test_tolerance_is_two_binomial_standard_errors():
    assert sampling_tolerance(0.9, 900) == pytest.approx(2 * math.sqrt(0.9 * 0.1 / 900))  # = 0.02
    assert sampling_tolerance(0.9, 900) == pytest.approx(0.02)
    assert sampling_tolerance(0.9, 0) == math.inf


def test_attainment_within_the_sampling_error_confirms():
    # 88.9% against 90% with 900 measured: 0.889 >= 0.90 - 0.02 -> confirms (issue 19's example)
    c = check_verdict("disaggregated", _summary(0.889), 0.9, 0.5, 0.10)
    assert c.confirms
    assert c.text.startswith(
        "The simulation confirms the analytical verdict (disaggregated): simulated attainment 88.9% "
        "against the 90% target (sampling error ±2.0%)"
    )


def test_attainment_below_the_error_or_an_unstable_run_contradicts():
    c = check_verdict("disaggregated", _summary(0.85), 0.9, 0.5, 0.10)  # 0.85 < 0.88
    assert not c.confirms and "contradicts" in c.text and "85.0% < target 90%" in c.text
    assert not check_verdict("colocated", _summary(0.95, stable=False), 0.9, 0.5, 0.1).confirms


def test_goodput_ratio_beyond_the_margin_contradicts():
    assert check_verdict("colocated", _summary(0.9), 0.9, 0.5, 0.10, goodput_ratio=0.95).confirms
    c = check_verdict("colocated", _summary(0.9), 0.9, 0.5, 0.10, goodput_ratio=0.85)  # < 1 - 0.10
    assert not c.confirms and "simulated / analytical goodput 0.85" in c.text


def test_a_far_higher_p99_ttft_is_flagged_not_decided():
    c = check_verdict("colocated", _summary(0.9, ttft_p99_s=1.2), 0.9, 0.5, 0.1)  # 2.4x > 2x
    assert c.confirms and len(c.flags) == 1 and "2.4x the analytical 500 ms" in c.flags[0]
    at_limit = _summary(0.9, ttft_p99_s=TAIL_FLAG_RATIO * 0.5)
    assert check_verdict("colocated", at_limit, 0.9, 0.5, 0.1).flags == ()
