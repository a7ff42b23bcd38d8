"""The simulator's step-time tables reproduce the roofline layer exactly, and real traces replay."""

from __future__ import annotations

import numpy as np
import pytest

from model.hardware.catalog import get_engine, get_gpu, get_link
from model.hardware.collectives import transfer_time_s
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.steps import decode_step_cost, mixed_step_cost, prefill_cost
from model.serving.configs import ColocatedConfig, DisaggregatedConfig
from model.sim.simulate import simulate, trace_requests
from model.sim.steps import KVTransfer, RooflineSteps
from model.workload.slo import SLO
from model.workload.traces import load_trace
from tests.conftest import SHARED_TRACES

DEPS = [
    Deployment(get_model("llama-3.1-8b"), get_gpu("h100-sxm")),
    Deployment(get_model("llama-3.1-70b"), get_gpu("a100-80gb-sxm"), parallel=4),
    Deployment(get_model("mixtral-8x7b"), get_gpu("h100-sxm"), parallel=2),
]


@pytest.mark.parametrize("dep", DEPS, ids=lambda d: d.arch.name)
def test_decode_table_is_the_roofline(dep):
    steps = RooflineSteps(dep)
    rng = np.random.default_rng(0)
    for b in [1, 2, 7, 64, 255, 256, 300, 1000]:
        for mean_ctx in rng.integers(1, 40_000, 4):
            want = float(decode_step_cost(dep, b, b * int(mean_ctx) / b).time_s)
            assert steps.decode_s(b, b * int(mean_ctx)) == pytest.approx(want, rel=1e-9)
    # a ragged batch: total context 1001 over 3 sequences = mean 333.67 keys each
    assert steps.decode_s(3, 1001) == pytest.approx(
        float(decode_step_cost(dep, 3, 1001 / 3).time_s), rel=1e-9
    )


@pytest.mark.parametrize("dep", DEPS, ids=lambda d: d.arch.name)
def test_mixed_table_is_the_roofline(dep):
    steps = RooflineSteps(dep)
    for chunk, prefix, db, ctx in [
        (512, 0, 0, 0),
        (400, 1536.5, 112, 150_000),
        (1, 30_000, 3, 9),
        (2048, 10, 1, 1),
    ]:
        want = mixed_step_cost(
            dep,
            chunk_tokens=chunk,
            chunk_prefix_tokens=prefix,
            decode_batch=db,
            decode_context_tokens=ctx / db if db else 0,
        ).time_s
        assert steps.mixed_s(chunk, prefix, db, ctx) == pytest.approx(float(want), rel=1e-9)


def test_prefill_table_is_the_roofline():
    dep = DEPS[0]
    steps = RooflineSteps(dep)
    for p in [1, 17, 4095, 4096, 9000]:
        assert steps.prefill_s([p]) == pytest.approx(float(prefill_cost(dep, p).time_s), rel=1e-12)
    # equal-length batch: exactly the roofline's batched prefill
    assert steps.prefill_s([500, 500, 500]) == pytest.approx(float(prefill_cost(dep, 500, batch=3).time_s))


def test_kv_transfer_uses_comm_layer():
    link = get_link("eth-25g")
    kvb = DEPS[0].kv_bytes_per_token
    x = KVTransfer(kvb, link, 32, layerwise=True)
    t, last = x(1000)
    assert t == pytest.approx(float(transfer_time_s(1000 * kvb, link, messages=32)))
    assert last == pytest.approx(float(transfer_time_s(1000 * kvb / 32, link)))
    assert KVTransfer(kvb, link, 32, layerwise=False)(1000) == (
        pytest.approx(float(transfer_time_s(1000 * kvb, link))),
        0.0,
    )


TRACES = ["azure_llm_2023_conv.csv", "azure_llm_2023_code.csv"]


@pytest.mark.parametrize("name", TRACES)
def test_real_trace_both_architectures(name):
    path = SHARED_TRACES / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    requests = trace_requests(load_trace(path), n=2000)
    h100 = get_gpu("h100-sxm")
    slo = SLO(2.0, 0.1)
    colo = simulate(ColocatedConfig(h100, 1, 4, chunk_tokens=2048), "llama-3.1-8b", requests, slo=slo).summary
    dis = simulate(
        DisaggregatedConfig(h100, 1, 2, h100, 1, 2, get_link("ib-ndr-400")), "llama-3.1-8b", requests, slo=slo
    ).summary
    for s in (colo, dis):
        assert s.stable and s.completed == 2000
        assert 0 < s.ttft_s[0] <= s.ttft_s[1] <= s.ttft_s[2]
        assert 0 < s.tpot_s[0] <= s.tpot_s[2] < 0.1


@pytest.mark.parametrize("layerwise", [True, False])
def test_lone_request_transfer_exposure_on_a_slow_link(layerwise):
    # Llama-3.1-70B, TP2 -> TP2 over 10 GbE (2 lanes): layer-wise exposes max(t, N t - S + S/N) with
    # t = latency + bytes / (lanes x bw x eff) / N (pipelining bound); whole-KV exposes N=1 message.
    from model.sim.simulate import SimRequests

    arch, gpu, link = get_model("llama-3.1-70b"), get_gpu("h100-sxm"), get_link("eth-10g")
    overheads = get_engine().overheads(gpu)  # the default engine's, as the simulator uses
    dep = Deployment(arch, gpu, parallel=2, overheads=overheads)
    cfg = DisaggregatedConfig(gpu, 2, 1, gpu, 2, 1, link, layerwise=layerwise)
    p = 3000
    r = simulate(cfg, arch, SimRequests(np.array([0.0]), np.array([p]), np.array([20]))).records
    s = float(prefill_cost(dep, p).time_s)
    kv = p * dep.kv_bytes_per_token / 2
    n = arch.num_layers
    if layerwise:
        t = float(transfer_time_s(kv / n, link))
        exposed = max(t, n * t - s + s / n)
    else:
        exposed = float(transfer_time_s(kv, link))
    assert r.ttft_s[0] == pytest.approx(s + exposed + overheads.request_s, rel=1e-9)
