"""A sweep grid: models x GPUs x workloads x SLO tiers x sizes (GPU budgets or target rates), read
from a TOML file and checked before any scenario runs (docs/sweeps.md has the format).

```toml
models = ["llama-3.1-8b", "llama-3.1-70b"]
gpus = ["h100-sxm", "a100-80gb-sxm"]
workloads = ["chat", "code"]
budgets = [8, 16]             # GPU budgets; and/or target_rates = [5.0, 20.0] (req/s)

[[slo]]
name = "interactive"
ttft = "500ms"
tpot = "50ms"

[options]                     # the same for every scenario (all optional)
link = "ib-ndr-400"
node = "hgx-h100-8"
tp = [1, 2, 4, 8]
chunks = [512, 2048]
samples = 2000
```

Every error names the file and the field (``grid.toml: models[2]``); unknown profile names are
refused with the known ones; a grid expanding past :data:`model.limits.MAX_SWEEP_SCENARIOS` is refused.
"""

from __future__ import annotations

import itertools
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.errors import InputError, PdplanError, short
from model.hardware.catalog import load_catalog
from model.limits import (
    MAX_OPTIONS,
    MAX_PLAN_GPUS,
    MAX_PROFILE_BYTES,
    MAX_SWEEP_SCENARIOS,
    check_depth,
    check_file_size,
    is_file,
)
from model.llm.catalog import get_model
from model.units import Kind, parse_quantity
from model.workload.presets import get_workload

__all__ = ["Grid", "GridScenario", "load_grid", "parse_grid"]

_TOP = {"models", "gpus", "workloads", "budgets", "target_rates", "slo", "options"}
_OPTIONS = {"link", "node", "decode_gpu", "engine", "dtype", "tp", "chunks", "samples", "max_gpus"}


@dataclass(frozen=True)
class GridScenario:
    """One scenario of a grid; ``key`` names it uniquely (the output's scenario column)."""

    model: str
    gpu: str
    workload: str
    slo_tier: str
    ttft_slo_s: float
    tpot_slo_s: float
    budget_gpus: int | None
    target_rate_rps: float | None

    @property
    def key(self) -> str:
        size = (
            f"gpus={self.budget_gpus}" if self.budget_gpus is not None else f"rate={self.target_rate_rps:g}"
        )
        return f"{self.model}|{self.gpu}|{self.workload}|{self.slo_tier}|{size}"


@dataclass(frozen=True)
class Grid:
    """The scenarios of a grid file and the plan options shared by all of them."""

    scenarios: tuple[GridScenario, ...]
    options: tuple[tuple[str, Any], ...]
    source: str = ""


def _names(where: str, data: dict, field: str, check: Any) -> list[str]:
    values = data.get(field)
    if not isinstance(values, list) or not values:
        raise InputError(f"{where}: {field}", short(values), "a non-empty list of names")
    for i, v in enumerate(values):
        if not isinstance(v, str) or not v.strip():
            raise InputError(f"{where}: {field}[{i}]", short(v), "a name (a string)")
        try:
            check(v)
        except PdplanError as err:
            allowed = getattr(err, "allowed", None) or str(err)
            raise InputError(f"{where}: {field}[{i}]", v, short(str(allowed), 300)) from None
    if len(set(values)) != len(values):
        raise InputError(f"{where}: {field}", short(values), "names without repeats")
    return values


def _sizes(where: str, data: dict) -> list[tuple[int | None, float | None]]:
    budgets, rates = data.get("budgets", []), data.get("target_rates", [])
    if not isinstance(budgets, list) or not isinstance(rates, list) or not (budgets or rates):
        raise InputError(f"{where}: budgets", short(budgets), "a list of GPU budgets and/or target_rates")
    out: list[tuple[int | None, float | None]] = []
    for i, b in enumerate(budgets):
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= MAX_PLAN_GPUS:
            raise InputError(
                f"{where}: budgets[{i}]", short(b), f"a whole number of GPUs in [1, {MAX_PLAN_GPUS}]"
            )
        out.append((b, None))
    for i, r in enumerate(rates):
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0 < r <= 1e7:
            raise InputError(f"{where}: target_rates[{i}]", short(r), "a request rate in (0, 1e7] req/s")
        out.append((None, float(r)))
    return out


def _slos(where: str, data: dict) -> list[tuple[str, float, float]]:
    tiers = data.get("slo")
    if not isinstance(tiers, list) or not tiers:
        raise InputError(f"{where}: slo", short(tiers), "one or more [[slo]] tables with name, ttft, tpot")
    out = []
    for i, t in enumerate(tiers):
        field = f"{where}: slo[{i}]"
        if not isinstance(t, dict) or set(t) != {"name", "ttft", "tpot"}:
            raise InputError(field, short(t), "a table with exactly name, ttft and tpot")
        if not isinstance(t["name"], str) or not t["name"].strip() or "|" in t["name"]:
            raise InputError(f"{field}.name", short(t["name"]), "a name without '|'")
        ttft = parse_quantity(t["ttft"], Kind.TIME, f"{field}.ttft", bare_unit="second")
        tpot = parse_quantity(t["tpot"], Kind.TIME, f"{field}.tpot", bare_unit="second")
        out.append((t["name"], ttft, tpot))
    if len({n for n, _, _ in out}) != len(out):
        raise InputError(f"{where}: slo", short([n for n, _, _ in out]), "tiers with different names")
    return out


def _options(where: str, raw: Any, catalog: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InputError(f"{where}: options", short(raw), "a table")
    unknown = sorted(set(raw) - _OPTIONS)
    if unknown:
        raise InputError(
            f"{where}: options.{unknown[0]}", short(raw[unknown[0]]), f"one of {sorted(_OPTIONS)}"
        )
    out: dict[str, Any] = {}
    for key, lookup in (("link", catalog.link), ("node", catalog.node), ("decode_gpu", catalog.gpu)):
        if key in raw:
            _names(where, {f"options.{key}": [raw[key]]}, f"options.{key}", lookup)
            out[key] = raw[key]
    for key, field in (("tp", "tp_options"), ("chunks", "chunk_options")):
        if key in raw:
            v = raw[key]
            if (
                not isinstance(v, list)
                or not v
                or len(v) > MAX_OPTIONS
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in v)
            ):
                raise InputError(
                    f"{where}: options.{key}", short(v), f"a list of 1 to {MAX_OPTIONS} whole numbers"
                )
            out[field] = tuple(v)
    for key in ("engine", "dtype"):
        if key in raw:
            if not isinstance(raw[key], str) or not raw[key].strip():
                raise InputError(f"{where}: options.{key}", short(raw[key]), "a name")
            out[key] = raw[key]
    for key in ("samples", "max_gpus"):
        if key in raw:
            out[key] = raw[key]  # range-checked by the planner, with the field named
    return out


def parse_grid(text: str, source: str = "grid") -> Grid:
    """A :class:`Grid` from TOML text (see the module doc for the format); errors name the field."""
    if len(text) > MAX_PROFILE_BYTES:
        raise InputError(source, f"{len(text):,} characters", f"a grid of at most {MAX_PROFILE_BYTES:,}")
    check_depth(text, source)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InputError(source, "(file)", f"valid TOML ({short(str(err))})") from None
    unknown = sorted(set(data) - _TOP)
    if unknown:
        raise InputError(f"{source}: {unknown[0]}", short(data[unknown[0]]), f"one of {sorted(_TOP)}")
    catalog = load_catalog()
    models = _names(source, data, "models", get_model)
    gpus = _names(source, data, "gpus", catalog.gpu)
    workloads = _names(source, data, "workloads", get_workload)
    slos = _slos(source, data)
    sizes = _sizes(source, data)
    n = len(models) * len(gpus) * len(workloads) * len(slos) * len(sizes)
    if n > MAX_SWEEP_SCENARIOS:
        raise InputError(
            source, f"{n:,} scenarios", f"at most {MAX_SWEEP_SCENARIOS:,} (model.limits.MAX_SWEEP_SCENARIOS)"
        )
    options = _options(source, data.get("options"), catalog)
    scenarios = tuple(
        GridScenario(m, g, w, s[0], s[1], s[2], b, r)
        for m, g, w, s, (b, r) in itertools.product(models, gpus, workloads, slos, sizes)
    )
    return Grid(scenarios, tuple(sorted(options.items())), source)


def load_grid(path: str | Path) -> Grid:
    """Read and check a grid file."""
    p = Path(path)
    if not is_file(p):
        raise InputError("grid", short(str(path)), "an existing grid file (TOML)")
    check_file_size(p, p.name, MAX_PROFILE_BYTES)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(p.name, "(file)", "UTF-8 TOML text") from None
    return parse_grid(text, p.name)
