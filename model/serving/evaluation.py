"""Evaluate one serving configuration at one request rate: every metric a plan reports.

``evaluate(config, scenario, rate_rps)`` runs the same vectorised model the planner uses (one
candidate) and adds the metrics of DESIGN.md: TTFT/TPOT percentiles with the TTFT components,
SLO attainment, token rates, utilisations, KV bytes and transfer time, memory per GPU and weight
duplication, power, energy per output token and cost per million output tokens.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from model.errors import InputError
from model.hardware.gpus import GPU
from model.serving.candidates import build_set
from model.serving.common import StyleResult
from model.serving.configs import ColocatedConfig, DisaggregatedConfig
from model.serving.phase_tables import InstanceTables
from model.workload.scenario import Scenario

Config = ColocatedConfig | DisaggregatedConfig


@dataclass(frozen=True)
class Percentiles:
    """p50 / p90 / p99 of one latency metric, in seconds."""

    p50: float
    p90: float
    p99: float


@dataclass(frozen=True)
class PromptClass:
    """Latency of the requests in one prompt-length class (terciles of the sampled prompts)."""

    name: str
    prompt_tokens_range: tuple[float, float]
    ttft_p90_s: float
    tpot_p90_s: float
    slo_attainment: float


@dataclass(frozen=True)
class PoolMemory:
    """Memory of one GPU in a pool, in bytes: weights, KV in use at this rate, KV capacity, workspace."""

    pool: str
    gpu: str
    gpu_memory_bytes: float
    weight_bytes: float
    kv_in_use_bytes: float
    kv_capacity_bytes: float
    workspace_bytes: float
    reserve_bytes: float


@dataclass(frozen=True)
class PoolPower:
    """Power of one pool: GPUs x (idle + (TDP - idle) x busy fraction)."""

    pool: str
    n_gpus: int
    busy_fraction: float
    power_w: float


@dataclass(frozen=True)
class Evaluation:
    """One configuration at one rate. Times in seconds, bytes, watts, joules, US dollars."""

    architecture: str
    label: str
    config: Config
    rate_rps: float
    n_gpus: int
    stable: bool
    unstable_reason: str
    ttft_s: Percentiles
    tpot_s: Percentiles
    ttft_mean_s: float
    tpot_mean_s: float
    decode_step_s: float
    queue_wait_s: float
    prefill_s: float
    transfer_s: float
    link_wait_s: float
    admission_wait_s: float
    max_itl_s: float
    slo_attainment: float
    meets_slo: bool
    prompt_tokens_per_s: float
    output_tokens_per_s: float
    prefill_utilisation: float
    decode_batch: float
    max_batch: float
    decode_kv_utilisation: float
    link_utilisation: float
    kv_bytes_per_request: float
    memory: tuple[PoolMemory, ...]
    weight_copies: int
    weight_bytes_total: float
    power: tuple[PoolPower, ...]
    energy_j_per_output_token: float
    cost_usd_per_million_output_tokens: float
    by_prompt_length: tuple[PromptClass, ...] = ()

    @property
    def ttft_components_s(self) -> dict[str, float]:
        """Mean TTFT split into queue wait, prefill, KV transfer, link wait and decode admission."""
        return {
            "queue_wait": self.queue_wait_s,
            "prefill": self.prefill_s,
            "transfer": self.transfer_s,
            "link_wait": self.link_wait_s,
            "admission_wait": self.admission_wait_s,
        }


def _pool_power(pool: str, gpu: GPU, n_gpus: int, busy: float) -> PoolPower:
    """P = n x (P_idle + (TDP - P_idle) x busy): a linear utilisation power model (the common
    first-order server power model, Fan et al. ISCA 2007, "Power provisioning for a warehouse-sized
    computer", sec. 4.1), with the GPU's idle and TDP from its profile."""
    b = float(np.clip(busy, 0.0, 1.0))
    return PoolPower(pool, n_gpus, b, n_gpus * (gpu.idle_w + (gpu.tdp_w - gpu.idle_w) * b))


def _memory(pool: str, t: InstanceTables, batch: float, context_tokens: float) -> PoolMemory:
    per_token = t.fit.kv_bytes_per_token_per_gpu
    capacity = float(t.kv_capacity_tokens) * per_token
    return PoolMemory(
        pool,
        t.dep.gpu.name,
        t.dep.gpu.memory_bytes,
        t.fit.weight_bytes_per_gpu,
        min(batch * context_tokens * per_token, capacity),
        capacity,
        float(np.asarray(t.fit.workspace_bytes_per_gpu)),
        t.fit.reserve_bytes_per_gpu,
    )


def evaluate(config: Config, scenario: Scenario, rate_rps: float) -> Evaluation:
    """Every metric of ``config`` serving ``scenario`` at ``rate_rps`` requests per second."""
    if not isinstance(config, ColocatedConfig | DisaggregatedConfig):
        raise InputError("config", config, "a ColocatedConfig or DisaggregatedConfig")
    if not isinstance(scenario, Scenario):
        raise InputError("scenario", scenario, "a Scenario (model.Scenario.build(...))")
    if not (isinstance(rate_rps, numbers.Real) and np.isfinite(rate_rps) and 0 < rate_rps <= 1e7):
        raise InputError("rate", rate_rps, "a request rate in (0, 1e7] req/s")
    cands = build_set(scenario, [config])
    res = cands.evaluate(np.array([float(rate_rps)]))
    return summarise(cands, res, 0, scenario, float(rate_rps))


def _pct(values: np.ndarray, i: int) -> float:
    return float(values[i])


def prompt_classes(lat, scenario: Scenario) -> tuple[PromptClass, ...]:
    """p90 TTFT, p90 TPOT and attainment of short, medium and long prompts (terciles of the sample)
    for a one-candidate latency model: DESIGN.md asks for the metrics of short, long and mixed prompts."""
    prompts = scenario.prompt_tokens
    lo, hi = np.quantile(prompts, [1 / 3, 2 / 3])
    classes = (("short", prompts <= lo), ("medium", (prompts > lo) & (prompts <= hi)), ("long", prompts > hi))
    slo = scenario.slo
    out = []
    for name, mask in classes:
        if not mask.any():
            continue
        sub = lat.requests(mask)
        out.append(
            PromptClass(
                name,
                (float(prompts[mask].min()), float(prompts[mask].max())),
                float(sub.ttft_percentile_s(0.9)[0]),
                float(sub.tpot_percentile_s(0.9)[0]),
                float(sub.attainment(slo.ttft_s, slo.tpot_s)[0]),
            )
        )
    return tuple(out)


def summarise(cands, res: StyleResult, i: int, scenario: Scenario, rate_rps: float) -> Evaluation:
    """Build the Evaluation of candidate ``i`` of an evaluated candidate set."""
    config = cands.configs[i]
    lat = res.latency
    stable = bool(res.stable[i])
    slo = scenario.slo
    sub = lat.row(i)
    ttft = Percentiles(*(float(sub.ttft_percentile_s(q)[0]) for q in (0.5, 0.9, 0.99)))
    tpot = Percentiles(*(float(sub.tpot_percentile_s(q)[0]) for q in (0.5, 0.9, 0.99)))
    attainment = float(sub.attainment(slo.ttft_s, slo.tpot_s)[0])
    q = slo.percentile / 100.0
    meets = bool(
        stable
        and attainment >= slo.attainment
        and float(sub.ttft_cdf(np.array([[slo.ttft_s]])).mean()) >= q
        and float(sub.tpot_cdf(np.array([[slo.tpot_s]])).mean()) >= q
    )
    eo = scenario.mean_output_tokens
    out_tps = rate_rps * eo if stable else 0.0
    prompt_tps = rate_rps * scenario.mean_prompt_tokens if stable else 0.0
    batch = float(res.batch[i])
    ctx = scenario.decode_context_tokens
    t_base = float(lat.tpot_base_s[i])
    if isinstance(config, DisaggregatedConfig):
        pt = cands.prefill_tables[cands.prefill_index[i]]
        dt = cands.decode_tables[cands.decode_index[i]]
        memory = (_memory("prefill", pt, 0.0, ctx), _memory("decode", dt, batch, ctx))
        copies = config.n_prefill + config.n_decode
        power = (
            _pool_power(
                "prefill", config.prefill_gpu, config.n_prefill * config.prefill_tp, res.prefill_busy[i]
            ),
            _pool_power("decode", config.decode_gpu, config.n_decode * config.decode_tp, res.decode_busy[i]),
        )
        weights_one = pt.fit.weight_bytes_per_gpu * pt.dep.n_gpus
    else:
        t = cands.tables[cands.table_index[i]]
        memory = (_memory("replica", t, batch, ctx),)
        copies = config.replicas
        power = (_pool_power("replicas", config.gpu, config.n_gpus, res.decode_busy[i]),)
        weights_one = t.fit.weight_bytes_per_gpu * t.dep.n_gpus
    total_power = sum(p.power_w for p in power)
    price = float(np.asarray(cands.price_usd_per_hour)[i])
    energy = total_power / out_tps if out_tps > 0 else float("inf")
    cost = price / 3600.0 / out_tps * 1e6 if out_tps > 0 else float("inf")
    mb = float(res.max_batch[i])
    return Evaluation(
        architecture=config.architecture,
        label=config.label(),
        config=config,
        rate_rps=rate_rps,
        n_gpus=int(config.n_gpus),
        stable=stable,
        unstable_reason=str(res.unstable_reason[i]),
        ttft_s=ttft,
        tpot_s=tpot,
        ttft_mean_s=float(res.ttft_mean_s[i]),
        tpot_mean_s=float(res.tpot_mean_s[i]),
        decode_step_s=t_base,
        queue_wait_s=float(res.queue_wait_mean_s[i]),
        prefill_s=float(res.prefill_mean_s[i]),
        transfer_s=float(res.transfer_mean_s[i]),
        link_wait_s=float(res.link_wait_mean_s[i]),
        admission_wait_s=float(res.admission_wait_mean_s[i]),
        max_itl_s=float(res.max_itl_s[i]),
        slo_attainment=attainment,
        meets_slo=meets,
        prompt_tokens_per_s=prompt_tps,
        output_tokens_per_s=out_tps,
        prefill_utilisation=float(res.prefill_busy[i]),
        decode_batch=batch,
        max_batch=mb,
        decode_kv_utilisation=batch / mb if mb > 0 else float("inf"),
        link_utilisation=float(res.link_utilisation[i]),
        kv_bytes_per_request=float(res.kv_bytes_per_request[i]),
        memory=memory,
        weight_copies=int(copies),
        weight_bytes_total=float(copies * weights_one),
        power=power,
        energy_j_per_output_token=energy,
        cost_usd_per_million_output_tokens=cost,
        by_prompt_length=prompt_classes(sub, scenario),
    )
