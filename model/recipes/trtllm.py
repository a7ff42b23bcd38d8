"""TensorRT-LLM recipe: ``trtllm-serve`` per instance with an extra-LLM-API-options YAML per pool
and, for disaggregation, the ``trtllm-serve disaggregated`` server with its YAML config
(TensorRT-LLM's examples/disaggregated). Flags: model/recipes/data/trtllm-<version>.toml; the
YAML files are checked against model/recipes/schemas/trtllm-<version>-*.json."""

from __future__ import annotations

from model.recipes.catalog import EngineData
from model.recipes.command import Command, command
from model.recipes.placement import Instance
from model.recipes.recipe import (
    SERVE_PORT,
    Recipe,
    RecipeFile,
    cuda_devices,
    directory,
    dump_yaml,
    finish,
    front_script,
    header,
    host,
    node_scripts,
    url,
)
from model.recipes.target import Pool, Target


def options_yaml(t: Target, pool: Pool, data: EngineData) -> dict:
    """The --extra_llm_api_options document of one pool: chunked prefill as planned, attention DP,
    FP8 KV cache; on prefill/decode pools the KV cache transceiver, and on prefill (context)
    servers the overlap scheduler off, as TensorRT-LLM's disaggregated example requires. A CPU KV
    offload tier is the KV cache manager's host pool (LLM API KvCacheConfig.host_cache_size, bytes
    per rank; blocks evicted from HBM are offloaded there and onboarded on reuse)."""
    doc: dict = {"enable_chunked_prefill": pool.chunked}
    if pool.parallel.dp_attention > 1:
        doc["enable_attention_dp"] = True
    kv: dict = {"dtype": "fp8"} if t.kv_dtype.startswith("fp8") else {}
    cpu = t.offload_bytes(pool).get("cpu")
    if cpu is not None:  # KvCacheConfig.host_cache_size: bytes of each rank's host (secondary) pool
        kv["host_cache_size"] = int(cpu / pool.parallel.gpus)
    if kv:
        doc["kv_cache_config"] = kv
    if pool.role == "prefill":
        doc["disable_overlap_scheduler"] = True
    if pool.role in ("prefill", "decode"):
        doc["cache_transceiver_config"] = {
            "backend": data.table("disaggregation")["cache_backend"],
            "max_tokens_in_buffer": t.max_model_len,
        }
    return doc


def render(t: Target, data: EngineData) -> Recipe:
    """The TensorRT-LLM recipe of one target."""
    d = directory(t, data)
    notes: list[str] = []
    if t.weight_dtype not in ("bf16", "fp16"):
        notes.append(
            f"weights in {t.weight_dtype}: serve a checkpoint quantised to that format (TensorRT-LLM "
            "reads the format from the checkpoint)"
        )
    others = sorted({k for p in t.pools for k in t.offload_bytes(p)} - {"cpu"})
    if others:
        notes.append(
            f"the plan's {' and '.join(others)} KV tier is not set: TensorRT-LLM's KV cache manager offloads "
            "to host memory only (kv_cache_config.host_cache_size)"
        )
    files: list[RecipeFile] = []
    for pool in t.pools:
        text = header(t, data, f"--extra_llm_api_options of the {pool.role} instances.") + dump_yaml(
            options_yaml(t, pool, data)
        )
        schema = f"trtllm-{data.version}-extra-llm-api-options"
        files.append(RecipeFile(f"{d}/{pool.role}-options.yaml", text, schema))

    def launch(inst: Instance, node: int) -> Command | None:
        if node != inst.head:
            return None  # MPI ranks on the other nodes: see the note
        pool = t.pool(inst.pool)
        par = pool.parallel
        opts: list[tuple[str, object]] = [
            ("--host", "0.0.0.0"),
            ("--port", inst.port),
            ("--backend", "pytorch"),
            ("--tp_size", par.tp * par.dp_attention),
            ("--pp_size", par.pp),
        ]
        if par.ep > 1:
            opts.append(("--ep_size", par.ep))
        opts += [
            ("--max_batch_size", pool.max_num_seqs),
            ("--max_num_tokens", pool.max_batched_tokens),
            ("--max_seq_len", t.max_model_len),
            ("--extra_llm_api_options", f"{pool.role}-options.yaml"),
        ]
        return command(data, "trtllm-serve", (t.model_path,), opts, (cuda_devices(inst, node),))

    scripts, cmds = node_scripts(t, data, launch)
    files += scripts
    if any(len(i.slots) > 1 for i in t.placement.instances):
        notes.append(
            "instances spanning nodes need one MPI rank per GPU across their nodes (mpirun or srun with "
            "trtllm-llmapi-launch); the node scripts start the single-node instances and rank 0 only"
        )
    if t.disaggregated:
        cfg = {
            "hostname": host(0),
            "port": SERVE_PORT,
            "backend": "pytorch",
            "context_servers": _servers(t, "prefill"),
            "generation_servers": _servers(t, "decode"),
        }
        text = header(t, data, "trtllm-serve disaggregated -c disagg_config.yaml") + dump_yaml(cfg)
        files.append(RecipeFile(f"{d}/disagg_config.yaml", text, f"trtllm-{data.version}-disagg-config"))
        server = command(data, "trtllm-serve disaggregated", (), [("-c", "disagg_config.yaml")])
        text = front_script(
            t, data, f"Disaggregated server on {host(0)}: routes context then generation.", server
        )
        files.append(RecipeFile(f"{d}/disagg_server.sh", text))
        cmds.append(server)
    elif len(t.placement.instances) > 1:
        notes.append(
            "trtllm-serve serves one instance: put an HTTP load balancer in front of the replicas at "
            + ", ".join(url(i) for i in t.placement.instances)
            + (f", routing as the plan assumed: {t.router}" if t.router else "")
        )
    return finish(t, data, files, cmds, notes)


def _servers(t: Target, role: str) -> dict:
    insts = t.placement.of_pool(role)
    par = t.pool(role).parallel
    return {
        "num_instances": len(insts),
        "tensor_parallel_size": par.tp * par.dp_attention,
        "pipeline_parallel_size": par.pp,
        "urls": [url(i) for i in insts],
    }
