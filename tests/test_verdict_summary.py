"""model.planner.summary: the one-line verdict with the margin rule and the tie band.

Plans are built by hand (verdict, tie, gain and the three inputs the line reads), so each expected
line follows from the values written here; the tie band limits are derived in the test."""

from __future__ import annotations

import types

import pytest

from model.planner.summary import tie_band_limits, verdict_summary
from model.planner.types import Plan


def _plan(
    verdict: str, gain: float | None, tie: bool = False, gpus: int | None = 16, objective="gpus"
) -> Plan:
    inputs = types.SimpleNamespace(margin=0.10, gpus=gpus, objective=objective)
    return Plan(verdict, (), {}, (), {}, 1, inputs, tie=tie, gain=gain)


RULE = (
    "disaggregate only when it is ahead by at least 10%; a difference between -9.1% and +10% is a tie, "
    "which stays colocated"
)


def test_tie_band_limits_are_those_of_the_verdict_rule():
    lo, hi = tie_band_limits(0.10)
    assert hi == 0.10
    assert lo == pytest.approx(1 / 1.1 - 1)  # colocated ahead by 10% <=> gain = 1/1.1 - 1 = -9.09%


def test_a_positive_gain_within_the_margin_is_called_a_tie():
    line = verdict_summary(_plan("colocated-chunked", 0.0854, tie=True))
    assert line == (
        "Tie, so colocated with chunked prefill: disaggregated has +9% goodput against the best "
        f"colocated, inside the tie band (rule: {RULE})."
    )
    assert "loses" not in line


def test_disaggregated_above_the_margin_for_a_target_rate():
    line = verdict_summary(_plan("disaggregated", 0.2727, gpus=None))
    assert line.startswith("Disaggregated prefill and decode pools: the best colocated needs +27% GPUs")
    assert "at or above the 10% margin" in line and RULE in line


def test_colocated_ahead_and_the_margin_rounding():
    assert "colocated is ahead by more than the 10% margin" in verdict_summary(_plan("colocated", -0.25))
    # +9.6% is shown with a decimal, not as "+10%" next to "at least 10%"
    assert "+9.6% goodput" in verdict_summary(_plan("colocated", 0.096, tie=True))


def test_one_family_only_and_none():
    line = verdict_summary(_plan("colocated-chunked", None))
    assert line.startswith("Colocated with chunked prefill: no disaggregated configuration meets the SLOs")
    assert verdict_summary(_plan("none", None)).startswith("No configuration meets the SLOs")
