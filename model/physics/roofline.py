"""Roofline phase costs in one import: the public names of :mod:`model.physics.deployment`
(Deployment, efficiency constants), :mod:`model.physics.steps` (StepCost and the prefill, decode and
mixed step costs) and :mod:`model.physics.generation` (chunked prefill, decode sums, TPOT).

Kept so that ``from model.physics.roofline import ...`` keeps working; new code imports from the
module that owns the name.
"""

from __future__ import annotations

from model.physics.deployment import (
    ALLREDUCES_PER_LAYER,
    EAGER_KERNELS_PER_LAYER,
    GEMM_EXPOSED_WEIGHT_FRACTION,
    KERNEL_LAUNCH_S,
    LOGIT_BYTES,
    LOW_PRECISION_MFU_RATIO,
    Deployment,
)
from model.physics.generation import (
    chunked_prefill_overhead,
    chunked_prefill_time_s,
    decode_total_s,
    generation_time_s,
    mean_tpot_s,
)
from model.physics.steps import StepCost, decode_step_cost, gemm_mfu_at, mixed_step_cost, prefill_cost

__all__ = [
    "ALLREDUCES_PER_LAYER",
    "EAGER_KERNELS_PER_LAYER",
    "GEMM_EXPOSED_WEIGHT_FRACTION",
    "KERNEL_LAUNCH_S",
    "LOGIT_BYTES",
    "LOW_PRECISION_MFU_RATIO",
    "Deployment",
    "StepCost",
    "chunked_prefill_overhead",
    "chunked_prefill_time_s",
    "decode_step_cost",
    "decode_total_s",
    "gemm_mfu_at",
    "generation_time_s",
    "mean_tpot_s",
    "mixed_step_cost",
    "prefill_cost",
]
