"""Text for Streamlit markdown: escaping of names and sentences that come from the model or from
uploads. Presentation only."""

from __future__ import annotations


def md(text: str) -> str:
    """Escape the characters Streamlit markdown would read as LaTeX or formatting."""
    return (
        text.replace("\\", "\\\\")
        .replace("$", "\\$")
        .replace("*", "\\*")
        .replace("_", "\\_")
        .replace("|", "\\|")
        .replace("\n", " ")
    )
