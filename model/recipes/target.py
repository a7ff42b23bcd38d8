"""What a recipe deploys, read off a plan: the pools of one configuration, the engine caps the plan
assumed, the model's checkpoint and the placement on nodes.

The recipe sets the caps the plan modelled (the plan's engine profile, model.hardware.engines), so
the deployment behaves like the configuration that was planned: ``max_num_seqs``; the chunk of a
chunked-prefill configuration as the per-step token budget; the unchunked prefill cap
``prefill_token_cap`` (raised to the longest request, which an unchunked engine needs to admit it);
``decode_batched_tokens`` on decode instances.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from model.errors import InputError
from model.hardware.engines import DEFAULT_ENGINE
from model.hardware.kv_offload import KVOffload
from model.hardware.parallelism import Parallelism
from model.planner.types import BestConfig, Plan
from model.recipes.placement import Placement, place
from model.serving.configs import ColocatedConfig, DisaggregatedConfig

MODEL_LEN_STEP = 256
"""--max-model-len is the longest request of the workload sample rounded up to this many tokens."""

MAX_MODEL_PATH_CHARS = 512
"""Longest --model-path accepted (a path or a repository id; longer is a slip)."""

_HF = re.compile(r"https://huggingface\.co/([^/\s]+/[^/\s]+)")


@dataclass(frozen=True)
class Pool:
    """``count`` instances of layout ``parallel`` on ``gpu`` GPUs doing ``role`` ("replica": both
    phases; "prefill"; "decode"), with the engine caps the plan assumed."""

    role: str
    count: int
    parallel: Parallelism
    gpu: str
    max_num_seqs: int
    max_batched_tokens: int
    chunked: bool


@dataclass(frozen=True)
class Target:
    """One configuration to deploy: ``name`` is "recommended" or the style's registry name."""

    name: str
    style: str
    label: str
    model_path: str
    model_note: str
    weight_dtype: str
    kv_dtype: str
    max_model_len: int
    gpu_memory_utilization: float
    weight_bytes: float
    pools: tuple[Pool, ...]
    placement: Placement
    link: str
    link_kind: str
    kv_offload: KVOffload | None = None  # the plan's KV offload tiers (model.hardware.kv_offload)
    router: str = ""  # the request router the plan assumed over replicas (Router.describe)

    @property
    def disaggregated(self) -> bool:
        """True when the configuration has separate prefill and decode pools."""
        return any(p.role == "prefill" for p in self.pools)

    def pool(self, role: str) -> Pool:
        """The pool doing ``role``."""
        return next(p for p in self.pools if p.role == role)

    def offload_bytes(self, pool: Pool) -> dict[str, float]:
        """Bytes of each KV offload tier (``cpu``, ``nvme``, ``remote``) one instance of ``pool`` uses,
        as the plan modelled it (:meth:`model.hardware.kv_offload.KVTier.instance_bytes`: a cpu/nvme
        tier is the node's, shared by its GPUs, so an instance of g GPUs uses g / GPUs-per-node of
        it; a remote store is shared whole). Empty without tiers and on decode pools: the plan
        keeps reused prefixes where prompts are prefilled (model.physics.kv_tiers)."""
        off = self.kv_offload
        if off is None or pool.role == "decode":
            return {}
        return {t.kind: t.instance_bytes(pool.parallel.gpus, off.gpus_per_node) for t in off.tiers}


def model_path(plan: Plan, override: str | None = None) -> tuple[str, str]:
    """The checkpoint to serve and a note on where it came from: ``override``, else the Hugging Face
    repository of the catalog entry's config.json source, else the catalog name (to be replaced)."""
    arch = plan.inputs.scenario.arch
    if override is not None:
        ok = isinstance(override, str) and 0 < len(override) <= MAX_MODEL_PATH_CHARS
        if not ok or not override.isprintable() or any(c.isspace() for c in override):
            allowed = f"a repository id or a path: printable, no spaces, <= {MAX_MODEL_PATH_CHARS} characters"
            raise InputError("model_path", override, allowed)
        return override, "given"
    m = _HF.match(arch.source or "")
    if m:
        return m.group(1), f"from the catalog entry's source {arch.source}"
    return arch.name, f"the catalog name {arch.name!r}: replace it with the checkpoint's repository or path"


def _max_model_len(plan: Plan) -> int:
    scn = plan.inputs.scenario
    longest = float(np.max(scn.prompt_tokens + scn.output_tokens))
    n = int(math.ceil(longest / MODEL_LEN_STEP) * MODEL_LEN_STEP)
    cap = scn.arch.max_context_tokens
    return min(n, cap) if cap > 0 else n


def _pools(plan: Plan, config: object, max_len: int) -> tuple[Pool, ...] | None:
    eng = plan.inputs.scenario.engine
    if eng is None:  # resolved by the Scenario; kept for a hand-built plan
        from model.hardware.catalog import load_catalog

        eng = load_catalog().engine(DEFAULT_ENGINE)
    seqs = eng.max_num_seqs_on  # the engine's running-sequence cap on each pool's GPU
    unchunked = max(eng.prefill_token_cap, max_len)
    if isinstance(config, ColocatedConfig):
        chunk = config.chunk_tokens
        tokens = chunk if chunk is not None else unchunked
        gpu, cap = config.gpu.name, seqs(config.gpu)
        return (Pool("replica", config.replicas, config.parallel, gpu, cap, tokens, chunk is not None),)
    if isinstance(config, DisaggregatedConfig):
        return (
            Pool(
                "prefill",
                config.n_prefill,
                config.prefill_parallel,
                config.prefill_gpu.name,
                seqs(config.prefill_gpu),
                unchunked,
                False,
            ),
            Pool(
                "decode",
                config.n_decode,
                config.decode_parallel,
                config.decode_gpu.name,
                seqs(config.decode_gpu),
                eng.decode_batched_tokens,
                True,
            ),
        )
    return None


def target(plan: Plan, name: str, best: BestConfig, path: tuple[str, str]) -> Target | None:
    """The Target of one best configuration (None for a style with no recipe support yet)."""
    max_len = _max_model_len(plan)
    pools = _pools(plan, best.config, max_len)
    if pools is None:
        return None
    scn = plan.inputs.scenario
    placement = place(tuple((p.role, p.count, p.parallel) for p in pools), plan.inputs.node)
    ev = best.at_goodput
    link = best.config.link if isinstance(best.config, DisaggregatedConfig) else plan.inputs.link
    per_copy = ev.weight_bytes_total / ev.weight_copies if ev.weight_copies else 0.0
    return Target(
        name=name,
        style=best.style,
        label=best.label,
        model_path=path[0],
        model_note=path[1],
        weight_dtype=scn.weight_dtype,
        kv_dtype=scn.kv_dtype_resolved,
        max_model_len=max_len,
        gpu_memory_utilization=scn.gpu_memory_utilization,
        weight_bytes=per_copy,
        pools=pools,
        placement=placement,
        link=link.name,
        link_kind=link.kind,
        kv_offload=scn.kv_offload,
        router=scn.engine.router.describe() if scn.engine is not None else "",
    )


def targets(plan: Plan, override_model_path: str | None = None) -> tuple[Target, ...]:
    """The recommended configuration (the verdict's style) first, then each style's best."""
    if not isinstance(plan, Plan):
        raise InputError("plan", type(plan).__name__, "a Plan (from model.plan)")
    path = model_path(plan, override_model_path)
    out = []
    if plan.verdict in plan.best:
        out.append(target(plan, "recommended", plan.best[plan.verdict], path))
    out += [target(plan, style, best, path) for style, best in plan.best.items()]
    return tuple(t for t in out if t is not None)
