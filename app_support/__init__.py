"""Presentation helpers of the Streamlit app (app.py): inputs, cached calls into ``model``, charts
and panels. No modelling lives here: every number shown comes from the ``model`` package."""
