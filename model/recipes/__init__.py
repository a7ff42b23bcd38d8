"""Deployment recipes: launch commands and config files for a plan's configurations.

``model.deploy(plan)`` turns the recommended configuration and each style's best into recipes for
vLLM, SGLang, TensorRT-LLM, NVIDIA Dynamo and llm-d, with node placement (docs/deploy.md). Each
engine's flag names live in one data file per engine version (``model/recipes/data/*.toml``, every
flag with its documentation source); the YAML files are checked against JSON schemas derived from
the engines' documentation (``model/recipes/schemas/*.json``).

Layer: above the planner (it reads a Plan), below the simulator and the front ends.
"""
