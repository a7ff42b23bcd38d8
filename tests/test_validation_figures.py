"""The validation figures of docs/validation.md, recomputed from tests/data/published_measurements.csv:
they must not regress past the recorded values (+ a small tolerance), and issue 16's targets
(<= 12% overall, <= 20% in every category of >= 5 rows) are tests that pass where the recorded figure
meets them and strict xfails where it does not (none since session 7)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import validate_roofline as v

# MdAPE (%) and row count recorded in docs/validation.md ("Fourth round (session 7)", 235 rows),
# per (group, selection). Selection: "all", a split ("train", "holdout") or a category of
# validate_roofline.CATEGORIES.
RECORDED: dict[tuple[str, str], tuple[float, int]] = {
    ("prefill", "all"): (8.5, 51),
    ("decode", "all"): (11.5, 108),
    ("prefill", "train"): (9.3, 28),
    ("decode", "train"): (11.3, 77),
    ("prefill", "holdout"): (7.1, 23),
    ("decode", "holdout"): (12.4, 31),
    ("decode", "moe"): (18.4, 28),
    ("prefill", "fp8/fp4"): (9.3, 22),
    ("decode", "fp8/fp4"): (13.0, 65),
    ("prefill", "consumer"): (8.5, 22),
    ("decode", "consumer"): (14.0, 24),
    ("decode", "amd"): (14.6, 17),
    ("prefill", "long prompt"): (5.7, 7),
    ("decode", "large batch"): (10.2, 56),
}
TOLERANCE_PCT = 0.5  # percentage points a figure may drift before the test calls it a regression
OVERALL_TARGET_PCT = 12.0
CATEGORY_TARGET_PCT = 20.0
MIN_CATEGORY_ROWS = 5


@pytest.fixture(scope="module")
def rows() -> list[v.Row]:
    return v.load()


def _figure(rows: list[v.Row], group: str, selection: str) -> tuple[float, int]:
    if selection == "all":
        kw: dict[str, str] = {}
    elif selection in v.SPLITS:
        kw = {"split": selection}
    else:
        kw = {"category": selection}
    return v.mdape(rows, group, **kw), v.count(rows, group, **kw)


@pytest.mark.parametrize(("group", "selection"), list(RECORDED))
def test_recorded_figure_does_not_regress(rows, group: str, selection: str) -> None:
    recorded, n = RECORDED[(group, selection)]
    got, count = _figure(rows, group, selection)
    assert count == n, f"{group}/{selection}: {count} rows, recorded {n} (update docs/validation.md)"
    assert got <= recorded + TOLERANCE_PCT, f"{group}/{selection}: MdAPE {got:.1f}% > recorded {recorded}%"


def test_every_category_with_enough_rows_is_recorded(rows) -> None:
    for c in v.CATEGORIES:
        for g in v.GROUPS:
            if v.count(rows, g, category=c) >= MIN_CATEGORY_ROWS:
                assert (g, c) in RECORDED, f"{g}/{c} has >= {MIN_CATEGORY_ROWS} rows: record its MdAPE"


def _target_cases() -> list:
    """Issue 16's acceptance targets; those the recorded figures do not meet yet are strict xfails."""
    cases = []
    for (group, selection), (recorded, _) in RECORDED.items():
        if selection in v.SPLITS:
            continue
        target = OVERALL_TARGET_PCT if selection == "all" else CATEGORY_TARGET_PCT
        marks = (
            [pytest.mark.xfail(strict=True, reason=f"recorded {recorded}% > target {target}% (issue 16)")]
            if recorded > target
            else []
        )
        cases.append(pytest.param(group, selection, target, marks=marks, id=f"{group}-{selection}"))
    return cases


@pytest.mark.parametrize(("group", "selection", "target"), _target_cases())
def test_issue16_target(rows, group: str, selection: str, target: float) -> None:
    assert _figure(rows, group, selection)[0] <= target
