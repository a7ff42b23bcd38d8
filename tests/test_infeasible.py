"""Actionable infeasibility (issue 19): a "none" plan says what binds, how close it came, and which
budget or targets would work (model.planner.infeasible)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import model
from model.cli import main
from model.physics.steps import decode_step_cost, prefill_cost
from model.serving.phase_tables import deployment
from model.units import format_bytes, format_time
from model.workload.plain import workload_from_lengths

PROMPT, OUTPUT = 2048, 128
WORKLOAD = workload_from_lengths(isl=PROMPT, osl=OUTPUT)
SMALL = {"tp_options": (1, 2), "chunk_options": (512,), "thresholds": False}


def _plan(**kw):
    args = {"workload": WORKLOAD, "ttft_slo_s": 0.5, "tpot_slo_s": 0.05, "gpus": 1, **SMALL, **kw}
    return model.plan("llama-3.1-8b", "h100-sxm", **args)


def test_a_ttft_target_below_the_idle_prefill_binds_ttft_and_states_it():
    """One H100, every prompt 2,048 tokens: at a vanishing load TTFT is the prefill itself plus the
    mean residual of a batch-1 decode step in progress (half a step, model.serving.colocated) plus
    the engine's per-request client overhead, so a
    1 ms target is out of reach; the stated floor is that sum on TP1 (prefill-first colocated)."""
    p = _plan(ttft_slo_s=0.001)
    inf = p.infeasibility
    assert p.verdict == "none" and inf is not None and inf.binding == "ttft"
    scn = p.inputs.scenario
    dep = deployment(scn, p.inputs.gpu, 1)
    step = float(decode_step_cost(dep, 1.0, scn.decode_context_tokens).time_s)
    assert scn.decode_context_tokens == PROMPT + OUTPUT / 2  # E[O (P + O/2)] / E[O], fixed lengths
    # + the engine's per-request client overhead (TTFT as a user measures it; issue 16)
    idle = float(prefill_cost(dep, float(PROMPT)).time_s) + step / 2 + scn.engine.request_s
    # Hand floor: 2 FLOP per parameter per prompt token at the datasheet peak (989 TFLOP/s dense BF16).
    floor = 2 * model.total_params(scn.arch) * PROMPT / p.inputs.gpu.peak_flops("bf16")
    assert inf.lowest_ttft_s == pytest.approx(idle, rel=1e-6)
    assert inf.lowest_ttft_s > floor
    assert inf.closest_ttft_s == pytest.approx(idle, rel=1e-6)
    assert any("TTFT binds" in r and format_time(idle) in r for r in p.reasons)
    # The TPOT target holds, so only the TTFT target is loosened, and to about the idle prefill.
    assert inf.tpot_that_works_s == 0.05
    assert idle <= inf.ttft_that_works_s <= 1.25 * idle


def test_70b_bf16_on_one_rtx_4090_binds_memory_with_needed_and_usable_bytes():
    p = model.plan(
        "llama-3.1-70b",
        "rtx-4090",
        workload="chat",
        ttft_slo_s=2.0,
        tpot_slo_s=0.05,
        gpus=1,
        thresholds=False,
    )
    inf = p.infeasibility
    assert p.verdict == "none" and inf.binding == "memory"
    gpu = model.get_gpu("rtx-4090")
    weights = model.weight_bytes(model.get_model("llama-3.1-70b"), "bf16")  # 70.6e9 params x 2 bytes
    assert weights == pytest.approx(141e9, rel=0.01)
    assert inf.memory_available_bytes_per_gpu == pytest.approx(0.9 * gpu.memory_bytes)
    assert weights < inf.memory_needed_bytes_per_gpu < weights + 5e9  # + workspace and 1.5 GiB reserve
    short = format_bytes(inf.memory_needed_bytes_per_gpu - inf.memory_available_bytes_per_gpu)
    assert any("Memory binds" in r and f"{short} short" in r for r in p.reasons)
    assert inf.closest_label is None and inf.lowest_ttft_s is None
    # 70.6 GB / 8 = 17.6 GB of weights per GPU fits in 23.2 GB usable: TP8 is the first fit.
    assert "One instance fits from TP8 (8 GPUs)" in inf.lines[0]
    # The candidates that could not run stay, as a secondary line after the infeasibility lines.
    assert p.reasons[-1].startswith("Also, ") and "could not run" in p.reasons[-1]


def test_an_impossible_tpot_binds_tpot_above_the_weight_read_floor():
    """A batch-1 decode reads every weight once: weights / HBM bandwidth is a floor on TPOT."""
    p = _plan(tpot_slo_s=0.0005)
    inf = p.infeasibility
    assert p.verdict == "none" and inf.binding == "tpot"
    scn = p.inputs.scenario
    floor = model.weight_bytes(scn.arch, "bf16") / p.inputs.gpu.memory_bandwidth_bytes_per_s  # ~4.8 ms
    assert inf.lowest_tpot_s > floor
    assert any("TPOT binds" in r and format_time(inf.lowest_tpot_s) in r for r in p.reasons)
    # TP2 halves the weight read per GPU but not below 0.5 ms: no budget helps.
    assert inf.gpus_that_work is None and inf.ttft_that_works_s == 0.5
    assert any(f.parameter == "tpot_slo" for f in p.flip_thresholds)


def test_a_feasible_plan_has_no_infeasibility_and_no_json_key():
    p = _plan()
    assert p.verdict != "none" and p.infeasibility is None
    assert "infeasibility" not in model.plan_dict(p)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ttft_ms=st.sampled_from([2.0, 20.0, 60.0, 500.0]),
    tpot_ms=st.sampled_from([2.0, 5.0, 8.0, 50.0]),
    gpus=st.sampled_from([1, 2]),
)
def test_the_suggested_budget_and_targets_really_give_a_feasible_plan(ttft_ms, tpot_ms, gpus):
    p = _plan(ttft_slo_s=ttft_ms / 1e3, tpot_slo_s=tpot_ms / 1e3, gpus=gpus)
    if p.verdict != "none":
        return
    inf = p.infeasibility
    if inf.gpus_that_work is not None:
        assert inf.gpus_that_work > gpus
        again = _plan(ttft_slo_s=ttft_ms / 1e3, tpot_slo_s=tpot_ms / 1e3, gpus=inf.gpus_that_work)
        assert again.verdict != "none"
    if inf.ttft_that_works_s is not None:
        assert inf.ttft_that_works_s >= ttft_ms / 1e3 and inf.tpot_that_works_s >= tpot_ms / 1e3
        again = _plan(ttft_slo_s=inf.ttft_that_works_s, tpot_slo_s=inf.tpot_that_works_s, gpus=gpus)
        assert again.verdict != "none"


def test_target_rate_beyond_max_gpus_binds_load_and_the_suggested_cap_works():
    p = _plan(target_rate_rps=60.0, max_gpus=2, gpus=None)
    inf = p.infeasibility
    assert p.verdict == "none" and inf.binding == "load"
    assert any("Load binds" in r for r in p.reasons)
    assert inf.gpus_that_work is not None and inf.gpus_that_work > 2
    again = _plan(target_rate_rps=60.0, max_gpus=inf.gpus_that_work, gpus=None)
    assert again.verdict != "none"


def test_cli_prints_the_lines_and_what_would_work(capsys):
    args = [
        "plan",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm",
        "--isl",
        str(PROMPT),
        "--osl",
        str(OUTPUT),
    ]
    args += ["--ttft-slo", "1ms", "--tpot-slo", "50ms", "--gpus", "1", "--tp", "1", "--chunks", "512"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "verdict: none" in out and "TTFT binds" in out and "Closest configuration" in out
    assert "what would work:" in out and "TTFT target of" in out
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["infeasibility"]["binding"] == "ttft"
    assert data["infeasibility"]["lines"][0].startswith("TTFT binds")


def test_the_budget_ladder_suggests_the_first_budget_whose_layout_is_fast_enough():
    """TP1 prefills 2,048 tokens in ~59 ms; TP2 splits the GEMMs over two GPUs (~31 ms), so a 45 ms
    TTFT target needs a budget of exactly 2 GPUs."""
    p = _plan(ttft_slo_s=0.045)
    inf = p.infeasibility
    assert inf.binding == "ttft" and inf.lowest_ttft_s > 0.045
    assert inf.gpus_that_work == 2
    assert p.flip_thresholds[0].parameter == "gpus"
    assert _plan(ttft_slo_s=0.045, gpus=2).verdict != "none"


def test_no_tp_option_within_the_budget_binds_the_layout():
    p = _plan(tp_options=(2,))
    inf = p.infeasibility
    assert p.verdict == "none" and inf.binding == "layout"
    assert "no TP option in [2] fits 1 GPU" in inf.lines[0]
    assert inf.gpus_that_work == 2 and _plan(tp_options=(2,), gpus=2).verdict != "none"
