"""Top-N alternatives: the N best configurations of each serving style and overall.

The ranking is the planner's own objective (model.planner.plan), so the first alternative of a style
is that style's best configuration in the plan:

- on a GPU budget: the highest goodput (rounded to 1e-9 req/s), then fewer GPUs, then lower cost;
- for a target rate: the fewest GPUs (objective "gpus") or the lowest cost (objective "cost"), then
  the higher goodput, then the other resource.

Remaining ties go to enumeration order (styles in registration order), so the order is
deterministic. Nothing is re-planned per candidate: the goodputs are the arrays the planner's
search computed (on a budget), or one vectorised goodput search over the cheapest candidates that
meet the SLOs at the target rate (for a target rate); the binding constraints of the N chosen are
one vectorised evaluation just above their goodputs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from model.limits import check_int
from model.planner.goodput import goodput_rps
from model.planner.types import Alternative, Alternatives, BestConfig
from model.serving.common import check_slo
from model.serving.evaluation import cost_usd_per_million_output_tokens
from model.serving.registry import build_set
from model.serving.style import CandidateSet
from model.units import format_time
from model.workload.scenario import Scenario
from model.workload.slo import SLO

DEFAULT_TOP = 5
# Most alternatives listed per style and overall: a table longer than this is read by a script,
# which can rank the pool map or the sweep itself.
MAX_TOP = 50
# How far above its goodput a candidate is probed to name what fails first (2% plus 1e-9 req/s).
_PROBE_FACTOR = 1.02
_PROBE_ADD_RPS = 1e-9


def check_top(top: object) -> int:
    """``top`` as a whole number of alternatives in [1, MAX_TOP] (InputError naming ``top``)."""
    return check_int("top", top, 1, MAX_TOP, "alternatives listed per style and overall")


@dataclass(frozen=True, eq=False)
class Segment:
    """Candidates of one style from one candidate set, with their goodputs (req/s, 0 = never good)."""

    cands: CandidateSet
    goodput_rps: np.ndarray


def rank_order(
    goodput_rps: np.ndarray, n_gpus: np.ndarray, cost_usd_per_hour: np.ndarray, objective: str | None
) -> np.ndarray:
    """Indices best first. ``objective`` None (a GPU budget): highest goodput, then fewer GPUs,
    then lower cost; "gpus" / "cost" (a target rate): lowest of that, then higher goodput, then the
    other resource. Remaining ties keep index order (numpy's lexsort is stable)."""
    good = -np.round(np.asarray(goodput_rps, dtype=float), 9)
    gpus = np.asarray(n_gpus, dtype=float)
    cost = np.asarray(cost_usd_per_hour, dtype=float)
    if objective is None:
        return np.lexsort((cost, gpus, good))
    if objective == "gpus":
        return np.lexsort((cost, good, gpus))
    return np.lexsort((gpus, good, cost))


def binding_constraints(cands: CandidateSet, rates_rps: np.ndarray, slo: SLO) -> list[tuple[str, str]]:
    """Per candidate, (kind, text) of what stops its rate rising: the first part of the SLO test
    that fails just above ``rates_rps`` (its goodput). Kinds: "memory" / "load" (the queues or KV
    cache become unstable), "TTFT", "TPOT", "TTFT+TPOT", "attainment"."""
    res = cands.evaluate(np.asarray(rates_rps, dtype=float) * _PROBE_FACTOR + _PROBE_ADD_RPS)
    check = check_slo(res.latency, res.stable, slo)
    out = []
    for k in range(len(res.stable)):
        if not res.stable[k]:
            reason = str(res.unstable_reason[k])
            kind = "memory" if ("memory" in reason or "KV-cache" in reason) else "load"
            out.append((kind, f"stability: {reason}"))
        elif not check.ttft_ok[k] and not check.tpot_ok[k]:
            out.append(("TTFT+TPOT", "TTFT and TPOT targets"))
        elif not check.ttft_ok[k]:
            out.append(("TTFT", f"TTFT target (p{slo.percentile:g} <= {format_time(slo.ttft_s)})"))
        elif not check.tpot_ok[k]:
            out.append(("TPOT", f"TPOT target (p{slo.percentile:g} <= {format_time(slo.tpot_s)})"))
        else:
            out.append(
                ("attainment", f"SLO attainment target ({slo.attainment:.0%} of requests meeting both)")
            )
    return out


def cheapest_ok(cands: CandidateSet, ok: np.ndarray, objective: str, slo: SLO, top: int) -> Segment | None:
    """For a target rate: the candidates meeting the SLOs there (``ok``) that can be among the
    ``top`` cheapest by ``objective`` (every tie at the boundary kept), with their goodputs from
    one vectorised search."""
    ok = np.asarray(ok, dtype=bool)
    if not ok.any():
        return None
    obj = np.asarray(cands.n_gpus if objective == "gpus" else cands.price_usd_per_hour, dtype=float)
    bound = np.sort(obj[ok])[min(top, int(ok.sum())) - 1]
    sub = cands.subset(ok & (obj <= bound))
    return Segment(sub, goodput_rps(sub, slo))


def picks(segments: list[Segment], objective: str | None, top: int) -> list[tuple[Segment, int]]:
    """The ``top`` best (segment, index) pairs of one style's segments with goodput > 0."""
    if not segments:
        return []
    good = np.concatenate([s.goodput_rps for s in segments])
    gpus = np.concatenate([np.asarray(s.cands.n_gpus, dtype=float) for s in segments])
    cost = np.concatenate([np.asarray(s.cands.price_usd_per_hour, dtype=float) for s in segments])
    seg = np.concatenate([np.full(len(s.goodput_rps), k) for k, s in enumerate(segments)])
    local = np.concatenate([np.arange(len(s.goodput_rps)) for s in segments])
    order = [int(i) for i in rank_order(good, gpus, cost, objective) if good[i] > 0][:top]
    return [(segments[int(seg[i])], int(local[i])) for i in order]


def _alternatives(chosen: list[tuple[Segment, int]], scn: Scenario) -> tuple[Alternative, ...]:
    """The Alternative of each chosen candidate, in the order given (one evaluation per segment)."""
    texts: dict[tuple[int, int], tuple[str, str]] = {}
    for s in {id(s): s for s, _ in chosen}.values():
        idx = [i for t, i in chosen if t is s]
        mask = np.zeros(len(s.goodput_rps), dtype=bool)
        mask[idx] = True
        found = binding_constraints(s.cands.subset(mask), s.goodput_rps[mask], scn.slo)
        texts.update({(id(s), i): b for i, b in zip(np.nonzero(mask)[0].tolist(), found, strict=True)})
    out = []
    for s, i in chosen:
        config = s.cands.configs[i]
        rate = float(s.goodput_rps[i])
        price = float(np.asarray(s.cands.price_usd_per_hour)[i])
        kind, text = texts[(id(s), i)]
        out.append(
            Alternative(
                style=config.style,
                label=config.label(),
                config=config,
                n_gpus=int(config.n_gpus),
                goodput_rps=rate,
                goodput_rps_per_gpu=rate / config.n_gpus,
                cost_usd_per_hour=price,
                cost_usd_per_million_output_tokens=float(
                    cost_usd_per_million_output_tokens(price, rate * scn.mean_output_tokens)
                ),
                binding=kind,
                binding_constraint=text,
            )
        )
    return tuple(out)


def build_alternatives(
    segments: dict[str, list[Segment]], scn: Scenario, objective: str | None, top: int
) -> Alternatives:
    """Top ``top`` per style (segments by style name, in registration order) and overall, ranked
    as :func:`rank_order` (``objective`` None on a budget)."""
    by_style = {name: _alternatives(picks(segs, objective, top), scn) for name, segs in segments.items()}
    by_style = {name: alts for name, alts in by_style.items() if alts}
    pool = [a for alts in by_style.values() for a in alts]
    order = rank_order(
        np.array([a.goodput_rps for a in pool]),
        np.array([a.n_gpus for a in pool]),
        np.array([a.cost_usd_per_hour for a in pool]),
        objective,
    )
    overall = tuple(pool[int(i)] for i in order[:top])
    return Alternatives(top, objective or "goodput", overall, by_style)


def with_bindings(
    best: dict[str, BestConfig], alternatives: Alternatives, scn: Scenario
) -> dict[str, BestConfig]:
    """``best`` with each style's binding constraint: its first alternative's (the same candidate
    probed at the same rate, :func:`binding_constraints`), probed anew only if the alternatives do
    not list it."""
    out = {}
    for style, b in best.items():
        first = alternatives.by_style.get(style, ())
        if first and first[0].config == b.config and first[0].goodput_rps == b.goodput_rps:
            text = first[0].binding_constraint
        else:
            text = binding_constraints(build_set(scn, [b.config]), np.array([b.goodput_rps]), scn.slo)[0][1]
        out[style] = replace(b, binding_constraint=text)
    return out
