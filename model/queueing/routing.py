"""The prompt queue of R colocated replicas behind a request router, vectorised over candidates.

The engine profile's router (model.hardware.engines.Router; the simulator routes the same way,
model.sim.colocated) decides which queue a prompt waits in, so it decides the queueing law:

* ``"shared-queue"``: one FCFS queue that every replica serves, G/G/R at the total rate lambda
  (:func:`model.queueing.mgc.mgc_wait` with R servers).
* ``"random"``: R independent queues. Random splitting of a renewal stream with inter-arrival SCV
  ca2 sends each replica a renewal stream of rate lambda / R and SCV 1 + (ca2 - 1) / R (Whitt 1983,
  "The Queueing Network Analyzer", Bell Syst. Tech. J. 62(9), sec. 4.4, eq. 42 with p = 1 / R):
  Poisson stays Poisson, so with Poisson arrivals each replica is an exact M/G/1 at lambda / R.
* ``"round-robin"``: replica i gets arrivals i, i + R, ...; its inter-arrival time is the sum of R
  consecutive ones, SCV ca2 / R (Poisson: Erlang-R, SCV 1 / R), so each replica is an E_R/G/1
  queue at lambda / R, approximated by Kingman's two-moment formula E[W] ~= (ca2 / R + cs2) / 2 x
  rho / (1 - rho) x E[S] (Kingman 1961, "The single server queue in heavy traffic", Proc. Camb.
  Phil. Soc. 57; the c = 1 case of Allen-Cunneen, Allen 1990, sec. 6.3, which mgc_wait's Kimura
  method reduces to at one server).
* ``"least-loaded"`` (the lowest w x waiting + running requests; "cache-aware" falls back to it
  without prefix hits) and ``"least-kv"`` (the fewest KV tokens): a blend of the round-robin and
  shared-queue waits, E[W] = (1 - f) W_rr + f W_shared with f = (1 - 1 / w) x (1 - (1 - rho^2)^R),
  rho = lambda E[S] / R. Reasoning (an approximation, checked against the simulator in
  docs/queueing.md, "Routing"): a replica's count is mostly its running requests, and each arrival
  raises the chosen replica's count by one, so successive arrivals alternate between replicas as
  under round-robin. The score tells the router about the prompt queues only through a waiting
  request's extra weight w - 1, a share 1 - 1 / w of its score (none for w = 1, or for KV tokens,
  where a waiting prompt weighs as much as a running one: f = 0), and only when some replica has a
  prompt waiting behind the one in service: P(N >= 2) = rho^2 at one replica (M/M/1's geometric
  occupancy, Kleinrock 1975, vol. 1, eq. 3.11), 1 - (1 - rho^2)^R at any of R taken as independent.
  When it does, the rule is join-the-shortest-queue, close to one shared queue (Winston 1977,
  "Optimality of the shortest line discipline", J. Appl. Prob. 14(1); Nelson & Philips 1989, "An
  approximation to the response time for shortest queue routing", ACM SIGMETRICS Perf. Eval. Rev.
  17(1): JSQ's response time lies near the central-queue M/M/c's).

The router also sets how many prompts join a running request's replica and stall its decode
(:func:`stall_exposure`, :func:`replica_arrivals`; docs/queueing.md, "Stalls behind the router"; during
a request's own prefill-first step, model.queueing.own_step) and how much a stall draws more of them
(:func:`follow_on_load`).

Percentiles keep mgc's exponential-tail form: a blend's P(W > 0) and E[W] are the blends of the two
legs', and E[W | W > 0] = E[W] / P(W > 0). With one replica every law is the G/G/1 queue.
"""

from __future__ import annotations

import numpy as np

from model.hardware.engines import Router
from model.queueing.mgc import WaitResult, mgc_mean_wait_unchecked, mgc_wait

__all__ = [
    "SHARED_QUEUE",
    "blend_weight",
    "chunked_follow_on_load",
    "cohort_exposure",
    "follow_on_load",
    "leg_inputs",
    "pair_moment",
    "replica_arrivals",
    "routed_mean_wait_unchecked",
    "routed_wait",
    "stall_exposure",
]

SHARED_QUEUE = Router("shared-queue")
"""One FCFS queue every server takes from (a disaggregated prefill pool)."""

# Routers whose law blends the round-robin and shared-queue waits (module docstring).
_BLENDED = ("least-loaded", "least-kv", "cache-aware")


def _informed(router: Router) -> float:
    """1 - 1 / w: the share of a waiting request's score that a running one lacks (0 for least-kv,
    round-robin, random and w <= 1)."""
    if router.policy == "least-kv" or router.policy not in _BLENDED or router.waiting_weight <= 1:
        return 0.0
    return 1.0 - 1.0 / router.waiting_weight


def blend_weight(router: Router, utilisation: np.ndarray, replicas: np.ndarray) -> np.ndarray:
    """f of the least-loaded blend (module docstring), per candidate: (1 - 1 / w) x (1 - (1 - rho^2)^R)
    at per-replica utilisation ``utilisation`` (clipped to [0, 1]); 1 for a shared queue; 0 for
    round-robin, random, least-kv and w <= 1."""
    rho = np.clip(np.asarray(utilisation, dtype=float), 0.0, 1.0)
    r = np.asarray(replicas, dtype=float)
    if router.policy == "shared-queue":
        return np.ones(np.broadcast(rho, r).shape)
    return _informed(router) * (1.0 - (1.0 - rho**2) ** r)


def leg_inputs(
    router: Router, rate_rps: np.ndarray, replicas: np.ndarray, scv_arrival: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray | float]:
    """(rate, servers, arrival SCV) of the per-replica queue the router leaves, before any blend:
    random -> (lambda / R, 1, 1 + (ca2 - 1) / R); round-robin and the least-loaded rules ->
    (lambda / R, 1, ca2 / R); shared queue -> (lambda, R, ca2)."""
    rate = np.asarray(rate_rps, dtype=float)
    r = np.asarray(replicas, dtype=float)
    if router.policy == "shared-queue":
        return rate, r, scv_arrival
    if router.policy == "random":
        return rate / r, np.ones_like(r), 1.0 + (scv_arrival - 1.0) / r
    return rate / r, np.ones_like(r), scv_arrival / r


def routed_wait(
    router: Router,
    rate_rps: np.ndarray,
    mean_service_s: np.ndarray,
    scv_service: np.ndarray,
    replicas: np.ndarray,
    scv_arrival: float = 1.0,
) -> WaitResult:
    """The prompt wait of ``replicas`` replicas fed ``rate_rps`` in total through ``router`` (module
    docstring), one entry per candidate; ``utilisation`` is each replica's lambda E[S] / R."""
    rate, servers, scv_a = leg_inputs(router, rate_rps, replicas, scv_arrival)
    own = mgc_wait(rate, mean_service_s, scv_service, servers, scv_a)
    if router.policy == "shared-queue" or _informed(router) == 0.0:
        return own
    f = blend_weight(router, own.utilisation, replicas)
    shared = mgc_wait(rate_rps, mean_service_s, scv_service, replicas, scv_arrival)
    stable = own.stable & shared.stable
    prob = np.where(stable, (1.0 - f) * own.prob_wait + f * shared.prob_wait, 1.0)
    mean = np.where(stable, (1.0 - f) * own.mean_wait_s + f * shared.mean_wait_s, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = np.where(stable, np.where(prob > 0, mean / np.where(prob > 0, prob, 1.0), 0.0), np.inf)
    return WaitResult(
        f"{router.policy}: round-robin / shared-queue blend",
        shared.rate_rps,
        own.mean_service_s,
        shared.servers,
        own.utilisation,
        stable,
        prob,
        mean,
        cond,
    )


def routed_mean_wait_unchecked(
    router: Router,
    rate_rps: np.ndarray,
    mean_service_s: np.ndarray,
    scv_service: np.ndarray,
    replicas: np.ndarray,
    scv_arrival: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(stable, mean wait in s) of :func:`routed_wait`, the same values, without checks, for an
    inner loop (model.serving.packing's fixed point; the caller guarantees valid arrays)."""
    rate, servers, scv_a = leg_inputs(router, rate_rps, replicas, scv_arrival)
    stable, mean = mgc_mean_wait_unchecked(rate, mean_service_s, scv_service, servers, scv_a)
    if router.policy == "shared-queue" or _informed(router) == 0.0:
        return stable, mean
    f = blend_weight(router, rate * np.asarray(mean_service_s, dtype=float), replicas)
    s_shared, m_shared = mgc_mean_wait_unchecked(rate_rps, mean_service_s, scv_service, replicas, scv_arrival)
    both = stable & s_shared
    return both, np.where(both, (1.0 - f) * mean + f * m_shared, np.inf)


# Routers that keep the replicas' request counts level (join-the-shortest-queue family).
_LEVELLING = ("least-loaded", "least-kv", "cache-aware")


def pair_moment(batch: np.ndarray) -> np.ndarray:
    """E[K (K - 1)] of a replica's request count K when the R replicas' counts are as level as they can
    be, as a function of the per-replica mean y = N / R of the fleet's N: with N = qR + r, r replicas
    hold q + 1 and R - r hold q, so E[K (K - 1)] = q (q - 1) + 2 q r / R = k (k - 1 + 2 phi),
    k = floor(y), phi = y - k (the linear interpolant of y (y - 1) through the integers)."""
    y = np.maximum(np.asarray(batch, dtype=float), 0.0)
    k = np.floor(y)
    return k * (k - 1.0 + 2.0 * (y - k))


def stall_exposure(
    router: Router,
    batch: np.ndarray,
    prob: np.ndarray,
    replicas: np.ndarray,
    before_first: np.ndarray | float = 0.0,
) -> np.ndarray:
    """x [C]: the rate of prompts joining a running request's replica over the random router's lambda / R.

    Flow balance (ours; across the cut between two levels, as for a birth-death chain, Kleinrock 1975,
    vol. 1, ch. 3): with s(k) the share of replicas holding k requests, each leaving at rate mu
    whatever its replica holds, the prompts joining replicas that hold k balance the departures from
    those holding k + 1,
    A_k = (k + 1) mu R s(k + 1), under any router. Each such prompt stalls the k requests there, so
    a running request meets sum_k k A_k / (R E[K]) = mu E[K (K - 1)] / E[K] of them per second;
    random routing (K Poisson, the M/G/inf occupancy) gives mu E[K] = lambda / R. Hence
    x = E[K (K - 1)] / E[K]^2, 1 for random routing.

    The least-loaded routers (least-loaded, least-kv, cache-aware without prefix hits) keep the counts
    level (join-the-shortest-queue; Eschenfeldt & Gamarnik, "Join the shortest queue with many
    servers. The heavy-traffic asymptotics", Math. Oper. Res. 2018: the occupancy collapses onto
    adjacent levels), so K given the fleet's N takes the two levels of :func:`pair_moment`; N follows
    the pool's birth-death law (``batch`` = N / R on the support [C, K] with ``prob``, from
    model.queueing.decode_spread.occupancy). A fleet below one request per replica leaves every
    running request alone (x = 0); at a whole k per replica x = 1 - 1 / k. Levelling is the best a
    router can do for the stalled request, so x <= 1 (clipped). Random, round-robin (its arrivals are
    every R-th, :func:`replica_arrivals`) and the shared queue (an idle replica takes the next prompt;
    not modelled: the random law, conservative) and any router with one replica: 1.

    The count the router levels is every request a replica holds: waiting, in prefill and decoding
    (vLLM's load, model.sim.colocated.Replica.load), so K is the decode occupancy plus
    ``before_first`` [C] per replica, the requests before their first token (Little: lambda_r (W +
    E[prefill time]); a mean shift of the per-replica support, their fluctuation left out; a waiting
    request counted once, as the balance is in requests, though vLLM's score weighs it
    ``waiting_weight`` = 4 times, which would level harder still). Departures leave
    from the decoding part; with it the same share theta of every level the balance above gives
    mu theta E[K (K - 1)] / E[K] per running request against lambda / R = mu theta E[K], the same x.
    With long prompts (RAG, fixed 8000-token prompts) and under one decode per replica this is the
    difference between x = 0 (a running request alone) and prompts joining it: docs/validation.md,
    "Session 10"."""
    r = np.asarray(replicas, dtype=float)
    ones = np.ones(np.broadcast(r, np.asarray(batch)[:, 0]).shape)
    if router.policy not in _LEVELLING:
        return ones
    p = np.asarray(prob, dtype=float)
    y = np.asarray(batch, dtype=float) + np.reshape(np.asarray(before_first, dtype=float), (-1, 1))
    mean = (p * y).sum(axis=1)
    pairs = (p * pair_moment(y)).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(mean > 0, pairs / np.where(mean > 0, mean, 1.0) ** 2, 0.0)
    return np.where(r > 1, np.clip(x, 0.0, 1.0), ones)


def replica_arrivals(
    router: Router,
    rate_per_replica: np.ndarray,
    window_s: np.ndarray,
    replicas: np.ndarray,
    exposure: np.ndarray,
) -> np.ndarray:
    """[C, S] expected prompts that join a request's replica during ``window_s`` [C, S] from its own
    prefill start, the replica fed ``rate_per_replica`` lambda_r [C] of ``replicas`` R [C].

    Random routing: lambda_r x window (Poisson arrivals in a fixed interval). Round-robin: the replica
    takes every R-th of the fleet's N ~ Poisson(m = R lambda_r x window) arrivals after the request's
    own, floor(N / R) of them, Erlang-R apart (Kleinrock 1975, vol. 1, sec. 4.3, the method of
    stages); E[floor(N / R)] = (m - E[N mod R]) / R with N mod R close to uniform on 0 .. R - 1 once m
    reaches R, so max(m - (R - 1) / 2, 0) / R. The least-loaded routers: ``exposure`` x lambda_r x
    window (:func:`stall_exposure`; with one replica the exposure is 1). Shared queue: lambda_r x window
    (:func:`stall_exposure`). Non-finite or negative windows count nothing."""
    lam = np.where(np.isfinite(rate_per_replica), np.asarray(rate_per_replica, dtype=float), 0.0)
    window = np.asarray(window_s, dtype=float)
    window = np.where(np.isfinite(window), np.maximum(window, 0.0), 0.0)
    r = np.maximum(np.asarray(replicas, dtype=float), 1.0) * np.ones_like(lam)
    if router.policy == "round-robin":
        fleet = (lam * r)[:, None] * window
        return np.maximum(fleet - ((r - 1.0) / 2.0)[:, None], 0.0) / r[:, None]
    if router.policy in _LEVELLING:
        lam = np.where(r > 1, np.asarray(exposure, dtype=float), 1.0) * lam
    return lam[:, None] * window


def cohort_exposure(router: Router, replicas: np.ndarray) -> np.ndarray:
    """[C] the share of the random router's prompts that join a request's replica while it waits or is
    prefilled (its decode cohort, model.queueing.colocated_base.cohort_spread).

    One replica, or a router that does not level (random, round-robin, shared queue): 1, the Poisson
    share lambda / R (round-robin's every R-th taken at its mean). A levelling router (least-loaded;
    its count holds the requests waiting and in prefill, model.sim.colocated.Replica.load) has just
    sent the request to a replica holding the fewest, which then holds one more than that level;
    the next prompt joins it only when every other replica holds as many (the level fleet of
    :func:`pair_moment`, N = qR + r with r replicas above: r = R - 1 before the request joined, taken
    as 1 / R with r near uniform, as round-robin's N mod R above) and the tie falls to it (1 / R):
    1 / R^2. The same for a request that arrives while another's prefill runs on a replica: the
    router sends it there only when the fleet is level. Traces (docs/validation.md, session 12):
    grid cells 132 (4 x TEP4) and 32 (2 x TP4) show no cohort in the simulator's base, 105 (one
    replica) does."""
    r = np.maximum(np.asarray(replicas, dtype=float), 1.0)
    if router.policy not in _LEVELLING:
        return np.ones_like(r)
    return 1.0 / (r * r)


def follow_on_load(
    router: Router, stall_load: np.ndarray, busy: np.ndarray, replicas: np.ndarray
) -> np.ndarray:
    """[C] the load rho_v of the stall clusters' variance: rho = ``stall_load`` where the joins do
    not depend on the replica's state, rho / (R (1 - u)) (at most rho) behind a levelling router with
    R > 1, u = ``busy`` the replica's prefill busy fraction.

    The latency model counts a request's prefill-first stalls as primaries, each opening a busy-period
    cluster: a stall of length s lengthens the request's decode, the prompts that join its replica
    meanwhile stall it again (mean E[s] / (1 - rho), second moment E[s^2] / (1 - rho)^3: Takacs 1962,
    ch. 2; Kleinrock 1975, vol. 1, sec. 5.10). That holds when the joins are drawn whatever the
    replica does: one replica, random or round-robin routing (the fleet's Poisson arrivals).

    Behind a levelling router the joins follow the departures (docs/validation.md, sessions 9-10: a
    replica's joins over a span are its departures plus the change of its count, and its count stays
    within a few levels of the fleet's N / R; Eschenfeldt & Gamarnik 2018). A prefill-first replica's
    requests depart only while it decodes (a prefill step pauses every decode: DistServe, Zhong et al.
    OSDI 2024, sec. 2.2), at lambda_r / (1 - u) per second of decode (flow balance: lambda_r
    departures per second, all in the decode share 1 - u). A stall of length s holds back the
    departures of the decode time it displaces, lambda_r s / (1 - u), so the fleet holds that many
    requests more; the router levels the surplus over the R replicas and the stalled one keeps 1 / R
    of it: lambda_r s / (R (1 - u)) extra joins, exposed to the request at x (the exposure of
    :func:`stall_exposure`) — the rest of the joins it takes during the stall are made up by the joins
    it is skipped for once it stands above the others. The busy period's follow-on load is then
    x lambda_r E[s] / (R (1 - u)) = rho / (R (1 - u)), rho = x u the latency model's stall load
    (model.serving.colocated), taken at most rho (the independent joins' feedback, reached at R = 2
    with u >= 1/2). The mean count keeps rho (it is the flow balance's rate per second of decode,
    x lambda_r / (1 - rho), model.queueing.stall_count.stall_events); rho_v moves the variance only: the
    primaries are n (1 - rho_v) and the clusters' moments E[s] / (1 - rho_v), E[s^2] / (1 - rho_v)^3
    (the same mean n E[s]). Checked against the simulator's stall time per request on eleven grid cells
    (R = 2-64; docs/session13/colo15b.md): its variance within 0.87-1.32 x the simulator's, where the
    busy period's was 2.5-3.6 x on the loaded R = 8 cells.
    """
    return _levelled_load(router, stall_load, busy, 0.0, replicas)


def chunked_follow_on_load(
    router: Router, busy: np.ndarray, decode_ratio: np.ndarray, replicas: np.ndarray
) -> np.ndarray:
    """[C] u_v, the load that follows a chunked replica's prefill busy period: the joins per second
    while it carries prompt chunks, times E[S] (the prompt's wall share), given its prefill busy
    fraction u = ``busy`` (lambda_r E[S]), ``decode_ratio`` delta = T_dec / T_mix (a mixed iteration's
    decode rate relative to a decode-only one: one token per running sequence per iteration) and R =
    ``replicas``. u where the joins do not depend on the replica's state (one replica, random and
    round-robin routing: Poisson joins, the M/G/1 busy period of model.queueing.mixed_share);
    behind a levelling router with R > 1

        u_v = min(u, u (delta + (1 - delta) / R) / (1 - u (1 - delta))).

    The chunked analogue of :func:`follow_on_load` (same argument, docs/session13/colo15b.md). The
    joins follow the departures (a replica's joins over a span are its departures plus the change of
    its count, and the count stays within a few levels of the fleet's N / R: Eschenfeldt & Gamarnik
    2018; docs/validation.md, sessions 9-10). A chunked replica keeps decoding while it prefills
    (Sarathi-Serve, Agrawal et al. OSDI 2024), its departures slowed to delta d per second, d the
    decode-only rate; flow balance d ((1 - u) + u delta) = lambda_r. While it is busy it takes the
    joins that replace its own departures, delta d, and 1 / R of the fleet's surplus its slowed
    decode holds back, (1 - delta) d / R (the router levels the surplus over the R replicas): a join
    rate lambda_b = d (delta + (1 - delta) / R) and u_v = lambda_b E[S]. delta = 0 (a prefill step
    that pauses every decode) gives :func:`follow_on_load`'s u / (R (1 - u)); R = 1 would give
    d > lambda_r, where the joins are the fleet's Poisson arrivals: capped at u (as there).
    """
    return _levelled_load(router, busy, busy, decode_ratio, replicas)


def _levelled_load(
    router: Router, load: np.ndarray, busy: np.ndarray, decode_ratio: np.ndarray | float, replicas: np.ndarray
) -> np.ndarray:
    """[C] min(load, load (delta + (1 - delta) / R) / (1 - u (1 - delta))) behind a levelling router
    with R > 1, ``load`` otherwise: :func:`follow_on_load` (delta = 0, load = rho) and
    :func:`chunked_follow_on_load` (load = u = ``busy``) in one."""
    load = np.asarray(load, dtype=float)
    r = np.asarray(replicas, dtype=float) * np.ones_like(load)
    if router.policy not in _LEVELLING:
        return load
    u = np.asarray(busy, dtype=float)
    delta = np.clip(np.asarray(decode_ratio, dtype=float), 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        thinned = (
            load * (delta + (1.0 - delta) / np.maximum(r, 1.0)) / np.maximum(1.0 - u * (1.0 - delta), 1e-12)
        )
    return np.where(r > 1, np.minimum(load, thinned), load)
