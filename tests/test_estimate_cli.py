"""`pdplan estimate` and model.physics.estimate.estimate: output, JSON keys, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from model.cli import main
from model.errors import InputError
from model.physics.estimate import estimate

KEYS = {
    "prefill_s",
    "prefill_bound",
    "decode_step_s",
    "tpot_s",
    "kv_bytes_per_token",
    "weight_bytes_per_gpu",
    "kv_capacity_tokens",
    "max_batch",
    "fits",
    "breakdown",
}


def test_api_estimate() -> None:
    e = estimate("llama-3.1-8b", "h100-sxm", isl=2048, osl=256)
    assert e.prefill_bound == "compute"
    assert e.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2  # 131,072 B
    assert e.fits and e.max_batch > 100
    assert e.decode_context_tokens == 2048 + 256 / 2
    assert e.tpot_s < e.prefill_s
    big = estimate("llama-3.1-70b", "h100-sxm", isl=100, osl=10)
    assert not big.fits and "needs 141 GB" in big.reason


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "estimate",
            "--model",
            "llama-3.1-70b",
            "--gpu",
            "h100-sxm",
            "--tp",
            "4",
            "--isl",
            "1024",
            "--osl",
            "128",
            "--batch",
            "8",
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= KEYS
    assert out["prefill_bound"] in ("compute", "memory")
    assert set(out["breakdown"]) == {"prefill", "decode", "memory"}
    assert out["breakdown"]["decode"]["bound"] == "memory"


def test_cli_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["estimate", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--isl", "512", "--osl", "64"]) == 0
    )
    text = capsys.readouterr().out
    assert "prefill" in text and "TPOT" in text and "KV capacity" in text


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--tp", "3", "--model", "llama-3.1-70b"], "tp"),
        (["--dtype", "fp8", "--gpu", "a100-80gb-sxm"], "dtype"),
        (["--dtype", "bogus"], "dtype"),
        (["--isl", "0"], "isl"),
        (["--osl", "-3"], "osl"),
    ],
)
def test_cli_errors_exit_2_one_line(args: list[str], field: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = {"--model": "llama-3.1-8b", "--gpu": "h100-sxm", "--isl": "100", "--osl": "10"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    argv = ["estimate"] + [x for kv in base.items() for x in kv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"pdplan: error: {field}:")


def test_api_bad_lengths() -> None:
    with pytest.raises(InputError, match="isl"):
        estimate("llama-3.1-8b", "h100-sxm", isl=0, osl=1)


def test_console_script_no_traceback() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "model",
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--tp",
            "5",
            "--isl",
            "10",
            "--osl",
            "10",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_fits_requires_the_batch_and_the_context_window() -> None:
    import model

    # 70B TP4 on H100: ~481k KV tokens -> 208 sequences of 2,304 tokens; a batch of 500 does not fit.
    big = model.estimate("llama-3.1-70b", "h100-sxm", tp=4, isl=2048, osl=256, batch=500)
    assert big.max_batch < 500 and not big.fits and "fewer than the batch of 500" in big.reason
    # Llama-3.1-8B has a 131,072-token window: 200k tokens do not fit whatever the memory.
    long = model.estimate("llama-3.1-8b", "h100-sxm", isl=200_000, osl=10)
    assert not long.fits and "context window" in long.reason
    ok = model.estimate("llama-3.1-8b", "h100-sxm", isl=1024, osl=128, batch=8)
    assert ok.fits
