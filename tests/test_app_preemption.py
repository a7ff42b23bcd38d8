"""Issue 15: the app's pre-emption field and its scenario-file key (docs/model.md, KV offload tiers)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")

import model
from app_support import inputs
from model.errors import InputError
from model.planner.scenario_file import SCENARIO_FORMAT, scenario_request
from tests.test_app import DEFAULT, apply, assert_clean, errors_of, run_app, verdict_of


def test_preemption_field_plans_as_the_api():
    """'none' in the field plans as model.plan(preemption="none")."""
    at = run_app(advanced=True)
    at.text_input(key="preemption").set_value("none")
    apply(at)
    assert_clean(at)
    expected = model.plan("llama-3.1-70b", "h100-sxm", gpus=16, preemption="none", **DEFAULT)
    assert verdict_of(at) == expected.verdict


@pytest.mark.parametrize("text", ["swap", "evict"])
def test_bad_preemption_is_named(text):
    """An unknown policy, or swap without a cpu KV offload tier: one error naming pre-emption."""
    at = run_app(advanced=True)
    at.text_input(key="preemption").set_value(text)
    apply(at)
    assert_clean(at)
    assert verdict_of(at) is None
    assert any("preemption" in e for e in errors_of(at))


def test_scenario_file_preemption_key():
    state = {**inputs.DEFAULTS, "preemption": "recompute", "gpus": 8}
    assert scenario_request({"format": SCENARIO_FORMAT, "inputs": state}).preemption == "recompute"
    with pytest.raises(InputError, match="inputs.preemption"):
        scenario_request({"format": SCENARIO_FORMAT, "inputs": {**state, "preemption": "pause"}})
