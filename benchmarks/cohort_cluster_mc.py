"""Monte Carlo: is the rest of the decode cohort's widening the feedback through the step, or the
clustering of the other requests' births? (docs/session13/cohort16.md)

    PYTHONPATH=. python benchmarks/cohort_cluster_mc.py [--chunked]

benchmarks/cohort_mc.py's prefill-first replica (grid cell 105's rate, 400-token outputs, 0.123 s
prefill freezing the batch) run twice: with the Mixtral step (rising 28% from batch 1 to 2) and with
a step flat in the batch (6 ms: no feedback through the step can exist). With ``--chunked``
benchmarks/cohort_mc_chunked.py's replica (0.136 s in 2 chunks) instead. Prints the simulated
per-token batch variance and the variance of the requests' own token-average batch against three
laws: the cohort law of session 12-13 (N birth-death, C Poisson(c): V + c, g V + c), this branch's
(N's variance times the M^X/G/inf index of dispersion 1 + c,
model.queueing.colocated_base.cluster_dispersion: V (1 + c) + c, g V (1 + c) + c), and the feedback
alone (the others' chain given j companions present, births lambda tau(k + j), its stationary mean
shift kappa per companion, half of it built up over an equal-output window).
"""

from __future__ import annotations

import sys

import numpy as np

import benchmarks.cohort_mc as mc
import benchmarks.cohort_mc_chunked as mcc

FLAT_STEP_S = 6.0e-3  # a decode step flat in the batch, near the Mixtral step at the mean batch
G_EQUAL = 2.0 / 3.0  # the M/G/inf window factor for equal outputs (decode_spread item 3)


def chain(tau: np.ndarray, rate: float, output: int) -> tuple[np.ndarray, float, float]:
    """(per-token law q of the batch, its variance V, kappa): the birth-death chain at per-token time
    tau (decode_spread items 1-2) and the others' stationary mean shift per persistent companion,
    E[K | 1] - E[K | 0] with p(k | j) prop. to prod_{i <= k} lambda E[O] tau(i + j) / i."""
    a = rate * output * tau
    p = np.ones(len(tau) + 1)
    for k in range(1, len(p)):
        p[k] = p[k - 1] * a[k - 1] / k
    n = np.arange(len(p))
    q = np.zeros(len(p))
    q[1:] = n[1:] * p[1:] / tau
    q /= q.sum()
    v = float((q * n * n).sum() - (q * n).sum() ** 2)

    def others_mean(j: int) -> float:
        pk = np.ones(len(tau) - j)
        for k in range(1, len(pk)):
            pk[k] = pk[k - 1] * a[k + j - 1] / k
        return float((np.arange(len(pk)) * pk).sum() / pk.sum())

    return q, v, others_mean(1) - others_mean(0)


def laws(v: float, c: float, kappa: float) -> dict[str, tuple[float, float]]:
    """(per-token variance, window variance) of each law."""
    fb = (1.0 + kappa / 2.0) ** 2 * c
    return {
        "cohort (N Poisson-like)": (v + c, G_EQUAL * v + c),
        "cohort + clustered others (1 + c)": (v * (1 + c) + c, G_EQUAL * v * (1 + c) + c),
        f"cohort + feedback (kappa {kappa:.3f})": (v + fb, G_EQUAL * v + fb),
    }


def main() -> None:
    chunked = "--chunked" in sys.argv
    for label, step in (("Mixtral step", mc.STEP_S.copy()), ("flat step", np.full(16, FLAT_STEP_S))):
        if chunked:
            mcc.STEP_S = step
            prefill_s, chunks = 0.136, 2
            _, var, window = mcc.simulate(prefill_s, chunks)
            t_mix = prefill_s / chunks + step
            u = mc.RATE_RPS * chunks * t_mix
            tau = 1.0 / (u / t_mix + (1.0 - u) / step)
            s = chunks * t_mix[0]
            wait = mc.RATE_RPS * s * s / (2.0 * (1.0 - mc.RATE_RPS * s))
            q, v, kappa = chain(tau, mc.RATE_RPS, mc.OUTPUT)
            frozen = float(1.0 - (q[1:] * step / t_mix).sum())
            c = mc.RATE_RPS * (wait + 2 * s) * frozen
        else:
            mc.STEP_S = step
            prefill_s = 0.123
            _, var, window = mc.simulate(prefill_s, True)
            tau = step / (1.0 - mc.RATE_RPS * prefill_s)
            _, v, kappa = chain(tau, mc.RATE_RPS, mc.OUTPUT)
            c = 2.0 * mc.RATE_RPS * prefill_s
        print(f"{label}: simulated per-token var {var:.3f}, window var {window:.3f}; V {v:.3f}, c {c:.4f}")
        for name, (vt, vw) in laws(v, c, kappa).items():
            print(f"  law {name}: {vt:.3f}, {vw:.3f}")


if __name__ == "__main__":
    main()
