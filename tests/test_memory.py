"""Memory fit: weights, workspace, reserve and the KV left over, with the reason as a value."""

from __future__ import annotations

import numpy as np
import pytest

from model.errors import InputError
from model.hardware.catalog import get_gpu
from model.hardware.parallelism import Parallelism
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.memory import CUDA_GRAPH_POOL_BYTES, RUNTIME_LIBRARY_BYTES, memory_fit


def dep(model: str, gpu: str, tp: int = 1, pp: int = 1, **kw: object) -> Deployment:
    return Deployment(get_model(model), get_gpu(gpu), parallel=Parallelism(tp=tp, pp=pp), **kw)


def test_llama70b_bf16_needs_two_h100() -> None:
    one = memory_fit(dep("llama-3.1-70b", "h100-sxm"))
    assert not bool(one.fits)
    assert one.reason.startswith("needs 141 GB of weights per GPU, has 77 GB")  # 0.9 x 85.5 GB
    two = memory_fit(dep("llama-3.1-70b", "h100-sxm", tp=2))
    assert bool(two.fits)
    assert two.weight_bytes_per_gpu == pytest.approx(70.55e9, rel=1e-3)
    assert float(two.kv_capacity_tokens) > 10_000


def test_llama8b_bf16_fits_one_rtx4090_with_kv_room() -> None:
    fit = memory_fit(dep("llama-3.1-8b", "rtx-4090"))
    usable = 0.9 * 24564 * 2**20  # nvidia-smi 24564 MiB x utilisation 0.9
    weights = 8_029_995_008 * 2  # total params x bf16
    # 8192 tokens x 2 B x (2 h + 3 I) + 256 sampled rows x V x 4 B (fp32 logits)
    workspace = 8192 * 2 * (2 * 4096 + 3 * 14336) + 256 * 128256 * 4
    reserve = RUNTIME_LIBRARY_BYTES + CUDA_GRAPH_POOL_BYTES  # 1.5 GiB
    kv_per_token = 2 * 32 * 8 * 128 * 2  # 131,072 B
    tokens = np.floor((usable - weights - workspace - reserve) / kv_per_token / 16) * 16
    assert bool(fit.fits)
    assert float(fit.workspace_bytes_per_gpu) == pytest.approx(workspace)
    assert float(fit.kv_capacity_tokens) == tokens == 34_640
    assert "34,640 tokens" in fit.reason
    # 34,640 tokens = 2,165 blocks of 16; a 4,096-token sequence takes 256 blocks -> 8 sequences
    assert float(fit.max_batch(4096)) == 8


def test_vectorised_over_utilisation_and_tp_lowers_weights() -> None:
    fit = memory_fit(dep("llama-3.1-8b", "l4"), gpu_memory_utilization=np.array([0.5, 0.9]))
    assert list(fit.fits) == [False, True]
    assert "fits in 1 of 2 settings" in fit.reason
    a = dep("llama-3.1-70b", "h100-sxm", tp=4)
    assert a.weight_bytes_per_gpu < dep("llama-3.1-70b", "h100-sxm", tp=2).weight_bytes_per_gpu


def test_bad_memory_inputs() -> None:
    d = dep("llama-3.1-8b", "h100-sxm")
    with pytest.raises(InputError, match="gpu_memory_utilization"):
        memory_fit(d, gpu_memory_utilization=1.2)
    with pytest.raises(InputError, match="max_batched_tokens"):
        memory_fit(d, max_batched_tokens=0)
    with pytest.raises(InputError, match="context_tokens"):
        memory_fit(d).max_batch(0)
