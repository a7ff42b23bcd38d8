"""pdplan's cost model: hardware and model profiles, roofline phase costs, queueing, planning.

The public API is re-exported here so notebooks and scripts can ``import model`` and call, e.g.,
``model.get_gpu("h100-sxm")`` or ``model.get_model("llama-3.1-70b")``. Everything inside works
in SI floats / numpy arrays; see docs/ for the formulas and their sources.
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
from model.errors import InputError, PdplanError, ProfileError, UnknownNameError, UnstableError
from model.hf_config import load_hf_config
from model.profiles import GPU, HardwareCatalog, Link, Node, get_gpu, get_link, get_node, load_catalog

__all__ = [
    "GPU",
    "HardwareCatalog",
    "InputError",
    "LLMArch",
    "Link",
    "Node",
    "PdplanError",
    "ProfileError",
    "UnknownNameError",
    "UnstableError",
    "active_params",
    "get_gpu",
    "get_link",
    "get_model",
    "get_node",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_gpu",
    "list_models",
    "load_catalog",
    "load_hf_config",
    "total_params",
    "weight_bytes",
]
