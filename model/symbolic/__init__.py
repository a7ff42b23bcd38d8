"""Symbolic layer: sympy forms of the key formulas (LaTeX for the UI, closed-form break-evens)."""
