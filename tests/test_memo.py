"""model.queueing.memo: value-keyed memos return the first result for equal inputs, read-only."""

from __future__ import annotations

import numpy as np
import pytest

from model.queueing.memo import Memo, clear_memos, value_key


def test_equal_values_share_a_result_and_others_do_not() -> None:
    memo = Memo()
    calls = []

    def solve(x: np.ndarray) -> np.ndarray:
        calls.append(1)
        return x * 2.0

    a = np.array([1.0, 2.0])
    first = memo.get(value_key(a), lambda: solve(a))
    again = memo.get(value_key(np.array([1.0, 2.0])), lambda: solve(a))
    assert again is first and len(calls) == 1
    other = memo.get(value_key(np.array([1.0, 2.0 + 2.0**-51])), lambda: solve(a))  # one ulp away
    assert other is not first and len(calls) == 2
    assert value_key(np.zeros((2, 3))) != value_key(np.zeros((3, 2)))  # same bytes, other shape
    with pytest.raises(ValueError):
        first[0] = 5.0  # read-only: a caller cannot change a stored result
    clear_memos()
    memo.get(value_key(a), lambda: solve(a))
    assert len(calls) == 3


def test_memoized_keys_on_every_positional_value_and_tuple_structure() -> None:
    from model.queueing.memo import memoized

    calls = []

    @memoized
    def solve(x: np.ndarray, pair: tuple[np.ndarray, ...]) -> np.ndarray:
        calls.append(1)
        return x + sum(pair)

    a, b = np.array([1.0]), np.array([2.0])
    assert solve(a, (b,))[0] == 3.0 and solve(a.copy(), (b.copy(),))[0] == 3.0
    assert len(calls) == 1  # equal values: the stored result
    assert solve(a, (b, b))[0] == 5.0 and len(calls) == 2  # another tuple: another key
    assert solve(b, (a,))[0] == 3.0 and len(calls) == 3  # same flat bytes reordered: another key
    clear_memos()
    solve(a, (b,))
    assert len(calls) == 4
