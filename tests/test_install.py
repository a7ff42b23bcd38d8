"""Profiles and the model catalog load after a plain (non-editable) `pip install .`, from elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_non_editable_install_loads_data(tmp_path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for name in ("model", "hardware_profiles"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(src)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    shutil.rmtree(src)  # nothing may be read from the source tree
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = (
        "import model, model.hardware.catalog as p, model.llm.catalog as c;"
        f"assert str(model.__file__).startswith({str(target)!r}), model.__file__;"
        "cat = p.load_catalog();"
        "u = p.unique;"
        "import model.recipes.catalog as r;"
        "assert all(r.engine_data(e) for e in r.ENGINES) and r.load_schema('llm-d-0.4-values');"
        "import model.queueing.own_step as o;"
        "assert o.chain_factor([2], [0.3], [2.0], [1.0]).shape == (1,);"
        "print(len(u(cat.gpus)), len(u(cat.links)), len(c.list_models()), len(u(cat.engines)))"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=elsewhere,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    gpus, links, models, engines = (int(x) for x in out.stdout.split())
    assert gpus >= 13 and links >= 15 and models >= 19 and engines >= 3
