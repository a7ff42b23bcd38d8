"""How much traffic each pool size carries: one style's scaling table, from one plan.

A plan for the peak rate fixes each style's instance layout (TP, chunk budget, GPU kinds, link).
Scaling that deployment over a day only adds or removes instances of that layout, so the table holds
every pool size up to one instance past the peak's (colocated: replicas 1..R+1; disaggregated:
every (n_prefill, n_decode) up to (N_p+1, N_d+1)) with its goodput, found in one vectorised search
over all of them (model.planner.goodput.goodput_rps). The smallest size carrying a rate is then a
lookup (:meth:`Capacity.smallest`), never a new plan.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from model.llm.arch import weight_bytes
from model.planner.goodput import goodput_rps
from model.planner.types import BestConfig
from model.serving.configs import ColocatedConfig, DisaggregatedConfig
from model.serving.registry import style_of
from model.workload.scenario import Scenario

__all__ = ["COVER_RTOL", "Capacity", "capacity_of"]

COVER_RTOL = 1e-4
"""A size carries a rate when goodput >= rate x (1 - COVER_RTOL): the goodput search resolves the
highest good rate to about 2**-16 of its bracket (model.planner.goodput), so a configuration the
planner found good at exactly the peak may come back a few 1e-5 short of it."""


@dataclass(frozen=True, eq=False)
class Capacity:
    """One style's scaling table: ``counts[k, j]`` instances in pool ``pools[j]`` for candidate k,
    and candidate k's goodput (req/s). Each pool's instance has ``gpus_per_instance[j]`` GPUs
    costing ``price_usd_per_instance_hour[j]``; ``weight_bytes_per_instance`` is what a starting
    instance loads."""

    style: str
    peak_label: str
    pools: tuple[str, ...]
    counts: np.ndarray
    gpus_per_instance: tuple[int, ...]
    price_usd_per_instance_hour: tuple[float, ...]
    goodput_rps: np.ndarray
    weight_bytes_per_instance: float

    @property
    def n_gpus(self) -> np.ndarray:
        """GPUs of each candidate: sum over pools of instances x GPUs per instance."""
        return self.counts @ np.asarray(self.gpus_per_instance, dtype=float)

    @property
    def cost_usd_per_hour(self) -> np.ndarray:
        """Price of each candidate: sum over pools of instances x price per instance-hour."""
        return self.counts @ np.asarray(self.price_usd_per_instance_hour, dtype=float)

    def frontier(self) -> np.ndarray:
        """Candidates in order of GPUs (then cost, then higher goodput), keeping only those whose
        goodput beats every smaller one: goodput strictly increases along the frontier."""
        order = np.lexsort((-self.goodput_rps, self.cost_usd_per_hour, self.n_gpus))
        g = self.goodput_rps[order]
        best_before = np.concatenate(([-np.inf], np.maximum.accumulate(g)[:-1]))
        return order[g > best_before]

    def smallest(self, rate_rps: np.ndarray) -> np.ndarray:
        """Index of the fewest-GPU candidate carrying each rate (-1 where none does): a binary search
        of the frontier, vectorised over the rates."""
        front = self.frontier()
        g = self.goodput_rps[front]
        pos = np.searchsorted(g, np.asarray(rate_rps, dtype=float) * (1.0 - COVER_RTOL), side="left")
        return np.where(pos < g.size, front[np.minimum(pos, g.size - 1)], -1)


def _sizes(config: object) -> tuple[list, tuple[str, ...], np.ndarray, tuple, tuple] | None:
    """The candidate configurations of one layout up to one instance past ``config``'s pools."""
    if isinstance(config, ColocatedConfig):
        r = np.arange(1, config.replicas + 2)
        configs = [replace(config, replicas=int(k)) for k in r]
        g = config.parallel.gpus
        return configs, ("replica",), r[:, None].astype(float), (g,), (g * config.gpu.price_usd_per_hour,)
    if isinstance(config, DisaggregatedConfig):
        p, d = np.meshgrid(
            np.arange(1, config.n_prefill + 2), np.arange(1, config.n_decode + 2), indexing="ij"
        )
        pairs = np.column_stack((p.ravel(), d.ravel()))
        configs = [replace(config, n_prefill=int(a), n_decode=int(b)) for a, b in pairs]
        gp, gd = config.prefill_parallel.gpus, config.decode_parallel.gpus
        prices = (gp * config.prefill_gpu.price_usd_per_hour, gd * config.decode_gpu.price_usd_per_hour)
        return configs, ("prefill", "decode"), pairs.astype(float), (gp, gd), prices
    return None


def capacity_of(best: BestConfig, scenario: Scenario) -> Capacity | None:
    """The scaling table of ``best``'s layout (None for a style whose pools this module cannot size:
    only the colocated and disaggregated configurations are scaled today)."""
    sizes = _sizes(best.config)
    if sizes is None:
        return None
    configs, pools, counts, gpus, prices = sizes
    cands = style_of(best.config).build_set(scenario, configs)
    fits = np.asarray(cands.fits(), dtype=bool)
    g = np.zeros(len(configs))
    if fits.any():
        g[fits] = goodput_rps(cands.subset(fits), scenario.slo)
    return Capacity(
        best.architecture,
        best.label,
        pools,
        counts,
        gpus,
        prices,
        g,
        weight_bytes(scenario.arch, scenario.weight_dtype),
    )
