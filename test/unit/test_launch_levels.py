"""Runs on fewer rows that go down levels (`abir.backends.jax.one_kernel.row_levels`): once at
most a quarter of the rows a run moved its active members to are active, they move to a
quarter of those rows, within the same computation (`OneKernelWherePossible.on_levels`).

As in test_active_rows.py, the tests set the choice of rows themselves (`stage = "rows"`) and
check what must hold however fast each loop is: results equal to the per-member Python run,
also when a launch's iterations run out on any level.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_compaction import fib, guarded_tree  # on PYTHONPATH

import abir
from abir.backends import base
from abir.backends.jax import compaction
from abir.backends.jax import one_kernel as compilation

BATCH = 256


def graded(batch: int) -> np.ndarray:
    """Mostly short runs and a few dozen long ones of many lengths, so that the active members
    become fewer than each level's rows at different sweeps."""
    n = np.full(batch, 2)
    n[::5] = 6 + np.arange(len(n[::5])) % 12
    return n


def cases(batch: int) -> dict[str, tuple]:
    n = graded(batch)
    return {"fib": (fib, (n,)), "guarded_tree": (guarded_tree, (n, np.full(batch, 40)))}


def on_rows(fn, args, monkeypatch: pytest.MonkeyPatch, one_kernel: bool | None = None) -> abir.JaxBackend:
    """A backend whose runs of `fn` on `args` have compiled their loop over fewer rows and run it
    from now on, with levels of 64 and 16 rows (`LIVE_ROWS_MIN` lowered to 16)."""
    monkeypatch.setattr(compaction, "LIVE_ROWS_MIN", 16)
    gathered: list[int] = []
    gather_active = compaction.gather_active
    monkeypatch.setattr(compaction, "gather_active", lambda state, rows, *rest: (gathered.append(rows), gather_active(state, rows, *rest))[1])
    cache: dict = {}
    backend = abir.JaxBackend(code_cache=cache, one_kernel=one_kernel)
    fn(*args, backend=backend, max_stack_depth=20)
    ((_, loop),) = cache.values()
    (rows,) = loop.rows.values()
    assert rows.compiling is not None
    rows.compiling.join()
    assert rows.small is not None
    assert gathered == [64, 16]  # the loop over fewer rows goes down a level
    rows.compiling, rows.stage = None, "rows"
    small = rows.small

    def finishing(state: dict, limits) -> tuple:
        """`rows.small`, checked to leave every member in the program's tail (or halted) when
        its iterations did not run out: the members active on the last level finished there."""
        back, counts = small(state, limits)
        if int(counts[2]) < int(limits[0]):
            assert int(np.min(back["pc"])) >= loop.tail
        return back, counts

    rows.small = finishing
    return backend


def test_levels_are_quarters_down_to_live_rows_min() -> None:
    assert compilation.row_levels(64) == (64,)
    assert compilation.row_levels(256) == (256, 64)
    assert compilation.row_levels(1024) == (1024, 256, 64)
    assert compilation.row_levels(compaction.live_rows(1024)) == (256, 64)


@pytest.mark.parametrize("one_kernel", [None, pytest.param(True, marks=pytest.mark.full)], ids=["default", "one-kernel"])
@pytest.mark.parametrize("name", ["fib", "guarded_tree"])
def test_runs_down_the_levels_equal_python(monkeypatch: pytest.MonkeyPatch, name: str, one_kernel: bool | None) -> None:
    fn, args = cases(BATCH)[name]
    want = np.asarray(fn(*args, dry_run=True))
    backend = on_rows(fn, args, monkeypatch, one_kernel)
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(fn(*args, backend=backend, max_stack_depth=20)), want)


def test_short_launches_down_the_levels_equal_python(monkeypatch: pytest.MonkeyPatch) -> None:
    fn, args = cases(BATCH)["fib"]
    want = np.asarray(fn(*args, dry_run=True))
    backend = on_rows(fn, args, monkeypatch)
    for launch in (1, 5, 30, 90, 200):  # iterations run out before, on and after each level
        monkeypatch.setattr(base, "FIRST_LAUNCH_ITERATIONS", launch)
        monkeypatch.setattr(backend, "launch_seconds", 1e-9)
        np.testing.assert_array_equal(np.asarray(fn(*args, backend=backend, max_stack_depth=20)), want)


def test_a_launch_whose_iterations_ran_out_on_the_small_rows_goes_on_there(monkeypatch: pytest.MonkeyPatch) -> None:
    """The launch after one that returned from the small rows runs no loop on the batch's rows
    before it gathers the members again: its first computation is the small rows'."""
    fn, args = cases(BATCH)["fib"]
    want = np.asarray(fn(*args, dry_run=True))
    backend = on_rows(fn, args, monkeypatch)
    ((_, loop),) = backend.code_cache.values()
    (rows,) = loop.rows.values()
    calls: list[str] = []
    measuring, small = rows.measuring, rows.small
    monkeypatch.setattr(rows, "measuring", lambda state, limits: (calls.append("batch"), measuring(state, limits))[1])
    monkeypatch.setattr(rows, "small", lambda state, limits: (calls.append("small"), small(state, limits))[1])
    monkeypatch.setattr(base, "FIRST_LAUNCH_ITERATIONS", 40)
    monkeypatch.setattr(backend, "launch_seconds", 1e-9)  # later launches of 64 iterations
    np.testing.assert_array_equal(np.asarray(fn(*args, backend=backend, max_stack_depth=20)), want)
    assert calls[-1] == "batch"  # the tail ran on the batch's rows
    assert ("small", "small") in zip(calls, calls[1:], strict=False)  # a launch went on on the small rows at once
