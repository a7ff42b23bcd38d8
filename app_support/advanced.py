"""The sidebar's advanced inputs (dtypes, efficiency, price and power overrides, chunk sizes, TP
degrees, pool layouts, engine features, layer-wise transfer, the margin): drawn in the form only
while the *Advanced inputs* toggle below it is on.

Every Apply re-sends each drawn element, and the browser redraws each one (docs/app.md,
"Responsiveness", session 8), so the 16 rarely used fields are not drawn by default. Their values
stay in effect while hidden: a widget not drawn in a run loses its state in Streamlit, so each
hidden value is written back to the session state (:func:`keep`), and URL parameters and scenario
files set them as before; a caption in the form names the hidden values that differ from their
defaults."""

from __future__ import annotations

from collections.abc import MutableMapping, MutableSet
from typing import Any

import streamlit as st

from . import features, widgets
from .values import DEFAULTS

TOGGLE = "advanced"  # session key of the toggle (view state: not an input, not in the URL)
LABEL = "Advanced inputs"
# The inputs drawn only while the toggle is on, in page order.
KEYS = (
    "dtype",
    "kv_dtype",
    "prefill_mfu",
    "decode_mbu",
    "price",
    "tdp",
    "chunks",
    "tps",
    "prefill_layout",
    "decode_layout",
    *features.KEYS,
    "layerwise",
    "margin",
)


def shown() -> bool:
    """Whether the advanced fields are drawn in this run (the toggle's value, read before the
    toggle itself is drawn below the form)."""
    return bool(st.session_state.get(TOGGLE, False))


def draw(c: dict[str, list[Any]]) -> None:
    """The advanced fields (``c``: the choices of the select fields, values.choices)."""
    st.subheader("Advanced")
    widgets.select("Weight dtype", "dtype", c["dtype"])
    widgets.select("KV-cache dtype", "kv_dtype", c["kv_dtype"])
    widgets.text("Prefill MFU override (blank = GPU profile)", "prefill_mfu")
    widgets.text("Decode MBU override (blank = GPU profile)", "decode_mbu")
    widgets.text("Price per GPU-hour, USD (blank = profile)", "price")
    widgets.text("GPU power at full load, e.g. '700 W' (blank = profile TDP)", "tdp")
    widgets.multiselect("Chunk sizes (tokens per iteration)", "chunks", c["chunks"])
    widgets.multiselect("Tensor-parallel degrees", "tps", c["tps"])
    widgets.text("Prefill pool layout, e.g. 'tep=8' (blank = search TP/TEP/DEP)", "prefill_layout")
    widgets.text("Decode pool layout, e.g. 'dep=32' (blank = search TP/TEP/DEP)", "decode_layout")
    features.draw(widgets.text)
    st.checkbox("Layer-wise KV transfer (overlaps prefill)", **widgets.initial("layerwise"), key="layerwise")
    widgets.slider("Margin disaggregation must win by", "margin", step=0.01)


def changed(state: Any = None) -> list[str]:
    """The advanced inputs whose value differs from the default, as ``key=value`` texts."""
    state = st.session_state if state is None else state
    return [f"{k}={state[k]}" for k in KEYS if k in state and state[k] != DEFAULTS[k]]


def hidden_note() -> None:
    """One caption in the form naming the hidden advanced values in effect (nothing at defaults)."""
    if diff := changed():
        st.caption(f"{LABEL} in effect (hidden): " + ", ".join(diff))


def keep(state: MutableMapping[str, Any], restored: MutableSet[str]) -> None:
    """Keep the hidden inputs' values for the runs to come: write each back through the session
    state (Streamlit drops the state of a widget not drawn in a run) and mark it in ``restored``,
    so that when the toggle is switched on its widget is drawn without a default (a widget given
    both a default and a session-state value makes Streamlit log a warning)."""
    for key in KEYS:
        if key in state:
            state[key] = state[key]
            restored.add(key)


def toggle() -> bool:
    """The toggle, drawn below the form: switching it reruns the page (the plan is cached)."""
    return st.toggle(
        LABEL,
        key=TOGGLE,
        help="Weight and KV dtypes, efficiency, price and power overrides, chunk sizes, TP degrees, "
        "pool layouts, speculative decoding, prefix caching, KV offload, layer-wise transfer, the "
        "margin. Hidden values stay in effect.",
    )
