"""Engine profiles: built-ins load with sources, bad files fail in one line naming file and field,
and the planner and the simulator read the same caps and overheads from one profile."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from model.cli import main
from model.errors import InputError, ProfileError, UnknownNameError
from model.hardware.catalog import get_engine, get_gpu, load_catalog, unique
from model.hardware.engines import DEFAULT_ENGINE, Engine, engine_from_toml
from model.planner.plan import PlanRequest, resolve_inputs
from model.serving.configs import ColocatedConfig
from model.serving.evaluation import evaluate
from model.serving.phase_tables import instance_tables
from model.sim.engine import SimRequests
from model.sim.simulate import simulate
from model.workload.lengths import Fixed
from model.workload.presets import Workload
from model.workload.scenario import Scenario
from model.workload.slo import SLO

SOURCED = (
    "batching.max_num_seqs",
    "batching.prefill_policy",
    "batching.prefill_token_cap",
    "batching.decode_batched_tokens",
    "batching.chunk_tokens",
    "overheads.step_extra",
    "kv_transfer.modes",
)


def test_builtin_engines_load_with_a_source_for_every_value() -> None:
    engines = {e.name: e for e in unique(load_catalog().engines)}
    assert set(engines) >= {"vllm", "sglang", "trtllm"}
    for e in engines.values():
        assert e.version, e.name
        for key in SOURCED:
            src = e.source(key)
            assert src.strip(), f"{e.name}: {key} has no source"
            # an unsourced value says so up front ("assumption: ..."), never in passing
            assert "assumption" not in src or src.startswith("assumption:"), f"{e.name}: {key}"
    vllm, sglang, trt = engines["vllm"], engines["sglang"], engines["trtllm"]
    # vLLM v0.10 `vllm serve` defaults (arg_utils.py) and pdplan's caps before engine profiles
    assert (vllm.max_num_seqs, vllm.prefill_token_cap, vllm.decode_batched_tokens) == (1024, 8192, 2048)
    assert vllm.step_overhead_extra_s == 0.0 and vllm.supports_transfer(layerwise=True)
    assert (sglang.prefill_token_cap, sglang.chunk_tokens) == (16384, 8192)  # --max-prefill-tokens
    assert (trt.max_num_seqs, trt.prefill_token_cap) == (2048, 8192)  # trtllm-build defaults
    assert not trt.supports_transfer(layerwise=True) and trt.supports_transfer(layerwise=False)
    assert get_engine("TensorRT-LLM") is trt and get_engine() is vllm and DEFAULT_ENGINE == "vllm"


def test_vllm_adds_nothing_to_the_gpu_step_overhead() -> None:
    """The GPU profiles' step overhead is measured under vLLM: the default engine reproduces it exactly."""
    for gpu in unique(load_catalog().gpus):
        assert get_engine("vllm").step_overhead_s(gpu) == gpu.step_overhead_s


def test_unknown_engine_suggests_the_nearest_name() -> None:
    with pytest.raises(UnknownNameError, match="unknown engine 'vlm'; did you mean 'vllm'"):
        get_engine("vlm")
    with pytest.raises(UnknownNameError, match="did you mean 'sglang'"):
        resolve_inputs(
            PlanRequest("llama-3.1-8b", "h100-sxm", workload="chat", slo=SLO(1, 0.1), gpus=2, engine="sglng")
        )


VLLM_TEXT = open(get_engine("vllm").path, encoding="utf-8").read()  # noqa: SIM115


def _user_engine(tmp_path, text: str, name: str = "my-engine"):
    d = tmp_path / "profiles" / "engines"
    d.mkdir(parents=True)
    (d / f"{name}.toml").write_text(text.replace('name = "vllm"', f'name = "{name}"'))
    return tmp_path / "profiles"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("[batching]", '[batching]\ncolour = "green"', "batching.colour: unknown key; allowed keys: "),
        (
            "max_num_seqs = { value = 1024,",
            "max_num_seqs = { value = 0,",
            "max_num_seqs: expected a whole number",
        ),
        (
            "max_num_seqs = { value = 1024,",
            "max_num_seqs = { value = 2000000,",
            r"max_num_seqs: got 2000000; allowed: a whole number of sequences in \[1, 1048576\]",
        ),
        ("chunk_tokens = { value = 2048,", "chunk_tokens = { value = 8,", r"chunk_tokens: got 8; .*\[16, "),
        (
            'step_extra = { value = "0 ms"',
            'step_extra = { value = "-1 ms"',
            "overheads.step_extra: expected a time",
        ),
        (
            'step_extra = { value = "0 ms"',
            'step_extra = { value = "2 GB"',
            "overheads.step_extra: expected a time",
        ),
        ('value = "fcfs-token-cap"', 'value = "random"', "prefill_policy: got 'random'; allowed: one of"),
        ('value = ["layerwise", "whole-request"]', 'value = ["carrier-pigeon"]', "kv_transfer_modes: got"),
        ('version = "0.10"\n', "", "version: missing"),
    ],
)
def test_malformed_engine_files_fail_in_one_line(tmp_path, old, new, message) -> None:
    assert old in VLLM_TEXT, old
    text = VLLM_TEXT.replace(old, new, 1)
    with pytest.raises(ProfileError, match=message) as err:
        load_catalog(_user_engine(tmp_path, text))
    assert str(err.value).startswith("my-engine.toml: ") and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("replacement", "message"),
    [
        ("max_num_seqs = 1024", 'batching.max_num_seqs: expected { value = ..., source = "..." }'),
        (
            'max_num_seqs = { value = 1024, source = " " }',
            "batching.max_num_seqs.source: a non-empty citation",
        ),
        ('max_num_seqs = { value = 1024, source = "x", note = "y" }', "unknown key 'note'"),
    ],
)
def test_every_engine_value_needs_its_source(tmp_path, replacement, message) -> None:
    text = re.sub(r"^max_num_seqs = .*$", replacement, VLLM_TEXT, count=1, flags=re.M)
    with pytest.raises(ProfileError, match=re.escape(message)) as err:
        load_catalog(_user_engine(tmp_path, text))
    assert str(err.value).startswith("my-engine.toml: ") and "\n" not in str(err.value)


def test_name_must_equal_the_file_stem(tmp_path) -> None:
    d = tmp_path / "p" / "engines"
    d.mkdir(parents=True)
    (d / "other.toml").write_text(VLLM_TEXT)  # still says name = "vllm"
    with pytest.raises(ProfileError, match="other.toml: name: must equal the file name stem 'other'"):
        load_catalog(tmp_path / "p")


def test_user_directory_adds_an_engine_loose_or_in_engines(tmp_path) -> None:
    d = _user_engine(tmp_path, VLLM_TEXT.replace("value = 1024,", "value = 64,", 1))
    assert get_engine("my-engine", d).max_num_seqs == 64
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "tiny.toml").write_text(VLLM_TEXT.replace('name = "vllm"', 'name = "tiny"'))
    assert load_catalog(loose).engine("tiny").prefill_token_cap == 8192
    assert get_engine(str(loose / "tiny.toml")).name == "tiny"  # a path works too


def test_python_api_validates_engine_values() -> None:
    base = get_engine("vllm")
    with pytest.raises(InputError, match="max_num_seqs"):
        Engine(**{**_fields(base), "max_num_seqs": 0})
    with pytest.raises(InputError, match="step_overhead_extra_s"):
        Engine(**{**_fields(base), "step_overhead_extra_s": float("nan")})
    with pytest.raises(InputError, match="engine"):
        Scenario.build("llama-3.1-8b", "chat", SLO(1, 0.1), engine=42)  # type: ignore[arg-type]


def _fields(e: Engine) -> dict:
    return {k: getattr(e, k) for k in e.__dataclass_fields__}


# ---------------------------------------------------------------- one profile, both sides

FIXED = Workload("fixed-512-64", Fixed(512), Fixed(64), source="test")  # every request alike


def _engine(tmp_path, **changes) -> Engine:
    text = VLLM_TEXT.replace('name = "vllm"', 'name = "cap"')
    for old, new in changes.items():
        text = text.replace(old, new, 1)
    path = tmp_path / "cap.toml"
    path.write_text(text)
    return engine_from_toml(path)


def test_small_sequence_cap_binds_in_the_planner_and_the_simulator(tmp_path) -> None:
    """max_num_seqs = 1: the planner's decode batch stops at 1, and the simulator serves requests
    one at a time, so 4 simultaneous requests take exactly 4 times as long as one."""
    one = _engine(tmp_path, **{"max_num_seqs = { value = 1024,": "max_num_seqs = { value = 1,"})
    h100 = get_gpu("h100-sxm")
    cfg = ColocatedConfig(h100, 1, 1)
    scn = Scenario.build("llama-3.1-8b", FIXED, SLO(10.0, 1.0), samples=16, engine=one)
    free = Scenario.build("llama-3.1-8b", FIXED, SLO(10.0, 1.0), samples=16)
    # hand-derived: ~60 GB of KV cache at 128 KiB per token (32 layers x 8 KV heads x 128 x 2 x 2 B)
    # holds ~458k tokens, ~840 sequences at the mean decode context 512 + 64 / 2 = 544 tokens: below
    # vLLM's 1024, so the KV cache is the cap there, and the engine's 1 binds here
    t = instance_tables(free, h100, 1, None, "colocated")
    assert t.max_batch == np.floor(t.kv_capacity_tokens / 544) and 800 < t.max_batch < 1024
    assert instance_tables(scn, h100, 1, None, "colocated").max_batch == 1
    ev = evaluate(cfg, scn, 0.5)
    assert ev.max_batch == 1 and ev.decode_batch <= 1
    assert evaluate(cfg, free, 0.5).max_batch == t.max_batch

    def makespan(n: int, engine: Engine | None) -> float:
        req = SimRequests(np.zeros(n), np.full(n, 512), np.full(n, 64))
        return simulate(cfg, "llama-3.1-8b", req, engine=engine).summary.makespan_s

    single = makespan(1, one)
    assert makespan(4, one) == pytest.approx(4 * single, rel=1e-9)
    assert makespan(4, None) < 2 * single  # vLLM's cap of 1024 lets the four decode together


def test_engine_step_overhead_reaches_both_sides(tmp_path) -> None:
    """step_extra = 2 ms adds exactly 2 ms to every decode step, in the planner's tables and in the
    simulator's step times, on top of the GPU profile's own overhead."""
    slow = _engine(tmp_path, **{'step_extra = { value = "0 ms"': 'step_extra = { value = "2 ms"'})
    h100 = get_gpu("h100-sxm")
    base = Scenario.build("llama-3.1-8b", FIXED, SLO(10.0, 1.0), samples=16)
    scn = Scenario.build("llama-3.1-8b", FIXED, SLO(10.0, 1.0), samples=16, engine=slow)
    t0 = instance_tables(base, h100, 1, None, "decode").decode_step_s
    t1 = instance_tables(scn, h100, 1, None, "decode").decode_step_s
    np.testing.assert_allclose(t1 - t0, 2e-3, rtol=1e-9)
    # simulator: one request alone, 1 prefill + 63 decode steps -> 64 steps x 2 ms later
    req = SimRequests(np.zeros(1), np.full(1, 512), np.full(1, 64))
    cfg = ColocatedConfig(h100, 1, 1)
    fast_s = simulate(cfg, "llama-3.1-8b", req).summary.makespan_s
    slow_s = simulate(cfg, "llama-3.1-8b", req, engine=slow).summary.makespan_s
    assert slow_s - fast_s == pytest.approx(64 * 2e-3, rel=1e-6)


def test_engine_flag_on_the_cli(capsys, tmp_path) -> None:
    assert main(["list", "engines", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} >= {"vllm", "sglang", "trtllm"}
    assert main(["show", "engine", "sglang", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["prefill_token_cap"] == 16384 and shown["sources"]["batching.prefill_token_cap"]
    sim = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--workload", "chat", "--rate", "2"]
    sim += ["--requests", "40", "--json", "--architecture", "colocated-chunked"]
    assert main([*sim, "--engine", "trtllm"]) == 0
    assert json.loads(capsys.readouterr().out)["config"].endswith("chunk 8192")  # TRT-LLM's default
    assert main([*sim, "--engine", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown engine 'nope'" in err and err.count("\n") == 1
    plan = ["plan", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "2", "--workload", "chat"]
    plan += ["--ttft-slo", "1s", "--tpot-slo", "50ms", "--no-thresholds", "--json"]
    d = _user_engine(tmp_path, VLLM_TEXT.replace("value = 1024,", "value = 4,", 1))
    assert main([*plan, "--engine", "my-engine", "--profile-dir", str(d)]) == 0
    capped = json.loads(capsys.readouterr().out)
    for best in capped["best"].values():
        assert best["at_goodput"]["max_batch"] <= 4
