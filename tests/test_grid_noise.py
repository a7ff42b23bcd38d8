"""benchmarks/grid_noise.py: one small grid cell under two request seeds (a short fixed-length run)."""

from __future__ import annotations

import math

import pytest

from benchmarks.grid_noise import SEED_STRIDE, cell_noise, draw_cells, p_in_band, request_seeds, summary


def test_a_small_cell_under_two_seeds_is_finite_and_the_same_seed_reproduces() -> None:
    """Scenario 34 (Llama-3.1-8B, B200, code, 2 GPUs), its colocated cell: 300 requests, seeds 34 and
    100034, then 34 again, which must give the identical goodput (the simulator is deterministic)."""
    seeds = request_seeds(34, 2)
    assert seeds == [34, 34 + SEED_STRIDE]
    c = cell_noise(34, "colocated", [*seeds, 34], minimum=300, scaled=False)
    assert c["index"] == 34 and c["style"] == "colocated" and c["goodput_planner"] > 0
    assert [r["seed"] for r in c["runs"]] == [34, 34 + SEED_STRIDE, 34]
    assert all(r["requests"] == 300 and r["sim_runs"] > 0 and r["goodput_sim"] > 0 for r in c["runs"])
    assert c["runs"][2]["goodput_sim"] == c["runs"][0]["goodput_sim"]
    assert math.isfinite(c["cv"]) and math.isfinite(c["sd_log"]) and c["cv"] > 0
    g = [r["goodput_sim"] for r in c["runs"]]
    assert c["max_abs_log_ratio"] == pytest.approx(abs(math.log(g[1] / g[0])), rel=1e-12)
    s = summary(
        [c], [{"ratio": 1.0, "requests": 300, "sim_runs": 8}, {"ratio": 0.85, "requests": 300, "sim_runs": 8}]
    )
    assert s["cells"] == 1 and s["seeds"] == 3 and s["grid_misses"] == 1
    assert math.isfinite(s["sd_log_pooled"]) and 0.0 <= s["perfect_planner_in_band_normal"] <= 1.0


def test_in_band_chance_by_hand() -> None:
    """sd 0.05: Phi(ln 1.1 / 0.05) - Phi(ln 0.9 / 0.05) = Phi(1.90620) - Phi(-2.10721)
    = 0.971688 - 0.017550 = 0.954138 (normal table values)."""
    assert p_in_band(0.05) == pytest.approx(0.954138, abs=2e-6)


def test_the_draw_is_uniform_without_replacement_and_fixed() -> None:
    cells = [{"index": i} for i in range(50)]
    a, b = draw_cells(cells, 10), draw_cells(cells, 10)
    assert a == b and len({c["index"] for c in a}) == 10
    assert draw_cells(cells, 10, draw_seed=12) != a
