"""The layers of shared/DESIGN.md hold: each subpackage of ``model`` imports only layers below it.

The order (lowest first) is in :data:`LAYERS`; ``model.symbolic`` sits below the planner because
the verdict's closed-form break-even comes from it (docs/architecture.md). Every ``import`` in
every module is parsed (including imports inside functions, which are how heavy layers load
lazily); an import of a higher layer, or a cycle between modules, fails the test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "model"
LAYERS = [
    ("errors", "units", "scalars", "limits"),
    ("hardware",),
    ("llm",),
    ("physics",),
    ("workload",),
    ("queueing",),
    ("serving",),
    ("symbolic",),
    ("planner",),
    ("recipes",),
    ("sim",),
    ("calibrate",),
    ("fleet",),
    ("cli", "__main__"),
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, int]]:
    """(imported model module, line) for every import statement in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.startswith("model")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "model":
                found += [(f"model.{a.name}", node.lineno) for a in node.names]
            elif node.module.startswith("model."):
                found.append((node.module, node.lineno))
    return found


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def test_every_module_belongs_to_a_layer() -> None:
    unknown = {m for m in MODULES if _layer(m) is not None and _layer(m) not in RANK}
    assert not unknown, f"modules outside the layer table: {sorted(unknown)}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "model"))
def test_imports_only_lower_layers(module: str) -> None:
    own = RANK[_layer(module)]
    for target, line in _imports(MODULES[module]):
        layer = _layer(target)
        if layer is None:
            raise AssertionError(f"{module}:{line} imports the package root 'model' (import the module)")
        assert layer in RANK, f"{module}:{line} imports unknown layer {target}"
        assert RANK[layer] <= own, (
            f"{module}:{line} imports {target}: layer {layer!r} is above {_layer(module)!r}"
        )


def test_no_import_cycles() -> None:
    graph = {m: {t for t, _ in _imports(p) if t in MODULES} for m, p in MODULES.items() if m != "model"}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                cycle = [*path[path.index(t) :], t]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_the_checker_catches_a_violation(tmp_path: Path) -> None:
    """The test can fail: a physics module importing the planner is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("from model.planner.plan import plan\n")
    ((target, _),) = _imports(bad)
    assert RANK[_layer(target)] > RANK["physics"]


MAX_MODULE_LINES = 500
MAX_PUBLIC_PARAMETERS = 8


def test_no_module_over_the_size_limit() -> None:
    """Small modules with one job each (issue 12): none over ~500 lines."""
    big = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not big, f"modules over {MAX_MODULE_LINES} lines: {big}"


def test_public_functions_take_a_dataclass_beyond_eight_parameters() -> None:
    """No public function (model.__all__) with more than ~8 parameters: larger inputs travel as one
    frozen dataclass (PlanRequest, EstimateRequest, SLO, configs); dataclasses themselves are exempt."""
    import dataclasses
    import inspect

    import model

    wide = {}
    for name in model.__all__:
        obj = getattr(model, name)
        if inspect.isclass(obj) or not callable(obj):
            continue
        fn = inspect.unwrap(obj)
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        ]
        if len(params) > MAX_PUBLIC_PARAMETERS:
            wide[name] = len(params)
    assert not wide, f"public functions with more than {MAX_PUBLIC_PARAMETERS} parameters: {wide}"
    assert dataclasses.is_dataclass(model.PlanRequest) and dataclasses.is_dataclass(model.EstimateRequest)
