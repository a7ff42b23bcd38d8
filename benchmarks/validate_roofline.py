"""Compare roofline predictions with published measurements (tests/data/published_measurements.csv).

Run: ``.venv/bin/python benchmarks/validate_roofline.py [--markdown]``. Prints one row per
measurement (prediction, measurement, error) and the median absolute percentage error (MdAPE) per
group: "prefill" (batch-1 prefill / TTFT rows) and "decode" (TPOT rows, and end-to-end rows of a
batch-1 generation whose time is mostly decode steps). Uses the default per-GPU efficiencies only.
"""

from __future__ import annotations

import argparse
import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from model.hardware.catalog import get_gpu
from model.hardware.parallelism import Parallelism
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.generation import generation_time_s, mean_tpot_s
from model.physics.steps import prefill_cost

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "published_measurements.csv"
GROUP = {"prefill_s": "prefill", "tpot_s": "decode", "e2e_s": "decode"}


@dataclass(frozen=True)
class Row:
    id: str
    model: str
    gpu: str
    tp: int
    pp: int
    dtype: str
    kv_dtype: str
    batch: int
    isl: int
    osl: int
    metric: str
    measured_s: float
    engine: str
    source: str
    predicted_s: float

    @property
    def error(self) -> float:
        """Signed relative error (predicted - measured) / measured."""
        return self.predicted_s / self.measured_s - 1.0

    @property
    def group(self) -> str:
        return GROUP[self.metric]


def predict(r: dict[str, str]) -> float:
    """The model's value for one measurement row (default efficiencies of the GPU profile)."""
    dep = Deployment(
        get_model(r["model"]),
        get_gpu(r["gpu"]),
        parallel=Parallelism(tp=int(r["tp"]), pp=int(r["pp"])),
        weight_dtype=r["dtype"],
        kv_dtype=r["kv_dtype"] or None,
    )
    b, isl, osl = int(r["batch"]), int(r["isl"]), int(r["osl"])
    if r["metric"] == "prefill_s":
        return float(prefill_cost(dep, isl, batch=b).time_s)
    if r["metric"] == "tpot_s":
        return float(mean_tpot_s(dep, b, isl, osl))
    if r["metric"] == "e2e_s":
        return float(generation_time_s(dep, b, isl, osl))
    raise ValueError(f"{r['id']}: unknown metric {r['metric']!r}")


def load(path: Path = DATA) -> list[Row]:
    """Read the measurement file and attach a prediction to every row."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        out.append(
            Row(
                id=r["id"],
                model=r["model"],
                gpu=r["gpu"],
                tp=int(r["tp"]),
                pp=int(r["pp"]),
                dtype=r["dtype"],
                kv_dtype=r["kv_dtype"],
                batch=int(r["batch"]),
                isl=int(r["isl"]),
                osl=int(r["osl"]),
                metric=r["metric"],
                measured_s=float(r["measured_s"]),
                engine=r["engine"],
                source=r["source"],
                predicted_s=predict(r),
            )
        )
    return out


def mdape(rows: list[Row], group: str) -> float:
    """Median absolute percentage error of one group, in percent."""
    errs = [abs(r.error) for r in rows if r.group == group]
    return 100.0 * float(np.median(errs)) if errs else float("nan")


def markdown(rows: list[Row]) -> str:
    lines = [
        "| # | model | GPU | TP | dtype | batch | ISL | OSL | metric | measured (ms) | predicted (ms) "
        "| error | engine |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in enumerate(rows, 1):
        lines.append(
            f"| {n} | {r.model} | {r.gpu} | {r.tp} | {r.dtype} | {r.batch} | {r.isl} | {r.osl} "
            f"| {r.metric} | "
            f"{r.measured_s * 1e3:.2f} | {r.predicted_s * 1e3:.2f} | {100 * r.error:+.1f}% | {r.engine} |"
        )
    lines.append("")
    for g in ("prefill", "decode"):
        n = sum(r.group == g for r in rows)
        lines.append(f"- **{g}**: median absolute percentage error {mdape(rows, g):.1f}% over {n} rows")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print the docs/validation.md table")
    args = ap.parse_args()
    rows = load()
    if args.markdown:
        print(markdown(rows))
        return
    for r in rows:
        print(
            f"{r.id:36s} {r.metric:9s} measured {r.measured_s * 1e3:9.2f} ms  predicted "
            f"{r.predicted_s * 1e3:9.2f} ms  {100 * r.error:+6.1f}%"
        )
    for g in ("prefill", "decode"):
        print(f"{g}: MdAPE {mdape(rows, g):.1f}%")


if __name__ == "__main__":
    main()
