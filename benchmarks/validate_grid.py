"""The planner against its own simulator on a broad, seeded grid (issue 17, acceptance 1).

Each *scenario* is sampled (seeded) over models (dense 8B-405B and MoE), weight formats (BF16,
FP8), GPUs (A100, H100, H200, B200, L40S, RTX 4090), workloads (chat, code, summarization,
RAG/long, mixed, fixed lengths), SLOs (tight to loose) and GPU budgets (2-64). The planner is run on
a budget (``model.plan(..., gpus=G, thresholds=False)``); every style's best configuration is one
*cell*: the simulator searches that configuration's goodput (model.sim.simulate.goodput, same SLO,
engine profile, formats) starting at the planner's goodput, and runs it once at the planner's
goodput for the p90 TTFT / TPOT and attainment beside the planner's. The verdict is then read from
the simulated goodputs with the planner's rule (disaggregated when it beats the best colocated
style by the margin, else the colocated style model.planner.colocated_rule names: chunked prefill,
the engines' default, unless plain colocated is ahead by the margin) and compared with the plan's.
``--report-only`` also recomputes both sides' style verdicts under that rule from the stored
goodputs (``rule_verdicts``), so a grid stored before the rule is re-reported under it.

Acceptance (issue 17): simulated / planned goodput in [0.9, 1.1] in >= 90% of cells; the verdict from
the simulated goodputs equals the planner's in >= 95% of scenarios.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/validate_grid.py [--cells N | --scenarios N]
[--workers 2] [--requests N] [--fixed-length] [--json benchmarks/results/grid.json] [--resume]``.
Every scenario is a pure function of (seed, index); ``--resume`` keeps the scenarios already in the
JSON file (same seed, request floor and run-length mode; the model is not checked, so do not resume
across model changes). Each cell's run length scales with its rate x request lifetime
(:func:`run_length`; ``--fixed-length``: exactly ``--requests`` with 10% warm-up, the session-4
choice). The simulation choices are stated in docs/validation.md "Broad grid".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np

MODELS = (
    "llama-3.1-8b",
    "qwen3-8b",
    "qwen3-32b",
    "llama-3.1-70b",
    "qwen2.5-72b",
    "llama-3.1-405b",
    "mixtral-8x7b",
    "qwen3-30b-a3b",
    "gpt-oss-120b",
    "qwen3-235b-a22b",
)
GPUS = ("a100-80gb-sxm", "h100-sxm", "h200", "b200", "l40s", "rtx-4090")
DTYPES = ("bf16", "fp8")
NO_FP8 = ("a100-80gb-sxm",)  # no FP8 tensor cores (the format table refuses fp8 there): BF16
# name -> (preset or (isl, osl) fixed lengths)
WORKLOADS = ("chat", "code", "summarization", "rag", "mixed", "fixed-2000-200", "fixed-8000-400")
BUDGETS = (2, 4, 8, 16, 32, 64)
# SLO tightness: TTFT = factor x the unbatched prefill of the workload's p90 prompt on one TP-t
# instance (at least TTFT_FLOOR_S); TPOT = factor x the batch-1 decode step at a 2,000-token context.
TTFT_FACTORS = (1.5, 3.0, 5.0, 10.0)
TPOT_FACTORS = (1.5, 2.5, 4.0)
TTFT_FLOOR_S = 0.1
BAND = (0.9, 1.1)
# The least number of simulated requests per cell. 1,500 until session 13; 4,500 since session 14:
# at 1,500 the simulated goodput's seed-to-seed SD was 5.0% (noise11, docs/validation.md "Session 11:
# the simulator's seed noise on the grid"), about half the band's width, and noise ~ 1 / sqrt(n) puts
# 4,500 at about 2.9%, the longer runs' 1.7% being out of reach at a CPU cost the grid can bear.
REQUESTS = 4500
WARMUP_FRACTION = 0.1  # with a fixed --requests run length (the session-4 baseline's choice)
# Scaled run length (the default): the warm-up must span STEADY_LIFETIMES request lifetimes at the
# cell's rate (decode batch in steady state; docs/validation.md "Broad grid"), taken at
# RATE_HEADROOM x the planner's goodput since the search may go above it; the first quarter is
# left out, as in benchmarks/steady.py.
STEADY_LIFETIMES = 3.0
RATE_HEADROOM = 1.5
SCALED_WARMUP_FRACTION = 0.25
MAX_REQUESTS = 40_000
SIM_REL_TOL = 0.02
SEED = 17


def workload(name: str):
    from model.workload.plain import workload_from_lengths
    from model.workload.presets import get_workload

    if name.startswith("fixed-"):
        _, isl, osl = name.split("-")
        return workload_from_lengths(int(isl), int(osl), name=name)
    return get_workload(name)


@dataclass
class Scenario:
    index: int
    model: str
    gpu: str
    dtype: str
    workload: str
    gpus: int
    ttft_factor: float
    tpot_factor: float
    ttft_s: float = 0.0
    tpot_s: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.index}:{self.model}:{self.gpu}:{self.dtype}:{self.workload}:{self.gpus}"


def sample_scenario(seed: int, index: int) -> Scenario:
    """Scenario ``index`` of the grid: a pure function of (seed, index)."""
    rng = np.random.default_rng([seed, index])

    def pick(xs):
        return xs[int(rng.integers(len(xs)))]

    model, gpu, dtype = pick(MODELS), pick(GPUS), pick(DTYPES)
    if gpu in NO_FP8:
        dtype = "bf16"
    return Scenario(
        index,
        model,
        gpu,
        dtype,
        pick(WORKLOADS),
        int(pick(BUDGETS)),
        float(pick(TTFT_FACTORS)),
        float(pick(TPOT_FACTORS)),
    )


def slo_for(s: Scenario):
    """The scenario's SLO from the roofline on the smallest TP that holds the weights."""
    from model.hardware.catalog import get_gpu
    from model.llm.catalog import get_model
    from model.physics.deployment import Deployment
    from model.physics.memory import memory_fit
    from model.physics.steps import decode_step_cost, prefill_cost
    from model.workload.slo import SLO

    arch, gpu = get_model(s.model), get_gpu(s.gpu)
    wl = workload(s.workload)
    p90 = float(wl.prompt_tokens.quantile(0.9))
    for tp in (1, 2, 4, 8):
        dep = Deployment(arch, gpu, parallel=tp, weight_dtype=s.dtype)
        if bool(memory_fit(dep, max_batched_tokens=8192).fits):
            break
    ttft = max(s.ttft_factor * float(prefill_cost(dep, p90).time_s), TTFT_FLOOR_S)
    tpot = s.tpot_factor * float(decode_step_cost(dep, 1, 2000).time_s)
    return SLO(round(ttft, 3), round(tpot, 5))


@dataclass
class Cell:
    style: str
    config: str
    n_gpus: int
    goodput_planner: float
    goodput_sim: float
    sim_runs: int
    # at the planner's goodput: planner and simulator p90 TTFT / TPOT and attainment
    ttft_p90_planner: float
    ttft_p90_sim: float
    tpot_p90_planner: float
    tpot_p90_sim: float
    attain_planner: float
    attain_sim: float
    sim_stable: bool
    batch_planner: float = math.nan
    requests: int = 0

    @property
    def ratio(self) -> float:
        return self.goodput_sim / self.goodput_planner if self.goodput_planner > 0 else math.nan


@dataclass
class Result:
    scenario: dict
    slo: tuple[float, float] = (0.0, 0.0)
    verdict_planner: str = ""
    verdict_sim: str = ""
    family_planner: str = ""
    family_sim: str = ""
    cells: list[dict] = field(default_factory=list)
    error: str = ""
    wall_s: float = 0.0


def _verdict(goodputs: dict[str, float], material: bool, margin: float) -> tuple[str, str]:
    """(style, family) the planner's rule picks from these goodputs (model.planner.verdict.decide):
    disaggregated when it beats the best colocated style by the margin and interference is material
    (taken from the plan), else the colocated style ``pick_colocated`` names (the engines' default,
    chunked prefill, unless plain colocated is ahead by the margin: model.planner.colocated_rule)."""
    from model.planner.colocated_rule import pick_colocated

    met = {s: g for s, g in goodputs.items() if g > 0}
    pick = pick_colocated(met, margin)
    dis = met.get("disaggregated", 0.0)
    if pick.style is None:
        return ("disaggregated", "disaggregated") if dis > 0 else ("none", "none")
    best_col = max(g for s, g in met.items() if s in ("colocated", "colocated-chunked"))
    if dis > 0 and dis / best_col - 1.0 >= margin and material:
        return "disaggregated", "disaggregated"
    return pick.style, "colocated"


def rule_verdicts(r: dict, margin: float | None = None) -> tuple[str, str]:
    """(planner, simulator) style verdicts of a stored result under the colocated rule
    (``_verdict``), recomputed from its stored goodputs: the family each side chose is kept (the
    family rule did not change and the interference flag is not stored), a colocated family gets
    the style ``pick_colocated`` names from that side's goodputs."""
    if margin is None:  # the planner's default margin, which plan_for keeps
        from model.planner.plan import PlanRequest

        margin = PlanRequest.margin
    out = []
    for side, key in (("planner", "goodput_planner"), ("sim", "goodput_sim")):
        goodputs = {c["style"]: c[key] for c in r["cells"]}
        if r[f"family_{side}"] == "colocated":
            out.append(
                _verdict({s: g for s, g in goodputs.items() if s != "disaggregated"}, False, margin)[0]
            )
        else:
            out.append(r[f"verdict_{side}"])
    return out[0], out[1]


def plan_for(s: Scenario):
    """The planner's answer for scenario ``s`` on its budget (no flip thresholds); fills in its SLO."""
    import model

    slo = slo_for(s)
    s.ttft_s, s.tpot_s = slo.ttft_s, slo.tpot_s
    return model.plan(
        s.model, s.gpu, workload=workload(s.workload), slo=slo, gpus=s.gpus, dtype=s.dtype, thresholds=False
    )


def run_length(rate_rps: float, lifetime_s: float, minimum: int, scaled: bool = True) -> tuple[int, int]:
    """(requests, warm-up requests) of one cell's simulation.

    Scaled: the warm-up (a quarter of the run) spans STEADY_LIFETIMES request lifetimes
    (:func:`_lifetime_s`: the larger of the planner's p90s at its goodput and the SLO targets) at
    RATE_HEADROOM x the rate, so
    the measured requests meet the decode pool's steady batch (Little: the pool holds
    rate x lifetime requests), at least ``minimum`` and at most MAX_REQUESTS requests. Fixed
    (``scaled=False``): ``minimum`` requests with 10% warm-up, the session-4 baseline's choice.
    """
    if not scaled:
        return minimum, int(WARMUP_FRACTION * minimum)
    in_system = RATE_HEADROOM * rate_rps * max(lifetime_s, 0.0)
    n = max(minimum, math.ceil(STEADY_LIFETIMES * in_system / SCALED_WARMUP_FRACTION))
    n = min(n, MAX_REQUESTS)
    return n, int(SCALED_WARMUP_FRACTION * n)


def _lifetime_s(b, mean_output: float, slo=None) -> float:
    """A request's time in the system: the planner's at its goodput (p90 TTFT + mean output x p90
    TPOT), or, given the cell's ``slo``, the larger of that and the targets' (TTFT target + mean
    output x TPOT target). With the targets the run no longer depends on the planner's p90s: a
    capacity-bound cell with a loose TTFT target (p90 TTFT far below it at the planned goodput) would
    otherwise run too briefly for a queue growing above capacity to reach the target, and the
    simulator would pass rates its steady state fails (session 12: grid cell 122, 14 x TP4 prefill,
    TTFT target 43.7 s, the planner's p90 6.8 s: 1,994 requests read 1.28, 11,036 read 1.04)."""
    ev = b.at_goodput
    planned = float(ev.ttft_s.p90) + mean_output * float(ev.tpot_s.p90)
    if slo is None:
        return planned
    return max(planned, float(slo.ttft_s) + mean_output * float(slo.tpot_s))


def simulate_cell(scn, b, index: int, minimum: int = REQUESTS, scaled: bool = True, seed: int | None = None):
    """The simulator's goodput search for one cell (best configuration ``b`` of the planned
    scenario ``scn``, grid scenario ``index`` seeding the requests unless ``seed`` is given: the
    request seed, used for the run length's mean output and the requests alike), on the cell's run
    length. Returns (GoodputResult, the base requests at 1 req/s, the simulate keyword arguments)."""
    from model.sim.simulate import goodput

    base, kw = cell_requests(scn, b, index, minimum, scaled, seed)
    g = goodput(b.config, scn.arch, base, start_rps=b.goodput_rps, rel_tol=SIM_REL_TOL, **kw)
    return g, base, kw


def cell_requests(scn, b, index: int, minimum: int = REQUESTS, scaled: bool = True, seed: int | None = None):
    """The requests at 1 req/s and the simulate keyword arguments of one cell's runs (as
    :func:`simulate_cell`): seeded by ``seed`` (default the scenario ``index``), on the run length of
    :func:`run_length` at the planner's goodput of ``b``."""
    from model.sim.simulate import SimOptions, poisson_requests, scenario_options

    seed = index if seed is None else seed
    mean_output = float(np.mean(poisson_requests(scn.workload, 1.0, minimum, seed=seed).output_tokens))
    n_req, n_warm = run_length(b.goodput_rps, _lifetime_s(b, mean_output, scn.slo), minimum, scaled)
    base = poisson_requests(scn.workload, 1.0, n_req, seed=seed)
    return base, {**scenario_options(scn), "options": SimOptions(warmup_requests=n_warm)}


def cell_records_at(scn, b, index: int, rate_rps: float):
    """The simulator's request records of one cell's configuration ``b`` run once at ``rate_rps``
    on the cell's requests (:func:`cell_requests`), for the trace tools."""
    from model.sim.simulate import simulate
    from model.workload.arrivals import scale_to_rate

    base, kw = cell_requests(scn, b, index)
    return simulate(b.config, scn.arch, base.at_times(scale_to_rate(base.arrival_s, rate_rps)), **kw).records


def colocated_best_with(index: int, name: str, replacement):
    """The best colocated configuration of grid scenario ``index`` planned with
    model.serving.colocated's ``name`` replaced by ``replacement`` for the call (the trace tools' spies
    on the planner's arrays); the original is restored afterwards."""
    import model.serving.colocated as col

    original = getattr(col, name)
    setattr(col, name, replacement)
    try:
        return plan_for(sample_scenario(SEED, index)).best["colocated"]
    finally:
        setattr(col, name, original)


def cell_ratio(
    index: int, style: str, requests: int = REQUESTS, seed: int = SEED, scaled: bool = True
) -> float:
    """Simulated / planned goodput of one cell (scenario ``index``, the best ``style`` configuration)."""
    s = sample_scenario(seed, index)
    p = plan_for(s)
    b = p.best[style]
    g, _, _ = simulate_cell(p.inputs.scenario, b, s.index, requests, scaled)
    return g.rate_rps / b.goodput_rps


def run_scenario(args: tuple[Scenario, int, bool]) -> Result:
    import model
    from model.planner.verdict import INTERFERENCE_MATERIAL, interference
    from model.serving.registry import style_of
    from model.sim.simulate import SimRequests, simulate
    from model.workload.arrivals import scale_to_rate

    s, n, scaled = args
    t0 = time.perf_counter()
    res = Result(asdict(s))
    try:
        p = plan_for(s)
        slo = p.inputs.scenario.slo
        res.scenario = asdict(s)
        res.slo = (slo.ttft_s, slo.tpot_s)
    except model.PdplanError as err:
        res.error = f"plan: {err}"
        return res
    scn = p.inputs.scenario
    res.verdict_planner = p.verdict
    res.family_planner = style_of(p.best[p.verdict].config).family if p.verdict in p.best else "none"
    sim_goodputs = {}
    for style, b in p.best.items():
        g, base, kw = simulate_cell(scn, b, s.index, n, scaled)
        req = SimRequests(
            scale_to_rate(base.arrival_s, b.goodput_rps), base.prompt_tokens, base.output_tokens
        )
        sm = simulate(b.config, scn.arch, req, **kw).summary
        ev = b.at_goodput
        sim_goodputs[style] = g.rate_rps
        res.cells.append(
            asdict(
                Cell(
                    style,
                    b.config.label(),
                    int(b.config.n_gpus),
                    b.goodput_rps,
                    g.rate_rps,
                    g.runs,
                    ev.ttft_s.p90,
                    sm.ttft_s[1],
                    ev.tpot_s.p90,
                    sm.tpot_s[1],
                    ev.slo_attainment,
                    sm.attainment,
                    bool(sm.stable),
                    float(getattr(ev, "decode_batch", math.nan)),
                    len(base.arrival_s),
                )
            )
        )
    col = p.best.get("colocated-chunked") or p.best.get("colocated")
    cols = [p.best[k] for k in ("colocated-chunked", "colocated") if k in p.best]
    col = max(cols, key=lambda b: b.goodput_rps) if cols else None
    material = col is not None and interference(col) >= INTERFERENCE_MATERIAL
    res.verdict_sim, res.family_sim = _verdict(sim_goodputs, material, p.inputs.margin)
    if res.verdict_planner != "none":
        # the planner's own rule on its own goodputs (sanity: equals plan.verdict)
        pass
    res.wall_s = time.perf_counter() - t0
    return res


# ------------------------------------------------------------------------------------------ report


def _ratio(c: dict) -> float:
    return c["goodput_sim"] / c["goodput_planner"] if c["goodput_planner"] > 0 else math.nan


def miss_category(sc: dict, c: dict) -> str:
    """A miss's class: style, replicas or pools, and which target the simulator misses at the
    planner's goodput (TTFT, TPOT, both, or unstable) or that the planner under-predicts."""
    r = _ratio(c)
    side = "over" if r < BAND[0] else "under"
    cfg = c["config"]
    if c["style"] == "disaggregated":
        shape = "disagg"
    else:
        reps = int(cfg.split(" x ")[0]) if " x " in cfg else 1
        shape = f"{c['style']} R={'1' if reps == 1 else '>1'}"
    if side == "under":
        return f"{shape}: planner under-predicts"
    ttft_bad = c["ttft_p90_sim"] > sc["ttft_s"] * 1.0001
    tpot_bad = c["tpot_p90_sim"] > sc["tpot_s"] * 1.0001
    if not c["sim_stable"]:
        why = "unstable"
    elif ttft_bad and tpot_bad:
        why = "TTFT+TPOT"
    elif ttft_bad:
        why = "TTFT"
    elif tpot_bad:
        why = "TPOT"
    else:
        why = "attainment"
    return f"{shape}: planner over-predicts, sim misses {why}"


def report(results: list[dict]) -> str:
    ok = [r for r in results if not r["error"] and r["cells"]]
    cells = [(r["scenario"], c) for r in ok for c in r["cells"] if c["goodput_planner"] > 0]
    ratios = np.array([_ratio(c) for _, c in cells])
    inside = (ratios >= BAND[0]) & (ratios <= BAND[1])
    lines = [
        f"Scenarios: {len(results)} sampled, {len(ok)} with a plan "
        f"({len(results) - len(ok)} without: no configuration fits or meets the SLOs)",
        f"Cells (style best configurations with planner goodput > 0): {len(cells)}",
        f"Simulated / planned goodput in [{BAND[0]}, {BAND[1]}]: {int(inside.sum())} of {len(cells)} "
        f"({inside.mean():.1%}); median ratio {np.median(ratios):.3f}, "
        f"p10 {np.quantile(ratios, 0.1):.3f}, p90 {np.quantile(ratios, 0.9):.3f}",
    ]
    same_style = [r["verdict_sim"] == r["verdict_planner"] for r in ok]
    same_family = [r["family_sim"] == r["family_planner"] for r in ok]
    lines.append(
        f"Verdict from the simulated goodputs equals the planner's (as stored by the run): style "
        f"{sum(same_style)} of {len(ok)} ({np.mean(same_style):.1%}), family {sum(same_family)} of "
        f"{len(ok)} ({np.mean(same_family):.1%})"
    )
    ruled = [rule_verdicts(r) for r in ok]
    same_rule = [a == b for a, b in ruled]
    misses = ", ".join(str(r["scenario"]["index"]) for r, same in zip(ok, same_rule, strict=True) if not same)
    lines.append(
        f"Style verdict under the colocated rule (chunked unless plain colocated is ahead by the "
        f"margin; both sides recomputed from the stored goodputs): {sum(same_rule)} of {len(ok)} "
        f"({np.mean(same_rule):.1%}); misses: scenarios {misses or 'none'}"
    )
    lines.append("")
    lines.append("| style | cells | in band | median ratio | p10 | p90 |")
    lines.append("|---|---:|---:|---:|---:|---:|")
    for style in ("colocated", "colocated-chunked", "disaggregated"):
        rs = np.array([_ratio(c) for _, c in cells if c["style"] == style])
        if rs.size:
            inb = ((rs >= BAND[0]) & (rs <= BAND[1])).mean()
            lines.append(
                f"| {style} | {rs.size} | {inb:.0%} | {np.median(rs):.2f} | {np.quantile(rs, 0.1):.2f} | "
                f"{np.quantile(rs, 0.9):.2f} |"
            )
    cats: dict[str, list[float]] = defaultdict(list)
    for sc, c in cells:
        r = _ratio(c)
        if not BAND[0] <= r <= BAND[1]:
            cats[miss_category(sc, c)].append(r)
    lines += ["", "| miss class | cells | median ratio | range |", "|---|---:|---:|---|"]
    for k, v in sorted(cats.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"| {k} | {len(v)} | {np.median(v):.2f} | {min(v):.2f} .. {max(v):.2f} |")
    by_dim = Counter()
    tot_dim = Counter()
    for sc, c in cells:
        r = _ratio(c)
        for dim in ("workload", "gpu", "dtype", "model"):
            tot_dim[(dim, sc[dim])] += 1
            if not BAND[0] <= r <= BAND[1]:
                by_dim[(dim, sc[dim])] += 1
    lines += [
        "",
        "Misses by dimension: "
        + "; ".join(
            f"{d}={v} {by_dim[(d, v)]}/{tot_dim[(d, v)]}" for (d, v) in sorted(tot_dim) if by_dim[(d, v)]
        ),
    ]
    return "\n".join(lines)


def _commit() -> str:
    """The measured commit (git HEAD, with "+dirty" for uncommitted changes), for the JSON."""
    import subprocess

    try:

        def git(*a: str) -> str:
            return subprocess.run(["git", *a], capture_output=True, text=True, check=True).stdout.strip()

        dirty = "+dirty" if git("status", "--porcelain", "-uno") else ""
        return git("rev-parse", "--short", "HEAD") + dirty
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=int, default=200, help="stop sampling once this many cells are planned")
    ap.add_argument("--scenarios", type=int, default=None, help="run scenarios 0 .. N-1 (instead of --cells)")
    ap.add_argument("--only", default="", help="comma-separated scenario indices to run (a subset)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--requests", type=int, default=REQUESTS, help="simulated requests per cell (the least, when scaled)"
    )
    ap.add_argument(
        "--fixed-length",
        action="store_true",
        help="exactly --requests with 10%% warm-up (the baseline), not scaled to the cell's rate",
    )
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--json", default="benchmarks/results/grid.json")
    ap.add_argument("--resume", action="store_true", help="keep scenarios already in --json")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    done: dict[int, dict] = {}
    if (args.resume or args.report_only) and os.path.exists(args.json):
        with open(args.json, encoding="utf-8") as fh:
            blob = json.load(fh)
        same = blob.get("run_length", "fixed") == ("fixed" if args.fixed_length else "scaled-slo")
        if blob.get("seed") == args.seed and blob.get("requests") == args.requests and same:
            done = {r["scenario"]["index"]: r for r in blob["results"]}
    if not args.report_only:
        t0 = time.perf_counter()
        index = 0
        n_cells = sum(len(r["cells"]) for r in done.values())
        only = {int(i) for i in args.only.split(",") if i.strip()}
        if only and args.scenarios is None:
            args.scenarios = max(only) + 1
        with ProcessPoolExecutor(args.workers) as pool:
            while (n_cells < args.cells) if args.scenarios is None else (index < args.scenarios):
                batch = []
                limit = math.inf if args.scenarios is None else args.scenarios
                while len(batch) < 2 * args.workers and index < limit:
                    if index not in done and (not only or index in only):
                        job = (sample_scenario(args.seed, index), args.requests, not args.fixed_length)
                        batch.append(job)
                    index += 1
                for r in pool.map(run_scenario, batch):
                    d = asdict(r)
                    done[r.scenario["index"]] = d
                    n_cells += len(r.cells)
                    sc = r.scenario
                    print(
                        f"[{time.perf_counter() - t0:6.0f} s] {sc['index']:3d} {sc['model']} {sc['gpu']} "
                        f"{sc['dtype']} {sc['workload']} G={sc['gpus']} {r.error or ''} "
                        + " ".join(f"{c['style']}={_ratio(c):.2f}" for c in r.cells)
                        + f" verdict {r.verdict_planner}/{r.verdict_sim} ({r.wall_s:.0f} s)",
                        flush=True,
                    )
                os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
                with open(args.json, "w", encoding="utf-8") as fh:
                    json.dump(
                        {
                            "seed": args.seed,
                            "requests": args.requests,
                            "run_length": "fixed" if args.fixed_length else "scaled-slo",
                            "commit": _commit(),
                            "results": [done[k] for k in sorted(done)],
                        },
                        fh,
                        indent=1,
                    )
        print(f"wall time {time.perf_counter() - t0:.0f} s")
    print(report([done[k] for k in sorted(done)]))


if __name__ == "__main__":
    main()
