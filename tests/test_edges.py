"""Bad input found by an edge-case review: each gets a one-line error naming the field, never a
traceback or a silently converted value."""

from __future__ import annotations

import json

import pytest

import model
from model.cli import main
from model.errors import InputError, PdplanError, ProfileError
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
