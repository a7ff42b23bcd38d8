"""vLLM recipe: ``vllm serve`` per instance in per-node scripts; for disaggregation, each instance
runs the NixlConnector (``--kv-transfer-config``, kv_role kv_both as in vLLM's NixlConnector
guide) behind the guide's proxy. Flags: model/recipes/data/vllm-<version>.toml."""

from __future__ import annotations

import json

from model.hardware.parallelism import Parallelism
from model.recipes.catalog import EngineData
from model.recipes.command import Command, command
from model.recipes.placement import BASE_PORT, Instance
from model.recipes.recipe import (
    SERVE_PORT,
    Recipe,
    RecipeFile,
    cuda_devices,
    directory,
    dtype_options,
    finish,
    front_script,
    host,
    node_scripts,
    url,
)
from model.recipes.target import Pool, Target

GIB = float(2**30)
"""vLLM's --kv-offloading-size is in GiB (CacheConfig.kv_offloading_size)."""

SIDE_CHANNEL_BASE_PORT = 5600
"""NIXL side-channel port of the first instance on a node (the guide's example uses 5600, one
port per instance on a host: VLLM_NIXL_SIDE_CHANNEL_PORT)."""


def layout_flags(par: Parallelism) -> list[tuple[str, object]]:
    """vLLM's flags for a layout (also the Dynamo vLLM worker's): TP, then PP, DP and EP when > 1."""
    opts: list[tuple[str, object]] = [("--tensor-parallel-size", par.tp)]
    if par.pp > 1:
        opts.append(("--pipeline-parallel-size", par.pp))
    if par.dp_attention > 1:
        opts.append(("--data-parallel-size", par.dp_attention))
    if par.ep > 1:
        opts.append(("--enable-expert-parallel", None))
    return opts


def parallel_options(pool: Pool, inst: Instance) -> tuple[list[tuple[str, object]], list[str]]:
    """vLLM's parallelism flags for one instance, and notes where vLLM cannot express the layout."""
    par = pool.parallel
    opts = layout_flags(par)
    notes: list[str] = []
    if par.ep > 1 and par.ep != par.tp * par.dp_attention:
        span = par.tp * par.dp_attention
        notes.append(f"{pool.role}: vLLM's EP spans TP x DP = {span} GPUs (not EP{par.ep})")
    if len(inst.slots) > 1:
        opts.append(("--distributed-executor-backend", "ray"))
    return opts, notes


def engine_options(t: Target, pool: Pool) -> list[tuple[str, object]]:
    """Batching caps, memory share and formats (shared with the Dynamo and llm-d recipes)."""
    opts: list[tuple[str, object]] = [
        ("--max-model-len", t.max_model_len),
        ("--max-num-seqs", pool.max_num_seqs),
        ("--max-num-batched-tokens", pool.max_batched_tokens),
        ("--enable-chunked-prefill" if pool.chunked else "--no-enable-chunked-prefill", None),
        ("--gpu-memory-utilization", t.gpu_memory_utilization),
    ]
    return opts + dtype_options(t)[0] + offload_options(t, pool)


def offload_options(t: Target, pool: Pool) -> list[tuple[str, object]]:
    """vLLM's CPU KV offloading for the plan's ``cpu`` tier on a colocated replica: CacheConfig
    ``--kv-offloading-backend native`` with ``--kv-offloading-size``, the buffer in GiB summed over
    the instance's TP ranks (docs.vllm.ai engine arguments, CacheConfig), floored to whole GiB so it
    never exceeds the tier the plan modelled. A disaggregated instance's ``--kv-transfer-config``
    already names the NixlConnector, which the native backend's OffloadingConnector would replace:
    see :func:`offload_notes`."""
    cpu = t.offload_bytes(pool).get("cpu")
    if cpu is None or t.disaggregated:
        return []
    return [("--kv-offloading-backend", "native"), ("--kv-offloading-size", max(1, int(cpu // GIB)))]


def offload_notes(t: Target) -> list[str]:
    """What the vLLM-family recipes cannot set of the plan's KV offload tiers: a CPU tier next to
    the disaggregated NixlConnector, and NVMe / remote tiers (vLLM's native backend offloads to CPU
    memory only)."""
    kinds = {k: b for p in t.pools for k, b in t.offload_bytes(p).items()}
    notes = []
    if "cpu" in kinds and t.disaggregated:
        notes.append(
            f"the plan keeps reused prefixes in a CPU tier ({kinds['cpu'] / GIB:.0f} GiB per prefill "
            "instance); vLLM's native offloading (--kv-offloading-size) installs its own "
            "OffloadingConnector, so next to the NixlConnector it needs a MultiConnector "
            "--kv-transfer-config (not emitted)"
        )
    others = sorted(set(kinds) - {"cpu"})
    if others:
        notes.append(
            f"the plan's {' and '.join(others)} KV tier is not set: vLLM's native offloading holds a CPU "
            "tier only; a disk or remote tier needs LMCache (--kv-offloading-backend lmcache with its "
            "LMCACHE_* configuration) or a Mooncake store"
        )
    return notes


def kv_transfer_json(data: EngineData) -> str:
    """The --kv-transfer-config value: the data file's connector with kv_role kv_both."""
    kv = data.table("kv_transfer")
    return json.dumps({"kv_connector": kv["connector"], "kv_role": "kv_both"}, separators=(",", ":"))


def render(t: Target, data: EngineData) -> Recipe:
    """The vLLM recipe of one target."""
    notes: list[str] = list(dtype_options(t)[1]) + offload_notes(t)
    side = data.table("kv_transfer")["side_channel_env"]

    def launch(inst: Instance, node: int) -> Command | None:
        if node != inst.head:
            return None  # a Ray worker node of a multi-node instance
        pool = t.pool(inst.pool)
        par_opts, par_notes = parallel_options(pool, inst)
        notes.extend(n for n in par_notes if n not in notes)
        opts = [("--host", "0.0.0.0"), ("--port", inst.port), *par_opts, *engine_options(t, pool)]
        env = [cuda_devices(inst, node)]
        if t.disaggregated:
            opts.append(("--kv-transfer-config", kv_transfer_json(data)))
            env.append((side, str(SIDE_CHANNEL_BASE_PORT + inst.port - BASE_PORT)))
        return command(data, "vllm serve", (t.model_path,), opts, tuple(env))

    files, cmds = node_scripts(t, data, launch)
    if any(len(i.slots) > 1 for i in t.placement.instances):
        notes.append(
            "instances spanning nodes run on a Ray cluster (--distributed-executor-backend ray): start "
            "`ray start --head` on the first node of the instance and `ray start --address=HEAD:6379` on "
            "the others before the launch script (docs.vllm.ai, parallelism and scaling)"
        )
    if t.disaggregated:
        pre, dec = t.placement.of_pool("prefill"), t.placement.of_pool("decode")
        proxy = command(
            data,
            "python toy_proxy_server.py",
            (),
            [
                ("--host", "0.0.0.0"),
                ("--port", SERVE_PORT),
                ("--prefiller-hosts", [host(i.head) for i in pre]),
                ("--prefiller-ports", [i.port for i in pre]),
                ("--decoder-hosts", [host(i.head) for i in dec]),
                ("--decoder-ports", [i.port for i in dec]),
            ],
        )
        source = (
            "# toy_proxy_server.py: tests/v1/kv_connector/nixl_integration/ in the vLLM repository at the\n"
            f"# v{data.version}.0 tag (the NixlConnector guide's proxy; a production router replaces it).\n"
        )
        text = front_script(
            t, data, "Request proxy: prefill on a prefiller, then decode on a decoder.", proxy, source
        )
        files.append(RecipeFile(f"{directory(t, data)}/proxy.sh", text))
        cmds.append(proxy)
    elif len(t.placement.instances) > 1:
        notes.append(
            "vLLM ships no multi-replica router: put an HTTP load balancer in front of the replicas at "
            + ", ".join(url(i) for i in t.placement.instances)
            + (f", routing as the plan assumed: {t.router}" if t.router else "")
        )
    return finish(t, data, files, cmds, notes)
