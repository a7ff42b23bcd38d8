"""The app's "Alternatives" and "Frontier" views (app_support/alternatives.py, app_support/frontier.py)."""

from __future__ import annotations

from tests.test_app import assert_clean, run_app


def test_alternatives_tab_lists_the_plans_top_n() -> None:
    at = run_app("Alternatives")
    assert_clean(at)
    frames = at.dataframe
    # Overall plus one table per style that meets the SLOs.
    assert len(frames) >= 2
    overall = frames[0].value
    assert list(overall["#"]) == list(range(1, len(overall) + 1))
    assert {"configuration", "goodput", "cost per M output tokens", "binding"} <= set(overall.columns)


def test_frontier_tab_draws_the_chart_with_the_slo_region() -> None:
    at = run_app("Frontier")
    assert_clean(at)
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    assert any("TPOT" in c.value for c in at.caption)
