"""The built-in catalog: every config loads, names its source, and its parameter counts match the
published ones (values written out here with their sources)."""

from __future__ import annotations

import pytest

from model.llm.arch import active_params, embedding_params, total_params
from model.llm.catalog import get_model, list_models

# name: (published total, published active, how the active count treats embeddings, source).
# "all": embeddings and LM head included; "no-embed": the input embedding table is not counted
# (a lookup, not a matmul); "no-embeddings": neither embedding nor LM head.
PUBLISHED = {
    "deepseek-r1": (671e9, 37e9, "all", "DeepSeek-R1 model card: 671B total, 37B activated"),
    "deepseek-v3.2": (671e9, 37e9, "all", "DeepSeek-V3.2 (arXiv:2512.02556): V3.1-Terminus + indexer"),
    "deepseek-v4-pro": (1.6e12, 49e9, "no-embed", "DeepSeek-V4 model card: 1.6T total, 49B activated"),
    "deepseek-v4-flash": (284e9, 13e9, "no-embed", "DeepSeek-V4 model card: 284B total, 13B activated"),
    "qwen3-8b": (8.2e9, 8.2e9, "all", "Qwen3-8B model card: 8.2B"),
    "qwen3-30b-a3b": (30.5e9, 3.3e9, "all", "Qwen3-30B-A3B model card: 30.5B total, 3.3B activated"),
    "qwen3-235b-a22b": (235e9, 22e9, "all", "Qwen3-235B-A22B model card: 235B total, 22B activated"),
    "qwen3-coder-480b-a35b": (480e9, 35e9, "all", "Qwen3-Coder-480B-A35B model card: 480B, 35B activated"),
    "gpt-oss-20b": (20.9e9, 3.6e9, "no-embed", "gpt-oss model card (arXiv:2508.10925) Table 1"),
    "gpt-oss-120b": (116.8e9, 5.1e9, "no-embed", "gpt-oss model card (arXiv:2508.10925) Table 1"),
    "llama-4-scout": (109e9, 17e9, "all", "Llama 4 model card: 109B total, 17B active"),
    "llama-4-maverick": (400e9, 17e9, "all", "Llama 4 model card: 400B total, 17B active"),
    "kimi-k2": (1.0e12, 32e9, "all", "Kimi-K2 model card: 1T total, 32B activated"),
    "kimi-k2.5": (1.0e12, 32e9, "all", "Kimi-K2.5 model card: 1T total, 32B activated"),
    "glm-5": (744e9, 40e9, "all", "GLM-5 model card: 744B parameters, 40B active"),
    "minimax-m2.5": (230e9, 10e9, "no-embeddings", "MiniMax-M2 model card: 230B total, 10B active"),
    "minimax-m3": (428e9, 23e9, "no-embeddings", "MiniMax-M3 model card: ~428B total, ~23B activated"),
    "nemotron-3-nano-30b-a3b": (31.6e9, 3.6e9, "all", "Nemotron 3 Nano card: 31.6B, ~3.6B active incl. emb."),
    "nemotron-3-super-120b-a12b": (120e9, 12e9, "no-embed", "model name: 120B total, A12B"),
    "nemotron-h-56b": (56e9, 56e9, "all", "Nemotron-H paper (arXiv:2504.03624): 56B"),
    "mixtral-8x22b": (141e9, 39e9, "all", "Mistral AI: 39B active of 141B"),
    "gemma-4-31b": (31e9, 31e9, "all", "model name: 31B (with its vision encoder)"),
    "qwen3.5-27b": (27e9, 27e9, "all", "model name: 27B (with its vision encoder)"),
    "qwen3.5-35b-a3b": (35e9, 3e9, "all", "model name: 35B total, 3B activated"),
    "qwen3.5-122b-a10b": (122e9, 10e9, "all", "model name: 122B total, 10B activated"),
    "qwen3.5-397b-a17b": (397e9, 17e9, "all", "model name: 397B total, 17B activated"),
}
# Counts given only as a rounded name ("A3B") are checked to the rounding: +-0.5 of the last digit.
NAME_ROUNDED_ACTIVE = {"qwen3.5-35b-a3b": 0.5e9, "qwen3.5-122b-a10b": 0.5e9, "qwen3.5-397b-a17b": 0.5e9}
TOTAL_TOLERANCE = 0.03  # vision encoders, norms and biases left out (arch.py conventions)
ACTIVE_TOLERANCE = 0.05


def test_catalog_has_at_least_35_models_each_with_a_source() -> None:
    models = list_models()
    assert len(models) >= 35
    for a in models:
        assert a.source.startswith("https://"), a.name
        assert a.published_total_params > 0 and a.published_active_params > 0, a.name


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_parameter_counts(name: str) -> None:
    a = get_model(name)
    total, active, convention, _source = PUBLISHED[name]
    assert (a.published_total_params, a.published_active_params) == (total, active)  # config agrees
    assert abs(total_params(a) / total - 1) < TOTAL_TOLERANCE, total_params(a)
    table = a.vocab_size * a.hidden_size
    counted = (
        active_params(a) - {"all": 0, "no-embed": table, "no-embeddings": embedding_params(a)}[convention]
    )
    if name in NAME_ROUNDED_ACTIVE:
        assert abs(counted - active) <= NAME_ROUNDED_ACTIVE[name], counted
    else:
        assert abs(counted / active - 1) < ACTIVE_TOLERANCE, counted


def test_every_catalog_model_matches_its_published_total() -> None:
    # The older catalog entries carry their published counts in their config's _pdplan block.
    for a in list_models():
        assert abs(total_params(a) / a.published_total_params - 1) < 0.04, a.name


def test_attention_kinds_of_the_new_families() -> None:
    kinds = {a.name: a.layer_pattern for a in list_models()}
    assert kinds["qwen3.5-397b-a17b"] == "LLLF" * 15
    assert kinds["gemma-4-31b"] == "SSSSSF" * 10
    assert kinds["glm-5"] == "X" * 78
    assert kinds["minimax-m3"] == "FFF" + "X" * 57
    assert kinds["llama-4-maverick"] == "CCCF" * 12
    assert kinds["deepseek-r1"] == "" and kinds["kimi-k2.5"] == ""  # full MLA
    # DeepSeek-V4 compress_ratios: Pro 128, 128, then 4 / 128 alternating; Flash 0, 0, then 4 / 128
    assert kinds["deepseek-v4-pro"] == "HH" + "KH" * 29 + "K"
    assert kinds["deepseek-v4-flash"] == "SS" + "KH" * 20 + "K"
