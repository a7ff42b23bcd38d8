"""The grid's re-plan screen (benchmarks/grid_replan.py): a stored cell keeps its simulated goodput
only while the re-planned configuration is the stored one, and the band test is the grid's."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import grid_replan as gr
from benchmarks.validate_grid import SEED, plan_for, sample_scenario


def test_band_edges_are_inclusive() -> None:
    """[0.9, 1.1] closed, as validate_grid.BAND."""
    assert gr.in_band(0.9) and gr.in_band(1.1) and gr.in_band(1.0)
    assert not gr.in_band(0.8999) and not gr.in_band(1.1001)


def test_replan_keeps_the_stored_simulation_only_for_the_same_configuration() -> None:
    """A stored row built from today's plan of scenario 0: the first style keeps its configuration
    (its stored simulated goodput, 2.0 x planned, carries over: ratio 2.0), the second is stored under a
    different configuration label, so without --simulate its simulated goodput is unknown (None)."""
    plan = plan_for(sample_scenario(SEED, 0))
    styles = list(plan.best)
    assert len(styles) >= 2
    cells = []
    for k, style in enumerate(styles[:2]):
        b = plan.best[style]
        label = b.config.label() if k == 0 else "1 x TP1 nowhere"
        cells.append(
            {
                "style": style,
                "config": label,
                "goodput_planner": b.goodput_rps,
                "goodput_sim": 2.0 * b.goodput_rps,
            }
        )
    stored = {
        "scenario": {"index": 0},
        "verdict_planner": plan.verdict,
        "verdict_sim": plan.verdict,
        "family_planner": "colocated",
        "family_sim": "colocated",
        "cells": cells,
    }
    row = gr.replan((stored, False, 4500))
    first, second = (next(c for c in row["cells"] if c["style"] == s) for s in styles[:2])
    assert first["config"] == first["old_config"]
    assert first["sim"] / first["planned_new"] == 2.0
    assert second["sim"] is None and second["old_config"] == "1 x TP1 nowhere"
    assert row["verdict_sim"] == "?"
