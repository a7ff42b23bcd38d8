"""Fleet sweeps: every scenario of a grid (model.fleet.grid) planned, into one tidy table.

One row per scenario and serving style (the best configuration of that style, its goodput, GPUs,
cost, latency at goodput and binding constraint; ``recommended`` marks the verdict's style), keyed
by the scenario's ``scenario`` column. Scenarios run on a local process pool (``workers``) or on a
Ray cluster (``ray_address``; Ray is the optional extra ``pdplan[ray]``, imported only then). Rows
are appended to the output as each scenario finishes, so an interrupted sweep resumes: scenarios
whose key is already in the output file are skipped. Output is CSV, or Parquet for a ``.parquet``
path (needs pyarrow; written once at the end, with the rows already there).
"""

from __future__ import annotations

import csv
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from model.errors import InputError, PdplanError, short
from model.fleet.grid import Grid, GridScenario
from model.limits import check_file_size, check_int, is_file
from model.planner.plan import plan

__all__ = ["COLUMNS", "SweepResult", "evaluate_scenario", "read_done", "run_sweep"]

COLUMNS = (
    "scenario",
    "model",
    "gpu",
    "workload",
    "slo_tier",
    "ttft_slo_s",
    "tpot_slo_s",
    "budget_gpus",
    "target_rate_rps",
    "verdict",
    "style",
    "recommended",
    "config",
    "n_gpus",
    "goodput_rps",
    "goodput_rps_per_gpu",
    "cost_usd_per_hour",
    "ttft_p90_s",
    "tpot_p90_s",
    "binding_constraint",
    "error",
)
MAX_WORKERS = 256
"""Most local worker processes (one per core is the useful number)."""


@dataclass(frozen=True)
class SweepResult:
    """What a sweep did: scenarios run now, skipped (already in the output), rows written, seconds."""

    path: str
    scenarios_run: int
    scenarios_skipped: int
    rows_written: int
    seconds: float

    @property
    def scenarios_per_s(self) -> float:
        """Scenarios run per second of wall time."""
        return self.scenarios_run / self.seconds if self.seconds > 0 else math.inf


def _base(s: GridScenario) -> dict[str, Any]:
    return {
        "scenario": s.key,
        "model": s.model,
        "gpu": s.gpu,
        "workload": s.workload,
        "slo_tier": s.slo_tier,
        "ttft_slo_s": s.ttft_slo_s,
        "tpot_slo_s": s.tpot_slo_s,
        "budget_gpus": s.budget_gpus,
        "target_rate_rps": s.target_rate_rps,
    }


def evaluate_scenario(scenario: GridScenario, options: tuple[tuple[str, Any], ...]) -> list[dict[str, Any]]:
    """The rows of one scenario: one per style with a configuration meeting the SLOs, or one row
    with an empty style (and the error, for input the planner refused) when none does."""
    base = _base(scenario)
    try:
        p = plan(
            scenario.model,
            scenario.gpu,
            workload=scenario.workload,
            ttft_slo_s=scenario.ttft_slo_s,
            tpot_slo_s=scenario.tpot_slo_s,
            gpus=scenario.budget_gpus,
            target_rate_rps=scenario.target_rate_rps,
            thresholds=False,
            **dict(options),
        )
    except PdplanError as err:
        return [{**base, "verdict": "", "style": "", "recommended": False, "error": short(str(err), 300)}]
    if not p.best:
        return [{**base, "verdict": p.verdict, "style": "", "recommended": False, "error": ""}]
    rows = []
    for style, b in p.best.items():
        ev = b.at_goodput
        rows.append(
            {
                **base,
                "verdict": p.verdict,
                "style": style,
                "recommended": style == p.verdict,
                "config": b.label,
                "n_gpus": b.n_gpus,
                "goodput_rps": b.goodput_rps,
                "goodput_rps_per_gpu": b.goodput_rps_per_gpu,
                "cost_usd_per_hour": b.cost_usd_per_hour,
                "ttft_p90_s": ev.ttft_s.p90,
                "tpot_p90_s": ev.tpot_s.p90,
                "binding_constraint": b.binding_constraint,
                "error": "",
            }
        )
    return rows


def _keyed(scenario: GridScenario, options: tuple) -> tuple[str, list[dict[str, Any]]]:
    return scenario.key, evaluate_scenario(scenario, options)


def read_done(path: Path) -> set[str]:
    """Scenario keys already in an output file (none if it does not exist)."""
    if not path.exists():
        return set()
    if not is_file(path):
        raise InputError("output", short(str(path)), "a regular file path (.csv or .parquet)")
    check_file_size(path, "output")
    if path.suffix.lower() == ".parquet":
        return set(_parquet().read_table(path, columns=["scenario"]).column("scenario").to_pylist())
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None:
            return set()
        if "scenario" not in reader.fieldnames:
            raise InputError(
                path.name, short(",".join(reader.fieldnames)), "a sweep output with a scenario column"
            )
        return {row["scenario"] for row in reader}


def _parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError("output", ".parquet", "a .csv path, or install pyarrow for Parquet output") from None
    return pq


def _pool(todo: list[GridScenario], options: tuple, workers: int) -> Iterator[tuple[str, list[dict]]]:
    if workers == 1:
        for s in todo:
            yield _keyed(s, options)
        return
    with ProcessPoolExecutor(max_workers=workers) as ex:
        futures = [ex.submit(_keyed, s, options) for s in todo]
        for fut in as_completed(futures):
            yield fut.result()


def _ray(todo: list[GridScenario], options: tuple, address: str) -> Iterator[tuple[str, list[dict]]]:
    """Submit every scenario to Ray (connecting to ``address`` unless Ray is already initialised in
    this process; "local" starts a local instance) and yield results as they finish."""
    try:
        import ray
    except ImportError:
        raise InputError("ray_address", address, "Ray installed: pip install 'pdplan[ray]'") from None
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    remote = ray.remote(_keyed)
    pending = [remote.remote(s, options) for s in todo]

    def results() -> Iterator[tuple[str, list[dict]]]:
        nonlocal pending
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])

    return results()


def _progress(stream: TextIO | None, done: int, total: int, t0: float) -> None:
    if stream is None or total == 0:
        return
    width = 30
    filled = int(width * done / total)
    rate = done / max(time.perf_counter() - t0, 1e-9)
    stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} scenarios, {rate:.2f}/s")
    if done == total:
        stream.write("\n")
    stream.flush()


def _csv_sink(path: Path) -> tuple[Callable[[Iterable[dict]], None], Callable[[], None]]:
    new = not path.exists() or path.stat().st_size == 0
    f = path.open("a", newline="", encoding="utf-8")
    writer = csv.DictWriter(f, fieldnames=COLUMNS, restval="")
    if new:
        writer.writeheader()

    def write(rows: Iterable[dict]) -> None:
        writer.writerows(rows)
        f.flush()

    return write, f.close


def _parquet_sink(path: Path) -> tuple[Callable[[Iterable[dict]], None], Callable[[], None]]:
    pq = _parquet()
    import pyarrow as pa

    rows: list[dict] = pq.read_table(path).to_pylist() if path.exists() else []

    def close() -> None:
        table = {c: [r.get(c) for r in rows] for c in COLUMNS}
        pq.write_table(pa.table(table), path)

    return rows.extend, close


def run_sweep(
    grid: Grid,
    out: str | Path,
    *,
    workers: int = 1,
    ray_address: str | None = None,
    progress: TextIO | None = sys.stderr,
) -> SweepResult:
    """Run every scenario of ``grid`` not yet in ``out`` and append its rows; see the module doc."""
    if not isinstance(grid, Grid):
        raise InputError("grid", type(grid).__name__, "a Grid (model.fleet.grid.load_grid)")
    check_int("workers", workers, 1, MAX_WORKERS, "local worker processes")
    path = Path(out)
    done = read_done(path)
    todo = [s for s in grid.scenarios if s.key not in done]
    runner = _ray(todo, grid.options, ray_address) if ray_address else _pool(todo, grid.options, workers)
    write, close = (_parquet_sink if path.suffix.lower() == ".parquet" else _csv_sink)(path)
    t0 = time.perf_counter()
    n_rows = 0
    try:
        _progress(progress, 0, len(todo), t0)
        for i, (_, rows) in enumerate(runner, start=1):
            write(rows)
            n_rows += len(rows)
            _progress(progress, i, len(todo), t0)
    finally:
        close()
    return SweepResult(
        str(path), len(todo), len(grid.scenarios) - len(todo), n_rows, time.perf_counter() - t0
    )
