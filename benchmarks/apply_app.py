"""Responsiveness of the web app in a real browser: time from a click on *Apply* to the settled
page (new footer, no running script, no spinner), for typical scenarios (issue 19: 16-64 GPUs).

For each scenario (set by URL) it starts ``streamlit run app.py`` and headless Chromium (the
helpers of tests/test_app_browser.py), loads the page, then steps the *Percentile* slider and
clicks Apply: ``--new`` steps to values not planned before (each a full re-plan) and then two steps
back to values already planned (cached). Prints one line per step and a summary per scenario.
Chromium is Debian's ``chromium`` (``bash .ci/install_browser.sh``). Usage::

    python benchmarks/apply_app.py [--gpus 16 32 64] [--new 4]

Figures of a run are recorded in docs/app.md ("Responsiveness").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.test_app_browser import measure  # noqa: E402

# The app's default inputs (app_support/values.py DEFAULTS) as model.plan arguments.
PLAN_INPUTS = {
    "workload": "chat",
    "ttft_slo_s": 0.5,
    "tpot_slo_s": 0.05,
    "attainment": 0.9,
    "link": "ib-ndr-400",
}


def bare_plan_s(gpus: int, percentile: int) -> float:
    """Seconds of one ``model.plan`` on the same inputs in this process (no browser, no Streamlit),
    measured next to the browser figures so that a loaded machine shows in both."""
    import model

    t0 = time.perf_counter()
    model.plan("llama-3.1-70b", "h100-sxm", gpus=gpus, percentile=percentile, **PLAN_INPUTS)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--new", type=int, default=4, help="slider steps to new values (each a re-plan)")
    args = ap.parse_args()
    if not 1 <= args.new <= 8:
        ap.error("--new: 1..8")
    presses = ("right",) * args.new + ("left", "left")
    bare_plan_s(16, 90)  # imports and catalog loading out of the reference figure
    for gpus in args.gpus:
        results = measure("Percentile", presses, {"gpus": str(gpus)})
        (_, first), steps = results[0], results[1:]
        print(f"{gpus} GPUs: first load (cold server) {first['seconds']:.2f} s")
        new = [r["seconds"] for _, r in steps[: args.new]]
        cached = [r["seconds"] for _, r in steps[args.new :]]
        for i, (_, r) in enumerate(steps):
            kind = "new plan" if i < args.new else "cached"
            print(f"  Apply -> settled ({kind}): {r['seconds']:.2f} s  url {r['url_after']}")
        bare = [bare_plan_s(gpus, p) for p in (96, 97)]
        print(
            f"  {gpus} GPUs summary: new plan median {statistics.median(new):.2f} s (max {max(new):.2f} s); "
            f"cached median {statistics.median(cached):.2f} s; bare model.plan {min(bare):.2f} s; "
            f"load average {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
