"""Which formulas describe a configuration, and the numbers that go into them.

"Show the math" in the app (and any notebook) asks :func:`formulas_for` for the sections that apply
to one serving configuration: the roofline prefill and decode-step times always; the KV bytes per
token in its MLA form for an architecture with a compressed latent KV (DeepSeek-V2/V3) and its GQA
form otherwise; the KV transfer (layer-wise or whole-request, as the configuration sends it) only
for disaggregated pools joined by a real link; the queueing and batching forms always; the
colocated interference forms only for colocated serving. The formulas themselves and their sources
live in :mod:`model.symbolic.formulas`; this module only chooses among them, so a front end renders
the sections without deciding anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from model.llm.arch import LLMArch
from model.serving.registry import style_of

ValuesKind = Literal["prefill", "decode", "kv", "transfer"]


@dataclass(frozen=True)
class MathSection:
    """One titled group of formulas (names in ``model.symbolic.formulas``).

    ``values`` says which numbers to substitute: "prefill" (``prefill_values``), "decode"
    (``decode_values``), "kv" (:func:`kv_values`), "transfer" (:func:`transfer_values`), or None
    when the section is shown symbolically.
    """

    title: str
    formulas: tuple[str, ...]
    values: ValuesKind | None = None


def _has_link(config: Any) -> bool:
    link = style_of(config).kv_link(config)
    return link is not None and link.kind != "same-gpu"


def formulas_for(config: Any, arch: LLMArch) -> tuple[MathSection, ...]:
    """The sections of formulas that describe ``config`` serving ``arch``, in reading order."""
    kv = "kv_bytes_per_token_mla" if arch.kv_lora_rank else "kv_bytes_per_token_gqa"
    sections = [
        MathSection("Prefill time (roofline, mean prompt)", ("prefill_time",), "prefill"),
        MathSection("Decode step time (roofline, batch at this rate)", ("decode_step_time",), "decode"),
        MathSection("KV-cache bytes per token", (kv,), "kv"),
    ]
    if _has_link(config):
        transfer = "kv_transfer_layerwise" if getattr(config, "layerwise", True) else "kv_transfer_whole"
        sections.append(MathSection("KV transfer (mean request)", (transfer,), "transfer"))
    sections.append(
        MathSection(
            "Queueing and batching (symbolic)", ("mg1_wait", "mmc_wait", "decode_batch", "decode_tpot")
        )
    )
    if style_of(config).family == "colocated":
        sections.append(
            MathSection("Colocated interference (symbolic)", ("colocated_stall_inflation", "colocated_tpot"))
        )
    return tuple(sections)


def kv_values(arch: LLMArch, kv_element_bytes: float) -> dict[str, float]:
    """Numbers for the KV-bytes-per-token formula that :func:`formulas_for` picked for ``arch``."""
    if arch.kv_lora_rank:
        out = {
            "num_layers": arch.num_layers,
            "kv_lora_rank": arch.kv_lora_rank,
            "qk_rope_head_dim": arch.qk_rope_head_dim,
        }
    else:
        out = {"num_layers": arch.num_layers, "num_kv_heads": arch.num_kv_heads, "head_dim": arch.head_dim}
    out["kv_element_bytes"] = kv_element_bytes
    return out


def transfer_values(config: Any, arch: LLMArch, kv_bytes: float, prefill_s: float) -> dict[str, float]:
    """Numbers for the KV-transfer formula of a ``config`` whose style sends KV over a link."""
    link = style_of(config).kv_link(config)
    return {
        "kv_bytes": kv_bytes,
        "link_latency_s": link.latency_s,
        "lanes": config.transfer_lanes,
        "link_bandwidth_bytes_per_s": link.bandwidth_bytes_per_s,
        "link_efficiency": link.efficiency,
        "num_layers": arch.num_layers,
        "prefill_s": prefill_s,
    }
