"""Tests for model.traces: each format on small files written here, errors, and the real Azure traces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from model.errors import InputError
from model.workload.presets import Workload
from model.workload.traces import (
    TraceFormatError,
    load_azure_csv,
    load_burstgpt_csv,
    load_csv,
    load_mooncake_jsonl,
    load_trace,
)

SHARED_TRACES = Path(__file__).parents[1] / ".." / "shared" / "traces"


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:17:03.9799600,4808,10
2023-11-16 18:17:04.0319600,3180,8
2023-11-16 18:17:03.9799601,110,27
2023-11-16 18:17:05.1206440,7433,14
"""


def test_azure_sorts_rebases_and_keeps_100ns(tmp_path):
    tr = load_azure_csv(write(tmp_path, "a.csv", AZURE))
    assert len(tr) == 4 and tr.source == "a.csv" and tr.dropped_rows == 0
    # row 3 is 100 ns after row 1: sorted second, pairs kept
    np.testing.assert_allclose(tr.arrival_s, [0.0, 1e-7, 0.052, 1.140684], atol=1e-12)
    assert tr.prompt_tokens.tolist() == [4808, 110, 3180, 7433]
    assert tr.output_tokens.tolist() == [10, 27, 8, 14]
    assert load_trace(tmp_path / "a.csv").prompt_tokens.tolist() == tr.prompt_tokens.tolist()


def test_mooncake_ms_and_prefix_reuse(tmp_path):
    rows = [
        {"timestamp": 0, "input_length": 1000, "output_length": 50, "hash_ids": [0, 1]},
        {"timestamp": 1500, "input_length": 1500, "output_length": 20, "hash_ids": [0, 1, 2]},
        {"timestamp": 3052, "input_length": 400, "output_length": 5, "hash_ids": [3]},
    ]
    p = write(tmp_path, "m.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n\n")
    tr = load_mooncake_jsonl(p)
    np.testing.assert_allclose(tr.arrival_s, [0.0, 1.5, 3.052])
    assert tr.prompt_tokens.tolist() == [1000, 1500, 400]
    # 6 blocks, 2 seen before (0 and 1 in the second request)
    assert tr.prefix_reuse_fraction == pytest.approx(2 / 6)
    assert load_trace(p).prefix_reuse_fraction == pytest.approx(2 / 6)


def test_burstgpt_drops_failures_and_counts_them(tmp_path):
    text = """Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
45,ChatGPT,1087,0,1087,Conversation log
118,GPT-4,417,30,447,API log
"""
    tr = load_trace(write(tmp_path, "b.csv", text))
    assert len(tr) == 2 and tr.dropped_rows == 1
    assert tr.arrival_s.tolist() == [0.0, 113.0]
    assert tr.output_tokens.tolist() == [18, 30]


def test_generic_csv_with_mapping_and_unit(tmp_path):
    p = write(tmp_path, "g.csv", "t_ms,in,out\n1000,5,6\n1250,7,8\n")
    tr = load_csv(p, columns={"time": "t_ms", "prompt": "in", "output": "out"}, time_unit="ms")
    assert tr.arrival_s.tolist() == pytest.approx([0.0, 0.25])
    with pytest.raises(InputError, match="time_unit"):
        load_csv(p, columns={"time": "t_ms", "prompt": "in", "output": "out"}, time_unit="hours")


@pytest.mark.parametrize(
    "name,text,line,column",
    [
        (
            "bad_int.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.1,12,3\n"
            "2023-11-16 18:17:04.1,abc,3\n",
            3,
            "ContextTokens",
        ),
        (
            "bad_time.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.1,12,3\nyesterday,12,3\n",
            3,
            "TIMESTAMP",
        ),
        (
            "neg.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.1,-4,3\n",
            2,
            "ContextTokens",
        ),
        (
            "zero_out.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.1,4,0\n",
            2,
            "GeneratedTokens",
        ),
        ("missing_col.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:17:03.1,4\n", 1, "GeneratedTokens"),
        ("short_row.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.1,4\n", 2, None),
    ],
)
def test_azure_malformed_rows_name_file_line_column(tmp_path, name, text, line, column):
    p = write(tmp_path, name, text)
    with pytest.raises(TraceFormatError) as err:
        load_azure_csv(p)
    e = err.value
    assert e.line == line and e.column == column and e.path == str(p)
    assert f"{name}:{line}" in str(e)
    if column:
        assert column in str(e)


def test_mooncake_errors(tmp_path):
    p = write(tmp_path, "m.jsonl", '{"timestamp": 0, "input_length": 3, "output_length": 1}\n{oops\n')
    with pytest.raises(TraceFormatError, match=r"m\.jsonl:2: not valid JSON"):
        load_mooncake_jsonl(p)
    p = write(tmp_path, "m2.jsonl", '{"timestamp": 0, "input_length": 3}\n')
    with pytest.raises(TraceFormatError, match="output_length") as err:
        load_mooncake_jsonl(p)
    assert err.value.line == 1
    p = write(tmp_path, "m3.jsonl", '{"timestamp": -5, "input_length": 3, "output_length": 1}\n')
    with pytest.raises(TraceFormatError, match="timestamp"):
        load_mooncake_jsonl(p)


def test_empty_traces_are_errors(tmp_path):
    with pytest.raises(TraceFormatError, match="no requests"):
        load_azure_csv(write(tmp_path, "e.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"))
    with pytest.raises(TraceFormatError, match="no requests"):
        load_mooncake_jsonl(write(tmp_path, "e.jsonl", "\n"))
    with pytest.raises(TraceFormatError, match="header"):
        load_azure_csv(write(tmp_path, "nothing.csv", ""))
    only_failures = "Timestamp,Request tokens,Response tokens\n1,5,0\n"
    with pytest.raises(TraceFormatError, match="1 rows dropped"):
        load_burstgpt_csv(write(tmp_path, "f.csv", only_failures))


def test_unknown_format_and_missing_file(tmp_path):
    with pytest.raises(TraceFormatError, match="unrecognised"):
        load_trace(write(tmp_path, "x.csv", "a,b\n1,2\n"))
    with pytest.raises(InputError, match="path"):
        load_trace(tmp_path / "nope.csv")
    with pytest.raises(InputError, match="format"):
        load_trace(tmp_path / "x.csv", format="parquet")


# ---------------------------------------------------------------------------------------------- real traces


@pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="../shared/traces not present")
@pytest.mark.parametrize(
    "kind,rows,prompt,output",
    [
        # (mean, median, p90) as published for the Azure 2023 traces (issue #4; Splitwise, ISCA 2024)
        ("code", 8819, (2048, 1469, 5188), (28, 13, 55)),
        ("conv", 19366, (1155, 1020, 2734), (211, 129, 424)),
    ],
)
def test_real_azure_traces(kind, rows, prompt, output):
    tr = load_trace(SHARED_TRACES / f"azure_llm_2023_{kind}.csv")
    assert len(tr) == rows  # data rows; the header line is not counted
    assert tr.arrival_s[0] == 0.0 and np.all(np.diff(tr.arrival_s) >= 0)
    assert 3400 < tr.duration_s < 3600  # one hour
    for arr, (mean, median, p90) in ((tr.prompt_tokens, prompt), (tr.output_tokens, output)):
        assert arr.mean() == pytest.approx(mean, abs=0.5)
        assert np.median(arr) == median
        assert np.quantile(arr, 0.9) == pytest.approx(p90, abs=0.5)
    w = Workload.from_trace(tr)
    assert w.mean_prompt_tokens == pytest.approx(tr.prompt_tokens.mean())
