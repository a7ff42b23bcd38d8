"""pdplan's cost model: hardware and model profiles, roofline phase costs, queueing, planning.

The public API is re-exported here so notebooks and scripts can ``import model`` and call, e.g.,
``model.plan("llama-3.1-70b", "h100-sxm", workload="chat", ttft_slo_s=0.5, tpot_slo_s=0.05,
gpus=16)`` or ``model.estimate("llama-3.1-8b", "rtx-4090", isl=1024, osl=256)``. Everything inside
works in SI floats / numpy arrays; see docs/ for the formulas and their sources.

Start-up stays fast: the names below are loaded on first use (PEP 562 module ``__getattr__``), so
``import model`` costs milliseconds and ``model.plan`` pulls in numpy/scipy only when called.
The layers live in subpackages (``model.hardware``, ``model.llm``, ``model.physics``,
``model.workload``, ``model.queueing``, ``model.serving``, ``model.symbolic``, ``model.planner``,
``model.recipes``, ``model.sim``, ``model.calibrate``, ``model.fleet``, ``model.cli``); see
docs/architecture.md.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

_EXPORTS: dict[str, str] = {
    "InputError": "model.errors",
    "PdplanError": "model.errors",
    "ProfileError": "model.errors",
    "UnknownNameError": "model.errors",
    "UnstableError": "model.errors",
    "allreduce_time_s": "model.hardware.collectives",
    "transfer_time_s": "model.hardware.collectives",
    "HardwareCatalog": "model.hardware.catalog",
    "get_engine": "model.hardware.catalog",
    "get_gpu": "model.hardware.catalog",
    "get_link": "model.hardware.catalog",
    "get_node": "model.hardware.catalog",
    "load_catalog": "model.hardware.catalog",
    "Engine": "model.hardware.engines",
    "GPU": "model.hardware.gpus",
    "Link": "model.hardware.links",
    "Node": "model.hardware.nodes",
    "Parallelism": "model.hardware.parallelism",
    "NumericFormat": "model.hardware.formats",
    "Precision": "model.hardware.formats",
    "KVOffload": "model.hardware.kv_offload",
    "KVTier": "model.hardware.kv_offload",
    "parse_kv_offload": "model.hardware.kv_offload",
    "get_format": "model.hardware.formats",
    "LLMArch": "model.llm.arch",
    "active_params": "model.llm.arch",
    "kv_bytes_per_token": "model.llm.arch",
    "kv_bytes_per_token_per_gpu": "model.llm.arch",
    "total_params": "model.llm.arch",
    "kv_bytes_per_request": "model.llm.attention",
    "weight_bytes": "model.llm.arch",
    "get_model": "model.llm.catalog",
    "list_models": "model.llm.catalog",
    "load_hf_config": "model.llm.hf_config",
    "Estimate": "model.physics.estimate",
    "estimate": "model.physics.estimate",
    "EstimateRequest": "model.physics.estimate",
    "MemoryFit": "model.physics.memory",
    "memory_fit": "model.physics.memory",
    "Deployment": "model.physics.deployment",
    "StepCost": "model.physics.steps",
    "DecodeTokens": "model.physics.decode_tokens",
    "tokens_per_decode_step": "model.physics.decode_tokens",
    "chunked_prefill_overhead": "model.physics.generation",
    "chunked_prefill_time_s": "model.physics.generation",
    "decode_step_cost": "model.physics.steps",
    "generation_time_s": "model.physics.generation",
    "mean_tpot_s": "model.physics.generation",
    "mixed_step_cost": "model.physics.steps",
    "prefill_cost": "model.physics.steps",
    "Speculation": "model.physics.speculation",
    "parse_speculation": "model.physics.speculation",
    "BestConfig": "model.planner.types",
    "Infeasibility": "model.planner.types",
    "Comparison": "model.planner.compare",
    "PlanSummary": "model.planner.compare",
    "compare": "model.planner.compare",
    "Alternative": "model.planner.types",
    "Alternatives": "model.planner.types",
    "Frontier": "model.planner.frontier",
    "StyleFrontier": "model.planner.frontier",
    "frontier": "model.planner.frontier",
    "style_frontier": "model.planner.frontier",
    "FlipThreshold": "model.planner.types",
    "Plan": "model.planner.types",
    "config_goodput": "model.planner.goodput",
    "plan": "model.planner.plan",
    "PlanRequest": "model.planner.plan",
    "pool_map": "model.planner.plan",
    "plan_dict": "model.planner.report",
    "ConcurrencyEvaluation": "model.planner.concurrency",
    "ConcurrencyPlan": "model.planner.concurrency",
    "ConcurrencyPoint": "model.planner.concurrency",
    "concurrency_curve": "model.planner.concurrency",
    "concurrency_plan_dict": "model.planner.concurrency",
    "evaluate_concurrency": "model.planner.concurrency",
    "plan_concurrency": "model.planner.concurrency",
    "ClosedLoopSimResult": "model.sim.closed_loop",
    "simulate_concurrency": "model.sim.closed_loop",
    "Robustness": "model.planner.robustness",
    "robustness": "model.planner.robustness",
    "rate_sweep": "model.planner.report",
    "roofline_points": "model.planner.report",
    "DeploymentRecipes": "model.recipes.deploy",
    "deploy": "model.recipes.deploy",
    "DiurnalShape": "model.fleet.curve",
    "RateCurve": "model.fleet.curve",
    "curve_from_trace": "model.fleet.curve",
    "diurnal_curve": "model.fleet.curve",
    "load_curve_csv": "model.fleet.curve",
    "rate_curve": "model.fleet.curve",
    "Schedule": "model.fleet.schedule",
    "ScheduleOptions": "model.fleet.schedule",
    "StyleSchedule": "model.fleet.schedule",
    "schedule": "model.fleet.schedule",
    "Grid": "model.fleet.grid",
    "load_grid": "model.fleet.grid",
    "parse_grid": "model.fleet.grid",
    "SweepResult": "model.fleet.sweep",
    "run_sweep": "model.fleet.sweep",
    "ColocatedConfig": "model.serving.configs",
    "DisaggregatedConfig": "model.serving.configs",
    "Evaluation": "model.serving.evaluation",
    "evaluate": "model.serving.evaluation",
    "Workload": "model.workload.presets",
    "get_workload": "model.workload.presets",
    "list_workloads": "model.workload.presets",
    "workload_from_lengths": "model.workload.plain",
    "PrefixReplay": "model.workload.prefix",
    "parse_hit_rate": "model.workload.prefix",
    "replay_prefix_cache": "model.workload.prefix",
    "SessionShape": "model.workload.sessions",
    "implied_hit_rates": "model.workload.sessions",
    "capacity_hit_rate": "model.workload.sessions",
    "Scenario": "model.workload.scenario",
    "Concurrency": "model.workload.concurrency",
    "SLO": "model.workload.slo",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import a public name's module on first access and cache the name here."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'model' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    if inspect.isfunction(value):  # argument types checked at the API edge (model.limits.checked)
        value = importlib.import_module("model.limits").checked(value)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
