"""AppTest tests of the app's cost per Apply (issue 19: a re-plan after one change within 1 s):
one Apply runs ``model.plan`` once and without the flip-threshold searches; the searches run only
when "What would flip it" is switched on (then only that box reruns) and for the JSON download,
and what they show is then ``model.plan``'s own flip thresholds. Expected values come from
``model`` on the same inputs, as in tests/test_app.py. Figures: benchmarks/apply_app.py, docs/app.md.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")

import model
from app_support import flips
from app_support.text import md
from tests.test_app import DEFAULT, apply, assert_clean, run_app, verdict_of


@pytest.fixture
def plan_calls(monkeypatch):
    """The ``thresholds`` argument of every ``model.plan`` call the app makes."""
    calls: list[bool] = []
    real = model.plan

    def counted(*a, **k):
        calls.append(k.get("thresholds", True))
        return real(*a, **k)

    monkeypatch.setattr(model, "plan", counted)
    return calls


def _expected(**overrides) -> model.Plan:
    return model.plan("llama-3.1-70b", "h100-sxm", gpus=16, **{**DEFAULT, **overrides})


def _spec():
    from app_support import inputs

    return inputs.Spec({"rate_rps": 0.0, "config_text": None})


def _flip_texts(at) -> str:
    return "\n".join(m.value for m in at.markdown if m.value.startswith("- "))


def test_one_apply_plans_once_without_the_threshold_searches(plan_calls):
    at = run_app()
    plan_calls.clear()
    at.slider(key="percentile").set_value(93)
    apply(at)
    assert_clean(at)
    assert plan_calls == [False], "one Apply: one plan, without the flip-threshold searches"
    assert verdict_of(at) == _expected(percentile=93).verdict
    assert any(c.value == flips.NOT_SEARCHED for c in at.caption)


def test_switching_the_search_on_shows_the_planners_flip_thresholds(plan_calls):
    at = run_app()
    assert any(c.value == flips.NOT_SEARCHED for c in at.caption)
    assert plan_calls in ([], [False])  # [] when an earlier test planned the default (cached)
    plan_calls.clear()
    at.toggle(key=flips.SEARCH_KEY).set_value(True).run()
    assert_clean(at)
    # one plan with the thresholds ([] when an earlier test in this process searched the default)
    assert plan_calls in ([], [True]), "the search is at most one plan, with the thresholds"
    expected = _expected()
    assert expected.flip_thresholds, "the default scenario has flip thresholds to show"
    shown = _flip_texts(at)
    for f in expected.flip_thresholds:
        assert md(f.text) in shown
    assert not any(c.value == flips.NOT_SEARCHED for c in at.caption)
    # While the search is on, an Apply still plans once: with the thresholds, for the box too.
    plan_calls.clear()
    at.slider(key="percentile").set_value(94)
    apply(at)
    assert_clean(at)
    assert plan_calls == [True]
    expected = _expected(percentile=94)
    assert verdict_of(at) == expected.verdict
    shown = _flip_texts(at)
    for f in expected.flip_thresholds:
        assert md(f.text) in shown


def test_switching_the_search_off_again_plans_without_it(plan_calls):
    at = run_app()
    at.toggle(key=flips.SEARCH_KEY).set_value(True).run()
    at.toggle(key=flips.SEARCH_KEY).set_value(False).run()
    plan_calls.clear()
    at.slider(key="percentile").set_value(89)
    apply(at)
    assert_clean(at)
    assert plan_calls == [False]
    assert any(c.value == flips.NOT_SEARCHED for c in at.caption)


def test_view_only_reruns_do_not_plan(plan_calls):
    """Opening other views and moving the inspected rate reuse the one plan of the last Apply."""
    at = run_app()
    plan_calls.clear()
    at.slider(key="percentile").set_value(88)
    apply(at)
    assert plan_calls == [False]
    for view in ("TTFT breakdown", "Memory", "Alternatives", "Pool-size map"):
        at.session_state["view"] = view
        at.run()
        assert_clean(at)
    at.number_input(key="rate").set_value(5.0)
    apply(at)
    assert_clean(at)
    assert plan_calls == [False]


def test_the_pool_map_is_computed_only_when_its_tab_is_opened(monkeypatch):
    """An Apply on the default view draws the TTFT breakdown table (the plan's own evaluations) and maps
    no pool split; opening "Pool-size map" computes the map of the best disaggregated TPs, and the
    chart shows ``model.pool_map``'s goodput per GPU with the planner's split starred."""
    from tests.test_app_views import _figure

    maps = []
    real = model.pool_map
    monkeypatch.setattr(model, "pool_map", lambda *a, **k: maps.append(a[1:]) or real(*a, **k))
    at = run_app()
    at.slider(key="percentile").set_value(87)
    apply(at)
    assert_clean(at)
    assert maps == []
    assert any(m.value.startswith("<table") for m in at.markdown), "the TTFT breakdown is drawn"
    at.session_state["view"] = "Pool-size map"
    at.run()
    assert_clean(at)
    expected = _expected(percentile=87)
    dis = expected.best["disaggregated"].config
    tp_p, tp_d = dis.prefill_tp, dis.decode_tp
    assert maps == [(tp_p, tp_d, 16)]
    cells = real(expected.inputs, tp_p, tp_d, 16)
    heat = next(t for t in _figure(at)["data"] if t["type"] == "heatmap")
    shown = {
        (x, y): v
        for y, row in zip(heat["y"], heat["z"], strict=True)
        for x, v in zip(heat["x"], row, strict=True)
        if v == v
    }
    for n_p, n_d, per_gpu, fits in zip(
        cells["n_prefill"], cells["n_decode"], cells["goodput_rps_per_gpu"], cells["fits"], strict=True
    ):
        if fits and per_gpu > 0:
            assert shown[(int(n_d), int(n_p))] == pytest.approx(per_gpu, rel=1e-9)
    star = next(t for t in _figure(at)["data"] if t.get("name") == "best disaggregated (planner's choice)")
    assert (star["x"][0], star["y"][0]) == (dis.n_decode, dis.n_prefill)


def test_download_json_carries_the_planners_flip_thresholds(monkeypatch):
    """The JSON download is `pdplan plan --json`'s, so its plan is searched for the thresholds."""
    from app_support import panels

    seen = []
    real = panels.results_json
    monkeypatch.setattr(panels, "results_json", lambda plan, *a: seen.append(plan) or real(plan, *a))
    at = run_app("Download")
    assert_clean(at)
    (plan,) = seen
    data = json.loads(real(plan, {s: b.at_goodput for s, b in plan.best.items()}, _spec()))
    expected = model.plan_dict(_expected())
    assert data["flip_thresholds"] == expected["flip_thresholds"] != []
    assert data["verdict"] == expected["verdict"]


def test_infeasible_verdict_shows_what_would_work_without_the_search(plan_calls):
    """With no configuration meeting the targets, the plan already says what would work."""
    at = run_app(query={"model": "llama-3.1-8b", "gpus": "4", "ttft": "1 ms"})
    assert_clean(at)
    assert verdict_of(at) == "none"
    assert plan_calls in ([], [False])  # never with the search ([]: planned by an earlier test)
    expected = model.plan("llama-3.1-8b", "h100-sxm", gpus=4, **{**DEFAULT, "ttft_slo_s": 0.001})
    assert expected.flip_thresholds
    shown = _flip_texts(at)
    for f in expected.flip_thresholds:
        assert md(f.text) in shown
    assert not any(c.value == flips.NOT_SEARCHED for c in at.caption)
