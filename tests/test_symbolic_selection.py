"""model.symbolic.selection: which formulas describe a configuration (moved out of the app, issue 12)."""

from __future__ import annotations

import pytest

import model
from model.serving.configs import ColocatedConfig, DisaggregatedConfig
from model.symbolic.selection import formulas_for, kv_values, transfer_values

H100 = model.get_gpu("h100-sxm")
QUEUEING = ("mg1_wait", "mmc_wait", "decode_batch", "decode_tpot")


def _disagg(link: str, layerwise: bool = True) -> DisaggregatedConfig:
    return DisaggregatedConfig(H100, 4, 2, H100, 4, 1, model.get_link(link), layerwise=layerwise)


def _names(sections) -> list[tuple[str, ...]]:
    return [s.formulas for s in sections]


def test_colocated_gqa_model():
    arch = model.get_model("llama-3.1-70b")
    sections = formulas_for(ColocatedConfig(H100, 4, 2, chunk_tokens=512), arch)
    assert _names(sections) == [
        ("prefill_time",),
        ("decode_step_time",),
        ("kv_bytes_per_token_gqa",),
        QUEUEING,
        ("colocated_stall_inflation", "colocated_tpot"),
    ]
    assert [s.values for s in sections] == ["prefill", "decode", "kv", None, None]


def test_disaggregated_over_a_link_shows_the_transfer_it_uses():
    arch = model.get_model("llama-3.1-70b")
    layerwise = _names(formulas_for(_disagg("ib-ndr-400"), arch))
    assert layerwise == [
        ("prefill_time",),
        ("decode_step_time",),
        ("kv_bytes_per_token_gqa",),
        ("kv_transfer_layerwise",),
        QUEUEING,
    ]
    whole = _names(formulas_for(_disagg("ib-ndr-400", layerwise=False), arch))
    assert ("kv_transfer_whole",) in whole and ("kv_transfer_layerwise",) not in whole


def test_same_gpu_link_has_no_transfer_and_mla_uses_the_latent_form():
    arch = model.get_model("deepseek-v3")
    names = _names(formulas_for(_disagg("same-gpu"), arch))
    assert ("kv_bytes_per_token_mla",) in names
    assert not any(n[0].startswith("kv_transfer") for n in names)
    # DeepSeek-V3's config: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64
    assert kv_values(arch, 1.0) == {
        "num_layers": 61,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "kv_element_bytes": 1.0,
    }


def test_every_selected_formula_exists_and_values_fit_it():
    from model.symbolic import formulas as symbolic

    arch = model.get_model("llama-3.1-70b")
    cfg = _disagg("ib-ndr-400")
    for section in formulas_for(cfg, arch):
        for name in section.formulas:
            symbolic.formula(name)  # raises on an unknown name
    kv = kv_values(arch, 2.0)
    # Llama-3.1-70B: 80 layers x 8 KV heads x 128 head dim x 2 (K and V) x 2 bytes = 327,680 B/token
    assert symbolic.formula("kv_bytes_per_token_gqa").evaluate(kv) == pytest.approx(327_680)
    tv = transfer_values(cfg, arch, kv_bytes=1e8, prefill_s=0.2)
    assert tv["lanes"] == 4 and tv["num_layers"] == 80 and tv["kv_bytes"] == 1e8
