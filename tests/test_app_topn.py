"""The app's "Alternatives" and "Frontier" views (app_support/alternatives.py, app_support/frontier.py)."""

from __future__ import annotations

from tests.test_app import assert_clean, run_app


def test_alternatives_tab_lists_the_plans_top_n() -> None:
    at = run_app("Alternatives")
    assert_clean(at)
    tables = [m.value for m in at.markdown if m.value.startswith("**Overall**")]
    assert len(tables) == 1
    lines = tables[0].splitlines()[2:]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header[:3] == ["#", "style", "configuration"]
    assert {"goodput", "cost per M output tokens", "binding"} <= set(header)
    ranks = [int(line.strip("|").split("|")[0]) for line in lines[2:]]
    assert ranks == list(range(1, 6))  # the default top 5
    # One table per style meeting the SLOs.
    assert (
        sum(m.value.startswith("**colocated") or m.value.startswith("**disaggregated") for m in at.markdown)
        >= 2
    )


def test_frontier_tab_draws_the_chart_with_the_slo_region() -> None:
    at = run_app("Frontier")
    assert_clean(at)
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    assert any("TPOT" in c.value for c in at.caption)
