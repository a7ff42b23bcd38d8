"""Numeric formats: bytes per element, and which tensor-core peak a weight format computes with.

Bytes per element follow the formats' definitions (IEEE 754 fp32/fp16, bfloat16, OCP FP8 E4M3/E5M2,
OCP MX FP4 E2M1 = 4 bits; scale factors of block formats are ignored, < 3% for 32-element blocks).
"""

from __future__ import annotations

from model.errors import InputError

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
    "int4": 0.5,
}

# Weight format -> the tensor-core dtype the matmuls run in. Weight-only int4 is dequantised to
# 16-bit before the matmul (e.g. AWQ/GPTQ kernels in vLLM), so it computes at the bf16 peak.
COMPUTE_DTYPE: dict[str, str] = {
    "fp32": "fp32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8",
    "int8": "int8",
    "fp4": "fp4",
    "int4": "bf16",
}


def bytes_per_element(dtype: str, field: str = "dtype") -> float:
    """Bytes per element of ``dtype``; a clear error naming ``field`` for an unknown one."""
    key = str(dtype).lower()
    if key not in BYTES_PER_ELEMENT:
        raise InputError(field, dtype, f"one of {', '.join(BYTES_PER_ELEMENT)}")
    return BYTES_PER_ELEMENT[key]


def compute_dtype(weight_dtype: str) -> str:
    """The tensor-core dtype used for matmuls when weights are stored in ``weight_dtype``."""
    bytes_per_element(weight_dtype)
    return COMPUTE_DTYPE[weight_dtype.lower()]
