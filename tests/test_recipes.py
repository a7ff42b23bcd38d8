"""The recipes of docs/architecture.md, run as written: each template is read out of the document's
fenced block after its ``<!-- recipe: NAME -->`` marker, so the document and the test cannot drift."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

import model
from model.hardware import formats
from model.hardware.catalog import get_engine, get_gpu
from model.hardware.formats import NumericFormat
from model.llm.arch import total_params
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.sim.engine import SimRequests
from model.sim.simulate import simulate
from model.workload.slo import SLO

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def recipe_block(name: str) -> str:
    """The fenced code block that follows ``<!-- recipe: name -->`` in docs/architecture.md."""
    text = DOC.read_text(encoding="utf-8")
    found = re.search(rf"<!-- recipe: {name} -->\s*```\w+\n(.*?)\n```", text, re.S)
    assert found, f"docs/architecture.md has no recipe block {name!r}"
    return found.group(1) + "\n"


def format_row(source: str) -> NumericFormat:
    """The doc's ``NumericFormat(...)`` row, read with ast.literal_eval (nothing is executed)."""
    call = ast.parse(source, mode="eval").body
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "NumericFormat"
    args = [ast.literal_eval(a) for a in call.args]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
    return NumericFormat(*args, **kwargs)


def test_recipe_blocks_exist() -> None:
    for name in ("format", "gpu", "engine"):
        assert recipe_block(name).strip()


def test_format_recipe(monkeypatch: pytest.MonkeyPatch) -> None:
    row = format_row(recipe_block("format"))
    assert row.name == "int4_g32" and row.name not in formats.format_names()
    # "add the row to FORMATS": the table and its name index, for this test only
    monkeypatch.setattr(formats, "FORMATS", (*formats.FORMATS, row))
    monkeypatch.setattr(formats, "_BY_NAME", {**formats._BY_NAME, row.name: row})
    # hand: 4 bits + (16-bit scale + 4-bit zero point) / 32 elements = 4.625 bits = 0.578125 bytes
    assert formats.bytes_per_element("int4_g32") == 0.578125
    arch = get_model("llama-3.1-8b")
    dep = Deployment(arch, get_gpu("h100-sxm"), weight_dtype="int4_g32")
    assert dep.weight_bytes_per_gpu == pytest.approx(total_params(arch) * 4.625 / 8, rel=1e-12)
    # weight-only: its GEMMs run at the 16-bit peak, and the KV cache stays bf16 (not a KV format)
    assert dep.gemm_flops_per_s("mlp") == Deployment(arch, get_gpu("h100-sxm")).gemm_flops_per_s("mlp")
    assert dep.kv_dtype_resolved == "bf16"
    est = model.estimate("llama-3.1-8b", "h100-sxm", dtype="int4_g32", isl=512, osl=64)
    assert est.weight_bytes_per_gpu == pytest.approx(total_params(arch) * 4.625 / 8, rel=1e-12)


def test_gpu_recipe(tmp_path: Path) -> None:
    gpus = tmp_path / "gpus"
    gpus.mkdir()
    (gpus / "a40.toml").write_text(recipe_block("gpu"), encoding="utf-8")
    gpu = get_gpu("a40", profile_dirs=tmp_path)
    assert gpu.memory_bytes == 46068 * 2**20
    assert gpu.memory_bandwidth_bytes_per_s == 696e9
    assert dict(gpu.peak_flops_per_s)["bf16"] == 149.7e12
    est = model.estimate("llama-3.1-8b", "a40", isl=128, osl=16, profile_dirs=tmp_path)
    assert est.gpu == "a40" and est.fits
    # hand: batch-1 decode streams the bf16 weights (2 bytes per parameter, less the input-embedding
    # table, of which only one row per token is read) at 696 GB/s x MBU 0.75, plus the 1 ms step
    # overhead; the KV of ~136 tokens and the activations add < 0.5%
    arch = get_model("llama-3.1-8b")
    streamed = 2.0 * (total_params(arch) - arch.vocab_size * arch.hidden_size)
    assert est.decode_bound == "memory"
    assert est.decode_step_s == pytest.approx(streamed / (696e9 * 0.75) + 1e-3, rel=5e-3)


def test_engine_recipe(tmp_path: Path) -> None:
    engines = tmp_path / "engines"
    engines.mkdir()
    (engines / "vllm-small.toml").write_text(recipe_block("engine"), encoding="utf-8")
    eng = get_engine("vllm-small", tmp_path)
    assert (eng.max_num_seqs, eng.prefill_token_cap, eng.chunk_tokens) == (256, 2048, 2048)
    kwargs = dict(workload="chat", slo=SLO(2.0, 0.1), gpus=2, profile_dirs=tmp_path, thresholds=False)
    p = model.plan("llama-3.1-8b", "h100-sxm", engine="vllm-small", **kwargs)
    default = model.plan("llama-3.1-8b", "h100-sxm", **kwargs)
    # vLLM's large-GPU tier lets the KV cache (~60 GB on an H100) set the batch cap above 256;
    # this engine's max_num_seqs = 256 caps every style
    assert max(b.at_goodput.max_batch for b in default.best.values()) > 256
    assert p.best and all(b.at_goodput.max_batch <= 256 for b in p.best.values())
    unchunked = p.best["colocated"].config
    # the simulator reads the same profile: 8 prompts of 1024 tokens at once are prefilled 2 per
    # iteration under this engine's prefill_token_cap = 2048 and all in one iteration under the
    # default profile's 8192, so the first tokens come later here (four prefill steps, not one)
    req = SimRequests(np.zeros(8), np.full(8, 1024), np.full(8, 16))
    capped = simulate(unchunked, "llama-3.1-8b", req, engine=eng).summary.makespan_s
    free = simulate(unchunked, "llama-3.1-8b", req).summary.makespan_s
    assert capped > free
