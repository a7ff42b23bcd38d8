"""Memory, weight copies and power of one configuration's pools at an operating point."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.hardware.gpus import GPU
from model.serving.phase_tables import InstanceTables


@dataclass(frozen=True)
class PoolMemory:
    """Memory of one GPU in a pool, in bytes: weights, KV in use at this rate, KV capacity, workspace."""

    pool: str
    gpu: str
    gpu_memory_bytes: float
    weight_bytes: float
    kv_in_use_bytes: float
    kv_capacity_bytes: float
    workspace_bytes: float
    reserve_bytes: float


@dataclass(frozen=True)
class PoolPower:
    """Power of one pool: GPUs x (idle + (TDP - idle) x busy fraction)."""

    pool: str
    n_gpus: int
    busy_fraction: float
    power_w: float


@dataclass(frozen=True)
class Resources:
    """Per-pool memory and power, the number of weight copies and the bytes of one copy."""

    memory: tuple[PoolMemory, ...]
    power: tuple[PoolPower, ...]
    weight_copies: int
    weight_bytes_one_copy: float


def pool_power(pool: str, gpu: GPU, n_gpus: int, busy: float) -> PoolPower:
    """P = n x (P_idle + (TDP - P_idle) x busy): a linear utilisation power model (the common
    first-order server power model, Fan et al. ISCA 2007, "Power provisioning for a warehouse-sized
    computer", sec. 4.1), with the GPU's idle and TDP from its profile."""
    b = float(np.clip(busy, 0.0, 1.0))
    return PoolPower(pool, n_gpus, b, n_gpus * (gpu.idle_w + (gpu.tdp_w - gpu.idle_w) * b))


def pool_memory(pool: str, t: InstanceTables, batch: float, context_tokens: float) -> PoolMemory:
    """Memory of one GPU of a pool whose instances hold ``batch`` sequences of ``context_tokens``."""
    per_token = t.fit.kv_bytes_per_token_per_gpu
    capacity = float(t.kv_capacity_tokens) * per_token
    return PoolMemory(
        pool,
        t.dep.gpu.name,
        t.dep.gpu.memory_bytes,
        t.fit.weight_bytes_per_gpu,
        min(batch * float(t.fit.kv_tokens(context_tokens)) * per_token, capacity),
        capacity,
        float(np.asarray(t.fit.workspace_bytes_per_gpu)),
        t.fit.reserve_bytes_per_gpu,
    )


def one_copy_bytes(t: InstanceTables) -> float:
    """Weight bytes of one instance (one copy of the model's weights)."""
    return t.fit.weight_bytes_per_gpu * t.dep.n_gpus
