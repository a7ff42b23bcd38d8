"""Tests of the Streamlit app (app.py) with streamlit.testing.v1.AppTest.

The app's verdicts are compared with ``model.plan`` on the same inputs (never hard-coded), so these
tests check the wiring from widgets to the planner, not the model itself. Plans are cached per
process (st.cache_resource), so scenarios shared between tests are computed once.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

import model
from app_support import inputs, panels, uploads

REPO = Path(__file__).resolve().parents[1]
APP = str(REPO / "app.py")
TIMEOUT_S = 120
DEFAULT = {
    "workload": "chat",
    "ttft_slo_s": 0.5,
    "tpot_slo_s": 0.05,
    "percentile": 90,
    "attainment": 0.9,
    "link": "ib-ndr-400",
}
AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def run_app(view: str | None = None, query: dict[str, str] | None = None, advanced: bool = False) -> AppTest:
    """The page after its first run; ``advanced``: with the *Advanced inputs* toggle on, so that
    the advanced fields are drawn (app_support.advanced)."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    if advanced:
        at.session_state["advanced"] = True
    for k, v in (query or {}).items():
        at.query_params[k] = v
    if view is not None:
        at.session_state["view"] = view
    return at.run()


def apply(at: AppTest) -> AppTest:
    """Press the input form's *Apply* button (the sidebar's values reach the app only then)."""
    return at.button(key="apply").click().run()


def verdict_of(at: AppTest) -> str | None:
    for m in at.markdown:
        hit = re.match(r"^## Verdict: (\S+)", m.value)
        if hit:
            return hit.group(1)
    return None


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]


def errors_of(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def planner_verdict(model_name: str = "llama-3.1-70b", gpu: str = "h100-sxm", **overrides) -> str:
    kwargs = {**DEFAULT, "gpus": 16, **overrides}
    return model.plan(model_name, gpu, **kwargs).verdict


def azure_csv(n: int = 60) -> bytes:
    rows = [f"2023-11-16 18:{15 + i // 60:02d}:{i % 60:02d}.5000000,{200 + 37 * i % 900},{20 + 13 * i % 300}"
            for i in range(n)]  # fmt: skip
    return (AZURE_HEADER + "\n".join(rows) + "\n").encode()


# ---------------------------------------------------------------------------------------------
# the default page


def test_default_page_shows_the_planners_verdict():
    at = run_app()
    assert_clean(at)
    assert not errors_of(at)
    shown = verdict_of(at)
    assert shown in ("colocated", "colocated-chunked", "disaggregated", "none")
    assert shown == planner_verdict()
    # the side-by-side table has a column per style; the open tab (TTFT breakdown) is a table, no chart
    table = next(m.value for m in at.markdown if m.value.startswith("| |"))
    for style in ("colocated", "colocated-chunked", "disaggregated"):
        assert style in table
    assert not at.get("plotly_chart")
    assert any(m.value.startswith("<table") and "p90 TTFT" in m.value for m in at.markdown)


def test_unchanged_inputs_reuse_the_cached_plan(monkeypatch):
    at = run_app()
    calls = []
    real = model.plan
    monkeypatch.setattr(model, "plan", lambda *a, **k: calls.append(1) or real(*a, **k))
    at.slider(key="percentile").set_value(91)  # new inputs: planned once
    apply(at)
    at.slider(key="percentile").set_value(90)  # back to the first inputs: cached
    apply(at)
    assert_clean(at)
    assert len(calls) == 1
    at.number_input(key="rate").set_value(12.0)  # view-only input: no new plan
    apply(at)
    assert len(calls) == 1, "a view-only change should not re-plan"


# ---------------------------------------------------------------------------------------------
# inputs change the verdict as the planner says


@pytest.mark.parametrize("link", ["ib-ndr-400", "eth-1g"])
def test_known_scenario_follows_the_planner(link):
    at = run_app()
    at.number_input(key="gpus").set_value(64)
    at.selectbox(key="link").set_value(link)
    apply(at)
    assert_clean(at)
    assert verdict_of(at) == planner_verdict(gpus=64, link=link)


def test_url_query_string_sets_the_inputs():
    at = run_app(query={"gpus": "64", "link": "eth-1g", "ttft": "500 ms"})
    assert_clean(at)
    assert at.number_input(key="gpus").value == 64
    assert at.selectbox(key="link").value == "eth-1g"
    assert verdict_of(at) == planner_verdict(gpus=64, link="eth-1g")


def test_scenario_file_restores_inputs():
    state = {**inputs.DEFAULTS, "gpus": 64, "link": "eth-1g", "tpot": "50 ms"}
    spec = inputs.Spec({"config_text": None, "trace_name": None})
    text = inputs.scenario_json(spec, state=state)
    assert json.loads(text)["inputs"]["gpus"] == 64
    at = run_app()
    at.file_uploader(key="scenario_upload").set_value(
        ("pdplan-scenario.json", text.encode(), "application/json")
    )
    at.run()
    assert_clean(at)
    assert at.number_input(key="gpus").value == 64
    assert at.selectbox(key="link").value == "eth-1g"
    assert verdict_of(at) == planner_verdict(gpus=64, link="eth-1g")


def test_target_rate_mode_follows_the_planner():
    at = run_app(query={"mode": inputs.TARGET, "target_rate": "12", "objective": "cost"})
    assert_clean(at)
    assert at.radio(key="mode").value == inputs.TARGET
    kwargs = {k: v for k, v in DEFAULT.items()}
    expected = model.plan("llama-3.1-70b", "h100-sxm", target_rate_rps=12.0, objective="cost", **kwargs)
    assert verdict_of(at) == expected.verdict
    table = next(m.value for m in at.markdown if m.value.startswith("| |"))
    for style, b in expected.best.items():
        assert b.label in table.replace("\\", ""), style


def test_too_small_a_budget_says_none_without_failing():
    at = run_app(query={"gpus": "1"})
    assert_clean(at)
    assert verdict_of(at) == planner_verdict(gpus=1) == "none"


def test_efficiency_and_price_overrides_reach_the_planner():
    at = run_app(
        query={"prefill_mfu": "0.3", "decode_mbu": "0.5", "price": "1.25", "tdp": "650 W"}, advanced=True
    )
    assert_clean(at)
    assert not errors_of(at)
    gpu = dataclasses.replace(
        model.get_gpu("h100-sxm"), prefill_mfu=0.3, decode_mbu=0.5, price_usd_per_hour=1.25, tdp_w=650.0
    )
    expected = model.plan("llama-3.1-70b", gpu, gpus=16, **DEFAULT)
    assert verdict_of(at) == expected.verdict
    table = next(m.value for m in at.markdown if m.value.startswith("| |"))
    assert "16 GPUs / $20.00/h" in table.replace("\\", "")  # 16 GPUs x $1.25
    at.text_input(key="tdp").set_value("10 W")  # below the profile's idle power
    apply(at)
    assert_clean(at)
    assert any("idle" in e for e in errors_of(at))


def test_scenario_file_carries_the_uploaded_config():
    text = (REPO / "model" / "llm" / "configs" / "llama-3.1-8b.json").read_text()
    state = {**inputs.DEFAULTS, "model_source": inputs.CONFIG_UPLOAD, "gpus": 4}
    spec = inputs.Spec({"config_text": text, "config_name": "my-config.json", "trace_name": None})
    at = run_app()
    data = inputs.scenario_json(spec, state=state).encode()
    at.file_uploader(key="scenario_upload").set_value(("scenario.json", data, "application/json")).run()
    assert_clean(at)
    assert not errors_of(at)
    assert at.radio(key="model_source").value == inputs.CONFIG_UPLOAD
    arch = model.llm.hf_config.parse_hf_config_text(text, where="my-config.json")
    assert verdict_of(at) == planner_verdict(arch, gpus=4)


def test_custom_link_and_units_read_with_pint():
    at = run_app()
    at.selectbox(key="link").set_value("custom")
    at.text_input(key="link_bw").set_value("3.2 GB/s")
    at.text_input(key="ttft").set_value("0.5 s")
    apply(at)
    assert_clean(at)
    assert not errors_of(at)
    custom = model.Link("custom", "custom", "network", 3.2e9, 10e-6, 0.9)
    assert verdict_of(at) == planner_verdict(link=custom)
    at.text_input(key="link_bw").set_value("fast")
    apply(at)
    assert_clean(at)
    assert any("link bandwidth" in e for e in errors_of(at))
    assert verdict_of(at) is None


def test_bad_slo_text_is_an_error_message():
    at = run_app()
    at.text_input(key="tpot").set_value("50 GB")
    apply(at)
    assert_clean(at)
    assert any("TPOT target" in e for e in errors_of(at))


# ---------------------------------------------------------------------------------------------
# uploads


def _upload_config(at: AppTest, name: str, data: bytes) -> AppTest:
    at.radio(key="model_source").set_value(inputs.CONFIG_UPLOAD)
    at.file_uploader(key="config_upload").set_value((name, data, "application/json"))
    return apply(at)


def _upload_trace(at: AppTest, name: str, data: bytes) -> AppTest:
    at.radio(key="workload_source").set_value(inputs.TRACE_UPLOAD)
    at.file_uploader(key="trace_upload").set_value((name, data, "text/csv"))
    return apply(at)


def test_valid_config_upload_is_planned():
    text = (REPO / "model" / "llm" / "configs" / "llama-3.1-8b.json").read_text()
    at = _upload_config(run_app(), "config.json", text.encode())
    assert_clean(at)
    assert not errors_of(at)
    arch = model.llm.hf_config.parse_hf_config_text(text, where="config.json")
    assert verdict_of(at) == planner_verdict(arch)


@pytest.mark.parametrize(
    ("name", "data", "needle"),
    [
        ("config.json", b'{"model_type": "llama", "hidden_size": ', "config.json"),
        ("config.json", b'{"model_type": "llama"}', "config.json"),
        ("config.json", b"\xff\xfe\x00binary", "UTF-8"),
        ("config.json", b" " * 10 + b"{" + b"0" * (uploads.MAX_CONFIG_BYTES + 10) + b"}", "too large"),
    ],
    ids=["truncated", "missing-fields", "binary", "huge"],
)
def test_invalid_config_upload_shows_an_error(name, data, needle):
    at = _upload_config(run_app(), name, data)
    assert_clean(at)
    errs = errors_of(at)
    assert errs and any(needle in e for e in errs), errs
    assert verdict_of(at) is None


def test_valid_trace_upload_is_planned():
    at = _upload_trace(run_app(), "azure.csv", azure_csv())
    assert_clean(at)
    assert not errors_of(at)
    assert verdict_of(at) in ("colocated", "colocated-chunked", "disaggregated", "none")


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (AZURE_HEADER.encode() + b"2023-11-16 18:15:46.5,100,not-a-number\n", "GeneratedTokens"),
        (b"time,prompt,output\n1,2,3\n", "unrecognised trace format"),
        (AZURE_HEADER.encode() + b"x" * (uploads.MAX_TRACE_BYTES + 1), "too large"),
        (b"", "empty"),
    ],
    ids=["bad-cell", "unknown-format", "huge", "empty"],
)
def test_invalid_trace_upload_shows_an_error(data, needle):
    at = _upload_trace(run_app(), "trace.csv", data)
    assert_clean(at)
    errs = errors_of(at)
    assert errs and any(needle in e for e in errs), errs
    assert all("/tmp" not in e for e in errs), "the temporary path must not leak into the message"


def test_broken_scenario_file_shows_an_error():
    at = run_app()
    at.file_uploader(key="scenario_upload").set_value(("s.json", b"{not json", "application/json")).run()
    assert_clean(at)
    assert any("not valid JSON" in e for e in errors_of(at))
    bad = json.dumps({"format": uploads.SCENARIO_FORMAT, "inputs": {"gpus": "lots", "nope": 1}}).encode()
    at.file_uploader(key="scenario_upload").set_value(("s2.json", bad, "application/json")).run()
    assert_clean(at)
    warnings = [w.value for w in at.warning]
    assert any("gpus" in w for w in warnings) and any("nope" in w for w in warnings)
    assert verdict_of(at) == planner_verdict()


@pytest.mark.parametrize(
    "key, value", [("percentile", 10), ("attainment", 0.1), ("margin", 1.5), ("link_eff", 5)]
)
def test_scenario_values_outside_a_widget_range_are_warnings(key, value):
    at = run_app()
    bad = json.dumps({"format": uploads.SCENARIO_FORMAT, "inputs": {key: value}}).encode()
    at.file_uploader(key="scenario_upload").set_value((f"{key}.json", bad, "application/json")).run()
    assert_clean(at)
    assert any(key in w.value and "in [" in w.value for w in at.warning)


# ---------------------------------------------------------------------------------------------
# the tabs


@pytest.mark.parametrize("view", ["Latency vs rate", "Roofline", "Memory"])
def test_chart_tabs_draw(view):
    at = run_app(view)
    assert_clean(at)
    assert len(at.get("plotly_chart")) >= 1


def test_show_the_math_has_substituted_latex():
    at = run_app("Show the math")
    assert_clean(at)
    blocks = [m.value for m in at.markdown if "$$" in m.value]
    assert blocks, "no LaTeX blocks"
    assert any("prefill" in b and re.search(r"= [0-9.]+\\ \\mathrm\{ms\}", b) for b in blocks)


def test_verify_by_simulation_side_by_side():
    at = run_app("Verify by simulation")
    at.select_slider(key="sim_n").set_value(250)
    at.button(key="sim_run").click().run()
    assert_clean(at)
    tables = [m.value for m in at.markdown if "| analytical | simulated |" in m.value]
    assert tables and all("TTFT p90" in t for t in tables)


def test_download_results_match_the_plan():
    at = run_app("Download")
    assert_clean(at)
    assert [d.label for d in at.get("download_button")] == [
        "Results (CSV)",
        "Results (JSON)",
        "Scenario (JSON)",
        "Deployment recipes (zip)",
    ]
    p = model.plan("llama-3.1-70b", "h100-sxm", gpus=16, **DEFAULT)
    evals = {s: b.at_goodput for s, b in p.best.items()}
    rows = list(csv.DictReader(io.StringIO(panels.results_csv(p, evals))))
    assert {r["style"] for r in rows} == set(p.best)
    assert all(r["verdict"] == p.verdict for r in rows)
    spec = inputs.Spec({"rate_rps": 0.0, "config_text": None})
    data = json.loads(panels.results_json(p, evals, spec))
    assert data["verdict"] == p.verdict and set(data["evaluated_at"]) == set(p.best)
