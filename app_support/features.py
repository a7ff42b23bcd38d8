"""Sidebar inputs for serving-engine features (speculative decoding, prefix caching, KV offload
tiers, pre-emption): drawn inside the *Advanced* expander by app_support.inputs, read with
values.TEXT_READERS like every text input. A KV-offload line is checked for its grammar here; its
tiers are checked against the node's host memory and NVMe when the plan resolves the GPU's node (the
error names ``kv_offload.cpu``); a swap pre-emption without a cpu tier is refused there too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# The feature inputs, in the order they are drawn; each is a TEXT_READERS key and a DEFAULTS key.
KEYS = ("speculation", "prefix_hit_rate", "kv_offload", "preemption")

_LABELS = {
    "speculation": "Speculative decoding, e.g. 'eagle k=3 a=0.8' or 'mtp k=1 tau=1.9' (blank = off)",
    "prefix_hit_rate": "Prefix-cache hit rate, e.g. '0.6' or '60%' (blank = the workload's own)",
    "kv_offload": "KV offload tiers per node, e.g. 'cpu:1TB,nvme:8TB,working-set:50M' (blank = none)",
    "preemption": "When the KV cache runs out: recompute, swap (needs a cpu tier) or none "
    "(blank = the engine's)",
}


def draw(text_input: Callable[..., Any]) -> None:
    """Draw each feature's text field with ``text_input(label, key)`` (app_support.widgets.text)."""
    for key in KEYS:
        text_input(_LABELS[key], key)
