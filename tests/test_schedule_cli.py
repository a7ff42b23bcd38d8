"""`pdplan schedule`: a curve file in, a table or JSON out; a bad curve is one line naming the row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model.cli import main

BASE = [
    "schedule",
    "--model",
    "llama-3.1-8b",
    "--gpu",
    "a100-80gb-sxm",
    "--workload",
    "chat",
    "--ttft-slo",
    "500ms",
    "--tpot-slo",
    "50ms",
    "--tp",
    "1,2",
    "--chunks",
    "512,2048",
]


def test_curve_csv_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two half-hour rows at 1 and 6 req/s; with the hold and reaction set to 0 the provisioned
    GPUs follow each row's need, and static = the peak's GPUs x 1 h."""
    f = tmp_path / "day.csv"
    f.write_text("time_s,rate_rps\n0,1\n1800,6\n")
    code = main(
        [*BASE, "--curve", str(f), "--resolution", "30min", "--hold", "0", "--reaction", "0", "--json"]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["curve"]["duration_s"] == 3600 and out["curve"]["peak_rps"] == 6
    assert out["bins"]["start_s"] == [0, 1800]
    for row in out["styles"]:
        gpus = out["bins"][f"{row['style']}.n_gpus"]
        assert row["gpu_hours"] == pytest.approx(sum(gpus) / 2)
        assert row["static_gpu_hours"] == pytest.approx(row["static_gpus"] * 1.0)
        assert gpus[0] <= gpus[1] == row["static_gpus"]
    assert out["fewest_gpu_hours"] in {r["style"] for r in out["styles"]}


def test_diurnal_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--diurnal", "4", "--resolution", "15min"]) == 0
    out = capsys.readouterr().out
    assert "fewest GPU-hours over the curve:" in out and "static GPU-h" in out


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("time_s,rate_rps\n0,1\n60,-1\n", "row 2 rate_rps"),
        ("time_s,rate_rps\n0,1\n0,2\n", "row 2 time_s"),
        ("time_s,rate_rps\n", "at least two rows"),
    ],
)
def test_bad_curve_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(text)
    assert main([*BASE, "--curve", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and needle in err and "bad.csv" in err
