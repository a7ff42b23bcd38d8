"""``--prefix-hit-rate`` and ``--prefix-routing``: prefix caching on ``pdplan plan`` and ``simulate``
(model.workload.prefix; docs/workloads.md, "Prefix caching")."""

from __future__ import annotations

import argparse

from model.workload.prefix import ROUTINGS, parse_hit_rate


def add_prefix_args(p: argparse.ArgumentParser) -> None:
    """The two prefix-caching flags."""
    p.add_argument(
        "--prefix-hit-rate",
        metavar="H",
        default=None,
        help="fraction of prompt tokens found in the prefix cache, 0..1 (default: the workload's; "
        "with a --trace that has hash_ids: replayed through an LRU cache per instance)",
    )
    p.add_argument(
        "--prefix-routing",
        choices=ROUTINGS,
        default=None,
        help="routing among instances' prefix caches when a trace has hash_ids (default cache-aware)",
    )


def prefix_hit_rate(args: argparse.Namespace) -> float | None:
    """``--prefix-hit-rate`` as a fraction in [0, 1] ("0.5" or "50%"), or None when not given."""
    return parse_hit_rate(args.prefix_hit_rate, "--prefix-hit-rate")
