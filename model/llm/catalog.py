"""The built-in LLM architecture catalog (``model/llm/configs/*.json``) and name lookup."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from model.errors import InputError, UnknownNameError
from model.limits import is_file
from model.llm.arch import LLMArch
from model.llm.hf_config import load_hf_config, parse_hf_config_text


@lru_cache(maxsize=1)
def _builtin() -> dict[str, LLMArch]:
    table: dict[str, LLMArch] = {}
    folder = resources.files("model.llm") / "configs"
    for f in sorted(folder.iterdir(), key=lambda f: f.name):
        if not f.name.endswith(".json"):
            continue
        arch = parse_hf_config_text(f.read_text(encoding="utf-8"), where=f.name, name=f.name[:-5])
        for key in (arch.name.lower(), *arch.aliases):
            table[key] = arch
    return table


def list_models() -> list[LLMArch]:
    """Every built-in architecture, sorted by name."""
    return sorted({a.name: a for a in _builtin().values()}.values(), key=lambda a: a.name)


def get_model(name: str | LLMArch) -> LLMArch:
    """A built-in model by name or alias (case-insensitive), or a local Hugging Face config.json path."""
    if isinstance(name, LLMArch):
        return name
    if not isinstance(name, str) or not name.strip():
        raise InputError("model", name, "a model name (see `pdplan list models`) or a config.json path")
    key = name.strip().lower()
    table = _builtin()
    if key in table:
        return table[key]
    if key.endswith(".json") or is_file(Path(name)):
        return load_hf_config(name)
    raise UnknownNameError("model", name, [a.name for a in list_models()])
