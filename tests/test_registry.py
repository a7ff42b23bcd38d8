"""The serving-style registry: a toy style registered from this file alone is planned, simulated and
reported (docs/architecture.md, "Adding a serving style"), and is gone again after the test.

The toy style "colocated-paired" runs colocated replicas in pairs (a pair = two prefill-first
replicas of one TP group). Its analytical model and its simulator layout are those of colocated
serving with twice as many replicas, so every number it produces must equal that configuration's:
the test checks the plumbing (registry -> planner / simulator / CLI / report), not a new model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest

import model
from model.cli import main
from model.errors import InputError
from model.hardware.catalog import get_gpu
from model.hardware.gpus import GPU
from model.hardware.links import Link
from model.planner.report import config_dict, plan_dict
from model.serving.candidates import ColocatedSet
from model.serving.common import slo_ok
from model.serving.configs import ColocatedConfig
from model.serving.enumeration import valid_tps
from model.serving.registry import get_style, register, registered, style_names, style_of, unregister
from model.serving.style import CliFlag, SimLayout, SimPool, TargetGroup
from model.sim.simulate import poisson_requests, simulate
from model.workload.scenario import Scenario
from model.workload.slo import SLO

NAME = "colocated-paired"


@dataclass(frozen=True)
class PairedConfig:
    """``pairs`` pairs of prefill-first colocated replicas, each replica a TP group of ``gpu``."""

    gpu: GPU
    tp: int
    pairs: int
    style = NAME

    @property
    def n_gpus(self) -> int:
        return 2 * self.tp * self.pairs

    def label(self) -> str:
        return f"{self.pairs} pair(s) x TP{self.tp} {self.gpu.name}"

    def as_colocated(self) -> ColocatedConfig:
        return ColocatedConfig(self.gpu, self.tp, 2 * self.pairs)


@dataclass(frozen=True, eq=False)
class PairedSet:
    """Candidate set of paired configurations: the colocated set of their replicas does the work."""

    scenario: Scenario
    configs: list
    inner: ColocatedSet

    def evaluate(self, rate_rps: np.ndarray) -> Any:
        return self.inner.evaluate(rate_rps)

    def subset(self, mask: np.ndarray) -> PairedSet:
        keep = np.nonzero(mask)[0]
        return PairedSet(self.scenario, [self.configs[i] for i in keep], self.inner.subset(mask))

    def fits(self) -> np.ndarray:
        return self.inner.fits()

    def infeasible_reason(self, i: int) -> str:
        return self.inner.infeasible_reason(i)

    def resources(self, i: int, res: Any, context_tokens: float) -> Any:
        return self.inner.resources(i, res, context_tokens)

    @property
    def n_gpus(self) -> np.ndarray:
        return self.inner.n_gpus

    @property
    def price_usd_per_hour(self) -> np.ndarray:
        return self.inner.price_usd_per_hour


class PairedStyle:
    name = NAME
    config_type = PairedConfig
    family = "colocated"
    title = "colocated, replicas in pairs"
    tie_order = 9
    cli_flags = (
        CliFlag("--tp", "tensor-parallel degree per instance (default 1)"),
        CliFlag("--pairs", "pairs"),
    )

    def budget_configs(self, space: Any, gpus: int) -> list[PairedConfig]:
        tps = valid_tps(space.scenario.arch, space.tp_options, gpus, space.node)
        return [PairedConfig(space.gpu, tp, gpus // (2 * tp)) for tp in tps if gpus // (2 * tp) >= 1]

    def target_groups(self, space: Any) -> list[TargetGroup]:
        tps = valid_tps(space.scenario.arch, space.tp_options, space.max_gpus, space.node)
        configs = [
            PairedConfig(space.gpu, tp, k) for tp in tps for k in range(1, space.max_gpus // (2 * tp) + 1)
        ]
        cands = self.build_set(space.scenario, configs)
        res = cands.evaluate(np.full(len(configs), space.target_rate_rps))
        return [TargetGroup(cands, slo_ok(res, space.scenario.slo) & cands.fits(), len(configs))]

    def build_set(self, scenario: Scenario, configs: Any) -> PairedSet:
        return PairedSet(
            scenario, list(configs), ColocatedSet.build(scenario, [c.as_colocated() for c in configs])
        )

    def lose_one(self, config: PairedConfig) -> dict[str, Any]:
        return {"pair": replace(config, pairs=config.pairs - 1) if config.pairs > 1 else None}

    def in_flight(self, ev: Any, scenario: Scenario) -> tuple[dict[str, float], dict[str, float]]:
        per_replica = ev.decode_batch + ev.prefill_utilisation
        return {"pair": 2 * per_replica}, {"pair": 2 * ev.decode_batch * scenario.decode_context_tokens}

    def sim_layout(self, config: PairedConfig) -> SimLayout:
        return SimLayout((SimPool("replica", config.gpu, config.tp, 2 * config.pairs),))

    def config_from_cli(self, values: Mapping[str, Any], gpu: GPU, profile_dirs: Any) -> PairedConfig:
        return PairedConfig(gpu, values.get("tp") or 1, values.get("pairs") or 1)

    def config_dict(self, config: PairedConfig) -> dict[str, Any]:
        return {"architecture": NAME, "gpu": config.gpu.name, "tp": config.tp, "pairs": config.pairs}

    def phase_deployments(self, config: PairedConfig) -> dict[str, tuple[GPU, int]]:
        return {"prefill": (config.gpu, config.tp), "decode": (config.gpu, config.tp)}

    def kv_link(self, config: PairedConfig) -> Link | None:
        return None


@pytest.fixture
def paired() -> Iterator[PairedStyle]:
    with registered(PairedStyle()) as style:
        yield style
    assert NAME not in style_names()  # the registry is clean again


def _plan(**kwargs: Any) -> model.Plan:
    return model.plan(
        "llama-3.1-8b",
        "h100-sxm",
        workload="chat",
        ttft_slo_s=0.5,
        tpot_slo_s=0.05,
        samples=128,
        thresholds=False,
        **kwargs,
    )


def test_toy_style_is_planned_on_a_budget_and_reported(paired: PairedStyle) -> None:
    p = _plan(gpus=4)
    assert list(p.best)[-1] == NAME  # plans list styles in registration order
    b = p.best[NAME]
    assert b.style == NAME and isinstance(b.config, PairedConfig)
    # 4 GPUs: TP1 x 2 pairs or TP2 x 1 pair; the goodput is that of 4 or 2 colocated replicas.
    assert b.config.n_gpus == 4
    same = model.config_goodput(p.inputs.scenario, b.config.as_colocated())
    assert b.goodput_rps == pytest.approx(same, rel=1e-12)
    assert model.config_goodput(p.inputs.scenario, b.config) == pytest.approx(same, rel=1e-12)
    assert set(b.failure.goodput_after_loss_rps) == {"pair"}
    out = plan_dict(p)["best"][NAME]
    assert out["architecture"] == NAME and out["pairs"] == b.config.pairs
    assert out["at_goodput"]["architecture"] == NAME
    assert any(r.startswith(f"Best {NAME}:") for r in p.reasons)
    # A single evaluation of the toy configuration goes through the same registry.
    ev = model.evaluate(b.config, p.inputs.scenario, b.goodput_rps)
    assert ev.style == NAME and ev.weight_copies == 2 * b.config.pairs


def test_toy_style_is_planned_for_a_target_rate(paired: PairedStyle) -> None:
    p = _plan(target_rate_rps=4.0, max_gpus=8)
    b = p.best[NAME]
    assert b.n_gpus % 2 == 0 and b.goodput_rps >= 4.0
    # The fewest GPUs of colocated TP1 x replicas can only be matched or beaten with pairs rounded up.
    col = p.best["colocated"]
    assert b.n_gpus >= col.n_gpus


def test_toy_style_is_simulated_like_its_colocated_twin(paired: PairedStyle) -> None:
    h100 = get_gpu("h100-sxm")
    req = poisson_requests("chat", 6.0, 300, seed=3)
    slo = SLO(0.5, 0.05)
    toy = simulate(PairedConfig(h100, 1, 2), "llama-3.1-8b", req, slo=slo).summary
    twin = simulate(ColocatedConfig(h100, 1, 4), "llama-3.1-8b", req, slo=slo).summary
    assert toy.architecture == NAME and twin.architecture == "colocated"
    assert toy.ttft_s == twin.ttft_s and toy.tpot_s == twin.tpot_s and toy.attainment == twin.attainment
    assert toy.pools[0].instances == 4


def test_toy_style_through_the_cli(paired: PairedStyle, capsys: pytest.CaptureFixture) -> None:
    base = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--workload", "chat", "--rate", "2"]
    code = main([*base, "--style", NAME, "--pairs", "2", "--requests", "100", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["architecture"] == NAME and out["pools"][0]["instances"] == 4
    # Its flag belongs to it alone; the built-in flags are refused by it.
    assert main([*base, "--style", "colocated", "--pairs", "2"]) == 2
    assert f"only with --style {NAME}" in capsys.readouterr().err
    assert main([*base, "--style", NAME, "--chunk", "512"]) == 2
    assert "only with --style colocated-chunked" in capsys.readouterr().err
    plan_args = ["plan", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--workload", "chat", "--gpus", "2"]
    code = main([*plan_args, "--ttft-slo", "500ms", "--tpot-slo", "50ms", "--no-thresholds", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["best"][NAME]["pairs"] == 1


def test_unregistered_after_the_test() -> None:
    assert NAME not in style_names()
    with pytest.raises(InputError, match="colocated-paired"):
        get_style(NAME)
    with pytest.raises(InputError, match="registered style"):
        style_of(PairedConfig(get_gpu("h100-sxm"), 1, 1))
    assert NAME not in _plan(gpus=2).best
    # argparse refuses the unknown style name: a one-line usage error, exit code 2
    code = main(
        [
            "simulate",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--style",
            NAME,
            "--workload",
            "chat",
        ]
    )
    assert code == 2


def test_registration_is_checked() -> None:
    with pytest.raises(InputError, match="a new non-empty name"):
        register(get_style("colocated"))  # a name is registered once
    with pytest.raises(InputError, match="missing"):
        register(object())  # type: ignore[arg-type]
    bad = PairedStyle()
    bad.family = "both"  # type: ignore[misc]
    with pytest.raises(InputError, match="family"):
        register(bad)
    with pytest.raises(InputError, match="registered style"):
        unregister(NAME)


def test_built_in_styles_and_the_architecture_alias(capsys: pytest.CaptureFixture) -> None:
    assert style_names()[:3] == ("colocated", "colocated-chunked", "disaggregated")
    h100 = get_gpu("h100-sxm")
    cfg = ColocatedConfig(h100, 2, 3, chunk_tokens=512)
    assert style_of(cfg).name == cfg.style == cfg.architecture == "colocated-chunked"
    assert config_dict(cfg)["architecture"] == "colocated-chunked"
    base = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--workload", "chat", "--rate", "1"]
    for flag in ("--style", "--architecture"):
        assert main([*base, flag, "colocated-chunked", "--requests", "50", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["architecture"] == "colocated-chunked"
