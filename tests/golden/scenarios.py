"""Golden scenarios: CLI argument lists whose JSON output is pinned in ``tests/golden/*.json``.

Recorded before the move into layered subpackages (issue 12) so refactors can prove they change
no number. Regenerate only on purpose: ``python -m tests.golden.scenarios --write``, and say in
the commit which change moved which number and why.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from shlex import split

from model.cli import main

HERE = Path(__file__).parent

_P = "--no-thresholds --json"
SCENARIOS: dict[str, list[str]] = {
    "plan_70b_h100_chat": split(
        "plan --model llama-3.1-70b --gpu h100-sxm --gpus 16 --workload chat --ttft-slo 500ms "
        f"--tpot-slo 50ms --node hgx-h100-8 {_P}"
    ),
    "plan_70b_h100_rag_thresholds": split(
        "plan --model llama-3.1-70b --gpu h100-sxm --gpus 16 --workload rag --ttft-slo 5s "
        "--tpot-slo 30ms --link ib-ndr-400 --node hgx-h100-8 --json"
    ),
    "plan_8b_4090_code": split(
        "plan --model llama-3.1-8b --gpu rtx-4090 --gpus 2 --workload code --ttft-slo 2s "
        f"--tpot-slo 100ms {_P}"
    ),
    "plan_8b_a100_short": split(
        "plan --model llama-3.1-8b --gpu a100-80gb-sxm --gpus 8 --workload short --ttft-slo 200ms "
        f"--tpot-slo 40ms {_P}"
    ),
    "plan_mixtral_h200_mixed": split(
        f"plan --model mixtral-8x7b --gpu h200 --gpus 8 --workload mixed --ttft-slo 1s --tpot-slo 50ms {_P}"
    ),
    "plan_qwen32_l40s_summ": split(
        "plan --model qwen2.5-32b --gpu l40s --gpus 8 --workload summarization --ttft-slo 3s "
        f"--tpot-slo 80ms {_P}"
    ),
    "plan_hetero_h100_l40s": split(
        "plan --model llama-3.1-8b --gpu h100-sxm --decode-gpu l40s --gpus 8 --workload rag "
        f"--ttft-slo 1s --tpot-slo 50ms {_P}"
    ),
    "plan_target_rate_fp8": split(
        "plan --model llama-3.1-70b --gpu h100-sxm --target-rate 10 --workload chat --ttft-slo 1s "
        f"--tpot-slo 50ms --dtype fp8 --max-gpus 32 {_P}"
    ),
    "plan_opt66_a100_cost": split(
        "plan --model opt-66b --gpu a100-80gb-sxm --target-rate 2 --workload chat --ttft-slo 2s "
        f"--tpot-slo 100ms --objective cost --max-gpus 16 {_P}"
    ),
    "plan_mistral_mi300x_bursty": split(
        "plan --model mistral-7b --gpu mi300x --gpus 4 --workload chat --ttft-slo 300ms "
        f"--tpot-slo 30ms --arrival-cv 2 --whole-request-transfer {_P}"
    ),
    "plan_deepseek_h200": split(
        "plan --model deepseek-v3 --gpu h200 --gpus 16 --dtype fp8 --workload chat --ttft-slo 2s "
        f"--tpot-slo 100ms {_P}"
    ),
    "plan_yi34_chunks": split(
        "plan --model yi-34b --gpu a100-80gb-sxm --gpus 4 --tp 2,4 --chunks 512,1024 --workload "
        f"code --ttft-slo 3s --tpot-slo 80ms {_P}"
    ),
    "estimate_70b_h100": split(
        "estimate --model llama-3.1-70b --gpu h100-sxm --tp 4 --isl 2048 --osl 256 --batch 8 --json"
    ),
    "estimate_8b_4090": split("estimate --model llama-3.1-8b --gpu rtx-4090 --isl 1024 --osl 256 --json"),
    "estimate_mixtral_fp8": split(
        "estimate --model mixtral-8x7b --gpu h100-sxm --tp 2 --isl 4096 --osl 512 --batch 32 "
        "--dtype fp8 --json"
    ),
    "estimate_deepseek_b200": split(
        "estimate --model deepseek-v3 --gpu b200 --tp 8 --isl 8192 --osl 1024 --batch 64 --dtype fp8 --json"
    ),
    "sim_colocated_8b": split(
        "simulate --model llama-3.1-8b --gpu h100-sxm --architecture colocated --replicas 2 "
        "--workload chat --rate 20 --requests 800 --seed 1 --json"
    ),
    "sim_chunked_70b": split(
        "simulate --model llama-3.1-70b --gpu h100-sxm --architecture colocated-chunked --tp 4 "
        "--chunk 512 --workload code --rate 2 --requests 400 --seed 2 --json"
    ),
    "sim_disagg_8b": split(
        "simulate --model llama-3.1-8b --gpu h100-sxm --architecture disaggregated --prefill 2 "
        "--decode 2 --link ib-ndr-400 --workload rag --rate 10 --requests 600 --seed 3 --json"
    ),
    "sim_disagg_hetero": split(
        "simulate --model qwen2.5-7b --gpu h100-sxm --decode-gpu l40s --architecture "
        "disaggregated --prefill 1 --decode 2 --no-layerwise --link roce-100 --workload mixed "
        "--rate 8 --requests 500 --seed 4 --json"
    ),
}


def run(args: list[str]) -> object:
    """Run the CLI in-process and return its parsed JSON output."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(args))
    if code not in (0, None):
        raise RuntimeError(f"{args}: exit {code}")
    return json.loads(out.getvalue())


def write_all() -> None:
    for name, args in SCENARIOS.items():
        (HERE / f"{name}.json").write_text(json.dumps(run(args), indent=1, sort_keys=True) + "\n")
        print("wrote", name)


if __name__ == "__main__":
    if "--write" in sys.argv:
        write_all()
