"""Where a workload's reused prefixes live when KV offload tiers sit below HBM, the hit rate that
leaves, and the reload time of a hit from a tier (LMCache / SGLang HiCache / Mooncake store).

Model (stated once here; the planner's phase tables and the simulator both call it):

- **Working set.** The workload reuses W tokens of distinct prefix KV
  (``KVOffload.working_set_tokens``: system prompts, documents, earlier turns of live sessions).
  Engines fill the cache fastest tier first and evict downward (HBM -> CPU -> NVMe -> remote;
  LMCache's local CPU backend then local disk, SGLang HiCache's host then storage layer), so
  HBM holds min(W, C_hbm) tokens, CPU the next min(W - C_hbm, C_cpu), and so on.
- **Uniform reuse.** Each reused prefix is equally likely to be hit (the independent reference
  model with uniform popularity, under which an LRU cache of C items out of N hits with probability
  C / N: King 1971, "Analysis of demand paging algorithms"; Che et al. 2002, IEEE JSAC 20(7)).
  So a prefix is found in tier i with probability s_i = (stored in i) / W, and not at all with
  probability 1 - sum s_i. The workload's prefix hit rate h (the fraction of prompt tokens that
  repeat an earlier prefix) is served at h x sum s_i; without a working set (W None) every reused
  prefix is taken to stay in HBM (s_hbm = 1: the planner's behaviour before tiers).
- **Reload.** A hit in tier i brings its KV back before the prompt's prefill runs (LMCache's
  retrieve in vLLM's KV connector blocks the forward pass that needs it): each GPU reloads its own
  shard, hit tokens x KV bytes per token per GPU, at the tier's bandwidth per GPU, plus the
  tier's latency (:meth:`model.hardware.kv_offload.KVTier.reload_time_s`). Expected over the
  tiers: sum_i s_i x (latency_i + hit bytes per GPU / bandwidth_i). No overlap with compute is
  assumed (layer-wise loading would hide part of it: an upper bound).
- **Running batch.** The decode batch stays bound by HBM: attention reads every running sequence's
  KV each step, and a tier 30-75x slower than HBM (64 GB/s PCIe vs 4.8 TB/s) cannot feed it;
  engines reload offloaded KV before the sequence runs again. More tier capacity keeps more
  prefixes and paused sessions resident, not more sequences decoding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.errors import InputError
from model.hardware.kv_offload import KVOffload
from model.physics.deployment import Deployment


@dataclass(frozen=True)
class PrefixPlacement:
    """Where one instance keeps the workload's reused prefixes: ``capacity_tokens`` of HBM and of
    each offload tier (HBM first), and ``stored``, the fraction of the working set in each (summing
    to the fraction of prefix hits that find their KV at all)."""

    capacity_tokens: tuple[float, ...]
    stored: tuple[float, ...]
    bandwidths_bytes_per_s: tuple[float, ...]  # per GPU, tiers only (HBM needs no reload)
    latencies_s: tuple[float, ...]
    kv_bytes_per_token_per_gpu: float

    @property
    def served_fraction(self) -> float:
        """Fraction of the workload's prefix hits that still hit: sum of ``stored``."""
        return float(sum(self.stored))

    def reload_time_s(self, hit_tokens: np.ndarray | float) -> np.ndarray:
        """Expected reload time of a request whose reused prefix is ``hit_tokens`` long:
        sum over tiers of s_i x (latency_i + hit_tokens x KV bytes per token per GPU / bandwidth_i);
        0 for a request with no reused prefix."""
        tokens = np.asarray(hit_tokens, dtype=float)
        total = np.zeros_like(tokens)
        for s, bw, lat in zip(self.stored[1:], self.bandwidths_bytes_per_s, self.latencies_s, strict=True):
            if s > 0:
                total = total + s * (lat + tokens * self.kv_bytes_per_token_per_gpu / bw)
        return np.where(tokens > 0, total, 0.0)  # no reused prefix, nothing to reload


def tier_tokens(dep: Deployment, offload: KVOffload) -> tuple[float, ...]:
    """KV tokens each tier holds for one instance of ``dep``: cpu/nvme, the instance's GPUs' share
    of the node tier over each GPU's KV bytes per token (each GPU offloads its own shard); remote,
    the whole shared store over the instance's KV bytes per token."""
    out = []
    for t in offload.tiers:
        if t.kind == "remote":
            out.append(t.capacity_bytes / dep.kv_bytes_per_token)
        else:
            per_gpu = t.instance_bytes(dep.n_gpus, offload.gpus_per_node) / dep.n_gpus
            out.append(per_gpu / dep.kv_bytes_per_token_per_gpu)
    return tuple(out)


def prefix_placement(dep: Deployment, hbm_tokens: float, offload: KVOffload | None) -> PrefixPlacement:
    """The placement of the working set on an instance of ``dep`` whose HBM holds ``hbm_tokens``
    of KV (model.physics.memory.MemoryFit.kv_capacity_tokens), filling the fastest tier first."""
    if not (np.isfinite(hbm_tokens) and hbm_tokens >= 0):
        raise InputError("hbm_tokens", hbm_tokens, "a token count >= 0")
    kvpg = dep.kv_bytes_per_token_per_gpu
    if offload is None:
        return PrefixPlacement((float(hbm_tokens),), (1.0,), (), (), kvpg)
    caps = (float(hbm_tokens), *tier_tokens(dep, offload))
    bws = tuple(t.bandwidth_bytes_per_s for t in offload.tiers)
    lats = tuple(t.latency_s for t in offload.tiers)
    w = offload.working_set_tokens
    if w is None:
        return PrefixPlacement(caps, (1.0,) + (0.0,) * len(offload.tiers), bws, lats, kvpg)
    left, stored = float(w), []
    for c in caps:
        take = min(left, c)
        stored.append(take / float(w))
        left -= take
    return PrefixPlacement(caps, tuple(stored), bws, lats, kvpg)
