"""The disaggregated serving style: a prefill pool and a decode pool joined by a link
(model.serving.disaggregated holds the analytical model)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from model.errors import InputError
from model.hardware.catalog import get_gpu, get_link
from model.hardware.gpus import GPU
from model.hardware.links import Link
from model.hardware.parallelism import Parallelism
from model.serving.candidates import DisaggregatedSet, link_for
from model.serving.common import slo_ok
from model.serving.configs import DisaggregatedConfig
from model.serving.enumeration import disaggregated_for_budget, layout_from_text, nics_per_gpu, space_layouts
from model.serving.style import CliFlag, SearchSpace, SimLayout, SimPool, TargetGroup
from model.workload.scenario import Scenario

_FLAGS = (
    CliFlag("--tp", "tensor-parallel degree per instance (default 1)"),
    CliFlag("--prefill", "prefill instances (default 1)"),
    CliFlag("--prefill-tp", "prefill TP (default --tp)"),
    CliFlag("--decode", "decode instances (default 1)"),
    CliFlag("--decode-tp", "decode TP (default --tp)"),
    CliFlag("--prefill-parallelism", 'prefill layout instead of --prefill-tp, e.g. "tep=8"', type=str),
    CliFlag("--decode-parallelism", 'decode layout instead of --decode-tp, e.g. "dep=16"', type=str),
    CliFlag("--decode-gpu", "decode GPU (default --gpu)", type=str),
    CliFlag("--link", "KV link between the pools (required)", type=str),
    CliFlag("--no-layerwise", "send the KV after the prefill, not per layer", switch=True),
)


def _configs(
    space: SearchSpace,
    layouts: tuple[Sequence[Parallelism], Sequence[Parallelism]],
    lp: np.ndarray,
    ld: np.ndarray,
    n_p: np.ndarray,
    n_d: np.ndarray,
    cross_node: bool,
) -> list[DisaggregatedConfig]:
    """Configurations for arrays of (prefill layout index, decode layout index, n_p, n_d) into
    ``layouts`` = (prefill layouts, decode layouts); ``cross_node`` forces the NIC link."""
    node_gpus = space.node.gpus_per_node if space.node is not None else None
    intra = space.intra_link if (space.gpu == space.decode_gpu and not cross_node) else None
    out = []
    for a, b, c, d in zip(lp, ld, n_p, n_d, strict=True):
        pa, pb, c, d = layouts[0][int(a)], layouts[1][int(b)], int(c), int(max(d, 1))
        link = link_for(c, pa.gpus, d, pb.gpus, space.link, node_gpus, intra)
        out.append(
            DisaggregatedConfig(
                space.gpu, pa, c, space.decode_gpu, pb, d, link, space.layerwise, nics_per_gpu(space.node)
            )
        )
    return out


def _intra_node_splits(
    space: SearchSpace, layouts: tuple[Sequence[Parallelism], Sequence[Parallelism]]
) -> tuple[np.ndarray, ...]:
    """Every (prefill layout index, decode layout index, n_p, n_d) up to max_gpus whose pools pair
    up inside nodes (see link_for)."""
    if space.node is None or space.intra_link is None or space.gpu != space.decode_gpu:
        return tuple(np.zeros(0, dtype=int) for _ in range(4))
    g = space.node.gpus_per_node
    rows = []
    for i, pa in enumerate(layouts[0]):
        a = pa.gpus
        for j, pb in enumerate(layouts[1]):
            b = pb.gpus
            for per_p in range(1, g // a + 1):
                for per_d in range(1, (g - per_p * a) // b + 1):
                    for k in range(1, space.max_gpus // (per_p * a + per_d * b) + 1):
                        rows.append((i, j, per_p * k, per_d * k))
    if not rows:
        return tuple(np.zeros(0, dtype=int) for _ in range(4))
    arr = np.array(sorted(set(rows)))
    return arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]


@dataclass(frozen=True)
class DisaggregatedStyle:
    """n_p prefill instances and n_d decode instances, each pool with its own layout, KV over a link."""

    name: str = "disaggregated"
    title: str = "disaggregated prefill and decode pools"
    config_type: type = DisaggregatedConfig
    family: str = "disaggregated"
    tie_order: int = 0
    cli_flags: tuple[CliFlag, ...] = _FLAGS

    # -- planner

    def budget_configs(self, space: SearchSpace, gpus: int) -> list[DisaggregatedConfig]:
        if gpus < 2:
            return []
        pre, dec = space_layouts(space, gpus)
        return disaggregated_for_budget(
            space.gpu,
            space.decode_gpu,
            pre,
            dec,
            gpus,
            space.link,
            space.node,
            space.intra_link,
            space.layerwise,
        )

    def target_groups(self, space: SearchSpace) -> list[TargetGroup]:
        """The cheapest splits that keep the SLOs at the target rate.

        Cross-node splits: for each (prefill layout, decode layout, n_p), the fewest decode instances
        by bisection on n_d (monotone over one link: more decode instances never raise TPOT or
        admission wait). Splits that pair up inside nodes (faster link) are checked directly, since
        moving across the node boundary changes the link and breaks that monotonicity.
        """
        scn = space.scenario
        rate = space.target_rate_rps
        layouts = space_layouts(space, space.max_gpus)
        size_p = np.array([p.gpus for p in layouts[0]], dtype=int)
        size_d = np.array([p.gpus for p in layouts[1]], dtype=int)
        base = [
            (i, j, n_p)
            for i, pa in enumerate(layouts[0])
            for j, pb in enumerate(layouts[1])
            for n_p in range(1, (space.max_gpus - pb.gpus) // pa.gpus + 1)
        ]
        if not base:
            return []
        lp = np.array([b[0] for b in base])
        ld = np.array([b[1] for b in base])
        n_p = np.array([b[2] for b in base])
        hi = (space.max_gpus - n_p * size_p[lp]) // size_d[ld]
        lo = np.zeros_like(hi)

        def ok_at(n_d: np.ndarray) -> np.ndarray:
            cands = DisaggregatedSet.build(scn, _configs(space, layouts, lp, ld, n_p, n_d, True))
            res = cands.evaluate(np.full(len(n_d), rate))
            return slo_ok(res, scn.slo) & cands.fits()

        feasible = ok_at(hi)
        while np.any(hi - lo > 1):
            mid = (lo + hi) // 2
            good = ok_at(np.maximum(mid, 1))
            step = hi - lo > 1
            hi = np.where(step & good, mid, hi)
            lo = np.where(step & ~good, mid, lo)
        configs = _configs(space, layouts, lp, ld, n_p, np.maximum(hi, 1), True)
        ok = list(feasible)
        a, b, c, d = _intra_node_splits(space, layouts)
        if len(a):
            configs += _configs(space, layouts, a, b, c, d, False)
            intra = DisaggregatedSet.build(scn, configs[len(ok) :])
            res = intra.evaluate(np.full(len(a), rate))
            ok += list(slo_ok(res, scn.slo))
        cands = DisaggregatedSet.build(scn, configs)
        return [TargetGroup(cands, np.array(ok, dtype=bool), len(base) + len(a))]

    def build_set(self, scenario: Scenario, configs: Sequence[DisaggregatedConfig]) -> DisaggregatedSet:
        return DisaggregatedSet.build(scenario, configs)

    def lose_one(self, config: DisaggregatedConfig) -> dict[str, DisaggregatedConfig | None]:
        def shrink(n_p: int, n_d: int) -> DisaggregatedConfig | None:
            return replace(config, n_prefill=n_p, n_decode=n_d) if n_p >= 1 and n_d >= 1 else None

        return {
            "prefill": shrink(config.n_prefill - 1, config.n_decode),
            "decode": shrink(config.n_prefill, config.n_decode - 1),
        }

    def in_flight(self, ev: Any, scenario: Scenario) -> tuple[dict[str, float], dict[str, float]]:
        """A prefill instance holds the prompt in service (utilisation rho), recomputed when lost; a
        decode instance its batch B, whose prompts and generated tokens (the mean decode context)
        must be recomputed."""
        prompt = float(np.mean(scenario.prompt_tokens))
        return (
            {"prefill": ev.prefill_utilisation, "decode": ev.decode_batch},
            {
                "prefill": ev.prefill_utilisation * prompt,
                "decode": ev.decode_batch * scenario.decode_context_tokens,
            },
        )

    # -- simulator

    def sim_layout(self, config: DisaggregatedConfig) -> SimLayout:
        return SimLayout(
            (
                SimPool("prefill", config.prefill_gpu, config.prefill_parallel, config.n_prefill),
                SimPool("decode", config.decode_gpu, config.decode_parallel, config.n_decode),
            ),
            config.link,
            config.layerwise,
            config.transfer_lanes,
        )

    # -- CLI, reports, app

    def config_from_cli(
        self, values: Mapping[str, Any], gpu: GPU, profile_dirs: str | Path | Sequence | None
    ) -> DisaggregatedConfig:
        if values.get("link") is None:
            raise InputError("--link", None, "a link name for the KV transfer (see `pdplan list links`)")

        def given(key: str, default: Any) -> Any:
            return default if values.get(key) is None else values[key]

        tp = given("tp", 1)
        layouts = {}
        for pool in ("prefill", "decode"):
            text = values.get(f"{pool}_parallelism")
            fixed = None if text is None else layout_from_text(f"--{pool}-parallelism", text)
            layouts[pool] = fixed if fixed is not None else given(f"{pool}_tp", tp)
        return DisaggregatedConfig(
            gpu,
            layouts["prefill"],
            given("prefill", 1),
            get_gpu(values["decode_gpu"], profile_dirs) if values.get("decode_gpu") else gpu,
            layouts["decode"],
            given("decode", 1),
            get_link(values["link"], profile_dirs),
            layerwise=not values.get("no_layerwise"),
        )

    def config_dict(self, config: DisaggregatedConfig) -> dict[str, Any]:
        return {
            "architecture": config.style,
            "prefill_gpu": config.prefill_gpu.name,
            "prefill_tp": config.prefill_tp,
            "n_prefill": config.n_prefill,
            "decode_gpu": config.decode_gpu.name,
            "decode_tp": config.decode_tp,
            "n_decode": config.n_decode,
            "link": config.link.name,
            "layerwise": config.layerwise,
            "n_gpus": config.n_gpus,
        }

    def phase_deployments(self, config: DisaggregatedConfig) -> dict[str, tuple[GPU, Parallelism]]:
        return {
            "prefill": (config.prefill_gpu, config.prefill_parallel),
            "decode": (config.decode_gpu, config.decode_parallel),
        }

    def kv_link(self, config: DisaggregatedConfig) -> Link | None:
        return None if config.link.kind == "same-gpu" else config.link
