"""Recipe values and the pieces every engine's recipe shares: per-node launch scripts, the README
with the placement table, YAML output, numeric-format flags."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import yaml

from model.recipes.catalog import EngineData
from model.recipes.command import Command
from model.recipes.placement import Instance
from model.recipes.target import Target

SERVE_PORT = 8000
"""Port of the entry point clients call (router, proxy or frontend)."""


@dataclass(frozen=True)
class RecipeFile:
    """One emitted file: ``path`` relative to the output directory; ``schema`` names the JSON
    schema (model/recipes/schemas) a YAML file satisfies."""

    path: str
    text: str
    schema: str | None = None


@dataclass(frozen=True)
class Recipe:
    """One engine's recipe for one target configuration."""

    target: str
    style: str
    label: str
    engine: str
    version: str
    files: tuple[RecipeFile, ...]
    commands: tuple[Command, ...]
    notes: tuple[str, ...] = ()


def host(node: int) -> str:
    """Placeholder host name of node ``node`` (the README says to replace it)."""
    return f"node-{node}"


def url(inst: Instance) -> str:
    """``host:port`` where an instance's server listens."""
    return f"{host(inst.head)}:{inst.port}"


def cuda_devices(inst: Instance, node: int) -> tuple[str, str]:
    """The CUDA_VISIBLE_DEVICES setting of ``inst`` on ``node``."""
    gpus = next(s.gpus for s in inst.slots if s.node == node)
    return ("CUDA_VISIBLE_DEVICES", ",".join(str(g) for g in gpus))


def dump_yaml(obj: object) -> str:
    """Block-style YAML in insertion order."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(obj, Dumper=dumper, sort_keys=False, default_flow_style=False, width=100)


def directory(t: Target, data: EngineData) -> str:
    """``<target>/<engine>``, the folder of one recipe."""
    return f"{t.name}/{data.engine}"


def header(t: Target, data: EngineData, what: str) -> str:
    """Comment block opening every emitted script: what, for which plan, which engine version."""
    return (
        f"# {what}\n"
        f"# pdplan recipe for {t.name}: {t.style}, {t.label}\n"
        f"# Targets {data.full_name}; flags from model/recipes/data/{data.engine}-{data.version}.toml\n"
        f"# (each with its documentation source; engine docs: {data.docs}).\n"
    )


def front_script(t: Target, data: EngineData, what: str, cmd: Command, comments: str = "") -> str:
    """A one-command bash script (a router, proxy or disaggregated server): shebang, the
    :func:`header`, extra ``comments`` lines, ``set -euo pipefail`` and the command."""
    return (
        "#!/usr/bin/env bash\n"
        + header(t, data, what)
        + comments
        + "set -euo pipefail\n"
        + cmd.shell()
        + "\n"
    )


def node_scripts(
    t: Target, data: EngineData, launch: Callable[[Instance, int], Command | None]
) -> tuple[list[RecipeFile], list[Command]]:
    """``node-<i>.sh`` per node: every instance with GPUs there, started in the background with its
    GPUs in CUDA_VISIBLE_DEVICES; ``launch(instance, node)`` builds the command (None: nothing
    to start on that node for a multi-node instance's follower)."""
    files, cmds = [], []
    for n in range(t.placement.n_nodes):
        lines = [
            "#!/usr/bin/env bash",
            header(t, data, f"Launch script for {host(n)}: run it on that node.").rstrip(),
            "set -euo pipefail",
            "",
        ]
        for inst in t.placement.on_node(n):
            cmd = launch(inst, n)
            if cmd is None:
                continue
            gpus = cuda_devices(inst, n)[1]
            lines += [f"# {inst.name}: {inst.parallel.label} on GPUs {gpus}", cmd.shell(background=True), ""]
            cmds.append(cmd)
        lines.append("wait")
        files.append(RecipeFile(f"{directory(t, data)}/{host(n)}.sh", "\n".join(lines) + "\n"))
    return files, cmds


def placement_table(t: Target) -> str:
    """Markdown table: node, instance, pool, layout, GPUs, port."""
    p = t.placement
    rows = ["| node | instance | layout | GPUs | port |", "|---|---|---|---|---|"]
    for inst in sorted(p.instances, key=lambda i: (i.head, i.pool, i.index)):
        where = "; ".join(f"{host(s.node)}: {','.join(map(str, s.gpus))}" for s in inst.slots)
        rows.append(f"| {host(inst.head)} | {inst.name} | {inst.parallel.label} | {where} | {inst.port} |")
    kind = (
        f"node profile {p.node_name} ({p.gpus_per_node} GPUs per node)"
        if p.node_name
        else ("no node profile in the plan: one host per instance")
    )
    used = sum(len(s.gpus) for i in p.instances for s in i.slots)
    return f"{p.n_nodes} nodes, {used} GPUs; {kind}.\n\n" + "\n".join(rows)


def readme(t: Target, data: EngineData, files: list[RecipeFile], notes: list[str]) -> RecipeFile:
    """The recipe's README: target, engine version, placement, files, notes."""
    pools = "\n".join(
        f"- {p.role}: {p.count} x {p.parallel.label} on {p.gpu} (max sequences {p.max_num_seqs}, "
        f"tokens per step {p.max_batched_tokens}, chunked prefill {'on' if p.chunked else 'off'})"
        for p in t.pools
    )
    listing = "\n".join(f"- `{f.path.split('/', 2)[-1]}`" for f in files)
    names = [f.path.rsplit("/", 1)[-1] for f in files]
    entries = [n for n in names if n.endswith(".sh") and not n.startswith("node-")]
    if any(n.startswith("node-") for n in names):
        launch = "Run `node-<i>.sh` on node i (all nodes)"
        launch += f"; then `{'`, `'.join(entries)}` on {host(0)}" if entries else ""
        launch += f". Clients call port {SERVE_PORT}" if entries else ". Clients call the instances' ports"
        launch += " once every instance reports healthy.\n"
    else:
        launch = "Apply the YAML to your cluster as the notes below say.\n"
    text = (
        f"# {data.full_name}: {t.name} ({t.style})\n\n"
        f"Configuration: {t.label}.\n\n"
        f"Targets **{data.engine} {data.version}** ({data.docs}); every flag is listed with its "
        f"documentation source in `model/recipes/data/{data.engine}-{data.version}.toml`.\n\n"
        f"Model: `{t.model_path}` ({t.model_note}); weights {t.weight_dtype}, KV cache {t.kv_dtype}, "
        f"max model length {t.max_model_len} tokens.\n\n"
        f"## Pools\n\n{pools}\n\n"
        f"## Placement\n\n{placement_table(t)}\n\n"
        f"Host names `node-0`, `node-1`, ... are placeholders: replace them with your nodes' addresses.\n\n"
        f"## Launch\n\n{launch}\n"
        f"## Files\n\n{listing}\n"
    )
    if notes:
        text += "\n## Notes\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    return RecipeFile(f"{directory(t, data)}/README.md", text)


def finish(
    t: Target, data: EngineData, files: list[RecipeFile], cmds: list[Command], notes: list[str]
) -> Recipe:
    """The Recipe of ``files`` with the README first (and the note every engine shares: a KV path
    the plan modelled within a node that the placement sends across nodes)."""
    p = t.placement
    if t.disaggregated and t.link_kind != "network":
        decode_nodes = {i.head for i in p.of_pool("decode")}
        remote = sorted({host(i.head) for i in p.of_pool("prefill")} - {host(n) for n in decode_nodes})
        if remote:
            notes = [
                *notes,
                f"the plan modelled KV transfer over {t.link} (within a node); prefill instances on "
                f"{', '.join(remote)} have no decode instance on their node and send KV over the network: "
                "re-plan with the network --link to size that path",
            ]
    files = [readme(t, data, files, notes), *files]
    head = (t.name, t.style, t.label, data.engine, data.version)
    return Recipe(*head, tuple(files), tuple(cmds), tuple(notes))


# Weight formats the engines load with a flag; others need a pre-quantised checkpoint.
_DTYPE = {"bf16": "bfloat16", "fp16": "float16"}


def dtype_options(t: Target, fp8_kv: str = "fp8") -> tuple[list[tuple[str, object]], list[str]]:
    """The weight and KV-format flags (vLLM and SGLang share the names; SGLang spells the FP8 KV
    format ``fp8_e4m3``, given as ``fp8_kv``) and notes for formats without a flag."""
    opts: list[tuple[str, object]] = []
    notes: list[str] = []
    if t.weight_dtype in _DTYPE:
        opts.append(("--dtype", _DTYPE[t.weight_dtype]))
    elif t.weight_dtype == "fp8":
        opts.append(("--quantization", "fp8"))
    else:
        notes.append(f"weights in {t.weight_dtype}: serve a checkpoint quantised to that format (no flag)")
    if t.kv_dtype.startswith("fp8"):
        opts.append(("--kv-cache-dtype", fp8_kv))
    return opts, notes
