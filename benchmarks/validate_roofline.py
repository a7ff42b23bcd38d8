"""Compare roofline predictions with published measurements (tests/data/published_measurements.csv).

Run: ``.venv/bin/python benchmarks/validate_roofline.py [--markdown]``. Prints one row per
measurement (prediction, measurement, error), the rows it cannot evaluate yet with the reason, and
the median absolute percentage error (MdAPE) per group: "prefill" (prefill / TTFT rows) and
"decode" (TPOT rows, and end-to-end rows of a generation whose time is mostly decode steps), for
the "core" set (the 23 batch-1 rows the 20% target was set on) and for every evaluated row, plus
the issue-16 categories (MoE, FP8/FP4, consumer, AMD, long prompt, large batch).
Uses the default per-GPU efficiencies and the engine profile the row names (``engine_profile``:
TensorRT-LLM and NIM -> trtllm, vLLM -> vllm, SGLang -> sglang, others -> none): its per-step,
per-kernel and per-sequence overheads, and, for a TTFT observed at the client (``observed`` =
client), its per-request overhead; a release with a profile of its own (``ENGINE_VERSION_PROFILES``)
uses that one. llama.cpp rows run its FP16-accumulate GEMMs, attention without FlashAttention and
prompts in 512-token micro-batches (``ENGINE_ACCUMULATE``, ``ENGINE_ATTENTION``,
``ENGINE_UBATCH_TOKENS``); TPOT rows with batch > 1 are closed loops (:func:`closed_loop_tpot_s`).
The ``split`` column (train / holdout) is a seeded hash of the
row id (:func:`split_of`), never chosen by hand; constants fitted on the table use train rows only.

A row is skipped, with its reason, when its ``not_expressible`` column names a feature the model
lacks (speculative decoding, ...), when its model is not in the catalog, or when the physics
refuses its layout (expert parallelism and attention-DP until issue 14 lands): such rows start
counting as soon as the model can express them, with no change to the file.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from model.errors import PdplanError, UnknownNameError
from model.hardware.catalog import get_engine, get_gpu
from model.hardware.formats import get_format
from model.hardware.parallelism import Parallelism
from model.llm.catalog import get_model
from model.physics.decode_tokens import tokens_per_decode_step
from model.physics.deployment import Deployment
from model.physics.generation import chunked_prefill_time_s, generation_time_s, mean_tpot_s
from model.physics.steps import prefill_cost
from model.queueing.interference import closed_loop_prefills_per_step, stalled_step_s

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "published_measurements.csv"
GROUP = {"prefill_s": "prefill", "tpot_s": "decode", "e2e_s": "decode"}
SETS = ("core", "ext")
GROUPS = ("prefill", "decode")
# Issue 16's categories, each a predicate on a row. Long prompt: >= 8k tokens; large batch: >= 8.
LONG_PROMPT_TOKENS = 8192
LARGE_BATCH = 8
LOW_PRECISION = ("fp8", "fp8_block", "nvfp4", "mxfp4")
SPLITS = ("train", "holdout")
SPLIT_SEED = "pdplan-issue16:"
# Engine profile of a row, by the first word of its ``engine`` column (NIM runs TensorRT-LLM).
ENGINE_PROFILES = {"tensorrt-llm": "trtllm", "nim": "trtllm", "vllm": "vllm", "sglang": "sglang"}
# Engine releases with a profile of their own, by the start of the ``engine`` column (lower case), checked
# first: the first releases serving DeepSeek-V3/R1 (hardware_profiles/engines/{vllm-0.7,sglang-0.4}.toml,
# whose step_extra is measured by the SGLang team, not fitted on this table), and TensorRT-LLM 0.5 - 0.7
# (2023: TensorRT 9's FP8 GEMMs, the ones LOW_PRECISION_MFU_RATIO was measured on; trtllm-0.5.toml).
ENGINE_VERSION_PROFILES = {
    "vllm 0.7.": "vllm-0.7",
    "sglang 0.4.": "sglang-0.4",
    "tensorrt-llm 0.": "trtllm-0.5",
}
# Accumulator of an engine's 16-bit GEMMs (model.physics.deployment.GEMM_ACCUMULATORS), by the same
# first word: llama.cpp multiplies in FP16 with FP16 accumulation (CUBLAS_COMPUTE_16F); the others
# accumulate in FP32 (the default).
ENGINE_ACCUMULATE = {"llama.cpp": "fp16"}
# Attention kernel of an engine (model.physics.materialised_attention.ATTENTION_KERNELS), by the same
# first word: llama.cpp's rows ran llama-bench with its default flash_attn = false (llama.cpp 3bc10cb4,
# May 2024, examples/llama-bench/llama-bench.cpp cmd_params_defaults; FlashAttention did not exist in
# llama.cpp before April 2024), so KQ, softmax and KQV are separate kernels over a score matrix in HBM.
ENGINE_ATTENTION = {"llama.cpp": "materialised"}
# Tokens per forward pass an engine splits a prompt into: llama.cpp evaluates a prompt in physical
# micro-batches of n_ubatch = 512 tokens (llama-bench cmd_params_defaults n_ubatch {512}; before March
# 2024 n_batch = 512 played that role), each attending to the KV of the earlier ones; the others run
# a prompt in one step.
ENGINE_UBATCH_TOKENS = {"llama.cpp": 512}


def split_of(row_id: str) -> str:
    """ "holdout" for one row in three, by sha256(SPLIT_SEED + id) mod 3 == 0; else "train"."""
    digest = int(hashlib.sha256((SPLIT_SEED + row_id).encode()).hexdigest(), 16)
    return "holdout" if digest % 3 == 0 else "train"


def _first_word(engine: str) -> str:
    return engine.strip().split()[0].lower() if engine.strip() else ""


def engine_profile(engine: str) -> str | None:
    """The engine profile a row's ``engine`` text maps to (None: no profile, GPU defaults only): a
    release's own profile (ENGINE_VERSION_PROFILES), else the engine's (ENGINE_PROFILES)."""
    text = engine.strip().lower()
    for prefix, name in ENGINE_VERSION_PROFILES.items():
        if text.startswith(prefix):
            return name
    return ENGINE_PROFILES.get(_first_word(engine))


def gemm_accumulate(engine: str) -> str:
    """The accumulator a row's engine runs 16-bit GEMMs with (ENGINE_ACCUMULATE, else "fp32")."""
    return ENGINE_ACCUMULATE.get(_first_word(engine), "fp32")


@dataclass(frozen=True)
class Row:
    id: str
    model: str
    gpu: str
    tp: int
    pp: int
    dtype: str
    kv_dtype: str
    batch: int
    isl: int
    osl: int
    metric: str
    measured_s: float
    engine: str
    source: str
    predicted_s: float  # NaN when the row is skipped
    ep: int = 1
    dp_attention: int = 1
    set: str = "core"
    skip: str = ""  # why the row is not evaluated ("" = evaluated)
    categories: tuple[str, ...] = ()
    observed: str = "engine"
    split: str = "train"

    @property
    def evaluated(self) -> bool:
        return not self.skip

    @property
    def error(self) -> float:
        """Signed relative error (predicted - measured) / measured (NaN when skipped)."""
        return self.predicted_s / self.measured_s - 1.0

    @property
    def group(self) -> str:
        return GROUP[self.metric]


def parallelism(r: dict[str, str]) -> Parallelism:
    """The row's layout: TP, PP and, where the file gives them, EP and attention-DP."""
    return Parallelism(
        tp=int(r["tp"]),
        pp=int(r["pp"]),
        ep=int(r.get("ep") or 1),
        dp_attention=int(r.get("dp_attention") or 1),
    )


def deployment(r: dict[str, str], **overrides: object) -> Deployment:
    """The row's deployment: default efficiencies of the GPU profile, the engine profile's overheads
    (``overrides`` replace Deployment fields, e.g. ``overheads`` while fitting)."""
    gpu = get_gpu(r["gpu"])
    name = engine_profile(r["engine"])
    kw: dict[str, object] = {
        "overheads": get_engine(name).overheads(gpu) if name else None,
        "gemm_accumulate": gemm_accumulate(r["engine"]),
        "attention_kernel": ENGINE_ATTENTION.get(_first_word(r["engine"]), "fused"),
    }
    kw.update(overrides)
    return Deployment(
        get_model(r["model"]),
        gpu,
        parallel=parallelism(r),
        weight_dtype=r["dtype"],
        kv_dtype=r["kv_dtype"] or None,
        **kw,
    )


def predict(r: dict[str, str], **overrides: object) -> float:
    """The model's value for one measurement row (:func:`deployment`); a TTFT observed at the
    client includes the engine's per-request overhead."""
    dep = deployment(r, **overrides)
    b, isl, osl = int(r["batch"]), int(r["isl"]), int(r["osl"])
    if r["metric"] == "prefill_s":
        client = dep.engine_overheads.request_s if r.get("observed") == "client" else 0.0
        ubatch = ENGINE_UBATCH_TOKENS.get(_first_word(r["engine"]))
        if ubatch is not None and b == 1:  # micro-batches of one prompt: chunks with their prefix
            return float(chunked_prefill_time_s(dep, isl, ubatch)) + client
        return float(prefill_cost(dep, isl, batch=b).time_s) + client
    if r["metric"] == "tpot_s":
        return float(closed_loop_tpot_s(dep, b, isl, osl))
    if r["metric"] == "e2e_s":
        return float(generation_time_s(dep, b, isl, osl))
    raise ValueError(f"{r['id']}: unknown metric {r['metric']!r}")


def closed_loop_tpot_s(dep: Deployment, concurrency: int, isl: int, osl: int) -> float:
    """TPOT of a closed-loop benchmark at ``concurrency`` C (every TPOT row with batch > 1: genai-perf,
    ``vllm bench serve`` / SGLang ``bench_serving --max-concurrency``): decode steps at batch C, each
    also waiting for the other requests' prompts, (C - 1) / (decode steps + 1) per step of their prefill
    less the step overhead the decode step pays anyway: the stalled-step form pdplan's calibration fits
    with (model.calibrate.problem, model.queueing.interference.stalled_step_s and
    closed_loop_prefills_per_step; DistServe sec. 2.2, Sarathi-Serve sec. 2-3). C = 1: mean_tpot_s."""
    tpot = float(mean_tpot_s(dep, concurrency, isl, osl))
    if concurrency <= 1:
        return tpot
    per_step = tokens_per_decode_step(dep)
    stall = max(float(prefill_cost(dep, isl).time_s) - dep.overhead_s, 0.0)
    k = closed_loop_prefills_per_step(concurrency, osl, per_step)
    return float(stalled_step_s(tpot * per_step.emitted, k, stall)) / per_step.emitted


def evaluate(r: dict[str, str]) -> tuple[float, str]:
    """(prediction, "") or (NaN, the reason the row cannot be evaluated yet)."""
    if r.get("not_expressible"):
        return math.nan, f"not yet expressible: {r['not_expressible']}"
    try:
        get_model(r["model"])
    except UnknownNameError:
        return math.nan, f"model {r['model']} not in the catalog"
    try:
        return predict(r), ""
    except PdplanError as err:  # e.g. EP / attention-DP refused by the physics
        return math.nan, f"not yet expressible: {err}"


def categories(r: dict[str, str]) -> tuple[str, ...]:
    """Issue-16 categories of one row (a row can be in several)."""
    out = []
    try:
        if get_model(r["model"]).num_experts > 0:
            out.append("moe")
    except (UnknownNameError, AttributeError):
        pass
    try:
        if get_format(r["dtype"]).name in LOW_PRECISION:
            out.append("fp8/fp4")
    except PdplanError:
        pass
    try:
        gpu = get_gpu(r["gpu"])
        if gpu.name.startswith("rtx-") and "pro" not in gpu.name:
            out.append("consumer")
        if gpu.vendor == "amd":
            out.append("amd")
    except PdplanError:
        pass
    if int(r["isl"]) >= LONG_PROMPT_TOKENS:
        out.append("long prompt")
    if int(r["batch"]) >= LARGE_BATCH:
        out.append("large batch")
    return tuple(out)


def load(path: Path = DATA) -> list[Row]:
    """Read the measurement file and attach a prediction (or a skip reason) to every row."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        predicted, skip = evaluate(r)
        out.append(
            Row(
                id=r["id"],
                model=r["model"],
                gpu=r["gpu"],
                tp=int(r["tp"]),
                pp=int(r["pp"]),
                dtype=r["dtype"],
                kv_dtype=r["kv_dtype"],
                batch=int(r["batch"]),
                isl=int(r["isl"]),
                osl=int(r["osl"]),
                metric=r["metric"],
                measured_s=float(r["measured_s"]),
                engine=r["engine"],
                source=r["source"],
                predicted_s=predicted,
                ep=int(r.get("ep") or 1),
                dp_attention=int(r.get("dp_attention") or 1),
                set=r.get("set") or "core",
                skip=skip,
                categories=categories(r),
                observed=r.get("observed") or "engine",
                split=r.get("split") or split_of(r["id"]),
            )
        )
    return out


def selected(
    rows: list[Row],
    group: str,
    subset: str | None = None,
    category: str | None = None,
    split: str | None = None,
) -> list[Row]:
    """Evaluated rows of one group; only set ``subset`` / category ``category`` / split ``split``
    when given."""
    return [
        r
        for r in rows
        if r.evaluated
        and r.group == group
        and (subset is None or r.set == subset)
        and (category is None or category in r.categories)
        and (split is None or r.split == split)
    ]


def mdape(
    rows: list[Row],
    group: str,
    subset: str | None = None,
    category: str | None = None,
    split: str | None = None,
) -> float:
    """Median absolute percentage error of :func:`selected` rows, in percent (NaN when none)."""
    errs = [abs(r.error) for r in selected(rows, group, subset, category, split)]
    return 100.0 * float(np.median(errs)) if errs else float("nan")


def count(
    rows: list[Row],
    group: str,
    subset: str | None = None,
    category: str | None = None,
    split: str | None = None,
) -> int:
    """Evaluated rows counted by :func:`mdape` for the same arguments."""
    return len(selected(rows, group, subset, category, split))


CATEGORIES = ("moe", "fp8/fp4", "consumer", "amd", "long prompt", "large batch")


def summary_lines(rows: list[Row]) -> list[str]:
    """MdAPE per group for the core set, the whole evaluated table and each category."""
    lines = []
    for label, subset in (("core set", "core"), ("all evaluated rows", None)):
        for g in ("prefill", "decode"):
            lines.append(
                f"- **{g}, {label}**: MdAPE {mdape(rows, g, subset):.1f}% over {count(rows, g, subset)} rows"
            )
    for sp in SPLITS:
        parts = [f"{g} {mdape(rows, g, split=sp):.1f}% ({count(rows, g, split=sp)})" for g in GROUPS]
        lines.append(f"- split **{sp}**: " + ", ".join(parts))
    for c in CATEGORIES:
        parts = [f"{g} {mdape(rows, g, None, c):.1f}% ({count(rows, g, None, c)})" for g in GROUPS]
        lines.append(f"- category **{c}**: " + ", ".join(parts))
    skipped = [r for r in rows if not r.evaluated]
    lines.append(f"- rows not evaluated yet: {len(skipped)} of {len(rows)}")
    return lines


def markdown(rows: list[Row]) -> str:
    lines = [
        "| # | set | split | model | GPU | TP | dtype | batch | ISL | OSL | metric | measured (ms) "
        "| predicted (ms) | error | engine |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in enumerate((r for r in rows if r.evaluated), 1):
        lines.append(
            f"| {n} | {r.set} | {r.split} | {r.model} | {r.gpu} | {r.tp} | {r.dtype} | {r.batch} | {r.isl} "
            f"| {r.osl} | {r.metric} | "
            f"{r.measured_s * 1e3:.2f} | {r.predicted_s * 1e3:.2f} | {100 * r.error:+.1f}% | {r.engine} |"
        )
    lines.append("")
    lines.extend(summary_lines(rows))
    skipped = [r for r in rows if not r.evaluated]
    if skipped:
        lines += ["", "| id | model | GPU | metric | measured (ms) | why not evaluated |", "|---" * 6 + "|"]
        for r in skipped:
            lines.append(
                f"| {r.id} | {r.model} | {r.gpu} | {r.metric} | {r.measured_s * 1e3:.2f} | {r.skip} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print the docs/validation.md table")
    args = ap.parse_args()
    rows = load()
    if args.markdown:
        print(markdown(rows))
        return
    for r in rows:
        if r.evaluated:
            print(
                f"{r.id:44s} {r.metric:9s} measured {r.measured_s * 1e3:10.2f} ms  predicted "
                f"{r.predicted_s * 1e3:10.2f} ms  {100 * r.error:+6.1f}%"
            )
    for r in rows:
        if not r.evaluated:
            print(f"{r.id:44s} skipped: {r.skip}")
    print("\n".join(summary_lines(rows)))


if __name__ == "__main__":
    main()
