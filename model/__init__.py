"""pdplan's cost model: hardware and model profiles, roofline phase costs, queueing, planning.

The public API is re-exported here so notebooks and scripts can ``import model`` and call, e.g.,
``model.plan("llama-3.1-70b", "h100-sxm", workload="chat", ttft_slo_s=0.5, tpot_slo_s=0.05,
gpus=16)`` or ``model.estimate("llama-3.1-8b", "rtx-4090", isl=1024, osl=256)``. Everything inside
works in SI floats / numpy arrays; see docs/ for the formulas and their sources.
"""

from model.arch import (
    LLMArch,
    active_params,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    total_params,
    weight_bytes,
)
from model.catalog import get_model, list_models
from model.comm import allreduce_time_s, transfer_time_s
from model.configs import SLO, ColocatedConfig, DisaggregatedConfig
from model.errors import InputError, PdplanError, ProfileError, UnknownNameError, UnstableError
from model.estimate import Estimate, estimate
from model.hf_config import load_hf_config
from model.memory import MemoryFit, memory_fit
from model.planner import BestConfig, FlipThreshold, Plan, config_goodput, plan, pool_map
from model.profiles import GPU, HardwareCatalog, Link, Node, get_gpu, get_link, get_node, load_catalog
from model.report import plan_dict, rate_sweep, roofline_points
from model.roofline import (
    Deployment,
    StepCost,
    chunked_prefill_overhead,
    chunked_prefill_time_s,
    decode_step_cost,
    generation_time_s,
    mean_tpot_s,
    mixed_step_cost,
    prefill_cost,
)
from model.scenario import Scenario
from model.serving import Evaluation, evaluate
from model.workload import Workload, get_workload, list_workloads

__all__ = [
    "GPU",
    "SLO",
    "BestConfig",
    "ColocatedConfig",
    "Deployment",
    "DisaggregatedConfig",
    "Estimate",
    "Evaluation",
    "FlipThreshold",
    "HardwareCatalog",
    "InputError",
    "LLMArch",
    "Link",
    "MemoryFit",
    "Node",
    "PdplanError",
    "Plan",
    "ProfileError",
    "Scenario",
    "StepCost",
    "UnknownNameError",
    "UnstableError",
    "Workload",
    "active_params",
    "allreduce_time_s",
    "chunked_prefill_overhead",
    "chunked_prefill_time_s",
    "config_goodput",
    "decode_step_cost",
    "estimate",
    "evaluate",
    "generation_time_s",
    "get_gpu",
    "get_link",
    "get_model",
    "get_node",
    "get_workload",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_gpu",
    "list_models",
    "list_workloads",
    "load_catalog",
    "load_hf_config",
    "mean_tpot_s",
    "memory_fit",
    "mixed_step_cost",
    "plan",
    "plan_dict",
    "pool_map",
    "prefill_cost",
    "rate_sweep",
    "roofline_points",
    "total_params",
    "transfer_time_s",
    "weight_bytes",
]
