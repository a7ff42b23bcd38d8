"""Engine-feature text fields of the sidebar (issue 15): speculative decoding and KV offload tiers.

Each is one line read by the model's own strict grammar (``model.parse_speculation``,
``model.hardware.kv_offload``); the capacity check of an offload tier against the node's host
memory and NVMe happens when the plan resolves the GPU's node (its error names ``kv_offload.cpu``).
"""

from __future__ import annotations

from model.errors import PdplanError
from model.hardware.kv_offload import node_for_gpu, parse_kv_offload, parse_tier_items

# (label, session key) of the text fields, drawn in this order in the Advanced expander.
FIELDS = (
    ("Speculative decoding, e.g. 'eagle k=3 a=0.8' or 'mtp k=1 tau=1.9' (blank = off)", "speculation"),
    ("KV offload tiers per node, e.g. 'cpu:1TB,nvme:8TB,working-set:50M' (blank = none)", "kv_offload"),
)


def offload_text(text: str) -> str | None:
    """The grammar check of a KV-offload line (no node); blank = none."""
    if not text.strip():
        return None
    parse_tier_items(text, "kv_offload")
    return " ".join(text.split())


def read_kv_offload(text: str, gpu: str) -> str | None:
    """A KV-offload line checked against the node of a catalog ``gpu`` (uploaded GPU profiles: the
    grammar only; the plan checks the rest)."""
    line = offload_text(text)
    if line is not None:
        try:
            node = node_for_gpu(gpu)
        except PdplanError:  # a GPU outside the catalog (uploaded profile): the plan reports it
            return line
        parse_kv_offload(line, node)
    return line
