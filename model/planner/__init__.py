"""Planner layer: enumeration, goodput search, ranking, verdict, flip thresholds, reports."""
