"""The app's pin-and-compare panel and its "no configuration meets the targets" panel (issue 19),
with streamlit.testing.v1.AppTest. Numbers are compared with model.plan on the same inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

import model
from app_support.compare import PINNED
from model.units import format_rate, format_time

APP = str(Path(__file__).resolve().parents[1] / "app.py")
QUERY = {"model": "llama-3.1-8b", "gpus": "4"}
TARGETS = {"workload": "chat", "ttft_slo_s": 0.5, "tpot_slo_s": 0.05}


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in QUERY.items():
        at.query_params[k] = v
    return at.run()


def _markdown(at: AppTest, needle: str) -> str:
    return next((m.value for m in at.markdown if needle in m.value), "")


def test_pin_a_scenario_and_compare_it_with_the_current_one():
    at = _app()
    assert not at.exception
    assert PINNED not in at.session_state or at.session_state[PINNED] is None
    at.button(key="pin_scenario").click().run()
    at.number_input(key="gpus").set_value(8)
    at.button(key="apply").click().run()
    assert not at.exception, [e.message for e in at.exception]
    table = _markdown(at, "current - pinned")
    four = model.plan("llama-3.1-8b", "h100-sxm", gpus=4, **TARGETS)
    eight = model.plan("llama-3.1-8b", "h100-sxm", gpus=8, **TARGETS)
    row = next(line for line in table.splitlines() if line.startswith("| goodput"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == format_rate(four.best[four.verdict].goodput_rps)
    assert cells[2] == format_rate(eight.best[eight.verdict].goodput_rps)
    assert "pinned: llama-3.1-8b on 4 GPUs" in table and "current: llama-3.1-8b on 8 GPUs" in table
    gpus_row = next(line for line in table.splitlines() if line.startswith("| GPUs"))
    assert gpus_row.rstrip(" |").endswith(
        f"+{eight.best[eight.verdict].n_gpus - four.best[four.verdict].n_gpus} (+100%)"
    )
    at.button(key="unpin_scenario").click().run()
    assert at.session_state[PINNED] is None and not _markdown(at, "current - pinned")


def test_an_impossible_ttft_shows_the_infeasibility_panel():
    at = _app()
    at.text_input(key="ttft").set_value("1 ms")
    at.button(key="apply").click().run()
    assert not at.exception, [e.message for e in at.exception]
    inf = model.plan("llama-3.1-8b", "h100-sxm", gpus=4, **{**TARGETS, "ttft_slo_s": 0.001}).infeasibility
    assert inf.binding == "ttft"
    assert "Binding: TTFT" in _markdown(at, "No configuration meets the targets")
    panel = _markdown(at, "lowest reachable")
    assert format_time(inf.lowest_ttft_s) in panel and format_time(inf.ttft_that_works_s) in panel
    # "What would flip it" lists the targets that would work.
    assert "TTFT target of" in _markdown(at, "works with the other target")
