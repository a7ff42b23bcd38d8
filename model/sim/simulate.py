"""Trace-driven discrete-event simulator: one arrival sequence through colocated or disaggregated
serving, per-request records and summaries, and goodput by rate search.

The independent check on the analytical planner: it shares only the phase-cost layer (model.physics,
model.hardware.collectives) and the configuration types (model.serving.configs). Event loop:
:mod:`model.sim.engine`; schedulers: :mod:`model.sim.colocated` (pre-emption: model.sim.preemption),
:mod:`model.sim.disaggregated`; step times :mod:`model.sim.steps`; results :mod:`model.sim.report`.

Entry points:

- :func:`simulate` (the configuration of any registered serving style, e.g. a
  :class:`~model.serving.configs.ColocatedConfig`; a model; requests) -> :class:`SimResult`: the
  style's ``sim_layout`` (model.serving.style.SimLayout) says which pools to build;
- :func:`simulate_colocated`, :func:`simulate_disaggregated`: the same with explicit instance specs
  (any :class:`~model.sim.engine.StepTimes`), for hand-traceable cases and what-if studies;
- :func:`poisson_requests`, :func:`trace_requests`: build the request sequence;
- :func:`goodput`: highest rate meeting the SLO, by bisection over time-scaled arrivals.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from model.errors import InputError, check_whole
from model.hardware.catalog import get_engine
from model.hardware.engines import Engine, check_swap_tier
from model.hardware.gpus import GPU
from model.hardware.overheads import Overheads
from model.hardware.parallelism import Parallelism
from model.limits import MAX_ARRIVAL_S, MAX_INSTANCES, MAX_SIM_REQUESTS, check_int, checked
from model.llm.arch import LLMArch
from model.llm.attention import KVLayout, kv_layout
from model.llm.catalog import get_model
from model.physics.deployment import Deployment
from model.physics.memory import memory_fit
from model.physics.speculation import Speculation
from model.serving.registry import style_of
from model.serving.style import SimPool
from model.sim.colocated import run_colocated
from model.sim.disaggregated import TransferFn, run_disaggregated
from model.sim.engine import (
    CallableSteps,
    InstanceSpec,
    SimOptions,
    SimRequests,
    StepTimes,
    new_run,
)
from model.sim.preemption import preemption_spec
from model.sim.report import PoolStats, RequestRecords, SimSummary, records_from, summarise
from model.sim.requests import poisson_requests, trace_requests
from model.sim.steps import KVTransfer, RooflineSteps
from model.sim.tiers import PrefixReuse, TieredPrefixSteps, cache_tiers
from model.workload.arrivals import scale_to_rate
from model.workload.slo import SLO

__all__ = [
    "CallableSteps",
    "GoodputResult",
    "InstanceSpec",
    "SimOptions",
    "SimRequests",
    "SimResult",
    "StepTimes",
    "build_instance",
    "goodput",
    "poisson_requests",
    "scenario_options",
    "simulate",
    "simulate_colocated",
    "simulate_disaggregated",
    "trace_requests",
]


@dataclass(frozen=True, eq=False)
class SimResult:
    """Summary and per-request records of one run."""

    summary: SimSummary
    records: RequestRecords


# ---------------------------------------------------------------------------------------- specs


def build_instance(
    arch: LLMArch,
    gpu: GPU,
    parallel: Parallelism | int,
    *,
    max_batched_tokens: int,
    workspace_tokens: int,
    weight_dtype: str = "bf16",
    kv_dtype: str | None = None,
    gpu_memory_utilization: float = 0.9,
    max_num_seqs: int | None = None,
    overheads: Overheads | None = None,
    field: str = "config",
    speculation: Speculation | None = None,
    prefix: PrefixReuse | None = None,
) -> tuple[InstanceSpec, Deployment]:
    """An instance spec from the roofline (step times) and model.memory (KV capacity) for ``gpu``
    GPUs laid out as ``parallel`` (a Parallelism; a whole number = TP-only of that degree).

    ``overheads``: the engine's (:meth:`model.hardware.engines.Engine.overheads`, the planner's
    too); None: the GPU profile's step overhead only. Raises InputError naming ``field`` when the
    weights and workspace leave no room for KV. ``prefix``: prefix hits (and KV offload tiers) drawn
    per whole-prompt prefill (model.sim.tiers).
    """
    dep = Deployment(
        arch,
        gpu,
        parallel=parallel,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        overheads=overheads,
        speculation=speculation,
    )
    label = f"{dep.parallel.label} {gpu.name}"
    fit = memory_fit(dep, max_batched_tokens=workspace_tokens, gpu_memory_utilization=gpu_memory_utilization)
    if not bool(fit.fits):
        raise InputError(field, label, f"a configuration that fits in memory: {fit.reason}")
    steps: Any = RooflineSteps(dep)
    if prefix is not None:
        steps = TieredPrefixSteps(steps, dep, float(fit.kv_capacity_tokens), prefix)
    spec = InstanceSpec(
        steps,
        int(fit.kv_capacity_tokens),
        int(max_batched_tokens),
        max_num_seqs,
        label=label,
    )
    return spec, dep


# ---------------------------------------------------------------------------------------- runs


def simulate_colocated(
    spec: InstanceSpec,
    replicas: int,
    requests: SimRequests,
    *,
    chunked: bool = False,
    slo: SLO | None = None,
    options: SimOptions | None = None,
    label: str = "",
    style: str | None = None,
) -> SimResult:
    """Replay ``requests`` through ``replicas`` colocated replicas of ``spec`` (see model.sim.colocated).

    With ``chunked`` the token budget per iteration is ``spec.max_batched_tokens``. ``style`` names the
    serving style in the summary (:func:`simulate` passes the registered style's; default "colocated").
    """
    replicas = check_whole("replicas", replicas)
    opts = options or SimOptions()
    rec, loop = new_run(requests, opts)
    pool = run_colocated(spec, replicas, chunked, loop, rec, opts.prefix_routing, opts.router)
    makespan = max(loop.now - rec.arrival[0], 0.0)  # last event - first arrival
    records = records_from(rec, [r.log for r in pool], opts.warmup_requests, spec)
    busy = sum(r.busy_s for r in pool)
    stats = PoolStats(
        "colocated",
        replicas,
        busy / (replicas * makespan) if makespan > 0 else 0.0,
        int(max(r.kv_high_water for r in pool)),
        spec.kv_capacity_tokens,
    )
    summary = summarise(
        records,
        architecture=style or "colocated",
        config=label or f"{replicas} x {spec.label}",
        stop_reason=loop.stop_reason,
        makespan_s=makespan,
        pools=(stats,),
        link_utilisation=0.0,
        prefill_kv_held_high_water_tokens=0,
        slo=slo,
    )
    return SimResult(summary, records)


def simulate_disaggregated(
    prefill: InstanceSpec,
    n_prefill: int,
    decode: InstanceSpec,
    n_decode: int,
    transfer: TransferFn,
    requests: SimRequests,
    *,
    layerwise: bool = True,
    layers: int | None = None,
    slo: SLO | None = None,
    options: SimOptions | None = None,
    label: str = "",
    style: str = "disaggregated",
) -> SimResult:
    """Replay ``requests`` through a prefill pool, a link and a decode pool (see model.sim.disaggregated).

    ``transfer(prompt_tokens) -> (transfer_s, last_layer_s)`` is the KV transfer time. With
    ``layerwise``, the first layer's KV is ready 1/``layers`` of the way through the prefill
    (None: at prefill start).
    """
    if layers is not None:
        layers = check_whole("layers", layers)
    n_prefill = check_whole("n_prefill", n_prefill)
    n_decode = check_whole("n_decode", n_decode)
    opts = options or SimOptions()
    rec, loop = new_run(requests, opts)
    ppool, dpool = run_disaggregated(
        prefill, n_prefill, decode, n_decode, transfer, layerwise, layers, loop, rec, opts.prefix_routing
    )
    makespan = max(loop.now - rec.arrival[0], 0.0)  # last event - first arrival
    records = records_from(rec, [d.log for d in dpool], opts.warmup_requests, decode)

    def util(busy: float, k: int) -> float:
        return min(busy / (k * makespan), 1.0) if makespan > 0 else 0.0

    pools = (
        PoolStats(
            "prefill",
            n_prefill,
            util(sum(ppool.busy_s), n_prefill),
            max(ppool.held_high_water),
            prefill.kv_capacity_tokens,
        ),
        PoolStats(
            "decode",
            n_decode,
            util(sum(d.busy_s for d in dpool), n_decode),
            max(d.kv_high_water for d in dpool),
            decode.kv_capacity_tokens,
        ),
    )
    summary = summarise(
        records,
        architecture=style,
        config=label or f"{n_prefill} x {prefill.label} prefill + {n_decode} x {decode.label} decode",
        stop_reason=loop.stop_reason,
        makespan_s=makespan,
        pools=pools,
        link_utilisation=util(sum(ppool.link_busy_s), n_prefill),
        prefill_kv_held_high_water_tokens=max(ppool.held_high_water),
        slo=slo,
    )
    return SimResult(summary, records)


@checked
def simulate(
    config: Any,
    model: str | LLMArch,
    requests: SimRequests,
    *,
    slo: SLO | None = None,
    weight_dtype: str = "bf16",
    kv_dtype: str | None = None,
    gpu_memory_utilization: float = 0.9,
    engine: str | Engine | None = None,
    prefill_token_cap: int | None = None,
    max_num_seqs: int | None = None,
    options: SimOptions | None = None,
    speculation: Speculation | None = None,
    prefix: PrefixReuse | None = None,
) -> SimResult:
    """Simulate ``requests`` on ``config`` serving ``model``; step times from the roofline layer.

    ``engine`` (name or profile; None: vLLM) supplies the caps and per-step overhead the planner
    uses too (model.hardware.engines): ``prefill_token_cap`` (prompt tokens per prefill iteration
    without chunking, colocated and the prefill pool; a longer prompt runs alone), ``max_num_seqs``
    (running sequences per instance; the profile's value for each pool's GPU,
    ``Engine.max_num_seqs_on``) and the decode-only workspace; the two keywords override the
    profile. ``speculation``: speculative decoding on every instance (decode steps emit its mean
    tokens per step, so a request needs ceil((O - 1) / tokens per step) decode steps). ``prefix``:
    prefix hits and KV offload tiers on whole-prompt prefills (model.sim.tiers.PrefixReuse). Raises
    InputError if an instance does not fit.
    """
    arch = get_model(model)
    eng = get_engine(engine)
    if prefill_token_cap is None:
        prefill_token_cap = eng.prefill_token_cap
    if not isinstance(requests, SimRequests):
        raise InputError(
            "requests", type(requests).__name__, "a SimRequests (see poisson_requests, trace_requests)"
        )
    _check_run(config, requests, slo, options)
    options = replace(options or SimOptions(), router=(options and options.router) or eng.router)
    check_swap_tier(options.preemption or eng.preemption, prefix and prefix.kv_offload)  # any style
    if isinstance(prefill_token_cap, bool) or not isinstance(prefill_token_cap, int) or prefill_token_cap < 1:
        raise InputError("prefill_token_cap", prefill_token_cap, "a whole number of tokens >= 1")
    longest = int(requests.prompt_tokens.max())
    common = {
        "weight_dtype": weight_dtype,
        "kv_dtype": kv_dtype,
        "gpu_memory_utilization": gpu_memory_utilization,
        "speculation": speculation,
        "prefix": prefix,
    }
    style = style_of(config)
    layout = style.sim_layout(config)
    roles = tuple(p.role for p in layout.pools)

    def instance(pool: SimPool, max_batched: int, workspace: int) -> tuple[InstanceSpec, Deployment]:
        field = "config" if pool.role == "replica" else pool.role
        return build_instance(
            arch,
            pool.gpu,
            pool.parallel,
            max_batched_tokens=max_batched,
            workspace_tokens=workspace,
            overheads=eng.overheads(pool.gpu),
            field=field,
            max_num_seqs=eng.max_num_seqs_on(pool.gpu) if max_num_seqs is None else max_num_seqs,
            **common,
        )

    if roles == ("replica",):
        pool = layout.pools[0]
        chunk = pool.chunk_tokens
        spec, dep = instance(
            pool, chunk if chunk else prefill_token_cap, chunk if chunk else max(prefill_token_cap, longest)
        )
        # what a replica does when its KV runs out (model.sim.preemption): the options' or the engine's
        pre = preemption_spec(options.preemption or eng.preemption, prefix and prefix.kv_offload, dep)
        return simulate_colocated(
            replace(spec, preemption=pre, prefix_tiers=cache_tiers(dep, prefix)),
            pool.instances,
            requests,
            chunked=chunk is not None,
            slo=slo,
            options=options,
            label=config.label(),
            style=style.name,
        )
    if roles == ("prefill", "decode") and layout.link is not None:
        pre, dec = layout.pools
        pspec, pdep = instance(pre, prefill_token_cap, max(prefill_token_cap, longest))
        dspec, _ = instance(dec, eng.decode_batched_tokens, eng.decode_batched_tokens)
        xfer = KVTransfer(
            _transfer_layout(pdep), layout.link, arch.num_layers, layout.layerwise, layout.transfer_lanes
        )
        return simulate_disaggregated(
            pspec,
            pre.instances,
            dspec,
            dec.instances,
            xfer,
            requests,
            layerwise=layout.layerwise,
            layers=arch.num_layers,
            slo=slo,
            options=options,
            label=config.label(),
            style=style.name,
        )
    raise InputError(
        "config", style.name, "a layout of one 'replica' pool, or a 'prefill' and a 'decode' pool and a link"
    )


def _check_run(config: object, requests: SimRequests, slo: object, options: object) -> None:
    """Argument types and the work caps of :mod:`model.limits`, checked before anything is built."""
    if slo is not None and not isinstance(slo, SLO):
        raise InputError("slo", type(slo).__name__, "an SLO(ttft_s, tpot_s, ...) or None")
    if options is not None and not isinstance(options, SimOptions):
        raise InputError("options", type(options).__name__, "a SimOptions or None")
    n = len(requests.arrival_s)
    check_int("requests", n, 1, MAX_SIM_REQUESTS, "the simulator's per-request records bound memory")
    last = float(requests.arrival_s[-1])
    if not last <= MAX_ARRIVAL_S:
        raise InputError(
            "requests.arrival_s", f"{last:.3g} s", f"arrivals within {MAX_ARRIVAL_S:g} s (time resolution)"
        )
    warmup = options.warmup_requests if options is not None else 0
    if warmup >= n:
        raise InputError("warmup_requests", warmup, f"fewer than the {n} requests (some must be measured)")
    for pool in style_of(config).sim_layout(config).pools:
        check_int(
            f"{pool.role} instances",
            pool.instances,
            1,
            MAX_INSTANCES,
            "the event loop is linear in instances",
        )


# ---------------------------------------------------------------------------------------- goodput

# Relative width of the final rate bracket of the goodput search.
GOODPUT_REL_TOL = 0.02
# Rates below this (req/s) count as zero goodput.
GOODPUT_MIN_RATE_RPS = 1e-3


@dataclass(frozen=True)
class GoodputResult:
    """Highest rate (req/s) meeting the SLO, the runs that bracket it, and per-GPU goodput."""

    rate_rps: float
    per_gpu_rps: float
    upper_rps: float
    attainment_at_rate: float
    runs: int
    reason: str


def scenario_options(scn: Any) -> dict[str, Any]:
    """The keyword arguments of :func:`simulate` and :func:`goodput` that a planner
    ``model.workload.scenario.Scenario`` fixes (targets, formats, engine), so a simulation of a planned
    configuration runs under the plan's own assumptions."""
    return {"slo": scn.slo, "weight_dtype": scn.weight_dtype, "kv_dtype": scn.kv_dtype, "engine": scn.engine}


def goodput(
    config: Any,
    model: str | LLMArch,
    requests: SimRequests | Callable[[float], SimRequests],
    slo: SLO,
    *,
    start_rps: float = 1.0,
    rel_tol: float = GOODPUT_REL_TOL,
    **sim_kwargs: object,
) -> GoodputResult:
    """Largest rate at which the run meets ``slo`` (attainment and percentile targets; stable).

    The arrival times of ``requests`` are rescaled to each trial rate (model.workload.arrivals.scale_to_rate,
    which keeps the burst shape); lengths stay. ``requests`` may instead be a function of the rate
    returning the requests of each trial (sessions, whose think times must not shrink with the load:
    ``lambda r: model.sim.prefix_cache.session_requests(workload, r, n)``). Search: double or halve
    from ``start_rps`` to a bracket, then bisect to ``rel_tol`` (DistServe's goodput, Zhong et al.
    OSDI 2024, sec. 2.1).
    A configuration that does not fit has goodput 0 with the reason.
    """
    if not isinstance(slo, SLO):
        raise InputError("slo", slo, "an SLO")
    if not callable(requests) and len(requests) < 2:
        raise InputError("requests", len(requests), "at least two requests to rescale in time")
    if not (isinstance(start_rps, int | float) and math.isfinite(start_rps) and start_rps > 0):
        raise InputError("start_rps", start_rps, "a rate > 0 req/s")
    runs = 0
    cache: dict[float, SimSummary] = {}

    def trial(rate: float) -> SimSummary:
        nonlocal runs
        if rate not in cache:
            req = (
                requests(rate)
                if callable(requests)
                else requests.at_times(scale_to_rate(requests.arrival_s, rate))
            )
            cache[rate] = simulate(config, model, req, slo=slo, **sim_kwargs).summary  # type: ignore[arg-type]
            runs += 1
        return cache[rate]

    try:
        first = trial(float(start_rps))
    except InputError as err:
        if "fits in memory" in str(err):
            return GoodputResult(0.0, 0.0, 0.0, math.nan, 0, str(err))
        raise
    lo, hi = (float(start_rps), math.inf) if first.meets_slo else (0.0, float(start_rps))
    while math.isinf(hi):
        r = lo * 2.0
        if trial(r).meets_slo:
            lo = r
        else:
            hi = r
    while lo == 0.0:
        r = hi / 2.0
        if r < GOODPUT_MIN_RATE_RPS:
            return GoodputResult(
                0.0, 0.0, hi, trial(hi).attainment, runs, f"SLO missed even at {hi:.3g} req/s"
            )
        if trial(r).meets_slo:
            lo = r
        else:
            hi = r
    while hi / lo - 1.0 > rel_tol:
        mid = math.sqrt(lo * hi)
        if trial(mid).meets_slo:
            lo = mid
        else:
            hi = mid
    s = trial(lo)
    return GoodputResult(lo, lo / config.n_gpus, hi, s.attainment, runs, "")


def _transfer_layout(dep: Deployment) -> float | KVLayout:
    """What KVTransfer prices a request's KV by: bytes per token for a full-attention model, else the
    whole instance's KV layout (windows cap the KV, linear layers add a fixed state)."""
    layout = kv_layout(dep.arch, dep.kv_dtype_resolved)
    return dep.kv_bytes_per_token if layout.is_plain else layout
