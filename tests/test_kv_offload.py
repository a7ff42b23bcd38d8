"""KV offload tiers (issue 15): node host memory and NVMe, the tier spec grammar, the placement of
the prefix working set, reload times by hand, the planner's reason line and the simulator."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import model
from model.errors import InputError
from model.hardware.catalog import get_gpu, get_link, get_node
from model.hardware.kv_offload import HOST_COPY_LATENCY_S, NVME_READ_LATENCY_S, parse_kv_offload
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.kv_tiers import prefix_placement
from model.sim.steps import RooflineSteps
from model.sim.tiers import PrefixReuse, TieredPrefixSteps
from model.workload.presets import get_workload

H200_NODE = "hgx-h200-8"


def _dep70(tp: int = 4) -> Deployment:
    return Deployment(get_model("llama-3.1-70b"), get_gpu("h200"), parallel=tp)


def test_node_profiles_state_host_memory_and_nvme_with_sources():
    node = get_node(H200_NODE)
    assert node.host_memory_bytes == 2e12  # DGX H200 datasheet: 2 TB system memory
    assert node.nvme_capacity_bytes == pytest.approx(8 * 3.84e12)
    assert "datasheet" in node.source("host_memory") and "3.84 TB" in node.source("nvme_capacity")
    gb200 = get_node("gb200-nvl72")
    assert gb200.host_link_bandwidth_bytes_per_s == 225e9  # NVLink-C2C 900 GB/s bidir / 2 / 2 GPUs
    assert "NVLink-C2C" in gb200.source("host_link_bandwidth")


def test_reload_time_from_each_tier_by_hand():
    """Llama-3.1-70B bf16, TP4 on an HGX H200 node: KV per token = 2 (K, V) x 80 layers x 8 KV heads
    x 128 x 2 bytes = 327,680 B, 81,920 B per GPU. A 4,000-token prefix is 327.68 MB per GPU:
    CPU over the H200's PCIe Gen5 x16 (64 GB/s) 5.12 ms + 5 us; NVMe at 56 GB/s / 8 GPUs = 7 GB/s
    46.811 ms + 100 us; remote over one 400G NDR port per GPU at 50 GB/s x link efficiency."""
    dep = _dep70()
    assert dep.kv_bytes_per_token_per_gpu == 81_920
    off = parse_kv_offload("cpu:1TB,nvme:8TB,remote:100TB", H200_NODE)
    cpu, nvme, remote = off.tiers
    per_gpu = 4000 * 81_920
    assert cpu.reload_time_s(per_gpu) == pytest.approx(5e-6 + 327.68e6 / 64e9)
    assert cpu.reload_time_s(per_gpu) == pytest.approx(5.125e-3)
    assert nvme.reload_time_s(per_gpu) == pytest.approx(100e-6 + 327.68e6 / 7e9)
    ndr = get_link("ib-ndr-400")
    assert ndr.bandwidth_bytes_per_s == 50e9
    assert remote.reload_time_s(per_gpu) == pytest.approx(ndr.latency_s + 327.68e6 / (50e9 * ndr.efficiency))
    assert (cpu.latency_s, nvme.latency_s) == (HOST_COPY_LATENCY_S, NVME_READ_LATENCY_S)


def test_working_set_fills_the_fastest_tier_first():
    """W = 10M tokens; HBM holds 1M; the TP4 instance has 4/8 of the node: CPU 2 TB x 4/8 / 4 GPUs
    = 250 GB per GPU / 81,920 B = 3,051,757.8 tokens; NVMe 30.72 TB x 4/8 / 4 = 3.84 TB per GPU =
    46,875,000 tokens holds the rest. Shares 0.1, 0.30518, 0.59482; all hits served."""
    dep = _dep70()
    off = parse_kv_offload("cpu:2TB,nvme:30.72TB,working-set:10M", H200_NODE)
    place = prefix_placement(dep, 1e6, off)
    cpu_tokens = 250e9 / 81_920
    assert place.capacity_tokens == pytest.approx((1e6, cpu_tokens, 3.84e12 / 81_920))
    assert place.stored == pytest.approx((0.1, cpu_tokens / 1e7, 1 - 0.1 - cpu_tokens / 1e7))
    assert place.served_fraction == pytest.approx(1.0)
    t_cpu, t_nvme = (t.reload_time_s(4000 * 81_920) for t in off.tiers)
    expected = place.stored[1] * t_cpu + place.stored[2] * t_nvme
    assert float(place.reload_time_s(4000)) == pytest.approx(expected)
    # HBM only: a 10M-token working set in 1M tokens of HBM serves a tenth of the hits, reloads nothing
    hbm = prefix_placement(dep, 1e6, parse_kv_offload("working-set:10M", H200_NODE))
    assert hbm.stored == (0.1,) and float(hbm.reload_time_s(4000)) == 0.0
    # no working set: every reused prefix stays in HBM (the planner's behaviour without tiers)
    assert prefix_placement(dep, 1e6, parse_kv_offload("cpu:1TB", H200_NODE)).stored == (1.0, 0.0)


def test_remote_store_is_shared_by_every_instance():
    """A remote store's capacity is the whole store for any instance: 100 TB / 327,680 B per token."""
    place = prefix_placement(_dep70(), 0.0, parse_kv_offload("remote:100TB,working-set:1G", H200_NODE))
    assert place.capacity_tokens[1] == pytest.approx(100e12 / 327_680)


@pytest.mark.parametrize(
    "spec, field, words",
    [
        ("cpu:3TB", "kv_offload.cpu", "host_memory of node hgx-h200-8 (2 TB)"),
        ("nvme:40TB", "kv_offload.nvme", "nvme_capacity of node hgx-h200-8"),
        ("cpu", "kv_offload", "TIER:SIZE"),
        ("gpu:1TB", "kv_offload", "one of cpu, nvme, remote"),
        ("cpu:1TB,cpu:1TB", "kv_offload", "at most once"),
        ("cpu:__import__('os')", "kv_offload.cpu", "bytes"),
        ("cpu:1TB@fast", "kv_offload.cpu bandwidth", "bandwidth"),
        ("working-set:lots", "kv_offload.working-set", "token count"),
        ("x" * 300, "kv_offload", "200 characters"),
    ],
)
def test_bad_tier_specs_get_one_clear_error(spec, field, words):
    with pytest.raises(InputError) as err:
        parse_kv_offload(spec, H200_NODE)
    assert err.value.field == field
    assert words in str(err.value)


def test_a_node_without_host_memory_refuses_a_cpu_tier():
    with pytest.raises(InputError, match="a node profile stating host_memory"):
        parse_kv_offload("cpu:100GB", "mi355x-8")


def test_tier_larger_than_host_memory_through_plan_names_the_field():
    with pytest.raises(InputError) as err:
        model.plan(
            "llama-3.1-8b",
            "h200",
            gpus=8,
            workload="chat",
            ttft_slo_s=1,
            tpot_slo_s=0.05,
            kv_offload="cpu:4TB",
        )
    assert err.value.field == "kv_offload.cpu"


def test_simulator_draws_match_the_planners_mean():
    """With every prefix in the CPU tier, a one-prompt prefill costs the roofline's prefill of the
    new tokens after the cached ones plus the CPU reload; with no reuse it is the plain step."""
    dep = Deployment(get_model("llama-3.1-8b"), get_gpu("h100-sxm"))
    plain = RooflineSteps(dep)
    off = parse_kv_offload("cpu:2TB,working-set:1M", "hgx-h100-8")
    steps = TieredPrefixSteps(RooflineSteps(dep), dep, 0.0, PrefixReuse(0.5, off))
    assert steps.place.stored == (0.0, 1.0)
    cpu = off.tiers[0]
    expected = float(model.prefill_cost(dep, 1000, cached_tokens=1000).time_s) + cpu.reload_time_s(
        1000 * dep.kv_bytes_per_token_per_gpu
    )
    assert steps.prefill_s([2000]) == pytest.approx(expected)
    none = TieredPrefixSteps(RooflineSteps(dep), dep, 1e6, PrefixReuse(0.0))
    assert none.prefill_s([1500, 500]) == pytest.approx(plain.prefill_s([1500, 500]))
    assert none.decode_s(4, 1000) == plain.decode_s(4, 1000)


def test_tiers_recover_lost_hits_flip_the_verdict_and_the_reasons_say_so():
    """Llama-3.1-70B on 8 x H200, chat with a 60% prefix hit rate over a 50M-token working set: HBM
    alone keeps a few % of it; CPU + NVMe tiers keep all of it, so prefill computes less at the
    price of reloads, and the plan's goodput rises. With little prefill work left, interference in
    colocated serving shrinks and the verdict flips from disaggregated (HBM only: the split wins by
    ~17%) to colocated-chunked. The reasons name the tiers and the reload."""
    wl = dataclasses.replace(get_workload("chat"), prefix_cache_hit_rate=0.6)
    kw = dict(gpus=8, node=H200_NODE, workload=wl, ttft_slo_s=1.0, tpot_slo_s=0.05, thresholds=False)
    hbm = model.plan("llama-3.1-70b", "h200", kv_offload="working-set:50M", **kw)
    tiers = model.plan("llama-3.1-70b", "h200", kv_offload="cpu:2TB,nvme:30TB,working-set:50M", **kw)
    best = lambda p: max(b.goodput_rps for b in p.best.values())  # noqa: E731
    assert best(tiers) > 1.2 * best(hbm)
    assert hbm.verdict == "disaggregated" and tiers.verdict.startswith("colocated")
    line = next(r for r in tiers.reasons if r.startswith("KV offload"))
    assert "nvme" in line and "reloads" in line and "-> 60% served" in line
    hbm_line = next(r for r in hbm.reasons if r.startswith("KV offload"))
    assert "served" in hbm_line and "-> 60% served" not in hbm_line


def test_planner_and_simulator_agree_with_tiers():
    """Whole-prompt prefill, Llama-3.1-8B on 2 x H100, CPU + NVMe tiers: goodput within 10%
    (benchmark grid benchmarks/kv_offload_agreement.py, 6,000 requests: 24.2 / 24.8, 0.98;
    docs/validation.md)."""
    from benchmarks.kv_offload_agreement import agreement
    from model.serving.configs import ColocatedConfig

    g_plan, g_sim = agreement(
        "cpu:2TB,nvme:30TB,working-set:20M",
        ColocatedConfig(get_gpu("h100-sxm"), 1, 2),
        model.SLO(0.5, 0.02),
        2000,
    )
    assert g_plan == pytest.approx(g_sim, rel=0.10)
    assert np.isfinite(g_plan) and g_plan > 0


def test_cli_plan_with_kv_offload_and_a_tier_too_large():
    from tests.fuzz_common import cli_text

    base = (
        "plan --model llama-3.1-8b --gpu h200 --gpus 2 --workload chat --ttft-slo 1s --tpot-slo 50ms "
        "--no-thresholds --tp 1 --chunks 2048 --json"
    )
    code, out, _ = cli_text(base + " --kv-offload cpu:1TB,working-set:5M")
    assert code == 0 and json.loads(out)["verdict"]
    code, out, err = cli_text(base + " --kv-offload cpu:3TB")
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1
    assert "kv_offload.cpu" in lines[0] and "host_memory of node hgx-h200-8 (2 TB)" in lines[0]


def test_cli_simulate_with_kv_offload():
    """`pdplan simulate --kv-offload`: the same arrivals and hit rate with tiers cost at least what
    HBM-resident prefixes cost (a reload or a miss where the draw lands beyond HBM), at most what no
    reuse costs in the median; a tier larger than the node's host memory is one error line."""
    from tests.fuzz_common import cli_text

    base = (
        "simulate --model llama-3.1-8b --gpu h100-sxm --style colocated --tp 1 --replicas 2 --workload chat "
        "--rate 20 --requests 400 --ttft-slo 500ms --tpot-slo 20ms --json"
    )
    ttft = {}
    for name, extra in (
        ("none", ""),
        ("hbm", " --prefix-hit-rate 0.7"),
        ("tiers", " --prefix-hit-rate 0.7 --kv-offload cpu:1TB,nvme:8TB,working-set:20M"),
    ):
        code, out, err = cli_text(base + extra)
        assert code == 0, err
        ttft[name] = json.loads(out)["ttft_s"]["p50"]
    assert ttft["hbm"] < ttft["tiers"] <= ttft["none"] * 1.05
    code, out, err = cli_text(base + " --prefix-hit-rate 0.7 --kv-offload cpu:3TB")
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "kv_offload.cpu" in lines[0]


def test_scenario_file_and_app_carry_kv_offload(tmp_path):
    pytest.importorskip("streamlit")
    from app_support import inputs
    from model.planner.compare import compare
    from tests.test_app import DEFAULT, apply, assert_clean, errors_of, run_app, verdict_of

    state = {**inputs.DEFAULTS, "kv_offload": "cpu:1TB,working-set:50M", "gpus": 8}
    spec = inputs.Spec({"config_text": None, "trace_name": None})
    path = tmp_path / "offload.json"
    path.write_text(inputs.scenario_json(spec, state=state), encoding="utf-8")
    got = compare(str(path), str(path)).a
    expected = model.plan(
        "llama-3.1-70b", "h100-sxm", gpus=8, kv_offload="cpu:1TB,working-set:50M", **DEFAULT
    )
    assert got.goodput_rps == pytest.approx(expected.best[expected.verdict].goodput_rps)
    at = run_app(advanced=True)
    at.text_input(key="kv_offload").set_value("cpu:3TB")
    apply(at)
    assert_clean(at)
    assert verdict_of(at) is None
    assert any("kv_offload.cpu" in e and "host_memory" in e for e in errors_of(at)), errors_of(at)


def test_no_reused_prefix_means_no_reload():
    """A prompt with no reused tokens (hit rate 0, or a one-token prompt) reloads nothing, in the
    planner's mean and in the simulator's draws."""
    dep = _dep70()
    place = prefix_placement(dep, 0.0, parse_kv_offload("nvme:8TB,working-set:1M", H200_NODE))
    assert place.stored == (0.0, 1.0)
    assert np.all(place.reload_time_s(np.array([0.0, 0.0])) == 0.0)
    off = parse_kv_offload("nvme:8TB,working-set:1M", H200_NODE)
    steps = TieredPrefixSteps(RooflineSteps(dep), dep, 0.0, PrefixReuse(0.0, off))
    assert steps.prefill_s([1000]) == pytest.approx(RooflineSteps(dep).prefill_s([1000]))
