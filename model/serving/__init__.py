"""Serving layer: the serving styles (colocated, chunked, disaggregated) and their evaluation."""
