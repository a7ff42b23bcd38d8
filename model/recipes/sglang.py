"""SGLang recipe: ``python -m sglang.launch_server`` per instance (per node for multi-node
instances, with --nnodes/--node-rank), PD disaggregation flags on prefill and decode instances,
and the SGLang router in front. Flags: model/recipes/data/sglang-<version>.toml."""

from __future__ import annotations

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
)
from model.recipes.target import Pool, Target

DIST_INIT_PORT = 5000
"""Port of --dist-init-addr on a multi-node instance's first node (SGLang's PD guide uses 5000)."""


def parallel_options(pool: Pool) -> list[tuple[str, object]]:
    """SGLang's parallelism flags: --tp-size counts every GPU of a pipeline stage (with DP attention
    the attention TP group is tp-size / dp-size, SGLang's server-arguments page)."""
    par = pool.parallel
    opts: list[tuple[str, object]] = [("--tp-size", par.tp * par.dp_attention)]
    if par.pp > 1:
        opts.append(("--pp-size", par.pp))
    if par.dp_attention > 1:
        opts += [("--dp-size", par.dp_attention), ("--enable-dp-attention", None)]
    if par.ep > 1:
        opts.append(("--ep-size", par.ep))
    return opts


def hicache_options(t: Target, pool: Pool) -> tuple[list[tuple[str, object]], list[str]]:
    """SGLang HiCache for the plan's KV offload tiers (docs.sglang.io, HiCache best practices):
    ``--enable-hierarchical-cache`` with ``--hicache-size``, the host pool in GB of each TP rank
    (every rank allocates its own: the instance's cpu share over its GPUs, floored to whole GB),
    and ``--hicache-storage-backend`` for the tier below it, ``file`` for a local NVMe tier (its
    directory in SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR) or ``mooncake`` for a remote store.
    Returns the options and notes."""
    tiers = t.offload_bytes(pool)
    if not tiers:
        return [], []
    opts: list[tuple[str, object]] = [("--enable-hierarchical-cache", None)]
    notes: list[str] = []
    if "cpu" in tiers:
        opts.append(("--hicache-size", max(1, int(tiers["cpu"] / pool.parallel.gpus // 1e9))))
    else:
        notes.append(
            f"{pool.role}: the plan has no CPU tier, but HiCache stages every storage tier through a host "
            "pool (default --hicache-ratio 2: twice the GPU KV pool in host memory)"
        )
    if "remote" in tiers:
        opts.append(("--hicache-storage-backend", "mooncake"))
        if "nvme" in tiers:
            notes.append(f"{pool.role}: HiCache takes one storage backend: the remote store, not NVMe")
    elif "nvme" in tiers:
        opts.append(("--hicache-storage-backend", "file"))
        notes.append(
            f"{pool.role}: the NVMe tier is HiCache's file backend: set "
            "SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR to a directory on the node's NVMe drives"
        )
    return opts, notes


def render(t: Target, data: EngineData) -> Recipe:
    """The SGLang recipe of one target."""
    dis = data.table("disaggregation")
    fmt_opts, notes = dtype_options(t, fp8_kv="fp8_e4m3")
    bootstrap = {}

    def launch(inst: Instance, node: int) -> Command:
        pool = t.pool(inst.pool)
        opts: list[tuple[str, object]] = [
            ("--model-path", t.model_path),
            ("--host", "0.0.0.0"),
            ("--port", inst.port),
            *parallel_options(pool),
            ("--context-length", t.max_model_len),
            ("--max-running-requests", pool.max_num_seqs),
            ("--chunked-prefill-size", pool.max_batched_tokens if pool.chunked else -1),
            ("--mem-fraction-static", t.gpu_memory_utilization),
            *fmt_opts,
        ]
        if not pool.chunked:
            opts.append(("--max-prefill-tokens", pool.max_batched_tokens))
        hicache, hicache_notes = hicache_options(t, pool)
        opts += hicache
        notes.extend(n for n in hicache_notes if n not in notes)
        if len(inst.slots) > 1:
            rank = [s.node for s in inst.slots].index(node)
            opts += [
                ("--nnodes", len(inst.slots)),
                ("--node-rank", rank),
                ("--dist-init-addr", f"{host(inst.head)}:{DIST_INIT_PORT}"),
            ]
        if t.disaggregated:
            opts += [
                ("--disaggregation-mode", inst.pool),
                ("--disaggregation-transfer-backend", dis["transfer_backend"]),
            ]
            if inst.pool == "prefill":
                port = int(dis["bootstrap_port"]) + inst.port - BASE_PORT  # one per instance on a node
                bootstrap[inst.name] = port
                opts.append(("--disaggregation-bootstrap-port", port))
        return command(data, "python -m sglang.launch_server", (), opts, (cuda_devices(inst, node),))

    files, cmds = node_scripts(t, data, launch)
    if t.disaggregated:
        opts: list[tuple[str, object]] = [("--pd-disaggregation", None)]
        for i in t.placement.of_pool("prefill"):
            opts.append(("--prefill", [f"http://{host(i.head)}:{i.port}", bootstrap[i.name]]))
        for i in t.placement.of_pool("decode"):
            opts.append(("--decode", f"http://{host(i.head)}:{i.port}"))
    else:
        opts = [("--worker-urls", [f"http://{host(i.head)}:{i.port}" for i in t.placement.instances])]
    opts += [("--host", "0.0.0.0"), ("--port", SERVE_PORT)]
    router = command(data, "python -m sglang_router.launch_router", (), opts)
    text = front_script(
        t, data, "SGLang router (pip install sglang-router) in front of the instances.", router
    )
    files.append(RecipeFile(f"{directory(t, data)}/router.sh", text))
    cmds.append(router)
    if t.disaggregated:
        notes.append(
            f"KV transfer backend {dis['transfer_backend']} (SGLang supports "
            f"{', '.join(dis['transfer_backends'])}); mooncake also needs --disaggregation-ib-device"
        )
    return finish(t, data, files, cmds, notes)
