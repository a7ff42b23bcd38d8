"""Engine overheads: the time a serving engine adds to each step and to each request beyond the
roofline's FLOPs, bytes and collectives. One value of :class:`Overheads` is built from the engine
profile (hardware_profiles/engines/*.toml, ``[overheads]``) and the GPU profile, and read by the
planner and the simulator alike through :class:`model.physics.deployment.Deployment`.

Per step (model.physics.steps):

    overhead_s = step_s + per_sequence_s x sequences
                 + kernels x (kernel_s + launch_s if the step runs eagerly)

- ``step_s``: host time per iteration (scheduling, input preparation, graph launch, output
  processing), the GPU profile's ``efficiency.step_overhead`` plus the engine's ``step_extra``.
- ``kernel_s``: GPU time floor of one kernel (launch latency inside a CUDA graph, ramp-up, tail
  wave, dependency wait) that a roofline of bytes / bandwidth leaves out; it adds up over the
  ~12-16 kernels per layer of a decode step (KERNELS_PER_LAYER, MOE_EXTRA_KERNELS).
- ``launch_s``: host launch cost per kernel when the step is not captured in a graph (prefill,
  mixed steps, or decode of an engine without CUDA graphs: ``decode_graphs`` false).
- ``per_sequence_s``: work per running sequence per step (sampling, logits processing, scheduler
  and block-table bookkeeping, detokenisation, streaming).

Per request: ``request_s``, what a client measures on top of the engine's own first token
(tokenisation, HTTP, queue hand-off to the engine core), added to TTFT as a user measures it.

Per engine generation: ``low_precision_gemm_ratio``, the efficiency of its 8-/4-bit GEMM kernels
against the MFU at the doubled (quadrupled) peak (None: model.physics.deployment.LOW_PRECISION_MFU_RATIO,
measured on TensorRT-LLM 0.5); an engine property, not an overhead, carried here because every
Deployment receives the engine through its Overheads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from model.errors import InputError

# Kernels per transformer layer in a decode or prefill step: 2 norms, QKV GEMM, rotary, KV-cache
# write, attention, O GEMM, gate/up GEMM, activation, down GEMM, 2 residual adds (the all-reduces
# are timed by the collectives). vLLM and TensorRT-LLM fuse some (norm + residual), add others
# (quantisation of activations for FP8 GEMMs), so 12 is a central count.
KERNELS_PER_LAYER = 12
# Extra kernels of an MoE layer over a dense MLP: router GEMM, top-k softmax, token sort/align,
# combine (vLLM fused_moe: topk_softmax, moe_align_block_size, two fused_moe GEMMs with
# silu_and_mul between, moe_sum; against a dense MLP's gate/up, activation, down).
MOE_EXTRA_KERNELS = 4
# Host launch cost of one CUDA kernel without graphs: ~4-5 us (NVIDIA developer blog, A. Gray,
# "Getting Started with CUDA Graphs", 2019: a short kernel costs ~3.8 us per launch without graphs);
# 5 us with framework (PyTorch) dispatch.
KERNEL_LAUNCH_S = 5e-6
_MAX_S = 1.0  # plausible bound on every overhead term (catches unit slips such as 5 instead of 5 ms)


@dataclass(frozen=True)
class Overheads:
    """An engine's overheads on one GPU kind (module docstring); all times in seconds."""

    step_s: float
    kernel_s: float = 0.0
    launch_s: float = KERNEL_LAUNCH_S
    decode_graphs: bool = True
    per_sequence_s: float = 0.0
    request_s: float = 0.0
    # Two-micro-batch overlap of the EP all-to-all with compute (the engine profile's
    # ``[overheads] micro_batch_overlap``; model.physics.expert_parallel.overlapped_step_s).
    micro_batch_overlap: bool = False
    # 8-/4-bit GEMM efficiency ratio of the engine's kernels (the profile's ``[gemm] low_precision_ratio``).
    low_precision_gemm_ratio: float | None = None

    def __post_init__(self) -> None:
        for name in ("step_s", "kernel_s", "launch_s", "per_sequence_s", "request_s"):
            x = getattr(self, name)
            if (
                isinstance(x, bool)
                or not isinstance(x, int | float)
                or not (math.isfinite(x) and 0 <= x <= _MAX_S)
            ):
                raise InputError(f"overheads.{name}", x, f"a time in [0, {_MAX_S:g}] s")
        r = self.low_precision_gemm_ratio
        if r is not None and (isinstance(r, bool) or not isinstance(r, int | float) or not 0.1 <= r <= 1.5):
            raise InputError("gemm.low_precision_ratio", r, "a ratio in [0.1, 1.5]")
        for flag in ("decode_graphs", "micro_batch_overlap"):
            if not isinstance(getattr(self, flag), bool):
                raise InputError(f"overheads.{flag}", getattr(self, flag), "true or false")


def kernels_per_step(num_layers: int, num_moe_layers: int) -> int:
    """Kernels one forward pass launches: KERNELS_PER_LAYER per layer + MOE_EXTRA_KERNELS per MoE
    layer (all layers: the critical path passes every pipeline stage)."""
    return KERNELS_PER_LAYER * num_layers + MOE_EXTRA_KERNELS * num_moe_layers
