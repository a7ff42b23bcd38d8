"""Decode attention efficiency (issue 16): cached KV streams at DECODE_KV_STREAM_EFFICIENCY of the HBM
peak with a fixed cost of DECODE_ATTENTION_FIXED_TOKENS tokens per sequence; hand-derived values."""

from __future__ import annotations

import pytest

from model.hardware.catalog import get_gpu
from model.llm.catalog import get_model
from model.physics import deployment as eff
from model.physics.deployment import Deployment
from model.physics.steps import decode_step_cost, mixed_step_cost, prefill_cost

# Llama-3.1-8B bf16 KV per token: 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 B.
KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2


def h100() -> Deployment:
    return Deployment(get_model("llama-3.1-8b"), get_gpu("h100-sxm"))


def test_recorded_constants() -> None:
    assert eff.DECODE_KV_STREAM_EFFICIENCY == 0.95
    assert eff.DECODE_ATTENTION_FIXED_TOKENS == 32.0


def test_decode_kv_time_batch_64_at_4096_tokens() -> None:
    dep = h100()
    bw = dep.gpu.memory_bandwidth_bytes_per_s
    cost = decode_step_cost(dep, 64, 4096)
    raw = 64 * 4096 * KV_PER_TOKEN  # 34.4 GB of cached KV read
    # the rest of the bytes at BW x MBU, the cached KV at BW x 0.95 with 32 tokens more per sequence
    kv_s = 64 * (4096 + 32) * KV_PER_TOKEN / (bw * 0.95)
    assert kv_s == pytest.approx(64 * 4128 * 131072 / (3.35e12 * 0.95), rel=1e-3)  # ~10.9 ms
    rest_s = (float(cost.bytes_moved) - raw) / (bw * dep.mbu)
    assert float(cost.memory_s) == pytest.approx(rest_s + kv_s, rel=1e-12)
    assert float(cost.kv_read_bytes) == pytest.approx(raw)  # bytes reported stay physical


def test_short_context_pays_the_fixed_tokens() -> None:
    # ctx 1: the kernel costs (1 + 32) tokens of KV per sequence, 33x the bytes it reads
    dep = h100()
    bw = dep.gpu.memory_bandwidth_bytes_per_s
    a, b = decode_step_cost(dep, 8, 1), decode_step_cost(dep, 8, 2)
    slope = float(b.memory_s - a.memory_s)
    assert slope == pytest.approx(8 * KV_PER_TOKEN / (bw * 0.95), rel=1e-9)
    fixed = float(a.memory_s) - (float(a.bytes_moved) - 8 * KV_PER_TOKEN) / (bw * dep.mbu)
    assert fixed == pytest.approx(8 * 33 * KV_PER_TOKEN / (bw * 0.95), rel=1e-9)


def test_prefill_unchanged_and_mixed_step_counts_its_decodes() -> None:
    dep = h100()
    bw = dep.gpu.memory_bandwidth_bytes_per_s
    p = prefill_cost(dep, 2048)
    assert float(p.memory_s) == pytest.approx(float(p.bytes_moved) / (bw * dep.mbu), rel=1e-12)
    m = mixed_step_cost(
        dep, chunk_tokens=512, chunk_prefix_tokens=0, decode_batch=16, decode_context_tokens=1000
    )
    raw = 16 * 1000 * KV_PER_TOKEN
    expected = (float(m.bytes_moved) - raw) / (bw * dep.mbu) + 16 * 1032 * KV_PER_TOKEN / (bw * 0.95)
    assert float(m.memory_s) == pytest.approx(expected, rel=1e-12)
