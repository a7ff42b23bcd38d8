"""Verdict robustness (model.planner.robustness): the verdict across plausible worlds drawn from the
model's measured error (issue 17)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import model
from model.errors import InputError
from model.planner.goodput import GOODPUT_RTOL, goodput_rps
from model.planner.robustness import ERRORS_FILE, ErrorModel, error_model, world_factors
from model.planner.verdict import family_best
from model.serving.registry import build_set
from tests.fuzz_common import cli_text as _cli

ROOT = Path(__file__).resolve().parent.parent
KW = dict(workload="chat", ttft_slo_s=0.5, tpot_slo_s=0.05, gpus=16, node="hgx-h100-8", thresholds=False)


@pytest.fixture(scope="module")
def near_tie():
    # disaggregated +7.9% at a 60 ms TPOT target since session 13's early passes of the prefill pool
    # (34.06 against chunked 31.56 req/s, P(disaggregated recommended) 0.63 at 64 draws; at 55 ms the
    # split's lead grew to +12% and P to 0.89); +8.4% at 55 ms after session 12's token-full steps
    # (32.75 against 30.22 req/s, P 0.69); +7.2% after session 11's
    # prefill packing law; +10.8% at 50 ms, the case's target in session 10, +6.9% then; +5.9% at 72 ms
    # before session 10; tests/test_tieband.py) against a 6% margin: the verdict sits on the edge
    # (with the 10% default margin the measured error since issue 16 makes the tie about 90% sure)
    return model.plan("llama-3.1-70b", "h100-sxm", margin=0.06, **{**KW, "tpot_slo_s": 0.06})


def test_error_file_is_fresh():
    """The committed distribution is what benchmarks/model_errors.py computes from the table now."""
    spec = importlib.util.spec_from_file_location("model_errors", ROOT / "benchmarks" / "model_errors.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert json.loads(ERRORS_FILE.read_text(encoding="utf-8")) == mod.distribution()
    err = error_model()
    assert len(err.prefill_log_ratios) >= 10 and len(err.decode_log_ratios) >= 5


def test_latin_hypercube_one_draw_per_stratum():
    # Log ratios {0, 1}: the quantile function at u is 0.1 + 0.8 u (the central 80%, TAIL_QUANTILES),
    # so u = (log factor - 0.1) / 0.8, and every one of the D strata [k/D, (k+1)/D) holds exactly
    # one draw in each column (the link column is log-uniform: u = log f / (2 x 0.5) + 0.5).
    err = ErrorModel((0.0, 1.0), (0.0, 1.0), 0.5, "test")
    d = 50
    f = world_factors(err, d, seed=3)
    u_p, u_d = ((np.log(f[:, i]) - 0.1) / 0.8 for i in (0, 1))
    for col in (u_p, u_d, np.log(f[:, 2]) / (2 * 0.5) + 0.5):
        assert sorted(np.floor(col * d).astype(int)) == list(range(d))
    assert np.array_equal(f, world_factors(err, d, seed=3))  # deterministic for a seed
    assert not np.array_equal(f, world_factors(err, d, seed=4))


def test_unit_world_reproduces_the_plan(near_tie):
    """Factors of 1 change nothing: each family's goodput is the plan's own."""
    inp = near_tie.inputs
    for fam in ("colocated", "disaggregated"):
        b = family_best(inp, near_tie.best, fam)
        g = goodput_rps(build_set(inp.scenario, [b.config]).perturbed(np.ones((3, 3))), inp.scenario.slo)
        # equal within the goodput search's precision (the plan searched it among other candidates)
        assert g == pytest.approx([b.goodput_rps] * 3, rel=GOODPUT_RTOL)


def test_slower_decode_world_lowers_goodput(near_tie):
    inp = near_tie.inputs
    b = family_best(inp, near_tie.best, "disaggregated")
    f = np.array([[1.0, 1.0, 1.0], [1.0, 1.3, 1.0], [1.3, 1.0, 1.0], [1.0, 1.0, 0.5]])
    g = goodput_rps(build_set(inp.scenario, [b.config]).perturbed(f), inp.scenario.slo)
    # chat at a 500 ms TTFT target is TTFT-bound here: slower prefill costs goodput, a slower decode
    # or a halved link may not
    assert g[2] < g[0] * (1 - 2 * GOODPUT_RTOL)
    assert g[1] <= g[0] * (1 + GOODPUT_RTOL) and g[3] <= g[0] * (1 + GOODPUT_RTOL)


def test_near_tie_is_uncertain(near_tie):
    r = model.robustness(near_tie, draws=64)
    assert r.draws == 64
    assert 0.15 <= r.p_disaggregated_recommended <= 0.85
    assert r.p_colocated_recommended == pytest.approx(1 - r.p_disaggregated_recommended)
    assert r.ratio_p5 <= r.ratio_p50 <= r.ratio_p95
    assert r.ratio_p5 < 1.0 + near_tie.inputs.margin < r.ratio_p95
    assert "plausible worlds" in r.summary


def test_large_gap_is_sure():
    # code prompts (long) under 2 s / 30 ms: prefill stalls make colocated decode miss the TPOT
    # target, disaggregated has about twice the goodput (+115%). With the 142-row measurement table
    # (session 5) the sampled errors had heavy tails (the DeepSeek-R1 decode rows 2-4x slower than
    # predicted) and P(disaggregated) was ~0.91; since the early-engine profiles model those rows
    # (docs/validation.md, third round) it is 1.0 at these draws. The bound stays at 0.9.
    kw = {**KW, "workload": "code", "ttft_slo_s": 2.0, "tpot_slo_s": 0.03}
    p = model.plan("llama-3.1-70b", "h100-sxm", **kw)
    assert p.verdict == "disaggregated" and p.gain > 0.9
    r = model.robustness(p, draws=64)
    assert r.p_disaggregated_recommended >= 0.9
    assert r.p_disaggregated_better >= r.p_disaggregated_recommended
    assert r.ratio_p50 > 1.9


def test_needs_both_families():
    p = model.plan("llama-3.1-70b", "rtx-4090", workload="chat", ttft_slo_s=0.5, tpot_slo_s=0.05, gpus=2)
    with pytest.raises(InputError, match="plan"):
        model.robustness(p)


@pytest.mark.parametrize("draws", [1, 0, 10**6, 2.5, True])
def test_bad_draws(near_tie, draws):
    with pytest.raises(InputError, match="draws"):
        model.robustness(near_tie, draws=draws)


BASE = (
    "plan --model llama-3.1-70b --gpu h100-sxm --gpus 16 --workload chat --ttft-slo 500ms "
    "--tpot-slo 50ms --node hgx-h100-8 --no-thresholds"
)


def test_cli_json_and_text():
    code, out, _ = _cli(BASE + " --robustness 16 --json")
    assert code == 0
    rob = json.loads(out)["robustness"]
    assert rob["draws"] == 16 and 0.0 <= rob["p_disaggregated_recommended"] <= 1.0
    code, out, _ = _cli(BASE + " --robustness 16")
    assert out.splitlines()[1].startswith("robustness: disaggregated is ahead by the margin in ")


def test_cli_bad_draws():
    code, out, err = _cli(BASE + " --robustness 1")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "pdplan: error: robustness: got 1; allowed: a whole number in [2, 4096] (worlds to draw)"
    ]


def test_chunked_world_scales_the_busy_iteration_with_prefill(near_tie):
    """A world's chunked tables carry their prefill factor (``chunk_time_factor``), and the busy-period
    iteration computed from the deployment (model.serving.chunked_rows.busy_iteration_s) takes it too:
    two worlds 1.0 and 1.25 read exactly 1.25x apart (before session 9's fix the factor was dropped)."""
    from model.serving.chunked_rows import busy_iteration_s

    inp = near_tie.inputs
    b = near_tie.best["colocated-chunked"]
    worlds = build_set(inp.scenario, [b.config]).perturbed(np.array([[1.0, 1.0, 1.0], [1.25, 1.0, 1.0]]))
    assert [t.chunk_time_factor for t in worlds.tables] == [1.0, 1.25]
    t_full = busy_iteration_s(
        inp.scenario, worlds.tables, worlds.table_index, np.full(2, 8.0), np.full(2, 2.0)
    )
    assert t_full[1] == pytest.approx(1.25 * t_full[0], rel=1e-12)


def test_bounded_slo_test_is_the_exact_one(near_tie):
    """slo_ok (Cantelli bounds decide some chunked candidates, model.serving.common) gives check_slo's
    outcome for every world at rates from far below to far above the goodputs, and decides some of
    them by the bounds alone (so the test can tell the two paths apart). slo_ok_rows on some rows
    (LatencyModel.take: the goodput search's _SloTest.rows) gives those rows' outcome."""
    import model.serving.common as common

    inp = near_tie.inputs
    b = near_tie.best["colocated-chunked"]
    worlds = build_set(inp.scenario, [b.config]).perturbed(world_factors(error_model(), 16, 1))
    g = float(b.goodput_rps)
    decided = 0
    rows = np.array([1, 4, 5, 11])
    for scale in (0.05, 0.5, 0.9, 1.0, 1.1, 2.0):
        res = worlds.evaluate(np.full(16, g * scale))
        lo, hi = res.latency.tpot_cdf_bounds(np.full((16, 1), inp.scenario.slo.tpot_s)).bounds()
        decided += int(np.sum((lo.mean(axis=1) >= 0.9 + 1e-9) | (hi.mean(axis=1) < 0.9 - 1e-9)))
        want = common.check_slo(res.latency, res.stable, inp.scenario.slo).ok
        assert np.array_equal(common.slo_ok(res, inp.scenario.slo), want)
        some = common.slo_ok_rows(res.latency.take(rows), np.asarray(res.stable)[rows], inp.scenario.slo)
        assert np.array_equal(some, want[rows])
    assert decided > 0


def test_disaggregated_bounds_give_the_exact_slo_test(near_tie):
    """On disaggregated worlds the bounds of slo_ok (the TTFT law at the packed count's extremes, the
    TPOT law at the join residual's; model.serving.common._ok_by_rows) bracket the exact CDFs, decide
    some candidates alone, and slo_ok gives check_slo's outcome at rates from far below to far above
    the goodput."""
    import model.serving.common as common

    inp = near_tie.inputs
    slo = inp.scenario.slo
    b = near_tie.best["disaggregated"]
    worlds = build_set(inp.scenario, [b.config]).perturbed(world_factors(error_model(), 16, 1))
    g = float(b.goodput_rps)
    t, x, q = np.full((16, 1), slo.ttft_s), np.full((16, 1), slo.tpot_s), slo.percentile / 100.0
    decided = 0
    for scale in (0.05, 0.5, 0.9, 1.0, 1.1, 2.0):
        res = worlds.evaluate(np.full(16, g * scale))
        lat = res.latency
        for (lo, hi), exact in (
            (lat.ttft_cdf_bounds(t), lat.ttft_cdf(t)),
            (lat.tpot_join_bounds(x), lat.tpot_cdf(x)),
        ):
            assert np.all(lo <= exact + 1e-12) and np.all(exact <= hi + 1e-12)
            decided += int(
                np.sum(res.stable & ((lo.mean(axis=1) >= q + 1e-9) | (hi.mean(axis=1) < q - 1e-9)))
            )
        want = common.check_slo(lat, res.stable, slo).ok
        assert np.array_equal(common.slo_ok(res, slo), want)
    assert decided > 0


def test_decided_goodputs_give_the_full_searches_result(near_tie):
    """The result from the worlds' goodputs searched only as far as the result needs them equals,
    field for field, the result from every world's full goodput search; and some worlds did stop
    early (so the shortcut is exercised)."""
    from model.planner.robustness import _decided_goodputs, _from_goodputs, _Rules

    inp = near_tie.inputs
    scn = inp.scenario
    sets = {
        n: build_set(scn, [b.config]).perturbed(world_factors(error_model(), 24, 5))
        for n, b in near_tie.best.items()
    }
    full = {n: goodput_rps(s, scn.slo) for n, s in sets.items()}
    cols = [n for n in sets if n != "disaggregated"]
    decided = _decided_goodputs(sets, scn.slo, _Rules(cols, "disaggregated", inp.margin, None))
    src = error_model().source
    assert _from_goodputs(near_tie, decided, src) == _from_goodputs(near_tie, full, src)
    assert any(not np.array_equal(decided[n], full[n]) for n in sets)
    for n in sets:  # a stopped world keeps a good rate below its full search's value
        assert np.all(decided[n] <= full[n])


def test_capped_then_resumed_search_is_the_full_search(near_tie):
    """A goodput search stopped after a few halvings and resumed ends in the very brackets of the
    uninterrupted search (model.planner.goodput.goodput_brackets' ``halvings``)."""
    from model.planner.goodput import goodput_brackets

    scn = near_tie.inputs.scenario
    s = build_set(scn, [near_tie.best["colocated-chunked"].config]).perturbed(
        world_factors(error_model(), 6, 1)
    )
    whole = goodput_brackets(s, scn.slo)
    part = goodput_brackets(s, scn.slo, halvings=2)
    assert np.all(part.halvings <= 2) and not np.all(part.refined())
    rows = np.array([4, 0, 2])
    rest = goodput_brackets(s.take(rows), scn.slo, resume=part.take(rows))
    for f in ("lo", "hi", "halvings", "ok_min"):
        assert np.array_equal(getattr(rest, f), getattr(whole, f)[rows])
