"""Calibration: fit a GPU profile's efficiencies to measurements (CSV or vLLM bench JSON)."""
