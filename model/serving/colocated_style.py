"""The colocated serving styles: "colocated" (prefill-first) and "colocated-chunked" (Sarathi-Serve
chunked prefill), one class parameterised by chunking (model.serving.colocated holds the model)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from model.errors import InputError
from model.hardware.gpus import GPU
from model.hardware.links import Link
from model.hardware.parallelism import Parallelism
from model.serving.candidates import ColocatedSet
from model.serving.common import slo_ok
from model.serving.configs import ColocatedConfig
from model.serving.enumeration import colocated_for_budget, gpu_kinds, layout_from_text, space_candidates
from model.serving.style import CliFlag, SearchSpace, SimLayout, SimPool, TargetGroup
from model.workload.scenario import Scenario

# Chunk budget when `pdplan simulate --style colocated-chunked` gets no --chunk: Sarathi-Serve's
# chunk size for its headline results (Agrawal et al. OSDI 2024, sec. 5).
_TP = CliFlag("--tp", "tensor-parallel degree per instance (default 1)")
_REPLICAS = CliFlag("--replicas", "colocated replicas (default 1)")
_LAYOUT = CliFlag("--parallelism", 'replica layout instead of --tp, e.g. "dep=8", "tep=8"', type=str)
_CHUNK = CliFlag("--chunk", "chunked-prefill token budget (default: the engine profile's chunk_tokens)")


@dataclass(frozen=True)
class ColocatedStyle:
    """R replicas of one instance layout running both phases; ``chunked`` selects chunked prefill."""

    chunked: bool = False
    config_type: type = ColocatedConfig
    family: str = "colocated"

    @property
    def name(self) -> str:
        return "colocated-chunked" if self.chunked else "colocated"

    @property
    def title(self) -> str:
        return "colocated with chunked prefill" if self.chunked else "colocated (no chunking)"

    @property
    def tie_order(self) -> int:
        # chunking first: the engines' default, which a colocated verdict keeps unless plain
        # colocated is ahead by the margin (model.planner.colocated_rule)
        return 0 if self.chunked else 1

    @property
    def cli_flags(self) -> tuple[CliFlag, ...]:
        return (_TP, _LAYOUT, _REPLICAS, _CHUNK) if self.chunked else (_TP, _LAYOUT, _REPLICAS)

    def _chunks(self, space: SearchSpace) -> list[int | None]:
        return list(space.chunk_options) if self.chunked else [None]

    # -- planner

    def budget_configs(self, space: SearchSpace, gpus: int) -> list[ColocatedConfig]:
        layouts = space_candidates(space, gpus)
        return [
            c
            for g in gpu_kinds(space.gpu, space.decode_gpu)
            for chunk in self._chunks(space)
            for c in colocated_for_budget(g, layouts, gpus, chunk)
        ]

    def target_groups(self, space: SearchSpace) -> list[TargetGroup]:
        """One group per chunk budget: every GPU kind, TP and replica count up to max_gpus."""
        layouts = space_candidates(space, space.max_gpus)
        out = []
        for chunk in self._chunks(space):
            configs = [
                ColocatedConfig(g, par, r, chunk)
                for g in gpu_kinds(space.gpu, space.decode_gpu)
                for par in layouts
                for r in range(1, space.max_gpus // par.gpus + 1)
            ]
            cands = ColocatedSet.build(space.scenario, configs)
            fits = cands.fits()
            ok = np.zeros(len(configs), dtype=bool)
            if fits.any():
                feasible = cands.subset(fits)
                rate = np.full(len(feasible.configs), space.target_rate_rps)
                ok[fits] = slo_ok(feasible.evaluate(rate), space.scenario.slo)
            out.append(TargetGroup(cands, ok, len(configs)))
        return out

    def build_set(self, scenario: Scenario, configs: Sequence[ColocatedConfig]) -> ColocatedSet:
        return ColocatedSet.build(scenario, configs)

    def lose_one(self, config: ColocatedConfig) -> dict[str, ColocatedConfig | None]:
        r = config.replicas - 1
        return {"replica": replace(config, replicas=r) if r >= 1 else None}

    def in_flight(self, ev: Any, scenario: Scenario) -> tuple[dict[str, float], dict[str, float]]:
        """A replica holds its decode batch B plus the prompt in prefill (utilisation rho); their
        prompts and on average half the output must be recomputed (the mean decode context)."""
        prompt = float(np.mean(scenario.prompt_tokens))
        return (
            {"replica": ev.decode_batch + ev.prefill_utilisation},
            {"replica": ev.decode_batch * scenario.decode_context_tokens + ev.prefill_utilisation * prompt},
        )

    # -- simulator

    def sim_layout(self, config: ColocatedConfig) -> SimLayout:
        return SimLayout(
            (SimPool("replica", config.gpu, config.parallel, config.replicas, config.chunk_tokens),)
        )

    # -- CLI, reports, app

    def config_from_cli(
        self, values: Mapping[str, Any], gpu: GPU, profile_dirs: str | Path | Sequence | None
    ) -> ColocatedConfig:
        chunk = None
        if self.chunked:
            chunk = values.get("chunk")
            if chunk is None:
                raise InputError("--chunk", None, "a chunked-prefill token budget (tokens per iteration)")
        tp = values.get("tp") if values.get("tp") is not None else 1
        if values.get("parallelism") is not None:
            tp = layout_from_text("--parallelism", values["parallelism"])
        replicas = values.get("replicas") if values.get("replicas") is not None else 1
        return ColocatedConfig(gpu, tp, replicas, chunk)

    def config_dict(self, config: ColocatedConfig) -> dict[str, Any]:
        return {
            "architecture": config.style,
            "gpu": config.gpu.name,
            "tp": config.tp,
            "replicas": config.replicas,
            "chunk_tokens": config.chunk_tokens,
            "n_gpus": config.n_gpus,
        }

    def phase_deployments(self, config: ColocatedConfig) -> dict[str, tuple[GPU, Parallelism]]:
        return {"prefill": (config.gpu, config.parallel), "decode": (config.gpu, config.parallel)}

    def kv_link(self, config: ColocatedConfig) -> Link | None:
        return None
