"""Planner vs simulator goodput per numeric format (the grid and its figures: docs/validation.md,
"Precision formats", from benchmarks/format_agreement.py)."""

from __future__ import annotations

import pytest

from benchmarks.format_agreement import agreement
from model.hardware.catalog import get_gpu
from model.serving.configs import ColocatedConfig
from model.workload.slo import SLO


def test_fp8_prefill_first_agrees_within_ten_percent():
    """Llama-3.1-8B chat, FP8 weights and KV cache on 2 x TP1 H100, prefill-first, 0.5 s / 20 ms:
    the benchmark (6,000 requests) measured 43.1 / 45.0 req/s (0.96); 2,000 requests here."""
    g_plan, g_sim = agreement("fp8", "fp8", ColocatedConfig(get_gpu("h100-sxm"), 1, 2), SLO(0.5, 0.02), 2000)
    assert g_plan == pytest.approx(g_sim, rel=0.10)
