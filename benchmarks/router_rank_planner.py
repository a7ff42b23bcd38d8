"""The planner with benchmarks.router_rank's two laws patched in, one grid cell at a time (session 10's
experiment, docs/validation.md, "Session 10: the router's follow-on and the primaries' dispersion";
not merged).

* Law 2 (``--dispersion``): the primaries of the latency model's stall clusters get the predicted
  variance / mean d per candidate and request (benchmarks.router_rank.renewal_dispersion, computed for
  every candidate at model.serving.colocated's call of stall_exposure), with the Katz (a, b, 0) count
  law of mean m and variance d m: P(0) = d^(-m / (d - 1)), P(1) = P(0) m / d (Poisson at d = 1,
  negative binomial above, binomial below, d clipped to >= 1 - m; Johnson, Kemp & Kotz, "Univariate
  Discrete Distributions", sec. 2.3.1); two or more primaries keep the gamma on the conditional
  moments E[N; N >= 2] = m - P(1), E[N^2; N >= 2] = d m + m^2 - P(1).
* Law 1 (``--follow-on``): the cluster load f u in place of x u with the stall mean kept (the stall
  events are computed first with x u), f / x from benchmarks.router_rank.follow_on_chain at the best
  configuration's point applied to every candidate of the cell (R <= 8 only).

* The offset (``--offset``): the expected joins over a request's window less delta = E[floor(N / R)] -
  x y per candidate, at least 0 (the others at the request's join, the picked replica's count in the
  level picture, less those at its departure, count-biased: E[K (K - 1)] / E[K] = x y; the replica's
  flow balance, docs/validation.md, "The mean is an offset, not a scaled rate").

The planned goodput of the cell's best colocated configuration is searched again and the simulator's
goodput found by ``cell_ratio``'s search from it. Usage:
``PYTHONPATH=. python -m benchmarks.router_rank_planner 84,73 --dispersion --follow-on`` (or ``--offset``).
"""

from __future__ import annotations

import inspect
import sys
from functools import cached_property

import numpy as np

import model.serving.colocated as col
from benchmarks.router_rank import follow_on_chain, planner_inputs, renewal_variance
from benchmarks.validate_grid import SEED, plan_for, sample_scenario, simulate_cell
from model.queueing.latency import LatencyModel
from model.queueing.routing import replica_arrivals, stall_exposure

_STATE: dict = {"ratio": 1.0, "dispersion": False, "d": None, "offset": False, "delta": None}
_TABLES: dict = {}


def _tables(out: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    key = (len(out), float(out.sum()), float((out**2).sum()))
    if key not in _TABLES:
        life = out[out >= 2] - 1.0
        grid = np.linspace(0.0, max(8.0, 1.2 * (out.max() - 1.0) / life.mean()), 1501)
        _TABLES[key] = (grid, *renewal_variance(life / life.mean(), grid))
    return _TABLES[key]


def _exposure(router, batch, prob, replicas, before_first=0.0):  # stall_exposure, plus d and the offset
    x = stall_exposure(router, batch, prob, replicas, before_first)
    loc = inspect.currentframe().f_back.f_locals
    _STATE["d"] = _STATE["delta"] = None
    r = np.asarray(replicas, dtype=float) * np.ones(len(x))
    levelling = router.policy in ("least-loaded", "least-kv", "cache-aware")
    if _STATE["offset"] and levelling and not loc["chunked"]:
        # the others at the request's join (the picked replica's count, the lower level floor(N / R))
        # less those at its departure (count-biased, x y): the joins its own join takes off its window
        y = (batch * prob).sum(axis=1)
        picked = (np.floor(batch + 1e-9) * prob).sum(axis=1)
        _STATE["delta"] = np.where(r > 1, np.maximum(picked - x * y, 0.0), 0.0)
    if loc["chunked"] or not _STATE["dispersion"]:
        return x
    y = (batch * prob).sum(axis=1)
    var_y = np.maximum((batch**2 * prob).sum(axis=1) - y * y, 0.0)
    out = loc["out_tokens"].astype(float)
    grid, v_e, resid = _tables(out)
    window = loc["stalls"] + loc["t_dec"][:, None] * (out[None, :] - 1.0)
    t = loc["rate_r"][:, None] * window / np.maximum(y, 1e-9)[:, None]
    mean = (x * y)[:, None] * t
    var = (x * y)[:, None] * np.interp(t, grid, v_e) * (1.0 - 2.0 / r)[:, None] + 2.0 * var_y[:, None] * (
        1.0 - np.interp(t, grid, resid)
    )
    d = np.where(mean > 1e-9, var / np.maximum(mean, 1e-12), 1.0)
    _STATE["d"] = np.where(levelling & (r > 1)[:, None], d, 1.0)
    return x


def _arrivals(router, rate_per_replica, window_s, replicas, exposure):  # less the offset, at least 0
    base = replica_arrivals(router, rate_per_replica, window_s, replicas, exposure)
    delta = _STATE["delta"]
    return base if delta is None else np.maximum(base - delta[:, None], 0.0)


def _latency(**kw) -> LatencyModel:  # the LatencyModel the planner builds, with the two laws
    if kw.get("stall_load") is not None and kw.get("mixed") is None:
        kw["stall_load"] = np.clip(np.asarray(kw["stall_load"]) * _STATE["ratio"], 0.0, 0.95)
    m = LatencyModel(**kw)
    if kw.get("mixed") is None and _STATE["d"] is not None:
        object.__setattr__(m, "_disp", _STATE["d"])
    return m


def _stall_law(self: LatencyModel) -> tuple[np.ndarray, ...]:
    """LatencyModel._stall_law with the Katz primaries (module docstring)."""
    gaps, free = self._gaps, self._free[:, None]
    m = self.stall_events * free
    d = getattr(self, "_disp", None)
    d = np.maximum(np.ones_like(m) if d is None else d, np.maximum(1.0 - m, 0.05))
    d = np.where(np.abs(d - 1.0) < 1e-9, 1.0, d)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        p0 = np.exp(np.where(d == 1.0, -m, -m * np.log(d) / np.where(d == 1.0, 2.0, d - 1.0)))
        p1 = m / d * p0
        p2 = np.where(m < 1e-4, m * m / 2.0, np.maximum(1.0 - p0 - p1, 0.0))
        s1, s2 = self.stall_m1_s[:, None] / free, self.stall_m2_s2[:, None] / free**3
        en = np.where((p2 > 0) & (m >= 1e-4), (m - p1) / p2, 2.0)
        en2 = np.where((p2 > 0) & (m >= 1e-4), (d * m + m * m - p1) / p2, 4.0)
        en = np.maximum(en, 2.0)
        en2 = np.maximum(en2, en * en)
        mean = en * s1
        var = en * np.maximum(s2 - s1 * s1, 0.0) + (en2 - en * en) * s1 * s1
        if self.spread is not None:
            var = var + (gaps * self.spread.shrink) ** 2 * self.spread.variance_s2()[:, None]
        shape = np.where(var > 0, mean * mean / var, np.inf)
        scale = np.where(mean > 0, var / mean, 0.0)
    gamma = np.isfinite(shape) & (scale > 0)
    return gaps, p0, p1, p2, mean, np.where(np.isfinite(shape), shape, 1.0), scale, gamma


def _install() -> None:
    col.stall_exposure, col.LatencyModel, col.replica_arrivals = _exposure, _latency, _arrivals
    law = cached_property(_stall_law)
    law.__set_name__(LatencyModel, "_stall_law")
    LatencyModel._stall_law = law
    take, requests = LatencyModel.take, LatencyModel.requests

    def take_d(self, idx):
        out = take(self, idx)
        if getattr(self, "_disp", None) is not None:
            object.__setattr__(out, "_disp", self._disp[idx])
        return out

    def requests_d(self, mask):
        out = requests(self, mask)
        if getattr(self, "_disp", None) is not None:
            object.__setattr__(out, "_disp", self._disp[:, mask])
        return out

    LatencyModel.take, LatencyModel.requests = take_d, requests_d


def cell(index: int, dispersion: bool, follow_on: bool, offset: bool = False) -> str:
    """One line: the best colocated configuration, its planned goodput and simulated / planned."""
    _STATE.update(ratio=1.0, dispersion=dispersion, offset=offset)
    if follow_on:
        c = planner_inputs(index)
        if c["R"] <= 8:
            first = np.array([c["before_first"]])
            x = float(
                stall_exposure(c["router"], c["batch"][None], c["prob"][None], np.array([c["R"]]), first)[0]
            )
            times = (c["t_dec"] / 2.0, c["busy"] / c["rate_r"], c["queue"] + c["t_dec"] / 2.0)
            _STATE["ratio"] = follow_on_chain(int(c["R"]), c["rate_r"], times, c["busy"]) / x
    s = sample_scenario(SEED, index)
    p = plan_for(s)
    b = p.best["colocated"]
    g, _, _ = simulate_cell(p.inputs.scenario, b, s.index)
    return (
        f"cell {index} {b.config.label()}: f / x {_STATE['ratio']:.3f}, planned {b.goodput_rps:.3f} req/s, "
        f"simulated / planned {g.rate_rps / b.goodput_rps:.3f}"
    )


if __name__ == "__main__":
    _install()
    for i in sys.argv[1].split(","):
        flags = ("--dispersion", "--follow-on", "--offset")
        print(cell(int(i), *(f in sys.argv for f in flags)), flush=True)
