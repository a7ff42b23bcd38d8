"""The published-measurement table and the MoE deployment file: every row cited and well formed,
skipped rows carry their reason, the conversions recorded in the file are the ones its source states,
and the validation scripts read both files (docs/validation.md)."""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import validate_moe as vm  # noqa: E402
import validate_roofline as v  # noqa: E402

MEASUREMENTS = ROOT / "tests" / "data" / "published_measurements.csv"
DEPLOYMENTS = ROOT / "tests" / "data" / "moe_deployments.csv"
# Mixture-of-experts models of the table (hand-written, so the count does not depend on the catalog).
MOE_MODELS = {
    "mixtral-8x7b",
    "deepseek-v3",
    "deepseek-r1",
    "qwen3-30b-a3b",
    "gpt-oss-20b",
    "gpt-oss-120b",
    "qwen3-235b-a22b",
    "qwen3-coder-next",
    "glm-4.6",
    "glm-5",
    "kimi-k2",
    "nemotron-3-nano-30b-a3b",
}


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_every_measurement_is_cited_and_well_formed() -> None:
    rows = _rows(MEASUREMENTS)
    assert len({r["id"] for r in rows}) == len(rows)  # unique ids
    for r in rows:
        assert r["source"].strip() and r["engine"].strip(), r["id"]
        assert r["metric"] in v.GROUP and r["set"] in v.SETS, r["id"]
        assert float(r["measured_s"]) > 0 and int(r["batch"]) >= 1 and int(r["isl"]) >= 1, r["id"]
    assert sum(r["set"] == "core" for r in rows) == 23  # the rows the 20% target was set on
    # issue 16 asks for >= 100 cited rows; dropping a badly scored row would be a regression too
    assert len(rows) >= 142
    assert sum(r["model"] in MOE_MODELS for r in rows) >= 30


def test_conversions_follow_the_cited_tables() -> None:
    rows = {r["id"]: r for r in _rows(MEASUREMENTS)}
    # TensorRT-LLM v0.6.1 peak throughput, H100 FP8, LLaMA 70B, batch 1024, TP2, 128/128:
    # 2,657 out tok/s per GPU -> the static batch takes 1024 x 128 / (2 x 2,657) = 24.665 s.
    assert float(rows["trtllm061-h100-l2_70b-b1024-128-128"]["measured_s"]) == pytest.approx(
        1024 * 128 / (2 * 2657), abs=1e-4
    )
    # L40S table (out tok/s, TP1): LLaMA 7B batch 64, 128/128, 3,240 tok/s -> 64 x 128 / 3,240 s.
    l40s = float(rows["trtllm05-l40s-l2_7b-b64-128-128"]["measured_s"])
    assert l40s == pytest.approx(64 * 128 / 3240, abs=1e-4)
    # Millstone gpt-oss-20b on RTX Pro 6000: 105.5 tok/s single-request generation at 128K context.
    pro6000 = float(rows["millstone-pro6000-gpt_oss_20b-128k-tpot"]["measured_s"])
    assert pro6000 == pytest.approx(1 / 105.5, abs=1e-6)
    # vLLM nightly latency test, batch 8, 32 in / 128 out: Mixtral TP2 on H200 1,917.44 ms.
    assert float(rows["vllm-bk-h200-mixtral8x7b_tp2"]["measured_s"]) == pytest.approx(1.91744)
    # TensorRT-LLM H200 launch blog (v0.5, FP8): llama_70b batch 512, TP2, 128 in / 2048 out at
    # 1,654 out tok/s per GPU -> 512 x 2048 / (1,654 x 2) = 316.98 s for the static batch.
    h200 = float(rows["trtllm05-h200-l2_70b-b512-tp2-128-2048"]["measured_s"])
    assert h200 == pytest.approx(512 * 2048 / (1654 * 2), abs=1e-3)
    # Falcon180B-H200 blog (v0.7a): Llama-70B on 1 H200, 128 in / 4096 out, batch 96 (the fifth of the
    # listed batch sizes 960, 960, 192, 560, 96, 640): 1,946 tok/s/GPU -> 96 x 4096 / 1,946 s.
    h200_v07 = float(rows["trtllm07a-h200-l2_70b-b96-128-4096"]["measured_s"])
    assert h200_v07 == pytest.approx(96 * 4096 / 1946, abs=1e-3)
    # OCI MI300X latency table: Llama 3.1 405B FP8, batch 256, 128/128: average latency 17.750 s.
    assert float(rows["oci-mi300x-l31_405b-b256-e2e"]["measured_s"]) == pytest.approx(17.75)
    # llama-bench (May 2024) on an RTX 4090, Llama-3-8B Q4_K_M: pp 8192 at 4,039.68 t/s is one
    # 8192-token prompt in 8192 / 4,039.68 s; tg 8192 at 110.66 t/s is 1 / 110.66 s per token.
    pp, tg = (float(rows[f"xd-llamacpp-4090-l3_8b-q4_k_m-{t}"]["measured_s"]) for t in ("pp8192", "tg8192"))
    assert pp == pytest.approx(8192 / 4039.68, abs=1e-6) and tg == pytest.approx(1 / 110.66, abs=1e-7)
    # the same table's pp 4096 and tg 1024 columns (third round): RTX 3090 F16 pp 4096 at 3,410.47 t/s,
    # RTX 4090 Q4_K_M tg 1024 at 127.74 t/s
    pp4 = float(rows["xd-llamacpp-3090-l3_8b-f16-pp4096"]["measured_s"])
    tg1 = float(rows["xd-llamacpp-4090-l3_8b-q4_k_m-tg1024"]["measured_s"])
    assert pp4 == pytest.approx(4096 / 3410.47, abs=1e-6) and tg1 == pytest.approx(1 / 127.74, abs=1e-7)
    # dstack raw data: DeepSeek-R1 on 8x H200 with vLLM, concurrency 64, mean TPOT 65.6177 ms.
    dsr1 = rows["dstack-h200-vllm-dsr1-c64-tpot"]
    shape = (dsr1["batch"], dsr1["isl"], dsr1["osl"])
    assert float(dsr1["measured_s"]) == pytest.approx(0.0656177) and shape == ("64", "3200", "800")


def test_validation_script_skips_with_reasons() -> None:
    rows = v.load()
    skipped = [r for r in rows if not r.evaluated]
    assert skipped and all(math.isnan(r.predicted_s) and r.skip for r in skipped)
    by_id = {r.id: r for r in rows}
    assert by_id["sglang058-b200-glm5_eagle-c1-tpot"].skip.startswith("not yet expressible: EAGLE")
    gpt_oss = by_id["millstone-pro6000-gpt_oss_20b-1k-tpot"]
    assert gpt_oss.evaluated or "not in the catalog" in gpt_oss.skip
    # llama.cpp runs MXFP4 experts weight-only on an RTX 4090 (no FP4 math): refused with the format's
    # reason until the physics models weight-only MXFP4 (docs/validation.md, second round).
    ada = by_id["llamacpp16834-4090-gpt_oss_20b-tg128"]
    assert ada.evaluated or "mxfp4" in ada.skip
    # Evaluated rows have a finite positive prediction; the core set is evaluated in full.
    assert all(r.predicted_s > 0 for r in rows if r.evaluated)
    assert all(r.evaluated for r in rows if r.set == "core")
    # Categories of a hand-picked row: H100 FP8, batch 1024.
    assert {"fp8/fp4", "large batch"} <= set(by_id["trtllm061-h100-l2_70b-b1024-128-128"].categories)
    assert "moe" in by_id["vllm-bk-h200-mixtral8x7b_tp2"].categories
    assert v.count(rows, "decode") > v.count(rows, "decode", "core")


def test_expert_parallel_row_is_skipped_or_evaluated(tmp_path) -> None:
    # A DeepSeek-V3 EP8 row: refused with the physics' reason until expert parallelism is modelled.
    src = _rows(MEASUREMENTS)[0]
    row = dict(src, id="ep8", model="deepseek-v3", gpu="h200", tp="8", dtype="fp8", kv_dtype="fp8")
    row.update(ep="8", set="ext")
    path = tmp_path / "m.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(src))
        w.writeheader()
        w.writerow(row)
    (r,) = v.load(path)
    if r.evaluated:
        assert r.predicted_s > 0
    else:
        assert "expert parallelism" in r.skip


def test_moe_deployment_file() -> None:
    rows = _rows(DEPLOYMENTS)
    assert len({r["id"] for r in rows}) == len(rows) >= 10
    for r in rows:
        assert r["source"].strip() and r["conditions"].strip(), r["id"]
        assert r["metric"] in vm.METRICS and r["phase"] in ("prefill", "decode"), r["id"]
        assert float(r["value"]) > 0, r["id"]
    by_id = {r["id"]: r for r in rows}
    # DeepSeek's day-6 overview: 73.7k input tokens/s per H800 node (prefill, EP32 over 4 nodes) and
    # 14.8k output tokens/s per node (decode, EP144 over 18 nodes).
    assert (by_id["deepseek-day6-prefill"]["value"], by_id["deepseek-day6-prefill"]["ep"]) == ("73700", "32")
    assert (by_id["deepseek-day6-decode"]["value"], by_id["deepseek-day6-decode"]["nodes"]) == ("14800", "18")
    assert by_id["sglang-96h100-decode-2k"]["value"] == "22300"
    # The layout of a row: DP-attention x TP GPUs, EP over them, spread over the nodes.
    par = vm.layout(by_id["deepseek-day6-decode"])
    assert (par.gpus, par.ep, par.nodes, par.gpus_per_node) == (144, 144, 18, 8)


def test_moe_script_reports_every_row() -> None:
    results = vm.load()
    assert len(results) == len(_rows(DEPLOYMENTS))
    for res in results:
        if res.predicted is None:
            assert res.status.startswith(("not yet expressible:", "needs ")), res
        else:
            assert res.predicted > 0 and not res.status


# Signed errors (predicted / published - 1) of the evaluated MoE deployment rows as recorded in
# docs/validation.md ("MoE deployments at scale"), with DeepEP's normal kernels in prefill, the
# low-latency ones in decode and two-micro-batch overlap as the deployments ran it. Every row is now
# predicted faster than published: DeepSeek's balanced prefill profile within 2%, SGLang's balanced
# prefill +7.5%, the EPLB and production rows +17% to +98% (overlap is priced as ideal stage pairing).
MOE_RECORDED_ERRORS = {
    "deepseek-day6-decode": 0.371,
    "deepseek-day6-prefill-computed": 0.981,
    "deepseek-profile-prefill-4k": 0.017,
    "deepseek-profile-decode-4k": 0.17,
    "sglang-96h100-prefill-2k": 0.275,
    "sglang-96h100-prefill-4k": 0.268,
    "sglang-96h100-prefill-4k-balanced": 0.075,
    "sglang-96h100-decode-2k": 0.265,
    "rtpllm-h800-prefill-4k": 0.481,
}
# A change may worsen a row's error by at most this much (absolute) without updating the docs.
MOE_ERROR_TOLERANCE = 0.05


def test_moe_deployment_errors_do_not_regress() -> None:
    """Recompute every evaluated deployment row: the same rows are evaluated, and no row's error
    magnitude grows beyond its recorded one + MOE_ERROR_TOLERANCE (an improvement passes; update the
    table in docs/validation.md and MOE_RECORDED_ERRORS with it)."""
    got = {r.id: r.error for r in vm.load() if r.predicted is not None}
    assert set(got) == set(MOE_RECORDED_ERRORS)
    for row_id, recorded in MOE_RECORDED_ERRORS.items():
        assert abs(got[row_id]) <= abs(recorded) + MOE_ERROR_TOLERANCE, (row_id, got[row_id])


def test_moe_decode_by_hand_at_the_published_batch() -> None:
    """SGLang's decode row by hand: 256 sequences per GPU x 72 GPUs = 18,432 per instance; output
    tokens/s per node = 18,432 / step time / 9 nodes."""
    from model.physics.steps import decode_step_cost

    row = next(r for r in _rows(DEPLOYMENTS) if r["id"] == "sglang-96h100-decode-2k")
    par = vm.layout(row)
    dep = vm.Deployment(
        vm.get_model("deepseek-v3"),
        vm.get_gpu("h100-sxm"),
        par,
        weight_dtype="fp8_block",
        redundant_experts=32,
        micro_batch_overlap=True,  # the row's deployment ran two-batch overlap
    )
    step = float(decode_step_cost(dep, 18_432, 2000.0).time_s)
    (res,) = [r for r in vm.load() if r.id == row["id"]]
    assert res.predicted == pytest.approx(18_432 / step / 9, rel=1e-12)


def test_ep_load_imbalance_follows_the_measured_eplb_gap() -> None:
    """EP_LOAD_IMBALANCE against its source: SGLang's EPLB-on-real-routing vs perfectly balanced
    prefill rows (same layout, batch and prompts) differ by 59,337 / 50,302 = 1.18 in whole-step
    throughput; the planning factor is that ratio to two digits."""
    from model.physics.expert_parallel import EP_LOAD_IMBALANCE

    by_id = {r["id"]: r for r in _rows(DEPLOYMENTS)}
    ratio = float(by_id["sglang-96h100-prefill-4k-balanced"]["value"]) / float(
        by_id["sglang-96h100-prefill-4k"]["value"]
    )
    assert round(ratio, 2) == 1.18 and round(ratio, 1) == EP_LOAD_IMBALANCE
