"""Bad input found by an edge-case review: each gets a one-line error naming the field, never a
traceback or a silently converted value."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import model
from model.cli import main
from model.errors import InputError, PdplanError, ProfileError
from model.limits import nesting_depth, parse_json
from model.llm.hf_config import parse_hf_config_text
from model.units import Kind, parse_quantity
from model.workload.traces import TraceFormatError, load_trace


@pytest.mark.parametrize("text", ["5 rpm", "10 Gbit/s", "5 GB/s", "3 s"])
def test_rates_reject_other_dimensions(text) -> None:
    with pytest.raises(InputError, match="rate"):
        parse_quantity(text, Kind.RATE, "rate", bare_unit="1 / second")
    assert parse_quantity("600 / minute", Kind.RATE, "rate") == pytest.approx(10.0)


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"_pdplan": "x"}, "_pdplan"),
        ({"text_config": "x"}, "text_config"),
        ({"max_position_embeddings": [1]}, "max_position_embeddings"),
        ({"tie_word_embeddings": "false"}, "tie_word_embeddings"),
        ({"hidden_size": 10**12}, "hidden_size"),
    ],
)
def test_config_json_structure_errors_name_the_field(doc, field) -> None:
    base = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 100,
    }
    if "text_config" in doc:
        base.pop("hidden_size")
    base.update(doc)
    with pytest.raises(ProfileError, match=field):
        parse_hf_config_text(json.dumps(base))


def test_config_json_absurd_nesting_and_huge_numbers() -> None:
    with pytest.raises(ProfileError, match="not a readable config|not valid JSON"):
        parse_hf_config_text("[" * 100_000)
    with pytest.raises(ProfileError, match="not a readable config"):
        parse_hf_config_text('{"hidden_size": ' + "9" * 5001 + "}")


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        (
            "huge.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00.0000000,1e23,5\n",
            "ContextTokens",
        ),
        (
            "bad.jsonl",
            '{"timestamp": 0, "input_length": 5, "output_length": 5, "hash_ids": [[1]]}\n',
            "hash_ids",
        ),
        (
            "big.jsonl",
            '{"timestamp": 0, "input_length": 99999999999999999999999, "output_length": 5}\n',
            "input_length",
        ),
    ],
)
def test_trace_rows_out_of_range(tmp_path, name, content, needle) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(TraceFormatError, match=needle):
        load_trace(path)


def test_non_utf8_trace_and_profile(tmp_path, capsys) -> None:
    bad = tmp_path / "t.csv"
    bad.write_bytes(b"TIMESTAMP,ContextTokens,GeneratedTokens\n\xff\xfe\x00\n")
    with pytest.raises(TraceFormatError, match="not UTF-8"):
        load_trace(bad)
    (tmp_path / "p" / "gpus").mkdir(parents=True)
    (tmp_path / "p" / "gpus" / "x.toml").write_bytes(b"\xff\xfe binary")
    assert main(["list", "gpus", "--profile-dir", str(tmp_path / "p")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_implausible_profile_values_are_rejected() -> None:
    h = model.get_gpu("h100-sxm")
    import dataclasses

    with pytest.raises(InputError, match="memory_bandwidth_bytes_per_s"):
        dataclasses.replace(h, memory_bandwidth_bytes_per_s=1e-300)
    with pytest.raises(InputError, match="memory_bytes"):
        dataclasses.replace(h, memory_bytes=1.0)


def test_api_type_errors_are_input_errors() -> None:
    scn = model.Scenario.build("llama-3.1-8b", "chat", model.SLO(0.5, 0.05))
    with pytest.raises(InputError, match="config"):
        model.evaluate(None, scn, 5.0)
    with pytest.raises(InputError, match="link"):
        model.DisaggregatedConfig(
            model.get_gpu("h100-sxm"), 1, 1, model.get_gpu("h100-sxm"), 1, 1, "ib-ndr-400"
        )
    with pytest.raises(InputError, match="seed"):
        model.Scenario.build("llama-3.1-8b", "chat", model.SLO(0.5, 0.05), seed=-1)
    import numpy as np

    cfg = model.ColocatedConfig(model.get_gpu("h100-sxm"), np.int64(1), np.int64(2))
    assert model.evaluate(cfg, scn, np.float64(2.0)).stable  # numpy numbers are fine


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"gpus": 100_000}, "gpus"),
        ({"gpus": 8, "tp_options": (3,)}, "tp_options"),
        ({"gpus": 8, "node": "hgx-h100-8", "gpu_override": "rtx-4090"}, "node"),
        ({"target_rate_rps": 5.0, "max_gpus": 0}, "max_gpus"),
    ],
)
def test_plan_search_limits(kwargs, field) -> None:
    gpu = kwargs.pop("gpu_override", "h100-sxm")
    with pytest.raises(InputError) as err:
        model.plan(
            "llama-3.1-8b", gpu, workload="chat", ttft_slo_s=1.0, tpot_slo_s=0.05, thresholds=False, **kwargs
        )
    assert err.value.field == field


def test_free_gpus_do_not_divide_by_zero(tmp_path) -> None:
    # A home lab with owned GPUs: price 0. Cost-objective planning must still answer.
    import re
    from pathlib import Path

    text = Path(model.get_gpu("rtx-4090").path).read_text(encoding="utf-8")

    text = re.sub(r"usd_per_hour = \{ value = [0-9.]+", "usd_per_hour = { value = 0.0", text)
    text = text.replace('name = "rtx-4090"', 'name = "my-4090"').replace("aliases = [", 'aliases = ["x-my",')
    (tmp_path / "gpus").mkdir()
    (tmp_path / "gpus" / "my-4090.toml").write_text(text)
    p = model.plan(
        "llama-3.1-8b",
        "my-4090",
        workload="chat",
        ttft_slo_s=2.0,
        tpot_slo_s=0.2,
        target_rate_rps=1.0,
        max_gpus=4,
        objective="cost",
        profile_dirs=tmp_path,
        thresholds=False,
        samples=64,
    )
    assert p.verdict in ("colocated", "colocated-chunked", "disaggregated", "none")
    assert isinstance(p, model.Plan) and all(isinstance(r, str) for r in p.reasons)
    assert issubclass(TraceFormatError, PdplanError)


def test_simulate_rejects_disaggregated_flags_for_colocated(capsys) -> None:
    code = main(
        [
            "simulate",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--architecture",
            "colocated",
            "--prefill",
            "3",
            "--workload",
            "chat",
            "--rate",
            "5",
            "--requests",
            "20",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "--prefill" in err and "only with --style disaggregated" in err


# ------------------------------------------------------------------ issue 13: hardening

SIM = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"]


def _one_line_error(capsys, argv) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1, (code, err)
    return err


def test_usage_errors_are_one_line_with_a_pointer_to_help(capsys) -> None:
    err = _one_line_error(capsys, ["simulate", "--model"])
    assert "usage error" in err and "pdplan simulate --help" in err
    err = _one_line_error(capsys, ["no-such-command"])
    assert "pdplan --help" in err
    err = _one_line_error(capsys, [*SIM, "--style", "colocated", "--replicas", "x" * 500])
    assert len(err) < 300  # echoed input is cut


def test_unexpected_exceptions_are_one_line_internal_errors(capsys, monkeypatch) -> None:
    import model.cli.estimate as est

    def boom(args):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(est, "run", boom)
    err = _one_line_error(capsys, ["estimate", "--model", "x", "--gpu", "y", "--isl", "1", "--osl", "1"])
    assert err.startswith("pdplan: internal error: RuntimeError: boom second line; please report")


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--style", "colocated", "--rate", "5", "--requests", "10000000"], "500000"),
        (
            ["--style", "colocated", "--rate", "5", "--requests", "20", "--replicas", "1000000000"],
            "4096",
        ),
        (
            [
                "--style",
                "disaggregated",
                "--link",
                "ib-ndr-400",
                "--rate",
                "5",
                "--prefill",
                "2147483648",
            ],
            "4096",
        ),
        (
            ["--style", "colocated", "--rate", "5", "--requests", "200", "--warmup", "200"],
            "fewer than",
        ),
        (["--style", "colocated", "--rate", "5", "--requests", "1"], "two arrivals"),
        (
            ["--style", "disaggregated", "--link", "ib-ndr-400", "--rate", "5", "--chunk", "512"],
            "--chunk",
        ),
        (
            ["--style", "disaggregated", "--link", "ib-ndr-400", "--rate", "5", "--replicas", "2"],
            "--replicas",
        ),
        (["--style", "colocated", "--rate", "5", "--kv-dtype", ""], "--kv-dtype"),
        (["--style", "colocated", "--rate", "5", "--decode-gpu", ""], "--decode-gpu"),
        (["--style", "colocated", "--rate", "5", "--per-request", ""], "--per-request"),
        (["--style", "colocated", "--rate", "5", "--profile-dir", ""], "--profile-dir"),
        (["--style", "colocated", "--rate", "1e-300"], "arrival"),
    ],
)
def test_simulate_caps_and_contradictions(capsys, extra, needle) -> None:
    err = _one_line_error(capsys, [*SIM, "--workload", "chat", *extra])
    assert needle in err


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--gpus", "4096", "--no-thresholds"], "1024"),
        (["--gpus", "8", "--chunks", ",".join(["512"] * 20_000)], "at most 64"),
        (["--gpus", "9" * 400], "..."),
        (["--gpus", "8", "--ttft-slo", "(10**400) ms"], "ttft_slo"),
        (["--gpus", "8", "--margin", "nan"], "finite"),
        (["--gpus", "8", "--kv-dtype", ""], "--kv-dtype"),
    ],
)
def test_plan_caps_and_bad_flags(capsys, extra, needle) -> None:
    base = ["plan", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--workload", "chat"]
    err = _one_line_error(capsys, [*base, "--ttft-slo", "1s", "--tpot-slo", "50ms", *extra])
    assert needle in err


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        (
            {"num_experts": 8, "experts_per_token": 2, "moe_intermediate_size": 100, "num_dense_layers": 40},
            "num_dense",
        ),
        ({"num_experts": 4, "experts_per_token": 8, "moe_intermediate_size": 100}, "experts_per_token"),
        ({"num_kv_heads": 64}, "num_kv_heads"),
        ({"hidden_size": 0}, "hidden_size"),
        ({"num_experts": 8, "experts_per_token": 2}, "moe_intermediate_size"),
        ({"experts_per_token": 2}, "dense model"),
        ({"qk_rope_head_dim": 64}, "without MLA"),
        ({"kv_lora_rank": 512}, "with MLA"),
        ({"vocab_size": 10**9}, "vocab_size"),
        ({"tie_embeddings": "no"}, "tie_embeddings"),
    ],
)
def test_impossible_architectures_are_refused(changes, needle) -> None:
    import dataclasses

    arch = model.get_model("llama-3.1-8b")
    with pytest.raises(InputError, match=needle):
        dataclasses.replace(arch, **changes)


def test_calibrate_refuses_overwrite_bad_out_dir_and_pp_zero(tmp_path, capsys) -> None:
    from tests.conftest import REPO

    csv_file = REPO / "docs" / "examples" / "calibration_measurements.csv"
    argv = ["calibrate", "--measurements", str(csv_file), "--no-loo", "--json"]
    assert main([*argv, "--out-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    err = _one_line_error(capsys, [*argv, "--out-dir", str(tmp_path)])
    assert "--force" in err
    assert main([*argv, "--out-dir", str(tmp_path), "--force"]) == 0
    capsys.readouterr()
    assert "out_dir" in _one_line_error(capsys, [*argv, "--out-dir", "~nouser-pdplan/x"])
    assert "pp" in _one_line_error(capsys, [*argv, "--out-dir", str(tmp_path / "b"), "--pp", "0"])


# ------------------------------------------------------------------ bad-input invariants


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=20,
)


def _depth(x) -> int:
    if isinstance(x, list):
        return 1 + max((_depth(v) for v in x), default=0)
    if isinstance(x, dict):
        return 1 + max((_depth(v) for v in x.values()), default=0)
    return 0


@settings(max_examples=200, deadline=None)
@given(_json)
def test_nesting_scan_measures_json_depth_exactly(doc) -> None:
    """The linear pre-parse scan agrees with the real depth, so the depth cap is exact for JSON."""
    assert nesting_depth(json.dumps(doc)) == _depth(doc)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_limited_json_reader_accepts_what_json_accepts_or_says_why(text) -> None:
    """parse_json: json.loads's value for ordinary input, else an InputError (never another error)."""
    try:
        value = parse_json(text, "doc")
    except InputError as err:
        assert err.field == "doc"
        return
    assert value == json.loads(text) or value != value  # NaN is refused, so never reached


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=2000),
        st.integers(min_value=-(10**5000), max_value=10**5000),
        st.lists(st.integers()),
    )
)
def test_echoed_input_is_always_short(value) -> None:
    """Every error echoes at most ~80 characters of what was typed, whatever its type or size."""
    err = InputError("field", value, "something else")
    assert len(str(err)) <= len("field: got ''; allowed: something else") + 90


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=20), st.lists(st.none(), max_size=2))
)
def test_public_functions_name_the_bad_argument(value) -> None:
    """model.total_params / get_model / load_catalog given any non-matching value: InputError naming it."""
    for fn, arg in ((model.total_params, "arch"), (model.kv_bytes_per_token, "arch")):
        with pytest.raises(InputError, match=arg):
            fn(value)
    if not isinstance(value, str):
        with pytest.raises(InputError, match="name"):
            model.get_model(value)
