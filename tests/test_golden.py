"""Golden outputs: plan, estimate and simulate JSON for 20 varied scenarios must not drift.

Numbers match to 1e-9 relative; the files were recorded before the subpackage move (issue 12).
When a change moves a number on purpose, regenerate with ``python -m tests.golden.scenarios
--write`` and say why in the commit.
"""

from __future__ import annotations

import json
import math

import pytest

from tests.golden.scenarios import HERE, SCENARIOS, run

REL_TOL = 1e-9


def _compare(got: object, want: object, path: str) -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict), path
        assert sorted(got) == sorted(want), f"{path}: keys {sorted(set(got) ^ set(want))}"
        for k in want:
            _compare(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _compare(g, w, f"{path}[{i}]")
    elif isinstance(want, float) and not isinstance(want, bool):
        assert isinstance(got, int | float), path
        assert math.isclose(got, want, rel_tol=REL_TOL, abs_tol=1e-300), f"{path}: {got} != {want}"
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_golden(name: str) -> None:
    want = json.loads((HERE / f"{name}.json").read_text())
    _compare(run(SCENARIOS[name]), want, name)
