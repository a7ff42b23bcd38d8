"""Hostile input to the web app: URL parameters, scenario files and uploads (issue 13).

Two kinds of test: property/corpus tests over the app's pure input-parsing functions
(``inputs.url_problems``, ``inputs.apply_scenario``, ``inputs.parse``, ``uploads.parse_*``), fast
and run with many cases; and a few AppTest runs of the whole page with hostile query parameters and
files, asserting that no exception escapes, that a bad value is named in a warning, and that an
unexpected error becomes a one-line banner with its traceback in the log.
"""

from __future__ import annotations

import logging
import math

import pytest

pytest.importorskip("streamlit")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

import model
from app_support import guard, inputs, uploads, values
from model.errors import PdplanError

from .test_app import APP, TIMEOUT_S, assert_clean, errors_of, planner_verdict, verdict_of

# Strings a hostile user (or a mangled link) may put anywhere: evaluation attempts, numbers beyond
# a float, non-numbers, separators read the wrong way, invalid Unicode, very long text.
HOSTILE = [
    "9**9**9 s",
    "(10**400) ms",
    "1e999",
    "1e999 ms",
    "-1e999",
    "9" * 400,
    "nan",
    "inf",
    "-5 ms",
    "0",
    "0 ms",
    "-1",
    "1,5 ms",
    "5 ms / s",
    "",
    "   ",
    "\ud800",
    "50 ms\x00",
    "__import__('os')",
    "${7*7}",
    "<script>alert(1)</script>",
    "a" * 10_000,
    "1e-320",
    "1.5",
    "16.0",
    "true",
    "TRUE",
    "[]",
]


def _valid_values(key: str) -> list[str]:
    """URL texts a widget itself would write for ``key`` (so the strategy also hits valid ones)."""
    default = inputs.DEFAULTS[key]
    opts = inputs.choices().get(key)
    if isinstance(default, list):
        return [str(o) for o in opts]
    if opts is not None:
        return [str(o) for o in opts]
    if isinstance(default, bool):
        return ["true", "false"]
    if key in inputs.RANGES:
        lo, hi = inputs.RANGES[key]
        return [str(lo), str(hi), str(default)]
    return [str(default), "0.5 s", "250 ms", "3.2 GB/s", "0.6", "2.5", "700 W"]


@st.composite
def query_params(draw: st.DrawFn) -> dict[str, list[str]]:
    keys = draw(st.lists(st.sampled_from([*sorted(inputs.DEFAULTS), "view", "utm_source"]), max_size=6))
    out = {}
    for key in keys:
        pool = HOSTILE + (_valid_values(key) if key in inputs.DEFAULTS else ["x"])
        one = st.one_of(st.sampled_from(pool), st.text(max_size=30))
        out[key] = draw(st.lists(one, min_size=1, max_size=3))
    return out


def _raw(values: dict) -> inputs.Raw:
    return inputs.Raw({**inputs.DEFAULTS, **values})


def _accepted(params: dict[str, list[str]], flagged: set[str]) -> dict:
    """The widget values the accepted URL parameters give (as Streamlit would seed them)."""
    out = {}
    for key, vals in params.items():
        if key in inputs.DEFAULTS and key not in flagged:
            out[key] = values.check_value(key, values.from_url(key, vals))
    return out


# ---------------------------------------------------------------------------------------------
# URL parameters and scenario files (no Streamlit session)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query_params())
def test_every_unusable_url_parameter_is_named_and_the_rest_plan(params):
    problems = inputs.url_problems(params)
    flagged = {k for k, _ in problems}
    for key, text in problems:
        assert text.startswith(f"URL parameter {key}=") and "ignored: expected" in text
        assert "\n" not in text and len(text) < 1000
        text.encode("utf-8")  # fit for the browser: no lone surrogate
    # every parameter that was not flagged is usable: parse() accepts the resulting inputs
    # (the custom link and the trace/config uploads bring in their own fields, so enable them)
    # An upload source chosen in the URL still needs its file, which a URL cannot carry: that one
    # message is expected and names what to do.
    values = {**_accepted(params, flagged), "link": inputs.CUSTOM_LINK}
    spec, errors = inputs.parse(_raw(values))
    needs_upload = [e for e in errors if e.startswith("Upload a")]
    assert errors == needs_upload, (params, errors)
    assert spec is not None or needs_upload, (params, errors)


@pytest.mark.parametrize("text", HOSTILE)
@pytest.mark.parametrize("key", ["ttft", "tpot", "link_bw", "link_latency", "tdp", "price", "prefill_mfu"])
def test_hostile_text_in_a_quantity_field_is_named_or_read(key, text):
    problems = inputs.url_problems({key: [text]})
    spec, errors = inputs.parse(_raw({key: text, "link": inputs.CUSTOM_LINK}))
    # the URL check and the page's own parsing agree: refused by one means refused by the other
    assert bool(problems) == bool(errors), (problems, errors)
    if spec is not None:
        assert all(
            v is None or not isinstance(v, float) or (math.isfinite(v) and v >= 0)
            for v in spec.values.values()
        )


def test_url_warning_names_value_reason_and_default():
    [(key, text)] = inputs.url_problems({"ttft": ["abc"]})
    assert key == "ttft"
    assert text.startswith("URL parameter ttft='abc' ignored: expected a time such as")
    assert text.endswith("; using 500 ms")
    [(_, text)] = inputs.url_problems({"gpus": ["9" * 400]})
    assert "..." in text and len(text) < 200 and text.endswith("using 16")
    assert inputs.url_problems({"gpus": ["64"], "chunks": ["256", "512"], "layerwise": ["false"]}) == []
    [(_, text)] = inputs.url_problems({"chunks": ["256", "7"]})
    assert "chunks=['256', '7']" in text


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([*sorted(inputs.DEFAULTS), "nope"]),
        st.one_of(
            st.sampled_from(HOSTILE),
            st.none(),
            st.booleans(),
            st.integers(min_value=-(10**30), max_value=10**30),
            st.floats(allow_nan=True, allow_infinity=True),
            st.lists(st.integers(min_value=-5, max_value=9000), max_size=4),
            st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        ),
        max_size=8,
    )
)
def test_every_unusable_scenario_value_is_named(values):
    state: dict = {}
    problems = inputs.apply_scenario({"format": uploads.SCENARIO_FORMAT, "inputs": values}, state)
    for key in values:
        named = any(f" {key}=" in p or repr(key) in p for p in problems)
        assert (key in state) != named, (key, values[key], problems)
    for p in problems:
        assert "\n" not in p and len(p) < 1000
        p.encode("utf-8")
    spec, errors = inputs.parse(_raw({**state, "link": inputs.CUSTOM_LINK}))
    assert errors == [] and spec is not None, (values, errors)


def test_scenario_with_a_lone_surrogate_is_refused_in_one_line():
    data = b'{"format": "pdplan-scenario/1", "inputs": {}, "config": {"name": "\\ud800", "text": "x"}}'
    with pytest.raises(uploads.UploadError, match="not valid Unicode"):
        uploads.parse_scenario("s.json", data)
    state: dict = {}
    problems = inputs.apply_scenario({"config": {"name": "a", "text": "\ud800"}}, state)
    assert problems == ["Scenario file: config ignored: its text is not valid Unicode"]
    assert "restored_config" not in state


# ---------------------------------------------------------------------------------------------
# uploads: a corpus of hostile files, generated here


def _hostile_traces() -> list[tuple[str, bytes]]:
    azure = b"TIMESTAMP,ContextTokens,GeneratedTokens\n"
    return [
        ("deep.jsonl", b"[" * 100_000 + b"]" * 100_000 + b"\n"),
        ("deep-obj.jsonl", b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"\n"),
        ("big-ts.jsonl", b'{"timestamp": 1' + b"0" * 400 + b', "input_length": 10, "output_length": 5}\n'),
        ("big-int.jsonl", b'{"timestamp": 0, "input_length": 1' + b"0" * 5000 + b', "output_length": 5}\n'),
        ("big-ts.csv", azure + b"1" * 400 + b",10,10\n"),
        ("huge-field.csv", azure + b'"' + b"x" * 300_000 + b'",10,10\n'),
        ("nan.csv", azure + b"2023-11-16 18:15:46.5,nan,inf\n"),
        ("neg.csv", azure + b"2023-11-16 18:15:46.5,-10,-1\n"),
        ("binary.csv", bytes(range(256)) * 4),
        ("bom.csv", b"\xef\xbb\xbf" + azure + b"2023-11-16 18:15:46.5,10,10\n"),
        ("nul.csv", azure + b"2023-11-16 18:15:46.5,1\x000,10\n"),
        ("surrogate.jsonl", b'{"timestamp": 0, "input_length": 10, "output_length": 5, "x": "\\ud800"}\n'),
        ("../../etc/passwd", azure + b"2023-11-16 18:15:46.5,10,10\n"),
        ("empty.csv", b"   \n"),
    ]


@pytest.mark.parametrize(("name", "data"), _hostile_traces(), ids=lambda x: x if isinstance(x, str) else "")
def test_hostile_trace_upload_is_a_trace_or_one_line(name, data):
    try:
        trace = uploads.parse_trace(name, data)
    except uploads.UploadError as err:
        text = str(err)
        assert "\n" not in text and "/tmp" not in text and "pdplan-trace-" not in text
        return
    assert len(trace) >= 1


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400) | st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_arbitrary_bytes_as_upload_raise_only_upload_errors(data):
    for parse in (
        lambda: uploads.parse_scenario("s.json", data),
        lambda: uploads.parse_config("config.json", data.decode("utf-8", "replace")),
        lambda: uploads.parse_trace("t.jsonl", data),
    ):
        try:
            parse()
        except uploads.UploadError as err:
            assert "\n" not in str(err)


def test_size_is_checked_before_reading():
    with pytest.raises(uploads.UploadError, match="too large"):
        uploads.check_size_only("t.csv", uploads.MAX_TRACE_BYTES + 1, uploads.MAX_TRACE_BYTES, "trace")
    uploads.check_size_only("t.csv", uploads.MAX_TRACE_BYTES, uploads.MAX_TRACE_BYTES, "trace")


# ---------------------------------------------------------------------------------------------
# the page guard


def test_guard_banner_is_one_line_without_details():
    text, ref = guard.banner_text(RuntimeError("/srv/secret/path.py line 3\nboom"))
    assert ref is not None and ref in text and "/srv" not in text and "RuntimeError" in text
    text, ref = guard.banner_text(model.InputError("TTFT target", "abc", "a time"))
    assert ref is None and text == "TTFT target: got 'abc'; allowed: a time"
    assert guard.one_line(ValueError("a\nb\ud800")) == "a b\\ud800"
    assert len(guard.one_line(ValueError("x" * 5000))) == guard.MAX_MESSAGE_CHARS


# ---------------------------------------------------------------------------------------------
# the whole page (AppTest)


def _run(query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    return at.run()


@pytest.mark.parametrize(
    ("query", "needle"),
    [
        ({"gpus": "9" * 400}, "URL parameter gpus="),
        ({"ttft": "1e999 ms"}, "URL parameter ttft='1e999 ms' ignored"),
        ({"tpot": "9**9**9 s"}, "URL parameter tpot='9**9**9 s' ignored"),
        ({"link": "../../etc/passwd"}, "URL parameter link="),
        ({"attainment": "nan", "chunks": "7"}, "URL parameter attainment='nan' ignored"),
    ],
    ids=["400-digit-int", "huge-exponent", "power-expression", "path-choice", "nan-and-bad-list"],
)
def test_hostile_url_parameters_are_named_and_defaults_used(query, needle):
    at = _run(query)
    assert_clean(at)
    warnings = [w.value for w in at.warning]
    assert any(needle in w for w in warnings), warnings
    assert not errors_of(at)
    assert verdict_of(at) == planner_verdict()  # every input at its default
    for key in query:
        assert key not in at.query_params  # dropped from the URL, so a reload does not warn again


def test_valid_url_parameters_next_to_a_bad_one_still_apply():
    at = _run({"gpus": "64", "link": "eth-1g", "ttft": "abc"})
    assert_clean(at)
    assert [w.value for w in at.warning] == [
        "URL parameter ttft='abc' ignored: expected a time such as '500 ms' or '2 s' "
        "(a plain number, then a unit); using 500 ms"
    ]
    assert at.number_input(key="gpus").value == 64
    assert verdict_of(at) == planner_verdict(gpus=64, link="eth-1g")


@pytest.mark.parametrize(
    ("name", "data", "needle"),
    [
        ("deep.jsonl", b"[" * 100_000 + b"]" * 100_000 + b"\n", "deep.jsonl"),
        ("ts.jsonl", b'{"timestamp": 1' + b"0" * 400 + b', "input_length": 1}\n', "ts.jsonl"),
    ],
    ids=["deep-nesting", "400-digit-timestamp"],
)
def test_hostile_trace_upload_is_a_banner(name, data, needle):
    at = _run()
    at.radio(key="workload_source").set_value(inputs.TRACE_UPLOAD)
    at.file_uploader(key="trace_upload").set_value((name, data, "text/plain"))
    at.button(key="apply").click().run()
    assert_clean(at)
    errs = errors_of(at)
    assert len(errs) == 1 and needle in errs[0] and "\n" not in errs[0] and "/tmp" not in errs[0]


def test_scenario_with_a_lone_surrogate_is_a_banner():
    at = _run()
    data = b'{"format": "pdplan-scenario/1", "inputs": {}, "trace": {"name": "\\ud800", "text": ""}}'
    at.file_uploader(key="scenario_upload").set_value(("s.json", data, "application/json")).run()
    assert_clean(at)
    assert any("not valid Unicode" in e for e in errors_of(at))


def test_unexpected_error_is_a_banner_and_a_logged_traceback(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("/srv/pdplan/secret.py exploded")

    monkeypatch.setattr(model, "plan", broken)
    with caplog.at_level(logging.ERROR, logger="pdplan.app"):
        at = _run({"gpus": "17"})  # inputs not planned before in this process, so not cached
    assert_clean(at)
    [banner] = errors_of(at)
    assert banner.startswith("Unexpected error (RuntimeError)") and "/srv" not in banner
    [record] = [r for r in caplog.records if r.name == "pdplan.app"]
    assert record.exc_info is not None and "secret.py exploded" in str(record.exc_info[1])
    assert record.getMessage().split()[-1].rstrip(")") in banner  # the reference links the two


def test_project_errors_from_the_model_are_shown_as_they_are(monkeypatch):
    def refuse(*args, **kwargs):
        raise PdplanError("gpus: got 18; allowed: something else")

    monkeypatch.setattr(model, "plan", refuse)
    at = _run({"gpus": "18"})
    assert_clean(at)
    assert errors_of(at) == ["gpus: got 18; allowed: something else"]
