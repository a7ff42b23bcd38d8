"""Plain Python values out of scalar calls: a numpy scalar or 0-d array becomes float / int / bool / str.

The public API returns plain Python numbers and strings when it is called with scalars, and numpy
arrays when it is called with arrays (vectorised sweeps). The numeric code computes with numpy either
way; results pass through :func:`plain` (one value) or :func:`plain_fields` (a result dataclass) on
the way out, which leaves arrays of one or more dimensions untouched.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import numpy as np

__all__ = ["plain", "plain_fields"]

T = TypeVar("T")


def plain(value: Any) -> Any:
    """``value`` as a Python scalar if it is a numpy scalar or a 0-d array, else unchanged."""
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return value.item()
    return value


def plain_fields(obj: T) -> T:
    """A copy of the dataclass ``obj`` whose numpy-scalar and 0-d array fields are plain Python values
    (``dataclasses.replace``, so frozen dataclasses work); array fields stay arrays."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"plain_fields needs a dataclass instance, got {type(obj).__name__}")
    changes = {}
    for f in dataclasses.fields(obj):
        if not f.init:
            continue
        v = getattr(obj, f.name)
        p = plain(v)
        if p is not v:
            changes[f.name] = p
    return dataclasses.replace(obj, **changes) if changes else obj
