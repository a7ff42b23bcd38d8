"""Engine data for recipes: the flag names of each engine version, with their documentation sources
(``model/recipes/data/<engine>-<version>.toml``), and the JSON schemas the emitted YAML must satisfy
(``model/recipes/schemas/*.json``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from model.errors import InputError, ProfileError, short
from model.hardware.schema import read_toml

DATA_DIR = Path(__file__).resolve().parent / "data"
SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"

ENGINES = ("vllm", "sglang", "trtllm", "dynamo", "llm-d")
"""Engines with recipes, in the order recipes are listed."""

DEFAULT_VERSIONS: dict[str, str] = {
    "vllm": "0.12",
    "sglang": "0.5",
    "trtllm": "1.0",
    "dynamo": "v1alpha1",
    "llm-d": "0.4",
}
"""The version each engine's recipe targets unless another known version is asked for."""


@dataclass(frozen=True, eq=False)
class EngineData:
    """One engine version's vocabulary: for each program (``"vllm serve"``, ...) its flags, each
    mapped to the documentation that defines it; ``tables`` holds the file's other tables
    (connector names, chart names, ...), each with its own ``source``."""

    engine: str
    version: str
    full_name: str
    docs: str
    programs: Mapping[str, Mapping[str, str]]
    program_sources: Mapping[str, str]
    tables: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    path: str = ""

    @property
    def label(self) -> str:
        """e.g. ``vllm 0.12``."""
        return f"{self.engine} {self.version}"

    def table(self, name: str) -> Mapping[str, Any]:
        """One of the file's extra tables (an error naming the file when it is missing)."""
        if name not in self.tables:
            raise ProfileError(Path(self.path).name, name, "missing table")
        return self.tables[name]

    def check_flags(self, program: str, flags: tuple[str, ...]) -> None:
        """Raise naming the first flag this engine version's data file does not list for ``program``."""
        known = self.programs.get(program)
        if known is None:
            raise InputError(f"{self.engine} program", program, f"one of {sorted(self.programs)}")
        for flag in flags:
            if flag not in known:
                raise InputError(
                    f"{self.engine} {self.version} flag", flag, f"a flag of {program!r} listed in {self.path}"
                )


def known_versions(engine: str) -> tuple[str, ...]:
    """Versions with a data file for ``engine``, sorted."""
    prefix = f"{engine}-"
    return tuple(sorted(p.stem[len(prefix) :] for p in DATA_DIR.glob(f"{prefix}*.toml")))


def check_engine(engine: object) -> str:
    """``engine`` if it is one of :data:`ENGINES`, else an InputError naming the field."""
    if not isinstance(engine, str) or engine not in ENGINES:
        raise InputError("engine", engine, f"one of {', '.join(ENGINES)} (or 'all')")
    return engine


def engine_data(engine: str, version: str | None = None) -> EngineData:
    """The data file of ``engine`` at ``version`` (None: :data:`DEFAULT_VERSIONS`); an unknown
    version is one error naming the field and the known versions."""
    check_engine(engine)
    version = DEFAULT_VERSIONS[engine] if version is None else version
    known = known_versions(engine)
    if not isinstance(version, str) or version not in known:
        raise InputError(f"engine_version ({engine})", version, f"one of {', '.join(known)}")
    return _load(engine, version)


@cache
def _load(engine: str, version: str) -> EngineData:
    path = DATA_DIR / f"{engine}-{version}.toml"
    raw = read_toml(path)
    name = path.name
    for key in ("engine", "version", "full_name", "docs"):
        if not isinstance(raw.get(key), str):
            raise ProfileError(name, key, "missing or not text")
    if raw["engine"] != engine or raw["version"] != version:
        raise ProfileError(name, "engine/version", f"must be {engine!r} / {version!r} (the file name)")
    programs: dict[str, dict[str, str]] = {}
    sources: dict[str, str] = {}
    for program, body in raw.get("programs", {}).items():
        flags = body.get("flags", {})
        if not isinstance(body.get("source"), str) or not flags:
            raise ProfileError(name, f"programs.{program}", "needs a source and a flags table")
        for flag, src in flags.items():
            if not flag.startswith("-") or not isinstance(src, str) or not src.strip():
                raise ProfileError(name, f"programs.{program}.flags.{flag}", "a flag with a source")
        programs[program] = dict(flags)
        sources[program] = body["source"]
    tables = {k: v for k, v in raw.items() if isinstance(v, dict) and k != "programs"}
    for key, table in tables.items():
        if not isinstance(table.get("source"), str):
            raise ProfileError(name, f"{key}.source", "every table cites its source")
    return EngineData(engine, version, raw["full_name"], raw["docs"], programs, sources, tables, str(path))


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The JSON schema ``model/recipes/schemas/<name>.json`` (its ``$comment`` names the source)."""
    path = SCHEMA_DIR / f"{name}.json"
    if not path.is_file():
        known = sorted(p.stem for p in SCHEMA_DIR.glob("*.json"))
        raise InputError("schema", name, f"one of {', '.join(known)}")
    return json.loads(path.read_text(encoding="utf-8"))


@cache
def _validator(name: str) -> Any:
    import jsonschema

    schema = load_schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)  # once per schema, not per file
    return jsonschema.Draft202012Validator(schema)


def check_yaml(path: str, text: str, schema: str) -> None:
    """Parse ``text`` (YAML) and validate it against the named schema; an error names the file and
    the first violation (an emitted file that breaks its engine's schema is a bug, caught here)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        doc = yaml.load(text, Loader=loader)  # a safe loader: plain data only
    except yaml.YAMLError as err:
        raise ProfileError(path, schema, short(str(err).splitlines()[0])) from None
    error = next(iter(_validator(schema).iter_errors(doc)), None)
    if error is not None:
        raise ProfileError(path, schema, short(error.message))
