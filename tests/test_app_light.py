"""The lighter page of session 8 (issue 19, docs/app.md "Responsiveness"): the view open after an
Apply is the TTFT breakdown as one table (the plotly chart behind a toggle), and the advanced
inputs are drawn only while the *Advanced inputs* toggle is on, keeping their values while hidden."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import types

import pytest

pytest.importorskip("streamlit")

import model
from app_support import advanced, breakdown, charts
from model.units import format_time
from tests.test_app import DEFAULT, apply, assert_clean, run_app, verdict_of


def _row(table: str, style: str) -> str:
    hit = re.search(rf"<tr><td>{re.escape(style)}</td>.*?</tr>", table)
    assert hit, f"no row for {style}"
    return hit.group(0)


def _breakdown(at) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("<table"))


def _fake_eval(parts_s: dict[str, float], p90_s: float):
    return types.SimpleNamespace(ttft_components_s=parts_s, ttft_s=types.SimpleNamespace(p90=p90_s))


def test_breakdown_bars_share_one_scale_by_hand():
    """Queue wait 0.1 s and prefill 0.2 s, p90 0.4 s, target 0.5 s: the scale is 1.05 x 0.5 s =
    0.525 s, so the segments are 0.1/0.525 = 19.05% and 0.2/0.525 = 38.10% wide, the p90 tick sits
    at 0.4/0.525 = 76.19% and the target line at 0.5/0.525 = 95.24%; zero parts draw no segment."""
    parts = {"queue_wait": 0.1, "prefill": 0.2, "transfer": 0.0, "link_wait": 0.0, "admission_wait": 0.0}
    table = breakdown.table_html({"colocated": _fake_eval(parts, 0.4)}, 0.5, 90)
    row = _row(table, "colocated")
    assert re.findall(r"width:([0-9.]+)%;background", row) == ["19.05", "38.10"]
    assert re.findall(r"left:([0-9.]+)%", row) == ["76.19", "95.24"]
    cell = "<td style='white-space:nowrap'>"
    assert f"{cell}{format_time(0.1)}</td>{cell}{format_time(0.2)}</td>" in row
    assert f"<b>{format_time(0.4)}</b>" in row
    assert "p90" in table and format_time(0.5) in table


def test_breakdown_with_an_infinite_p90_draws_no_tick():
    parts = {
        "queue_wait": float("inf"),
        "prefill": 0.2,
        "transfer": 0.0,
        "link_wait": 0.0,
        "admission_wait": 0.0,
    }
    row = _row(breakdown.table_html({"colocated": _fake_eval(parts, float("inf"))}, 0.5, 90), "colocated")
    assert re.findall(r"left:([0-9.]+)%", row) == ["95.24"]  # the target only: 0.5 / (1.05 x 0.5)
    assert "inf" not in row and "nan" not in row


def test_breakdown_shows_a_vanishing_time_as_below_a_nanosecond():
    assert breakdown._time(1.06e-204) == "&lt; 1 ns" and breakdown._time(0.0) == format_time(0.0)


def test_open_view_is_the_breakdown_table_of_the_plans_evaluations():
    """No plotly chart after an Apply: the open tab is one table with, per style, the mean TTFT
    components and p90 TTFT of the planner's best configuration at its goodput."""
    at = run_app()
    assert_clean(at)
    assert not at.get("plotly_chart")
    expected = model.plan("llama-3.1-70b", "h100-sxm", gpus=16, **DEFAULT)
    assert verdict_of(at) == expected.verdict
    table = _breakdown(at)
    for style, best in expected.best.items():
        row = _row(table, style)
        ev = best.at_goodput
        for key, _, _ in charts.TTFT_PARTS:
            assert f">{breakdown._time(ev.ttft_components_s[key])}</td>" in row, (style, key)
        assert f"<b>{format_time(ev.ttft_s.p90)}</b>" in row


def test_interactive_chart_toggle_draws_the_plotly_breakdown():
    from tests.test_app_views import _figure

    at = run_app()
    at.toggle(key=breakdown.CHART_KEY).set_value(True).run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 1
    bars = [t for t in _figure(at)["data"] if t["type"] == "bar"]
    assert [t["name"] for t in bars] == [label for _, label, _ in charts.TTFT_PARTS]
    # kept while another tab is open, and on again when the tab is reopened
    at.session_state["view"] = "Memory"
    at.run()
    at.session_state["view"] = "TTFT breakdown"
    at.run()
    assert at.toggle(key=breakdown.CHART_KEY).value
    assert any(len(c.proto.spec) > 0 for c in at.get("plotly_chart"))


def _text_keys(at) -> set[str]:
    return {w.key for w in at.text_input}


def test_advanced_inputs_are_hidden_until_the_toggle_is_on():
    assert set(advanced.KEYS) <= set(advanced.DEFAULTS) and len(set(advanced.KEYS)) == 16
    at = run_app()
    assert_clean(at)
    assert not _text_keys(at) & set(advanced.KEYS), "hidden by default: not drawn, not re-sent"
    assert not [c for c in at.sidebar.caption if c.value.startswith(advanced.LABEL)], "all at defaults"
    at.toggle(key=advanced.TOGGLE).set_value(True).run()
    assert_clean(at)
    assert {"price", "tdp", "speculation", "kv_offload"} <= _text_keys(at)
    assert at.slider(key="margin").value == advanced.DEFAULTS["margin"]


def test_url_parameter_sets_a_hidden_field(caplog):
    """?price=1.25 reaches the planner with the field hidden (16 GPUs x $1.25 = $20.00/h), the
    form names it, and switching the toggle on shows it without Streamlit's duplicate-value warning."""
    at = run_app(query={"price": "1.25"})
    assert_clean(at)
    table = next(m.value for m in at.markdown if m.value.startswith("| |"))
    assert "16 GPUs / $20.00/h" in table.replace("\\", "")
    assert any(c.value == f"{advanced.LABEL} in effect (hidden): price=1.25" for c in at.sidebar.caption)
    with caplog.at_level(logging.WARNING):
        at.toggle(key=advanced.TOGGLE).set_value(True).run()
    assert_clean(at)
    assert at.text_input(key="price").value == "1.25"
    assert not [r for r in caplog.records if "default value" in r.getMessage()]


def test_apply_replans_with_a_hidden_field_changed():
    """A price set with the fields shown stays in effect once they are hidden: a later Apply of
    another field plans with it, and the URL keeps it."""
    at = run_app(advanced=True)
    at.text_input(key="price").set_value("2")
    apply(at)
    at.toggle(key=advanced.TOGGLE).set_value(False).run()
    assert_clean(at)
    assert "price" not in _text_keys(at)
    at.slider(key="percentile").set_value(93)
    apply(at)
    assert_clean(at)
    gpu = dataclasses.replace(model.get_gpu("h100-sxm"), price_usd_per_hour=2.0)
    expected = model.plan("llama-3.1-70b", gpu, gpus=16, **{**DEFAULT, "percentile": 93})
    assert verdict_of(at) == expected.verdict
    table = next(m.value for m in at.markdown if m.value.startswith("| |"))
    assert "16 GPUs / $32.00/h" in table.replace("\\", "")
    assert at.query_params["price"] == "2" and at.query_params["percentile"] == "93"
    at.toggle(key=advanced.TOGGLE).set_value(True).run()
    assert at.text_input(key="price").value == "2"


def test_scenario_file_sets_and_saves_a_hidden_field():
    """A scenario file restores an advanced input while the fields are hidden (the plan uses it),
    and the scenario the page saves from that state carries it again."""
    from app_support import inputs

    state = {**inputs.DEFAULTS, "price": "1.25", "margin": 0.2}
    text = inputs.scenario_json(inputs.Spec({"config_text": None, "trace_name": None}), state=state)
    at = run_app()
    at.file_uploader(key="scenario_upload").set_value(("s.json", text.encode(), "application/json")).run()
    assert_clean(at)
    assert "price" not in _text_keys(at)
    table = next(m.value for m in at.markdown if m.value.startswith("| |"))
    assert "16 GPUs / $20.00/h" in table.replace("\\", "")
    at.run()  # a later run keeps the hidden values
    saved = json.loads(inputs.scenario_json(inputs.Spec({"config_text": None}), state=at.session_state))
    assert saved["inputs"]["price"] == "1.25" and saved["inputs"]["margin"] == 0.2
