"""A count-levelling router's per-replica arrivals, in a toy (docs/session13/chunk15.md, cell 69).

    PYTHONPATH=. python -m benchmarks.router_toy

Poisson arrivals (rate 1) go to the replica with the fewest requests (ties: the lowest index, as
model.sim.colocated's least-loaded rule, or uniformly at random); each request stays an exponential
time of mean n R (n requests per replica on average), so departures come from each replica in
proportion to its count. Prints the per-replica inter-arrival SCV for R = 2, 4, 8 and n = 2, 17:
round-robin would give 1 / R, a random split 1.
"""

from __future__ import annotations

import numpy as np


def interarrival_scv(replicas: int, per_replica: int, tie: str, events: int, seed: int = 0) -> float:
    """Mean over replicas of the inter-arrival SCV of the arrivals the router sends each replica."""
    rng = np.random.default_rng(seed)
    life = per_replica * replicas
    counts = np.full(replicas, per_replica)
    t, last = 0.0, np.zeros(replicas)
    gaps: list[list[float]] = [[] for _ in range(replicas)]
    for i in range(events):
        total = counts.sum()
        rate = 1.0 + total / life
        t += rng.exponential(1.0 / rate)
        if rng.random() < 1.0 / rate:
            low = np.flatnonzero(counts == counts.min())
            j = int(low[0] if tie == "index" else rng.choice(low))
            counts[j] += 1
            if i > 1000:
                gaps[j].append(t - last[j])
            last[j] = t
        else:
            counts[rng.choice(replicas, p=counts / total)] -= 1
    return float(np.mean([np.var(g) / np.mean(g) ** 2 for g in gaps]))


def main() -> None:
    for replicas in (2, 4, 8):
        for n in (2, 17):
            a, b = (interarrival_scv(replicas, n, tie, 200_000) for tie in ("index", "random"))
            print(f"R {replicas}, {n:2d} per replica: SCV {a:.3f} (lowest index), {b:.3f} (random ties)")


if __name__ == "__main__":
    main()
