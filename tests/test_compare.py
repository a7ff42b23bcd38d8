"""Compare two set-ups (issue 19): model.compare and `pdplan compare` over app scenario files and
`pdplan plan --json` output. Golden-free: every number must equal the two plans' own values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import model
from app_support.values import DEFAULTS
from model.cli import main
from model.planner.compare import METRICS, summarise
from model.planner.scenario_file import MAX_SCENARIO_BYTES, SCENARIO_FORMAT, scenario_request

SMALL = {"model": "llama-3.1-8b", "tps": [1, 2], "chunks": [512]}


def scenario(tmp_path: Path, name: str, **inputs) -> Path:
    """A scenario file as the app saves it: every widget key (app_support.values.DEFAULTS)."""
    obj = {
        "format": SCENARIO_FORMAT,
        "inputs": {**DEFAULTS, **SMALL, **inputs},
        "config": None,
        "trace": None,
    }
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def own_plan(gpus: int, gpu: str = "h100-sxm") -> model.Plan:
    """The same scenario planned directly from the app's default inputs, written out by hand."""
    return model.plan(
        "llama-3.1-8b",
        gpu,
        workload="chat",
        ttft_slo_s=0.5,
        tpot_slo_s=0.05,
        percentile=90.0,
        attainment=0.9,
        gpus=gpus,
        tp_options=(1, 2),
        chunk_options=(512,),
        margin=0.1,
        thresholds=False,
    )


def test_cli_compare_of_two_scenario_files_reports_each_plans_own_numbers(tmp_path, capsys):
    a, b = scenario(tmp_path, "a.json", gpus=2), scenario(tmp_path, "b.json", gpus=4)
    assert main(["compare", str(a), str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    verdicts = {}
    for side, gpus in (("a", 2), ("b", 4)):
        p = own_plan(gpus)
        verdicts[side] = p.verdict
        best = p.best[p.verdict]
        got = out[side]
        assert got["verdict"] == p.verdict and got["label"] == best.label
        assert got["n_gpus"] == best.n_gpus
        assert got["goodput_rps"] == best.goodput_rps
        assert got["cost_usd_per_million_output_tokens"] == best.at_goodput.cost_usd_per_million_output_tokens
        assert got["energy_j_per_output_token"] == best.at_goodput.energy_j_per_output_token
    for d in out["differences"]:
        assert d["delta"] == pytest.approx(out["b"][d["metric"]] - out["a"][d["metric"]], rel=1e-12)
        assert d["ratio"] == pytest.approx(out["b"][d["metric"]] / out["a"][d["metric"]], rel=1e-12)
    assert [d["metric"] for d in out["differences"]] == [m for m, _ in METRICS]
    assert out["verdict_changed"] is (verdicts["a"] != verdicts["b"])
    assert main(["compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert "a: a.json" in text and "b: b.json" in text and "goodput" in text and "+2 (+100%)" in text


def test_a_plan_json_and_a_scenario_file_compare_alike(tmp_path, capsys):
    """`pdplan plan --json` output is read as is: its numbers equal the re-planned scenario's."""
    plan_json = tmp_path / "plan.json"
    plan_json.write_text(json.dumps(model.plan_dict(own_plan(2))))
    c = model.compare(plan_json, scenario(tmp_path, "a.json", gpus=2))
    for d in c.differences:
        assert d.delta == 0.0 and d.ratio == 1.0
    assert not c.verdict_changed


def test_compare_of_plans_and_the_scenario_reader_overrides(tmp_path):
    """Price, custom link and a different GPU reach the plan: the price x GPUs is the hourly cost."""
    path = scenario(tmp_path, "s.json", gpus=2, price="3.5", link="custom", link_bw="100 Gbit/s")
    req = scenario_request(json.loads(path.read_text()), "s.json")
    assert req.gpu.price_usd_per_hour == 3.5 and req.link.bandwidth_bytes_per_s == 100e9 / 8
    p = model.plan(req, thresholds=False)
    s = summarise(p, "x")
    assert s.cost_usd_per_hour == pytest.approx(3.5 * s.n_gpus)
    c = model.compare(own_plan(2), own_plan(2, "a100-80gb-sxm"))
    assert c.a.gpu == "h100-sxm" and c.b.gpu == "a100-80gb-sxm"
    assert c.difference("goodput_rps").delta == pytest.approx(c.b.goodput_rps - c.a.goodput_rps)


def test_a_none_verdict_compares_with_blanks(tmp_path, capsys):
    a = scenario(tmp_path, "a.json", gpus=2)
    b = scenario(tmp_path, "b.json", gpus=2, ttft="1 ms")
    assert main(["compare", str(a), str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["b"]["verdict"] == "none" and out["b"]["goodput_rps"] is None
    assert out["verdict_changed"] is True
    assert all(d["delta"] is None for d in out["differences"])


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"[1, 2", "valid JSON"),
        (b'{"x": 1}', "an app scenario file or `pdplan plan --json` output"),
        (b'{"a": NaN}', "finite"),
        (b"[" * 100 + b"]" * 100, "levels"),
        (b"\xff\xfe", "UTF-8"),
        (
            json.dumps({"format": SCENARIO_FORMAT, "inputs": {**DEFAULTS, "ttft": "soon"}}).encode(),
            "inputs.ttft",
        ),
        (
            json.dumps({"format": SCENARIO_FORMAT, "inputs": {**DEFAULTS, "gpus": True}}).encode(),
            "inputs.gpus",
        ),
        (json.dumps({"format": SCENARIO_FORMAT, "inputs": {**DEFAULTS, "gpus": 0}}).encode(), "gpus"),
        (
            json.dumps({"format": SCENARIO_FORMAT, "inputs": {**DEFAULTS, "tps": [1] * 65}}).encode(),
            "inputs.tps",
        ),
        (json.dumps({"format": SCENARIO_FORMAT, "inputs": {**DEFAULTS, "model": "gpt-9"}}).encode(), "gpt-9"),
        (json.dumps({"format": SCENARIO_FORMAT, "inputs": []}).encode(), "inputs"),
        (json.dumps({"format": SCENARIO_FORMAT, "inputs": {"gpu": "h100-sxm"}}).encode(), "missing"),
        (
            json.dumps(
                {"format": SCENARIO_FORMAT, "inputs": {**DEFAULTS, "model_source": "config.json upload"}}
            ).encode(),
            "config",
        ),
    ],
)
def test_bad_files_are_one_line_errors(tmp_path, capsys, content, expected):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    good = scenario(tmp_path, "good.json", gpus=2)
    assert main(["compare", str(bad), str(good)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pdplan: error:") and "bad.json" in err
    assert expected in err
    assert "Traceback" not in err


def test_missing_and_oversized_files_are_refused_before_reading(tmp_path, capsys):
    good = scenario(tmp_path, "good.json", gpus=2)
    assert main(["compare", str(tmp_path / "nope.json"), str(good)]) == 2
    assert "nope.json" in capsys.readouterr().err
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(MAX_SCENARIO_BYTES + 1)  # sparse: no 21 MB written
    assert main(["compare", str(good), str(big)]) == 2
    err = capsys.readouterr().err
    assert "big.json" in err and "at most" in err


def test_compare_refuses_a_wrong_type_in_the_python_api():
    with pytest.raises(model.InputError, match="compare: a"):
        model.compare(3, "x.json")


def test_a_scenario_saved_by_the_app_with_uploads_is_re_planned_alike(tmp_path):
    """The app's own writer (app_support.inputs.scenario_json) embeds the config.json and the trace;
    the scenario reader plans the same model and workload the app would."""
    from app_support import inputs
    from model.workload.traces import load_trace

    config = (Path(model.__file__).parent / "llm" / "configs" / "llama-3.1-8b.json").read_text()
    rows = [f"2023-11-16 18:15:{i:02d}.5000000,{200 + 37 * i % 900},{20 + 13 * i % 300}" for i in range(50)]
    trace = ("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n").encode()
    state = {
        **inputs.DEFAULTS,
        **SMALL,
        "model_source": inputs.CONFIG_UPLOAD,
        "workload_source": inputs.TRACE_UPLOAD,
        "gpus": 2,
    }
    values = {"config_text": config, "config_name": "my-config.json", "trace_name": "t.csv"}
    path = tmp_path / "s.json"
    path.write_text(inputs.scenario_json(inputs.Spec(values, trace), state=state))
    (tmp_path / "t.csv").write_bytes(trace)
    wl = model.Workload.from_trace(load_trace(tmp_path / "t.csv"), name="trace:t.csv")
    arch = model.llm.hf_config.parse_hf_config_text(config, where="my-config.json")
    want = model.plan(
        arch, "h100-sxm", workload=wl, ttft_slo_s=0.5, tpot_slo_s=0.05, gpus=2,
        tp_options=(1, 2), chunk_options=(512,), thresholds=False,
    )  # fmt: skip
    got = model.compare(path, want)
    assert got.a.workload == "trace:t.csv" and got.a.verdict == want.verdict
    assert all(d.delta == 0.0 for d in got.differences)
