"""Plain lengths (issue 18): --isl/--osl, --isl-dist/--osl-dist and model.workload_from_lengths."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import model
from model.cli import main
from model.cli.common import to_jsonable
from model.errors import InputError
from model.limits import MAX_TOKENS
from model.workload.lengths import Fixed, LengthDist, LogNormal, Uniform
from model.workload.plain import parse_length_spec, workload_from_lengths

PLAN = ["plan", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--ttft-slo", "2s", "--tpot-slo", "100ms"]
PLAN_SIZE = ["--gpus", "8", "--tp", "1,2", "--chunks", "512", "--no-thresholds", "--json"]
SIM = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--style", "colocated"]


def test_fixed_lengths_sample_exactly_n():
    wl = workload_from_lengths(isl=4000, osl=500)
    prompt, output = wl.sample_requests(1000, np.random.default_rng(1))
    assert prompt.dtype == np.int64 and output.dtype == np.int64
    assert np.all(prompt == 4000) and np.all(output == 500)
    assert wl.mean_prompt_tokens == 4000.0 and wl.mean_output_tokens == 500.0
    assert wl.prompt_tokens.scv() == 0.0
    assert wl.name == "isl=4000; osl=500"


def test_fixed_spec_is_the_fixed_flag():
    assert parse_length_spec("fixed:4000", "isl_dist") == Fixed(4000)
    assert parse_length_spec(" FIXED:4e3 ", "isl_dist") == Fixed(4000)


def test_lognormal_spec_mean_and_cv():
    d = parse_length_spec("lognormal:mean=2000,cv=1", "isl_dist")
    assert isinstance(d, LogNormal)
    # sigma^2 = ln(1 + cv^2) = ln 2, mu = ln 2000 - ln(2) / 2 (LogNormal.from_mean_scv)
    assert d.sigma == pytest.approx(math.sqrt(math.log(2.0)), rel=1e-12)
    assert d.mu == pytest.approx(math.log(2000.0) - math.log(2.0) / 2, rel=1e-12)
    assert d.mean() == pytest.approx(2000.0, rel=1e-6)  # clipping at 1 token moves it by < 1e-6
    assert d.scv() == pytest.approx(1.0, rel=1e-4)
    x = d.sample(200_000, np.random.default_rng(7))
    assert np.mean(x) == pytest.approx(2000.0, rel=0.02)  # standard error 0.22%
    assert np.std(x) / np.mean(x) == pytest.approx(1.0, rel=0.05)
    # keys in either order give the same law
    assert parse_length_spec("lognormal:cv=1,mean=2000", "isl_dist") == d


def test_uniform_spec_hand_check():
    d = parse_length_spec("uniform:low=100,high=300", "osl_dist")
    assert d == Uniform(100.0, 300.0)
    assert d.mean() == pytest.approx(200.0)  # (100 + 300) / 2
    assert d.variance() == pytest.approx(200.0**2 / 12)  # (high - low)^2 / 12
    x = d.sample(10_000, np.random.default_rng(0))
    assert x.min() >= 100 and x.max() <= 300
    assert np.mean(x) == pytest.approx(200.0, rel=0.01)


def test_api_mixes_fixed_and_distributions():
    wl = model.workload_from_lengths(isl_dist="uniform:low=10,high=20", osl=7)
    prompt, output = wl.sample_requests(500, np.random.default_rng(3))
    assert np.all((prompt >= 10) & (prompt <= 20)) and np.all(output == 7)
    wl2 = model.workload_from_lengths(isl_dist=Fixed(3), osl_dist=LogNormal.fit(100, 200))
    assert isinstance(wl2.output_tokens, LogNormal) and wl2.mean_prompt_tokens == 3.0


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("lognormal:mean=-1,cv=1", "isl_dist mean"),
        ("lognormal:mean=-1", "isl_dist"),
        ("lognormal:mean=100,cv=0", "isl_dist cv"),
        ("lognormal:mean=100,cv=nan", "isl_dist"),
        ("lognormal:mean=100,cv=1,cv=2", "isl_dist"),
        ("weird:1", "isl_dist"),
        ("fixed:1e999", "isl_dist"),
        ("fixed:0", "isl_dist"),
        ("fixed:2.5", "isl_dist"),
        (f"fixed:{MAX_TOKENS + 1}", "isl_dist"),
        ("fixed:9**9**9", "isl_dist"),
        ("fixed:__import__('os')", "isl_dist"),
        ("uniform:low=300,high=100", "isl_dist high"),
        ("uniform:low=0.5,high=100", "isl_dist low"),
        ("x" * 1000, "isl_dist"),
        ("fixed:" + "9" * 1000, "isl_dist"),
        ("", "isl_dist"),
    ],
)
def test_bad_specs_are_one_line_input_errors(spec, field):
    with pytest.raises(InputError) as err:
        parse_length_spec(spec, "isl_dist")
    assert err.value.field == field
    msg = str(err.value)
    assert "\n" not in msg and len(msg) < 300
    if field == "isl_dist":
        assert any(s in msg for s in ("fixed:N", "tokens", "characters", "lognormal:mean=..."))


def test_api_needs_exactly_one_of_each_side():
    with pytest.raises(InputError, match="isl"):
        workload_from_lengths(osl=5)
    with pytest.raises(InputError, match="isl"):
        workload_from_lengths(isl=5, isl_dist="fixed:5", osl=5)
    with pytest.raises(InputError, match="osl"):
        workload_from_lengths(isl=5, osl=0)
    with pytest.raises(InputError, match="osl"):
        workload_from_lengths(isl=5, osl=True)
    with pytest.raises(InputError):
        model.workload_from_lengths(isl=9**9**2, osl=5)
    with pytest.raises(InputError):
        model.workload_from_lengths(isl="4000", osl=5)  # type checked at the API edge


@settings(max_examples=200, deadline=None)
@given(
    st.text(max_size=60) | st.from_regex(r"(fixed|lognormal|uniform):[a-z0-9=,.eE+-]{0,30}", fullmatch=True)
)
def test_any_spec_parses_or_raises_input_error(spec):
    try:
        d = parse_length_spec(spec, "osl_dist")
    except InputError as err:
        assert "\n" not in str(err)
        return
    assert isinstance(d, LengthDist)
    assert 1.0 <= d.mean() <= MAX_TOKENS and math.isfinite(d.moment(2))


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--isl-dist", "lognormal:mean=-1", "--osl", "5"], "--isl-dist"),
        (["--isl-dist", "lognormal:mean=-1,cv=1", "--osl", "5"], "--isl-dist mean"),
        (["--isl-dist", "weird:1", "--osl", "5"], "fixed:N"),
        (["--isl-dist", "fixed:1e999", "--osl", "5"], "--isl-dist"),
        (["--isl", "9**9**9", "--osl", "5"], "--isl"),
        (["--isl", "100", "--osl-dist", "y" * 1000], "--osl-dist"),
        (["--isl", "100"], "--osl"),
        (["--workload", "chat", "--osl", "5"], "--osl"),
        (["--workload", "chat", "--isl", "5", "--osl", "5"], "not allowed"),
        (["--isl", "5", "--isl-dist", "fixed:5", "--osl", "5"], "not allowed"),
        (["--isl", "5", "--osl", "5", "--osl-dist", "fixed:5"], "not allowed"),
    ],
)
@pytest.mark.parametrize("command", ["plan", "simulate"])
def test_cli_bad_lengths_exit_2_with_one_line(command, args, needle, capsys):
    base = [*PLAN, *PLAN_SIZE] if command == "plan" else [*SIM, "--rate", "1", "--requests", "20"]
    assert main([*base, *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err
    assert len(err) < 500


def test_cli_plan_fixed_lengths_matches_the_api(capsys):
    assert main([*PLAN, "--isl", "4000", "--osl", "500", *PLAN_SIZE]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] in ("colocated", "colocated-chunked", "disaggregated")
    api = model.plan(
        "llama-3.1-8b",
        "h100-sxm",
        workload=model.workload_from_lengths(isl=4000, osl=500),
        ttft_slo_s=2.0,
        tpot_slo_s=0.1,
        gpus=8,
        tp_options=(1, 2),
        chunk_options=(512,),
        thresholds=False,
    )
    assert json.loads(json.dumps(to_jsonable(model.plan_dict(api)))) == out


def test_cli_simulate_fixed_lengths(capsys):
    args = [*SIM, "--isl", "1000", "--osl", "100", "--rate", "2", "--requests", "40", "--json"]
    assert main(args) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["requests"] == 40 and s["completed"] == 40
    # every request produced exactly 100 output tokens: output tokens / s * makespan = 40 * 100
    assert s["output_tokens_per_s"] * s["makespan_s"] == pytest.approx(4000.0, rel=1e-9)


def test_cli_simulate_distribution_lengths(capsys):
    args = [*SIM, "--isl-dist", "uniform:low=500,high=1500", "--osl-dist", "lognormal:mean=100,cv=0.5"]
    assert main([*args, "--rate", "2", "--requests", "40", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 40
