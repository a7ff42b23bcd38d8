"""The sidebar's widget helpers: each draws one input under its DEFAULTS key, with its default
unless the session state has just been given the value (a scenario file, a URL parameter, or a
hidden advanced input kept alive: app_support.advanced), since Streamlit warns when a widget gets
both a default and a session-state value."""

from __future__ import annotations

from typing import Any

import streamlit as st

from .values import DEFAULTS, RANGES

# Session key of the inputs whose value was set through the session state in this run (their
# widgets are drawn without a default).
RESTORED_KEYS = "_restored_keys"


def initial(key: str, name: str = "value", value: Any = None) -> dict[str, Any]:
    """The widget's default as a keyword argument, left out when the key's value has just been set
    through the session state (a scenario file, a URL parameter, a hidden advanced input kept:
    Streamlit warns when a widget gets both a default and a session-state value)."""
    if key in st.session_state.get(RESTORED_KEYS, ()):
        return {}
    return {name: DEFAULTS[key] if value is None else value}


def select(label: str, key: str, options: list[Any], **kw: Any) -> Any:
    index = options.index(DEFAULTS[key]) if DEFAULTS[key] in options else 0
    return st.selectbox(label, options, **initial(key, "index", index), key=key, **kw)


def radio(label: str, key: str, options: list[Any], **kw: Any) -> Any:
    index = options.index(DEFAULTS[key])
    return st.radio(label, options, **initial(key, "index", index), key=key, horizontal=True, **kw)


def text(label: str, key: str, **kw: Any) -> str:
    return st.text_input(label, **initial(key), key=key, **kw)


def slider(label: str, key: str, **kw: Any) -> Any:
    lo, hi = RANGES[key]
    return st.slider(label, lo, hi, **initial(key), key=key, **kw)


def number(label: str, key: str, **kw: Any) -> Any:
    """A number field without bounds in the browser (a value out of RANGES reaches :func:`parse`,
    which shows the error instead of the results; a bounded field would keep the old value)."""
    return st.number_input(label, **initial(key), key=key, **kw)


def multiselect(label: str, key: str, options: list[Any]) -> Any:
    return st.multiselect(label, options, **initial(key, "default"), key=key)
