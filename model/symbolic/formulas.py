"""Symbolic (sympy) forms of pdplan's key formulas: the registry by name and the markdown rendering.

Every :class:`~model.symbolic.core.Formula` renders itself as LaTeX (``latex()``), or with numbers
put in and the result with its unit (``latex_substituted(values)``), for the web app's "Show the
math" panel (:func:`latex_block` makes a markdown string of ``$$ ... $$`` blocks). The formulas live
by topic: model.symbolic.roofline (phase cost, KV bytes), model.symbolic.transfer (KV transfer,
all-reduce), model.symbolic.queueing (M/G/1, M/M/c, Erlang C), model.symbolic.batching (decode
batch, colocated interference); closed-form thresholds are in model.symbolic.thresholds.

The numeric implementations stay where they are (model.physics.roofline, model.hardware.collectives,
model.queueing, model.serving); these expressions restate them and tests/test_symbolic.py checks that
they agree numerically. Values are plain floats in SI units (seconds, bytes, bytes/s, FLOP/s), keyed
by the names in ``Formula.symbols``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from model.errors import InputError
from model.symbolic import batching, queueing, roofline, transfer
from model.symbolic.core import Formula

__all__ = ["all_formulas", "formula", "latex_block"]

_BUILDERS: dict[str, Callable[[], Formula]] = {
    **roofline.BUILDERS,
    **transfer.BUILDERS,
    **queueing.BUILDERS,
    **batching.BUILDERS,
}


def formula(name: str) -> Formula:
    """The formula called ``name`` (see :func:`all_formulas` for the list)."""
    if name not in _BUILDERS:
        raise InputError("formula", name, "one of " + ", ".join(_BUILDERS))
    return _BUILDERS[name]()


def all_formulas() -> list[Formula]:
    """Every formula in display order (phase cost, communication, queueing, batching, colocated)."""
    return [build() for build in _BUILDERS.values()]


def latex_block(formulas: Iterable[Formula], values: Mapping[str, object] | None = None) -> str:
    """Markdown for Streamlit's ``st.markdown``: per formula a bold title, its description and a
    ``$$ ... $$`` block, substituted when ``values`` holds every input it needs (else symbolic)."""
    parts = []
    for f in formulas:
        if not isinstance(f, Formula):
            raise InputError("formulas", f, "Formula objects (see model.symbolic.formulas.all_formulas)")
        complete = values is not None and all(k in values for k in f.symbols)
        body = f.latex_substituted(values) if complete and values is not None else f.latex()
        parts.append(f"**{f.name}**: {f.description}\n\n$$\n{body}\n$$\n\n*Source:* {f.source}\n")
    return "\n".join(parts)
