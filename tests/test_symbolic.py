"""Symbolic formulas: hand-derived values, agreement with the numeric implementations, closed-form
thresholds, LaTeX rendering and input checking."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import sympy as sp

from model.errors import InputError
from model.hardware.catalog import get_gpu
from model.hardware.collectives import allreduce_time_s
from model.hardware.parallelism import Parallelism
from model.llm.arch import kv_bytes_per_token
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.steps import decode_step_cost, prefill_cost
from model.queueing.decode_batch import solve_batch
from model.queueing.mgc import erlang_c, mg1_wait, mmc_wait
from model.serving.disaggregated import transfer_components
from model.symbolic.core import _latex_quantity
from model.symbolic.formulas import all_formulas, formula, latex_block
from model.symbolic.roofline import decode_values, prefill_values
from model.symbolic.symbols import symbol
from model.symbolic.thresholds import (
    break_even_bandwidth,
    break_even_prompt_tokens,
    max_rate_for_tpot,
    max_rate_for_wait,
    threshold_formulas,
)


def _exposed(
    kv_bytes: float, bw: float, lanes: float, eff: float, lat: float, layers: int, prefill_s: float, lw: bool
):
    """Exposed transfer time from model.disaggregated (a duck-typed scenario of one request)."""
    scn = SimpleNamespace(
        prompt_tokens=np.array([1.0]),
        kv_bytes_per_token=kv_bytes,
        kv_bytes_per_request=lambda tokens: np.asarray(tokens) * kv_bytes,  # full attention
        transfer_kv_bytes=np.array([kv_bytes]),  # one prompt token, nothing held by the decode side
        arch=SimpleNamespace(num_layers=layers),
    )
    _kv, exposed, _occ = transfer_components(
        scn, np.array([[prefill_s]]), np.array([lanes]), np.array([bw * eff]), np.array([lat]), np.array([lw])
    )
    return float(exposed[0, 0])


# ----------------------------------------------------------------------------------------------
# KV bytes


def test_kv_bytes_hand_and_numeric() -> None:
    gqa = formula("kv_bytes_per_token_gqa")
    # Llama-3.1-8B: 2 x 32 layers x 8 KV heads x 128 dims x 2 bytes = 131,072 B
    v = {"num_layers": 32, "num_kv_heads": 8, "head_dim": 128, "kv_element_bytes": 2}
    assert gqa.evaluate(v) == 131072.0
    assert gqa.evaluate(v) == kv_bytes_per_token(get_model("llama-3.1-8b"), "bf16")
    mla = formula("kv_bytes_per_token_mla")
    # DeepSeek-V3: 61 layers x (512 latent + 64 rope) x 1 byte (fp8) = 35,136 B
    ds = get_model("deepseek-v3")
    v = {"num_layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "kv_element_bytes": 1}
    assert (ds.num_layers, ds.kv_lora_rank, ds.qk_rope_head_dim) == (61, 512, 64)
    assert mla.evaluate(v) == 35136.0 == kv_bytes_per_token(ds, "fp8")


# ----------------------------------------------------------------------------------------------
# Roofline


def test_prefill_time_hand_derived() -> None:
    v = {
        "prompt_tokens": 1000,
        "linear_params": 1e9,
        "vocab_size": 1e5,
        "hidden_size": 1e3,
        "num_heads": 8,
        "num_layers": 10,
        "qk_head_dim": 64,
        "v_head_dim": 64,
        "tp": 1,
        "peak_flops_per_s": 1e15,
        "gemm_mfu": 0.5,
        "attention_peak_flops_per_s": 1e15,
        "mfu": 0.5,
        "gemm_exposed_weight_fraction": 0.5,
        "weight_bytes_per_gpu": 2e9,
        "kv_bytes_per_token_per_gpu": 1e5,
        "activation_bytes_per_gpu": 1e8,
        "memory_bandwidth_bytes_per_s": 2e12,
        "mbu": 0.5,
        "comm_s": 0.0,
        "overhead_s": 1e-3,
    }
    # F_lin = 2e9 x 1000 + 2 x 1e5 x 1e3 = 2.0002e12 -> / 5e14 = 4.0004 ms; phi W / (BW MBU) = 1 ms;
    # F_att = 8 x 10 x 128 x 1000 x 1001 = 1.025024e10 -> / 5e14 = 0.02050048 ms. compute = 5.02090048 ms.
    # memory: (2e9 + 2 x 1000 x 1e5 + 1e8) / 1e12 = 2.3 ms. t = 5.02090048 + 1 ms.
    f = formula("prefill_time")
    assert f.evaluate(v) == pytest.approx(6.02090048e-3, rel=1e-12)
    v_mem = v | {"memory_bandwidth_bytes_per_s": 2e11}  # memory 23 ms, compute 4.0004 + 10 + 0.0205 ms
    assert f.evaluate(v_mem) == pytest.approx(24e-3, rel=1e-12)


ROOFLINE_CASES = [
    ("llama-3.1-8b", "h100-sxm", 1, "bf16"),
    ("llama-3.1-70b", "h100-sxm", 4, "fp8"),
    ("mixtral-8x7b", "a100-80gb-sxm", 2, "bf16"),
    ("deepseek-v3", "h200", 8, "fp8"),
]


@pytest.mark.parametrize(("model_name", "gpu", "tp", "dtype"), ROOFLINE_CASES)
def test_roofline_matches_numeric(model_name: str, gpu: str, tp: int, dtype: str) -> None:
    dep = Deployment(get_model(model_name), get_gpu(gpu), parallel=tp, weight_dtype=dtype)
    prefill, decode = formula("prefill_time"), formula("decode_step_time")
    for n in (1, 300, 8192):  # memory- and compute-bound prefills
        assert prefill.evaluate(prefill_values(dep, n)) == pytest.approx(
            float(prefill_cost(dep, n).time_s), rel=1e-12
        )
    for b, ctx in ((1, 10), (64, 4096), (1024, 200)):
        assert decode.evaluate(decode_values(dep, b, ctx)) == pytest.approx(
            float(decode_step_cost(dep, b, ctx).time_s), rel=1e-12
        )


def test_values_helpers_reject_pp_and_bad_lengths() -> None:
    dep = Deployment(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), parallel=Parallelism(pp=2))
    with pytest.raises(InputError, match="pp"):
        prefill_values(dep, 100)
    dep1 = Deployment(get_model("llama-3.1-8b"), get_gpu("h100-sxm"))
    with pytest.raises(InputError, match="prompt_tokens"):
        prefill_values(dep1, 0)
    with pytest.raises(InputError, match="context_tokens"):
        decode_values(dep1, 4, float("nan"))


# ----------------------------------------------------------------------------------------------
# Communication


def test_kv_transfer_whole_and_layerwise() -> None:
    base = {
        "kv_bytes": 1e9,
        "link_latency_s": 1e-5,
        "lanes": 2,
        "link_bandwidth_bytes_per_s": 25e9,
        "link_efficiency": 0.8,
    }
    whole = formula("kv_transfer_whole").evaluate(base)
    assert whole == pytest.approx(1e-5 + 1e9 / 40e9, rel=1e-12)  # 25.01 ms
    assert whole == pytest.approx(_exposed(1e9, 25e9, 2, 0.8, 1e-5, 32, 0.3, False), rel=1e-12)
    lw = formula("kv_transfer_layerwise")
    # t_l = 1e-5 + 25 ms / 32 = 0.79125 ms; tail = 32 t_l - 0.3 + 0.3/32 < 0 -> t_l is exposed
    assert lw.evaluate(base | {"num_layers": 32, "prefill_s": 0.3}) == pytest.approx(7.9125e-4, rel=1e-12)
    # short prefill: tail = 32 x 0.79125 ms - 10 ms + 10/32 ms = 15.6325 ms
    assert lw.evaluate(base | {"num_layers": 32, "prefill_s": 0.01}) == pytest.approx(15.6325e-3, rel=1e-12)
    for pre in (0.3, 0.01, 0.0):
        assert lw.evaluate(base | {"num_layers": 32, "prefill_s": pre}) == pytest.approx(
            _exposed(1e9, 25e9, 2, 0.8, 1e-5, 32, pre, True), rel=1e-12
        )


def test_allreduce_ring() -> None:
    f = formula("allreduce_ring")
    v = {
        "message_bytes": 16e6,
        "n_gpus": 4,
        "allreduce_latency_s": 3e-6,
        "allreduce_bandwidth_bytes_per_s": 373.5e9,
    }
    assert f.evaluate(v) == pytest.approx(6 * (3e-6 + 4e6 / 373.5e9), rel=1e-12)  # 82.26 us
    assert f.evaluate(v) == pytest.approx(float(allreduce_time_s(16e6, 4, 373.5e9, 3e-6)), rel=1e-12)
    assert f.evaluate(v | {"n_gpus": 1}) == 0.0


# ----------------------------------------------------------------------------------------------
# Queueing


def test_pollaczek_khinchine() -> None:
    f = formula("mg1_wait")
    # rho = 0.5: 0.5 x 0.1 x 1.5 / (2 x 0.5) = 75 ms
    assert f.evaluate({"rate_rps": 5, "mean_service_s": 0.1, "scv_service": 0.5}) == pytest.approx(0.075)
    for rate, es, scv in ((5, 0.1, 0.5), (0.3, 2.0, 0.0), (9.9, 0.1, 3.0)):
        v = {"rate_rps": rate, "mean_service_s": es, "scv_service": scv}
        assert f.evaluate(v) == pytest.approx(float(mg1_wait(rate, es, scv).mean_wait_s), rel=1e-12)
    assert f.evaluate({"rate_rps": 10, "mean_service_s": 0.1, "scv_service": 1}) == math.inf
    assert not f.holds({"rate_rps": 15, "mean_service_s": 0.1, "scv_service": 1})


def test_erlang_c_and_mmc() -> None:
    # c = 3, a = 2: P = 2^3/3! x 3/(3-2) = 4; sum_{k<3} 2^k/k! = 5; C = 4/9
    ec = formula("erlang_c")
    assert ec.evaluate({"servers": 3, "offered_load": 2.0}) == pytest.approx(4 / 9, rel=1e-12)
    for c, a in ((1, 0.5), (8, 6.5), (40, 39.0)):
        got = ec.evaluate({"servers": c, "offered_load": a})
        assert got == pytest.approx(float(erlang_c(c, a)), rel=1e-9)
    mmc = formula("mmc_wait")
    # E[W] = (4/9) / (3 x 1 - 2) = 0.4444 s
    assert mmc.evaluate({"rate_rps": 2, "service_rate_per_s": 1, "servers": 3}) == pytest.approx(4 / 9)
    for lam, mu, c in ((2.0, 1.0, 3), (70.0, 10.0, 8), (0.1, 0.2, 1)):
        v = {"rate_rps": lam, "service_rate_per_s": mu, "servers": c}
        assert mmc.evaluate(v) == pytest.approx(float(mmc_wait(lam, 1 / mu, c).mean_wait_s), rel=1e-9)
    assert mmc.evaluate({"rate_rps": 3, "service_rate_per_s": 1, "servers": 3}) == math.inf


# ----------------------------------------------------------------------------------------------
# Decode batch and colocated


def _pool(rate_rps: float, mean_out: float, t0: float, t1: float, cap: float) -> tuple[float, float, bool]:
    """Numeric reference: the planner's Little's-law batch solver on a fine linear grid (affine step).

    Returns (B*, TPOT = s(B*), stable)."""
    grid = np.linspace(0.0, cap, 200_001)
    per_token = (t0 + t1 * np.maximum(grid, 1.0))[None, :]
    sol = solve_batch(np.array([rate_rps * mean_out]), grid, per_token, np.array([cap]))
    return float(sol.batch[0]), float(sol.per_token_s[0]), bool(sol.below_cap[0])


def test_decode_fixed_point_matches_decode_pool() -> None:
    v = {"rate_rps": 30, "mean_output_tokens": 200, "step_time_intercept_s": 0.02, "step_time_slope_s": 1e-4}
    # demand 6000 tok/s: B* = 6000 x 0.02 / (1 - 0.6) = 300; TPOT = 0.02 + 300 x 1e-4 = 50 ms
    assert formula("decode_batch").evaluate(v) == pytest.approx(300.0, rel=1e-12)
    assert formula("decode_tpot").evaluate(v) == pytest.approx(0.05, rel=1e-12)
    batch, tpot, _ = _pool(30.0, 200.0, 0.02, 1e-4, 1000)
    assert batch == pytest.approx(300.0, rel=1e-9)
    assert tpot == pytest.approx(0.05, rel=1e-9)
    assert formula("decode_tpot").evaluate(v | {"rate_rps": 50}) == math.inf  # 50 x 200 x 1e-4 = 1


def test_closed_forms_have_the_hand_derived_shape() -> None:
    s = symbol
    lam, eo, t0, t1 = (
        s("rate_rps"),
        s("mean_output_tokens"),
        s("step_time_intercept_s"),
        s("step_time_slope_s"),
    )
    assert sp.simplify(formula("decode_batch").expr - lam * eo * t0 / (1 - lam * eo * t1)) == 0
    lr, ep = s("rate_per_replica_rps"), s("mean_prefill_s")
    assert sp.simplify(formula("colocated_tpot").expr - t0 / (1 - lr * ep - lr * eo * t1)) == 0


def test_colocated_inflation_and_tpot() -> None:
    tau = formula("colocated_stall_inflation")
    # rho_p = 2 x 0.1 = 0.2: tau = 20 ms / 0.8 = 25 ms
    assert tau.evaluate(
        {"decode_step_s": 0.02, "rate_per_replica_rps": 2, "mean_prefill_s": 0.1}
    ) == pytest.approx(0.025)
    assert (
        tau.evaluate({"decode_step_s": 0.02, "rate_per_replica_rps": 10, "mean_prefill_s": 0.1}) == math.inf
    )
    v = {
        "rate_per_replica_rps": 2,
        "mean_prefill_s": 0.1,
        "mean_output_tokens": 200,
        "step_time_intercept_s": 0.02,
        "step_time_slope_s": 1e-4,
    }
    tpot = formula("colocated_tpot").evaluate(v)
    assert tpot == pytest.approx(0.02 / 0.76, rel=1e-12)  # 1 - 0.2 - 2 x 200 x 1e-4 = 0.76
    # it is the fixed point: B = lambda E[O] tau, tau = (t0 + t1 B) / (1 - rho_p)
    b = 2 * 200 * tpot
    assert (0.02 + 1e-4 * b) / 0.8 == pytest.approx(tpot, rel=1e-12)


# ----------------------------------------------------------------------------------------------
# Thresholds


def test_break_even_bandwidth_whole() -> None:
    t = break_even_bandwidth(1e9, 0.05, 1e-5, 2, 0.8)
    assert t.attainable and t.binding == "whole-request transfer"
    assert float(t) == pytest.approx(1e9 / (1.6 * 0.04999), rel=1e-12)  # 12.5025 GB/s
    assert _exposed(1e9, t.value, 2, 0.8, 1e-5, 32, 0.0, False) == pytest.approx(0.05, rel=1e-12)
    assert _exposed(1e9, 0.99 * t.value, 2, 0.8, 1e-5, 32, 0.0, False) > 0.05
    assert "Gbit/s" in t.reason
    never = break_even_bandwidth(1e9, 1e-6, 1e-5, 2, 0.8)
    assert never.value == math.inf and not never.attainable
    assert break_even_bandwidth(0.0, 0.05, 1e-5, 2, 0.8).value == 0.0


def test_break_even_bandwidth_layerwise() -> None:
    t = break_even_bandwidth(1e9, 0.05, 1e-5, 2, 0.8, layers=32, prefill_s=0.3)
    # per-layer branch: 1e9 / (32 x 1.6 x 0.04999) = 0.3907 GB/s; tail: t_l <= (0.05 + 0.3 - 0.3/32) / 32
    tail_bw = 1e9 / (32 * 1.6 * ((0.05 + 0.3 - 0.3 / 32) / 32 - 1e-5))
    assert t.binding == "pipeline tail" and float(t) == pytest.approx(tail_bw, rel=1e-12)  # 1.8366 GB/s
    assert _exposed(1e9, t.value, 2, 0.8, 1e-5, 32, 0.3, True) == pytest.approx(0.05, rel=1e-12)
    assert _exposed(1e9, 0.98 * t.value, 2, 0.8, 1e-5, 32, 0.3, True) > 0.05
    long = break_even_bandwidth(1e9, 0.05, 1e-5, 2, 0.8, layers=32, prefill_s=5.0)
    assert long.binding == "per-layer transfer"
    assert float(long) == pytest.approx(1e9 / (32 * 1.6 * 0.04999), rel=1e-12)
    # 32 x 10 ms of per-layer latency cannot hide behind a 50 ms prefill
    stuck = break_even_bandwidth(1e9, 0.05, 0.01, 2, 0.8, layers=32, prefill_s=0.05)
    assert stuck.value == math.inf and not stuck.attainable and stuck.binding == "pipeline tail"


def test_break_even_prompt_tokens() -> None:
    t = break_even_prompt_tokens(12.5e9, 131072, 0.05, 1e-5, 1, 0.8)
    n = 0.04999 * 1e10 / 131072  # 3813.9 tokens
    assert float(t) == pytest.approx(n, rel=1e-12) and t.attainable
    assert _exposed(n * 131072, 12.5e9, 1, 0.8, 1e-5, 32, 0.0, False) == pytest.approx(0.05, rel=1e-12)
    lw = break_even_prompt_tokens(3.125e9, 131072, 0.05, 1e-5, 1, 0.8, layers=32, prefill_s_per_token=5e-5)
    slope = 131072 / 2.5e9 - 5e-5 * 31 / 32  # tail rises 3.99e-6 s per token from 32 x 1e-5 s
    assert lw.binding == "pipeline tail" and float(lw) == pytest.approx((0.05 - 3.2e-4) / slope, rel=1e-12)
    n_lw = lw.value
    assert _exposed(n_lw * 131072, 3.125e9, 1, 0.8, 1e-5, 32, n_lw * 5e-5, True) == pytest.approx(
        0.05, rel=1e-12
    )
    # slow prefill (tail falls with n): only the per-layer branch bounds the length
    slow = break_even_prompt_tokens(3.125e9, 131072, 0.05, 1e-5, 1, 0.8, layers=32, prefill_s_per_token=1e-3)
    assert slow.binding == "per-layer transfer"
    assert float(slow) == pytest.approx(0.04999 * 32 * 2.5e9 / 131072, rel=1e-12)
    none = break_even_prompt_tokens(3.125e9, 131072, 0.05, 0.01, 1, 0.8, layers=32, prefill_s_per_token=5e-5)
    assert none.value == 0.0 and not none.attainable
    assert break_even_prompt_tokens(3.125e9, 0.0, 0.05, 1e-5, 1, 0.8).value == math.inf


def test_max_rate_for_tpot() -> None:
    t = max_rate_for_tpot(0.02, 1e-4, 200, 0.05)
    assert float(t) == pytest.approx(30.0, rel=1e-12) and t.binding == "tpot"  # (1 - 0.4) / 0.02
    assert _pool(t.value, 200.0, 0.02, 1e-4, 10_000)[1] == pytest.approx(0.05, rel=1e-9)
    colo = max_rate_for_tpot(0.02, 1e-4, 200, 0.05, mean_prefill_s=0.1)
    assert float(colo) == pytest.approx(0.6 / 0.12, rel=1e-12)  # 5 req/s
    v = {
        "rate_per_replica_rps": colo.value,
        "mean_prefill_s": 0.1,
        "mean_output_tokens": 200,
        "step_time_intercept_s": 0.02,
        "step_time_slope_s": 1e-4,
    }
    assert formula("colocated_tpot").evaluate(v) == pytest.approx(0.05, rel=1e-12)
    capped = max_rate_for_tpot(0.02, 1e-4, 200, 0.05, max_batch=64)
    # B* = 64 at lambda = 64 / (200 x 0.02 + 64 x 200 x 1e-4) = 64 / 5.28 = 12.12 req/s
    assert capped.binding == "kv capacity" and float(capped) == pytest.approx(64 / 5.28, rel=1e-12)
    assert not _pool(capped.value * 1.001, 200.0, 0.02, 1e-4, 64)[2]
    assert _pool(capped.value * 0.999, 200.0, 0.02, 1e-4, 64)[2]
    miss = max_rate_for_tpot(0.06, 1e-4, 200, 0.05)
    assert miss.value == 0.0 and not miss.attainable
    assert max_rate_for_tpot(0.02, 0.0, 200, 0.05).value == math.inf


def test_max_rate_for_wait() -> None:
    t = max_rate_for_wait(0.1, 0.5, 0.05)
    assert float(t) == pytest.approx(4.0, rel=1e-12)  # 2 x 0.05 / (0.01 x 1.5 + 2 x 0.05 x 0.1)
    assert float(mg1_wait(t.value, 0.1, 0.5).mean_wait_s) == pytest.approx(0.05, rel=1e-12)
    assert max_rate_for_wait(0.1, 1.0, 0.0).value == 0.0


def test_threshold_formulas_agree_with_solvers() -> None:
    forms = {f.name: f for f in threshold_formulas()}
    bw = forms["break_even_bandwidth_pipeline_tail"].evaluate(
        {"kv_bytes": 1e9, "slack_s": 0.05, "link_latency_s": 1e-5, "lanes": 2, "link_efficiency": 0.8}
        | {"num_layers": 32, "prefill_s": 0.3}
    )
    assert bw == pytest.approx(break_even_bandwidth(1e9, 0.05, 1e-5, 2, 0.8, layers=32, prefill_s=0.3).value)
    rate = forms["max_rate_for_tpot"].evaluate(
        {
            "step_time_intercept_s": 0.02,
            "step_time_slope_s": 1e-4,
            "mean_output_tokens": 200,
            "tpot_slo_s": 0.05,
            "mean_prefill_s": 0.1,
        }
    )
    assert rate == pytest.approx(5.0, rel=1e-12)
    wait = forms["max_rate_for_wait"].evaluate(
        {"mean_service_s": 0.1, "scv_service": 0.5, "wait_budget_s": 0.05}
    )
    assert wait == pytest.approx(4.0, rel=1e-12)


# ----------------------------------------------------------------------------------------------
# Display


def test_all_formulas_are_complete() -> None:
    forms = all_formulas()
    names = [f.name for f in forms]
    assert names[0] == "prefill_time" and len(set(names)) == len(names) == 14
    for f in forms:
        assert f.source and f.description and f.lhs
        assert set(f.symbols) <= set(f.units)
        assert f.full_expr.free_symbols <= set(f.symbols.values()) | {
            sp.Symbol("k", integer=True, nonnegative=True)
        }
        assert f.latex().count(r"\begin{aligned}") == (1 if f.where else 0)


def test_latex_rendering() -> None:
    f = formula("mg1_wait")
    assert r"\frac{\mathrm{E}[S] \rho \left(1 + c_{s}^{2}\right)}{2 \left(1 - \rho\right)}" in f.latex()
    text = f.latex_substituted({"rate_rps": 5, "mean_service_s": 0.1, "scv_service": 0.5})
    assert text.count("=") >= 5 and r"75\ \mathrm{ms}" in text and r"0.1 \cdot 5" in text
    unstable = f.latex_substituted({"rate_rps": 15, "mean_service_s": 0.1, "scv_service": 0.5})
    assert r"\infty" in unstable and "unstable" in unstable
    dep = Deployment(get_model("llama-3.1-8b"), get_gpu("h100-sxm"))
    big = formula("prefill_time").latex_substituted(prefill_values(dep, 2048))
    assert r"\times 10^{9}" in big and r"\mathrm{TFLOP}" in big and r"\mathrm{GB}" in big
    assert _latex_quantity(1.8366e9, "B/s") == r"1.837\ \mathrm{GB/s}"
    assert _latex_quantity(2.5e-5, "s") == r"25\ \mathrm{\mu s}"


def test_latex_block() -> None:
    forms = [formula("mg1_wait"), formula("allreduce_ring")]
    md = latex_block(forms, {"rate_rps": 5, "mean_service_s": 0.1, "scv_service": 0.5})
    assert md.count("$$") == 4 and "**mg1_wait**" in md and "*Source:*" in md
    assert r"75\ \mathrm{ms}" in md  # substituted where complete, symbolic where not
    assert r"t_{\mathrm{AR}} = 2 \left(\alpha_{\mathrm{AR}}" in md
    with pytest.raises(InputError, match="formulas"):
        latex_block(["mg1_wait"])  # type: ignore[list-item]


# ----------------------------------------------------------------------------------------------
# Bad input


def test_bad_inputs_raise_input_error() -> None:
    f = formula("mg1_wait")
    with pytest.raises(InputError, match="scv_service"):
        f.evaluate({"rate_rps": 5, "mean_service_s": 0.1})
    with pytest.raises(InputError, match="rate_rps"):
        f.evaluate({"rate_rps": True, "mean_service_s": 0.1, "scv_service": 1})
    with pytest.raises(InputError, match="rate_rps"):
        f.evaluate({"rate_rps": float("nan"), "mean_service_s": 0.1, "scv_service": 1})
    with pytest.raises(InputError, match="servers"):
        formula("erlang_c").evaluate({"servers": 2.5, "offered_load": 1.0})
    with pytest.raises(InputError, match="formula"):
        formula("nope")
    with pytest.raises(InputError, match="efficiency"):
        break_even_bandwidth(1e9, 0.05, 1e-5, 2, 0.0)
    with pytest.raises(InputError, match="layers"):
        break_even_bandwidth(1e9, 0.05, 1e-5, 2, 0.8, layers=32)
    with pytest.raises(InputError, match="bandwidth_bytes_per_s"):
        break_even_prompt_tokens(0.0, 1e5, 0.05, 1e-5, 1, 0.8)
    with pytest.raises(InputError, match="tpot_slo_s"):
        max_rate_for_tpot(0.02, 1e-4, 200, 0.0)
    with pytest.raises(InputError, match="mean_service_s"):
        max_rate_for_wait(-1.0, 1.0, 0.1)
