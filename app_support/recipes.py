"""The Download tab's deployment recipes: every engine's launch commands and config files for the
plan's recommended configuration and each style's best, as one zip (model.deploy; docs/deploy.md).
Presentation only: the recipes come from model.recipes."""

from __future__ import annotations

import streamlit as st

import model
from model.errors import PdplanError


def download(plan: model.Plan) -> None:
    """A download button for the zip of ``model.deploy(plan)``, with the engine versions targeted."""
    try:
        recipes = model.deploy(plan)
        data = recipes.zip_bytes()
    except PdplanError as err:
        st.caption(f"Deployment recipes unavailable: {err}")
        return
    st.download_button(
        "Deployment recipes (zip)", data, "pdplan-recipes.zip", "application/zip", key="download_recipes"
    )
    versions = ", ".join(f"{e} {v}" for e, v in recipes.versions.items())
    st.caption(
        f"Launch commands and config files ({versions}) for the recommended configuration and each "
        "style's best, with node placement; every flag is checked against the engine version's "
        "documentation (docs/deploy.md). Same as `pdplan deploy`."
    )
