"""The host's part of a run with lanes (`abir.vm.lanes`): what a call makes once per program and
call shape, and what it skips when no member's error flag is set."""

from __future__ import annotations

import numpy as np
import pytest

import abir
import abir.vm.lanes
from abir.errors import StackOverflowError


def collatz(n):
    steps = n - n
    while n > 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps = steps + 1
    return steps


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def test_a_programs_lanes_layout_is_made_once_per_call_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    made = []
    layout = abir.vm.lanes.lane_layout
    monkeypatch.setattr(abir.vm.lanes, "lane_layout", lambda *args: made.append(args[2]) or layout(*args))
    batched = abir.Context().batch()(collatz)
    backend = abir.NumpyBackend()
    xs = np.arange(1, 40, dtype=np.int64)
    want = batched(xs, dry_run=True)
    for lanes in (4, 4, 8, 4):
        np.testing.assert_array_equal(np.asarray(batched(xs, backend=backend, lanes=lanes)), want)
    assert made == [4, 8]


def test_the_members_error_check_runs_only_when_a_flag_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    checked = []
    check = abir.vm.lanes.lane_member_errors
    monkeypatch.setattr(abir.vm.lanes, "lane_member_errors", lambda *args: checked.append(1) or check(*args))
    batched = abir.Context().batch()(fib)
    xs = np.arange(0, 20, dtype=np.int64)
    np.testing.assert_array_equal(np.asarray(batched(xs, backend="numpy", max_stack_depth=32, lanes=4)), batched(xs, dry_run=True))
    assert checked == []
    with pytest.raises(StackOverflowError):
        batched(xs, backend="numpy", max_stack_depth=8, lanes=4)
    assert checked == [1]
