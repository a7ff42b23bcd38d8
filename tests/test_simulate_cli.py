"""`pdplan simulate`: JSON summary, per-request CSV, unit parsing, errors as one line with exit code 2."""

from __future__ import annotations

import csv
import json

from model.cli import main

BASE = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"]


def test_json_summary_and_per_request_csv(tmp_path, capsys):
    out = tmp_path / "req.csv"
    code = main(
        [
            *BASE,
            "--architecture",
            "disaggregated",
            "--link",
            "ib-ndr-400",
            "--decode",
            "2",
            "--workload",
            "chat",
            "--rate",
            "5",
            "--requests",
            "200",
            "--seed",
            "1",
            "--ttft-slo",
            "500ms",
            "--tpot-slo",
            "0.05",
            "--json",
            "--per-request",
            str(out),
        ]
    )
    assert code == 0
    s = json.loads(capsys.readouterr().out)
    assert s["architecture"] == "disaggregated" and s["completed"] == 200 and s["stable"] is True
    assert s["slo"]["ttft_s"] == 0.5 and s["slo"]["tpot_s"] == 0.05
    assert set(s["ttft_s"]) == {"p50", "p90", "p99"} and s["ttft_s"]["p50"] <= s["ttft_s"]["p99"]
    assert [p["name"] for p in s["pools"]] == ["prefill", "decode"]
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 200 and float(rows[0]["ttft_s"]) > 0


def test_text_output_chunked(capsys):
    assert (
        main(
            [
                *BASE,
                "--architecture",
                "colocated-chunked",
                "--chunk",
                "1024",
                "--workload",
                "short",
                "--rate",
                "2",
                "--requests",
                "50",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "chunk 1024" in text and "TTFT" in text and "TPOT" in text


def test_errors_are_one_line(tmp_path, capsys):
    assert main([*BASE, "--architecture", "disaggregated", "--workload", "chat", "--rate", "1"]) == 2
    assert "--link" in capsys.readouterr().err
    assert main([*BASE, "--architecture", "colocated", "--workload", "chat"]) == 2
    assert "--rate" in capsys.readouterr().err
    assert (
        main(
            [
                *BASE,
                "--architecture",
                "colocated",
                "--workload",
                "chat",
                "--rate",
                "1",
                "--ttft-slo",
                "5 GB",
                "--tpot-slo",
                "1",
            ]
        )
        == 2
    )
    assert "--ttft-slo" in capsys.readouterr().err
    empty = tmp_path / "empty.csv"
    empty.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    assert main([*BASE, "--architecture", "colocated", "--trace", str(empty)]) == 2
    assert "no requests" in capsys.readouterr().err
    assert (
        main(
            [
                "simulate",
                "--model",
                "llama-3.1-70b",
                "--gpu",
                "rtx-4090",
                "--architecture",
                "colocated",
                "--workload",
                "chat",
                "--rate",
                "1",
                "--requests",
                "10",
            ]
        )
        == 2
    )
    assert "fits in memory" in capsys.readouterr().err


def test_overload_reports_unstable(capsys):
    assert (
        main(
            [
                *BASE,
                "--architecture",
                "colocated",
                "--workload",
                "chat",
                "--rate",
                "5000",
                "--requests",
                "20000",
                "--json",
            ]
        )
        == 0
    )
    s = json.loads(capsys.readouterr().out)
    assert s["stable"] is False and "unstable" in s["stop_reason"]
