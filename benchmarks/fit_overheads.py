"""Fit the engine-overhead constants on the train split of the measurement table (issue 16).

Run: ``PYTHONPATH=. python benchmarks/fit_overheads.py``. Grid search of the per-kernel floor
(``overheads.kernel``) and the per-sequence cost (``overheads.per_sequence``) of the engine profiles,
minimising the decode MdAPE over the *train* rows of tests/data/published_measurements.csv
(``split`` column; held-out rows are never looked at). Prints the grid's best points, the value the
profiles record and the rows that fitted them, so docs/validation.md can list them. The per-request
overhead (``overheads.request``) of vLLM and SGLang is not fitted here: it comes from a direct
measurement (vLLM PR #54628, client minus server TTFT). That of the trtllm profile (NIM's and
trtllm-serve's front end) is: a grid over REQUEST_GRID_S minimising the MdAPE of the train TTFT rows
observed at the client whose engine maps to trtllm (NIM 1.8.0's concurrency-1 rows), ties within
TIE_PCT broken by the mean absolute error (session 7; docs/validation.md, "Fourth round").
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import validate_roofline as v

from model.hardware.catalog import get_engine, get_gpu
from model.hardware.overheads import Overheads

KERNEL_GRID_S = np.arange(0.0, 6.01, 0.5) * 1e-6
PER_SEQUENCE_GRID_S = np.arange(0.0, 30.1, 5.0) * 1e-6
REQUEST_GRID_S = np.arange(0.0, 10.01, 1.0) * 1e-3
TIE_PCT = 0.5  # MdAPE points within which two grid points tie (then: lower mean absolute error)


def train_rows(group: str = "decode") -> list[dict[str, str]]:
    """The evaluated train rows of one group (the rows the constants are fitted on)."""
    import csv

    with v.DATA.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [
        r
        for r in rows
        if v.GROUP[r["metric"]] == group and v.split_of(r["id"]) == "train" and not v.evaluate(r)[1]
    ]


def decode_mdape(rows: list[dict[str, str]], kernel_s: float, per_sequence_s: float) -> float:
    """Decode MdAPE (%) of ``rows`` with the engine profiles' overheads but these two constants."""
    errs = []
    for r in rows:
        gpu = get_gpu(r["gpu"])
        name = v.engine_profile(r["engine"])
        base = get_engine(name).overheads(gpu) if name else Overheads(step_s=gpu.step_overhead_s)
        o = dataclasses.replace(base, kernel_s=kernel_s, per_sequence_s=per_sequence_s)
        errs.append(abs(v.predict(r, overheads=o) / float(r["measured_s"]) - 1.0))
    return 100.0 * float(np.median(errs))


def request_errors(rows: list[dict[str, str]], request_s: float) -> tuple[float, float]:
    """(MdAPE, mean absolute error) in % of the client-observed TTFT ``rows`` with the trtllm profile's
    per-request overhead set to ``request_s``."""
    errs = []
    for r in rows:
        o = dataclasses.replace(get_engine("trtllm").overheads(get_gpu(r["gpu"])), request_s=request_s)
        errs.append(abs(v.predict(r, overheads=o) / float(r["measured_s"]) - 1.0))
    return 100.0 * float(np.median(errs)), 100.0 * float(np.mean(errs))


def fit_request() -> None:
    """Grid of the trtllm profile's per-request overhead on its train client-observed TTFT rows."""
    rows = [
        r
        for r in train_rows("prefill")
        if r["observed"] == "client" and v.engine_profile(r["engine"]) == "trtllm"
    ]
    grid = [(*request_errors(rows, q), q) for q in REQUEST_GRID_S]
    best = min(g[0] for g in grid)
    chosen = min((g for g in grid if g[0] <= best + TIE_PCT), key=lambda g: g[1])
    for med, mean, q in grid:
        print(f"  trtllm request {q * 1e3:4.1f} ms -> train TTFT MdAPE {med:.1f}% (mean {mean:.1f}%)")
    recorded = get_engine("trtllm").request_s
    print(f"fit: {chosen[2] * 1e3:.1f} ms; recorded in trtllm.toml: {recorded * 1e3:.1f} ms")
    print("rows that fitted it: " + ", ".join(r["id"] for r in rows))


def main() -> None:
    rows = train_rows("decode")
    grid = sorted((decode_mdape(rows, k, s), k, s) for k in KERNEL_GRID_S for s in PER_SEQUENCE_GRID_S)
    print(f"train decode rows: {len(rows)}")
    for err, k, s in grid[:8]:
        print(f"  kernel {k * 1e6:4.1f} us  per_sequence {s * 1e6:4.1f} us  -> train decode MdAPE {err:.1f}%")
    vllm = get_engine("vllm")
    chosen = decode_mdape(rows, vllm.kernel_s, vllm.per_sequence_s)
    print(
        f"recorded in the engine profiles: kernel {vllm.kernel_s * 1e6:.1f} us, per_sequence "
        f"{vllm.per_sequence_s * 1e6:.1f} us -> train decode MdAPE {chosen:.1f}%"
    )
    print("rows that fitted them: " + ", ".join(r["id"] for r in rows))
    fit_request()


if __name__ == "__main__":
    main()
