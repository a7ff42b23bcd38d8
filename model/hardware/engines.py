"""Engine profiles: the serving engine's batching caps, per-step overhead and KV-transfer support,
read from ``hardware_profiles/engines/*.toml`` (vLLM, SGLang, TensorRT-LLM; schema in docs/profiles.md).

One profile is read by both the planner (model.serving.phase_tables) and the simulator
(model.sim.simulate), so a cap lives in one place (DESIGN.md, extension points). Every value carries
its source: the engine's documentation or code defaults for the named version, or an explicit
``assumption: ...`` with the reasoning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from model.errors import InputError
from model.hardware.gpus import GPU
from model.hardware.overheads import KERNEL_LAUNCH_S, Overheads
from model.hardware.schema import (
    INT,
    LIST,
    NAMES,
    NUMBER,
    QUANTITY,
    QUANTITY0,
    TEXT,
    Schema,
    Sources,
    read_toml,
    source_of,
    validate,
    wrap,
)
from model.units import Kind

# The engine plans and simulations use unless told otherwise.
DEFAULT_ENGINE = "vllm"

# How an engine forms a prefill batch without chunking. "fcfs-token-cap": queued prompts join the
# batch first-come-first-served while their prompt tokens fit in ``prefill_token_cap`` and the
# running sequences stay within ``max_num_seqs``; a longer prompt runs alone (model.sim.colocated,
# model.sim.disaggregated). Further policies (e.g. shortest-first) join this tuple.
PREFILL_POLICIES = ("fcfs-token-cap",)
# How KV cache can leave a prefill instance: per layer while the prefill runs, or after it.
KV_TRANSFER_MODES = ("layerwise", "whole-request")
# How an engine runs decode steps: replayed CUDA/HIP graphs, or kernels launched one by one.
DECODE_LAUNCHES = ("cuda-graphs", "eager")
# Whether an engine overlaps the MoE all-to-all of expert parallelism with compute by default:
# "none", or "two-micro-batch" (each step split in two micro-batches, one's dispatch / combine beside
# the other's compute: SGLang --enable-two-batch-overlap, vLLM --enable-dbo;
# model.physics.expert_parallel.overlapped_step_s).
EP_OVERLAPS = ("none", "two-micro-batch")
# How requests are spread over R colocated replicas (docs/queueing.md, "Routing"; the planner's prefill
# queue follows it, model.queueing.routing, and the simulator routes the same way, model.sim.colocated):
# "round-robin": the i-th request to replica i mod R; "random": uniformly at random; "least-loaded":
# the replica with the smallest waiting_weight x (requests waiting) + (requests running, prefill
# included); "least-kv": the fewest KV tokens reserved or waiting; "shared-queue": one FCFS queue that
# every replica takes its next prompts from; "cache-aware": the longest cached prefix, least-loaded
# without one (model.workload.prefix.route).
ROUTERS = ("round-robin", "random", "least-loaded", "least-kv", "shared-queue", "cache-aware")
# What an engine does when its KV cache runs out (docs/model.md, "KV offload tiers"): "none" admits a
# request only when its whole KV (prompt + output) fits, so nothing is ever pre-empted (TensorRT-LLM's
# GUARANTEED_NO_EVICT); "recompute" admits while the prompt fits, allocates KV as tokens appear and,
# out of KV, pre-empts the most recently admitted running request, which later re-prefills its prompt
# and generated tokens (vLLM V1); "swap" pre-empts the same request but copies its KV to the CPU
# tier and back (vLLM V0's swap mode; needs a cpu KV offload tier). model.sim.colocated,
# model.queueing.preemption.
PREEMPTIONS = ("none", "recompute", "swap")

# Plausible ranges (units in the names) that catch slips such as a cap of 0 or 10^9 sequences.
_SEQS_RANGE = (1, 1 << 20)  # sequences per instance
_TOKENS_RANGE = (16, 1 << 22)  # tokens per iteration (the planner accepts chunks of 16 .. 65536)
_STEP_EXTRA_RANGE_S = (0.0, 1.0)  # seconds added to every engine iteration
_WAITING_WEIGHT_RANGE = (0.0, 1000.0)  # weight of a waiting request in the least-loaded score


@dataclass(frozen=True)
class Router:
    """How requests reach one of R colocated replicas: ``policy`` (one of ROUTERS) and, for
    "least-loaded" and its fallback under "cache-aware", the weight of a waiting request against a
    running one in the load score (vLLM's data-parallel balancer: 4; a plain count: 1)."""

    policy: str = "least-loaded"
    waiting_weight: float = 1.0

    def __post_init__(self) -> None:
        if self.policy not in ROUTERS:
            raise InputError("router.policy", self.policy, f"one of {ROUTERS}")
        low, high = _WAITING_WEIGHT_RANGE
        w = self.waiting_weight
        if isinstance(w, bool) or not (isinstance(w, int | float) and math.isfinite(w) and low <= w <= high):
            raise InputError("router.waiting_weight", w, f"a number in [{low:g}, {high:g}]")

    def describe(self) -> str:
        """The rule in words, e.g. "least-loaded (the fewest 4 x waiting + running requests)"."""
        if self.policy in ("least-loaded", "cache-aware"):
            w = f"{self.waiting_weight:g} x " if self.waiting_weight != 1 else ""
            rule = f"the fewest {w}waiting + running requests"
            return f"{self.policy} ({rule})" if self.policy == "least-loaded" else f"cache-aware, else {rule}"
        return self.policy


@dataclass(frozen=True)
class Engine:
    """One serving engine's behaviour. ``sources`` maps each TOML field to its citation.

    ``max_num_seqs``: sequences in one instance's running batch (vLLM ``--max-num-seqs``, SGLang
    ``--max-running-requests``, TensorRT-LLM ``max_batch_size``); the KV cache may cap lower.
    ``small_gpu_max_num_seqs``: the engine's default on smaller GPUs instead (vLLM picks 256 below
    70 GiB and on A100s): GPUs whose memory is below ``small_gpu_memory_bytes`` or whose name contains
    one of ``small_gpu_names`` (:meth:`max_num_seqs_on`).
    ``prefill_token_cap``: prompt tokens per prefill iteration without chunking.
    ``decode_batched_tokens``: tokens per iteration a decode-only instance reserves activation
    memory for. ``chunk_tokens``: default chunked-prefill token budget per iteration.
    ``step_overhead_extra_s``: added to the GPU profile's ``efficiency.step_overhead``, which is
    measured with vLLM (the reference engine), so vLLM's is 0. ``kernel_s``, ``launch_s``,
    ``decode_launch``, ``per_sequence_s``, ``request_s``: the overheads of
    :mod:`model.hardware.overheads` (:meth:`overheads`). ``ep_overlap``: one of EP_OVERLAPS, the
    engine's default for overlapping the EP all-to-all with compute. ``low_precision_gemm_ratio``:
    its 8-/4-bit GEMM kernels' efficiency ratio (None: LOW_PRECISION_MFU_RATIO), passed on in the overheads.
    ``router``: how requests are spread over R replicas (:class:`Router`), read by the planner's prefill
    queue (model.queueing.routing) and the simulator (model.sim.colocated).
    ``preemption``: one of PREEMPTIONS, what the engine does when its KV cache runs out.
    """

    name: str
    full_name: str
    version: str
    max_num_seqs: int
    prefill_policy: str
    prefill_token_cap: int
    decode_batched_tokens: int
    chunk_tokens: int
    step_overhead_extra_s: float = 0.0
    kernel_s: float = 0.0
    launch_s: float = KERNEL_LAUNCH_S
    decode_launch: str = "cuda-graphs"
    per_sequence_s: float = 0.0
    request_s: float = 0.0
    ep_overlap: str = "none"
    low_precision_gemm_ratio: float | None = None
    router: Router = Router()
    preemption: str = "none"
    kv_transfer_modes: tuple[str, ...] = KV_TRANSFER_MODES
    small_gpu_max_num_seqs: int | None = None
    small_gpu_memory_bytes: float = 0.0
    small_gpu_names: tuple[str, ...] = ()
    kv_connectors: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    sources: Sources = field(default=(), compare=False, repr=False)
    path: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = f"engine {self.name}"
        _whole_in(owner, "max_num_seqs", self.max_num_seqs, _SEQS_RANGE, "sequences")
        if self.small_gpu_max_num_seqs is not None:
            _whole_in(owner, "small_gpu_max_num_seqs", self.small_gpu_max_num_seqs, _SEQS_RANGE, "sequences")
        for name in ("prefill_token_cap", "decode_batched_tokens", "chunk_tokens"):
            _whole_in(owner, name, getattr(self, name), _TOKENS_RANGE, "tokens")
        low, high = _STEP_EXTRA_RANGE_S
        x = self.step_overhead_extra_s
        if not (isinstance(x, int | float) and math.isfinite(x) and low <= x <= high):
            raise InputError(f"{owner}.step_overhead_extra_s", x, f"a time in [{low:g}, {high:g}] s")
        if self.decode_launch not in DECODE_LAUNCHES:
            raise InputError(f"{owner}.decode_launch", self.decode_launch, f"one of {DECODE_LAUNCHES}")
        if not isinstance(self.router, Router):
            raise InputError(f"{owner}.router", self.router, "a Router")
        if self.preemption not in PREEMPTIONS:
            raise InputError(f"{owner}.preemption", self.preemption, f"one of {PREEMPTIONS}")
        if self.ep_overlap not in EP_OVERLAPS:
            raise InputError(f"{owner}.ep_overlap", self.ep_overlap, f"one of {EP_OVERLAPS}")
        self.overheads(None)  # InputError naming the field for an implausible overhead
        if self.prefill_policy not in PREFILL_POLICIES:
            raise InputError(f"{owner}.prefill_policy", self.prefill_policy, f"one of {PREFILL_POLICIES}")
        bad = [m for m in self.kv_transfer_modes if m not in KV_TRANSFER_MODES]
        if bad or not self.kv_transfer_modes:
            allowed = f"a non-empty subset of {KV_TRANSFER_MODES}"
            raise InputError(f"{owner}.kv_transfer_modes", self.kv_transfer_modes, allowed)

    def max_num_seqs_on(self, gpu: GPU | None) -> int:
        """Running sequences per instance on ``gpu``: ``small_gpu_max_num_seqs`` on a GPU with less memory
        than ``small_gpu_memory_bytes`` or a name containing one of ``small_gpu_names`` (vLLM's
        get_batch_defaults: device memory >= 70 GiB and "a100" not in the device name -> 1024, else
        256), ``max_num_seqs`` otherwise (and when ``gpu`` is None). The planner's decode batch
        (model.serving.phase_tables) and the simulator's instances (model.sim.simulate) both read it."""
        if self.small_gpu_max_num_seqs is None or gpu is None:
            return self.max_num_seqs
        names = (gpu.name.lower(), gpu.full_name.lower())
        small = gpu.memory_bytes < self.small_gpu_memory_bytes or any(
            key in name for key in self.small_gpu_names for name in names
        )
        return self.small_gpu_max_num_seqs if small else self.max_num_seqs

    def step_overhead_s(self, gpu: GPU) -> float:
        """Fixed time of one engine iteration on ``gpu``: the GPU profile's measured per-step
        overhead (host scheduling, sampling, graph launch under vLLM) plus this engine's difference."""
        return gpu.step_overhead_s + self.step_overhead_extra_s

    def overheads(self, gpu: GPU | None) -> Overheads:
        """The engine's overheads on ``gpu`` (:mod:`model.hardware.overheads`): step time
        :meth:`step_overhead_s`, and the profile's per-kernel, per-sequence and per-request costs
        (``gpu`` None: the step time is the engine's extra alone, for checks)."""
        step = self.step_overhead_extra_s if gpu is None else self.step_overhead_s(gpu)
        return Overheads(
            step_s=step,
            kernel_s=self.kernel_s,
            launch_s=self.launch_s,
            decode_graphs=self.decode_launch == "cuda-graphs",
            per_sequence_s=self.per_sequence_s,
            request_s=self.request_s,
            micro_batch_overlap=self.ep_overlap == "two-micro-batch",
            low_precision_gemm_ratio=self.low_precision_gemm_ratio,
        )

    def supports_transfer(self, layerwise: bool) -> bool:
        """Whether the engine can send KV layer by layer (``layerwise``) or after the prefill."""
        return ("layerwise" if layerwise else "whole-request") in self.kv_transfer_modes

    def source(self, field_name: str) -> str:
        """The citation recorded for ``field_name`` (e.g. ``"batching.max_num_seqs"``)."""
        return source_of(self.sources, field_name)


def _whole_in(owner: str, name: str, value: object, bounds: tuple[int, int], unit: str) -> None:
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputError(f"{owner}.{name}", value, f"a whole number of {unit} in [{low}, {high}]")


# TOML schema: (section, key) -> (type, unit kind, required). Every key in a table needs a source.
_ENGINE_SCHEMA: Schema = {
    ("", "schema"): (INT, None, True),
    ("", "name"): (TEXT, None, True),
    ("", "full_name"): (TEXT, None, True),
    ("", "version"): (TEXT, None, True),
    ("", "aliases"): (LIST, None, False),
    ("batching", "max_num_seqs"): (INT, None, True),
    ("batching", "small_gpu_max_num_seqs"): (INT, None, False),
    ("batching", "small_gpu_below"): (QUANTITY, Kind.BYTES, False),
    ("batching", "small_gpu_names"): (LIST, None, False),
    ("batching", "prefill_policy"): (TEXT, None, True),
    ("batching", "prefill_token_cap"): (INT, None, True),
    ("batching", "decode_batched_tokens"): (INT, None, True),
    ("batching", "chunk_tokens"): (INT, None, True),
    ("overheads", "step_extra"): (QUANTITY0, Kind.TIME, True),
    ("overheads", "kernel"): (QUANTITY0, Kind.TIME, False),
    ("overheads", "eager_launch"): (QUANTITY0, Kind.TIME, False),
    ("overheads", "decode_launch"): (TEXT, None, False),
    ("overheads", "per_sequence"): (QUANTITY0, Kind.TIME, False),
    ("overheads", "request"): (QUANTITY0, Kind.TIME, False),
    ("overheads", "ep_overlap"): (TEXT, None, False),
    ("gemm", "low_precision_ratio"): (NUMBER, None, False),
    ("routing", "router"): (TEXT, None, False),
    ("routing", "waiting_weight"): (INT, None, False),
    ("scheduler", "preemption"): (TEXT, None, False),
    ("kv_transfer", "modes"): (LIST, None, True),
    ("kv_transfer", "connectors"): (NAMES, None, False),
}


def engine_from_toml(path: Path, text: str | None = None) -> Engine:
    """Read and validate one engine profile file."""
    v, sources = validate(path, read_toml(path, text), _ENGINE_SCHEMA, sourced_sections=True)
    return wrap(
        path,
        lambda: Engine(
            name=v["name"],
            full_name=v["full_name"],
            version=v["version"],
            max_num_seqs=v["batching.max_num_seqs"],
            prefill_policy=v["batching.prefill_policy"],
            prefill_token_cap=v["batching.prefill_token_cap"],
            decode_batched_tokens=v["batching.decode_batched_tokens"],
            chunk_tokens=v["batching.chunk_tokens"],
            step_overhead_extra_s=v["overheads.step_extra"],
            kernel_s=v.get("overheads.kernel", 0.0),
            launch_s=v.get("overheads.eager_launch", KERNEL_LAUNCH_S),
            decode_launch=v.get("overheads.decode_launch", "cuda-graphs"),
            per_sequence_s=v.get("overheads.per_sequence", 0.0),
            request_s=v.get("overheads.request", 0.0),
            ep_overlap=v.get("overheads.ep_overlap", "none"),
            low_precision_gemm_ratio=v.get("gemm.low_precision_ratio"),
            router=_router(v),
            preemption=v.get("scheduler.preemption", "none"),
            kv_transfer_modes=v["kv_transfer.modes"],
            kv_connectors=v.get("kv_transfer.connectors", ()),
            small_gpu_max_num_seqs=v.get("batching.small_gpu_max_num_seqs"),
            small_gpu_memory_bytes=v.get("batching.small_gpu_below", 0.0),
            small_gpu_names=v.get("batching.small_gpu_names", ()),
            aliases=v.get("aliases", ()),
            sources=sources,
            path=str(path),
        ),
    )


def _router(v: dict) -> Router:
    """The profile's [routing] table (default: least-loaded with a plain request count), with a
    one-line error naming the field for a bad value."""
    policy = v.get("routing.router", "least-loaded")
    if policy not in ROUTERS:
        raise InputError("engine.routing.router", policy, f"one of {ROUTERS}")
    weight = v.get("routing.waiting_weight", 1)
    low, high = _WAITING_WEIGHT_RANGE
    if not low <= weight <= high:
        raise InputError("engine.routing.waiting_weight", weight, f"a whole number in [{low:g}, {high:g}]")
    return Router(policy, float(weight))


def with_preemption(engine: Engine, policy: str | None) -> Engine:
    """``engine`` with its pre-emption policy replaced by ``policy`` (None: unchanged); one clear
    error naming ``preemption`` for a policy outside PREEMPTIONS."""
    if policy is None:
        return engine
    if policy not in PREEMPTIONS:
        raise InputError("preemption", policy, f"one of {PREEMPTIONS}")
    return replace(engine, preemption=policy)


def check_swap_tier(policy: str, offload: object) -> None:
    """Pre-emption ``policy`` "swap" needs a cpu KV offload tier in ``offload`` (a KVOffload or None)
    to swap to: one clear error naming the field."""
    tiers = getattr(offload, "tiers", ())
    if policy == "swap" and not any(t.kind == "cpu" for t in tiers):
        raise InputError(
            "preemption", "swap", "a cpu KV offload tier to swap to (kv_offload / --kv-offload 'cpu:SIZE')"
        )


def parse_preemption(text: str, field: str = "preemption") -> str | None:
    """A pre-emption policy typed by a person (app field, scenario file): blank -> None (the engine's),
    else one of PREEMPTIONS (case and spaces ignored); one clear error naming ``field`` otherwise."""
    if not isinstance(text, str):
        raise InputError(field, text, f"one of {', '.join(PREEMPTIONS)}, or blank for the engine's")
    t = text.strip().lower()
    if not t:
        return None
    if t not in PREEMPTIONS:
        raise InputError(
            field, text.strip()[:40], f"one of {', '.join(PREEMPTIONS)}, or blank for the engine's"
        )
    return t
