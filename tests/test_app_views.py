"""AppTest tests of the views issue 19 asked for: the pool-size map within the budget, target-rate
latencies at the target, the verdict summary line, out-of-range inputs, the simulation verdict
line, the scenario restore without Streamlit's duplicate-value warning, and the Apply form.

Expected values come from ``model`` on the same inputs (never hard-coded), as in tests/test_app.py.
"""

from __future__ import annotations

import base64
import json
import logging
import types

import numpy as np
import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

import model
from app_support import inputs
from tests.test_app import DEFAULT, apply, assert_clean, errors_of, run_app, verdict_of


def test_restoring_a_scenario_file_logs_no_duplicate_value_warning(monkeypatch, caplog):
    """Streamlit warns (with a stack trace) when a widget gets a default and a session-state value;
    AppTest has no runtime, so the check is switched on by giving its module one that exists."""
    from streamlit.elements.lib import policies

    monkeypatch.setattr(policies, "runtime", types.SimpleNamespace(exists=lambda: True))
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    state = {**inputs.DEFAULTS, "gpus": 64, "link": "eth-1g", "tpot": "40 ms", "percentile": 95}
    text = inputs.scenario_json(inputs.Spec({"config_text": None, "trace_name": None}), state=state)
    at = run_app()
    with caplog.at_level(logging.WARNING):
        at.file_uploader(key="scenario_upload").set_value(("s.json", text.encode(), "application/json"))
        at.run()
    assert_clean(at)
    assert not [r for r in caplog.records if "default value" in r.getMessage()]
    assert at.number_input(key="gpus").value == 64
    assert at.text_input(key="tpot").value == "40 ms"
    assert at.slider(key="percentile").value == 95


@pytest.mark.parametrize("gpus", [0, 1000])
def test_out_of_range_budget_shows_the_error_not_the_old_verdict(gpus):
    at = run_app()
    assert verdict_of(at) is not None
    at.number_input(key="gpus").set_value(gpus)
    apply(at)
    assert_clean(at)
    assert verdict_of(at) is None, "the old verdict must not stay on the page"
    errs = errors_of(at)
    assert any("GPU budget" in e and str(inputs.RANGES["gpus"][1]) in e for e in errs), errs


def test_out_of_range_target_rate_shows_the_error():
    at = run_app(query={"mode": inputs.TARGET})
    at.number_input(key="target_rate").set_value(0.0)
    apply(at)
    assert_clean(at)
    assert verdict_of(at) is None
    assert any("target rate" in e for e in errors_of(at))


def test_an_error_from_the_plan_shows_the_error_and_nothing_below_it():
    """The tabs and expanders are drawn before the plan runs (docs/app.md, "Responsiveness"); when
    the plan refuses the inputs, the page shows model.plan's error alone, not empty tabs."""
    at = run_app(advanced=True)
    assert verdict_of(at) is not None and at.tabs
    at.text_input(key="kv_offload").set_value("cpu:100TB")  # more than the node's host memory
    apply(at)
    assert_clean(at)
    with pytest.raises(model.PdplanError) as expected:
        model.plan("llama-3.1-70b", "h100-sxm", gpus=16, kv_offload="cpu:100TB", thresholds=False, **DEFAULT)
    assert errors_of(at) == [str(expected.value)]
    assert verdict_of(at) is None and not at.tabs and not at.get("plotly_chart")
    assert not [e for e in at.expander if e.label.startswith(("Compare", "Load over a day"))]


def test_edits_in_the_form_cost_one_plan_on_apply(monkeypatch):
    """TTFT, then TPOT, then a slider, then Apply: one plan (the URL changing on Apply only is
    checked in a real browser, tests/test_app_browser.py)."""
    at = run_app()
    calls = []
    real = model.plan
    monkeypatch.setattr(model, "plan", lambda *a, **k: calls.append(1) or real(*a, **k))
    at.text_input(key="ttft").set_value("400 ms").run()  # a rerun without Apply (AppTest then
    assert calls == [], "an edit before Apply must not plan"  # drops the unsent value)
    at.text_input(key="ttft").set_value("400 ms")
    at.text_input(key="tpot").set_value("40 ms")
    at.slider(key="percentile").set_value(95)
    apply(at)
    assert_clean(at)
    assert len(calls) == 1
    expected = model.plan(
        "llama-3.1-70b",
        "h100-sxm",
        gpus=16,
        **{**DEFAULT, "ttft_slo_s": 0.4, "tpot_slo_s": 0.04, "percentile": 95},
    )
    assert verdict_of(at) == expected.verdict


# ---------------------------------------------------------------------------------------------
# item 1 and 8: the pool-size map


def _decoded(obj):
    """Plotly's binary arrays ({"dtype", "bdata", "shape"}) as nested lists, recursively."""
    if isinstance(obj, dict) and "bdata" in obj and "dtype" in obj:
        arr = np.frombuffer(base64.b64decode(obj["bdata"]), dtype=obj["dtype"])
        if "shape" in obj:
            arr = arr.reshape([int(n) for n in str(obj["shape"]).split(",")])
        return arr.tolist()
    if isinstance(obj, dict):
        return {k: _decoded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decoded(v) for v in obj]
    return obj


def _figure(at: AppTest, index: int = 0) -> dict:
    """The index-th Plotly chart as a plain dict (arrays decoded from Plotly's binary form)."""
    return _decoded(json.loads(at.get("plotly_chart")[index].proto.spec))


def _home(workload: str, gpus: int) -> AppTest:
    return run_app(
        "Pool-size map",
        query={"model": "llama-3.1-8b", "gpu": "rtx-4090", "workload": workload, "gpus": str(gpus)},
    )


@pytest.mark.parametrize("workload", ["code", "chat"])
def test_pool_map_draws_only_splits_within_the_budget(workload):
    at = _home(workload, 2)
    assert_clean(at)
    assert at.selectbox(key="map_tp_p_1_2").value == 1  # the 1 x TP1 + 1 x TP1 split the reasons name
    fig = _figure(at)
    heat = next(t for t in fig["data"] if t["type"] == "heatmap")
    assert max(heat["x"]) == 1 and max(heat["y"]) == 1, "only 1 x TP1 + 1 x TP1 fits 2 GPUs"
    cells = [v for row in heat["z"] for v in row if v == v]  # NaN: no goodput
    assert heat["showscale"] == bool(cells), "no colour bar without a cell that has a goodput"
    assert heat["zmin"] == 0
    assert any("<= 2 GPUs" in c.value for c in at.caption)
    assert not any("16 GPUs" in c.value for c in at.caption)


def test_pool_map_says_when_no_split_fits():
    at = _home("chat", 1)
    assert_clean(at)
    assert not at.get("plotly_chart")
    assert any("No disaggregated split fits 1 GPU:" in i.value for i in at.info)


def test_pool_map_caption_explains_star_and_colour_and_marks_the_target():
    at = run_app("Pool-size map", query={"mode": inputs.TARGET, "target_rate": "12"})
    assert_clean(at)
    text = " ".join(c.value for c in at.caption)
    assert "goodput per GPU" in text and "star" in text and "reach the target rate of 12 req/s" in text
    fig = _figure(at)
    expected = model.plan("llama-3.1-70b", "h100-sxm", target_rate_rps=12.0, **DEFAULT)
    if "disaggregated" in expected.best:
        assert any((t.get("name") or "").startswith("reaches 12 req/s") for t in fig["data"])


# ---------------------------------------------------------------------------------------------
# item 4: target-rate mode at the target rate; item 5: verdict summary and redundancy


def _table(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("| |")).replace("\\", "")


def test_target_rate_mode_shows_latencies_at_the_target_and_flags_failures():
    at = run_app(query={"mode": inputs.TARGET, "target_rate": "40", "rate": "20"})
    assert_clean(at)
    expected = model.plan("llama-3.1-70b", "h100-sxm", target_rate_rps=40.0, **DEFAULT)
    table = _table(at)
    assert "at the target 40 req/s" in table and "20 req/s" not in table
    for b in expected.best.values():
        ev = model.evaluate(b.config, expected.inputs.scenario, 40.0)
        assert model.units.format_time(ev.ttft_s.p90) in table
    below = [
        (s, pool)
        for s, b in expected.best.items()
        for pool, after in b.failure.goodput_after_loss_rps.items()
        if 0 < after < 40.0
    ]
    assert below, "the scenario is chosen so that some pool loses the target after a failure"
    warning = " ".join(w.value for w in at.warning).replace("\\", "")
    for s, pool in below:
        assert f"{s}: after losing one {pool} instance" in warning and "below the 40 req/s" in warning
    assert "below the rate to carry" in table


def test_verdict_summary_states_the_rule_and_calls_a_small_gain_a_tie():
    at = run_app()
    assert_clean(at)
    expected = model.plan("llama-3.1-70b", "h100-sxm", gpus=16, **DEFAULT)
    line = model.planner.summary.verdict_summary(expected)
    page = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert line in page
    assert "ahead by at least 10%" in line and "is a tie" in line
    if expected.tie and expected.gain is not None and expected.gain > 0:
        assert "loses at all" not in page, "a positive gain within the margin is a tie, not a loss"
        assert line.startswith("Tie")
    single = [s for s, b in expected.best.items() if model.planner.redundancy.single_instance_pools(b)]
    warning = " ".join(w.value for w in at.warning).replace("\\", "")
    for s in single:
        assert f"{s}: the" in warning and "single instance" in warning


def test_verdict_summary_names_a_colocated_tie():
    """Plain colocated a few percent ahead of chunked (tests/test_colocated_rule.py's scenario): the
    page's summary line is the model's, with the model's words on the colocated tie."""
    at = run_app()
    at.number_input(key="gpus").set_value(8)
    at.text_input(key="ttft").set_value("300 ms")
    at.text_input(key="tpot").set_value("100 ms")
    apply(at)
    assert_clean(at)
    kw = {**DEFAULT, "ttft_slo_s": 0.3, "tpot_slo_s": 0.1}
    expected = model.plan("llama-3.1-70b", "h100-sxm", gpus=8, thresholds=False, **kw)
    assert expected.colocated_tie and expected.colocated_note
    assert verdict_of(at) == expected.verdict == "colocated-chunked"
    page = " ".join(m.value for m in at.markdown).replace("\\", "")
    line = model.planner.summary.verdict_summary(expected)
    assert line in page and line.endswith("kept as the engines' default.")


# ---------------------------------------------------------------------------------------------
# item 9: the simulation verdict line


def test_simulation_says_whether_it_confirms_the_verdict():
    at = run_app("Verify by simulation")
    at.select_slider(key="sim_n").set_value(250)
    at.button(key="sim_run").click().run()
    assert_clean(at)
    expected = model.plan("llama-3.1-70b", "h100-sxm", gpus=16, **DEFAULT)
    lines = [e.value for e in [*at.success, *at.error] if "analytical verdict" in e.value]
    assert len(lines) == 1, lines
    text = lines[0].replace("\\", "")
    head = f"the analytical verdict ({expected.verdict}): simulated attainment "
    assert ("The simulation confirms " + head) in text or ("The simulation contradicts " + head) in text
    assert "against the 90% target (sampling error ±" in text
    assert at.checkbox(key="sim_goodput").label == "Also search the simulated goodput"


# ---------------------------------------------------------------------------------------------
# item 7: units on hover, one number format, log-axis ticks, formulas that scroll


def test_charts_use_the_units_formatters():
    from app_support import charts, compute, panels

    plan = model.plan("llama-3.1-70b", "h100-sxm", gpus=16, **DEFAULT)
    evals = {s: b.at_goodput for s, b in plan.best.items()}
    weights = charts.weight_duplication(evals).data[0]
    assert all(t.endswith("GB") and "e+" not in t for t in weights.customdata)  # "564 GB", not 5.64e+02
    assert "copies" in weights.text[0]
    rates = compute.sweep_rates(plan, 0.0)
    sweeps = {s: model.rate_sweep(b.config, plan.inputs.scenario, rates) for s, b in plan.best.items()}
    fig = charts.latency_vs_rate(sweeps, plan.inputs.scenario.slo, {}, 0.0)
    hover = [t for tr in fig.data for t in (tr.text or ())]
    assert any(" ms at " in t and t.endswith("req/s") for t in hover), hover[:3]
    assert all("e+" not in t for t in hover)
    roof = charts.roofline(compute.get_rooflines(plan))
    assert roof.layout.xaxis.dtick == 1 and roof.layout.yaxis.dtick == 1
    assert "FLOP/s" in roof.data[-1].hovertemplate and "e+" not in roof.data[-1].hovertemplate
    assert "overflow-x: auto" in panels.MATH_CSS


def test_simulation_table_numbers_through_the_units_formatters():
    from app_support import panels

    assert [fmt(x) for (_, _, _, fmt), x in zip(panels.SIM_ROWS[:2], (27.4, 1.13), strict=True)] == [
        "27.4 req/s",
        "1.13 s",
    ]
    assert panels._fmt(panels.SIM_ROWS[1][3], float("inf")) == "unbounded"
