"""Row translation of benchmarks/peer_calculators.py (pure functions, no peer installed) and, when
PEER_VENV points at the peers' environment, one small real run of each peer (docs/validation.md,
"Peer calculators side by side")."""

from __future__ import annotations

import math
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import peer_calculators as pc  # noqa: E402
import peer_requests as pr  # noqa: E402


@pytest.fixture(scope="module")
def rows():
    return {r.id: r for r in pr.v.load()}


def test_llama2_7b_h100_fp8_prefill_row_to_aiconfigurator(rows):
    req = pr.aiconfigurator_request(rows["trtllm05-h100-l2_7b-128"])
    assert req["system"] == "h100_sxm"
    kw = req["kwargs"]
    assert kw["backend_name"] == "trtllm"  # TensorRT-LLM 0.5 -> trtllm database
    assert kw["mode"] == "static_ctx"  # a prefill row needs the context phase only
    assert (kw["isl"], kw["batch_size"], kw["tp_size"], kw["pp_size"]) == (128, 1, 1, 1)
    assert (kw["gemm_quant_mode"], kw["kvcache_quant_mode"]) == ("fp8", "fp8")
    # Llama-2 is not in the wheel's default list: a local config.json with the catalog's dimensions.
    cfg = req["hf_config"]
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert (cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]) == (4096, 11008, 32)
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["vocab_size"]) == (32, 32, 32000)


def test_moe_row_to_aiconfigurator_sets_moe_widths(rows):
    req = pr.aiconfigurator_request(rows["vllm-bk-h100-mixtral8x7b_tp2"])
    kw = req["kwargs"]
    assert req["model"] == "mistralai/Mixtral-8x7B-v0.1" and "hf_config" not in req
    assert kw["mode"] == "static" and kw["backend_name"] == "vllm"
    assert (kw["tp_size"], kw["moe_tp_size"], kw["moe_ep_size"]) == (2, 2, 1)
    assert (kw["batch_size"], kw["isl"], kw["osl"]) == (8, 32, 128)


@pytest.mark.parametrize(
    ("row_id", "reason"),
    [
        ("llamacpp-3090-l2_7b-f16-pp512", "no aiconfigurator system"),  # consumer GPU, no database
        ("oci-mi300x-l31_405b-e2e", "no aiconfigurator system"),
        ("mlc-4090-l2_7b-q4", "no aiconfigurator system"),
        ("trtllm05-h100-f180b-128", "not a plain Llama architecture"),  # Falcon: no config shipped
        ("sglang058-b200-glm5_eagle-c1-tpot", "EAGLE"),
    ],
)
def test_aiconfigurator_refusals_name_the_reason(rows, row_id, reason):
    with pytest.raises(pr.NotExpressible, match=reason):
        pr.aiconfigurator_request(rows[row_id])


def test_closed_loop_ttft_rows_are_refused_for_every_peer(rows):
    # NIM's TTFT at concurrency 5 waits behind other prompts: no static-batch prediction compares
    row = rows["nim18-h100-l31_8b-200-ttft-c5"]
    for peer in pr.TRANSLATORS:
        with pytest.raises(pr.NotExpressible, match="closed-loop TTFT"):
            pr.TRANSLATORS[peer](row)
    pr.aiconfigurator_request(rows["nim18-h100-l31_8b-200-ttft"])  # concurrency 1: translated


def test_aiconfigurator_refuses_an_engine_it_has_no_backend_for(rows):
    row = replace(rows["trtllm05-h100-l2_7b-128"], engine="llama.cpp (Jan 2024)")
    with pytest.raises(pr.NotExpressible, match="not an aiconfigurator backend"):
        pr.aiconfigurator_request(row)


def test_llm_analysis_uses_shipped_configs_and_datasheet_gpus(rows):
    req = pr.llm_analysis_request(rows["trtllm05-h100-l2_70b-2048"])
    assert (req["model"], req["gpu"]) == ("upstage_Llama-2-70b-instruct-v2", "h100-sxm-80gb")
    assert "gpu_config" not in req and "model_config" not in req
    kw = req["kwargs"]
    assert (kw["dtype_name"], kw["tp_size"], kw["seq_len"], kw["kv_cache_dtype_bytes"]) == (
        "w8a8e16",
        4,
        2048,
        1,
    )
    # L40S is not among its GPUs: pdplan's cited datasheet figures (L40S: 864 GB/s, 362 dense BF16 TFLOPS).
    req = pr.llm_analysis_request(rows["trtllm05-l40s-l2_7b-128"])
    g = req["gpu_config"]
    assert g["hbm_bandwidth_in_GB_per_sec"] == pytest.approx(864.0)
    assert g["peak_fp16_TFLOPS"] == pytest.approx(362.05, rel=1e-3)
    # Llama-3.1-8B is not shipped: a two-matrix MLP of 1.5 x 14336 = 21504 keeps the gated MLP's
    # weights; it must be a multiple of 4096, so 5 x 4096 = 20480 (-4.8%).
    req = pr.llm_analysis_request(rows["inferencebench-h100-l31_8b"])
    assert req["model_config"]["ffn_embed_dim"] == 20480
    assert pr.llm_analysis_ffn(16384, 53248) == 81920  # Llama-3.1-405B: 79872 -> 5 x 16384
    assert req["model_config"]["num_key_value_heads"] == 8


def test_llm_analysis_and_genz_refuse_what_they_cannot_state(rows):
    with pytest.raises(pr.NotExpressible, match="mxfp4"):
        pr.llm_analysis_request(rows["millstone-pro6000-gpt_oss_20b-1k-ttft"])
    with pytest.raises(pr.NotExpressible, match="not a plain Llama"):
        pr.llm_analysis_request(rows["vllm-bk-h100-mixtral8x7b_tp2"])
    with pytest.raises(pr.NotExpressible, match="no GenZ model definition for falcon-180b"):
        pr.genz_request(rows["trtllm05-a100-f180b-128"])


def test_genz_presets_and_datasheet_systems(rows):
    req = pr.genz_request(rows["trtllm05-a100-l2_70b-2048"])
    assert req["model"] == "meta-llama/Llama-2-70B" and req["system"] == "A100_80GB_GPU"
    assert req["kwargs"] == {
        "batch_size": 1,
        "input_tokens": 2048,
        "output_tokens": 1,
        "bits": "bf16",  # GenZ has one 16-bit width; FP16 and BF16 run at the same rate
        "tensor_parallel": 4,
        "pipeline_parallel": 1,
    }
    req = pr.genz_request(rows["vllm-bk-h200-llama8b_tp1"])
    assert req["decode_generated_tokens"] == 64  # OSL 128: the mean step is the one after 64 tokens
    assert req["system"]["Memory_BW"] == pytest.approx(4800.0)  # H200 datasheet: 4.8 TB/s
    assert req["system"]["real_values"] is True


def test_scoring_uses_each_tools_own_rows_and_the_common_subset(rows):
    ids = ["trtllm05-h100-l2_7b-128", "trtllm05-h100-l2_7b-2048", "nim18-h100-l33_70b-5000-itl"]
    sub = [rows[i] for i in ids]
    measured = {r.id: r.measured_s for r in sub}
    table = {
        "pdplan": {i: pc.Cell(measured[i] * 1.1) for i in ids},  # +10% everywhere
        "peer": {
            ids[0]: pc.Cell(measured[ids[0]] * 0.5),  # -50%
            ids[1]: pc.Cell(why_not="peer error: x"),
            ids[2]: pc.Cell(measured[ids[2]] * 1.3),  # +30%
        },
    }
    sc = pc.score(sub, table)
    assert sc["own"]["pdplan/prefill"]["mdape"] == pytest.approx(10.0)
    assert sc["own"]["pdplan/prefill"]["rows"] == 2
    assert sc["own"]["peer/prefill"] == pytest.approx({"mdape": 50.0, "rows": 1, "pdplan_same_rows": 10.0})
    assert sc["own"]["peer/decode"]["mdape"] == pytest.approx(30.0)
    assert sc["common_ids"] == sorted([ids[0], ids[2]])
    assert sc["common"]["pdplan/prefill"]["rows"] == 1
    # Holdout split: only the 2048-token row is held out, and the peer has no value there.
    assert [rows[i].split for i in ids] == ["train", "holdout", "train"]
    assert sc["holdout"]["pdplan/prefill"]["rows"] == 1
    assert sc["holdout"]["pdplan/prefill"]["mdape"] == pytest.approx(10.0)
    assert sc["holdout"]["peer/prefill"]["rows"] == 0 and math.isnan(sc["holdout"]["peer/prefill"]["mdape"])


def test_without_peer_venv_the_peers_are_skipped_with_a_reason():
    assert pc.peer_python(None) is None
    assert pc.peer_python("/nonexistent/venv") is None
    res = pc.collect(None, ("genz-llm",))
    assert "PEER_VENV not set" in res["runs"]["genz-llm"]["skipped"]
    assert set(res["table"]) == {"pdplan"}


PEER_VENV = os.environ.get("PEER_VENV")


@pytest.mark.skipif(pc.peer_python(PEER_VENV) is None, reason="PEER_VENV unset: peers not installed here")
@pytest.mark.parametrize("peer", ["aiconfigurator", "llm-analysis", "genz-llm"])
def test_real_peer_run_on_one_row(rows, peer):
    """Each peer answers a batch-1 Llama-2-7B FP8 prefill of 2048 tokens on H100 between a quarter and
    twice the measured 36 ms (aiconfigurator 32 ms, llm-analysis 15 ms, GenZ 15 ms in the recorded
    run): a finite answer of the right order, not an accuracy bound."""
    req = pr.TRANSLATORS[peer](rows["trtllm05-h100-l2_7b-2048"])
    out = pc.run_peer(pc.peer_python(PEER_VENV), peer, [req])
    res = out["results"][0]
    assert "error" not in res, res
    assert math.isfinite(res["prefill_s"]) and 0.036 / 4 < res["prefill_s"] < 0.036 * 2


def test_efficiency_variants_take_pdplans_gpu_defaults(rows):
    """H100 SXM profile: prefill MFU 0.60, decode MBU 0.80 (hardware_profiles/gpus/h100-sxm.toml);
    the analytical peers' own defaults are 1."""
    row = rows["trtllm05-h100-l2_7b-2048"]
    req = pr.llm_analysis_eff_request(row)
    assert req["kwargs"]["flops_efficiency"] == pytest.approx(0.60)
    assert req["kwargs"]["hbm_memory_efficiency"] == pytest.approx(0.80)
    assert "flops_efficiency" not in pr.llm_analysis_request(row)["kwargs"]
    req = pr.genz_eff_request(row)
    assert (req["prefill_eff"], req["decode_eff"]) == pytest.approx((0.60, 0.80))
    assert "prefill_eff" not in pr.genz_request(row)
    assert set(pr.TRANSLATORS) == set(pr.PEERS) | set(pr.VARIANTS)
