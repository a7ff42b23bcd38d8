"""One guard around the whole page: an unexpected exception becomes a one-line banner, its traceback
goes to the server log.

``app.py`` calls :func:`run_guarded` once with its page body, so every widget, chart and panel is
covered without try/except scattered through the app. The project's own errors
(:class:`model.errors.PdplanError`, :class:`app_support.uploads.UploadError`) are already one line
for people and are shown as they are; anything else is shown by type only, with a short reference
that points to the logged traceback, so no server path or stack frame reaches the browser.
Streamlit's own control flow (``st.stop``, ``st.rerun``) derives from ``BaseException`` and passes
through untouched.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable

import streamlit as st

from model.errors import PdplanError

from .uploads import UploadError

log = logging.getLogger("pdplan.app")
MAX_MESSAGE_CHARS = 300


def one_line(err: BaseException, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``str(err)`` on one line, at most ``limit`` characters (the type name if it is empty)."""
    try:
        text = " ".join(str(err).split())
    except Exception:  # a broken __str__ must not break the banner
        text = ""
    text = text or type(err).__name__
    # lone surrogates cannot be sent to the browser (protobuf needs valid UTF-8)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def banner_text(err: BaseException) -> tuple[str, str | None]:
    """The banner for ``err`` and, for an unexpected error, the reference logged with its traceback."""
    if isinstance(err, PdplanError | UploadError):
        return one_line(err), None
    ref = secrets.token_hex(4)
    return (
        f"Unexpected error ({type(err).__name__}); this view could not be computed. "
        f"The details are in the server log under reference {ref}.",
        ref,
    )


def run_guarded(body: Callable[[], None]) -> None:
    """Run ``body``; show any exception it raises as an ``st.error`` banner (logged if unexpected)."""
    try:
        body()
    except Exception as err:
        text, ref = banner_text(err)
        if ref is not None:
            log.exception("unexpected error in the app (reference %s)", ref)
        st.error(text)
