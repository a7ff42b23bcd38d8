"""Build the API reference of the importable cost model (``model.__all__``) with pdoc.

``make docs`` runs ``python docs/build_api.py build/api``; tests/test_api_docs.py calls :func:`build`
in-process into a temporary directory and fails on any warning or undocumented public name.

The public names of ``model`` load lazily (PEP 562 ``__getattr__`` over ``model._EXPORTS``), so
:func:`build` resolves every name in ``model.__all__`` first; pdoc then documents each one on the
``model`` page, where it is exported.
"""

from __future__ import annotations

import functools
import inspect
import sys
import warnings
from pathlib import Path


def public_objects() -> dict[str, object]:
    """Every name in ``model.__all__``, imported (this forces the lazy exports)."""
    import model

    return {name: getattr(model, name) for name in model.__all__}


def undocumented() -> list[str]:
    """Public names without a docstring of their own: every name in ``model.__all__``, and every public
    method and property of the exported classes (inherited ones from outside pdplan excepted)."""
    missing = []
    for name, obj in public_objects().items():
        if not (inspect.getdoc(obj) or "").strip() or (
            inspect.isclass(obj) and obj.__doc__ and obj.__doc__.startswith(f"{obj.__name__}(")
        ):
            missing.append(name)  # (a dataclass without a docstring gets an auto "Name(field, ...)")
        if not inspect.isclass(obj):
            continue
        for attr, value in vars(obj).items():
            if attr.startswith("_"):
                continue
            if isinstance(value, property):
                func = value.fget
            elif isinstance(value, functools.cached_property):
                func = value.func
            elif isinstance(value, staticmethod | classmethod):
                func = value.__func__
            elif inspect.isfunction(value):
                func = value
            else:
                continue  # a class attribute / dataclass field: described in the class docstring
            if not (func.__doc__ or "").strip():
                missing.append(f"{name}.{attr}")
    return missing


def build(out_dir: str | Path) -> tuple[list[Path], list[str]]:
    """Render the reference of ``model`` into ``out_dir``; returns (HTML files, warning messages)."""
    import pdoc

    out = Path(out_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        public_objects()
        pdoc.render.configure(docformat="restructuredtext", search=True, show_source=True)
        pdoc.pdoc("model", output_directory=out)
    return sorted(out.rglob("*.html")), [f"{w.category.__name__}: {w.message}" for w in caught]


def main(argv: list[str]) -> int:
    out = Path(argv[1] if len(argv) > 1 else "build/api")
    files, warned = build(out)
    for w in warned:
        print("warning:", w, file=sys.stderr)
    missing = undocumented()
    for name in missing:
        print("undocumented:", name, file=sys.stderr)
    print(f"API reference: {len(files)} pages in {out}/ (open {out}/model.html)")
    return 1 if warned or missing else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    raise SystemExit(main(sys.argv))
