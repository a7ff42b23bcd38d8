"""Write the model's measured error distribution (model/planner/data/model_errors.json) from the
published-measurement table: log(measured / predicted) per row, split into the prefill and decode
groups of benchmarks/validate_roofline.py. The verdict-robustness sampling
(model.planner.robustness) draws its "plausible worlds" from these.

Run: ``.venv/bin/python benchmarks/model_errors.py`` after the table or the physics changes
(tests/test_robustness.py fails while the committed file is stale).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from validate_roofline import load  # noqa: E402

OUT = ROOT / "model" / "planner" / "data" / "model_errors.json"


def distribution() -> dict:
    """The file's content: per group, the row ids and their log(measured / predicted)."""
    groups: dict[str, dict[str, list]] = {"prefill": {"ids": [], "log_ratios": []}}
    groups["decode"] = {"ids": [], "log_ratios": []}
    for r in load():
        if r.skip:  # a row the model cannot evaluate yet (its reason is in validate_roofline)
            continue
        g = groups[r.group]
        g["ids"].append(r.id)
        g["log_ratios"].append(round(math.log(r.measured_s / r.predicted_s), 9))
    return {
        "source": "tests/data/published_measurements.csv through benchmarks/validate_roofline.py "
        "(default GPU-profile efficiencies, each row's engine profile; every row it evaluates, train "
        "and held-out alike: docs/validation.md reports the two splits)",
        "groups": groups,
    }


def main() -> None:
    OUT.write_text(json.dumps(distribution(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
