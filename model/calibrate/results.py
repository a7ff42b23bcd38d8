"""Results of ``pdplan calibrate``: per-parameter fits, residuals, error summaries, per-group fits."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from model.calibrate.measurements import Measurement
from model.errors import InputError

__all__ = ["CalibrationResult", "ErrorRow", "Excluded", "GroupFit", "ParameterFit", "Residual"]

# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class ParameterFit:
    """One efficiency parameter: profile value before, fitted value, its standard error (nan when
    not identifiable), whether it was fitted, and whether the fit stopped on a bound."""

    name: str
    base: float
    value: float
    std_error: float
    fitted: bool
    at_bound: bool
    note: str = ""


@dataclass(frozen=True)
class Residual:
    """One measured quantity: the measurement and the predictions before, after and leave-one-out.

    ``metric`` is prefill / ttft / tpot (seconds) or throughput (output tokens/s).
    """

    source: str
    metric: str
    measured: float
    before: float
    after: float
    loo: float

    def error(self, which: str) -> float:
        """Relative error predicted / measured - 1 of ``which`` (before / after / loo)."""
        return float(getattr(self, which)) / self.measured - 1.0


@dataclass(frozen=True)
class ErrorRow:
    """Root-mean-square and mean absolute relative errors of one metric (fractions, nan if none)."""

    metric: str
    n: int
    rmse_before: float
    rmse_after: float
    rmse_loo: float
    mape_before: float
    mape_after: float
    mape_loo: float


@dataclass(frozen=True)
class Excluded:
    """A measured value left out of the fit, and why."""

    source: str
    metric: str
    reason: str


@dataclass(frozen=True)
class GroupFit:
    """The calibration of one GPU kind under one engine label."""

    gpu: str
    engine: str
    profile_name: str
    base_profile_path: str
    files: tuple[str, ...]
    n_rows: int
    parameters: tuple[ParameterFit, ...]
    residuals: tuple[Residual, ...]
    errors: tuple[ErrorRow, ...]
    excluded: tuple[Excluded, ...]
    warnings: tuple[str, ...]
    rows: tuple[Measurement, ...]
    tp_link: str = ""

    def parameter(self, name: str) -> ParameterFit:
        for p in self.parameters:
            if p.name == name:
                return p
        raise InputError("parameter", name, ", ".join(p.name for p in self.parameters))

    def error_row(self, metric: str = "all") -> ErrorRow:
        for e in self.errors:
            if e.metric == metric:
                return e
        raise InputError("metric", metric, ", ".join(e.metric for e in self.errors))

    @property
    def values(self) -> dict[str, float]:
        """Fitted (or kept) value of every parameter."""
        return {p.name: p.value for p in self.parameters}


@dataclass(frozen=True)
class CalibrationResult:
    """Every (GPU, engine) group's fit. ``to_dict`` gives the JSON the CLI prints."""

    groups: tuple[GroupFit, ...]

    def group(self, gpu: str | None = None, engine: str | None = None) -> GroupFit:
        """The one group matching ``gpu`` / ``engine`` (either may be None when unambiguous)."""
        hits = [
            g
            for g in self.groups
            if (gpu is None or g.gpu == gpu.lower() or g.profile_name == gpu.lower())
            and (engine is None or g.engine == engine)
        ]
        if len(hits) != 1:
            names = ", ".join(f"{g.gpu}/{g.engine}" for g in self.groups)
            raise InputError("group", f"{gpu}/{engine}", f"exactly one of: {names}")
        return hits[0]

    def to_dict(self) -> dict[str, Any]:
        out = []
        for g in self.groups:
            out.append(
                {
                    "gpu": g.gpu,
                    "engine": g.engine,
                    "profile_name": g.profile_name,
                    "files": list(g.files),
                    "n_rows": g.n_rows,
                    "tp_link": g.tp_link,
                    "parameters": [dataclasses.asdict(p) for p in g.parameters],
                    "errors": [dataclasses.asdict(e) for e in g.errors],
                    "residuals": [
                        {
                            **dataclasses.asdict(r),
                            "error_before": r.error("before"),
                            "error_after": r.error("after"),
                            "error_loo": r.error("loo"),
                        }
                        for r in g.residuals
                    ],
                    "excluded": [dataclasses.asdict(x) for x in g.excluded],
                    "warnings": list(g.warnings),
                }
            )
        return {"groups": out}
