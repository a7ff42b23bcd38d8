"""Candidate enumeration, kept under its former name: the functions live with the serving styles in
model.serving.enumeration (each style enumerates its own candidates; model.serving.registry)."""

from model.serving.enumeration import (
    DEFAULT_CHUNK_OPTIONS,
    DEFAULT_TP_OPTIONS,
    colocated_for_budget,
    disaggregated_for_budget,
    disaggregated_grid,
    gpu_kinds,
    nics_per_gpu,
    valid_tps,
)

__all__ = [
    "DEFAULT_CHUNK_OPTIONS",
    "DEFAULT_TP_OPTIONS",
    "colocated_for_budget",
    "disaggregated_for_budget",
    "disaggregated_grid",
    "gpu_kinds",
    "nics_per_gpu",
    "valid_tps",
]
