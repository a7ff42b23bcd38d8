"""Fit the decode-attention efficiency constants on the train split of the measurement table (issue 16).

Run: ``PYTHONPATH=. python benchmarks/fit_attention.py``. Grid search of the two named constants of
model/physics/deployment.py that set how decode attention streams the KV cache:

- ``DECODE_KV_STREAM_EFFICIENCY`` (eta_kv: decode attention reads KV at this fraction of HBM peak),
- ``DECODE_ATTENTION_FIXED_TOKENS`` (C: fixed cost per decoding sequence, in tokens of its KV),

minimising the train decode MdAPE (ties: the train mean absolute error) over the *train* rows of
tests/data/published_measurements.csv (the ``split`` column; held-out rows are printed, never used to
choose). Prefill rows do not depend on either constant.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import validate_roofline as v

from model.physics import deployment as d

EFFICIENCY_GRID = (0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
FIXED_TOKENS_GRID = (0.0, 32.0, 64.0, 128.0, 256.0)


def figures(factor: float, fixed_tokens: float) -> tuple[float, float, float, float]:
    """(train decode MdAPE, train decode mean |error|, holdout decode MdAPE, all-rows decode MdAPE), %."""
    saved = (d.DECODE_KV_STREAM_EFFICIENCY, d.DECODE_ATTENTION_FIXED_TOKENS)
    d.DECODE_KV_STREAM_EFFICIENCY, d.DECODE_ATTENTION_FIXED_TOKENS = factor, fixed_tokens
    try:
        rows = v.load()
        train = v.selected(rows, "decode", split="train")
        mean = 100.0 * float(np.mean([abs(r.error) for r in train]))
        return (
            v.mdape(rows, "decode", split="train"),
            mean,
            v.mdape(rows, "decode", split="holdout"),
            v.mdape(rows, "decode"),
        )
    finally:
        d.DECODE_KV_STREAM_EFFICIENCY, d.DECODE_ATTENTION_FIXED_TOKENS = saved


def main() -> None:
    grid = sorted((*figures(f, c), f, c) for f, c in itertools.product(EFFICIENCY_GRID, FIXED_TOKENS_GRID))
    for td, tmean, hd, ad, f, c in grid[:10]:
        print(
            f"train decode {td:.1f}% (mean {tmean:.1f}%) | holdout {hd:.1f}% | all {ad:.1f}% | "
            f"eta_kv {f:.2f} C {c:g}"
        )
    rec = (d.DECODE_KV_STREAM_EFFICIENCY, d.DECODE_ATTENTION_FIXED_TOKENS)
    td, tmean, hd, ad = figures(*rec)
    print(f"recorded: eta_kv {rec[0]:.2f} C {rec[1]:g} -> train {td:.1f}% holdout {hd:.1f}% all {ad:.1f}%")


if __name__ == "__main__":
    main()
