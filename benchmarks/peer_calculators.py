"""Public LLM performance calculators side by side with pdplan on the published-measurement table.

Peers (installed from PyPI into a SEPARATE virtual environment, never into pdplan's; nothing of them
is copied here, they are called): NVIDIA's ``aiconfigurator`` (a database of measured kernel times
per GPU / engine / engine version), ``llm-analysis`` (an analytical roofline with efficiency
constants) and ``genz-llm`` (GenZ, an analytical roofline). Set ``PEER_VENV`` (or ``--peer-venv``) to
that environment, e.g. ``python3 -m venv /work/peervenv && /work/peervenv/bin/pip install
aiconfigurator llm-analysis genz-llm``; without it the script prints why and runs pdplan alone.

For each row of tests/data/published_measurements.csv (the rows validate_roofline.py scores), each
peer's translator below turns the row's model, GPU, precision, parallelism, batch, ISL and OSL into
that peer's request, or says why the peer cannot express it (:class:`NotExpressible`). The requests
run in the peer's environment through ``benchmarks/peer_driver.py`` (one subprocess per peer); the
peer's predicted prefill / TTFT, mean TPOT and end-to-end time are compared with the measured value
of the row's metric, next to pdplan's prediction from ``validate_roofline.load`` (the function the
validation tests score). MdAPE per tool and group (prefill; decode = TPOT and end-to-end rows) over
the rows that tool predicted, pdplan's MdAPE over the same rows, and all tools over the rows every
tool predicted (the common subset).

Run: ``PEER_VENV=/work/peervenv .venv/bin/python benchmarks/peer_calculators.py [--only PEER ...]
[--out PATH]`` (a few minutes: aiconfigurator loads its database per system).
Results: benchmarks/results/peer_calculators.json; docs/validation.md, "Peer calculators side by side".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import validate_roofline as v
from peer_requests import PEERS, VARIANTS, metric_quantity, translate

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "peer_driver.py"
RESULTS = HERE / "results" / "peer_calculators.json"
TOOLS = ("pdplan", *PEERS, *VARIANTS)
PEER_TIMEOUT_S = 1800.0


# ---------------------------------------------------------------------------------------------------
# Running the peers and scoring


def peer_python(venv: str | None) -> Path | None:
    """The peers' interpreter, or None when PEER_VENV is unset or holds no python."""
    if not venv:
        return None
    py = Path(venv) / "bin" / "python"
    return py if py.is_file() else None


def run_peer(python: Path, peer: str, requests: list[dict], progress: bool = False) -> dict:
    """Run the driver for one peer; {"versions", "results"} or {"error": text}."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run(
        [str(python), str(DRIVER)],
        input=json.dumps({"peer": peer, "requests": requests}),
        stdout=subprocess.PIPE,
        stderr=None if progress else subprocess.PIPE,
        text=True,
        timeout=PEER_TIMEOUT_S,
        env=env,
        cwd=str(HERE),
    )
    if proc.returncode != 0:
        tail = ((proc.stderr or "").strip().splitlines() or ["(see stderr)"])[-1]
        return {"error": f"driver exited {proc.returncode}: {tail}"}
    return json.loads(proc.stdout)


@dataclass(frozen=True)
class Cell:
    """One tool's value for one row: predicted seconds, or why there is none."""

    predicted_s: float = math.nan
    why_not: str = ""

    def error(self, measured_s: float) -> float:
        return self.predicted_s / measured_s - 1.0


def usable(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def cells_for(peer: str, rows: list[v.Row], refused: dict[str, str], out: dict) -> dict[str, Cell]:
    """Per row id, the peer's cell: its value for the row's metric, its error text, or its refusal."""
    cells = {rid: Cell(why_not=f"not expressible: {why}") for rid, why in refused.items()}
    by_id = {r["id"]: r for r in out.get("results", [])}
    for row in rows:
        if row.id in cells:
            continue
        res = by_id.get(row.id)
        if res is None:
            cells[row.id] = Cell(why_not=out.get("error", "no result"))
        elif "error" in res:
            cells[row.id] = Cell(why_not=f"peer error: {res['error']}")
        else:
            x = res.get(metric_quantity(row.metric), math.nan)
            cells[row.id] = Cell(predicted_s=x) if usable(x) else Cell(why_not=f"peer returned {x!r}")
    return cells


def mdape_of(rows: list[v.Row], cells: dict[str, Cell], group: str, ids: set[str]) -> tuple[float, int]:
    """(MdAPE %, count) of one tool's cells over the rows of ``group`` whose id is in ``ids``."""
    errs = [abs(cells[r.id].error(r.measured_s)) for r in rows if r.group == group and r.id in ids]
    return (100.0 * float(np.median(errs)) if errs else math.nan), len(errs)


def score(rows: list[v.Row], table: dict[str, dict[str, Cell]]) -> dict:
    """MdAPE per tool: over its own rows (with pdplan on the same rows), over the common subset, and
    over the holdout split (rows no pdplan constant was fitted on) shared with pdplan."""
    have = {t: {rid for rid, c in table[t].items() if usable(c.predicted_s)} for t in table}
    common = set.intersection(*have.values()) if have else set()
    holdout = {r.id for r in rows if r.split == "holdout"}
    out: dict = {"own": {}, "common": {}, "holdout": {}}
    for t in table:
        for g in v.GROUPS:
            m, n = mdape_of(rows, table[t], g, have[t])
            pm, _ = mdape_of(rows, table["pdplan"], g, have[t] & have["pdplan"])
            out["own"][f"{t}/{g}"] = {"mdape": m, "rows": n, "pdplan_same_rows": pm}
            cm, cn = mdape_of(rows, table[t], g, common)
            out["common"][f"{t}/{g}"] = {"mdape": cm, "rows": cn}
            ids = have[t] & have["pdplan"] & holdout
            hm, hn = mdape_of(rows, table[t], g, ids)
            hp, _ = mdape_of(rows, table["pdplan"], g, ids)
            out["holdout"][f"{t}/{g}"] = {"mdape": hm, "rows": hn, "pdplan_same_rows": hp}
    out["common_ids"] = sorted(common)
    return out


def pdplan_cells(rows: list[v.Row]) -> dict[str, Cell]:
    return {r.id: Cell(predicted_s=r.predicted_s) if r.evaluated else Cell(why_not=r.skip) for r in rows}


def collect(venv: str | None, only: tuple[str, ...] = PEERS + VARIANTS) -> dict:
    """Load the table, run each peer, and return everything the report and the JSON need."""
    rows = v.load()
    table: dict[str, dict[str, Cell]] = {"pdplan": pdplan_cells(rows)}
    runs: dict = {}
    python = peer_python(venv)
    for peer in only:
        requests, refused = translate(peer, rows)
        if python is None:
            runs[peer] = {"skipped": f"PEER_VENV not set or has no bin/python ({venv!r})"}
            continue
        out = run_peer(python, peer, requests, progress=True)
        runs[peer] = {
            "versions": out.get("versions", {}),
            "error": out.get("error", ""),
            "requests": len(requests),
            # What the peer resolved per row (aiconfigurator: database version, quant modes, layout).
            "details": {r["id"]: r["detail"] for r in out.get("results", []) if r.get("detail")},
        }
        table[peer] = cells_for(peer, rows, refused, out)
    return {"rows": rows, "table": table, "runs": runs, "score": score(rows, table)}


def fmt_ms(c: Cell) -> str:
    return f"{c.predicted_s * 1e3:.2f}" if usable(c.predicted_s) else "-"


def fmt_pct(x: float) -> str:
    return f"{x:.1f}%" if math.isfinite(x) else "-"


def report(res: dict) -> str:
    """Markdown: per-row values, MdAPE tables, and the reasons each peer skipped rows."""
    rows, table, sc = res["rows"], res["table"], res["score"]
    tools = list(table)
    lines = ["| id | metric | measured (ms) | " + " | ".join(f"{t} (ms)" for t in tools) + " |"]
    lines.append("|---" * (3 + len(tools)) + "|")
    for r in rows:
        vals = " | ".join(fmt_ms(table[t][r.id]) for t in tools)
        lines.append(f"| {r.id} | {r.metric} | {r.measured_s * 1e3:.2f} | {vals} |")
    lines += [
        "",
        "| tool | prefill MdAPE (rows) | pdplan, same rows | decode MdAPE (rows) | pdplan, same rows |",
    ]
    lines.append("|---|---|---|---|---|")
    for t in tools:
        p, d = sc["own"][f"{t}/prefill"], sc["own"][f"{t}/decode"]
        lines.append(
            f"| {t} | {fmt_pct(p['mdape'])} ({p['rows']}) | {fmt_pct(p['pdplan_same_rows'])} "
            f"| {fmt_pct(d['mdape'])} ({d['rows']}) | {fmt_pct(d['pdplan_same_rows'])} |"
        )
    lines += [
        "",
        "Holdout split (no pdplan constant fitted on these rows), each tool and pdplan on the same rows:",
    ]
    lines += [
        "",
        "| tool | prefill MdAPE (rows) | pdplan | decode MdAPE (rows) | pdplan |",
        "|---|---|---|---|---|",
    ]
    for t in tools:
        p, d = sc["holdout"][f"{t}/prefill"], sc["holdout"][f"{t}/decode"]
        lines.append(
            f"| {t} | {fmt_pct(p['mdape'])} ({p['rows']}) | {fmt_pct(p['pdplan_same_rows'])} "
            f"| {fmt_pct(d['mdape'])} ({d['rows']}) | {fmt_pct(d['pdplan_same_rows'])} |"
        )
    n_common = len(sc["common_ids"])
    lines += ["", f"Common subset ({n_common} rows predicted by every tool):", ""]
    lines += ["| tool | prefill MdAPE (rows) | decode MdAPE (rows) |", "|---|---|---|"]
    for t in tools:
        p, d = sc["common"][f"{t}/prefill"], sc["common"][f"{t}/decode"]
        lines.append(f"| {t} | {fmt_pct(p['mdape'])} ({p['rows']}) | {fmt_pct(d['mdape'])} ({d['rows']}) |")
    for peer, run in res["runs"].items():
        lines += [
            "",
            f"**{peer}** {run.get('versions') or run.get('skipped', '')} {run.get('error', '')}".rstrip(),
        ]
        if peer in table:
            why: dict[str, list[str]] = {}
            for rid, c in table[peer].items():
                if c.why_not:
                    why.setdefault(c.why_not, []).append(rid)
            for reason, ids in sorted(why.items(), key=lambda kv: -len(kv[1])):
                lines.append(
                    f"- {len(ids)} rows: {reason} ({', '.join(ids[:4])}{', ...' if len(ids) > 4 else ''})"
                )
    return "\n".join(lines)


def to_json(res: dict) -> dict:
    rows, table = res["rows"], res["table"]

    def num(x: float) -> float | None:
        return x if usable(x) else None

    return {
        "peers": res["runs"],
        "score": res["score"],
        "rows": [
            {
                "id": r.id,
                "metric": r.metric,
                "group": r.group,
                "measured_s": r.measured_s,
                **{f"{t}_s": num(table[t][r.id].predicted_s) for t in table},
                **{f"{t}_why_not": table[t][r.id].why_not for t in table if table[t][r.id].why_not},
            }
            for r in rows
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--peer-venv", default=os.environ.get("PEER_VENV"), help="the peers' virtualenv (PEER_VENV)"
    )
    ap.add_argument("--only", nargs="+", choices=PEERS + VARIANTS, default=list(PEERS + VARIANTS))
    ap.add_argument("--out", type=Path, default=RESULTS, help="JSON results file")
    args = ap.parse_args()
    if peer_python(args.peer_venv) is None:
        print(f"peers skipped: PEER_VENV not set or has no bin/python ({args.peer_venv!r}); pdplan alone")
    res = collect(args.peer_venv, tuple(args.only))
    print(report(res))
    if peer_python(args.peer_venv) is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(to_json(res), indent=1, allow_nan=False) + "\n", encoding="utf-8")
        print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
