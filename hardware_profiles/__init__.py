"""Built-in hardware data: one TOML file per GPU (gpus/), link (links/) and node (nodes/).

This folder is data, shipped as package data so that it loads after a plain ``pip install .``;
``model.profiles`` reads and validates it. See docs/profiles.md for the schema.
"""
