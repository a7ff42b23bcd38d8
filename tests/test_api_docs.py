"""The API reference builds (pdoc, in-process) without warnings, and every public name is documented.

``make docs`` builds the same reference into build/api/ with docs/build_api.py.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("pdoc", reason="pdoc is in the dev extra (pip install -e '.[dev]')")

BUILD_API = Path(__file__).resolve().parents[1] / "docs" / "build_api.py"

# Properties of model.Deployment without a docstring yet: model/physics/roofline.py is being split
# in parallel (issue 12), so its docstrings are added there. The test fails when one of these gains
# a docstring (then drop it here) and for any other undocumented name.
PENDING = {
    "Deployment.n_gpus",
    "Deployment.kv_dtype_resolved",
    "Deployment.mfu",
    "Deployment.mbu",
    "Deployment.overhead_s",
    "Deployment.peak_flops_per_s",
    "Deployment.tp_link_resolved",
    "Deployment.pp_link_resolved",
}


def _builder():
    spec = importlib.util.spec_from_file_location("build_api", BUILD_API)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_builds_without_warnings(tmp_path: Path) -> None:
    import model

    files, warned = _builder().build(tmp_path)
    assert not warned, "pdoc warnings:\n" + "\n".join(warned)
    page = tmp_path / "model.html"
    assert page in files
    html = page.read_text(encoding="utf-8")
    for name in model.__all__:  # every lazily exported name is on the page
        assert f'id="{name}"' in html, f"{name} missing from the API reference"


def test_every_public_name_has_a_docstring() -> None:
    missing = set(_builder().undocumented())
    assert missing <= PENDING, f"undocumented public names: {sorted(missing - PENDING)}"
    assert missing >= PENDING, f"now documented, drop from PENDING: {sorted(PENDING - missing)}"


def test_the_check_finds_a_missing_docstring(monkeypatch: pytest.MonkeyPatch) -> None:
    """The docstring check can fail: a public function without a docstring is reported."""
    import model

    def bare(x: float) -> float:
        return x

    monkeypatch.setattr(model, "__all__", [*model.__all__, "bare"])
    monkeypatch.setattr(model, "bare", bare, raising=False)
    assert "bare" in _builder().undocumented()
