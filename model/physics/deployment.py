"""A deployment of one model instance (TP x attention-DP x PP identical GPUs, EP over each stage,
described by one :class:`~model.hardware.parallelism.Parallelism`) and the efficiency constants of the
roofline:
what every step cost in :mod:`model.physics.steps` is evaluated on.

Numeric formats come from the format table (:mod:`model.hardware.formats`): weight, KV and
activation bytes per element (block scales included) and the GPU peak each component's GEMMs run at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

from model.errors import InputError
from model.hardware.catalog import get_link
from model.hardware.collectives import default_tp_link
from model.hardware.formats import Precision, bytes_per_element, check_gpu_runs, check_kv_runs, get_format
from model.hardware.gpus import GPU
from model.hardware.links import Link
from model.hardware.overheads import Overheads
from model.hardware.parallelism import Parallelism, as_parallelism
from model.llm.arch import (
    LLMArch,
    check_tp,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    weight_params_by_component,
)
from model.physics.materialised_attention import check_attention_kernel
from model.physics.speculation import Speculation, draft_memory

# Bytes per logit written by the LM head (vLLM and TensorRT-LLM compute logits in fp32).
LOGIT_BYTES = bytes_per_element("fp32")
# TP all-reduces per transformer layer: one after attention's output projection, one after the
# MLP's down projection (Megatron-LM, Shoeybi et al. 2019, sec. 3, Fig. 3).
ALLREDUCES_PER_LAYER = 2
# Compute time of GEMMs whose math runs in an 8- or 4-bit format (keyed by the format table's
# ``math``), as a fraction of what the MFU alone predicts at that format's (2x or 4x) peak. Each
# low-precision GEMM needs its input activations quantised by a separate kernel, attention, norms
# and sampling stay in 16-bit, and the doubled tensor-core rate pushes the GPU into its power limit
# (lower clocks). TensorRT-LLM 0.5 on H100 reached ~780 TFLOP/s in FP8 prefill of Llama-2-7B
# (docs/source/performance.md low-latency table: 2048 tokens in 36 ms), i.e. ~0.4 of the FP8 peak
# against ~0.6 MFU in 16-bit: ratio ~0.7. Weight-only formats compute in 16-bit: ratio 1. An engine
# whose FP8 kernels are of a later generation sets its own (Overheads.low_precision_gemm_ratio).
LOW_PRECISION_MFU_RATIO = {"fp8": 0.7, "int8": 0.7, "fp4": 0.7}
# Fraction kappa of a GEMM's weight stream that is not hidden behind its tensor-core math. It sets
# how the linear layers' efficiency falls when a step carries few tokens (``gemm_mfu_at``):
# MFU(T) = MFU x T / (T + T_half), T_half = kappa x T_ridge, where T_ridge is the token count at
# which a GEMM's FLOP time equals its weight-read time (``Deployment.gemm_ridge_tokens``).
# kappa = 0 is the ideal roofline (full MFU as soon as a GEMM is compute-bound); kappa = 1 is no
# overlap of weight loads and math at all. Physical basis: with M = T rows each weight tile loaded
# from HBM feeds only 2 M FLOPs per element, so near the ridge point the loads are only partly
# hidden by the software pipeline, and small-M GEMMs use smaller tiles and suffer tile and wave
# quantisation (NVIDIA, "Matrix Multiplication Background User's Guide", DU-09799-001, 2023,
# ch. 2 "Math and memory bounds", sec. 2.3 and ch. 3 "Dimension quantization effects").
# Value: 0.75, fitted (with LARGE_GEMM_MFU_FACTOR below) on the train split of the published
# measurements (benchmarks/fit_efficiency.py, docs/validation.md "Issue 16"): a grid over kappa in
# {0.5, 0.75, 1.0, 1.25} put the train MdAPE minimum at 0.75. Cross-check against cuBLAS: FP16 GEMM,
# M = 64, N = K = 16384 on an A100 runs at 95-100 TFLOP/s (ml-explore/mlx PR #3315, cuBLAS
# baseline column); the model gives 312 x 0.69 x 64 / (64 + 0.75 x 132) = 84 TFLOP/s (kappa 0.5
# gave 99 with the old plateau; 1.0: 70). On an H100 the same shapes at M = 32 / 64 are
# memory-bound (87 / 178 TFLOP/s, mlx PR #3160). Sarathi-Serve's prefill overhead at small
# chunks is the independent check (docs/validation.md).
GEMM_EXPOSED_WEIGHT_FRACTION = 0.75
# Large-M GEMM efficiency relative to the GPU profile's ``prefill_mfu``: the profiles' MFU was set
# as the end-to-end efficiency of a typical prefill (a few thousand tokens, attention and norms
# included); the linear layers' plateau at large M, which the token-dependent curve above bends
# down for small steps, sits above it. 1.15, fitted on the train split with kappa (grid 1.0-1.2);
# the held-out rows confirm it (docs/validation.md). cuBLAS check: 0.6 x 1.15 = 0.69 of the A100's
# 312 TFLOP/s, against ~80% reached by large BF16 GEMMs (a100-80gb-sxm.toml prefill_mfu source).
# Attention keeps the profile's MFU.
LARGE_GEMM_MFU_FACTOR = 1.15
# Accumulators of 16-bit GEMMs (``Deployment.gemm_accumulate``). "fp32": cuBLAS with
# CUBLAS_COMPUTE_32F, what PyTorch-based engines (vLLM, SGLang) and TensorRT-LLM run (PyTorch
# aten/src/ATen/cuda/CUDABlas.cpp: gemm<at::Half> / gemm<at::BFloat16> call cublasGemmEx with
# CUBLAS_COMPUTE_32F); GeForce cards run it at half their FP16-accumulate rate. "fp16": llama.cpp's
# CUDA backend (ggml-cuda.cu at ggerganov/llama.cpp 005de593, Jan 2024, ggml_cuda_op_mul_mat_cublas
# and ggml_cuda_mul_mat_batched_cublas): F16 and, above MMQ_MAX_BATCH_SIZE tokens, quantised weights
# are converted to an FP16 copy (to_fp16_cuda) and multiplied by cublasGemmEx with
# CUBLAS_COMPUTE_16F; the attention products (KQ, KQV) too. Its 16-bit GEMMs and attention run at the
# GPU profile's ``compute.fp16_accumulate`` peak (GPU.fp16_accumulate_peak).
GEMM_ACCUMULATORS = ("fp32", "fp16")
SIXTEEN_BIT_MATH = ("fp16", "bf16")  # math keys the accumulator choice applies to
# Step tokens above which llama.cpp hands weight-only quantised GEMMs to that cuBLAS path instead of
# its own MMQ kernels (ggml-cuda.cu: ``#define MMQ_MAX_BATCH_SIZE 32``, "max batch size to use MMQ
# kernels when tensor cores are available"; ggml_cuda_mul_mat: use_mul_mat_q && !(fp16_performance_good
# && src1->ne[1] > MMQ_MAX_BATCH_SIZE)).
FP16_COPY_ABOVE_TOKENS = 32
# Decode attention efficiency (issue 16, "attention efficiency by kernel and context length"). Decode
# attention kernels (FlashDecoding / FlashInfer / TensorRT-LLM masked MHA) stream each sequence's
# cached K and V in long contiguous pages, at a higher fraction of HBM bandwidth than the weight
# GEMVs the profile's decode MBU describes, but pay a fixed cost per sequence (a thread block per
# sequence and KV head, the split-KV partial-softmax reduction) that dominates at short contexts:
# FlashInfer (Ye et al., MLSys 2025, arXiv:2501.01005, sec. 4 and Fig. 7-8) measures decode
# attention bandwidth utilisation rising with KV length, to ~80-90% of peak at a few thousand
# tokens, and low at short lengths. Modelled as
#     KV read time = (ctx + C) x KV bytes per token x sequences / (HBM bandwidth x eta_kv)
# (affine in the context, like the rest of a decode step). Both fitted on the train split of the
# published measurements (benchmarks/fit_attention.py; docs/validation.md "Issue 16").
DECODE_KV_STREAM_EFFICIENCY = 0.95  # eta_kv, a fraction of the HBM peak on every GPU
DECODE_ATTENTION_FIXED_TOKENS = 32.0  # C
# Weight components of a Precision, in the order the step costs sum them.
WEIGHT_COMPONENTS = ("attention", "mlp", "experts")
# The network a group of GPUs uses once it leaves its node (NVLink domain) when no link is given:
# InfiniBand NDR 400G, one ConnectX-7 port per GPU, the compute fabric of every HGX H100/H200/B200
# node profile in the catalog (hardware_profiles/nodes/*.toml) and of DeepSeek's H800 deployment
# (DeepEP docs/legacy.md: "CX7 InfiniBand 400 Gb/s RDMA network card" per GPU).
DEFAULT_SCALE_OUT_LINK = "ib-ndr-400"


@dataclass(frozen=True)
class Deployment:
    """One model instance: ``parallel`` (a :class:`~model.hardware.parallelism.Parallelism`, or a
    whole number meaning TP-only of that degree) over identical GPUs serving one copy of the weights.
    EP and attention-DP follow :mod:`model.physics.expert_parallel`; both need an MoE model, and EP
    must divide its routed experts plus ``redundant_experts`` (extra copies of the busiest experts
    that expert load balancing places, DeepSeek EPLB: 256 + 32 = 288 for DeepSeek-V3's EP144 / EP72
    deployments; they add expert weights to every GPU and leave the FLOPs per token unchanged).

    Formats: ``precision`` (a :class:`~model.hardware.formats.Precision`, per component) if given,
    else every weight in ``weight_dtype`` and the KV cache in ``kv_dtype`` (None -> the default of
    :func:`model.hardware.formats.default_kv_format`). Efficiencies None -> the GPU profile's
    defaults. ``tp_link`` None -> the GPU's NVLink/xGMI, or PCIe if it has none
    (:func:`model.hardware.collectives.default_tp_link`); ``pp_link`` None -> the same link as TP.
    ``scale_out_link``: the network any TP / EP / PP group uses once it leaves the instance's node
    (``parallel.nodes`` > 1); None -> DEFAULT_SCALE_OUT_LINK. A node profile whose one NVLink fabric
    spans a rack (GB200 NVL72) keeps every group of up to its GPUs on NVLink.
    ``micro_batch_overlap``: run each step as two micro-batches whose EP all-to-all overlaps the
    other's compute (:func:`model.physics.expert_parallel.overlapped_step_s`; SGLang
    ``--enable-two-batch-overlap``); None -> the engine profile's setting (``overheads``), else off.
    """

    arch: LLMArch
    gpu: GPU
    parallel: Parallelism | int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str | None = None
    prefill_mfu: float | None = None
    decode_mbu: float | None = None
    step_overhead_s: float | None = None
    tp_link: Link | None = None
    pp_link: Link | None = None
    precision: Precision | None = None
    speculation: Speculation | None = None  # speculative decoding (model.physics.speculation)
    scale_out_link: Link | None = None
    redundant_experts: int = 0
    overheads: Overheads | None = None  # the engine's (model.hardware.overheads); None: GPU profile only
    micro_batch_overlap: bool | None = None  # two-micro-batch overlap; None: the engine's (overheads)
    gemm_accumulate: str = "fp32"  # accumulator of 16-bit GEMMs, one of GEMM_ACCUMULATORS
    decode_kv_efficiency: float | None = None  # None: DECODE_KV_STREAM_EFFICIENCY
    decode_attention_fixed_tokens: float | None = None  # None: DECODE_ATTENTION_FIXED_TOKENS
    attention_kernel: str = "fused"  # or "materialised" (model.physics.materialised_attention)

    def __post_init__(self) -> None:
        if not isinstance(self.arch, LLMArch):
            raise InputError("model", self.arch, "an LLMArch (see model.llm.catalog.get_model)")
        if not isinstance(self.gpu, GPU):
            raise InputError("gpu", self.gpu, "a GPU profile (see model.hardware.catalog.get_gpu)")
        object.__setattr__(self, "parallel", as_parallelism("tp", self.parallel))
        self._check_moe_layout()
        check_tp(self.arch, self.tp)
        if self.arch.num_layers % self.pp:
            raise InputError("pp", self.pp, f"a divisor of {self.arch.label}'s {self.arch.num_layers} layers")
        if not isinstance(self.weight_dtype, str):
            raise InputError("dtype", self.weight_dtype, "a dtype name such as bf16 or fp8")
        if self.precision is not None and not isinstance(self.precision, Precision):
            raise InputError("precision", self.precision, "a Precision (model.hardware.formats) or None")
        prec = self.resolved_precision  # validates dtype / kv_dtype against the format table
        for component in self.weight_components:  # every weight format's math must run on this GPU
            check_gpu_runs(prec.format(component), dict(self.gpu.peak_flops_per_s), self.gpu.name, "dtype")
        check_kv_runs(prec.format("kv_cache"), dict(self.gpu.peak_flops_per_s), self.gpu.name)
        for name in ("prefill_mfu", "decode_mbu", "decode_kv_efficiency"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int | float) and 0 < value <= 1):
                raise InputError(name, value, "a fraction in (0, 1]")
        if self.step_overhead_s is not None and not (
            isinstance(self.step_overhead_s, int | float)
            and math.isfinite(self.step_overhead_s)
            and self.step_overhead_s >= 0
        ):
            raise InputError("step_overhead_s", self.step_overhead_s, "a time >= 0 s")
        if self.overheads is not None and not isinstance(self.overheads, Overheads):
            raise InputError("overheads", self.overheads, "an Overheads (model.hardware.overheads) or None")
        if self.micro_batch_overlap is not None and not isinstance(self.micro_batch_overlap, bool):
            raise InputError("micro_batch_overlap", self.micro_batch_overlap, "true, false or None")
        c = self.decode_attention_fixed_tokens
        if c is not None and not (isinstance(c, int | float) and math.isfinite(c) and 0 <= c <= 1e6):
            raise InputError("decode_attention_fixed_tokens", c, "a number of tokens in [0, 1e6]")
        if self.gemm_accumulate not in GEMM_ACCUMULATORS:
            raise InputError("gemm_accumulate", self.gemm_accumulate, " or ".join(GEMM_ACCUMULATORS))
        check_attention_kernel(self.attention_kernel)
        if self.speculation is not None and not isinstance(self.speculation, Speculation):
            raise InputError("speculation", self.speculation, "a Speculation (model.physics.speculation)")
        for name in ("tp_link", "pp_link", "scale_out_link"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Link):
                raise InputError(name, value, "a Link profile (see model.hardware.catalog.get_link) or None")

    def _check_moe_layout(self) -> None:
        """EP needs routed experts it divides; attention-DP needs MoE layers for its ranks to share
        (a dense model's DP ranks share nothing: that is replicas, which the planner counts)."""
        par, arch, extra = self.parallel, self.arch, self.redundant_experts
        if isinstance(extra, bool) or not isinstance(extra, int) or not 0 <= extra <= arch.num_experts:
            raise InputError("redundant_experts", extra, f"a whole number in [0, {arch.num_experts}]")
        if par.ep > 1 and not arch.is_moe:
            dense = f"1 for the dense model {arch.label} (no experts to split)"
            raise InputError("parallelism.ep", par.ep, dense)
        physical = arch.num_experts + extra
        if par.ep > 1 and physical % par.ep:
            plus = f" + {extra} redundant" if extra else ""
            raise InputError(
                "parallelism.ep",
                par.ep,
                f"a divisor of {arch.label}'s {arch.num_experts}{plus} routed experts",
            )
        if par.dp_attention > 1 and not arch.is_moe:
            raise InputError(
                "parallelism.dp_attention",
                par.dp_attention,
                f"1 for the dense model {arch.label} (attention-DP ranks share MoE layers; use replicas)",
            )

    # -- resolved settings --------------------------------------------------------------------
    @cached_property
    def resolved_precision(self) -> Precision:
        """``precision``, or the one built from ``weight_dtype`` and ``kv_dtype``."""
        if self.precision is not None:
            return self.precision
        return Precision.from_dtypes(self.weight_dtype, self.kv_dtype)

    @cached_property
    def weight_components(self) -> tuple[str, ...]:
        """The weight components this architecture has (no "experts" in a dense model)."""
        parts = weight_params_by_component(self.arch)
        return tuple(c for c in WEIGHT_COMPONENTS if parts[c] > 0)

    @property
    def tp(self) -> int:
        """Tensor-parallel degree (``parallel.tp``)."""
        return self.parallel.tp

    @property
    def pp(self) -> int:
        """Pipeline-parallel degree (``parallel.pp``)."""
        return self.parallel.pp

    @property
    def n_gpus(self) -> int:
        """GPUs of the instance: TP x attention-DP x PP (``parallel.gpus``)."""
        return self.parallel.gpus

    @property
    def dp(self) -> int:
        """Attention data-parallel ranks (``parallel.dp_attention``)."""
        return self.parallel.dp_attention

    @property
    def ep(self) -> int:
        """Expert-parallel degree (``parallel.ep``)."""
        return self.parallel.ep

    @property
    def stage_gpus(self) -> int:
        """GPUs of one pipeline stage, over which the routed experts split: TP x attention-DP."""
        return self.parallel.stage_gpus

    @property
    def kv_dtype_resolved(self) -> str:
        """The KV-cache format after defaults (the precision's ``kv_cache`` component)."""
        return self.resolved_precision.kv_cache

    @cached_property
    def activation_bytes(self) -> float:
        """Bytes per activation element between layers and on the TP all-reduce (16-bit)."""
        return self.resolved_precision.format("activations").bytes_per_element

    def weight_bytes_per_element(self, component: str) -> float:
        """Bytes per weight of ``component`` ("attention", "mlp", "experts"), block scales included."""
        return self._component_table[component][0]

    @cached_property
    def _component_table(self) -> dict[str, tuple[float, float]]:
        """component -> (bytes per weight, achieved large-batch GEMM FLOP/s), read once from the table."""
        prec, peaks = self.resolved_precision, self._peaks
        own = None if self.overheads is None else self.overheads.low_precision_gemm_ratio
        out = {}
        for c in WEIGHT_COMPONENTS:
            fmt = prec.format(c)
            ratio = LOW_PRECISION_MFU_RATIO.get(fmt.math, 1.0)
            ratio = own if own is not None and fmt.math in LOW_PRECISION_MFU_RATIO else ratio
            rate = peaks[fmt.math] * self.gemm_plateau_mfu * ratio if fmt.math in peaks else 0.0
            out[c] = (fmt.bytes_per_element, rate)
        return out

    @cached_property
    def _peaks(self) -> dict[str, float]:
        """The GPU's dense peaks per math key, 16-bit ones at the FP16-accumulate peak when
        ``gemm_accumulate`` is "fp16" (GEMM_ACCUMULATORS)."""
        peaks = dict(self.gpu.peak_flops_per_s)
        if self.gemm_accumulate == "fp16":
            fast = self.gpu.fp16_accumulate_peak()
            peaks.update({k: fast for k in SIXTEEN_BIT_MATH if k in peaks})
        return peaks

    @property
    def mfu(self) -> float:
        """Prefill model-FLOPs utilisation: the override, else the GPU profile's ``prefill_mfu``."""
        return self.gpu.prefill_mfu if self.prefill_mfu is None else float(self.prefill_mfu)

    @property
    def gemm_plateau_mfu(self) -> float:
        """MFU of large-M 16-bit GEMMs: :attr:`mfu` x LARGE_GEMM_MFU_FACTOR, at most 1."""
        return min(1.0, self.mfu * LARGE_GEMM_MFU_FACTOR)

    @property
    def mbu(self) -> float:
        """Decode memory-bandwidth utilisation: the override, else the GPU profile's ``decode_mbu``."""
        return self.gpu.decode_mbu if self.decode_mbu is None else float(self.decode_mbu)

    @property
    def decode_kv_bandwidth(self) -> float:
        """Bytes/s decode attention streams cached KV at: HBM bandwidth x ``decode_kv_efficiency``
        (None: DECODE_KV_STREAM_EFFICIENCY)."""
        eta = DECODE_KV_STREAM_EFFICIENCY if self.decode_kv_efficiency is None else self.decode_kv_efficiency
        return self.gpu.memory_bandwidth_bytes_per_s * float(eta)

    @property
    def attention_fixed_tokens(self) -> float:
        """Fixed cost of decode attention per sequence, in tokens of its KV: the
        ``decode_attention_fixed_tokens`` override, else DECODE_ATTENTION_FIXED_TOKENS."""
        c = self.decode_attention_fixed_tokens
        return float(DECODE_ATTENTION_FIXED_TOKENS if c is None else c)

    @property
    def overhead_s(self) -> float:
        """Fixed host-side time per step (s): the ``step_overhead_s`` override, else the engine
        overheads' ``step_s``, else the GPU profile's ``step_overhead``."""
        if self.step_overhead_s is not None:
            return float(self.step_overhead_s)
        return self.gpu.step_overhead_s if self.overheads is None else self.overheads.step_s

    @property
    def overlaps_micro_batches(self) -> bool:
        """Whether steps run two overlapped micro-batches: the ``micro_batch_overlap`` override, else
        the engine's (``overheads.micro_batch_overlap``), else False. It changes only steps with an
        EP all-to-all (model.physics.steps)."""
        if self.micro_batch_overlap is not None:
            return self.micro_batch_overlap
        return self.overheads is not None and self.overheads.micro_batch_overlap

    @cached_property
    def engine_overheads(self) -> Overheads:
        """The overheads every step pays (model.hardware.overheads): the engine's with ``step_s`` =
        :attr:`overhead_s`; without an engine only the GPU profile's step overhead and eager
        launches (no kernel floor, no per-sequence or per-request cost)."""
        base = self.overheads if self.overheads is not None else Overheads(step_s=self.overhead_s)
        return replace(base, step_s=self.overhead_s)

    def gemm_flops_per_s(self, component: str) -> float:
        """Achieved large-batch GEMM rate of ``component``'s weights: the peak of its format's math x
        MFU x LARGE_GEMM_MFU_FACTOR x LOW_PRECISION_MFU_RATIO (or the engine's
        ``overheads.low_precision_gemm_ratio``; 1 for 16-bit math, incl. weight-only formats)."""
        rate = self._component_table[component][1]
        if rate <= 0:  # a component the GPU cannot run (only possible for one the arch lacks)
            peaks = dict(self.gpu.peak_flops_per_s)
            check_gpu_runs(self.resolved_precision.format(component), peaks, self.gpu.name, "dtype")
        return rate

    @property
    def peak_flops_per_s(self) -> float:
        """Peak of the dense linear layers' math (the ``mlp`` component's format)."""
        fmt = self.resolved_precision.format("mlp")
        return check_gpu_runs(fmt, self._peaks, self.gpu.name, "dtype")

    @property
    def gemm_mfu(self) -> float:
        """MFU of the dense linear layers: the MFU, times LOW_PRECISION_MFU_RATIO for 8-/4-bit math."""
        return self.gemm_flops_per_s("mlp") / self.peak_flops_per_s

    @property
    def exposed_weight_fraction(self) -> float:
        """GEMM_EXPOSED_WEIGHT_FRACTION (read here so one module constant drives every step)."""
        return GEMM_EXPOSED_WEIGHT_FRACTION

    @property
    def gemm_ridge_tokens(self) -> float:
        """T_ridge: tokens per step at which a dense linear layer's FLOP time equals its weight-read time.

        2 T / (peak x MFU_gemm) = bytes per weight / (HBM bandwidth x MBU) per weight element, so
        T_ridge = peak x MFU_gemm x bytes per weight / (2 x bandwidth x MBU) (the roofline ridge
        point, Williams et al. 2009, in tokens; A100 bf16: 312e12 x 0.6 x 2 / (2 x 2.04e12 x 0.8)
        = 115; int4 group-128 weights, 0.52 B each on the bf16 peak, about a quarter of it).
        """
        wb = self.weight_bytes_per_element("mlp")
        return self.gemm_flops_per_s("mlp") * wb / (2.0 * self.gpu.memory_bandwidth_bytes_per_s * self.mbu)

    @property
    def gemm_half_efficiency_tokens(self) -> float:
        """T_half = GEMM_EXPOSED_WEIGHT_FRACTION x T_ridge: step tokens at which the linear layers
        reach half their large-batch MFU (see :func:`model.physics.steps.gemm_mfu_at`)."""
        return self.exposed_weight_fraction * self.gemm_ridge_tokens

    @cached_property
    def attention_peak_flops_per_s(self) -> float:
        """Peak of the 16-bit path attention runs on: the activation format's (bf16), else fp16,
        else the dense layers' peak."""
        table = self._peaks
        act = get_format(self.resolved_precision.activations).math
        return table.get(act) or table.get("fp16") or self.peak_flops_per_s

    @cached_property
    def intra_link(self) -> Link:
        """The link inside the node (NVLink domain): ``tp_link``, else the GPU's default
        (collectives.default_tp_link)."""
        return self.tp_link if self.tp_link is not None else default_tp_link(self.gpu, self.parallel)

    @cached_property
    def scale_out_link_resolved(self) -> Link:
        """The network between the instance's nodes: ``scale_out_link``, else DEFAULT_SCALE_OUT_LINK."""
        return self.scale_out_link if self.scale_out_link is not None else get_link(DEFAULT_SCALE_OUT_LINK)

    @property
    def domain_gpus(self) -> int:
        """GPUs of the instance that share one node's NVLink fabric (``parallel.gpus_per_node``)."""
        return self.parallel.gpus_per_node

    def group_link(self, group_gpus: int) -> Link:
        """The link a collective over ``group_gpus`` consecutive ranks runs at: the intra-node link
        when the group fits in the node's share of the instance, else the scale-out network (a ring
        crossing nodes runs at its slowest hop)."""
        return self.intra_link if group_gpus <= self.domain_gpus else self.scale_out_link_resolved

    @cached_property
    def tp_link_resolved(self) -> Link:
        """The link TP all-reduces use: ``tp_link``, else :meth:`group_link` of the TP group."""
        return self.tp_link if self.tp_link is not None else self.group_link(self.tp)

    @property
    def pp_link_resolved(self) -> Link:
        """The link pipeline stages pass activations over: ``pp_link``, else the scale-out network
        when the instance spans nodes (stage boundaries cross them), else the TP link."""
        if self.pp_link is not None:
            return self.pp_link
        return self.scale_out_link_resolved if self.parallel.nodes > 1 else self.tp_link_resolved

    @cached_property
    def weight_bytes_by_component(self) -> dict[str, float]:
        """Bytes of all weights per component in its format (block scales included)."""
        parts = weight_params_by_component(self.arch)
        return {c: n * self.resolved_precision.format(c).bytes_per_element for c, n in parts.items()}

    @property
    def weight_bytes_per_gpu(self) -> float:
        """Bytes of weights each GPU holds: (attention + MLP) / (TP x PP), replicated on every
        attention-DP rank, + routed experts / (TP x DP x PP), split over the stage's GPUs (EP
        groups, each expert sharded when EP < TP x DP; x (E + redundant) / E with redundant expert
        copies). TP-only: all weights / (TP x PP). Plus the
        speculative drafter's (model.physics.speculation.draft_memory) in the MLP weights' format,
        split over TP x PP and replicated on every attention-DP rank."""
        w = self.weight_bytes_by_component
        experts = w["experts"] * self.physical_experts / self.arch.num_experts if self.arch.is_moe else 0.0
        per_pp = (w["attention"] + w["mlp"]) / self.tp + experts / self.stage_gpus
        drafter = self._drafter[0] * self.weight_bytes_per_element("mlp") / self.tp
        return (per_pp + drafter) / self.pp

    @property
    def physical_experts(self) -> int:
        """Routed experts held over the EP group: the model's plus the redundant copies."""
        return self.arch.num_experts + self.redundant_experts

    @cached_property
    def _drafter(self) -> tuple[float, float]:
        if self.speculation is None:
            return 0.0, 0.0
        return draft_memory(self.speculation, self.arch, self.kv_dtype_resolved)

    @property
    def drafter_kv_bytes_per_token_per_gpu(self) -> float:
        """KV bytes per token the speculative drafter adds on each GPU (its heads split over TP)."""
        return self._drafter[1] / self.tp

    @property
    def kv_bytes_per_token(self) -> float:
        """KV bytes one token adds to the whole instance (all layers, all heads)."""
        return kv_bytes_per_token(self.arch, self.kv_dtype_resolved)

    @cached_property
    def kv_bytes_per_token_per_gpu(self) -> float:
        """KV bytes per token on each GPU: TP splits heads (replicated below n_kv), PP splits layers."""
        return float(kv_bytes_per_token_per_gpu(self.arch, self.kv_dtype_resolved, self.tp)) / self.pp
