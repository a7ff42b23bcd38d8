"""The cost tables are shared by scenarios that differ only in their SLO (a re-plan with new targets
reuses them), never by scenarios that differ in anything the tables depend on."""

from __future__ import annotations

from dataclasses import replace

import model
from model.serving.phase_tables import clear_table_caches, instance_tables, table_scenario
from model.workload.scenario import Scenario
from model.workload.slo import SLO


def _scn(**kw) -> Scenario:
    return Scenario.build("llama-3.1-8b", "chat", kw.pop("slo", SLO(0.5, 0.05)), **kw)


def test_scenarios_differing_only_in_slo_share_tables():
    clear_table_caches()
    a, b = _scn(), _scn(slo=SLO(2.0, 0.02, percentile=99))
    assert table_scenario(a) is a  # the first seen is the one the caches key on
    assert b is not a and table_scenario(b) is a
    gpu = model.get_gpu("h100-sxm")
    assert instance_tables(b, gpu, 1, None, "colocated") is instance_tables(a, gpu, 1, None, "colocated")


def test_scenarios_differing_elsewhere_do_not():
    clear_table_caches()
    a = _scn()
    for other in (
        _scn(dtype="fp8"),
        _scn(seed=1),
        replace(a, prompt_scale=2.0),
        replace(a, gpu_memory_utilization=0.8),
        Scenario.build("llama-3.1-8b", "code", SLO(0.5, 0.05)),
        Scenario.build("llama-3.1-70b", "chat", SLO(0.5, 0.05)),
    ):
        assert table_scenario(other) is other


def test_a_warm_plan_equals_a_cold_one():
    """The second plan (new targets, tables from the first) gives what a cold plan gives."""
    kw = dict(workload="chat", gpus=8, thresholds=False)
    clear_table_caches()
    model.plan("llama-3.1-8b", "h100-sxm", ttft_slo_s=0.5, tpot_slo_s=0.05, **kw)
    warm = model.plan("llama-3.1-8b", "h100-sxm", ttft_slo_s=0.3, tpot_slo_s=0.03, **kw)
    clear_table_caches()
    cold = model.plan("llama-3.1-8b", "h100-sxm", ttft_slo_s=0.3, tpot_slo_s=0.03, **kw)
    assert {k: (b.label, b.goodput_rps) for k, b in warm.best.items()} == {
        k: (b.label, b.goodput_rps) for k, b in cold.best.items()
    }
    assert warm.verdict == cold.verdict
