"""Fuzzing the file loaders (profiles, config.json, traces, calibration measurements) with a hostile
corpus generated at test time (no committed binaries) and with hypothesis-generated text: only
pdplan's own errors may escape, within a per-case time bound; limits are enforced as errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.calibrate.load import load_measurements
from model.errors import PdplanError, ProfileError
from model.hardware.catalog import load_catalog
from model.hardware.gpus import gpu_from_toml
from model.hardware.links import link_from_toml
from model.hardware.nodes import node_from_toml
from model.limits import MAX_CSV_FIELD_CHARS, MAX_NESTING_DEPTH
from model.llm.hf_config import load_hf_config, parse_hf_config_text
from model.workload import traces
from model.workload.traces import load_trace
from tests.conftest import REPO
from tests.fuzz_common import call_api, fuzz_settings

H100 = (REPO / "hardware_profiles" / "gpus" / "h100-sxm.toml").read_text()
LLAMA = (REPO / "model" / "llm" / "configs" / "llama-3.1-8b.json").read_text()
AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
MOONCAKE_ROW = '{"timestamp": 0, "input_length": 10, "output_length": 5}\n'
CAL_HEAD = "model,gpu,isl,osl,batch,prefill_ms\n"


def _hostile_corpus() -> dict[str, bytes | str]:
    """name -> content of each hostile file, by the class of failure it once caused."""
    deep = MAX_NESTING_DEPTH * 50
    return {
        # nesting past the parsers' recursion
        "deep.toml": "x = " + "[" * deep + "]" * deep + "\n",
        "deep-inline.toml": "x = " + "{a = " * deep + "1" + "}" * deep + "\n",
        "deep.json": "[" * 100_000,
        "deep.jsonl": '{"timestamp": ' + "[" * 100_000 + "\n",
        "deep-cal.json": '{"a": ' * 50_000 + "1" + "}" * 50_000,
        # numbers too large for a float or an int
        "digits.json": '{"hidden_size": ' + "9" * 5000 + "}",
        "digits.jsonl": '{"timestamp": ' + "9" * 400 + ', "input_length": 5, "output_length": 5}\n',
        "digits-cal.json": '{"model_id": "llama-3.1-8b", "mean_ttft_ms": ' + "9" * 5000 + "}",
        "float400.csv": "Timestamp,Request tokens,Response tokens\n" + "9" * 400 + ",5,5\n",
        "nan.jsonl": '{"timestamp": NaN, "input_length": 5, "output_length": 5}\n',
        "infinity.json": '{"hidden_size": Infinity}',
        # CSV fields over the csv module's limit, bad bytes
        "longfield.csv": AZURE_HEAD + "x" * 200_000 + ",5,5\n",
        "longfield-cal.csv": CAL_HEAD + "x" * 200_000 + ",h100,1,1,1,1\n",
        "nul.csv": AZURE_HEAD + "2023-11-16 18:00:00.0\x00,5,5\n",
        "latin1.csv": b"TIMESTAMP,ContextTokens,GeneratedTokens\n\xff\xfe,5,5\n",
        "empty.csv": "",
        "bom.csv": "\ufeff",
        "header-only.csv": AZURE_HEAD,
        "ragged.csv": AZURE_HEAD + "2023-11-16 18:00:00.0,5\n",
        # wrong JSON types
        "types.json": json.dumps({"hidden_size": [1], "num_hidden_layers": {"a": 1}}),
        "meta.json": json.dumps({**json.loads(LLAMA), "_pdplan": {"published_total_params": [1]}}),
        "moe-dense.json": json.dumps(
            {
                **json.loads(LLAMA),
                "num_local_experts": 8,
                "num_experts_per_tok": 2,
                "first_k_dense_replace": 99,
            }
        ),
        "topk.json": json.dumps({**json.loads(LLAMA), "num_local_experts": 4, "num_experts_per_tok": 8}),
        "kvheads.json": json.dumps({**json.loads(LLAMA), "num_key_value_heads": 64}),
        "zero.json": json.dumps({**json.loads(LLAMA), "hidden_size": 0}),
        "list.jsonl": "[1, 2]\n",
        # implausible profile numbers
        "eff.toml": _replace_value(H100, "prefill_mfu", "1e-320"),
        "price.toml": _replace_value(H100, "usd_per_hour", "1e308"),
        "mbu.toml": _replace_value(H100, "decode_mbu", "1e-300"),
        # denormal calibration rows
        "denormal.csv": CAL_HEAD + "llama-3.1-8b,h100-sxm,512,1,1,1e-320\n",
        "denormal-rate.csv": (
            "model,gpu,isl,osl,request_rate,ttft_ms\nllama-3.1-8b,h100-sxm,512,64,1e-320,50\n"
        ),
    }


def _replace_value(text: str, key: str, value: str) -> str:
    """The profile text with ``key``'s value replaced (keeps its source)."""
    out = []
    for line in text.splitlines():
        if line.strip().startswith(f"{key} ="):
            head, rest = line.split("value =", 1)
            line = head + f"value = {value}," + rest.split(",", 1)[1]
        out.append(line)
    return "\n".join(out) + "\n"


def _loaders(path: Path) -> list:
    suffix = path.suffix.lower()
    if suffix == ".toml":
        return [gpu_from_toml, link_from_toml, node_from_toml]
    if suffix == ".json" and "cal" not in path.name:
        return [load_hf_config, lambda p: load_measurements(p, "vllm-json")]
    if "cal" in path.name or "denormal" in path.name:
        return [lambda p: load_measurements(p, "csv" if suffix == ".csv" else "vllm-json")]
    return [load_trace, lambda p: load_measurements(p, "csv" if suffix == ".csv" else "vllm-json")]


@pytest.mark.parametrize("name", sorted(_hostile_corpus()))
def test_hostile_files_give_project_errors(tmp_path: Path, name: str) -> None:
    content = _hostile_corpus()[name]
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    for loader in _loaders(path):
        result = call_api(loader, path)
        assert isinstance(result, PdplanError), (name, loader, result)


@pytest.mark.parametrize(
    ("kind", "key", "value", "needle"),
    [
        ("gpus/h100-sxm", "prefill_mfu", "1e-320", r"prefill_mfu: .*\[0.01, 1\]"),
        ("gpus/h100-sxm", "decode_mbu", "1e-300", r"decode_mbu: .*\[0.01, 1\]"),
        ("gpus/h100-sxm", "usd_per_hour", "1e308", "USD per GPU-hour"),
        ("links/ib-ndr-400", "efficiency", "1e-300", r"efficiency: .*\[0.01, 1\]"),
    ],
)
def test_implausible_profile_numbers_name_the_range_and_unit(tmp_path, kind, key, value, needle) -> None:
    text = _replace_value((REPO / "hardware_profiles" / f"{kind}.toml").read_text(), key, value)
    path = tmp_path / Path(kind).name
    path = path.with_suffix(".toml")
    path.write_text(text)
    loader = gpu_from_toml if kind.startswith("gpus") else link_from_toml
    with pytest.raises(ProfileError, match=needle):
        loader(path)


def test_upper_case_toml_suffix_gets_the_name_check(tmp_path: Path) -> None:
    """A profile named X.TOML must carry name = "X", and a name may not be path-like."""
    path = tmp_path / "evil.TOML"
    path.write_text(H100.replace('name = "h100-sxm"', 'name = "h100-sxm"'))
    with pytest.raises(ProfileError, match="file name stem 'evil'"):
        gpu_from_toml(path)
    path.write_text(H100.replace('name = "h100-sxm"', 'name = "../../evil"'))
    with pytest.raises(ProfileError, match="not path-like"):
        gpu_from_toml(path)
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "Upper.TOML").write_text(H100.replace('name = "h100-sxm"', 'name = "other"'))
    with pytest.raises(ProfileError, match="Upper"):
        load_catalog(str(tmp_path / "dir"))


def test_trace_row_cap_is_enforced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More rows than MAX_TRACE_ROWS is an error naming the limit (cap lowered to keep it fast)."""
    monkeypatch.setattr(traces, "MAX_TRACE_ROWS", 50)
    csv_path = tmp_path / "t.csv"
    csv_path.write_text(AZURE_HEAD + "".join(f"2023-11-16 18:00:{i % 60:02d}.0,5,5\n" for i in range(51)))
    with pytest.raises(PdplanError, match="more than 50 requests"):
        load_trace(csv_path)
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text(MOONCAKE_ROW * 51)
    with pytest.raises(PdplanError, match="more than 50 requests"):
        load_trace(jsonl)
    jsonl.write_text(MOONCAKE_ROW * 50)
    assert len(load_trace(jsonl)) == 50


def test_csv_field_limit_names_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    path.write_text(AZURE_HEAD + "1" * (MAX_CSV_FIELD_CHARS + 1) + ",5,5\n")
    with pytest.raises(PdplanError, match=f"at most {MAX_CSV_FIELD_CHARS:,}"):
        load_trace(path)


# ------------------------------------------------------------------------------ hypothesis

_json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
)
_json = st.recursive(
    _json_scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_HF_KEYS = [
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "vocab_size",
    "head_dim",
    "num_local_experts",
    "num_experts_per_tok",
    "first_k_dense_replace",
    "moe_intermediate_size",
    "kv_lora_rank",
    "max_position_embeddings",
    "tie_word_embeddings",
    "model_type",
    "_pdplan",
    "text_config",
]


@fuzz_settings(fast=40, full=600)
@given(st.dictionaries(st.sampled_from(_HF_KEYS), _json, max_size=8))
def test_config_json_mutations_give_project_errors_or_a_valid_model(changes: dict) -> None:
    """A Llama config with some fields replaced: a valid architecture (positive sizes), or a ProfileError."""
    doc = {**json.loads(LLAMA), **changes}
    try:
        text = json.dumps(doc)
    except (ValueError, TypeError):
        return
    arch = call_api(parse_hf_config_text, text)
    if not isinstance(arch, PdplanError):
        assert arch.hidden_size >= 1 and arch.num_layers >= 1
        assert arch.num_dense_layers < arch.num_layers or not arch.is_moe
        assert arch.num_heads % arch.num_kv_heads == 0


@fuzz_settings(fast=40, full=600)
@given(st.text(max_size=300))
def test_random_text_in_every_loader_gives_project_errors(tmp_path_factory, text: str) -> None:
    """Arbitrary text as a TOML profile, config.json, trace (CSV/JSONL) or measurement file."""
    base = tmp_path_factory.mktemp("fuzz")
    for name in ("x.toml", "config.json", "t.csv", "t.jsonl", "m.csv", "m.json"):
        path = base / name
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        for loader in _loaders(path):
            call_api(loader, path)


@fuzz_settings(fast=30, full=500)
@given(st.lists(st.tuples(_json_scalar, _json_scalar, _json_scalar), min_size=1, max_size=5))
def test_trace_rows_of_any_type_give_project_errors_or_a_valid_trace(tmp_path_factory, rows) -> None:
    """Mooncake rows with arbitrary JSON values: a trace with finite, sorted, positive data, or an error."""
    path = tmp_path_factory.mktemp("trace") / "t.jsonl"
    lines = [json.dumps({"timestamp": t, "input_length": i, "output_length": o}) for t, i, o in rows]
    path.write_text("\n".join(lines) + "\n")
    trace = call_api(load_trace, path)
    if not isinstance(trace, PdplanError):
        import numpy as np

        assert np.all(np.isfinite(trace.arrival_s)) and np.all(np.diff(trace.arrival_s) >= 0)
        assert trace.prompt_tokens.min() >= 1 and trace.output_tokens.min() >= 1


@fuzz_settings(fast=30, full=500)
@given(
    st.sampled_from(["memory", "power", "efficiency", "price", "compute", "pcie"]),
    st.sampled_from(
        ["capacity", "bandwidth", "tdp", "idle", "prefill_mfu", "decode_mbu", "usd_per_hour", "bf16"]
    ),
    st.one_of(
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.integers().map(str),
        st.sampled_from(['"1e400 GB"', '"9**9**9 W"', '"-5 ms"', '""', "[[[]]]", "{}", '"1e-320 TB/s"']),
    ),
)
def test_profile_values_give_project_errors_or_a_plausible_gpu(tmp_path_factory, section, key, value) -> None:
    """One profile value replaced by anything: a GPU with finite, in-range numbers, or a ProfileError."""
    text = H100.replace(f"{key} = {{ value = ", f"{key} = {{ value = {value}, old = ", 1)
    text = text.replace(", old = ", ", source = 'fuzz' } # ", 1) if ", old = " in text else text
    path = tmp_path_factory.mktemp("prof") / "h100-sxm.toml"
    path.write_text(text)
    gpu = call_api(gpu_from_toml, path)
    if not isinstance(gpu, PdplanError):
        import math

        for name in ("memory_bytes", "memory_bandwidth_bytes_per_s", "tdp_w", "price_usd_per_hour"):
            assert math.isfinite(getattr(gpu, name)) and getattr(gpu, name) >= 0
        assert 0.01 <= gpu.prefill_mfu <= 1 and 0.01 <= gpu.decode_mbu <= 1
