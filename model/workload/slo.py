"""Service-level objectives: the latency targets a plan or a simulation is judged against."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from model.errors import InputError


@dataclass(frozen=True)
class SLO:
    """Latency targets: TTFT and TPOT at a percentile, and the attainment target.

    Attainment is the fraction of requests meeting both targets (DistServe, sec. 2); a rate is
    within goodput when attainment >= ``attainment`` and the ``percentile`` TTFT and TPOT are within
    their targets.
    """

    ttft_s: float
    tpot_s: float
    percentile: float = 90.0
    attainment: float = 0.9

    def __post_init__(self) -> None:
        for name in ("ttft_s", "tpot_s"):
            value = getattr(self, name)
            if not (isinstance(value, numbers.Real) and math.isfinite(value) and 0 < value <= 3600):
                raise InputError(f"slo.{name}", value, "a time in (0, 3600] s (e.g. 0.5 for 500 ms)")
        if not (isinstance(self.percentile, numbers.Real) and 0 < self.percentile < 100):
            raise InputError("slo.percentile", self.percentile, "a percentile in (0, 100), e.g. 90")
        if not (isinstance(self.attainment, numbers.Real) and 0 < self.attainment <= 1):
            raise InputError("slo.attainment", self.attainment, "a fraction in (0, 1], e.g. 0.9")
