"""llm-d recipe: values for the llm-d ModelService Helm chart, a decode pool and (for
disaggregation) a prefill pool of vLLM pods with the routing sidecar's NIXL connector; colocated
serving is the decode pool alone (the chart's aggregated form). Flags in the pods' args:
model/recipes/data/llm-d-<version>.toml; the values are checked against
model/recipes/schemas/llm-d-<version>-values.json."""

from __future__ import annotations

import math
import re

from model.recipes.catalog import EngineData
from model.recipes.command import Command, command
from model.recipes.recipe import SERVE_PORT, Recipe, RecipeFile, directory, dump_yaml, finish, header
from model.recipes.target import Pool, Target
from model.recipes.vllm import engine_options, kv_transfer_json, offload_notes

GIB = 2**30
HF_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
"""A Hugging Face repository id (org/name); anything else is served from a volume claim."""
MODEL_PVC = "model-pvc"
"""Placeholder PersistentVolumeClaim for a checkpoint given as a path (the chart's pvc:// form)."""


def _pool(t: Target, pool: Pool | None, data: EngineData, cmds: list[Command]) -> dict:
    if pool is None:
        return {"create": False, "replicas": 0}
    chart = data.table("chart")
    par = pool.parallel
    opts = list(engine_options(t, pool))
    if par.pp > 1:
        opts.append(("--pipeline-parallel-size", par.pp))
    if par.ep > 1:
        opts.append(("--enable-expert-parallel", None))
    if t.disaggregated:
        opts.append(("--kv-transfer-config", kv_transfer_json(data)))
    cmd = command(data, "vllm serve", (), opts)
    cmds.append(cmd)
    gpus = str(par.gpus)
    return {
        "create": True,
        "replicas": pool.count,
        "parallelism": {"tensor": par.tp, "data": par.dp_attention},
        "containers": [
            {
                "name": "vllm",
                "image": chart["image"],
                "modelCommand": "vllmServe",
                "args": cmd.argv()[2:],
                "mountModelVolume": True,
                "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
            }
        ],
    }


def render(t: Target, data: EngineData) -> Recipe:
    """The llm-d recipe of one target."""
    chart = data.table("chart")
    cmds: list[Command] = []
    decode = t.pool("decode") if t.disaggregated else t.pool("replica")
    prefill = t.pool("prefill") if t.disaggregated else None
    size_gib = max(1, math.ceil(t.weight_bytes / GIB))
    hf = HF_ID.fullmatch(t.model_path) is not None
    uri = f"hf://{t.model_path}" if hf else f"pvc://{MODEL_PVC}/{t.model_path.lstrip('/')}"
    values = {
        "modelArtifacts": {"name": t.model_path, "uri": uri, "size": f"{size_gib}Gi"},
        "multinode": any(len(i.slots) > 1 for i in t.placement.instances),
        "accelerator": {"type": "nvidia"},
        "routing": {
            "servicePort": SERVE_PORT,
            "proxy": {"enabled": t.disaggregated, "connector": chart["proxy_connector"]},
        },
        "decode": _pool(t, decode, data, cmds),
        "prefill": _pool(t, prefill, data, cmds),
    }
    notes = [
        f"install: helm repo add llm-d-modelservice {chart['repo']}; helm install pdplan "
        f"llm-d-modelservice/{chart['chart']} --version {chart['chart_version']} -f values.yaml "
        "(after the llm-d infrastructure and gateway are installed)",
        "set the container image (${LLMD_IMAGE}) to your llm-d vLLM image; modelArtifacts.size is the "
        f"checkpoint's weight bytes rounded up to a GiB ({size_gib}Gi)",
        *offload_notes(t),
    ]
    if not hf:
        notes.append(f"the checkpoint is a path: modelArtifacts.uri reads it from the claim {MODEL_PVC}")
    if t.placement.node_name:
        notes.append(
            f"each pod asks for one instance's GPUs ({t.placement.gpus_per_node} per {t.placement.node_name} "
            "node); the Kubernetes scheduler packs them as in the placement table"
        )
    d = directory(t, data)
    text = (
        header(t, data, f"Helm values for {chart['chart']} {chart['chart_version']}")
        + "# yaml-language-server: $schema=https://raw.githubusercontent.com/llm-d-incubation/"
        "llm-d-modelservice/main/charts/llm-d-modelservice/values.schema.json\n" + dump_yaml(values)
    )
    files = [RecipeFile(f"{d}/values.yaml", text, f"llm-d-{data.version}-values")]
    return finish(t, data, files, cmds, notes)
