"""Parameter counts and KV sizes derived by hand from the published configs."""

from __future__ import annotations

import numpy as np
import pytest

from model.errors import InputError, ProfileError, UnknownNameError
from model.llm.arch import (
    active_params,
    check_tp,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    total_params,
    weight_bytes,
)
from model.llm.catalog import get_model, list_models
from model.llm.hf_config import arch_from_hf_config, parse_hf_config_text


def rel_err(a: float, b: float) -> float:
    return abs(a / b - 1)


def test_llama31_8b_params_by_hand() -> None:
    # h=4096, L=32, heads 32, kv 8, d=128, I=14336, V=128256, untied.
    attn = 4096 * 4096 + 2 * 4096 * 8 * 128 + 4096 * 4096  # Q + K,V + O = 41,943,040
    mlp = 3 * 4096 * 14336  # 176,160,768
    emb = 2 * 128256 * 4096  # embed + lm head = 1,050,673,152
    expected = 32 * (attn + mlp) + emb  # 8,029,995,008
    # Meta's exact 8,030,261,248 also counts the RMSNorm scales: 2 x 32 x 4096 + 4096 = 266,240.
    assert expected == 8_029_995_008 == 8_030_261_248 - 266_240
    arch = get_model("llama-3.1-8b")
    assert total_params(arch) == expected
    assert rel_err(total_params(arch), 8.03e9) < 0.01  # Meta model card: 8.03B


def test_llama31_70b_params_by_hand() -> None:
    # h=8192, L=80, heads 64, kv 8, d=128, I=28672, V=128256.
    attn = 2 * 8192 * 8192 + 2 * 8192 * 8 * 128  # 150,994,944
    mlp = 3 * 8192 * 28672  # 704,643,072
    expected = 80 * (attn + mlp) + 2 * 128256 * 8192  # 70,553,706,496
    assert total_params(get_model("llama-3.1-70b")) == expected
    assert rel_err(expected, 70.6e9) < 0.01  # model card: 70.6B


def test_mixtral_total_and_active_by_hand() -> None:
    # h=4096, L=32, 8 experts top-2, expert I=14336, kv 8, V=32000.
    attn = 2 * 4096 * 4096 + 2 * 4096 * 8 * 128  # 41,943,040
    expert = 3 * 4096 * 14336  # 176,160,768
    router = 4096 * 8
    emb = 2 * 32000 * 4096
    total = 32 * (attn + router + 8 * expert) + emb  # 46,702,792,704
    active = 32 * (attn + router + 2 * expert) + emb  # 12,879,921,152
    arch = get_model("mixtral-8x7b")
    assert total_params(arch) == total
    assert active_params(arch) == active
    assert rel_err(total, 46.7e9) < 0.01 and rel_err(active, 12.9e9) < 0.01  # Mistral AI: 46.7B / 12.9B


def test_deepseek_v3_total_and_active_by_hand() -> None:
    # h=7168, L=61 (3 dense, 58 MoE), 128 heads, MLA q_lora 1536, kv_lora 512, rope 64, nope 128, v 128,
    # 256 routed experts (top-8) + 1 shared, expert I=2048, dense I=18432, V=129280.
    attn = 7168 * 1536 + 1536 * 128 * 192 + 7168 * (512 + 64) + 512 * 128 * (128 + 128) + 128 * 128 * 7168
    assert attn == 187_105_280
    expert = 3 * 7168 * 2048
    dense_mlp = 3 * 7168 * 18432
    emb = 2 * 129280 * 7168
    total = 61 * attn + 3 * dense_mlp + 58 * (7168 * 256 + 257 * expert) + emb
    active = 61 * attn + 3 * dense_mlp + 58 * (7168 * 256 + 9 * expert) + emb
    arch = get_model("deepseek-v3")
    assert total_params(arch) == total
    assert active_params(arch) == active
    assert rel_err(total, 671e9) < 0.01  # DeepSeek-V3 report: 671B total
    # Published "37B activated" is rounded to the billion (+-1.4%); counting the embedding and LM head
    # matrices, as pdplan does, gives 37.55B.
    assert active == 37_551_276_032
    assert rel_err(active, 37e9) < 0.015


@pytest.mark.parametrize("arch", list_models(), ids=lambda a: a.name)
def test_every_catalog_model_close_to_published(arch) -> None:
    # Round published figures (Llama-2-7B is 6.74B counted, "7B" published) allow 4%.
    assert arch.published_total_params > 0
    assert rel_err(total_params(arch), arch.published_total_params) < 0.04


def test_kv_bytes_per_token() -> None:
    # Llama-3.1-70B GQA: 2 (K,V) x 80 layers x 8 kv heads x 128 x 2 bytes = 327,680 B/token.
    assert kv_bytes_per_token(get_model("llama-3.1-70b"), "bf16") == 2 * 80 * 8 * 128 * 2 == 327_680
    # Mixtral: 2 x 32 x 8 x 128 x 2 = 131,072 B/token.
    assert kv_bytes_per_token(get_model("mixtral-8x7b"), "bf16") == 131_072
    # DeepSeek-V3 MLA latent: 61 layers x (512 + 64) x 2 bytes = 70,272 B/token.
    assert kv_bytes_per_token(get_model("deepseek-v3"), "bf16") == 61 * 576 * 2 == 70_272
    assert kv_bytes_per_token(get_model("llama-3.1-70b"), "fp8") == 163_840


def test_kv_heads_replicated_beyond_kv_head_count() -> None:
    arch = get_model("llama-3.1-70b")  # 8 kv heads
    per_gpu = kv_bytes_per_token_per_gpu(arch, "bf16", np.array([1, 2, 8, 16]))
    # TP 1/2/8 split the 8 heads; TP16 replicates: each rank still holds one head.
    np.testing.assert_allclose(per_gpu, [327_680, 163_840, 40_960, 40_960])
    # MLA latent is held whole by every rank.
    mla = kv_bytes_per_token_per_gpu(get_model("deepseek-v3"), "bf16", np.array([1, 8]))
    np.testing.assert_allclose(mla, [70_272, 70_272])


def test_weight_bytes_and_dtype_errors() -> None:
    arch = get_model("llama-3.1-8b")
    assert weight_bytes(arch, "bf16") == 2 * 8_029_995_008
    assert weight_bytes(arch, "fp8") == 8_029_995_008
    with pytest.raises(InputError, match="dtype"):
        weight_bytes(arch, "fp12")


def test_tp_must_divide_heads() -> None:
    check_tp(get_model("llama-3.1-8b"), 8)
    with pytest.raises(InputError, match="tp: got 3"):
        check_tp(get_model("llama-3.1-8b"), 3)


def test_unknown_model_suggests_close_names() -> None:
    with pytest.raises(UnknownNameError, match="did you mean 'llama-3.1-70b'"):
        get_model("llama-3.1-7b")


def test_aliases_and_case() -> None:
    assert get_model("Llama-3.1-70B") is get_model("llama-3.1-70b")


def test_hf_config_from_file(tmp_path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(
        '{"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32,'
        ' "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256,'
        ' "tie_word_embeddings": true,'
        ' "sliding_window": 4096}'
    )
    arch = get_model(str(cfg))
    # Llama-3.2-1B shape: 16 x (2*2048^2 + 2*2048*512 + 3*2048*8192) + 128256*2048 (tied) = 1,235,814,400
    assert total_params(arch) == 16 * (2 * 2048**2 + 2 * 2048 * 512 + 3 * 2048 * 8192) + 128256 * 2048
    assert arch.head_dim == 64
    # sliding_window without use_sliding_window = false windows every layer (Mistral 7B v0.1 style)
    assert arch.layer_pattern == "S" * 16 and arch.attention_window == 4096


def test_hf_config_errors_name_the_field() -> None:
    with pytest.raises(ProfileError, match="num_hidden_layers"):
        arch_from_hf_config({"model_type": "llama", "hidden_size": 10, "num_attention_heads": 2})
    with pytest.raises(ProfileError, match="not valid JSON"):
        parse_hf_config_text("{nope")
    with pytest.raises(ProfileError, match="num_kv_heads: got 3"):
        arch_from_hf_config(
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 3,
                "intermediate_size": 128,
                "vocab_size": 100,
            }
        )
