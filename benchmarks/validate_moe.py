"""Published per-node (or per-GPU) prefill and decode throughputs of large-scale DeepSeek deployments
(tests/data/moe_deployments.csv) next to pdplan's prediction (docs/validation.md, "MoE deployments at
scale").

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/validate_moe.py``. For every row it builds the row's
layout (TP x attention-DP GPUs per instance, EP over the same GPUs, spread over ``nodes`` nodes, with
the row's ``redundant_experts``) and asks the physics for it; a layout or profile the model cannot
express prints ``not yet expressible: <reason>``. The prediction needs the weight format (``dtype``)
and the per-instance batch the deployment ran (``batch_per_instance``): prefill throughput = ISL x
batch / prefill step time, decode throughput = batch / decode step time at the row's mean KV length
(``context_tokens``, else ISL + OSL / 2), each per node (divided by the instance's nodes) or per GPU
as the row's metric says, with two-micro-batch overlap where the row's deployment ran it
(``micro_batch_overlap`` = 1: DeepSeek's, SGLang's and RTP-LLM's all state it). One step at that
batch, no queueing: the deployments were measured saturated. Rows that do not publish the batch
print ``needs batch_per_instance``; nothing is guessed.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from model.errors import PdplanError
from model.hardware.catalog import get_gpu
from model.hardware.parallelism import Parallelism
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.steps import decode_step_cost, prefill_cost

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "moe_deployments.csv"
METRICS = (
    "input_tokens_per_s_per_node",
    "output_tokens_per_s_per_node",
    "input_tokens_per_s_per_gpu",
    "output_tokens_per_s_per_gpu",
)


@dataclass(frozen=True)
class Result:
    id: str
    metric: str
    measured: float
    predicted: float | None  # None when not evaluated
    status: str  # "" when predicted, else why not

    @property
    def error(self) -> float | None:
        """Signed relative error (predicted - measured) / measured, None when not predicted."""
        return None if self.predicted is None else self.predicted / self.measured - 1.0


def layout(r: dict[str, str]) -> Parallelism:
    """The instance layout of a row: TP x attention-DP GPUs, EP over them, split over its nodes
    (``nodes`` blank: as many nodes as its GPUs fill at ``gpus_per_node``)."""
    tp, ep, dp = int(r["tp"]), int(r["ep"]), int(r["dp_attention"])
    nodes = int(r["nodes"]) if r["nodes"] else -(-tp * dp // int(r["gpus_per_node"]))
    return Parallelism(tp=tp, ep=ep, dp_attention=dp, nodes=nodes)


def predicted_throughput(r: dict[str, str], dep: Deployment, par: Parallelism) -> float:
    """Tokens/s per node or per GPU for the row's phase at its published per-instance batch."""
    batch = int(r["batch_per_instance"])
    isl = int(r["isl"] or 0)
    if r["phase"] == "prefill":
        tokens_per_s = isl * batch / float(prefill_cost(dep, isl, batch=batch).time_s)
    else:
        context = float(r["context_tokens"]) if r.get("context_tokens") else isl + int(r["osl"] or 0) / 2
        tokens_per_s = batch / float(decode_step_cost(dep, batch, context).time_s)
    return tokens_per_s / (par.nodes if r["metric"].endswith("per_node") else par.gpus)


def evaluate(r: dict[str, str]) -> Result:
    """One row's prediction, or the reason it cannot be made yet."""
    measured = float(r["value"])
    if r["metric"] not in METRICS:
        raise ValueError(f"{r['id']}: unknown metric {r['metric']!r} (allowed: {', '.join(METRICS)})")
    try:
        par = layout(r)
        dep = Deployment(
            get_model(r["model"]),
            get_gpu(r["gpu"]),
            parallel=par,
            weight_dtype=r["dtype"] or "bf16",
            kv_dtype=r["kv_dtype"] or None,
            redundant_experts=int(r.get("redundant_experts") or 0),
            micro_batch_overlap=bool(r.get("micro_batch_overlap")),
        )
        # Ask the physics for one step at the row's layout: it refuses a layout it cannot model.
        prefill_cost(dep, int(r["isl"] or 1024), batch=1)
    except PdplanError as err:
        return Result(r["id"], r["metric"], measured, None, f"not yet expressible: {err}")
    if not r["dtype"]:
        return Result(r["id"], r["metric"], measured, None, "needs dtype (MoE precision not published)")
    if not r["batch_per_instance"]:
        return Result(r["id"], r["metric"], measured, None, "needs batch_per_instance (not published)")
    return Result(r["id"], r["metric"], measured, predicted_throughput(r, dep, par), "")


def load(path: Path = DATA) -> list[Result]:
    """Every row of the deployment file with its prediction or its reason."""
    with path.open(newline="", encoding="utf-8") as f:
        return [evaluate(r) for r in csv.DictReader(f)]


def main() -> None:
    for res in load():
        if res.predicted is None:
            print(f"{res.id:32s} {res.metric:30s} measured {res.measured:10,.0f}  {res.status}")
        else:
            print(
                f"{res.id:32s} {res.metric:30s} measured {res.measured:10,.0f}  predicted "
                f"{res.predicted:10,.0f}  {100 * (res.error or 0.0):+6.1f}%"
            )


if __name__ == "__main__":
    main()
