"""`pdplan list` and `pdplan show`: tables, JSON, and one-line errors with exit code 2."""

from __future__ import annotations

import json

import pytest

from model.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("what", ["gpus", "links", "nodes", "models"])
def test_list_json(capsys, what) -> None:
    code, out, _ = run(capsys, "list", what, "--json")
    assert code == 0
    rows = json.loads(out)
    assert len(rows) >= {"gpus": 13, "links": 15, "nodes": 2, "models": 19}[what]


def test_list_table(capsys) -> None:
    code, out, _ = run(capsys, "list", "gpus")
    assert code == 0 and "h100-sxm" in out and "rtx-4090" in out


def test_show_gpu_with_sources(capsys) -> None:
    code, out, _ = run(capsys, "show", "gpu", "h100-sxm")
    assert code == 0 and "sources:" in out and "memory.bandwidth" in out
    code, out, _ = run(capsys, "show", "model", "mixtral-8x7b", "--json")
    data = json.loads(out)
    assert data["num_experts"] == 8 and data["active_params"] == 12_879_659_008


def test_unknown_name_is_one_line_exit_2(capsys) -> None:
    code, _out, err = run(capsys, "show", "gpu", "h100-sxn")
    assert code == 2 and "Traceback" not in err
    assert err.count("\n") == 1 and "did you mean 'h100-sxm'" in err


def test_malformed_profile_dir_exit_2(capsys, tmp_path) -> None:
    (tmp_path / "gpus").mkdir()
    (tmp_path / "gpus" / "bad.toml").write_text('schema = 1\nname = "bad"\n[memory\n')
    code, _, err = run(capsys, "list", "gpus", "--profile-dir", str(tmp_path))
    assert code == 2 and err.startswith("pdplan: error: bad.toml: (file): not valid TOML")


def test_malformed_config_json_exit_2(capsys, tmp_path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "llama", "hidden_size": 64}')
    code, _, err = run(capsys, "show", "model", str(cfg))
    assert code == 2 and "config.json: num_hidden_layers: missing" in err
