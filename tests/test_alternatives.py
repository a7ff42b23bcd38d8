"""Top-N alternatives (model.planner.alternatives): ranked by the planner's own objective, the first
of each style is that style's best, sorted, N respected, ties deterministic, bad N refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

import model
from model.cli import main
from model.errors import InputError
from model.planner.alternatives import MAX_TOP, rank_order

_BASE = {
    "workload": "chat",
    "ttft_slo_s": 0.5,
    "tpot_slo_s": 0.05,
    "tp_options": (1, 2, 4),
    "chunk_options": (512, 2048),
    "thresholds": False,
}


@pytest.fixture(scope="module")
def budget_plan() -> model.Plan:
    return model.plan("llama-3.1-8b", "a100-80gb-sxm", gpus=4, **_BASE)


@pytest.fixture(scope="module", params=["gpus", "cost"])
def target_plan(request) -> model.Plan:
    return model.plan(
        "llama-3.1-8b",
        "a100-80gb-sxm",
        target_rate_rps=12.0,
        max_gpus=8,
        objective=request.param,
        **_BASE,
    )


def _same_as_best(alt: model.Alternative, best: model.BestConfig) -> None:
    assert alt.config == best.config
    assert alt.label == best.label
    assert alt.n_gpus == best.n_gpus
    assert alt.goodput_rps == pytest.approx(best.goodput_rps, rel=1e-12)
    assert alt.cost_usd_per_hour == best.cost_usd_per_hour
    assert alt.binding_constraint == best.binding_constraint
    assert alt.cost_usd_per_million_output_tokens == pytest.approx(
        best.at_goodput.cost_usd_per_million_output_tokens, rel=1e-9
    )


def test_budget_first_alternative_of_each_style_is_its_best(budget_plan) -> None:
    alts = budget_plan.alternatives
    assert alts.ranked_by == "goodput" and alts.top == 5
    assert set(alts.by_style) == set(budget_plan.best)
    for style, best in budget_plan.best.items():
        _same_as_best(alts.by_style[style][0], best)


def test_target_rate_first_alternative_of_each_style_is_its_best(target_plan) -> None:
    alts = target_plan.alternatives
    assert alts.ranked_by == target_plan.inputs.objective
    assert set(alts.by_style) == set(target_plan.best)
    for style, best in target_plan.best.items():
        _same_as_best(alts.by_style[style][0], best)
        # Every alternative meets the SLOs at the target rate: its goodput is at least that rate
        # (within the goodput search's 2**-16 bisection precision).
        for a in alts.by_style[style]:
            assert a.goodput_rps >= 12.0 * (1 - 2**-15)


def _budget_key(a: model.Alternative) -> tuple:
    return (-round(a.goodput_rps, 9), a.n_gpus, a.cost_usd_per_hour)


def test_budget_lists_sorted_and_overall_is_the_best_of_all(budget_plan) -> None:
    alts = budget_plan.alternatives
    for lst in (alts.overall, *alts.by_style.values()):
        keys = [_budget_key(a) for a in lst]
        assert keys == sorted(keys)
        assert all(a.goodput_rps > 0 for a in lst)
    pool = sorted((a for lst in alts.by_style.values() for a in lst), key=_budget_key)
    assert [a.label for a in alts.overall] == [a.label for a in pool[: alts.top]]
    assert alts.overall[0].goodput_rps == max(b.goodput_rps for b in budget_plan.best.values())


def test_target_rate_lists_sorted_by_objective_then_goodput(target_plan) -> None:
    alts = target_plan.alternatives
    objective = target_plan.inputs.objective
    for lst in (alts.overall, *alts.by_style.values()):
        keys = [
            (a.n_gpus if objective == "gpus" else a.cost_usd_per_hour, -round(a.goodput_rps, 9)) for a in lst
        ]
        assert keys == sorted(keys)


def test_top_n_respected() -> None:
    p = model.plan("llama-3.1-8b", "a100-80gb-sxm", gpus=4, top=2, **_BASE)
    assert p.alternatives.top == 2
    assert len(p.alternatives.overall) == 2
    assert all(1 <= len(lst) <= 2 for lst in p.alternatives.by_style.values())
    one = model.plan("llama-3.1-8b", "a100-80gb-sxm", gpus=4, top=1, **_BASE)
    for style, best in one.best.items():
        assert len(one.alternatives.by_style[style]) == 1
        _same_as_best(one.alternatives.by_style[style][0], best)


def test_alternative_numbers_by_hand(budget_plan) -> None:
    """goodput per GPU = goodput / GPUs; $ per million output tokens = $/h / 3600 / (goodput x
    mean output tokens) x 1e6; the kind of binding constraint matches its text."""
    mean_out = budget_plan.inputs.scenario.mean_output_tokens
    price = model.get_gpu("a100-80gb-sxm").price_usd_per_hour
    kinds = {"TTFT": "TTFT target", "TPOT": "TPOT target", "TTFT+TPOT": "TTFT and TPOT"}
    for a in budget_plan.alternatives.overall:
        assert a.goodput_rps_per_gpu == pytest.approx(a.goodput_rps / a.n_gpus, rel=1e-12)
        assert a.cost_usd_per_million_output_tokens == pytest.approx(
            a.cost_usd_per_hour / 3600.0 / (a.goodput_rps * mean_out) * 1e6, rel=1e-12
        )
        assert a.cost_usd_per_hour == pytest.approx(a.n_gpus * price, rel=1e-12)
        if a.binding in kinds:
            assert a.binding_constraint.startswith(kinds[a.binding])
        else:
            assert a.binding in ("memory", "load", "attainment")


def test_rank_order_ties_are_deterministic() -> None:
    good = np.array([1.0, 2.0, 2.0, 2.0, 2.0])
    gpus = np.array([1, 4, 4, 2, 4])
    cost = np.array([1.0, 5.0, 4.0, 3.0, 4.0])
    # Budget: highest goodput, then fewer GPUs, then lower cost, then index (2 before 4).
    assert rank_order(good, gpus, cost, None).tolist() == [3, 2, 4, 1, 0]
    # Goodput equal to 1e-9 req/s counts as a tie.
    assert rank_order(np.array([1.0, 1.0 + 1e-12]), np.array([2, 1]), np.zeros(2), None).tolist() == [1, 0]
    # Target rate, fewest GPUs: then higher goodput, then lower cost, then index.
    assert rank_order(good, gpus, cost, "gpus").tolist() == [0, 3, 2, 4, 1]
    # Target rate, lowest cost: then higher goodput, then fewer GPUs.
    assert rank_order(good, gpus, cost, "cost").tolist() == [0, 3, 2, 4, 1]
    same = np.ones(4)
    assert rank_order(same, same, same, None).tolist() == [0, 1, 2, 3]


def test_same_inputs_same_alternatives(budget_plan) -> None:
    again = model.plan("llama-3.1-8b", "a100-80gb-sxm", gpus=4, **_BASE)
    assert model.plan_dict(again)["alternatives"] == model.plan_dict(budget_plan)["alternatives"]


@pytest.mark.parametrize("top", [0, -1, MAX_TOP + 1, 2.5, True, "3", None])
def test_bad_top_is_one_clear_error(top) -> None:
    with pytest.raises(InputError, match="top") as err:
        model.plan("llama-3.1-8b", "a100-80gb-sxm", gpus=4, top=top, **_BASE)
    assert "\n" not in str(err.value)


def test_plan_json_and_cli_table(budget_plan, capsys) -> None:
    d = model.plan_dict(budget_plan)["alternatives"]
    assert d["ranked_by"] == "goodput" and d["top"] == 5
    first = d["by_style"]["colocated"][0]
    assert first["label"] == budget_plan.best["colocated"].label
    for key in ("goodput_rps", "goodput_rps_per_gpu", "n_gpus", "cost_usd_per_hour"):
        assert key in first
    assert {"cost_usd_per_million_output_tokens", "binding", "binding_constraint"} <= set(first)
    argv = ["plan", "--model", "llama-3.1-8b", "--gpu", "a100-80gb-sxm", "--workload", "chat"]
    argv += ["--ttft-slo", "500ms", "--tpot-slo", "50ms", "--gpus", "4", "--tp", "1,2,4"]
    argv += ["--chunks", "512,2048", "--no-thresholds", "--top", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "top 2 overall (ranked by goodput):" in out
    assert "top 2 colocated-chunked (ranked by goodput):" in out
    assert budget_plan.alternatives.overall[0].label in out
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["alternatives"]["overall"]) == 2
    assert main([*argv[:-1], "x"]) == 2
    assert "top" in capsys.readouterr().err


def test_best_binding_is_the_first_alternatives_and_probed_anew_without_it(budget_plan) -> None:
    """A style's best takes its binding constraint from its first alternative (the same candidate
    probed at the same rate); without that alternative it is probed on its own, to the same text."""
    from dataclasses import replace

    from model.planner.alternatives import with_bindings

    best = budget_plan.best
    for style, b in best.items():
        assert b.binding_constraint == budget_plan.alternatives.by_style[style][0].binding_constraint
        assert b.binding_constraint  # never left empty
    blank = {s: replace(b, binding_constraint="") for s, b in best.items()}
    none = replace(budget_plan.alternatives, by_style={})
    probed = with_bindings(blank, none, budget_plan.inputs.scenario)
    assert {s: b.binding_constraint for s, b in probed.items()} == {
        s: b.binding_constraint for s, b in best.items()
    }
