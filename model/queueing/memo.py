"""Value-keyed memos for the planner's repeated solves (a speed device: no value changes).

The goodput search and the verdict's threshold searches ask again for pools they have already
solved (the same rates, servers and step laws); a :class:`Memo` returns the earlier result, read-only,
when every input array has the same float64 values (shape and bytes). :func:`clear_memos` forgets
them all (model.serving.phase_tables.clear_table_caches: benchmarks time the cold path with it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

MEMO_SIZE = 256  # results remembered per memo (oldest forgotten first)


def value_key(*arrays: Any) -> tuple:
    """A memo key: the exact float64 values (shape and bytes) of ``arrays`` (arrays or scalars)."""
    return tuple((v.shape, v.tobytes()) for v in (np.ascontiguousarray(a, dtype=float) for a in arrays))


class Memo:
    """A bounded dict from :func:`value_key` keys to results, whose arrays are made read-only."""

    def __init__(self) -> None:
        self._store: dict[tuple, Any] = {}
        _ALL.append(self)

    def get(self, key: tuple, solve: Callable[[], Any]) -> Any:
        """The result stored under ``key``, else ``solve()`` stored (its arrays frozen) and returned."""
        hit = self._store.get(key)
        if hit is None:
            hit = solve()
            values = [hit] if isinstance(hit, np.ndarray) else list(getattr(hit, "__dict__", {}).values())
            for value in values:
                if isinstance(value, np.ndarray):
                    value.flags.writeable = False
            if len(self._store) >= MEMO_SIZE:
                self._store.pop(next(iter(self._store)))  # the oldest first
            self._store[key] = hit
        return hit

    def clear(self) -> None:
        """Forget every result."""
        self._store.clear()


_ALL: list[Memo] = []


def clear_memos() -> None:
    """Forget the results of every :class:`Memo`."""
    for memo in _ALL:
        memo.clear()
