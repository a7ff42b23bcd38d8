"""NVIDIA Dynamo recipe: a DynamoGraphDeployment (nvidia.com/v1alpha1) with a Frontend and vLLM
worker services (``python3 -m dynamo.vllm``): one worker service for colocated serving, a prefill
and a decode service for disaggregation, replicas and GPUs per pod from the plan. Flags:
model/recipes/data/dynamo-<version>.toml; the YAML is checked against
model/recipes/schemas/dynamo-<version>-dgd.json."""

from __future__ import annotations

import re

from model.recipes.catalog import EngineData
from model.recipes.command import command
from model.recipes.recipe import Recipe, RecipeFile, directory, dump_yaml, finish, header
from model.recipes.target import Pool, Target
from model.recipes.vllm import engine_options, layout_flags, offload_notes

_SERVICE = {"replica": "VllmWorker", "prefill": "VllmPrefillWorker", "decode": "VllmDecodeWorker"}
HF_SECRET = "hf-token-secret"
"""Kubernetes secret with HF_TOKEN (the Dynamo examples' envFromSecret)."""


def resource_name(text: str) -> str:
    """A DNS-1123 label (lower case, digits, '-'; at most 63 characters)."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return name[:63].rstrip("-") or "pdplan"


def _worker(t: Target, pool: Pool, data: EngineData, notes: list[str]) -> tuple[dict, object]:
    graph = data.table("graph")
    par = pool.parallel
    opts: list[tuple[str, object]] = [("--model", t.model_path)]
    if pool.role == "prefill":
        opts.append(("--is-prefill-worker", None))
    opts += layout_flags(par)
    opts += engine_options(t, pool)
    cmd = command(data, "python3 -m dynamo.vllm", (), opts)
    if t.placement.gpus_per_node is not None and par.gpus > t.placement.gpus_per_node:
        notes.append(
            f"{pool.role}: an instance needs {par.gpus} GPUs, more than one {t.placement.node_name} node; "
            "a multi-node worker needs Dynamo's multinode deployment (not emitted)"
        )
    service: dict = {
        "envFromSecret": HF_SECRET,
        "componentType": "worker",
    }
    if t.disaggregated:
        service["subComponentType"] = pool.role
    service |= {
        "replicas": pool.count,
        "resources": {"limits": {"gpu": str(par.gpus)}},
        "extraPodSpec": {
            "mainContainer": {
                "image": f"{graph['image']}:${{DYNAMO_VERSION}}",
                "workingDir": graph["working_dir"],
                "command": cmd.argv()[:3],
                "args": cmd.argv()[3:],
            }
        },
    }
    return service, cmd


def render(t: Target, data: EngineData) -> Recipe:
    """The Dynamo recipe of one target."""
    graph = data.table("graph")
    notes: list[str] = [
        "set DYNAMO_VERSION (the runtime image tag) and create the secret "
        f"{HF_SECRET} with HF_TOKEN; apply with kubectl apply -f dynamo-graph.yaml",
        "Kubernetes places the pods: each pod asks for one instance's GPUs, which fit the nodes as in "
        "the placement table",
        *offload_notes(t),
    ]
    services: dict = {
        "Frontend": {
            "componentType": "frontend",
            "replicas": 1,
            "extraPodSpec": {"mainContainer": {"image": f"{graph['image']}:${{DYNAMO_VERSION}}"}},
        }
    }
    cmds = []
    for pool in t.pools:
        services[_SERVICE[pool.role]], cmd = _worker(t, pool, data, notes)
        cmds.append(cmd)
    doc = {
        "apiVersion": graph["api_version"],
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": resource_name(f"pdplan-{t.name}")},
        "spec": {"services": services},
    }
    d = directory(t, data)
    files = [
        RecipeFile(
            f"{d}/dynamo-graph.yaml",
            header(t, data, "DynamoGraphDeployment: kubectl apply -f dynamo-graph.yaml") + dump_yaml(doc),
            f"dynamo-{data.version}-dgd",
        )
    ]
    return finish(t, data, files, cmds, notes)
