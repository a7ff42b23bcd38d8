"""Built-in hardware data: one TOML file per GPU (gpus/), link (links/), node (nodes/) and
serving engine (engines/).

This folder is data, shipped as package data so that it loads after a plain ``pip install .``;
``model.hardware.catalog`` reads and validates it. See docs/profiles.md for the schema.
"""
