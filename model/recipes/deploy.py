"""``model.deploy(plan)``: recipes for the recommended configuration and each style's best, for each
chosen engine at its chosen version; :meth:`DeploymentRecipes.write` puts them in a directory."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from model.errors import InputError, short
from model.planner.types import Plan
from model.recipes import dynamo, llmd, sglang, trtllm, vllm
from model.recipes.catalog import DEFAULT_VERSIONS, ENGINES, check_engine, check_yaml, engine_data
from model.recipes.recipe import Recipe, RecipeFile
from model.recipes.target import targets

RENDERERS = {
    "vllm": vllm.render,
    "sglang": sglang.render,
    "trtllm": trtllm.render,
    "dynamo": dynamo.render,
    "llm-d": llmd.render,
}


@dataclass(frozen=True, eq=False)
class DeploymentRecipes:
    """Every recipe of one plan: ``recipes`` in target order (recommended first), then engine order."""

    recipes: tuple[Recipe, ...]
    versions: Mapping[str, str]

    def files(self) -> dict[str, str]:
        """Relative path -> text of every file, with the top-level README first."""
        out = {"README.md": self._index()}
        for r in self.recipes:
            out |= {f.path: f.text for f in r.files}
        return out

    def yaml_files(self) -> tuple[RecipeFile, ...]:
        """The YAML files with the schema each satisfies."""
        return tuple(f for r in self.recipes for f in r.files if f.schema is not None)

    def _index(self) -> str:
        lines = ["# Deployment recipes from pdplan", ""]
        targets_seen: dict[str, Recipe] = {}
        for r in self.recipes:
            targets_seen.setdefault(r.target, r)
        for name, r in targets_seen.items():
            lines.append(f"- `{name}/`: {r.style}, {r.label}")
        lines += ["", "Engine versions targeted:"]
        lines += [f"- {e} {v}" for e, v in self.versions.items()]
        lines += ["", "Each `<target>/<engine>/README.md` has the node placement and the launch order."]
        return "\n".join(lines) + "\n"

    def zip_bytes(self) -> bytes:
        """All files in one zip archive (the app's download)."""
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for path, text in self.files().items():
                info = zipfile.ZipInfo(f"pdplan-recipes/{path}", date_time=(2025, 1, 1, 0, 0, 0))
                info.external_attr = (0o755 if path.endswith(".sh") else 0o644) << 16
                z.writestr(info, text)
        return buf.getvalue()

    def write(self, out_dir: str | Path, *, force: bool = False) -> tuple[Path, ...]:
        """Write every file under ``out_dir``; refuses to replace an existing file unless ``force``
        (checked for every file before any is written) and to write inside the pdplan package."""
        if not isinstance(out_dir, str | Path) or not str(out_dir).strip():
            raise InputError("out_dir", short(out_dir), "a directory path")
        try:
            root = Path(out_dir).expanduser().resolve()
        except (RuntimeError, OSError, ValueError) as err:
            allowed = f"a directory path ({short(str(err))})"
            raise InputError("out_dir", short(str(out_dir)), allowed) from None
        package = Path(__file__).resolve().parents[2]
        for pkg in ("model", "hardware_profiles"):
            if root == package / pkg or (package / pkg) in root.parents:
                raise InputError("out_dir", str(out_dir), f"a directory outside the pdplan package ({pkg})")
        files = {root / p: t for p, t in self.files().items()}
        existing = [p for p in files if p.exists()]
        if existing and not force:
            allowed = f"a directory without recipes yet ({existing[0]} exists; use --force)"
            raise InputError("out_dir", str(out_dir), allowed)
        try:
            for path, text in files.items():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
                if path.suffix == ".sh":
                    path.chmod(0o755)
        except OSError as err:
            raise InputError("out_dir", str(out_dir), f"a writable directory ({short(str(err))})") from None
        return tuple(files)


def _engines(engines: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(engines, str):
        engines = ENGINES if engines == "all" else (engines,)
    if not isinstance(engines, Sequence) or not engines:
        raise InputError("engines", engines, f"'all' or a list from {', '.join(ENGINES)}")
    return tuple(dict.fromkeys(check_engine(e) for e in engines))


def deploy(
    plan: Plan,
    engines: str | Sequence[str] = "all",
    versions: Mapping[str, str] | None = None,
    model_path: str | None = None,
) -> DeploymentRecipes:
    """Deployment recipes for ``plan``: the recommended configuration and each style's best, for
    each engine of ``engines`` ("all" or names from vllm, sglang, trtllm, dynamo, llm-d) at the
    version in ``versions`` (engine -> version; default DEFAULT_VERSIONS; an unknown version is an
    error naming the known ones). ``model_path`` overrides the checkpoint (default: the catalog
    entry's Hugging Face repository). Returns a :class:`DeploymentRecipes`; ``.write(dir)`` saves it."""
    chosen = _engines(engines)
    if versions is not None and not isinstance(versions, Mapping):
        allowed = "a mapping engine -> version, e.g. {'vllm': '0.12'}"
        raise InputError("versions", type(versions).__name__, allowed)
    versions = dict(versions or {})
    for e in versions:
        check_engine(e)
    data = {e: engine_data(e, versions.get(e)) for e in chosen}
    recipes = tuple(RENDERERS[e](t, data[e]) for t in targets(plan, model_path) for e in chosen)
    for r in recipes:
        for f in r.files:
            if f.schema is not None:
                check_yaml(f.path, f.text, f.schema)
    return DeploymentRecipes(recipes, {e: data[e].version for e in chosen})


__all__ = ["DEFAULT_VERSIONS", "DeploymentRecipes", "deploy"]
