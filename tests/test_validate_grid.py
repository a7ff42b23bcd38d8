"""The broad planner-vs-simulator grid's run length (benchmarks/validate_grid.py, docs/validation.md
"Broad grid"): a cell's simulation must be long against rate x request lifetime, or the measured
requests meet a decode batch still filling up and the simulated p90 TPOT comes out low.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import validate_grid as vg


def test_scaled_run_length_spans_three_lifetimes_at_the_rate_headroom() -> None:
    """Cell 27 of the grid (docs/validation.md): 114 req/s, a request lives ~0.5 s TTFT + 200 tokens
    x 38 ms = 8.1 s. In the system at 1.5 x the rate: 1.5 x 114 x 8.1 = 1,385.1 requests; three
    lifetimes of arrivals: 4,155.3; the warm-up is a quarter: 4 x 4,155.3 = 16,621.2 -> 16,622
    requests, 4,155 of them warm-up (the 1,500-request run of session 4 spanned 13 s)."""
    n, warm = vg.run_length(114.0, 0.5 + 200 * 0.038, 1500)
    assert n == math.ceil(3 * 1.5 * 114.0 * 8.1 / 0.25 - 1e-9) == 16622
    assert warm == 4155
    # the warm-up's arrivals at 1.5 x the rate cover three lifetimes
    assert warm / (1.5 * 114.0) >= 3 * 8.1 * (1 - 1e-3)


def test_run_length_floor_cap_and_fixed_mode() -> None:
    """Slow cells keep the floor (1 req/s, 4 s lifetime: 72 < 1,500); fast ones stop at the cap;
    --fixed-length is the session-4 choice: exactly the request count, 10% warm-up."""
    assert vg.run_length(1.0, 4.0, 1500) == (1500, 375)
    assert vg.run_length(1e4, 10.0, 1500) == (vg.MAX_REQUESTS, vg.MAX_REQUESTS // 4)
    assert vg.run_length(114.0, 8.1, 1500, scaled=False) == (1500, 150)


def test_lifetime_takes_the_slo_targets_when_they_are_longer() -> None:
    """Cell 122 (session 12): planner p90 TTFT 6.8 s and p90 TPOT 26.5 ms at its goodput, targets
    43.711 s and 113.04 ms, mean output 100 tokens: the planner's lifetime 6.8 + 100 x 0.0265 = 9.45 s,
    the targets' 43.711 + 100 x 0.11304 = 55.015 s, which the run takes; a cell whose p90s are at
    their targets keeps the planner's (the larger of the two)."""
    from types import SimpleNamespace as NS

    def cell(ttft_p90: float, tpot_p90: float) -> NS:
        return NS(at_goodput=NS(ttft_s=NS(p90=ttft_p90), tpot_s=NS(p90=tpot_p90)))

    slo = NS(ttft_s=43.711, tpot_s=0.11304)
    assert math.isclose(vg._lifetime_s(cell(6.8, 0.0265), 100.0), 9.45)
    assert math.isclose(vg._lifetime_s(cell(6.8, 0.0265), 100.0, slo), 55.015)
    assert math.isclose(vg._lifetime_s(cell(50.0, 0.2), 100.0, slo), 70.0)
