"""Value-keyed memos for the planner's repeated solves (a speed device: no value changes).

The goodput search and the verdict's threshold searches ask again for pools they have already
solved (the same rates, servers and step laws); a :class:`Memo` returns the earlier result, read-only,
when every input array has the same float64 values (shape and bytes). :func:`clear_memos` forgets
them all (model.serving.phase_tables.clear_table_caches: benchmarks time the cold path with it)."""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

MEMO_BYTES = 32 * 2**20  # the results' arrays each memo keeps at most (oldest forgotten first)


def value_key(*arrays: Any) -> tuple:
    """A memo key: the shapes of ``arrays`` (arrays or scalars) and a 128-bit BLAKE2b digest of their
    exact float64 bytes (a collision, which would return another pool's result, has probability
    about 2^-128 per pair)."""
    digest = hashlib.blake2b(digest_size=16)
    shapes = []
    for a in arrays:
        v = np.ascontiguousarray(a, dtype=float)
        shapes.append(v.shape)
        digest.update(v.tobytes())
    return (tuple(shapes), digest.digest())


class Memo:
    """A dict from :func:`value_key` keys to results, whose arrays are made read-only, bounded by
    MEMO_BYTES of arrays."""

    def __init__(self) -> None:
        self._store: dict[tuple, tuple[Any, int]] = {}
        self._bytes = 0
        self._lock = threading.Lock()  # the web app plans in several script threads at once
        _ALL.append(self)

    def get(self, key: tuple, solve: Callable[[], Any]) -> Any:
        """The result stored under ``key``, else ``solve()`` stored (its arrays frozen) and returned."""
        hit = self._store.get(key)
        if hit is not None:
            return hit[0]
        result = solve()
        values = (
            [result] if isinstance(result, np.ndarray) else list(getattr(result, "__dict__", {}).values())
        )
        size = 0
        for value in values:
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
                size += value.nbytes
        with self._lock:
            while self._store and self._bytes + size > MEMO_BYTES:
                self._bytes -= self._store.pop(next(iter(self._store)))[1]  # the oldest first
            if key not in self._store:
                self._store[key] = (result, size)
                self._bytes += size
        return result

    def clear(self) -> None:
        """Forget every result."""
        with self._lock:
            self._store.clear()
            self._bytes = 0


_ALL: list[Memo] = []


def clear_memos() -> None:
    """Forget the results of every :class:`Memo`."""
    for memo in _ALL:
        memo.clear()


def memoized(solve: Callable[..., Any]) -> Callable[..., Any]:
    """``solve`` memoized on the values of its positional arguments (arrays, scalars, or tuples of
    them, flattened into one :func:`value_key`) in a :class:`Memo` of its own."""
    memo = Memo()

    @functools.wraps(solve)
    def wrapper(*args: Any) -> Any:
        flat = [a for arg in args for a in (arg if isinstance(arg, tuple) else (arg,))]
        key = (tuple(len(arg) if isinstance(arg, tuple) else -1 for arg in args), value_key(*flat))
        return memo.get(key, lambda: solve(*args))

    return wrapper
