"""Candidate sets: many configurations of one style, evaluated together as arrays.

A candidate set holds the tables its configurations need (one per GPU kind x instance layout x chunk) and
index arrays into them, so ``evaluate(rates)`` runs the analytical model for every candidate
in one vectorised pass (DESIGN.md: no Python loop per candidate in the hot path).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from model.hardware.links import Link
from model.serving.colocated import evaluate_colocated
from model.serving.common import StyleResult
from model.serving.configs import ColocatedConfig, DisaggregatedConfig
from model.serving.disaggregated import evaluate_disaggregated
from model.serving.phase_tables import InstanceTables, instance_tables
from model.serving.resources import Resources, one_copy_bytes, pool_memory, pool_power
from model.serving.session_cache import (
    at_levels,
    by_level,
    capacity_limited,
    pool_miss_levels,
    session_tier_tokens,
    tiered_levels,
)
from model.serving.style import CandidateSet
from model.workload.scenario import Scenario

__all__ = ["CandidateSet", "ColocatedSet", "DisaggregatedSet", "link_for", "only"]


def scaled_tables(t: InstanceTables, prefill_factor: float, decode_factor: float) -> InstanceTables:
    """``t`` with its prefill times (unchunked, chunked and their per-step parts) scaled by
    ``prefill_factor`` and its decode step times by ``decode_factor``: one "plausible world" of the
    verdict-robustness sampling (model.planner.robustness). A chunked iteration is mostly prompt
    tokens, so it scales with prefill; memory fit and KV capacity do not change."""

    def times(a: np.ndarray | None, f: float) -> np.ndarray | None:
        return None if a is None else a * f

    return replace(
        t,
        prefill_s=t.prefill_s * prefill_factor,
        prefill_fixed_s=times(t.prefill_fixed_s, prefill_factor),
        chunked_prefill_s=times(t.chunked_prefill_s, prefill_factor),
        chunked_fixed_s=times(t.chunked_fixed_s, prefill_factor),
        decode_step_s=t.decode_step_s * decode_factor,
        chunk_time_factor=t.chunk_time_factor * prefill_factor,
    )


def _table_ids(keys: Sequence[tuple]) -> tuple[list[tuple], np.ndarray]:
    unique: dict[tuple, int] = {}
    idx = np.array([unique.setdefault(k, len(unique)) for k in keys], dtype=int)
    return list(unique), idx


def _used_tables(
    tables: Sequence[InstanceTables], index: np.ndarray
) -> tuple[list[InstanceTables], np.ndarray]:
    """Only the tables ``index`` refers to, and the index into them: an evaluation's per-table work
    (stacking, grid means) then follows the candidates taken, not every table of the full set (a
    goodput search takes a few candidates of a set of many layouts and chunk sizes)."""
    index = np.asarray(index, dtype=int)
    if index.size == 0:  # an empty set keeps its tables (arrays over them keep their dtypes)
        return list(tables), index
    used, inverse = np.unique(index, return_inverse=True)
    return [tables[int(i)] for i in used], inverse.reshape(np.shape(index)).astype(int)


@dataclass(frozen=True, eq=False)
class ColocatedSet:
    """Colocated configurations, all chunked or all unchunked."""

    scenario: Scenario
    configs: list[ColocatedConfig]
    tables: list[InstanceTables] = field(default_factory=list)
    table_index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    session_capacity: bool = (
        True  # session hit rates limited by each replica's cache (model.serving.session_cache)
    )

    @classmethod
    def build(cls, scenario: Scenario, configs: Sequence[ColocatedConfig]) -> ColocatedSet:
        chunked = {c.chunk_tokens is None for c in configs}
        if len(chunked) > 1:
            raise ValueError("a ColocatedSet holds only chunked or only unchunked configurations")
        keys, idx = _table_ids([(c.gpu, c.parallel, c.chunk_tokens) for c in configs])
        tables = [instance_tables(scenario, g, par, ch, "colocated") for g, par, ch in keys]
        return cls(scenario, list(configs), tables, idx)

    def evaluate(self, rate_rps: np.ndarray) -> StyleResult:
        replicas = np.array([c.replicas for c in self.configs], dtype=float)
        rate = np.broadcast_to(np.asarray(rate_rps, dtype=float), replicas.shape)
        scn = self.scenario
        if not (self.session_capacity and capacity_limited(scn)):
            return evaluate_colocated(scn, self.tables, self.table_index, replicas, rate)
        cap = np.array([t.kv_capacity_tokens for t in self.tables])[self.table_index]
        tiers = session_tier_tokens(scn, self.tables, self.table_index)
        h, ws = tiered_levels(scn, rate / replicas, cap, tiers, "colocated")
        pool, dec = scn.workload.prefill_pool_hit_rate, scn.workload.decode_prefix_hit_rate

        def run(level: tuple[float, ...], idx: np.ndarray) -> StyleResult:
            part_scn = at_levels(scn, level[0], pool, dec, level[1])
            part = ColocatedSet.build(part_scn, [self.configs[i] for i in idx])
            return evaluate_colocated(part.scenario, part.tables, part.table_index, replicas[idx], rate[idx])

        return by_level(np.stack([h, ws], axis=1), run)

    def perturbed(self, factors: np.ndarray) -> ColocatedSet:
        """Its first configuration once per row of ``factors`` [D, 3] (prefill time, decode time,
        link bandwidth multipliers; a colocated replica has no link), each with scaled tables."""
        t = self.tables[self.table_index[0]]
        tables = [scaled_tables(t, fp, fd) for fp, fd, _ in np.asarray(factors, dtype=float)]
        n = len(tables)
        return ColocatedSet(
            self.scenario, [self.configs[0]] * n, tables, np.arange(n), session_capacity=False
        )

    def subset(self, mask: np.ndarray) -> ColocatedSet:
        return self.take(np.nonzero(mask)[0])

    def take(self, idx: np.ndarray) -> ColocatedSet:
        """The candidates at positions ``idx`` (repeats allowed: one row per trial rate when a goodput
        search evaluates several rates of a candidate at once, model.planner.goodput)."""
        tables, index = _used_tables(self.tables, self.table_index[idx])
        return ColocatedSet(
            self.scenario, [self.configs[i] for i in idx], tables, index, self.session_capacity
        )

    @property
    def n_gpus(self) -> np.ndarray:
        return np.array([c.n_gpus for c in self.configs], dtype=float)

    @property
    def price_usd_per_hour(self) -> np.ndarray:
        return np.array([c.n_gpus * c.gpu.price_usd_per_hour for c in self.configs], dtype=float)

    def fits(self) -> np.ndarray:
        return np.array([self.tables[i].fits for i in self.table_index], dtype=bool)

    def infeasible_reason(self, i: int) -> str:
        return self.tables[self.table_index[i]].reason

    def resources(self, i: int, res: StyleResult, context_tokens: float) -> Resources:
        c = self.configs[i]
        t = self.tables[self.table_index[i]]
        return Resources(
            (pool_memory("replica", t, float(res.batch[i]), context_tokens),),
            (pool_power("replicas", c.gpu, c.n_gpus, res.decode_busy[i]),),
            c.replicas,
            one_copy_bytes(t),
        )


@dataclass(frozen=True, eq=False)
class DisaggregatedSet:
    """Disaggregated configurations (any mix of GPU kinds, TPs, pool sizes and links)."""

    scenario: Scenario
    configs: list[DisaggregatedConfig]
    prefill_tables: list[InstanceTables] = field(default_factory=list)
    decode_tables: list[InstanceTables] = field(default_factory=list)
    prefill_index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    decode_index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    session_capacity: bool = True  # session hit rates limited by each instance's cache

    @classmethod
    def build(cls, scenario: Scenario, configs: Sequence[DisaggregatedConfig]) -> DisaggregatedSet:
        pkeys, pidx = _table_ids([(c.prefill_gpu, c.prefill_parallel) for c in configs])
        dkeys, didx = _table_ids([(c.decode_gpu, c.decode_parallel) for c in configs])
        pt = [instance_tables(scenario, g, par, None, "prefill") for g, par in pkeys]
        dt = [instance_tables(scenario, g, par, None, "decode") for g, par in dkeys]
        return cls(scenario, list(configs), pt, dt, pidx, didx)

    def _links(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        lanes = np.array([c.transfer_lanes for c in self.configs], dtype=float)
        bw = np.array([c.link.effective_bandwidth_bytes_per_s for c in self.configs], dtype=float)
        lat = np.array([c.link.latency_s for c in self.configs], dtype=float)
        lw = np.array([c.layerwise for c in self.configs], dtype=bool)
        return lanes, bw, lat, lw

    def evaluate(self, rate_rps: np.ndarray) -> StyleResult:
        n_p = np.array([c.n_prefill for c in self.configs], dtype=float)
        n_d = np.array([c.n_decode for c in self.configs], dtype=float)
        rate = np.broadcast_to(np.asarray(rate_rps, dtype=float), n_p.shape)
        lanes, bw, lat, lw = self._links()
        scn = self.scenario
        if not (self.session_capacity and capacity_limited(scn)):
            return self._evaluate_plain(rate, lanes, bw, lat, lw)
        cap_p = np.array([t.kv_capacity_tokens for t in self.prefill_tables])[self.prefill_index]
        cap_d = np.array([t.kv_capacity_tokens for t in self.decode_tables])[self.decode_index]
        # offload tiers: both pools' hit rates at HBM + tiers; the prefill pool's split prices the reloads
        h_p, ws = tiered_levels(
            scn,
            rate / n_p,
            cap_p,
            session_tier_tokens(scn, self.prefill_tables, self.prefill_index),
            "prefill_pool",
        )
        h_d, _ = tiered_levels(
            scn, rate / n_d, cap_d, session_tier_tokens(scn, self.decode_tables, self.decode_index), "decode"
        )
        levels = np.stack([h_p, h_d, ws], axis=1)
        col = scn.workload.prefix_cache_hit_rate
        tiers_p = session_tier_tokens(scn, self.prefill_tables, self.prefill_index)
        miss_k = pool_miss_levels(scn, rate / n_p, cap_p + tiers_p, n_p)

        def run(level: tuple[float, ...], idx: np.ndarray) -> StyleResult:
            part_scn = at_levels(scn, col, level[0], level[1], level[2])
            part = DisaggregatedSet.build(part_scn, [self.configs[i] for i in idx])
            return part._evaluate_plain(rate[idx], lanes[idx], bw[idx], lat[idx], lw[idx], miss_k[idx])

        return by_level(levels, run)

    def _evaluate_plain(
        self,
        rate: np.ndarray,
        lanes: np.ndarray,
        bw: np.ndarray,
        lat: np.ndarray,
        lw: np.ndarray,
        miss_levels: np.ndarray | None = None,
    ) -> StyleResult:
        """The analytical model at the scenario's own hit rates (arrays over candidates); ``miss_levels``
        [C, K]: the prefill pool's history misses per footprint level (session_cache.pool_miss_levels)."""
        n_p = np.array([c.n_prefill for c in self.configs], dtype=float)
        n_d = np.array([c.n_decode for c in self.configs], dtype=float)
        return evaluate_disaggregated(
            self.scenario,
            self.prefill_tables,
            self.decode_tables,
            self.prefill_index,
            self.decode_index,
            n_p,
            n_d,
            lanes,
            bw,
            lat,
            lw,
            rate,
            miss_levels,
        )

    def perturbed(self, factors: np.ndarray) -> DisaggregatedSet:
        """Its first configuration once per row of ``factors`` [D, 3] (prefill time, decode time and
        link bandwidth multipliers), each with scaled tables and link."""
        c = self.configs[0]
        pt = self.prefill_tables[self.prefill_index[0]]
        dt = self.decode_tables[self.decode_index[0]]
        f = np.asarray(factors, dtype=float)
        configs = [
            c
            if c.link.kind == "same-gpu"
            else replace(c, link=replace(c.link, bandwidth_bytes_per_s=c.link.bandwidth_bytes_per_s * fl))
            for fl in f[:, 2]
        ]
        idx = np.arange(len(f))
        return DisaggregatedSet(
            self.scenario,
            configs,
            [scaled_tables(pt, fp, 1.0) for fp in f[:, 0]],
            [scaled_tables(dt, 1.0, fd) for fd in f[:, 1]],
            idx,
            idx.copy(),
            session_capacity=False,
        )

    def subset(self, mask: np.ndarray) -> DisaggregatedSet:
        return self.take(np.nonzero(mask)[0])

    def take(self, idx: np.ndarray) -> DisaggregatedSet:
        """The candidates at positions ``idx`` (repeats allowed, as :meth:`ColocatedSet.take`)."""
        pt, pi = _used_tables(self.prefill_tables, self.prefill_index[idx])
        dt, di = _used_tables(self.decode_tables, self.decode_index[idx])
        return DisaggregatedSet(
            self.scenario, [self.configs[i] for i in idx], pt, dt, pi, di, self.session_capacity
        )

    @property
    def n_gpus(self) -> np.ndarray:
        return np.array([c.n_gpus for c in self.configs], dtype=float)

    @property
    def price_usd_per_hour(self) -> np.ndarray:
        return np.array(
            [
                c.n_prefill * c.prefill_parallel.gpus * c.prefill_gpu.price_usd_per_hour
                + c.n_decode * c.decode_parallel.gpus * c.decode_gpu.price_usd_per_hour
                for c in self.configs
            ],
            dtype=float,
        )

    def fits(self) -> np.ndarray:
        p = np.array([t.fits for t in self.prefill_tables], dtype=bool)[self.prefill_index]
        d = np.array([t.fits for t in self.decode_tables], dtype=bool)[self.decode_index]
        return p & d

    def infeasible_reason(self, i: int) -> str:
        p = self.prefill_tables[self.prefill_index[i]]
        if not p.fits:
            return "prefill: " + p.reason
        return "decode: " + self.decode_tables[self.decode_index[i]].reason

    def resources(self, i: int, res: StyleResult, context_tokens: float) -> Resources:
        c = self.configs[i]
        pt = self.prefill_tables[self.prefill_index[i]]
        dt = self.decode_tables[self.decode_index[i]]
        return Resources(
            (
                pool_memory("prefill", pt, 0.0, context_tokens),
                pool_memory("decode", dt, float(res.batch[i]), context_tokens),
            ),
            (
                pool_power(
                    "prefill", c.prefill_gpu, c.n_prefill * c.prefill_parallel.gpus, res.prefill_busy[i]
                ),
                pool_power("decode", c.decode_gpu, c.n_decode * c.decode_parallel.gpus, res.decode_busy[i]),
            ),
            c.n_prefill + c.n_decode,
            one_copy_bytes(pt),
        )


def link_for(
    n_prefill: int,
    prefill_gpus: int,
    n_decode: int,
    decode_gpus: int,
    link: Link,
    node_gpus: int | None,
    intra_link: Link | None,
) -> Link:
    """The link a split's KV crosses: the node's intra-node link when the pools can be paired inside
    nodes, else ``link`` (the NIC). ``prefill_gpus`` / ``decode_gpus``: GPUs of one instance (G_p, G_d;
    the TP degree for a TP-only layout).

    The split fills k = ceil(GPUs / GPUs per node) nodes; when n_p and n_d both divide by k and each
    node's share (n_p/k x G_p + n_d/k x G_d) fits in it, every prefill instance sends to a decode
    instance in its own node (DistServe's low node-affinity placement, OSDI 2024 sec. 4.2, pairs the
    instances of both phases within a node for the same reason).
    """
    if intra_link is None or node_gpus is None:
        return link
    used = n_prefill * prefill_gpus + n_decode * decode_gpus
    k = -(-used // node_gpus)
    if (
        n_prefill % k == 0
        and n_decode % k == 0
        and (n_prefill // k) * prefill_gpus + (n_decode // k) * decode_gpus <= node_gpus
    ):
        return intra_link
    return link


def only(cands: CandidateSet, i: int) -> CandidateSet:
    """The set holding candidate ``i`` alone (its tables are shared, not rebuilt)."""
    return cands.subset(np.arange(len(cands.configs)) == i)
