"""The app's "Load over a day" section (app_support/schedule.py) with AppTest: closed and off by
default (no work on every page run: nothing inside the closed expander is drawn); opened and on, it
draws the curve and pool sizes and tabulates model.schedule's GPU-hours for the page's default
inputs; its inputs survive closing it; a bad curve is one error line, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

import model
from app_support.schedule import OPEN_KEY

APP = str(Path(__file__).resolve().parents[1] / "app.py")
# The page's defaults (tests/test_app.py: DEFAULT and planner_verdict's model, GPU).
DEFAULT = {"workload": "chat", "ttft_slo_s": 0.5, "tpot_slo_s": 0.05, "percentile": 90, "attainment": 0.9}


def _opened() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180).run()
    assert not at.exception
    assert not any(n.key == "sched_peak" for n in at.number_input)  # closed: its content is not drawn
    at.session_state[OPEN_KEY] = True
    return at.run()


def test_schedule_section_is_off_by_default_then_matches_model_schedule() -> None:
    at = _opened()
    assert not at.exception
    assert not at.get("plotly_chart")  # the open tab has no chart, and the schedule is not computed
    at.number_input(key="sched_peak").set_value(3.0)
    at.toggle(key="sched_on").set_value(True)
    at.button(key="apply").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert len(at.get("plotly_chart")) == 1
    table = at.dataframe[0].value
    shown = dict(zip(table["style"], table["GPU-hours"], strict=True))
    expected = model.schedule(model.diurnal_curve(3.0), "llama-3.1-70b", "h100-sxm", **DEFAULT)
    assert set(shown) == set(expected.styles)
    for name, s in expected.styles.items():
        assert shown[name] == pytest.approx(round(s.gpu_hours, 1))
    # Closing the section draws and computes nothing in it and keeps its inputs; reopening shows the
    # same schedule.
    at.session_state[OPEN_KEY] = False
    at.run()
    assert not at.get("plotly_chart") and not at.exception
    at.session_state[OPEN_KEY] = True
    at.run()
    assert not at.exception
    assert at.number_input(key="sched_peak").value == 3.0 and at.toggle(key="sched_on").value
    assert len(at.get("plotly_chart")) == 1


def test_schedule_section_bad_peak_is_an_error_line() -> None:
    at = _opened()
    at.number_input(key="sched_peak").set_value(1e5)  # far beyond any configuration within max_gpus
    at.toggle(key="sched_on").set_value(True)
    at.button(key="apply").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.error or at.warning
