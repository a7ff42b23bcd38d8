"""The throughput-interactivity frontier (model.planner.frontier): a hand-derived point, the
dominance filter, the frontier's shape (hypothesis), the SLO region, bad input and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import model
from model.cli import main
from model.errors import InputError
from model.planner.frontier import MAX_RATES, frontier_dict, pareto_mask

_SLO = model.SLO(0.5, 0.05)
_ARGS = {
    "workload": "chat",
    "ttft_slo_s": 0.5,
    "tpot_slo_s": 0.05,
    "tp_options": (1, 2),
    "chunk_options": (512,),
}


@pytest.fixture(scope="module")
def small() -> model.Frontier:
    return model.frontier("llama-3.1-8b", "a100-80gb-sxm", gpus=2, **_ARGS)


def test_hand_derived_point() -> None:
    """Fixed lengths (1000 in, 200 out), 2 replicas of TP1 = 2 GPUs at 3 req/s: every request is
    served, so output tokens/s per GPU = 3 x 200 / 2 = 300; per user = 1 / p90 TPOT at that rate."""
    wl = model.workload_from_lengths(isl=1000, osl=200)
    scn = model.Scenario.build("llama-3.1-8b", wl, _SLO)
    cfg = model.ColocatedConfig(model.get_gpu("a100-80gb-sxm"), 1, 2, None)
    f = model.style_frontier(scn, [cfg], [3.0])
    assert len(f.rate_rps) == 1 and f.style == "colocated" and f.n_gpus[0] == 2
    assert f.output_tokens_per_s_per_gpu[0] == pytest.approx(300.0, rel=1e-12)
    ev = model.evaluate(cfg, scn, 3.0)
    assert f.tpot_s[0] == pytest.approx(ev.tpot_s.p90, rel=1e-12)
    assert f.output_tokens_per_s_per_user[0] == pytest.approx(1.0 / ev.tpot_s.p90, rel=1e-12)
    assert f.ttft_s[0] == pytest.approx(ev.ttft_s.p90, rel=1e-12)
    assert bool(f.meets_slo[0]) == ev.meets_slo
    assert f.on_frontier.tolist() == [True]  # a single point is its own frontier


def test_unstable_rates_are_left_out() -> None:
    scn = model.Scenario.build("llama-3.1-8b", "chat", _SLO)
    cfg = model.ColocatedConfig(model.get_gpu("a100-80gb-sxm"), 1, 1, None)
    f = model.style_frontier(scn, [cfg], [1.0, 1e6])
    assert f.rate_rps.tolist() == [1.0]


def test_dominance_filter_by_hand() -> None:
    #               0    1    2    3    4    5
    x = np.array([1.0, 2.0, 2.0, 3.0, 1.0, 2.0])
    y = np.array([5.0, 4.0, 3.0, 1.0, 4.0, 4.0])
    # (2,3) is dominated by (2,4); (1,4) by (1,5) and (2,4); point 5 duplicates point 1 (first kept).
    assert pareto_mask(x, y).tolist() == [True, True, False, True, False, False]
    assert pareto_mask(np.zeros(0), np.zeros(0)).tolist() == []


_coords = st.lists(
    st.tuples(st.integers(0, 20).map(float), st.integers(0, 20).map(float)), min_size=1, max_size=60
)


@settings(max_examples=200, deadline=None)
@given(_coords)
def test_frontier_is_non_increasing_and_exactly_the_non_dominated(points) -> None:
    x = np.array([p[0] for p in points])
    y = np.array([p[1] for p in points])
    keep = pareto_mask(x, y)

    def dominates(i: int, j: int) -> bool:
        return x[i] >= x[j] and y[i] >= y[j] and (x[i] > x[j] or y[i] > y[j])

    n = len(x)
    for j in range(n):
        dominated = any(dominates(i, j) for i in range(n))
        duplicate_of_kept = any(keep[i] and x[i] == x[j] and y[i] == y[j] for i in range(j))
        assert keep[j] == (not dominated and not duplicate_of_kept)
    order = np.argsort(x[keep])
    # As per-user speed (x) rises, per-GPU throughput (y) falls: strictly, since ties are dominated.
    assert np.all(np.diff(x[keep][order]) > 0)
    assert np.all(np.diff(y[keep][order]) < 0)


def test_real_frontier_shape_and_slo_region(small) -> None:
    assert set(small.styles) == {"colocated", "colocated-chunked", "disaggregated"}
    assert small.min_tokens_per_s_per_user == pytest.approx(1 / 0.05)
    for s in small.styles.values():
        order = s.frontier_order()
        assert len(order) >= 2
        assert np.all(np.diff(s.output_tokens_per_s_per_user[order]) >= 0)
        assert np.all(np.diff(s.output_tokens_per_s_per_gpu[order]) <= 0)
        # No evaluated point lies above the frontier at any per-user speed it reaches.
        for k in range(len(s.rate_rps)):
            better = s.output_tokens_per_s_per_user[order] >= s.output_tokens_per_s_per_user[k]
            assert s.output_tokens_per_s_per_gpu[k] <= s.output_tokens_per_s_per_gpu[order][better].max()
        # The SLO region (per user >= 1 / TPOT target) holds exactly the points meeting the TPOT
        # target; points meeting the whole SLO lie inside it.
        inside = s.output_tokens_per_s_per_user >= small.min_tokens_per_s_per_user
        assert np.array_equal(inside, s.tpot_s <= 0.05)
        assert np.all(inside[s.meets_slo])
        # Points span light load to near saturation of each configuration.
        assert s.rate_rps.min() < 0.1 * s.rate_rps.max()


def test_dict_lists_the_frontier(small) -> None:
    d = frontier_dict(small)
    assert d["gpus"] == 2 and d["min_output_tokens_per_s_per_user"] == pytest.approx(20.0)
    pts = d["styles"]["disaggregated"]["frontier"]
    assert len(pts) == int(small.styles["disaggregated"].on_frontier.sum())
    users = [p["output_tokens_per_s_per_user"] for p in pts]
    assert users == sorted(users)
    json.dumps(d, allow_nan=False)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rates_rps": [1.0, -2.0]}, "rates"),
        ({"rates_rps": [float("nan")]}, "rates"),
        ({"rates_rps": []}, "rates"),
        ({"rates_rps": [1.0] * (MAX_RATES + 1)}, "rates"),
        ({"rates_rps": "1,2"}, "rates"),
    ],
)
def test_bad_rates_are_one_clear_error(kwargs, field) -> None:
    with pytest.raises(InputError, match=field):
        model.frontier("llama-3.1-8b", "a100-80gb-sxm", gpus=2, **_ARGS, **kwargs)


def test_target_rate_instead_of_budget_is_refused() -> None:
    with pytest.raises(InputError, match="gpus"):
        model.frontier("llama-3.1-8b", "a100-80gb-sxm", target_rate_rps=3.0, **_ARGS)


def test_cli_frontier(capsys) -> None:
    argv = ["frontier", "--model", "llama-3.1-8b", "--gpu", "a100-80gb-sxm", "--workload", "chat"]
    argv += ["--ttft-slo", "500ms", "--tpot-slo", "50ms", "--gpus", "2", "--tp", "1,2", "--chunks", "512"]
    assert main([*argv, "--rates", "1,2,4"]) == 0
    out = capsys.readouterr().out
    assert "SLO region: >= 20 tokens/s per user" in out
    assert "disaggregated:" in out and "tok/s/GPU" in out
    assert main([*argv, "--rates", "1,2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["styles"]) == {"colocated", "colocated-chunked", "disaggregated"}
    assert main([*argv, "--rates", "1,zero"]) == 2
    assert "rates" in capsys.readouterr().err
