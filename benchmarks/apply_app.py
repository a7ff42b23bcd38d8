"""Responsiveness of the web app in a real browser: time from a click on *Apply* to the settled
page (new footer, no running script, no spinner, then the last DOM change), for typical scenarios
(issue 19: 16-64 GPUs), split into where the time goes.

For each scenario (set by URL) it starts ``streamlit run app.py`` pinned to one core (``taskset -c``,
``--server-cpu``) and headless Chromium (the helpers of tests/test_app_browser.py; ``--browser-cpu``
pins it too), loads the page, then steps the *Percentile* slider and clicks Apply: ``--new`` steps
to values not planned before (each a full re-plan) and then two steps back to values already
planned (cached). Per step it prints the time from the click to the settled page (the last DOM
change, page clock) and its split (tests/app_timing.py): *server*, from the rerun request leaving
the browser to the run's ``script_finished`` message arriving (network clock), of which the
server's own page run and ``model.plan`` (the footer's "Computed in W s (C s CPU; plan P s ...)":
wall seconds of the script thread), the rest being Streamlit's work around the page run and the
messages' transport; *browser*, the rest (the click, and rendering what the run sent, the charts
included); and the number and bytes of the messages the run sent. Per scenario the medians and
maxima. Next to it, a bare ``model.plan`` on the same inputs in this process on the same core (with
and without the flip-threshold searches the app skips on Apply), and the load average, so a loaded
machine shows. Chromium is Debian's ``chromium``
(``bash .ci/install_browser.sh``). Usage::

    python benchmarks/apply_app.py [--gpus 16 32 64] [--new 4] [--server-cpu 0] [--browser-cpu 1]

``--in-process`` runs no browser: the page in this process (``streamlit.testing.v1.AppTest``), where
each Apply's page run is split into ``model.plan`` and the rest (wall and CPU seconds of the script
thread), which is where the server's time beyond the plan shows.
Figures of a run are recorded in docs/app.md ("Responsiveness").
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.app_timing import measure  # noqa: E402

# The app's default inputs (app_support/values.py DEFAULTS) as model.plan arguments.
PLAN_INPUTS = {
    "workload": "chat",
    "ttft_slo_s": 0.5,
    "tpot_slo_s": 0.05,
    "attainment": 0.9,
    "link": "ib-ndr-400",
}
FOOTER = re.compile(r"Computed in ([0-9.]+) s \(([0-9.]+) s CPU(?:; plan ([0-9.]+) s)?")


def bare_plan_s(gpus: int, percentile: int, thresholds: bool, cpu: str | None) -> float:
    """Seconds of one ``model.plan`` on the same inputs in this process (no browser, no Streamlit),
    on the server's core, measured next to the browser figures so that a loaded machine shows in both."""
    import model

    before = os.sched_getaffinity(0)
    if cpu is not None:
        os.sched_setaffinity(0, {int(c) for c in cpu.split(",")})
    try:
        t0 = time.perf_counter()
        inputs = {**PLAN_INPUTS, "gpus": gpus, "percentile": percentile, "thresholds": thresholds}
        model.plan("llama-3.1-70b", "h100-sxm", **inputs)
        return time.perf_counter() - t0
    finally:
        os.sched_setaffinity(0, before)


def in_process(gpus: int, new: int) -> None:
    """Per Apply to a new *Percentile* value: the page run's wall and CPU seconds (script thread),
    and how much of it was ``model.plan``, in this process without a browser."""
    from streamlit.testing.v1 import AppTest

    import model
    from app_support import guard

    page: list[tuple[float, float]] = []
    plans: list[tuple[float, float]] = []

    def timed(record: list, fn, *a, **k):
        t, c = time.perf_counter(), time.thread_time()
        try:
            return fn(*a, **k)
        finally:
            record.append((time.perf_counter() - t, time.thread_time() - c))

    real_plan, real_run = model.plan, guard.run_guarded
    model.plan = lambda *a, **k: timed(plans, real_plan, *a, **k)
    guard.run_guarded = lambda fn: timed(page, real_run, fn)
    try:
        at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300)
        at.query_params["gpus"] = str(gpus)
        at.run()
        for i in range(new):
            page.clear()
            plans.clear()
            at.slider(key="percentile").set_value(91 + i)
            at.button(key="apply").click().run()
            if at.exception:
                raise RuntimeError(at.exception[0].message)
            (wall, cpu), plan_wall, plan_cpu = page[-1], sum(w for w, _ in plans), sum(c for _, c in plans)
            print(
                f"  {gpus} GPUs, Apply (new plan): page run {wall:.3f} s wall, {cpu:.3f} s CPU; model.plan "
                f"{plan_wall:.3f} s wall, {plan_cpu:.3f} s CPU; the rest {wall - plan_wall:.3f} s wall, "
                f"{cpu - plan_cpu:.3f} s CPU"
            )
    finally:
        model.plan, guard.run_guarded = real_plan, real_run


def _server_s(step: dict) -> tuple[float, float, float]:
    """(wall, CPU, plan wall) seconds of the server's page run, from the footer after the step."""
    hit = FOOTER.search(step.get("footer_after", ""))
    if not hit:
        return float("nan"), float("nan"), float("nan")
    return float(hit.group(1)), float(hit.group(2)), float(hit.group(3) or "nan")


def _stats(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s (max {max(values):.2f} s)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--new", type=int, default=4, help="slider steps to new values (each a re-plan)")
    ap.add_argument("--server-cpu", default="0", help="taskset -c cores of the server ('' = not pinned)")
    ap.add_argument("--browser-cpu", default="", help="taskset -c cores of Chromium ('' = not pinned)")
    ap.add_argument("--in-process", action="store_true", help="no browser: page run = plan + rest")
    args = ap.parse_args()
    if not 1 <= args.new <= 8:
        ap.error("--new: 1..8")
    if args.in_process:
        if args.server_cpu:
            os.sched_setaffinity(0, {int(c) for c in args.server_cpu.split(",")})
        for gpus in args.gpus:
            in_process(gpus, args.new)
        print(f"load average {os.getloadavg()[0]:.1f}")
        return
    server_cpu, browser_cpu = args.server_cpu or None, args.browser_cpu or None
    presses = ("right",) * args.new + ("left", "left")
    bare_plan_s(16, 90, False, server_cpu)  # imports and catalog loading out of the reference figure
    print(f"server pinned to cores {server_cpu}, browser to {browser_cpu}; {os.cpu_count()} cores")
    for gpus in args.gpus:
        load = os.getloadavg()[0]
        results = measure("Percentile", presses, {"gpus": str(gpus)}, (server_cpu, browser_cpu))
        (_, first), steps = results[0], results[1:]
        print(f"{gpus} GPUs: first load (cold server) {first['seconds']:.2f} s")
        for i, (_, r) in enumerate(steps):
            kind = "new plan" if i < args.new else "cached"
            wall, cpu, plan = _server_s(r)
            print(
                f"  Apply -> settled ({kind}): {r['seconds']:.2f} s = server {r['server_s']:.2f} s (page run "
                f"{wall:.2f} s, {cpu:.2f} s CPU, of which plan {plan:.2f} s; round trip and transport "
                f"{r['server_s'] - wall:.2f} s) + browser {r['browser_s']:.2f} s after the run; "
                f"{r['messages']} messages, {r['message_bytes'] / 1e3:.1f} kB  url {r['url_after']}"
            )
        new, cached = steps[: args.new], steps[args.new :]
        bare = [bare_plan_s(gpus, p, False, server_cpu) for p in (96, 97)]
        full = [bare_plan_s(gpus, p, True, server_cpu) for p in (98, 99)]

        def col(rows: list, pick) -> str:
            return _stats([pick(r) for _, r in rows])

        print(
            f"  {gpus} GPUs summary: Apply, new plan: {col(new, lambda r: r['seconds'])}; "
            f"server {col(new, lambda r: r['server_s'])} (page run {col(new, lambda r: _server_s(r)[0])}, "
            f"CPU {col(new, lambda r: _server_s(r)[1])}, plan {col(new, lambda r: _server_s(r)[2])}); "
            f"browser after the run {col(new, lambda r: r['browser_s'])}; "
            f"cached: {col(cached, lambda r: r['seconds'])} (server {col(cached, lambda r: r['server_s'])}, "
            f"browser {col(cached, lambda r: r['browser_s'])}); "
            f"bare model.plan {min(bare):.2f} s without thresholds, {min(full):.2f} s with; "
            f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
