"""Prefix reuse with KV offload tiers in the simulator: each whole-prompt prefill draws where its
reused prefix is found (HBM, a tier, or nowhere) and pays the reload from a tier.

The placement of the working set and the reload time are :mod:`model.physics.kv_tiers`'s (the
planner's too); what the simulator adds is the draw: a prompt finds its prefix in HBM with
probability s_hbm, in tier i with probability s_i and nowhere with 1 - sum s (the uniform-reuse
model stated there), so reload times vary request by request where the planner uses their mean.
A hit skips floor(h x prompt) tokens (at least the last is computed:
:func:`model.workload.scenario.cached_prompt_tokens`). A batch of k prompts costs
``prefill_cost(mean new tokens, cached = mean cached, batch = k)`` plus the sum of their reloads
(the reloads share each GPU's link to the tier). Chunked (mixed) iterations are passed through
unchanged: this module covers whole-prompt prefills (colocated prefill-first and the prefill pool).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from model.errors import InputError
from model.hardware.kv_offload import KVOffload
from model.physics.deployment import Deployment
from model.physics.kv_tiers import PrefixPlacement, prefix_placement, tier_tokens
from model.physics.steps import prefill_cost
from model.workload.scenario import cached_prompt_tokens


@dataclass(frozen=True)
class PrefixReuse:
    """The prefix reuse every whole-prompt prefill of a run sees: ``hit_rate`` (fraction of prompt
    tokens that repeat an earlier prefix), ``kv_offload`` (tiers and working set; None: every
    reused prefix stays in HBM) and the ``seed`` of the tier draws."""

    hit_rate: float
    kv_offload: KVOffload | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        h = self.hit_rate
        if isinstance(h, bool) or not (isinstance(h, int | float) and 0 <= h <= 1):
            raise InputError("prefix_hit_rate", h, "a fraction of prompt tokens in [0, 1]")
        if self.kv_offload is not None and not isinstance(self.kv_offload, KVOffload):
            raise InputError("kv_offload", self.kv_offload, "a KVOffload (model.parse_kv_offload) or None")


class TieredPrefixSteps:
    """:class:`model.sim.engine.StepTimes` of ``inner`` with prefix hits drawn per prompt."""

    def __init__(self, inner: Any, dep: Deployment, hbm_tokens: float, reuse: PrefixReuse) -> None:
        self.inner = inner
        self.dep = dep
        self.reuse = reuse
        self.place: PrefixPlacement = prefix_placement(dep, hbm_tokens, reuse.kv_offload)
        self._cum = np.cumsum(self.place.stored)
        self._rng = np.random.default_rng(reuse.seed)
        self._cost: dict[tuple[int, int, int], float] = {}

    def __getattr__(self, name: str) -> Any:  # decode_s, mixed_s, decode_tokens, ...
        if name == "inner":  # not yet set (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _reload_s(self, tier: int, hit_tokens: float) -> float:
        """Reload time of ``hit_tokens`` from offload tier ``tier`` (1 = the first below HBM)."""
        bytes_per_gpu = hit_tokens * self.place.kv_bytes_per_token_per_gpu
        bw = self.place.bandwidths_bytes_per_s[tier - 1]
        return self.place.latencies_s[tier - 1] + bytes_per_gpu / bw

    def prefill_s(self, prompts: Sequence[int], cached: Sequence[int] | None = None) -> float:
        """One prefill iteration over whole prompts, each drawing where its prefix is found. When the
        run already says how many tokens of each prompt repeat an earlier prefix (``cached``: the
        requests' cached tokens or the per-instance LRU block caches, model.sim.prefix_cache), those
        are the prefix whose tier is drawn; otherwise floor(h x prompt) is."""
        if cached is None:
            full = np.asarray(prompts, dtype=float)
            hit = cached_prompt_tokens(full, self.reuse.hit_rate)
        else:
            hit = np.asarray(cached, dtype=float)
            full = np.asarray(prompts, dtype=float) + hit
        p = full
        where = np.searchsorted(self._cum, self._rng.random(len(p)), side="right")
        found = where < len(self._cum)
        cached = np.where(found, hit, 0.0)
        reload = sum(
            self._reload_s(int(w), float(c))
            for w, c in zip(where, cached, strict=True)
            if 0 < w < len(self._cum) and c > 0
        )
        k = len(p)
        key = (k, round(float(np.mean(p - cached))), round(float(np.mean(cached))))
        if key not in self._cost:
            cost = prefill_cost(self.dep, max(key[1], 1), cached_tokens=key[2], batch=k)
            self._cost[key] = float(cost.time_s)
        return self._cost[key] + reload


def cache_tiers(dep: Deployment, reuse: PrefixReuse | None) -> tuple[tuple[float, Any], ...]:
    """The offload tiers of an instance's LRU prefix caches (model.sim.prefix_cache): per tier, its
    KV tokens for one instance of ``dep`` (model.physics.kv_tiers.tier_tokens) and its reload time
    of a number of tokens (KVTier.reload_time_s of their bytes per GPU). Empty without tiers or when
    a working set is given (then each prefill draws its tier instead, :class:`TieredPrefixSteps`)."""
    off = reuse.kv_offload if reuse is not None else None
    if off is None or off.working_set_tokens is not None:
        return ()
    per = dep.kv_bytes_per_token_per_gpu
    return tuple(
        (float(c), lambda n, t=t: t.reload_time_s(n * per))
        for c, t in zip(tier_tokens(dep, off), off.tiers, strict=True)
    )
