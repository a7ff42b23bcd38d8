"""The app's "Load: rate | concurrency" choice (app_support/concurrency.py) with AppTest: "rate" by
default (no closed-loop work on a page run); "concurrency" shows model.plan_concurrency's verdict
and table for the page's inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_load_choice_is_rate_by_default_then_shows_the_closed_loop_plan() -> None:
    at = AppTest.from_file(APP, default_timeout=300).run()
    assert not at.exception
    assert at.radio(key="load_mode").value == "rate"
    assert not [d for d in at.dataframe if "max users within SLO" in d.value.columns]
    at.radio(key="load_mode").set_value("concurrency").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    at.number_input(key="conc_users").set_value(16).run()
    assert not at.exception, [e.message for e in at.exception]
    tables = [d.value for d in at.dataframe if "max users within SLO" in d.value.columns]
    assert len(tables) == 1
    table = tables[0]
    assert "req/s at 16" in table.columns
    assert len(table) >= 2
    assert any("Fixed concurrency, 16 users" in m.value for m in at.markdown)
