"""Plain input/output lengths in the app (issue 18: "--isl/--osl wherever --workload is accepted"):
the *Workload from: lengths* choice, its validation, URL parameters and scenario files."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")

import model
from app_support import inputs
from model.planner.compare import compare
from tests.test_app import DEFAULT, apply, assert_clean, errors_of, run_app, verdict_of

KW = {k: v for k, v in DEFAULT.items() if k != "workload"}


def _planner(isl: str, osl: str, gpus: int = 16) -> model.Plan:
    wl = model.workload_from_lengths(isl_dist=isl, osl_dist=osl)
    return model.plan("llama-3.1-70b", "h100-sxm", workload=wl, gpus=gpus, **KW)


def test_fixed_lengths_follow_the_planner():
    at = run_app()
    at.radio(key="workload_source").set_value(inputs.LENGTHS)
    at.text_input(key="isl").set_value("4000")
    at.text_input(key="osl").set_value("500")
    apply(at)
    assert_clean(at)
    expected = _planner("fixed:4000", "fixed:500")
    assert verdict_of(at) == expected.verdict
    # the long fixed prompts differ from the chat preset's plan
    assert expected.best != model.plan("llama-3.1-70b", "h100-sxm", gpus=16, **DEFAULT).best


def test_length_distribution_from_the_url():
    at = run_app(query={"workload_source": "lengths", "isl": "lognormal:mean=2000,cv=1", "osl": "300"})
    assert_clean(at)
    assert verdict_of(at) == _planner("lognormal:mean=2000,cv=1", "fixed:300").verdict


@pytest.mark.parametrize(
    "isl, message",
    [("0", "prompt tokens"), ("lognormal:mean=2000", "prompt tokens"), ("1e9", "prompt tokens")],
)
def test_bad_lengths_are_named(isl, message):
    at = run_app()
    at.radio(key="workload_source").set_value(inputs.LENGTHS)
    at.text_input(key="isl").set_value(isl)
    apply(at)
    assert_clean(at)
    assert verdict_of(at) is None
    assert any(message in e for e in errors_of(at)), errors_of(at)


def test_scenario_file_with_lengths_replans_the_same(tmp_path):
    state = {**inputs.DEFAULTS, "workload_source": inputs.LENGTHS, "isl": "4000", "osl": "500", "gpus": 8}
    spec = inputs.Spec({"config_text": None, "trace_name": None})
    path = tmp_path / "lengths.json"
    path.write_text(inputs.scenario_json(spec, state=state), encoding="utf-8")
    assert json.loads(path.read_text())["inputs"]["isl"] == "4000"
    cmp = compare(str(path), str(path))
    expected = _planner("fixed:4000", "fixed:500", gpus=8)
    assert cmp.a.verdict == expected.verdict
    assert cmp.a.goodput_rps == pytest.approx(expected.best[expected.verdict].goodput_rps)


def test_speculative_decoding_in_the_app():
    """Issue 15: the app's speculation field plans as model.plan with the same Speculation."""
    at = run_app(advanced=True)
    at.text_input(key="speculation").set_value("eagle k=3 a=0.8")
    apply(at)
    assert_clean(at)
    spec = model.Speculation("eagle", 3, (0.8,))
    expected = model.plan("llama-3.1-70b", "h100-sxm", gpus=16, speculation=spec, **DEFAULT)
    assert verdict_of(at) == expected.verdict
    assert any("Speculative decoding (eagle k=3" in m.value for m in at.markdown)


@pytest.mark.parametrize("text", ["eagle k=3", "medusa k=3 a=0.8", "eagle k=3 a=1.5", "eagle k=0 a=0.5"])
def test_bad_speculation_text_is_named(text):
    at = run_app(advanced=True)
    at.text_input(key="speculation").set_value(text)
    apply(at)
    assert_clean(at)
    assert verdict_of(at) is None
    assert errors_of(at), "no error shown"


def test_parse_speculation_forms():
    p = model.parse_speculation
    assert p("") is None and p(" off ") is None
    assert p("EAGLE  k=3 a=0.8") == model.Speculation("eagle", 3, (0.8,))
    assert p("mtp k=2 a=0.9,0.7").acceptance == (0.9, 0.7)
    assert p("eagle k=3 tau=2.952").acceptance[0] == pytest.approx(0.8, abs=1e-9)
    assert p("draft k=4 a=0.7 draft=llama-2-7b").draft_model.name == "llama-2-7b"
    for bad in ("eagle", "eagle k=3 a=", "eagle k=3 a=0.8; import os", "x" * 300, "eagle k=3 a=1..2"):
        with pytest.raises(model.InputError):
            p(bad)


def test_scenario_file_with_speculation(tmp_path):
    state = {**inputs.DEFAULTS, "speculation": "eagle k=3 a=0.8", "gpus": 8}
    spec = inputs.Spec({"config_text": None, "trace_name": None})
    path = tmp_path / "spec.json"
    path.write_text(inputs.scenario_json(spec, state=state), encoding="utf-8")
    got = compare(str(path), str(path)).a
    expected = model.plan(
        "llama-3.1-70b", "h100-sxm", gpus=8, speculation=model.Speculation("eagle", 3, (0.8,)), **DEFAULT
    )
    assert got.goodput_rps == pytest.approx(expected.best[expected.verdict].goodput_rps)
