"""Numeric formats: one row per format (bits per element including block scales, scale granularity,
which tensor-core peak its math runs at, weight-only or weight+activation), and the per-component
precision of a model deployment.

Every size and peak decision in the model reads this table (:func:`get_format`,
:func:`bytes_per_element`, :func:`compute_dtype`); adding a format is adding one row.

Bits per element = element bits + (scale bits + zero-point bits) / elements per scale block. A
per-tensor or per-channel scale adds one number per tensor or per row of thousands of elements and is
counted as 0 (below 0.01%). Weight-only formats (AWQ/GPTQ int4, GGUF) dequantise to 16-bit inside the
GEMM, so their math runs at the GPU's 16-bit peak; weight+activation formats (FP8, INT8, NVFP4, MXFP4)
run at that format's own tensor-core peak. A GPU without a peak for the format's math (FP8 on an
A100, FP4 on an H100) refuses the format with a clear error naming the formats it can run; there is
no silent fallback to the 16-bit peak (the behaviour before the table existed, kept on purpose).
"""

from __future__ import annotations

from dataclasses import dataclass

from model.errors import InputError


@dataclass(frozen=True)
class NumericFormat:
    """One numeric format.

    ``element_bits``: bits of one stored element; ``scale_bits``: bits of the scale (plus zero
    point) shared by ``block_elements`` elements (0 for per-tensor / per-channel scales);
    ``math``: the key of the GPU peak (``GPU.peak_flops``) its GEMMs run at; ``weight_only``: the
    weights are dequantised to 16-bit before the math (activations stay 16-bit); ``kv_cache``:
    engines can store the KV cache in it; ``source``: where the layout comes from.
    """

    name: str
    element_bits: float
    scale_bits: float
    block_elements: int | None
    math: str
    weight_only: bool
    kv_cache: bool
    source: str

    @property
    def bits_per_element(self) -> float:
        """Element bits + scale bits / block size (NVFP4: 4 + 8 / 16 = 4.5)."""
        if not self.block_elements:
            return float(self.element_bits)
        return float(self.element_bits) + float(self.scale_bits) / float(self.block_elements)

    @property
    def bytes_per_element(self) -> float:
        """bits_per_element / 8 (NVFP4: 0.5625 bytes per parameter)."""
        return self.bits_per_element / 8.0


_IEEE = "IEEE 754-2019 binary32 / binary16"
_OCP_FP8 = "OCP 8-bit Floating Point Specification (OFP8) rev 1.0, 2023: E4M3/E5M2, 8 bits"
FORMATS: tuple[NumericFormat, ...] = (
    NumericFormat("fp32", 32, 0, None, "fp32", False, True, _IEEE + " (binary32)"),
    NumericFormat(
        "bf16", 16, 0, None, "bf16", False, True, "Google bfloat16 (Kalamkar et al. 2019, arXiv:1905.12322)"
    ),
    NumericFormat("fp16", 16, 0, None, "fp16", False, True, _IEEE + " (binary16)"),
    NumericFormat(
        "fp8",
        8,
        0,
        None,
        "fp8",
        False,
        True,
        _OCP_FP8 + "; per-tensor scale (vLLM/TensorRT-LLM FP8 W8A8, vLLM --kv-cache-dtype fp8)",
    ),
    NumericFormat(
        "fp8_block",
        8,
        32,
        128 * 128,
        "fp8",
        False,
        False,
        "DeepSeek-V3 technical report (arXiv:2412.19437) sec. 3.3.2: E4M3 weights with one fp32 scale "
        "per 128x128 block (activations 1x128 tiles, also fp32 scales): 8 + 32 / 16384 bits",
    ),
    NumericFormat(
        "int8",
        8,
        0,
        None,
        "int8",
        False,
        True,
        "SmoothQuant W8A8 (Xiao et al. 2023, arXiv:2211.10438): int8 with per-channel/per-token scales",
    ),
    NumericFormat(
        "nvfp4",
        4,
        8,
        16,
        "fp4",
        False,
        True,
        "NVIDIA, 'Introducing NVFP4 for efficient and accurate low-precision inference' (developer "
        "blog, 2025) and TensorRT Model Optimizer: E2M1 elements, one FP8 E4M3 scale per 16 "
        "(plus one fp32 per tensor): 4 + 8 / 16 = 4.5 bits. As a KV cache: NVIDIA developer blog, "
        "E. Alvarez, 'Optimizing Inference for Long Context and Large Batch Sizes with NVFP4 KV "
        "Cache' (2025-12-08): Blackwell GPUs, dequantised to FP8 before attention",
    ),
    NumericFormat(
        "mxfp4",
        4,
        8,
        32,
        "fp4",
        False,
        False,
        "OCP Microscaling Formats (MX) Specification v1.0, 2023, sec. 5 and Table 1: MXFP4 = E2M1 "
        "elements, one E8M0 (8-bit) scale per 32: 4 + 8 / 32 = 4.25 bits",
    ),
    NumericFormat(
        "int4_g128",
        4,
        16 + 4,
        128,
        "bf16",
        True,
        False,
        "AWQ (Lin et al. 2024, arXiv:2306.00978) / GPTQ (Frantar et al. 2023, arXiv:2210.17323) "
        "checkpoints as vLLM loads them (vllm/model_executor/layers/quantization/awq.py, gptq.py): "
        "int4 qweight, an fp16 scale and a 4-bit packed zero point per group of 128 input rows: "
        "4 + 20 / 128 bits; dequantised to 16-bit math",
    ),
    NumericFormat(
        "q4_0",
        4,
        16,
        32,
        "fp16",
        True,
        False,
        "ggml (llama.cpp) ggml-common.h block_q4_0: one fp16 scale d + 16 bytes of 4-bit quants per "
        "32 weights = 18 bytes / 32 = 4.5 bits",
    ),
    NumericFormat(
        "q8_0",
        8,
        16,
        32,
        "fp16",
        True,
        False,
        "ggml (llama.cpp) ggml-common.h block_q8_0: one fp16 scale d + 32 int8 quants per 32 weights "
        "= 34 bytes / 32 = 8.5 bits",
    ),
    NumericFormat(
        "q4_k_m",
        4.8993,
        0,
        None,
        "fp16",
        True,
        False,
        "llama.cpp tools/quantize/quantize.cpp QUANT_OPTIONS: Q4_K_M = 4.58 GiB for Llama-3-8B "
        "(8.030e9 weights) -> 4.58 x 2^30 x 8 / 8.030e9 = 4.90 bits per weight, a whole-model mix: "
        "Q4_K super-blocks (144 bytes / 256 weights = 4.5 bits) with attn_v, part of ffn_down and the "
        "output tensor in Q6_K (6.5625 bits); the effective figure is the row's element_bits",
    ),
)
_BY_NAME = {f.name: f for f in FORMATS}
# Names kept from before the table: "fp4" is the FP4 that Blackwell engines serve (NVFP4), "int4"
# is weight-only int4 with group-128 scales (AWQ/GPTQ). GGUF names with a dash are accepted too.
ALIASES: dict[str, str] = {"fp4": "nvfp4", "int4": "int4_g128", "q4_k": "q4_k_m"}
# Weight formats whose KV cache defaults to the same format; every other weight format keeps a bf16
# KV cache (vLLM --kv-cache-dtype auto stores KV in the model's 16-bit dtype; fp8 weights with an fp8
# KV cache as TensorRT-LLM FP8 checkpoints and this tool have always assumed).
SAME_FORMAT_KV = ("bf16", "fp16", "fp8")
DEFAULT_KV_FORMAT = "bf16"
# Activations between layers and on the TP all-reduce: 16-bit whatever the weight format (FP8 and
# int4 engines keep bf16/fp16 activations between layers; TensorRT-LLM and vLLM FP8 linear layers
# output bf16).
ACTIVATION_FORMAT = "bf16"


def format_names() -> tuple[str, ...]:
    """Every accepted format name (rows, then aliases)."""
    return tuple(_BY_NAME) + tuple(ALIASES)


def _key(name: str) -> str:
    key = str(name).strip().lower().replace("-", "_")
    return ALIASES.get(key, key)


def get_format(name: str, field: str = "dtype") -> NumericFormat:
    """The table row for ``name`` (case-insensitive, aliases resolved); a clear error naming ``field``."""
    if not isinstance(name, str) or _key(name) not in _BY_NAME:
        raise InputError(field, name, f"one of {', '.join(format_names())}")
    return _BY_NAME[_key(name)]


def bytes_per_element(dtype: str, field: str = "dtype") -> float:
    """Bytes per element of ``dtype`` including its block scales (the table's ``bytes_per_element``)."""
    return get_format(dtype, field).bytes_per_element


def compute_dtype(weight_dtype: str, field: str = "dtype") -> str:
    """The GPU peak key matmuls use when weights are stored in ``weight_dtype``."""
    return get_format(weight_dtype, field).math


def check_kv_format(kv_dtype: str, field: str = "kv_dtype") -> NumericFormat:
    """The row of a KV-cache format; a clear error if engines cannot store KV in it."""
    fmt = get_format(kv_dtype, field)
    if not fmt.kv_cache:
        allowed = ", ".join(f.name for f in FORMATS if f.kv_cache)
        raise InputError(field, kv_dtype, f"a KV-cache format: one of {allowed}")
    return fmt


def default_kv_format(weight_dtype: str) -> str:
    """The KV-cache format when none is given: the weight format for bf16/fp16/fp8, else bf16.

    The one place this default is decided (Scenario and Deployment both call it).
    """
    key = _key(weight_dtype)
    return key if key in SAME_FORMAT_KV else DEFAULT_KV_FORMAT


def check_gpu_runs(fmt: NumericFormat, gpu_peaks: dict[str, float], gpu_name: str, field: str) -> float:
    """The peak FLOP/s ``fmt``'s math runs at on a GPU with ``gpu_peaks``; a clear error when the GPU
    has no tensor-core path for it (e.g. fp8 on an A100), naming the formats it can run."""
    if fmt.math in gpu_peaks:
        return float(gpu_peaks[fmt.math])
    runnable = [f.name for f in FORMATS if f.math in gpu_peaks]
    raise InputError(
        field,
        fmt.name,
        f"a format the {gpu_name} can run ({fmt.name} needs {fmt.math} tensor-core math): "
        + ", ".join(runnable),
    )


def check_kv_runs(
    fmt: NumericFormat, gpu_peaks: dict[str, float], gpu_name: str, field: str = "kv_dtype"
) -> None:
    """A clear error when the GPU cannot read a KV cache stored in ``fmt``.

    A 4-bit KV cache (NVFP4) is read by Blackwell attention kernels that dequantise it with the FP4
    tensor-core path (NVIDIA blog, 'Optimizing Inference ... with NVFP4 KV Cache', 2025: Blackwell
    only), so the GPU needs ``fmt.math`` among its peaks. An 8-bit KV cache needs no FP8 math: the
    attention kernel dequantises it to 16-bit on any GPU (vLLM PR #2279, 'Support FP8-E5M2 KV
    Cache': "not limited on Hopper, Volta/Ampere are both ok", measured on an A100-40GB), so FP8 KV
    on an A100 is accepted.
    """
    if fmt.element_bits < 8 and fmt.math not in gpu_peaks:
        runnable = [f.name for f in FORMATS if f.kv_cache and (f.element_bits >= 8 or f.math in gpu_peaks)]
        raise InputError(
            field,
            fmt.name,
            f"a KV-cache format the {gpu_name} can read ({fmt.name} KV needs {fmt.math} tensor cores): "
            + ", ".join(runnable),
        )


@dataclass(frozen=True)
class Precision:
    """Formats of each component of a deployed model (names from the format table).

    ``attention``: attention projections (QKV, O; MLA's down/up projections); ``mlp``: dense MLPs,
    shared experts, routers, embeddings and the LM head; ``experts``: routed experts;
    ``kv_cache``; ``activations`` (between layers and on the TP all-reduce).
    """

    attention: str = "bf16"
    mlp: str = "bf16"
    experts: str = "bf16"
    kv_cache: str = "bf16"
    activations: str = ACTIVATION_FORMAT

    def __post_init__(self) -> None:
        for name in ("attention", "mlp", "experts"):
            get_format(getattr(self, name), "dtype")
        check_kv_format(self.kv_cache)
        get_format(self.activations, "activations")

    @classmethod
    def from_dtypes(cls, weight_dtype: str, kv_dtype: str | None = None) -> Precision:
        """Today's inputs: every weight in ``weight_dtype``; KV in ``kv_dtype`` or the default
        (:func:`default_kv_format`); 16-bit activations. Names are normalised to table rows."""
        w = get_format(weight_dtype, "dtype").name
        kv = default_kv_format(w) if kv_dtype is None else check_kv_format(kv_dtype).name
        return cls(attention=w, mlp=w, experts=w, kv_cache=kv)

    def format(self, component: str) -> NumericFormat:
        """The table row of ``component`` ("attention", "mlp", "experts", "kv_cache", "activations")."""
        return get_format(getattr(self, component))
