"""``pdplan deploy``: plan, then write launch recipes for the recommended configuration and each
style's best (vLLM, SGLang, TensorRT-LLM, Dynamo, llm-d; docs/deploy.md)."""

from __future__ import annotations

import argparse
from typing import Any

from model.cli import COMMANDS
from model.cli.common import print_json, print_table
from model.cli.plan import add_plan_args, add_scenario_args, plan_from_args
from model.errors import InputError
from model.recipes.catalog import DEFAULT_VERSIONS, ENGINES, check_engine, engine_data
from model.recipes.deploy import deploy

# The engine profile the plan uses for each recipe engine (Dynamo and llm-d run vLLM workers).
PLAN_PROFILE = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm", "dynamo": "vllm", "llm-d": "vllm"}


def register(sub: Any) -> None:
    p = sub.add_parser("deploy", help=COMMANDS["deploy"][1])
    add_scenario_args(p, engine_flag=False)
    add_plan_args(p)
    p.add_argument(
        "--engine",
        action="append",
        metavar="ENGINE",
        help=f"recipe engine: {', '.join(ENGINES)} or all (repeatable; default all)",
    )
    p.add_argument(
        "--engine-version",
        action="append",
        default=[],
        metavar="ENGINE=VERSION",
        help="engine version to target, e.g. vllm=0.12 (a bare VERSION with one --engine); "
        + "defaults: "
        + ", ".join(f"{e} {v}" for e, v in DEFAULT_VERSIONS.items()),
    )
    p.add_argument(
        "--plan-engine",
        help="serving-engine profile the plan uses (default: the recipe engine's, vllm when several)",
    )
    p.add_argument("--model-path", help="checkpoint to serve (default: the catalog's Hugging Face repo)")
    p.add_argument("--out-dir", required=True, metavar="DIR", help="write DIR/<target>/<engine>/...")
    p.add_argument("--force", action="store_true", help="replace recipe files already in --out-dir")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def engines_of(values: list[str] | None) -> tuple[str, ...]:
    """The --engine values: none or 'all' is every engine; each name checked."""
    if not values or "all" in values:
        return ENGINES
    return tuple(dict.fromkeys(check_engine(v) for v in values))


def versions_of(values: list[str], engines: tuple[str, ...]) -> dict[str, str]:
    """The --engine-version values as engine -> version."""
    out: dict[str, str] = {}
    for v in values:
        if "=" in v:
            engine, _, version = v.partition("=")
            out[check_engine(engine.strip())] = version.strip()
        elif len(engines) == 1:
            out[engines[0]] = v.strip()
        else:
            allowed = "ENGINE=VERSION (a bare VERSION needs exactly one --engine)"
            raise InputError("--engine-version", v, allowed)
    return out


def run(args: argparse.Namespace) -> int:
    engines = engines_of(args.engine)
    versions = versions_of(args.engine_version, engines)
    for e in engines:  # an unknown version fails before the plan runs
        engine_data(e, versions.get(e))
    profiles = {PLAN_PROFILE[e] for e in engines}
    profile = args.plan_engine or (profiles.pop() if len(profiles) == 1 else "vllm")
    args.no_thresholds = True  # the recipes do not use the flip thresholds: skip their searches
    result = plan_from_args(args, engine=profile)
    dep = deploy(result, engines, versions, args.model_path)
    paths = dep.write(args.out_dir, force=args.force)
    if args.json:
        print_json(
            {
                "verdict": result.verdict,
                "plan_engine_profile": profile,
                "versions": dict(dep.versions),
                "recipes": [
                    {
                        "target": r.target,
                        "style": r.style,
                        "label": r.label,
                        "engine": r.engine,
                        "version": r.version,
                        "files": [f.path for f in r.files],
                        "notes": list(r.notes),
                    }
                    for r in dep.recipes
                ],
                "written": [str(p) for p in paths],
            }
        )
        return 0
    print(f"verdict: {result.verdict} (plan with the {profile} engine profile)")
    print(f"wrote {len(paths)} files under {args.out_dir}\n")
    print_table(
        [(r.target, r.style, f"{r.engine} {r.version}", len(r.files), r.label) for r in dep.recipes],
        ["target", "style", "engine", "files", "configuration"],
    )
    return 0
