"""Fuzzing the public Python API: each exported function (and the simulate / calibrate entry
points) is called with valid arguments, one of which is replaced by a hostile value (None, a
wrong type, NaN, a 5,000-digit integer, a huge or negative number...). Only pdplan's own errors
may escape, errors name the argument, and any result holds finite, non-negative quantities."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import model
from model.calibrate.fit import calibrate
from model.calibrate.profile_toml import write_profiles
from model.cli.common import to_jsonable
from model.errors import InputError, PdplanError
from model.planner.plan import PlanRequest, resolve_inputs
from model.serving.configs import ColocatedConfig
from model.sim.engine import SimOptions
from model.sim.simulate import poisson_requests, simulate
from model.workload.traces import load_trace
from tests.fuzz_common import call_api, check_json, fuzz_settings, hostile_value


@cache
def _objects() -> dict[str, Any]:
    arch = model.get_model("llama-3.1-8b")
    gpu = model.get_gpu("h100-sxm")
    dep = model.Deployment(arch, gpu)
    slo = model.SLO(2.0, 0.1)
    scn = model.Scenario(arch, model.get_workload("chat"), slo, samples=64)
    return {
        "arch": arch,
        "gpu": gpu,
        "link": model.get_link("ib-ndr-400"),
        "dep": dep,
        "slo": slo,
        "scn": scn,
        "config": ColocatedConfig(gpu, 1, 1),
        "inp": resolve_inputs(
            PlanRequest(arch, gpu, workload="short", slo=slo, gpus=2, tp_options=(1,), samples=64)
        ),
        "requests": poisson_requests("short", 2.0, 10, seed=1),
    }


_GRID = (
    'models = ["llama-3.1-8b"]\ngpus = ["h100-sxm"]\nworkloads = ["chat"]\nbudgets = [2]\n'
    '[[slo]]\nname = "a"\nttft = "1s"\ntpot = "50ms"\n'
)


def _calls() -> dict[str, tuple[Any, dict[str, Any]]]:
    """name -> (function, valid keyword arguments); cheap calls only."""
    o = _objects()
    return {
        "total_params": (model.total_params, {"arch": o["arch"]}),
        "active_params": (model.active_params, {"arch": o["arch"]}),
        "weight_bytes": (model.weight_bytes, {"arch": o["arch"], "dtype": "bf16"}),
        "kv_bytes_per_token": (model.kv_bytes_per_token, {"arch": o["arch"], "kv_dtype": "fp8"}),
        "kv_bytes_per_token_per_gpu": (
            model.kv_bytes_per_token_per_gpu,
            {"arch": o["arch"], "kv_dtype": "bf16", "tp": 2},
        ),
        "kv_bytes_per_request": (
            model.kv_bytes_per_request,
            {"arch": o["arch"], "context_tokens": 4096, "kv_dtype": "bf16", "tp": 2},
        ),
        "get_model": (model.get_model, {"name": "llama-3.1-8b"}),
        "get_gpu": (model.get_gpu, {"name": "h100-sxm", "profile_dirs": None}),
        "get_link": (model.get_link, {"name": "ib-ndr-400"}),
        "get_node": (model.get_node, {"name": "hgx-h100-8"}),
        "get_workload": (model.get_workload, {"name": "chat"}),
        "load_catalog": (model.load_catalog, {"profile_dirs": None}),
        "load_hf_config": (model.load_hf_config, {"path": "model/llm/configs/llama-3.1-8b.json"}),
        "estimate": (
            model.estimate,
            {"model": "llama-3.1-8b", "gpu": "h100-sxm", "isl": 512, "osl": 64, "tp": 1, "batch": 2},
        ),
        "prefill_cost": (model.prefill_cost, {"dep": o["dep"], "prompt_tokens": 512, "batch": 1}),
        "decode_step_cost": (model.decode_step_cost, {"dep": o["dep"], "batch": 8, "context_tokens": 1000}),
        "mixed_step_cost": (
            model.mixed_step_cost,
            {
                "dep": o["dep"],
                "chunk_tokens": 512,
                "chunk_prefix_tokens": 0,
                "decode_batch": 4,
                "decode_context_tokens": 600,
            },
        ),
        "generation_time_s": (
            model.generation_time_s,
            {"dep": o["dep"], "batch": 1, "prompt_tokens": 100, "output_tokens": 10},
        ),
        "mean_tpot_s": (
            model.mean_tpot_s,
            {"dep": o["dep"], "batch": 1, "prompt_tokens": 100, "output_tokens": 10},
        ),
        "chunked_prefill_time_s": (
            model.chunked_prefill_time_s,
            {"dep": o["dep"], "prompt_tokens": 2048, "chunk_tokens": 512},
        ),
        "chunked_prefill_overhead": (
            model.chunked_prefill_overhead,
            {"dep": o["dep"], "prompt_tokens": 2048, "chunk_tokens": 512},
        ),
        "memory_fit": (model.memory_fit, {"dep": o["dep"], "max_batched_tokens": 4096}),
        "transfer_time_s": (model.transfer_time_s, {"message_bytes": 1e6, "link": o["link"], "messages": 2}),
        "allreduce_time_s": (
            model.allreduce_time_s,
            {"message_bytes": 1e6, "n_gpus": 4, "bandwidth_bytes_per_s": 1e11, "latency_s": 1e-6},
        ),
        "evaluate": (model.evaluate, {"config": o["config"], "scenario": o["scn"], "rate_rps": 1.0}),
        "pool_map": (model.pool_map, {"inp": o["inp"], "prefill": 1, "decode": 1, "gpus": 2}),
        "style_frontier": (
            model.style_frontier,
            {"scenario": o["scn"], "configs": [o["config"]], "rates_rps": [1.0, 2.0]},
        ),
        "frontier": (
            model.frontier,
            {
                "model": o["arch"],
                "gpu": o["gpu"],
                "rates_rps": [1.0],
                "workload": "short",
                "slo": o["slo"],
                "gpus": 2,
                "tp_options": (1,),
                "chunk_options": (512,),
                "samples": 64,
            },
        ),
        "simulate": (
            simulate,
            {"config": o["config"], "model": o["arch"], "requests": o["requests"], "slo": o["slo"]},
        ),
        "poisson_requests": (poisson_requests, {"workload": "short", "rate_rps": 2.0, "n": 5, "seed": 0}),
        "load_trace": (load_trace, {"path": "/nonexistent", "format": "auto"}),
        "calibrate": (calibrate, {"measurements": [], "loo": False}),
        "rate_curve": (model.rate_curve, {"start_s": [0.0, 60.0], "rate_rps": [1.0, 2.0], "end_s": 120.0}),
        "diurnal_curve": (model.diurnal_curve, {"peak_rps": 5.0, "shape": None}),
        "load_curve_csv": (model.load_curve_csv, {"path": "day.csv", "text": "time_s,rate_rps\n0,1\n60,2\n"}),
        "parse_grid": (model.parse_grid, {"text": _GRID, "source": "grid.toml"}),
    }


NAMES = sorted(_calls())


@fuzz_settings(fast=80, full=1200)
@given(st.sampled_from(NAMES), st.data())
def test_api_with_one_hostile_argument(name: str, data: st.DataObject) -> None:
    fn, kwargs = _calls()[name]
    arg = data.draw(st.sampled_from(sorted(kwargs)), label="argument")
    value = data.draw(hostile_value, label="value")
    result = call_api(fn, **{**kwargs, arg: value})
    if not isinstance(result, PdplanError):
        check_json(to_jsonable(_plain(result)))


def _plain(result: Any) -> Any:
    """Numbers and arrays of a result, without profile objects (whose sources hold free text)."""
    if hasattr(result, "summary"):
        return result.summary
    if isinstance(result, model.LLMArch | model.GPU | model.Link | model.HardwareCatalog):
        return {}
    if hasattr(result, "to_dict"):
        return result.to_dict()
    return result


@pytest.mark.parametrize("name", NAMES)
def test_api_base_calls_are_valid_or_expected_errors(name: str) -> None:
    """The fuzz base calls work (load_trace of a missing file and calibrate([]) are errors by design)."""
    fn, kwargs = _calls()[name]
    result = call_api(fn, **kwargs)
    assert isinstance(result, PdplanError) == (name in ("load_trace", "calibrate")), result


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: load_trace(None), "path"),
        (lambda: calibrate(None), "measurements"),
        (lambda: model.load_catalog(5), "profile_dirs"),
        (lambda: model.pool_map(None, 1, 1), "inp"),
        (lambda: simulate(_objects()["config"], "llama-3.1-8b", _objects()["requests"], slo=(1, 2)), "slo"),
        (lambda: model.total_params(None), "arch"),
        (lambda: model.get_model(5), "name"),
        (lambda: model.plan("llama-3.1-8b", "h100-sxm", workload="chat", slo=(1, 2), gpus=2), "slo"),
        (
            lambda: model.plan("llama-3.1-8b", "h100-sxm", workload=None, ttft_slo_s=1, tpot_slo_s=1, gpus=2),
            "workload",
        ),
        (lambda: model.estimate(None, "h100-sxm", isl=1, osl=1), "model"),
        (lambda: model.prefill_cost(_objects()["dep"], float("nan")), "prompt_tokens"),
        (lambda: model.prefill_cost(_objects()["dep"], -5), "prompt_tokens"),
        (lambda: model.evaluate(None, _objects()["scn"], 1.0), "config"),
        (lambda: write_profiles(None, "/tmp/x"), "result"),
        (
            lambda: simulate(
                _objects()["config"],
                "llama-3.1-8b",
                _objects()["requests"],
                options=SimOptions(warmup_requests=10),
            ),
            "warmup",
        ),
    ],
)
def test_bad_api_arguments_are_input_errors_naming_the_argument(call, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        call()
