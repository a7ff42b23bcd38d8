"""A planning scenario: model, dtypes, workload and SLOs, plus the request sample the analytical
model integrates over.

The analytical model needs distributions of per-request quantities (prefill time, KV bytes,
TPOT). It evaluates them on a fixed, seeded sample of (prompt, output) pairs drawn from the
workload, so every result is deterministic and every percentile is an average over that sample.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from model.errors import InputError
from model.hardware.catalog import get_engine
from model.hardware.engines import Engine
from model.hardware.formats import Precision
from model.hardware.kv_offload import KVOffload
from model.llm.arch import LLMArch, kv_bytes_per_token
from model.llm.attention import kv_bytes_per_request
from model.llm.catalog import get_model
from model.physics.speculation import Speculation
from model.workload.presets import Workload, get_workload
from model.workload.sessions import (
    cached_implied_hit_rates,
    history_split_cached_tokens,
    history_split_missed,
)
from model.workload.slo import SLO

DEFAULT_SAMPLES = 384


def cached_prompt_tokens(prompt_tokens: np.ndarray, hit_rate: float) -> np.ndarray:
    """Prompt tokens already in a prefix cache: floor(hit rate x prompt), whole tokens, and at least
    the last prompt token is always computed (engines recompute it to produce the first logits).
    The one place this rule lives (the scenario's sample and the planner's chunked tables use it)."""
    p = np.asarray(prompt_tokens, dtype=float)
    return np.minimum(np.floor(p * hit_rate), p - 1.0)


@dataclass(frozen=True, eq=False)
class Scenario:
    """What is served and what "good" means: model, dtypes, workload, SLOs, and the serving engine
    whose caps and overheads both the planner and the simulator apply (None: the default, vLLM)."""

    arch: LLMArch
    workload: Workload
    slo: SLO
    weight_dtype: str = "bf16"
    kv_dtype: str | None = None
    samples: int = DEFAULT_SAMPLES
    seed: int = 0
    gpu_memory_utilization: float = 0.9
    prompt_scale: float = 1.0  # multiplies every sampled prompt length (what-if studies, flip thresholds)
    arrival_scv: float = 1.0  # squared CV of inter-arrival gaps: 1 = Poisson, > 1 bursty (e.g. from a trace)
    engine: Engine | None = None  # resolved to the default engine profile when None
    speculation: Speculation | None = None  # speculative decoding of every deployment (None: off)
    kv_offload: KVOffload | None = None  # KV offload tiers and prefix working set (model.physics.kv_tiers)

    def __post_init__(self) -> None:
        if self.engine is None:
            object.__setattr__(self, "engine", get_engine())
        elif not isinstance(self.engine, Engine):
            raise InputError("engine", self.engine, "an Engine profile (model.get_engine(name))")
        Precision.from_dtypes(self.weight_dtype, self.kv_dtype)  # format-table check of both
        if self.speculation is not None and not isinstance(self.speculation, Speculation):
            raise InputError("speculation", self.speculation, "a Speculation (model.Speculation) or None")
        if self.kv_offload is not None and not isinstance(self.kv_offload, KVOffload):
            raise InputError("kv_offload", self.kv_offload, "a KVOffload (model.parse_kv_offload) or None")
        if isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral) or self.seed < 0:
            raise InputError("seed", self.seed, "a whole number >= 0")
        if not isinstance(self.arch, LLMArch):
            raise InputError("model", self.arch, "an LLMArch (model.get_model(name))")
        if not isinstance(self.workload, Workload):
            raise InputError("workload", self.workload, "a Workload (model.get_workload(name))")
        if not isinstance(self.slo, SLO):
            raise InputError("slo", self.slo, "an SLO(ttft_s, tpot_s, ...)")
        if not (isinstance(self.samples, int) and 16 <= self.samples <= 100_000):
            raise InputError("samples", self.samples, "a whole number in [16, 100000]")
        if not (isinstance(self.arrival_scv, int | float) and 0 < self.arrival_scv <= 1e4):
            raise InputError(
                "arrival_scv", self.arrival_scv, "a squared coefficient of variation in (0, 10000]"
            )
        if not (isinstance(self.prompt_scale, int | float) and 0 < self.prompt_scale <= 1000):
            raise InputError("prompt_scale", self.prompt_scale, "a factor in (0, 1000]")
        if not (0.1 <= self.gpu_memory_utilization <= 1.0):
            raise InputError("gpu_memory_utilization", self.gpu_memory_utilization, "a fraction in [0.1, 1]")

    @classmethod
    def build(
        cls,
        model: str | LLMArch,
        workload: str | Workload,
        slo: SLO,
        *,
        dtype: str = "bf16",
        kv_dtype: str | None = None,
        samples: int = DEFAULT_SAMPLES,
        seed: int = 0,
        engine: str | Engine | None = None,
    ) -> Scenario:
        """Resolve names (catalog model, workload preset, engine profile) and build a scenario."""
        wl = workload if isinstance(workload, Workload) else get_workload(workload)
        return cls(get_model(model), wl, slo, dtype, kv_dtype, samples, seed, engine=get_engine(engine))

    @property
    def precision(self) -> Precision:
        """Per-component formats of this scenario's deployments (all weights in ``weight_dtype``)."""
        return Precision.from_dtypes(self.weight_dtype, self.kv_dtype)

    @property
    def kv_dtype_resolved(self) -> str:
        """The KV-cache format after defaults (decided once, in model.hardware.formats)."""
        return self.precision.kv_cache

    @cached_property
    def requests(self) -> tuple[np.ndarray, np.ndarray]:
        """(prompt_tokens, output_tokens) of the seeded sample; output >= 2 so TPOT is defined. The
        sample is stratified (Latin hypercube, model.workload.presets.Workload.sample_requests): 384
        independent draws of the chat preset put its mean prompt 10% above the law's (1,251 against
        1,137 tokens; code 11%), which the planner carried into every prefill load, so it read 10%
        conservative against the simulator's long runs (docs/validation.md)."""
        prompt, output = self.workload.sample_requests(
            self.samples, np.random.default_rng(self.seed), stratified=True
        )
        prompt = np.round(prompt * self.prompt_scale)
        return np.maximum(prompt, 1).astype(float), np.maximum(output, 2).astype(float)

    @property
    def prompt_tokens(self) -> np.ndarray:
        """Prompt lengths (tokens) of the sampled requests."""
        return self.requests[0]

    @property
    def output_tokens(self) -> np.ndarray:
        """Output lengths (tokens) of the sampled requests."""
        return self.requests[1]

    @cached_property
    def cached_tokens(self) -> np.ndarray:
        """Prompt tokens already in a prefix cache (workload hit rate x prompt), whole tokens; at least the
        last prompt token is always computed (engines recompute it to produce the first logits)."""
        return cached_prompt_tokens(self.prompt_tokens, self.workload.prefix_cache_hit_rate)

    @cached_property
    def prefill_pool_cached_tokens(self) -> np.ndarray:
        """Prompt tokens a disaggregated prefill instance finds cached: it holds earlier prompts but
        not answers decoded elsewhere (workload ``prefill_pool_hit_rate``; None: ``cached_tokens``)."""
        h = self.workload.prefill_pool_hit_rate
        if h is None:
            return self.cached_tokens
        shape = self.workload.sessions
        if shape is not None:  # below the implied rate, whole histories miss (capacity-limited)
            implied = cached_implied_hit_rates(shape).prefill_pool
            return history_split_cached_tokens(shape, self.prompt_tokens, h, implied)
        return cached_prompt_tokens(self.prompt_tokens, h)

    @cached_property
    def prefill_pool_missed(self) -> np.ndarray:
        """Which sampled requests miss their session history on a prefill instance [S] (bool; the
        split of :attr:`prefill_pool_cached_tokens`, all False without one)."""
        h, shape = self.workload.prefill_pool_hit_rate, self.workload.sessions
        if h is None or shape is None:
            return np.zeros(len(self.prompt_tokens), dtype=bool)
        implied = cached_implied_hit_rates(shape).prefill_pool
        return history_split_missed(shape, self.prompt_tokens, h, implied)

    @cached_property
    def decode_cached_tokens(self) -> np.ndarray:
        """Prompt tokens whose KV the decode instance already holds (earlier turns of a session):
        disaggregated serving sends only the rest (workload ``decode_prefix_hit_rate``)."""
        return cached_prompt_tokens(self.prompt_tokens, self.workload.decode_prefix_hit_rate)

    @cached_property
    def transfer_kv_bytes(self) -> np.ndarray:
        """KV bytes per sampled request that cross the link in disaggregated serving: the prompt's KV
        less what the decode instance already holds (all of it when nothing is held)."""
        full = self.kv_bytes_per_request(self.prompt_tokens)
        held = self.decode_cached_tokens
        if not np.any(held > 0):
            return full
        return np.maximum(full - self.kv_bytes_per_request(held), 0.0)

    @cached_property
    def decode_context_tokens(self) -> float:
        """Time-averaged context of a sequence in the decode batch.

        A request with prompt P and output O spends O steps in the batch at contexts P..P+O, mean
        P + O/2; weighting by the O steps it stays (Little's law) gives E[O (P + O/2)] / E[O].
        """
        p, o = self.requests
        return float(np.sum(o * (p + o / 2.0)) / np.sum(o))

    @cached_property
    def reserved_context_tokens(self) -> float:
        """KV tokens a running sequence holds reserved under whole-KV admission (engine policy "none",
        TensorRT-LLM's GUARANTEED_NO_EVICT): its whole prompt + output from admission to completion,
        weighted by the O steps it stays (Little's law, as :attr:`decode_context_tokens`):
        E[O (P + O)] / E[O]. The length bias makes it exceed E[P + O] (long outputs stay longer)."""
        p, o = self.requests
        return float(np.sum(o * (p + o)) / np.sum(o))

    @property
    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes one token adds, at the resolved KV dtype (model.llm.arch.kv_bytes_per_token)."""
        return kv_bytes_per_token(self.arch, self.kv_dtype_resolved)

    def kv_bytes_per_request(self, context_tokens: float | np.ndarray) -> np.ndarray:
        """KV + recurrent-state bytes of a request at ``context_tokens`` tokens, at the resolved KV
        dtype (model.llm.attention.kv_bytes_per_request: windows cap, linear layers add a state)."""
        return kv_bytes_per_request(self.arch, context_tokens, self.kv_dtype_resolved)

    @property
    def mean_output_tokens(self) -> float:
        """Mean output length of the sampled requests (tokens)."""
        return float(np.mean(self.output_tokens))

    @property
    def mean_prompt_tokens(self) -> float:
        """Mean prompt length of the sampled requests (tokens)."""
        return float(np.mean(self.prompt_tokens))
