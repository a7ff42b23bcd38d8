"""Engine overheads (model.hardware.overheads): per-step, per-kernel, per-sequence and per-request
costs derived by hand, read from one engine profile by both the planner and the simulator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from model.errors import InputError
from model.hardware.catalog import get_engine, get_gpu
from model.hardware.engines import Engine, engine_from_toml
from model.hardware.overheads import KERNEL_LAUNCH_S, Overheads, kernels_per_step
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.steps import decode_step_cost, prefill_cost
from model.serving.configs import ColocatedConfig
from model.serving.phase_tables import deployment as planner_deployment
from model.sim.engine import SimRequests
from model.sim.simulate import simulate
from model.workload.lengths import Fixed
from model.workload.presets import Workload
from model.workload.scenario import Scenario
from model.workload.slo import SLO

H100 = get_gpu("h100-sxm")
L8B = get_model("llama-3.1-8b")  # 32 layers, dense
VLLM = get_engine("vllm")


def test_kernel_count_by_hand() -> None:
    assert kernels_per_step(32, 0) == 12 * 32 == 384  # Llama-3.1-8B
    ds = get_model("deepseek-v3")  # 61 layers, 58 of them MoE
    assert kernels_per_step(ds.num_layers, ds.num_moe_layers) == 12 * 61 + 4 * 58 == 964


def test_vllm_profile_values() -> None:
    o = VLLM.overheads(H100)
    # the GPU profile's 1 ms step + vLLM's 0 ms extra; 3 us per kernel in a graph; 5 us eager
    # launch; 5 us per sequence; 10 ms per request at the client
    got = (o.step_s, o.kernel_s, o.launch_s, o.per_sequence_s, o.request_s)
    np.testing.assert_allclose(got, (1e-3, 3e-6, 5e-6, 5e-6, 10e-3), rtol=1e-12)
    assert o.decode_graphs
    for name in ("overheads.kernel", "overheads.per_sequence", "overheads.request"):
        assert VLLM.source(name).strip()


def test_decode_and_prefill_overhead_by_hand() -> None:
    dep = Deployment(L8B, H100, overheads=VLLM.overheads(H100))
    # decode at batch 64 (one CUDA graph): 1 ms + 64 x 5 us + 384 kernels x 3 us = 2.472 ms
    d = decode_step_cost(dep, 64, 1024)
    assert float(d.overhead_s) == pytest.approx(1e-3 + 64 * 5e-6 + 384 * 3e-6, rel=1e-12)
    # prefill of one prompt (eager): 1 ms + 1 x 5 us + 384 x (3 + 5) us = 4.077 ms
    p = prefill_cost(dep, 512)
    assert float(p.overhead_s) == pytest.approx(1e-3 + 5e-6 + 384 * 8e-6, rel=1e-12)
    assert float(p.overhead_s) == pytest.approx(4.077e-3, rel=1e-12)


def test_engine_without_cuda_graphs_pays_launches_in_decode() -> None:
    eager = Overheads(step_s=1e-3, kernel_s=3e-6, decode_graphs=False)
    d = decode_step_cost(Deployment(L8B, H100, overheads=eager), 1, 1024)
    assert float(d.overhead_s) == pytest.approx(1e-3 + 384 * (3e-6 + KERNEL_LAUNCH_S), rel=1e-12)


def test_without_an_engine_only_the_gpu_step_overhead_and_prefill_launches() -> None:
    dep = Deployment(L8B, H100)  # no engine: as before engine overheads (1 ms; 5 us x 384 eager)
    assert float(decode_step_cost(dep, 64, 1024).overhead_s) == pytest.approx(1e-3, rel=1e-12)
    assert float(prefill_cost(dep, 512).overhead_s) == pytest.approx(1e-3 + 384 * 5e-6, rel=1e-12)
    # the explicit step override replaces the engine's step time, not its other terms
    dep2 = Deployment(L8B, H100, step_overhead_s=0.0, overheads=VLLM.overheads(H100))
    assert float(decode_step_cost(dep2, 1, 1024).overhead_s) == pytest.approx(5e-6 + 384 * 3e-6, rel=1e-12)


def test_bad_overheads_name_the_field(tmp_path) -> None:
    with pytest.raises(InputError, match="overheads.kernel_s"):
        Overheads(step_s=1e-3, kernel_s=-1e-6)
    with pytest.raises(InputError, match="overheads.request_s"):
        Overheads(step_s=1e-3, request_s=5.0)  # 5 s: a unit slip
    fields = {k: getattr(VLLM, k) for k in VLLM.__dataclass_fields__}
    with pytest.raises(InputError, match="decode_launch"):
        Engine(**{**fields, "decode_launch": "sometimes"})
    text = Path(VLLM.path).read_text(encoding="utf-8").replace('name = "vllm"', 'name = "bad"')
    path = tmp_path / "bad.toml"
    path.write_text(text.replace('kernel = { value = "3 us"', 'kernel = { value = "3 GB"', 1))
    with pytest.raises(Exception, match="overheads.kernel"):
        engine_from_toml(path)


FIXED = Workload("fixed-512-64", Fixed(512), Fixed(64), source="test")


def test_planner_and_simulator_read_the_same_overheads() -> None:
    scn = Scenario.build("llama-3.1-8b", FIXED, SLO(10.0, 1.0), samples=16)
    planned = planner_deployment(scn, H100, 1)
    assert planned.engine_overheads == VLLM.overheads(H100)
    req = SimRequests(np.zeros(1), np.full(1, 512), np.full(1, 64))
    res = simulate(ColocatedConfig(H100, 1, 1), "llama-3.1-8b", req)
    rec = res.records
    # one request alone: TTFT = prefill (+ first token) as the engine sees it + 10 ms at the client
    engine_ttft = float(rec.first_token_s[0] - rec.arrival_s[0])
    assert float(rec.ttft_s[0]) == pytest.approx(engine_ttft + 10e-3, rel=1e-12)
    assert rec.request_overhead_s == VLLM.overheads(H100).request_s


def test_engine_fp8_gemm_generation_by_hand(tmp_path) -> None:
    # H100 FP8 linear layers: peak 1978.9 TFLOP/s x prefill MFU 0.6 x LARGE_GEMM_MFU_FACTOR 1.15 x the
    # engine generation's ratio: 0.875 (current trtllm/vllm/sglang: cuBLAS 12.9, 1.75x BF16 / 2) or
    # LOW_PRECISION_MFU_RATIO 0.7 (TensorRT-LLM 0.5, the early DeepSeek releases, no engine at all)
    rates = {}
    for name in ("trtllm", "vllm", "sglang", "trtllm-0.5", "vllm-0.7", "sglang-0.4", None):
        o = get_engine(name).overheads(H100) if name else None
        dep = Deployment(L8B, H100, weight_dtype="fp8", overheads=o)
        rates[name] = dep.gemm_flops_per_s("mlp")
    for name in ("trtllm", "vllm", "sglang"):
        assert rates[name] == pytest.approx(1978.9e12 * 0.6 * 1.15 * 0.875, rel=1e-12)
    for name in ("trtllm-0.5", "vllm-0.7", "sglang-0.4", None):
        assert rates[name] == pytest.approx(1978.9e12 * 0.6 * 1.15 * 0.7, rel=1e-12)
    # 16-bit math never takes the ratio
    bf16 = Deployment(L8B, H100, weight_dtype="bf16", overheads=get_engine("trtllm").overheads(H100))
    assert bf16.gemm_flops_per_s("mlp") == pytest.approx(989.4e12 * 0.6 * 1.15, rel=1e-12)
    with pytest.raises(InputError, match="gemm.low_precision_ratio"):
        Overheads(step_s=1e-3, low_precision_gemm_ratio=7.0)
    text = Path(VLLM.path).read_text(encoding="utf-8").replace('name = "vllm"', 'name = "bad"')
    path = tmp_path / "bad.toml"
    path.write_text(
        text.replace("low_precision_ratio = { value = 0.875", "low_precision_ratio = { value = 0", 1)
    )
    with pytest.raises(Exception, match="low_precision_ratio"):
        engine_from_toml(path)
