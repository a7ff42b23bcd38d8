"""Issue 15: the app's prefix-cache hit rate field and its scenario-file key."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")

import model
from app_support import inputs
from model.errors import InputError
from model.planner.compare import compare
from model.planner.scenario_file import SCENARIO_FORMAT, scenario_request
from tests.test_app import DEFAULT, apply, assert_clean, errors_of, run_app, verdict_of


def test_prefix_hit_rate_in_the_app():
    """The field plans as model.plan with the same prefix_hit_rate, and the reasons say so."""
    at = run_app(advanced=True)
    at.text_input(key="prefix_hit_rate").set_value("60%")
    apply(at)
    assert_clean(at)
    expected = model.plan("llama-3.1-70b", "h100-sxm", gpus=16, prefix_hit_rate=0.6, **DEFAULT)
    assert verdict_of(at) == expected.verdict
    assert any("Prefix caching in" in m.value and "60% of prompt tokens" in m.value for m in at.markdown)


@pytest.mark.parametrize("text", ["1.5", "-0.1", "abc", "150%"])
def test_bad_prefix_hit_rate_is_named(text):
    at = run_app(advanced=True)
    at.text_input(key="prefix_hit_rate").set_value(text)
    apply(at)
    assert_clean(at)
    assert verdict_of(at) is None
    assert any("hit rate" in e for e in errors_of(at))


def test_scenario_file_with_prefix_hit_rate(tmp_path):
    state = {**inputs.DEFAULTS, "prefix_hit_rate": "0.6", "gpus": 8}
    spec = inputs.Spec({"config_text": None, "trace_name": None})
    path = tmp_path / "prefix.json"
    path.write_text(inputs.scenario_json(spec, state=state), encoding="utf-8")
    got = compare(str(path), str(path)).a
    expected = model.plan("llama-3.1-70b", "h100-sxm", gpus=8, prefix_hit_rate=0.6, **DEFAULT)
    assert got.goodput_rps == pytest.approx(expected.best[expected.verdict].goodput_rps)
    obj = {"format": SCENARIO_FORMAT, "inputs": {**state, "prefix_hit_rate": "1.2"}}
    with pytest.raises(InputError, match="inputs.prefix_hit_rate"):
        scenario_request(obj)
