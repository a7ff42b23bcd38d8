"""``pdplan list gpus|links|nodes|engines|models`` and ``pdplan show gpu|link|node|engine|model NAME``."""

from __future__ import annotations

import argparse
from typing import Any

from model.cli import COMMANDS
from model.cli.common import add_profile_dir, print_json, print_table
from model.hardware.catalog import load_catalog, unique


def register(sub: Any) -> None:
    p = sub.add_parser("list", help=COMMANDS["list"][1])
    p.add_argument("what", choices=["gpus", "links", "nodes", "engines", "models"])
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_profile_dir(p)
    p.set_defaults(handler=run_list)

    s = sub.add_parser("show", help=COMMANDS["show"][1])
    s.add_argument("what", choices=["gpu", "link", "node", "engine", "model"])
    s.add_argument("name", help="name, alias, or a .toml / config.json path")
    s.add_argument("--json", action="store_true")
    add_profile_dir(s)
    s.set_defaults(handler=run_show)


def _gpu_row(g: Any) -> dict[str, Any]:
    return {
        "name": g.name,
        "full_name": g.full_name,
        "memory_gb": g.memory_bytes / 1e9,
        "bandwidth_tb_s": g.memory_bandwidth_bytes_per_s / 1e12,
        "bf16_tflops": dict(g.peak_flops_per_s).get("bf16", 0.0) / 1e12,
        "fp8_tflops": dict(g.peak_flops_per_s).get("fp8", 0.0) / 1e12,
        "interconnect": g.interconnect_kind,
        "tdp_w": g.tdp_w,
        "usd_per_hour": g.price_usd_per_hour,
    }


def _link_row(li: Any) -> dict[str, Any]:
    return {
        "name": li.name,
        "full_name": li.full_name,
        "kind": li.kind,
        "bandwidth_gbit_s": li.bandwidth_bytes_per_s * 8 / 1e9,
        "latency_us": li.latency_s * 1e6,
        "efficiency": li.efficiency,
    }


def _node_row(n: Any) -> dict[str, Any]:
    return {
        "name": n.name,
        "full_name": n.full_name,
        "gpu": n.gpu,
        "gpus_per_node": n.gpus_per_node,
        "intra_node_link": n.intra_node_link,
        "nic_link": n.nic_link,
        "nics_per_node": n.nics_per_node,
        "nvlink_domain_gpus": n.domain_gpus,
        "storage_bandwidth_bytes_per_s": n.weight_load_bytes_per_s,
    }


def _engine_row(e: Any) -> dict[str, Any]:
    return {
        "name": e.name,
        "full_name": e.full_name,
        "version": e.version,
        "max_num_seqs": e.max_num_seqs,
        "small_gpu_max_num_seqs": e.small_gpu_max_num_seqs,  # None: the same cap on every GPU
        "prefill_token_cap": e.prefill_token_cap,
        "chunk_tokens": e.chunk_tokens,
        "step_extra_ms": e.step_overhead_extra_s * 1e3,
        "kv_transfer": ",".join(e.kv_transfer_modes),
    }


def _model_row(a: Any) -> dict[str, Any]:
    from model.llm.arch import active_params, kv_bytes_per_token, total_params
    from model.llm.attention import attention_kind

    return {
        "name": a.name,
        "display_name": a.label,
        "layers": a.num_layers,
        "hidden": a.hidden_size,
        "heads": a.num_heads,
        "kv_heads": a.num_kv_heads,
        "experts": a.num_experts,
        "total_params": total_params(a),
        "active_params": active_params(a),
        "kv_bytes_per_token_bf16": kv_bytes_per_token(a, "bf16"),
        "attention": attention_kind(a),
    }


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def run_list(args: argparse.Namespace) -> int:
    if args.what == "models":
        from model.llm.arch import params_b
        from model.llm.catalog import list_models

        rows = [_model_row(a) for a in list_models()]
        for r in rows:
            r["total_params"] = params_b(r["total_params"])
            r["active_params"] = params_b(r["active_params"])
    else:
        catalog = load_catalog(args.profile_dir or None)
        table = {
            "gpus": catalog.gpus,
            "links": catalog.links,
            "nodes": catalog.nodes,
            "engines": catalog.engines,
        }[args.what]
        fn = {"gpus": _gpu_row, "links": _link_row, "nodes": _node_row, "engines": _engine_row}[args.what]
        rows = [fn(p) for p in unique(table)]
    if args.json:
        print_json(rows)
    elif rows:
        header = list(rows[0])
        print_table([[_fmt(r[h]) for h in header] for r in rows], header)
    return 0


def run_show(args: argparse.Namespace) -> int:
    if args.what == "model":
        from model.llm.arch import describe
        from model.llm.catalog import get_model

        info: dict[str, Any] = describe(get_model(args.name))
        sources: dict[str, str] = {}
    else:
        catalog = load_catalog(args.profile_dir or None)
        lookup = {"gpu": catalog.gpu, "link": catalog.link, "node": catalog.node, "engine": catalog.engine}
        item = lookup[args.what](args.name)
        info = {k: getattr(item, k) for k in item.__dataclass_fields__ if k != "sources"}
        sources = dict(item.sources)
    if args.json:
        print_json({**info, "sources": sources})
        return 0
    width = max(len(k) for k in info)
    for key, value in info.items():
        print(f"{key.ljust(width)}  {_fmt(value)}")
    if sources:
        print("\nsources:")
        for key, src in sources.items():
            print(f"  {key}: {src}")
    return 0
