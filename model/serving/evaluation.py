"""Evaluate one serving configuration at one request rate: every metric a plan reports.

``evaluate(config, scenario, rate_rps)`` runs the same vectorised model the planner uses (one
candidate) and adds the metrics of DESIGN.md: TTFT/TPOT percentiles with the TTFT components,
SLO attainment, token rates, utilisations, KV bytes and transfer time, memory per GPU and weight
duplication, power, energy per output token and cost per million output tokens.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from model.errors import InputError
from model.serving.common import StyleResult, check_slo
from model.serving.registry import build_set, style_of
from model.serving.resources import PoolMemory, PoolPower
from model.workload.scenario import Scenario

# The built-in configuration types; any registered style's configuration is accepted.
# Any registered style's configuration (model.serving.registry checks it; built-ins: ColocatedConfig,
# DisaggregatedConfig).
Config = Any

__all__ = [
    "Evaluation",
    "Percentiles",
    "PoolMemory",
    "PoolPower",
    "PromptClass",
    "cost_usd_per_million_output_tokens",
    "evaluate",
    "summarise",
]


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
    # expected pre-emptions per request (docs/model.md, KV offload tiers); in the JSON when > 0
    preemptions_per_request: float = field(default=0.0, repr=False)

    @property
    def style(self) -> str:
        """The serving style's registry name (the field ``architecture`` keeps the JSON key)."""
        return self.architecture

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


def evaluate(config: Config, scenario: Scenario, rate_rps: float) -> Evaluation:
    """Every metric of ``config`` serving ``scenario`` at ``rate_rps`` requests per second."""
    style_of(config)  # InputError unless a registered style's configuration
    if not isinstance(scenario, Scenario):
        raise InputError("scenario", scenario, "a Scenario (model.Scenario.build(...))")
    if not (isinstance(rate_rps, numbers.Real) and np.isfinite(rate_rps) and 0 < rate_rps <= 1e7):
        raise InputError("rate", rate_rps, "a request rate in (0, 1e7] req/s")
    cands = build_set(scenario, [config])
    res = cands.evaluate(np.array([float(rate_rps)]))
    return summarise(cands, res, 0, scenario, float(rate_rps))


def cost_usd_per_million_output_tokens(price_usd_per_hour: Any, output_tokens_per_s: Any) -> np.ndarray:
    """Cost per million output tokens = price per hour / 3600 / output tokens per second x 1e6
    (inf where nothing is produced); arrays or floats."""
    price = np.asarray(price_usd_per_hour, dtype=float)
    tps = np.asarray(output_tokens_per_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tps > 0, price / 3600.0 / np.where(tps > 0, tps, 1.0) * 1e6, np.inf)


def _pct(values: np.ndarray, i: int) -> float:
    return float(values[i])


PERCENTILES = (0.5, 0.9, 0.99)


def percentiles_of(lat) -> tuple[Percentiles, Percentiles]:
    """TTFT and TPOT p50/p90/p99 of a one-candidate latency model, in one vectorised bisection."""
    ttft, tpot = lat.percentiles_s(PERCENTILES)
    return Percentiles(*map(float, ttft)), Percentiles(*map(float, tpot))


def percentiles_and_classes(
    lat, scenario: Scenario
) -> tuple[Percentiles, Percentiles, tuple[PromptClass, ...]]:
    """TTFT and TPOT p50/p90/p99 of a one-candidate latency model over all sampled requests, and
    p90 TTFT, p90 TPOT and attainment of short, medium and long prompts (terciles of the sample;
    DESIGN.md asks for the metrics of short, long and mixed prompts): all the percentiles in one
    vectorised bisection (model.queueing.latency.LatencyModel.percentiles_s with request masks)."""
    prompts = scenario.prompt_tokens
    lo, hi = np.quantile(prompts, [1 / 3, 2 / 3])
    classes = [
        (name, mask)
        for name, mask in (
            ("short", prompts <= lo),
            ("medium", (prompts > lo) & (prompts <= hi)),
            ("long", prompts > hi),
        )
        if mask.any()
    ]
    everyone = np.ones(len(prompts), dtype=bool)
    masks = np.stack([everyone] * len(PERCENTILES) + [m for _, m in classes])
    qs = PERCENTILES + (0.9,) * len(classes)
    ttft, tpot = lat.percentiles_s(qs, masks)
    k = len(PERCENTILES)
    slo = scenario.slo
    out = tuple(
        PromptClass(
            name,
            (float(prompts[mask].min()), float(prompts[mask].max())),
            float(ttft[k + j]),
            float(tpot[k + j]),
            float(lat.requests(mask).attainment(slo.ttft_s, slo.tpot_s)[0]),
        )
        for j, (name, mask) in enumerate(classes)
    )
    return Percentiles(*map(float, ttft[:k])), Percentiles(*map(float, tpot[:k])), out


def summarise(cands, res: StyleResult, i: int, scenario: Scenario, rate_rps: float) -> Evaluation:
    """Build the Evaluation of candidate ``i`` of an evaluated candidate set."""
    config = cands.configs[i]
    lat = res.latency
    stable = bool(res.stable[i])
    slo = scenario.slo
    sub = lat.row(i)
    ttft, tpot, classes = percentiles_and_classes(sub, scenario)
    check = check_slo(sub, sub.stable, slo)
    attainment = float(check.attainment[0])
    meets = bool(check.ok[0])
    eo = scenario.mean_output_tokens
    out_tps = rate_rps * eo if stable else 0.0
    prompt_tps = rate_rps * scenario.mean_prompt_tokens if stable else 0.0
    batch = float(res.batch[i])
    ctx = scenario.decode_context_tokens
    t_base = float(lat.tpot_base_s[i])
    used = cands.resources(i, res, ctx)
    memory, power, copies, weights_one = (
        used.memory,
        used.power,
        used.weight_copies,
        used.weight_bytes_one_copy,
    )
    total_power = sum(p.power_w for p in power)
    price = float(np.asarray(cands.price_usd_per_hour)[i])
    energy = total_power / out_tps if out_tps > 0 else float("inf")
    cost = float(cost_usd_per_million_output_tokens(price, out_tps))
    mb = float(res.max_batch[i])
    return Evaluation(
        architecture=config.style,
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
        by_prompt_length=classes,
        preemptions_per_request=_preemptions(res, i),
    )


def _preemptions(res: Any, i: int) -> float:
    """Candidate ``i``'s expected pre-emptions per request (0 where its style models none)."""
    k = getattr(res, "preemptions_per_request", None)
    return float(k[i]) if k is not None else 0.0
