"""Queueing layer: waiting time in multi-server FCFS queues, vectorised over numpy arrays.

Every public function broadcasts its array arguments (arrival rate, mean service time, service
SCV, server count, arrival SCV) against each other and returns a :class:`WaitResult` whose fields
all have the broadcast shape. Nothing loops in Python over the elements.

Conventions
-----------
* ``rate_rps``: mean arrival rate lambda, requests per second (>= 0).
* ``mean_service_s``: mean service time E[S] of one request on one server, seconds (> 0).
* ``scv_service``: squared coefficient of variation of the service time, Var[S] / E[S]^2
  (0 for deterministic, 1 for exponential).
* ``scv_arrival``: squared coefficient of variation of inter-arrival times (1 for Poisson).
* ``servers``: number of parallel identical servers c (integer >= 1).
* Offered load a = lambda E[S] (Erlangs); utilisation rho = a / c.
* Waits are the time in queue before service starts (W_q), never the sojourn time.

An entry with rho >= 1 is *unstable*: ``stable`` is False there and every wait is ``np.inf``
(``prob_wait`` is 1), never NaN. Pass ``strict=True`` to raise :class:`UnstableError` instead,
naming the utilisation (the scalar API of the issue).

Waiting-time distribution used for percentiles (all methods): the stationary wait is taken as
a mixture of an atom at 0 and an exponential tail,

    P(W > t) = P(W > 0) * exp(-t / E[W | W > 0]),  E[W | W > 0] = E[W] / P(W > 0),

which is exact for M/M/c (Kleinrock 1975, *Queueing Systems* vol. 1, sec. 3.5, eq. 3.40) and is
the standard exponential approximation for G/G/c tails (Abate, Choudhury & Whitt 1995,
"Exponential approximations for tail probabilities in queues I", Oper. Res. 43(5); Tijms 2003,
*A First Course in Stochastic Models*, sec. 5.5). P(W > 0) is the Erlang C probability of the
M/M/c queue with the same offered load (exact for c = 1 with Poisson arrivals, where it equals
rho). The accuracy of means and percentiles against simulation is tabulated in docs/queueing.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from model.errors import InputError, UnstableError

__all__ = [
    "MGC_METHODS",
    "WaitResult",
    "cosmetatos_md_factor",
    "erlang_b",
    "erlang_c",
    "md1_wait",
    "mg1_wait",
    "mgc_wait",
    "mmc_wait",
]

MGC_METHODS = ("kimura", "allen-cunneen")


# --------------------------------------------------------------------------------------------
# input checking


def _as_float_array(value: object, field: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise InputError(field, value, "a number or an array of numbers") from None
    return arr


def _first_bad(arr: np.ndarray, bad: np.ndarray) -> float:
    return float(arr[bad].flat[0]) if np.ndim(arr) else float(arr)


def _check(arr: np.ndarray, field: str, ok: np.ndarray, allowed: str) -> None:
    bad = ~ok
    if np.any(bad):
        raise InputError(field, _first_bad(arr, bad), allowed)


def _check_rate(rate_rps: object) -> np.ndarray:
    arr = _as_float_array(rate_rps, "rate_rps")
    _check(arr, "rate_rps", np.isfinite(arr) & (arr >= 0), "a finite arrival rate >= 0 requests/s")
    return arr


def _check_service(mean_service_s: object, field: str = "mean_service_s") -> np.ndarray:
    arr = _as_float_array(mean_service_s, field)
    _check(arr, field, np.isfinite(arr) & (arr > 0), "a finite time > 0 s")
    return arr


def _check_servers(servers: object, whole: bool = True) -> np.ndarray:
    arr = _as_float_array(servers, "servers")
    ok = np.isfinite(arr) & (arr >= 1) & ((arr == np.floor(arr)) | (not whole))
    _check(arr, "servers", ok, "an integer number of servers >= 1" if whole else "a number of servers >= 1")
    return arr


def _check_scv(scv: object, field: str) -> np.ndarray:
    arr = _as_float_array(scv, field)
    _check(arr, field, np.isfinite(arr) & (arr >= 0), "a finite squared coefficient of variation >= 0")
    return arr


# --------------------------------------------------------------------------------------------
# result


@dataclass(frozen=True, eq=False)
class WaitResult:
    """Stationary queueing delay of a multi-server queue, one entry per broadcast input.

    Fields are numpy arrays of one common shape. ``prob_wait`` is P(W > 0); ``cond_mean_wait_s``
    is E[W | W > 0], the mean of the exponential tail described in the module docstring.
    """

    method: str
    rate_rps: np.ndarray
    mean_service_s: np.ndarray
    servers: np.ndarray
    utilisation: np.ndarray
    stable: np.ndarray
    prob_wait: np.ndarray
    mean_wait_s: np.ndarray
    cond_mean_wait_s: np.ndarray

    @property
    def p50_wait_s(self) -> np.ndarray:
        """Median wait (see :meth:`quantile_wait_s`)."""
        return self.quantile_wait_s(0.5)

    @property
    def p90_wait_s(self) -> np.ndarray:
        """90th-percentile wait."""
        return self.quantile_wait_s(0.9)

    @property
    def p99_wait_s(self) -> np.ndarray:
        """99th-percentile wait."""
        return self.quantile_wait_s(0.99)

    @property
    def mean_sojourn_s(self) -> np.ndarray:
        """Mean time in system, E[W] + E[S] (inf when unstable)."""
        return self.mean_wait_s + self.mean_service_s

    def quantile_wait_s(self, q: float | np.ndarray) -> np.ndarray:
        """q-quantile of the wait: 0 if P(W>0) <= 1-q, else E[W|W>0] * ln(P(W>0) / (1-q))."""
        return _wait_quantile(np.asarray(q, dtype=float), self.prob_wait, self.cond_mean_wait_s)

    def prob_wait_exceeds(self, t_s: float | np.ndarray) -> np.ndarray:
        """P(W > t) = P(W>0) * exp(-t / E[W|W>0]) (1 where unstable)."""
        t = np.asarray(t_s, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            tail = np.where(self.cond_mean_wait_s > 0, np.exp(-t / self.cond_mean_wait_s), 0.0)
        tail = np.where(np.isinf(self.cond_mean_wait_s), 1.0, tail)
        return np.where(t < 0, 1.0, self.prob_wait * tail)


def _wait_quantile(q: np.ndarray, prob_wait: np.ndarray, cond_mean_s: np.ndarray) -> np.ndarray:
    if np.any((q <= 0) | (q >= 1)):
        raise InputError("q", q.tolist(), "quantile levels strictly between 0 and 1")
    with np.errstate(divide="ignore", invalid="ignore"):
        t = cond_mean_s * np.log(prob_wait / (1.0 - q))
    t = np.where(prob_wait <= 1.0 - q, 0.0, t)
    return np.where(np.isinf(cond_mean_s), np.inf, t)


def _build(
    method: str,
    rate: np.ndarray,
    es: np.ndarray,
    c: np.ndarray,
    rho: np.ndarray,
    stable: np.ndarray,
    prob_wait: np.ndarray,
    cond_mean: np.ndarray,
    strict: bool,
) -> WaitResult:
    if strict and not np.all(stable):
        i = np.argmax(~stable.ravel()) if stable.ndim else 0
        u = float(rho.ravel()[i]) if rho.ndim else float(rho)
        raise UnstableError(
            f"{method}: utilisation {u:.6g} >= 1 (rate_rps={float(rate.ravel()[i]):.6g}, "
            f"mean_service_s={float(es.ravel()[i]):.6g}, servers={int(c.ravel()[i])}): the queue "
            "grows without bound; add servers or lower the rate"
        )
    prob_wait, cond_mean, mean = _clamped(stable, prob_wait, cond_mean)
    return WaitResult(method, rate, es, c, rho, stable, prob_wait, mean, cond_mean)


def _clamped(
    stable: np.ndarray, prob_wait: np.ndarray, cond_mean: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(P(W > 0), E[W | W > 0], E[W]) with an unstable queue's (1, inf, inf)."""
    prob_wait = np.where(stable, prob_wait, 1.0)
    cond_mean = np.where(stable, cond_mean, np.inf)
    mean = np.where(stable, prob_wait * cond_mean, np.inf)
    return prob_wait, cond_mean, np.where(prob_wait == 0, 0.0, mean)


# --------------------------------------------------------------------------------------------
# Erlang B / C


def erlang_b(servers: object, offered_load_erlangs: object) -> np.ndarray:
    """Erlang B blocking probability B(c, a) = (a^c / c!) / sum_{k=0..c} a^k / k!.

    Computed as the ratio of the Poisson(a) pmf at c to the Poisson(a) cdf at c,
    B = exp(log pmf(c; a) - log cdf(c; a)), with the cdf from the regularised incomplete gamma
    function (cdf(c; a) = Q(c+1, a)). This is the identity behind Jagerman (1974), "Some
    properties of the Erlang loss function", Bell Syst. Tech. J. 53(3), sec. 2; working in log
    space keeps it finite for c up to 10^5 and beyond, where a^c and c! overflow. With
    gamma(c + 1) for c! it is Jagerman's continuous extension in c, which :func:`mgc_wait` uses with
    ``whole_servers=False`` (a pool whose capacity is a mean number of servers).
    """
    c, a = _servers_and_load(servers, offered_load_erlangs)
    return _erlang_b(c, a)


def _servers_and_load(servers: object, offered_load_erlangs: object) -> tuple[np.ndarray, np.ndarray]:
    c = _check_servers(servers)
    a = _as_float_array(offered_load_erlangs, "offered_load_erlangs")
    _check(a, "offered_load_erlangs", np.isfinite(a) & (a >= 0), "a finite offered load >= 0 Erlangs")
    return np.broadcast_arrays(c, a)


def _erlang_b(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """:func:`erlang_b` of checked, broadcast arrays."""
    with np.errstate(divide="ignore"):
        log_pmf = special.xlogy(c, a) - a - special.gammaln(c + 1.0)
        log_cdf = np.log(special.gammaincc(c + 1.0, a))  # = pdtr(c, a) for whole c
    return np.exp(log_pmf - log_cdf)


def erlang_c(servers: object, offered_load_erlangs: object) -> np.ndarray:
    """Erlang C probability of waiting P(W > 0) in M/M/c, element-wise; 1 where a >= c.

    C(c, a) = B / (1 - rho (1 - B)) with rho = a / c and B = :func:`erlang_b` (Cooper 1981,
    *Introduction to Queueing Theory*, 2nd ed., sec. 3.4, eq. 4.6). The denominator is written
    (c - a)/c + rho B, a sum of non-negative terms, so there is no cancellation as rho -> 1.
    Returns an ndarray (not a result object): it is a single probability per entry.
    """
    return erlang_c_unchecked(*_servers_and_load(servers, offered_load_erlangs))


def erlang_c_unchecked(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """:func:`erlang_c` of arrays the caller has checked and broadcast (servers ``c`` >= 1 whole, offered
    load ``a`` >= 0 finite): for inner loops such as a bisection, without the input checks."""
    stable = a < c
    a_s = np.where(stable, a, 0.0)
    b = _erlang_b(c, a_s)
    rho = a_s / c
    with np.errstate(invalid="ignore", divide="ignore"):
        pw = b / ((c - a_s) / c + rho * b)
    return np.where(stable, pw, 1.0)


# --------------------------------------------------------------------------------------------
# M/M/c exact


def _mmc_core(
    rate_rps: object, mean_service_s: object, servers: object, whole: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rate = _check_rate(rate_rps)
    es = _check_service(mean_service_s)
    c = _check_servers(servers, whole)
    rate, es, c = np.broadcast_arrays(rate, es, c)
    return (rate, es, c, *_mmc_arrays(rate, es, c))


def _mmc_arrays(
    rate: np.ndarray, es: np.ndarray, c: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(rho, stable, P(W > 0), E[W | W > 0]) of M/M/c for checked arrays of one shape."""
    a = rate * es
    stable = a < c
    rho = a / c
    pw = erlang_c_unchecked(c, np.where(stable, a, 0.0))  # c and a checked (a finite: rate, es are)
    with np.errstate(divide="ignore"):
        cond = np.where(stable, es / np.where(stable, c - a, 1.0), np.inf)
    return rho, stable, pw, cond


def mmc_wait(
    rate_rps: object, mean_service_s: object, servers: object, *, strict: bool = False
) -> WaitResult:
    """Exact M/M/c wait: P(W > t) = C(c, a) exp(-(c mu - lambda) t), E[W] = C / (c mu - lambda).

    mu = 1 / E[S]; C is :func:`erlang_c` (Kleinrock 1975, *Queueing Systems* vol. 1, sec. 3.5,
    eqs. 3.39-3.40). Percentiles from that tail are exact.
    """
    rate, es, c, rho, stable, pw, cond = _mmc_core(rate_rps, mean_service_s, servers)
    return _build("M/M/c", rate, es, c, rho, stable, pw, cond, strict)


# --------------------------------------------------------------------------------------------
# M/G/c and G/G/c approximations


def cosmetatos_md_factor(utilisation: object, servers: object) -> np.ndarray:
    """Cosmetatos' M/D/c correction f with W_q(M/D/c) ~= (f / 2) W_q(M/M/c).

    f = 1 + (1 - rho)(c - 1)(sqrt(4 + 5c) - 2) / (16 rho c)  (Cosmetatos 1976, "Some
    approximate equilibrium results for the multi-server queue (M/G/r)", Oper. Res. Quarterly
    27(3); quoted in Tijms 2003, *A First Course in Stochastic Models*, sec. 5.2). f = 1 for c = 1,
    recovering the exact M/D/1 value. The formula overestimates in light traffic (Kimura 1991,
    "Refining Cosmetatos' approximation for the mean waiting time in the M/D/s queue", J. Oper.
    Res. Soc. 42(7)) and exceeds 2 for small rho, which would put M/D/c above M/M/c; we cap f at 2
    so that the M/D/c estimate never exceeds the M/M/c value.
    """
    rho = np.asarray(utilisation, dtype=float)
    c = np.asarray(servers, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        f = 1.0 + (1.0 - rho) * (c - 1.0) * (np.sqrt(4.0 + 5.0 * c) - 2.0) / (16.0 * rho * c)
    return np.where(c == 1, 1.0, np.where(rho > 0, np.minimum(f, 2.0), 2.0))


def _kimura_ratio(rho: np.ndarray, c: np.ndarray, scv_s: np.ndarray) -> np.ndarray:
    """W_q(M/G/c) / W_q(M/M/c) from Kimura's harmonic two-moment interpolation.

    W_q(M/G/c) ~= (1 + cs2) / (2 cs2 / W_q(M/M/c) + (1 - cs2) / W_q(M/D/c))
    (Kimura 1994, "Approximations for multi-server queues: system interpolations", Queueing
    Systems 17, pp. 347-382, sec. 3), with W_q(M/D/c) = (f/2) W_q(M/M/c) from Cosmetatos.
    Dividing by W_q(M/M/c): ratio = (1 + cs2) / (2 cs2 + 2 (1 - cs2) / f).
    """
    f = cosmetatos_md_factor(rho, c)
    return (1.0 + scv_s) / (2.0 * scv_s + 2.0 * (1.0 - scv_s) / f)


def mgc_wait(
    rate_rps: object,
    mean_service_s: object,
    scv_service: object,
    servers: object,
    scv_arrival: object = 1.0,
    method: str = "kimura",
    *,
    strict: bool = False,
    whole_servers: bool = True,
) -> WaitResult:
    """Approximate G/G/c wait (mean and percentiles), vectorised.

    Both methods scale the exact M/M/c mean wait W_M = C(c, a) E[S] / (c - a):

    * ``"allen-cunneen"``: E[W] ~= W_M (ca2 + cs2) / 2 (Allen 1990, *Probability, Statistics and
      Queueing Theory*, 2nd ed., sec. 6.3; Whitt 1993, "Approximations for the GI/G/m queue",
      Prod. Oper. Manag. 2(2), eq. 2.2).
    * ``"kimura"`` (default): Kimura's (1994) M/G/c interpolation between M/M/c and M/D/c, with
      Cosmetatos' M/D/c formula (see :func:`_kimura_ratio`); for non-Poisson arrivals it is
      multiplied by Kingman's arrival-variability factor (ca2 + cs2) / (1 + cs2), the same
      two-moment scaling Allen-Cunneen uses (Whitt 1993, sec. 2). Exact for M/M/c, M/D/1, M/G/1.

    P(W > 0) is Erlang C; percentiles come from the exponential tail of the module docstring,
    E[W | W > 0] = E[W] / C, so all methods share W_M's exponential shape.

    ``whole_servers`` False admits any real c >= 1: Erlang B by Jagerman's continuous extension
    (:func:`erlang_b`), Erlang C, W_M and the Kimura / Cosmetatos factors by the same formulas in c.
    """
    if method not in MGC_METHODS:
        raise InputError("method", method, " or ".join(repr(m) for m in MGC_METHODS))
    scv_s = _check_scv(scv_service, "scv_service")
    scv_a = _check_scv(scv_arrival, "scv_arrival")
    rate, es, c, rho, stable, pw, cond = _mmc_core(rate_rps, mean_service_s, servers, whole_servers)
    rate, es, c, rho, stable, pw, cond, scv_s, scv_a = np.broadcast_arrays(
        rate, es, c, rho, stable, pw, cond, scv_s, scv_a
    )
    if method == "allen-cunneen":
        factor = (scv_a + scv_s) / 2.0
        label = "G/G/c Allen-Cunneen"
        with np.errstate(invalid="ignore"):
            cond = np.where(stable, cond * factor, np.inf)
    else:
        cond = _kimura_cond(rho, stable, c, scv_s, scv_a, cond)
        label = "G/G/c Kimura"
    return _build(label, rate, es, c, rho, stable, pw, cond, strict)


def _kimura_cond(
    rho: np.ndarray, stable: np.ndarray, c: np.ndarray, scv_s: np.ndarray, scv_a: np.ndarray, cond: np.ndarray
) -> np.ndarray:
    """E[W | W > 0] of the Kimura G/G/c wait from the M/M/c one (see :func:`mgc_wait`)."""
    rho_f = np.where(stable & (rho > 0), rho, 0.5)  # placeholder where P(W>0) is 0 or 1 anyway
    factor = _kimura_ratio(rho_f, c, scv_s) * (scv_a + scv_s) / (1.0 + scv_s)
    with np.errstate(invalid="ignore"):
        return np.where(stable, cond * factor, np.inf)


def mgc_mean_wait_unchecked(
    rate_rps: np.ndarray,
    mean_service_s: np.ndarray,
    scv_service: np.ndarray,
    servers: np.ndarray,
    scv_arrival: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(stable, mean wait in s) of :func:`mgc_wait` (Kimura), the same values, for arrays the caller
    guarantees valid (finite rates >= 0, finite service times > 0, whole servers >= 1, finite scvs
    >= 0): no checks and no result object, for an inner loop that calls it many times
    (model.serving.packing's fixed point)."""
    rate, es, scv_s, c, scv_a = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (rate_rps, mean_service_s, scv_service, servers, scv_arrival))
    )
    rho, stable, pw, cond = _mmc_arrays(rate, es, c)
    cond = _kimura_cond(rho, stable, c, scv_s, scv_a, cond)
    return stable, _clamped(stable, pw, cond)[2]


# --------------------------------------------------------------------------------------------
# single-server exact means


def mg1_wait(
    rate_rps: object, mean_service_s: object, scv_service: object, *, strict: bool = False
) -> WaitResult:
    """M/G/1 Pollaczek-Khinchine mean wait: E[W] = rho E[S] (1 + cs2) / (2 (1 - rho)); P(W>0) = rho.

    Exact (Kleinrock 1975, *Queueing Systems* vol. 1, sec. 5.7, eq. 5.76). Percentiles use the
    exponential tail of the module docstring (approximate except for exponential service).
    """
    return _mg1("M/G/1 Pollaczek-Khinchine", rate_rps, mean_service_s, scv_service, "mean_service_s", strict)


def _mg1(label: str, rate_rps: object, es_in: object, scv: object, es_field: str, strict: bool) -> WaitResult:
    scv_s = _check_scv(scv, "scv_service")
    rate = _check_rate(rate_rps)
    es = _check_service(es_in, es_field)
    rate, es, scv_s = np.broadcast_arrays(rate, es, scv_s)
    c = np.ones_like(rate)
    rho = rate * es
    stable = rho < 1
    with np.errstate(divide="ignore"):
        cond = np.where(stable, es * (1.0 + scv_s) / (2.0 * np.where(stable, 1.0 - rho, 1.0)), np.inf)
    return _build(label, rate, es, c, rho, stable, rho.copy(), cond, strict)


def md1_wait(rate_rps: object, service_s: object, *, strict: bool = False) -> WaitResult:
    """M/D/1 mean wait E[W] = rho D / (2 (1 - rho)), P(W > 0) = rho (P-K with cs2 = 0; exact).

    Kleinrock 1975, vol. 1, sec. 5.7. Percentiles: exponential tail (approximate); the exact
    M/D/1 distribution (Erlang 1909; Franx 2001, Oper. Res. Letters 29) is not evaluated here.
    """
    return _mg1("M/D/1", rate_rps, service_s, 0.0, "service_s", strict)
