"""Published PD-vs-colocated comparisons against pdplan's own ratio (issue #17).

Each row of ``tests/data/pd_comparisons.csv`` is one public measurement that ran a colocated
(aggregated) and a disaggregated deployment on the same hardware: the citation, the model and GPU,
the layout of each style, the workload, the load basis and the measured ratio disaggregated /
colocated. This script sets the same scenario up through the public ``model`` API and computes
pdplan's ratio on the same basis:

- ``basis = slo``: per-GPU goodput (``model.config_goodput`` / GPUs) of each style under the row's
  SLO (the rule ``mooncake`` derives it as Mooncake did: P90 TTFT <= 10 x and P90 TPOT <= 5 x their
  lowest-load values, here pdplan's batch-1 prefill of the mean prompt and batch-1 decode step);
- ``basis = concurrency``: output tokens/s per GPU with N users in flight (closed loop, no think
  time), from ``model.evaluate_concurrency`` (pdplan's fixed-concurrency mode, docs/planner.md).
  :func:`closed_loop_rate` is the plain Little's-law conversion used before that mode existed (the
  rate lambda solving lambda x E2E(lambda) = N, E2E = mean TTFT + (OSL - 1) x mean TPOT from
  ``model.evaluate``); it agrees with ``evaluate_concurrency`` within 1% on the rows here and stays
  as a cross-check.

Direction: the measured and the predicted ratio agree when both are above 1 (disaggregated wins)
or both below 1. pdplan's verdict also has a 10% tie band (model.planner.verdict); a predicted ratio
inside [1/1.1, 1.1] is flagged "tie" in the table.

Run: ``.venv/bin/python benchmarks/pd_comparisons.py [--markdown] [--only ID ...] [--samples N]``
(about a minute on one core).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path

import model

CSV_PATH = Path(__file__).resolve().parent.parent / "tests" / "data" / "pd_comparisons.csv"
TIE_BAND = 1.10  # pdplan's verdict margin (model.planner.verdict): a gain below 10% is a tie
MOONCAKE_TTFT_FACTOR = 10.0  # Mooncake (arXiv:2407.00079 v3, sec. 2): P90 TTFT limit = 10x lowest-load value
MOONCAKE_TBT_FACTOR = 5.0  # ... and P90 TBT limit = 5x
PLACEHOLDER_SLO_S = 3600.0  # SLO of concurrency rows (the scenario needs one; it does not enter the ratio)


@dataclass(frozen=True)
class Row:
    """One published comparison (columns of tests/data/pd_comparisons.csv)."""

    id: str
    citation: str
    model: str
    dtype: str
    kv_dtype: str
    gpu: str
    engine: str
    co: tuple[int, int, int]  # replicas, TP, PP
    prefill: tuple[int, int, int]  # instances, TP, PP
    decode: tuple[int, int, int]
    link: str
    isl: str
    osl: str
    prefix_hit: float
    basis: str
    ttft_slo: str
    tpot_slo: str
    co_concurrency: int
    pd_concurrency: int
    speculation: str
    metric: str
    measured_ratio: float
    ratio_kind: str
    notes: str


def load_rows(path: Path = CSV_PATH) -> list[Row]:
    """The CSV's rows as :class:`Row` values."""
    rows = []
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):

            def three(a: str, b: str, c: str, r: dict[str, str] = r) -> tuple[int, int, int]:
                return int(r[a]), int(r[b]), int(r[c])

            rows.append(
                Row(
                    r["id"], r["citation"], r["model"], r["dtype"], r["kv_dtype"], r["gpu"], r["engine"],
                    three("co_replicas", "co_tp", "co_pp"), three("p_count", "p_tp", "p_pp"),
                    three("d_count", "d_tp", "d_pp"), r["link"], r["isl"], r["osl"],
                    float(r["prefix_hit"] or 0),
                    r["basis"], r["ttft_slo_s"], r["tpot_slo_s"], int(r["co_concurrency"] or 0),
                    int(r["pd_concurrency"] or 0), r["speculation"], r["metric"], float(r["measured_ratio"]),
                    r["ratio_kind"], r["notes"],
                )
            )  # fmt: skip
    return rows


def _length(text: str) -> dict[str, object]:
    """A CSV length: a token count, or a spec whose commas are written ';' (CSV-safe)."""
    return {"fixed": int(text)} if text.isdigit() else {"dist": text.replace(";", ",")}


def workload(row: Row) -> model.Workload:
    """The row's workload (fixed lengths or length-distribution specs, prefix-cache hit rate)."""
    i, o = _length(row.isl), _length(row.osl)
    return model.workload_from_lengths(
        i.get("fixed"), o.get("fixed"), isl_dist=i.get("dist"), osl_dist=o.get("dist"),
        prefix_cache_hit_rate=row.prefix_hit, name=row.id,
    )  # fmt: skip


def configs(row: Row) -> tuple[model.ColocatedConfig, model.DisaggregatedConfig]:
    """The colocated and the disaggregated configuration of the row (same GPU kind)."""
    gpu = model.get_gpu(row.gpu)
    par = lambda tp, pp: model.Parallelism(tp=tp, pp=pp)  # noqa: E731
    (r, tp, pp), (np_, tpp, ppp), (nd, tpd, ppd) = row.co, row.prefill, row.decode
    return (
        model.ColocatedConfig(gpu, par(tp, pp), r),
        model.DisaggregatedConfig(gpu, par(tpp, ppp), np_, gpu, par(tpd, ppd), nd, model.get_link(row.link)),
    )


def gpus(cfg: model.ColocatedConfig | model.DisaggregatedConfig) -> int:
    """GPUs a configuration occupies."""
    if isinstance(cfg, model.ColocatedConfig):
        return cfg.replicas * model.Parallelism(**_degrees(cfg.parallel)).gpus
    return (
        cfg.n_prefill * model.Parallelism(**_degrees(cfg.prefill_parallel)).gpus
        + cfg.n_decode * model.Parallelism(**_degrees(cfg.decode_parallel)).gpus
    )


def _degrees(p: model.Parallelism | int) -> dict[str, int]:
    return {"tp": p} if isinstance(p, int) else {f.name: getattr(p, f.name) for f in dataclasses.fields(p)}


def slo(row: Row, wl: model.Workload) -> model.SLO:
    """The row's SLO; the ``mooncake`` rule: 10 x pdplan's batch-1 prefill of the mean prompt
    (after prefix-cache hits) and 5 x its batch-1 decode step at that context, on one colocated
    instance (Mooncake's lowest-load reference)."""
    if not row.ttft_slo:  # concurrency rows: no SLO enters the comparison; a loose placeholder
        return model.SLO(PLACEHOLDER_SLO_S, PLACEHOLDER_SLO_S)
    if row.ttft_slo != "mooncake":
        return model.SLO(float(row.ttft_slo), float(row.tpot_slo))
    co, _ = configs(row)
    dep = model.Deployment(model.get_model(row.model), co.gpu, co.parallel, row.dtype, row.kv_dtype or None)
    prompt = float(wl.prompt_tokens.mean())
    computed = max(1.0, prompt * (1.0 - row.prefix_hit))
    ttft = MOONCAKE_TTFT_FACTOR * float(model.prefill_cost(dep, computed).time_s)
    tpot = MOONCAKE_TBT_FACTOR * float(model.decode_step_cost(dep, 1, prompt).time_s)
    return model.SLO(round(ttft, 4), round(tpot, 5))


def scenario(row: Row, samples: int | None = None) -> model.Scenario:
    """The pdplan scenario of the row (model, workload, SLO, formats, engine, speculation)."""
    wl = workload(row)
    kw = {"samples": samples} if samples else {}
    scn = model.Scenario.build(
        row.model, wl, slo(row, wl), dtype=row.dtype, kv_dtype=row.kv_dtype or None, engine=row.engine, **kw
    )
    spec = model.parse_speculation(row.speculation) if row.speculation else None
    return dataclasses.replace(scn, speculation=spec) if spec else scn


def _e2e_s(cfg: object, scn: model.Scenario, rate: float, osl: float) -> float:
    ev = model.evaluate(cfg, scn, rate)
    if not ev.stable:
        return math.inf
    return ev.ttft_mean_s + max(osl - 1.0, 0.0) * ev.tpot_mean_s


def closed_loop_rate(cfg: object, scn: model.Scenario, concurrency: int, *, rel_tol: float = 0.01) -> float:
    """Throughput (req/s) with ``concurrency`` requests in flight, by Little's law: the rate lambda with
    lambda x E2E(lambda) = N (Little, Operations Research 9(3), 1961). lambda x E2E grows with lambda,
    so bisection on log(lambda) converges; an unstable rate counts as too high."""
    osl = float(scn.workload.output_tokens.mean())
    lo, hi = 1e-4, 1.0
    while hi * _e2e_s(cfg, scn, hi, osl) < concurrency and hi < 1e6:
        lo, hi = hi, hi * 4.0
    while hi / lo > 1.0 + rel_tol:
        mid = math.sqrt(lo * hi)
        if mid * _e2e_s(cfg, scn, mid, osl) < concurrency:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class Outcome:
    """pdplan's figures for one row: per-GPU value of each style, their ratio, the direction check."""

    row: Row
    co_value: float
    pd_value: float
    unit: str
    ttft_slo_s: float
    tpot_slo_s: float

    @property
    def ratio(self) -> float:
        if self.co_value <= 0:
            return math.inf if self.pd_value > 0 else math.nan
        return self.pd_value / self.co_value

    @property
    def agrees(self) -> bool:
        """Both ratios on the same side of 1 (disaggregated wins in both, or loses in both)."""
        return (self.ratio > 1.0) == (self.row.measured_ratio > 1.0) and math.isfinite(self.ratio)

    @property
    def tie(self) -> bool:
        return 1.0 / TIE_BAND <= self.ratio <= TIE_BAND


def compare(row: Row, samples: int | None = None) -> Outcome:
    """pdplan's disaggregated / colocated ratio for one row, on the row's basis."""
    scn = scenario(row, samples)
    co, pd = configs(row)
    if row.basis == "slo":
        vals = [model.config_goodput(scn, c) / gpus(c) for c in (co, pd)]
        unit = "req/s/GPU"
    elif row.basis == "concurrency":
        loads = ((co, row.co_concurrency), (pd, row.pd_concurrency))
        vals = [
            model.evaluate_concurrency(c, scn, n).at_users.output_tokens_per_s / gpus(c) for c, n in loads
        ]
        unit = "out tok/s/GPU"
    else:
        raise ValueError(f"{row.id}: basis {row.basis!r} is not slo or concurrency")
    return Outcome(row, vals[0], vals[1], unit, scn.slo.ttft_s, scn.slo.tpot_s)


def layout(row: Row) -> tuple[str, str]:
    """Human-readable layouts: '2 x TP4' and '4 x TP1 + 1 x TP4' (PP shown when > 1)."""
    f = lambda n, tp, pp: f"{n} x TP{tp}" + (f"PP{pp}" if pp > 1 else "")  # noqa: E731
    return f(*row.co), f"{f(*row.prefill)} + {f(*row.decode)}"


def markdown(outs: list[Outcome]) -> str:
    """The table for docs/validation.md."""
    lines = [
        "| # | comparison | model / GPU | colocated | disaggregated | workload | basis | measured | pdplan "
        "(colocated -> disaggregated) | pdplan ratio | direction |",
        "|---|---|---|---|---|---|---|---:|---|---:|---|",
    ]
    for i, o in enumerate(outs, 1):
        r = o.row
        co, pd = layout(r)
        wl = f"{r.isl.replace(';', ',')} / {r.osl.replace(';', ',')}" + (
            f", {r.prefix_hit:.0%} cached" if r.prefix_hit else ""
        )
        basis = (
            f"SLO {o.ttft_slo_s:g} s / {o.tpot_slo_s * 1e3:g} ms"
            if r.basis == "slo"
            else f"N = {r.co_concurrency} / {r.pd_concurrency}"
        )
        meas = ("≥ " if r.ratio_kind == "lower bound" else "") + f"{r.measured_ratio:.2f}"
        verdict = ("agrees" if o.agrees else "**disagrees**") + (" (tie band)" if o.tie else "")
        lines.append(
            f"| {i} | {r.id} | {r.model} {r.dtype} / {r.gpu} | {co} | {pd} | {wl} | {basis} | {meas} | "
            f"{o.co_value:.3g} -> {o.pd_value:.3g} {o.unit} | {o.ratio:.2f} | {verdict} |"
        )
    n_ok = sum(o.agrees for o in outs)
    lines.append(f"\nDirection agrees in {n_ok} of {len(outs)} comparisons.")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--markdown", action="store_true", help="print the docs/validation.md table")
    ap.add_argument("--only", nargs="*", default=None, help="row ids to run")
    ap.add_argument(
        "--samples", type=int, default=None, help="request samples per scenario (default: pdplan's)"
    )
    args = ap.parse_args()
    rows = [r for r in load_rows() if not args.only or r.id in args.only]
    t0 = time.perf_counter()
    outs = []
    for r in rows:
        o = compare(r, args.samples)
        outs.append(o)
        print(
            f"<!-- {r.id}: colocated {o.co_value:.4g}, disaggregated {o.pd_value:.4g} {o.unit}; pdplan "
            f"{o.ratio:.2f} vs measured {r.measured_ratio:.2f}: {'agrees' if o.agrees else 'disagrees'} -->",
            flush=True,
        )
    if args.markdown:
        print(markdown(outs))
    print(f"\n<!-- {len(outs)} rows in {time.perf_counter() - t0:.0f} s -->")


if __name__ == "__main__":
    main()
