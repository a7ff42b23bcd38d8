"""``pdplan estimate``: prefill, decode, TPOT and memory fit of one model on one GPU group."""

from __future__ import annotations

import argparse
from typing import Any

from model.cli import COMMANDS
from model.cli.common import add_profile_dir, print_json
from model.hardware.parallelism import Parallelism
from model.physics.estimate import Estimate, estimate
from model.serving.enumeration import layout_from_text
from model.units import format_bytes, format_time


def register(sub: Any) -> None:
    p = sub.add_parser("estimate", help=COMMANDS["estimate"][1])
    p.add_argument("--model", required=True, help="model name or a Hugging Face config.json path")
    p.add_argument("--gpu", required=True, help="GPU name or a .toml profile path")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (default 1)")
    p.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree (default 1)")
    p.add_argument(
        "--parallelism",
        help='whole layout instead of --tp/--pp, e.g. "dep=16" or "tp=2,dp=4,ep=8" (8 GPUs per node)',
    )
    p.add_argument("--dtype", default="bf16", help="weight format: bf16, fp16, fp8, int8, int4, fp4 ...")
    p.add_argument("--kv-dtype", default=None, help="KV-cache format (default: the weight format, or bf16)")
    p.add_argument("--isl", type=int, required=True, help="prompt (input) tokens per request")
    p.add_argument("--osl", type=int, required=True, help="output tokens per request")
    p.add_argument("--batch", type=int, default=1, help="requests batched together (default 1)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_profile_dir(p)
    p.set_defaults(handler=run)


def _print(e: Estimate, par: Parallelism | None) -> None:
    kv = e.kv_dtype
    where = (
        f"{par.gpus} x {e.gpu} ({par.label})" if par else f"{e.tp * e.pp} x {e.gpu} (TP {e.tp}, PP {e.pp})"
    )
    print(f"{e.model} on {where}, weights {e.dtype}, KV {kv}")
    print(f"  request: {e.isl} prompt + {e.osl} output tokens, batch {e.batch}")
    p, d = e.prefill, e.decode
    print(
        f"  prefill      {format_time(e.prefill_s):>12}  ({e.prefill_bound}-bound: "
        f"compute {format_time(float(p.compute_s))}, "
        f"memory {format_time(float(p.memory_s))}, comm {format_time(float(p.comm_s))}, "
        f"overhead {format_time(float(p.overhead_s))})"
    )
    print(
        f"  decode step  {format_time(e.decode_step_s):>12}  ({e.decode_bound}-bound at context "
        f"{e.decode_context_tokens:g}: compute {format_time(float(d.compute_s))}, "
        f"memory {format_time(float(d.memory_s))}, "
        f"comm {format_time(float(d.comm_s))}, overhead {format_time(float(d.overhead_s))})"
    )
    print(f"  TPOT         {format_time(e.tpot_s):>12}  (mean over the growing context)")
    print(f"  generation   {format_time(e.generation_s):>12}  ({e.output_tokens_per_s:.1f} output tokens/s)")
    print(f"  weights/GPU  {format_bytes(e.weight_bytes_per_gpu):>12}")
    print(
        f"  KV/token     {format_bytes(e.kv_bytes_per_token):>12}  "
        f"({format_bytes(e.kv_bytes_per_token_per_gpu)} per GPU; "
        f"{format_bytes(e.kv_bytes_per_request)} per request)"
    )
    print(
        f"  KV capacity  {e.kv_capacity_tokens:>12,.0f} tokens -> max batch {e.max_batch} at "
        f"{e.isl + e.osl} tokens"
    )
    print(f"  memory       {'fits' if e.fits else 'DOES NOT FIT'}: {e.reason}")


def _layout(text: str | None) -> Parallelism | None:
    """``--parallelism`` as a Parallelism spread over 8-GPU nodes (enumeration.layout_from_text)."""
    return None if text is None else layout_from_text("parallelism", text)


def run(args: argparse.Namespace) -> int:
    par = _layout(args.parallelism)
    e = estimate(
        args.model,
        args.gpu,
        tp=args.tp,
        pp=args.pp,
        parallel=par,
        dtype=args.dtype,
        kv_dtype=args.kv_dtype,
        isl=args.isl,
        osl=args.osl,
        batch=args.batch,
        profile_dirs=args.profile_dir or None,
    )
    if args.json:
        print_json(e.to_dict())
    else:
        _print(e, par)
    return 0
