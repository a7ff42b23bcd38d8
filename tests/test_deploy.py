"""Deployment recipes (model.deploy, ``pdplan deploy``): every emitted flag is in its engine version's
data file, every YAML satisfies its schema, placement by hand, golden files for two reference plans.

Golden files: tests/golden/deploy/<plan>.json (path -> text of every emitted file); regenerate with
``python -m tests.test_deploy --write`` after a deliberate change and say why in the commit.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import model
from model.cli import main
from model.errors import InputError, PdplanError
from model.hardware.parallelism import Parallelism
from model.recipes.catalog import ENGINES, engine_data, known_versions, load_schema
from model.recipes.command import command
from model.recipes.deploy import deploy
from model.recipes.placement import place
from model.recipes.target import target
from tests.fuzz_common import call_api, fuzz_settings, hostile_value

GOLDEN = Path(__file__).resolve().parent / "golden" / "deploy"

# The two reference plans of issue 18: a dense 70B on 16 x H100 and a MoE model on 16 x H200.
REFERENCE = {
    "dense-llama-3.1-70b-16xh100": dict(model="llama-3.1-70b", gpu="h100-sxm", node="hgx-h100-8"),
    "moe-mixtral-8x7b-16xh200": dict(model="mixtral-8x7b", gpu="h200", node="hgx-h200-8"),
}


def reference_plan(name: str):
    ref = REFERENCE[name]
    return model.plan(
        ref["model"],
        ref["gpu"],
        workload="chat",
        ttft_slo_s=1.0,
        tpot_slo_s=0.05,
        gpus=16,
        node=ref["node"],
        thresholds=False,
    )


@pytest.fixture(scope="module", params=sorted(REFERENCE))
def plan_and_deployment(request):
    p = reference_plan(request.param)
    return request.param, p, deploy(p)


@pytest.fixture(scope="module")
def small_plan():
    return model.plan("llama-3.1-8b", "h100-sxm", workload="chat", ttft_slo_s=1.0, tpot_slo_s=0.05, gpus=2,
                      thresholds=False)  # fmt: skip


def shell_commands(text: str) -> list[list[str]]:
    """Each command line of a script as tokens, without leading VAR=value and a trailing '&'."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        tokens = shlex.split(line)
        while tokens and "=" in tokens[0] and not tokens[0].startswith("-"):
            tokens.pop(0)
        if tokens and tokens[-1] == "&":
            tokens.pop()
        out.append(tokens)
    return out


def flag_tokens(tokens: list[str]) -> list[str]:
    """Tokens that are flags: '--name' or '-x' (a negative number such as '-1' is a value)."""
    return [t for t in tokens if t.startswith("--") or (len(t) == 2 and t[0] == "-" and t[1].isalpha())]


def program_of(tokens: list[str], programs) -> str | None:
    """The longest program of the data file the command starts with."""
    found = [p for p in programs if tokens[: len(p.split())] == p.split()]
    return max(found, key=len) if found else None


# ---------------------------------------------------------------------------------------------
# flags and schemas


def test_every_emitted_flag_is_in_the_engine_version_data_file(plan_and_deployment) -> None:
    _, _, dep = plan_and_deployment
    checked = 0
    for r in dep.recipes:
        data = engine_data(r.engine, r.version)
        recognised = 0
        for f in r.files:
            if f.path.endswith(".sh"):
                for tokens in shell_commands(f.text):
                    program = program_of(tokens, data.programs)
                    if program is None:
                        assert tokens[0] in ("set", "wait"), f"{f.path}: unknown command {tokens[:3]}"
                        continue
                    recognised += 1
                    for flag in flag_tokens(tokens[len(program.split()) :]):
                        assert flag in data.programs[program], f"{f.path}: {flag} not in {data.path}"
                        checked += 1
            elif f.path.endswith(".yaml") and r.engine in ("dynamo", "llm-d"):
                doc = yaml.safe_load(f.text)
                if r.engine == "dynamo":
                    pods = [s["extraPodSpec"]["mainContainer"] for s in doc["spec"]["services"].values()]
                    argvs = [c["command"] + c["args"] for c in pods if "args" in c]
                else:
                    pools = [doc[k] for k in ("decode", "prefill") if doc[k]["create"]]
                    argvs = [["vllm", "serve", *c["args"]] for p in pools for c in p["containers"]]
                for argv in argvs:
                    program = program_of(argv, data.programs)
                    assert program is not None, argv[:3]
                    recognised += 1
                    for flag in flag_tokens(argv[len(program.split()) :]):
                        assert flag in data.programs[program], f"{f.path}: {flag} not in {data.path}"
                        checked += 1
        assert recognised == len(r.commands), f"{r.target}/{r.engine}: commands found in files"
    assert checked > 300


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_every_script_is_valid_bash(plan_and_deployment) -> None:
    _, _, dep = plan_and_deployment
    scripts = [(p, text) for p, text in dep.files().items() if p.endswith(".sh")]
    assert scripts
    for path, text in scripts:
        done = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, f"{path}: {done.stderr}"


def test_the_flag_check_can_fail() -> None:
    data = engine_data("vllm")
    with pytest.raises(InputError, match="--tensor-parallel"):
        command(data, "vllm serve", ("m",), [("--tensor-parallel", 2)])
    assert "--tensor-parallel" not in data.programs["vllm serve"]


def test_every_yaml_satisfies_its_schema(plan_and_deployment) -> None:
    _, _, dep = plan_and_deployment
    used = set()
    for f in dep.yaml_files():
        jsonschema.validate(yaml.safe_load(f.text), load_schema(f.schema))
        used.add(f.schema)
    assert used == {
        "dynamo-v1alpha1-dgd",
        "llm-d-0.4-values",
        "trtllm-1.0-disagg-config",
        "trtllm-1.0-extra-llm-api-options",
    }


def test_the_schema_check_can_fail(plan_and_deployment) -> None:
    _, _, dep = plan_and_deployment
    dgd = next(f for f in dep.yaml_files() if f.schema == "dynamo-v1alpha1-dgd")
    doc = yaml.safe_load(dgd.text)
    worker = next(s for s in doc["spec"]["services"].values() if s["componentType"] == "worker")
    worker["replicas"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, load_schema(dgd.schema))


def test_every_schema_and_data_file_cites_its_source() -> None:
    for path in (Path(model.__file__).parent / "deploy" / "schemas").glob("*.json"):
        schema = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        assert "http" in schema["$comment"], path.name
    for engine in ENGINES:
        for version in known_versions(engine):
            data = engine_data(engine, version)
            assert all(src.strip() for flags in data.programs.values() for src in flags.values())


def test_kv_transfer_config_is_the_documented_json(plan_and_deployment) -> None:
    _, _, dep = plan_and_deployment
    kv = engine_data("vllm").table("kv_transfer")
    r = next(r for r in dep.recipes if r.target == "disaggregated" and r.engine == "vllm")
    for cmd in r.commands:
        if cmd.program != "vllm serve":
            continue
        value = dict(cmd.options)["--kv-transfer-config"][0]
        cfg = json.loads(value)
        assert set(cfg) <= set(kv["keys"]) and cfg["kv_role"] in kv["roles"]
        assert cfg["kv_connector"] == "NixlConnector"


# ---------------------------------------------------------------------------------------------
# what the recipes say


def test_dense_reference_recipe_by_hand() -> None:
    """llama-3.1-70b on 16 x H100 (chat, TTFT 1 s, TPOT 50 ms): disaggregated 3 x TP4 + 1 x TP4 (as from
    session 11's prefill packing law; 6 x TP2 + 1 x TP4 with session 12's token-full steps, until session
    13's early passes, model.queueing.bulk_wait item 6, moved the planner's pick back). Prefill
    instances run unchunked with the vLLM
    profile's 8192-token cap (the sample's longest chat request, 7,828 tokens, rounds up to 7936 <
    8192); the decode instance keeps chunked prefill with the 2048-token decode budget; max-num-seqs
    is the profile's 1024; two 8-GPU nodes, the TP4 decode first."""
    p = reference_plan("dense-llama-3.1-70b-16xh100")
    assert p.verdict == "disaggregated"
    dep = deploy(p, "vllm")
    r = dep.recipes[0]
    assert (r.target, r.engine, r.version) == ("recommended", "vllm", "0.12")
    serves = [dict(c.options) for c in r.commands if c.program == "vllm serve"]
    assert sorted(int(o["--tensor-parallel-size"][0]) for o in serves) == [4] * 4
    decodes = [o for o in serves if "--enable-chunked-prefill" in o]
    assert len(decodes) == 1
    for o in serves:
        decode = o is decodes[0]
        assert o["--max-num-batched-tokens"] == (("2048",) if decode else ("8192",))
        assert ("--no-enable-chunked-prefill" in o) == (not decode)
        assert o["--max-num-seqs"] == ("1024",)
        assert o["--max-model-len"] == ("7936",)
    text = dep.files()["recommended/vllm/node-0.sh"]
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3" in text and "vllm serve meta-llama/Llama-3.1-70B" in text
    readme = dep.files()["recommended/vllm/README.md"]
    assert "vllm 0.12" in readme and "hgx-h100-8" in readme


def test_every_recipe_names_its_engine_version(plan_and_deployment) -> None:
    _, _, dep = plan_and_deployment
    for r in dep.recipes:
        data = engine_data(r.engine, r.version)
        for f in r.files:
            assert f"{data.engine}-{data.version}.toml" in f.text or f"**{r.engine} {r.version}**" in f.text


def test_placement_by_hand() -> None:
    """6 x TP2 + 1 x TP4 on 8-GPU nodes: the TP4 decode on node 0 GPUs 0-3, then first-fit
    decreasing: two TP2 on node 0 (4,5 and 6,7), four TP2 on node 1. 12 x TP1 + 2 x TP2: one decode
    per node (GPUs 0,1), six prefills after it on each. A TP16 instance spans two whole nodes;
    without a node profile every instance has a host of its own."""
    node = model.get_node("hgx-h100-8")
    pl = place((("prefill", 6, Parallelism(tp=2)), ("decode", 1, Parallelism(tp=4))), node)
    assert pl.n_nodes == 2
    gpus = {i.name: (i.head, i.slots[0].gpus) for i in pl.instances}
    assert gpus["decode-0"] == (0, (0, 1, 2, 3))
    assert gpus["prefill-0"] == (0, (4, 5)) and gpus["prefill-1"] == (0, (6, 7))
    assert [gpus[f"prefill-{k}"] for k in range(2, 6)] == [(1, (0, 1)), (1, (2, 3)), (1, (4, 5)), (1, (6, 7))]
    assert len({(i.head, i.port) for i in pl.instances}) == 7  # one port per instance per node
    big = place((("replica", 1, Parallelism(tp=16)),), node)
    assert big.n_nodes == 2 and [s.gpus for s in big.instances[0].slots] == [tuple(range(8))] * 2
    moe = place((("prefill", 12, Parallelism(tp=1)), ("decode", 2, Parallelism(tp=2))), node)
    heads = {i.name: (i.head, i.slots[0].gpus) for i in moe.instances}
    assert heads["decode-0"] == (0, (0, 1)) and heads["decode-1"] == (1, (0, 1))  # one per node
    assert [heads[f"prefill-{k}"] for k in (0, 5, 6, 11)] == [(0, (2,)), (0, (7,)), (1, (2,)), (1, (7,))]
    alone = place((("replica", 3, Parallelism(tp=4)),), None)
    assert alone.n_nodes == 3 and all(i.slots[0].gpus == (0, 1, 2, 3) for i in alone.instances)


@settings(max_examples=150, deadline=None)
@given(
    size=st.sampled_from([4, 8]),
    pools=st.lists(
        st.tuples(
            st.sampled_from(["prefill", "decode", "replica"]),
            st.integers(1, 6),
            st.sampled_from([1, 2, 4, 8, 16]),
        ),
        min_size=1,
        max_size=3,
        unique_by=lambda p: p[0],
    ),
)
def test_placement_invariants(size: int, pools) -> None:
    """Every instance gets exactly its GPUs, no GPU is used twice, no node holds more than it has,
    ports are unique per node, and no more nodes are used than one per instance or per GPU group."""
    node = dataclasses.replace(model.get_node("hgx-h100-8"), gpus_per_node=size)
    spec = tuple((name, count, Parallelism(tp=tp)) for name, count, tp in pools)
    pl = place(spec, node)
    taken = set()
    for inst in pl.instances:
        assert sum(len(s.gpus) for s in inst.slots) == inst.parallel.gpus
        for s in inst.slots:
            for g in s.gpus:
                assert 0 <= g < size and (s.node, g) not in taken
                taken.add((s.node, g))
    assert all(pl.gpus_used(n) <= size for n in range(pl.n_nodes))
    assert len({(i.head, i.port) for i in pl.instances}) == len(pl.instances)
    assert sorted((i.pool, i.index) for i in pl.instances) == sorted(
        (name, k) for name, count, _ in pools for k in range(count)
    )
    total = sum(count * tp for _, count, tp in pools)
    assert pl.n_nodes <= sum(count * max(1, -(-tp // size)) for _, count, tp in pools)
    assert pl.n_nodes >= -(-total // size)


def test_model_path_override_and_volume_claim() -> None:
    p = reference_plan("dense-llama-3.1-70b-16xh100")
    dep = deploy(p, ["vllm", "llm-d"], model_path="/models/llama-70b")
    assert "vllm serve /models/llama-70b" in dep.files()["recommended/vllm/node-0.sh"]
    values = yaml.safe_load(dep.files()["recommended/llm-d/values.yaml"])
    assert values["modelArtifacts"]["uri"] == "pvc://model-pvc/models/llama-70b"
    with pytest.raises(InputError, match="model_path"):
        deploy(p, "vllm", model_path="two words")


def test_ep_and_dp_attention_flags_follow_the_parallelism() -> None:
    """A decode pool of DEP8 instances (attention DP 8, EP 8): each engine's own spelling."""
    p = reference_plan("moe-mixtral-8x7b-16xh200")
    best = p.best["disaggregated"]
    dep8 = Parallelism(tp=1, dp_attention=8, ep=8)
    config = dataclasses.replace(best.config, decode_parallel=dep8, n_decode=1)
    t = target(p, "dep", dataclasses.replace(best, config=config), ("mistralai/Mixtral-8x7B-v0.1", "given"))
    from model.recipes import sglang, trtllm, vllm

    dec = t.placement.of_pool("decode")[0]
    v = vllm.render(t, engine_data("vllm"))
    o = next(
        dict(c.options)
        for c in v.commands
        if dict(c.options).get("--port") == (str(dec.port),) and "--data-parallel-size" in dict(c.options)
    )
    assert o["--data-parallel-size"] == ("8",) and "--enable-expert-parallel" in o
    s = sglang.render(t, engine_data("sglang"))
    o = next(dict(c.options) for c in s.commands if "--dp-size" in dict(c.options))
    assert o["--tp-size"] == ("8",) and o["--ep-size"] == ("8",) and "--enable-dp-attention" in o
    tr = trtllm.render(t, engine_data("trtllm"))
    o = next(dict(c.options) for c in tr.commands if "--ep_size" in dict(c.options))
    assert o["--tp_size"] == ("8",) and o["--ep_size"] == ("8",)
    opts = next(f for f in tr.files if f.path.endswith("decode-options.yaml"))
    assert yaml.safe_load(opts.text)["enable_attention_dp"] is True


def test_kv_offload_tiers_become_engine_flags() -> None:
    """A plan with a 1 TB CPU tier and a 10 TB remote store per hgx-h100-8 node (8 GPUs): a TP1
    instance uses 1e12 x 1/8 = 125e9 bytes of the CPU tier. vLLM: --kv-offloading-size in GiB over
    the instance, floor(125e9 / 2^30) = floor(116.4) = 116; SGLang: --hicache-size in GB per rank,
    125, and the remote store as the mooncake storage backend; TensorRT-LLM: host_cache_size =
    125e9 bytes per rank. vLLM cannot take the remote tier (native offloading is CPU only): a note.
    Every flag is checked against the data files as the recipe is built, every YAML against its
    schema (model.deploy)."""
    p = model.plan("llama-3.1-8b", "h100-sxm", workload="chat", ttft_slo_s=1.0, tpot_slo_s=0.05, gpus=2,
                   node="hgx-h100-8", prefix_hit_rate=0.5, kv_offload="cpu:1TB,remote:10TB,working-set:20M",
                   thresholds=False)  # fmt: skip
    files = deploy(p, ["vllm", "sglang", "trtllm"]).files()
    for style in ("colocated", "colocated-chunked"):
        line = files[f"{style}/vllm/node-0.sh"]
        assert "--kv-offloading-backend native" in line and "--kv-offloading-size 116 &" in line, style
        assert "remote KV tier is not set" in files[f"{style}/vllm/README.md"]
        sg = files[f"{style}/sglang/node-0.sh"]
        assert "--enable-hierarchical-cache" in sg and "--hicache-size 125" in sg
        assert "--hicache-storage-backend mooncake" in sg
        opts = yaml.safe_load(files[f"{style}/trtllm/replica-options.yaml"])
        assert opts["kv_cache_config"]["host_cache_size"] == 125_000_000_000
    # disaggregated: the prefill pool keeps the prefixes, the decode pool none; vLLM's NixlConnector
    # and the native offloading's connector exclude each other, so the flag is a note there
    dis = files["disaggregated/vllm/node-0.sh"]
    assert "--kv-offloading-size" not in dis and "MultiConnector" in files["disaggregated/vllm/README.md"]
    pre = yaml.safe_load(files["disaggregated/trtllm/prefill-options.yaml"])
    dec = yaml.safe_load(files["disaggregated/trtllm/decode-options.yaml"])
    assert pre["kv_cache_config"]["host_cache_size"] == 125_000_000_000
    assert "host_cache_size" not in dec.get("kv_cache_config", {})
    sg = files["disaggregated/sglang/node-0.sh"]
    for c in [c for c in shell_commands(sg) if "sglang.launch_server" in c]:
        assert ("--enable-hierarchical-cache" in c) == (c[c.index("--disaggregation-mode") + 1] == "prefill")


# ---------------------------------------------------------------------------------------------
# inputs and outputs


def test_unknown_engine_version_is_one_clear_error() -> None:
    with pytest.raises(InputError) as err:
        engine_data("vllm", "0.9")
    assert "engine_version (vllm)" in str(err.value) and "0.12" in str(err.value)
    with pytest.raises(InputError, match="engine"):
        engine_data("tgi")
    p = reference_plan("dense-llama-3.1-70b-16xh100")
    with pytest.raises(InputError, match="engine_version"):
        deploy(p, "sglang", {"sglang": "9.9"})
    with pytest.raises(InputError, match="plan"):
        model.deploy("not a plan")


@fuzz_settings(fast=40, full=400)
@given(arg=st.sampled_from(["engines", "versions", "model_path"]), value=hostile_value)
def test_deploy_with_one_hostile_argument(small_plan, arg: str, value) -> None:
    """Only pdplan's one-line errors escape, in bounded time; a result still passes its schemas."""
    result = call_api(model.deploy, small_plan, **{arg: value})
    if not isinstance(result, PdplanError):
        for f in result.yaml_files():
            jsonschema.validate(yaml.safe_load(f.text), load_schema(f.schema))


def test_write_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    dep = deploy(reference_plan("dense-llama-3.1-70b-16xh100"), ["vllm", "llm-d"])
    paths = dep.write(tmp_path)
    assert (tmp_path / "recommended" / "vllm" / "node-0.sh").stat().st_mode & 0o100
    assert len(paths) == len(dep.files())
    with pytest.raises(InputError, match="--force"):
        dep.write(tmp_path)
    dep.write(tmp_path, force=True)
    with pytest.raises(InputError, match="outside the pdplan package"):
        dep.write(Path(model.__file__).parent / "recipes")


def test_cli_deploy(tmp_path: Path, capsys) -> None:
    args = [
        "deploy", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--node", "hgx-h100-8",
        "--workload", "chat", "--ttft-slo", "1s", "--tpot-slo", "50ms", "--gpus", "16",
        "--no-thresholds", "--engine", "sglang", "--out-dir", str(tmp_path), "--json",
    ]  # fmt: skip
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["plan_engine_profile"] == "sglang" and out["versions"] == {"sglang": "0.5"}
    assert (tmp_path / "recommended" / "sglang" / "router.sh").is_file()
    assert main(args) == 2  # files exist, no --force
    assert "--force" in capsys.readouterr().err
    bad = [*args[:-3], "--engine-version", "0.1", "--out-dir", str(tmp_path / "x")]
    assert main(bad) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "engine_version (sglang)" in err and "0.5" in err


def test_zip_for_the_app_holds_every_file() -> None:
    """The app's download (app_support/recipes.py) is this zip: every file, scripts executable."""
    import io
    import zipfile

    dep = deploy(reference_plan("dense-llama-3.1-70b-16xh100"), "trtllm")
    with zipfile.ZipFile(io.BytesIO(dep.zip_bytes())) as z:
        names = z.namelist()
        assert names == [f"pdplan-recipes/{p}" for p in dep.files()]
        script = z.getinfo("pdplan-recipes/recommended/trtllm/node-0.sh")
        assert (script.external_attr >> 16) & 0o111
        assert z.read("pdplan-recipes/README.md").decode().startswith("# Deployment recipes")


# ---------------------------------------------------------------------------------------------
# golden files


def golden_files(name: str) -> dict[str, str]:
    return deploy(reference_plan(name)).files()


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_golden_recipes(name: str) -> None:
    want = json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
    got = golden_files(name)
    assert sorted(got) == sorted(want)
    for path, text in want.items():
        assert got[path] == text, f"{name}: {path} differs from the golden file"


if __name__ == "__main__" and "--write" in sys.argv:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name in REFERENCE:
        text = json.dumps(golden_files(name), indent=1) + "\n"
        (GOLDEN / f"{name}.json").write_text(text, encoding="utf-8")
        print("wrote", GOLDEN / f"{name}.json")
