"""Fleet sweeps (model.fleet.grid, model.fleet.sweep, `pdplan sweep`): grid checks, the process
pool, resuming, and identical results on a local Ray instance."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

import model
from model.cli import main
from model.errors import InputError
from model.fleet.grid import load_grid, parse_grid
from model.fleet.sweep import COLUMNS, read_done, run_sweep

ROOT = Path(__file__).resolve().parents[1]

GRID = """
models = ["llama-3.1-8b"]
gpus = ["a100-80gb-sxm"]
workloads = ["chat"]
budgets = {budgets}

[[slo]]
name = "interactive"
ttft = "500ms"
tpot = "50ms"

[options]
tp = [1, 2]
chunks = [1024]
samples = 300
"""


def _grid(tmp_path: Path, budgets: str = "[1, 2]") -> Path:
    f = tmp_path / "grid.toml"
    f.write_text(GRID.format(budgets=budgets))
    return f


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return sorted(csv.DictReader(f), key=lambda r: (r["scenario"], r["style"]))


def test_small_grid_on_the_process_pool(tmp_path: Path) -> None:
    """Two budgets, two workers: one row per style per scenario, each the same as model.plan's best."""
    out = tmp_path / "out.csv"
    res = run_sweep(load_grid(_grid(tmp_path)), out, workers=2, progress=None)
    assert (res.scenarios_run, res.scenarios_skipped) == (2, 0)
    rows = _rows(out)
    assert list(rows[0]) == list(COLUMNS) and len(rows) == res.rows_written
    assert {r["scenario"] for r in rows} == {
        "llama-3.1-8b|a100-80gb-sxm|chat|interactive|gpus=1",
        "llama-3.1-8b|a100-80gb-sxm|chat|interactive|gpus=2",
    }
    p = model.plan(
        "llama-3.1-8b",
        "a100-80gb-sxm",
        workload="chat",
        ttft_slo_s=0.5,
        tpot_slo_s=0.05,
        gpus=2,
        tp_options=(1, 2),
        chunk_options=(1024,),
        samples=300,
        thresholds=False,
    )
    two = {r["style"]: r for r in rows if r["budget_gpus"] == "2"}
    assert set(two) == set(p.best)
    for style, b in p.best.items():
        assert float(two[style]["goodput_rps"]) == b.goodput_rps
        assert two[style]["config"] == b.label and int(two[style]["n_gpus"]) == b.n_gpus
        assert two[style]["recommended"] == str(style == p.verdict)


def test_resume_skips_scenarios_already_written(tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    run_sweep(load_grid(_grid(tmp_path, "[1]")), out, progress=None)
    first = out.read_text()
    res = run_sweep(load_grid(_grid(tmp_path, "[1, 2]")), out, progress=None)
    assert (res.scenarios_run, res.scenarios_skipped) == (1, 1)
    assert out.read_text().startswith(first)  # appended, the earlier rows untouched
    assert len(read_done(out)) == 2
    again = run_sweep(load_grid(_grid(tmp_path, "[1, 2]")), out, progress=None)
    assert (again.scenarios_run, again.rows_written) == (0, 0)


def test_cli_sweep_with_progress_bar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o.csv"
    assert main(["sweep", str(_grid(tmp_path, "[1]")), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "1 scenarios run" in captured.out and "1/1 scenarios" in captured.err
    assert read_done(out) == {"llama-3.1-8b|a100-80gb-sxm|chat|interactive|gpus=1"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("llama-3.1-8b", "llama-9"), "g.toml: models[0]"),
        (('gpus = ["a100-80gb-sxm"]', 'gpus = ["a100-80gb-sxm", "h999"]'), "g.toml: gpus[1]"),
        (('workloads = ["chat"]', 'workloads = ["chat", "poetry"]'), "g.toml: workloads[1]"),
        (('ttft = "500ms"', 'ttft = "fast"'), "g.toml: slo[0].ttft"),
        (("budgets = [1]", "budgets = [0]"), "g.toml: budgets[0]"),
        (("samples = 300", "sample = 300"), "g.toml: options.sample"),
        (("[options]", "[extra]"), "g.toml: extra"),
    ],
)
def test_bad_grid_names_the_field(change: tuple[str, str], field: str) -> None:
    text = GRID.format(budgets="[1]").replace(*change)
    with pytest.raises(InputError) as err:
        parse_grid(text, "g.toml")
    assert err.value.field == field


def test_too_many_scenarios_names_the_limit() -> None:
    """Every catalog model (19) x 13 GPUs x 6 workloads x 10 tiers x 7 budgets = 103,740 > 100,000."""
    names = lambda xs: "[" + ", ".join(f'"{x}"' for x in xs) + "]"  # noqa: E731
    tiers = "".join(f'[[slo]]\nname = "t{i}"\nttft = "1s"\ntpot = "50ms"\n' for i in range(10))
    text = (
        f"models = {names(m.name for m in model.list_models())}\n"
        f"gpus = {names(sorted({g.name for g in model.load_catalog().gpus.values()}))}\n"
        f"workloads = {names(model.list_workloads())}\nbudgets = [1, 2, 4, 8, 16, 32, 64]\n{tiers}"
    )
    with pytest.raises(InputError, match="MAX_SWEEP_SCENARIOS"):
        parse_grid(text, "big.toml")


def test_parquet_without_pyarrow_is_a_clear_error(tmp_path: Path) -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(InputError, match="pyarrow"):
            run_sweep(load_grid(_grid(tmp_path, "[1]")), tmp_path / "o.parquet", progress=None)
    else:
        run_sweep(load_grid(_grid(tmp_path, "[1]")), tmp_path / "o.parquet", progress=None)
        assert read_done(tmp_path / "o.parquet")


def test_process_pool_and_ray_give_identical_results(tmp_path: Path) -> None:
    ray = pytest.importorskip(
        "ray", reason="Ray not installed (optional extra pdplan[ray]; CI installs it for this test)"
    )
    grid = load_grid(_grid(tmp_path))
    pool_out, ray_out = tmp_path / "pool.csv", tmp_path / "ray.csv"
    run_sweep(grid, pool_out, workers=2, progress=None)
    ray.init(
        num_cpus=1,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )
    try:
        err = io.StringIO()
        res = run_sweep(grid, ray_out, ray_address="local", progress=err)
    finally:
        ray.shutdown()
    assert res.scenarios_run == 2 and "2/2 scenarios" in err.getvalue()
    assert _rows(ray_out) == _rows(pool_out)
