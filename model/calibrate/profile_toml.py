"""Writing a calibrated GPU profile: the base profile's TOML with the fitted [efficiency] values and
comments recording the data they came from."""

from __future__ import annotations

import datetime as _dt
import json
import math
import tomllib
from pathlib import Path
from typing import Any

from model.calibrate.results import CalibrationResult, GroupFit
from model.errors import InputError, PdplanError, short
from model.hardware.gpus import gpu_from_toml

__all__ = ["calibrated_profile_toml", "write_profiles"]


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise PdplanError(f"calibrate: cannot write {type(v).__name__} to TOML")


def _emit_toml(data: dict[str, Any]) -> str:
    """The GPU profile shape: top-level scalars and lists, then one level of tables of inline tables."""
    lines = []
    tables = {}
    for k, v in data.items():
        if isinstance(v, dict) and not ("value" in v and "source" in v):
            tables[k] = v
        else:
            lines.append(f"{k} = {_toml_value(v)}")
    for name, table in tables.items():
        lines.append("")
        lines.append(f"[{name}]")
        lines.extend(f"{k} = {_toml_value(v)}" for k, v in table.items())
    return "\n".join(lines) + "\n"


def _fmt_pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x * 100:.1f}%"


def _comment(text: str) -> str:
    return "# " + " ".join(text.split())


def calibrated_profile_toml(fit: GroupFit, *, when: _dt.datetime | None = None) -> str:
    """The calibrated GPU profile: the base profile's data with the [efficiency] values replaced,
    ``name`` = ``fit.profile_name``, no aliases, TOML comments recording the data it came from.
    Validated with :func:`model.hardware.gpus.gpu_from_toml` before it is returned."""
    base_path = Path(fit.base_profile_path)
    try:
        data = tomllib.loads(base_path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise PdplanError(f"calibrate: cannot read the base profile {base_path}: {err}") from None
    data["name"] = fit.profile_name
    data["full_name"] = f"{data.get('full_name', fit.gpu)} (calibrated, {fit.engine})"
    data["aliases"] = []
    eff = dict(data.get("efficiency", {}))
    all_err = fit.error_row("all")
    files = ", ".join(fit.files) or "measurements"
    summary = (
        f"calibrated by pdplan calibrate from {files}, {fit.n_rows} rows, "
        f"fit RMSE {_fmt_pct(all_err.rmse_after)} (before {_fmt_pct(all_err.rmse_before)}, "
        f"leave-one-out {_fmt_pct(all_err.rmse_loo)}); engine {fit.engine}"
    )
    keys = {"prefill_mfu": "prefill_mfu", "decode_mbu": "decode_mbu", "step_overhead_s": "step_overhead"}
    for pname, key in keys.items():
        p = fit.parameter(pname)
        old = eff.get(key, {})
        old_src = old.get("source", "") if isinstance(old, dict) else ""
        if p.fitted:
            se = f" +- {p.std_error:.2g}" if math.isfinite(p.std_error) else ""
            value: Any = f"{p.value * 1e3:.4g} ms" if pname == "step_overhead_s" else round(p.value, 4)
            unit = " s" if pname == "step_overhead_s" else ""
            src = f"{summary}; fitted {p.value:.4g}{unit}{se}, base {p.base:.4g}{unit}"
        else:
            value = old.get("value") if isinstance(old, dict) else p.base
            src = f"not calibrated (no measurement constrains it), kept from {fit.gpu}: {old_src}"
        eff[key] = {"value": value, "source": src}
    data["efficiency"] = eff
    stamp = (when or _dt.datetime.now(_dt.UTC)).strftime("%Y-%m-%d %H:%M UTC")
    head = [
        _comment(f"{fit.profile_name}: {fit.gpu} calibrated by `pdplan calibrate` on {stamp}."),
        _comment(f"Base profile: {fit.gpu} ({base_path.name}); engine label: {fit.engine}; data: {files}."),
        _comment(
            "Only [efficiency] differs from the base profile. Select it with --profile-dir DIR "
            f"--gpu {fit.profile_name} (or profile_dirs=DIR in Python)."
        ),
    ]
    for p in fit.parameters:
        if p.fitted:
            head.append(
                _comment(
                    f"{p.name}: {p.base:.4g} -> {p.value:.4g}"
                    + (f" +- {p.std_error:.2g}" if math.isfinite(p.std_error) else "")
                    + (
                        f" (TP link {fit.tp_link}; not stored in a GPU profile)"
                        if p.name == "comm_efficiency"
                        else " (engine profile [overheads]; not stored in a GPU profile)"
                        if p.name in ("kernel_s", "per_sequence_s", "request_s")
                        else " (model.physics.deployment constant; not stored in a GPU profile)"
                        if p.name in ("decode_kv_efficiency", "decode_attention_fixed_tokens")
                        else " (engine profile [gemm] low_precision_ratio; not stored in a GPU profile)"
                        if p.name == "low_precision_gemm_ratio"
                        else ""
                    )
                )
            )
    head.append("# Errors (relative; RMSE before -> after, leave-one-out):")
    for e in fit.errors:
        head.append(
            _comment(
                f"  {e.metric} ({e.n}): {_fmt_pct(e.rmse_before)} -> {_fmt_pct(e.rmse_after)}, "
                f"LOO {_fmt_pct(e.rmse_loo)}"
            )
        )
    head.append("# Rows (source | model | tp | dtype | isl | osl | load | batch | measured):")
    for m in fit.rows:
        measured = ", ".join(
            f"{name} {getattr(m, attr) * scale:.4g}{unit}"
            for name, attr, scale, unit in (
                ("prefill", "prefill_s", 1e3, " ms"),
                ("ttft", "ttft_s", 1e3, " ms"),
                ("tpot", "tpot_s", 1e3, " ms"),
                ("throughput", "output_tokens_per_s", 1.0, " tok/s"),
            )
            if getattr(m, attr) is not None
        )
        head.append(
            _comment(
                f"  {m.source} | {m.model} | {m.tp} | {m.dtype} | {m.isl:.0f} | {m.osl:.0f} | {m.load}"
                f" | {m.batch:.3g} | {measured}"
            )
        )
    for x in fit.excluded:
        head.append(_comment(f"  not used: {x.source} {x.metric}: {x.reason}"))
    text = "\n".join(head) + "\n" + _emit_toml(data)
    gpu_from_toml(Path(f"{fit.profile_name}.toml"), text)  # raises if the schema would reject it
    return text


def _inside(path: Path, package: str) -> bool:
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return False
    for loc in spec.submodule_search_locations:
        root = Path(loc).resolve()
        if path == root or root in path.parents:
            return True
    return False


def write_profiles(
    result: CalibrationResult, out_dir: str | Path, *, force: bool = False
) -> tuple[Path, ...]:
    """Write each group's calibrated profile to ``out_dir/gpus/<profile_name>.toml``; returns the paths.

    ``out_dir`` is then usable as ``--profile-dir`` / ``profile_dirs``. Refuses to write inside the
    pdplan package (its built-in profiles are not to be edited by a tool), and refuses to replace an
    existing file unless ``force`` (checked for every file before any is written).
    """
    if not isinstance(result, CalibrationResult):
        raise InputError("result", type(result).__name__, "a CalibrationResult (from calibrate)")
    if not isinstance(out_dir, str | Path) or not str(out_dir).strip():
        raise InputError("out_dir", short(out_dir), "a directory path")
    try:
        root = Path(out_dir).expanduser().resolve()
    except (RuntimeError, OSError, ValueError) as err:  # '~nouser/x': no such user's home
        raise InputError("out_dir", short(str(out_dir)), f"a directory path ({short(str(err))})") from None
    for pkg in ("hardware_profiles", "model"):
        if _inside(root, pkg):
            raise InputError("out_dir", str(out_dir), f"a directory outside the pdplan package ({pkg})")
    gpus = root / "gpus"
    try:
        gpus.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError("out_dir", str(out_dir), f"a writable directory ({err})") from None
    paths = [gpus / f"{g.profile_name}.toml" for g in result.groups]
    existing = [p for p in paths if p.exists()]
    if existing and not force:
        raise InputError(
            "out_dir",
            short(str(existing[0])),
            "a file that does not exist yet (pass --force / force=True to replace it)",
        )
    for g, path in zip(result.groups, paths, strict=True):
        path.write_text(calibrated_profile_toml(g), encoding="utf-8")
    return tuple(paths)
