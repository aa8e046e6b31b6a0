"""Runs that move their active members to fewer rows (`abir.backends.jax.one_kernel.ActiveRows`).

A standalone JAX run counts its sweeps that began with few members active; when most did, a
loop over B/4 rows is compiled in the background and, if a timed run finds it faster per sweep,
later runs sweep there once that few members are active. Which loop wins depends on timing, so
these tests set the choice themselves (`stage = "rows"`) and check what must hold either way:
the results equal the per-member Python run, also when a launch's iterations run out in any of
the loops (many short launches), and the first run only counts (no compilation of its own).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from test_compaction import fib, guarded_tree  # on PYTHONPATH

import abir
from abir.backends import base
from abir.backends.jax import compaction
from abir.backends.jax import one_kernel as compilation

ctx = abir.Context()


@ctx.batch(type_inference=lambda types: types[0])
def scaled_fib(x, n):
    """A vector per member alongside a recursion."""
    if n < 2:
        return x * n
    return scaled_fib(x, n - 1) + scaled_fib(x, n - 2)


def skewed(batch: int) -> np.ndarray:
    """Mostly short runs, a few long ones: most sweeps begin with few members active."""
    n = np.full(batch, 2)
    n[:: batch // 4] = 16
    return n


def cases(batch: int) -> dict[str, tuple]:
    n = skewed(batch)
    return {
        "fib": (fib, (n,)),
        "guarded_tree": (guarded_tree, (n, np.full(batch, 40))),
        "scaled_fib": (scaled_fib, (np.linspace(0.0, 1.0, batch * 3).reshape(batch, 3), n)),
    }


def active_rows(cache: dict) -> compilation.ActiveRows:
    """The one signature's `ActiveRows` a call left in its `code_cache`."""
    (entry,) = cache.values()
    assert isinstance(entry[1], compilation.OneKernelWherePossible)
    (rows,) = entry[1].rows.values()
    return rows


def test_live_rows_are_a_quarter_of_at_least_256_members() -> None:
    assert compaction.live_rows(256) == 64 and compaction.live_rows(1024) == 256
    assert compaction.live_rows(255) is None


@pytest.mark.parametrize("one_kernel", [None, True], ids=["default", "one-kernel"])
@pytest.mark.parametrize("name", ["fib", "guarded_tree", "scaled_fib"])
@pytest.mark.make_test_keeps({"one_kernel": None}, {"name": "guarded_tree"})  # one-kernel forced: the branching program
def test_runs_on_the_active_rows_equal_python(name: str, one_kernel: bool | None) -> None:
    fn, args = cases(256)[name]
    want = np.asarray(fn(*args, dry_run=True))
    cache: dict = {}
    backend = abir.JaxBackend(code_cache=cache, one_kernel=one_kernel)
    np.testing.assert_allclose(np.asarray(fn(*args, backend=backend, max_stack_depth=20)), want)
    rows = active_rows(cache)
    assert rows.compiling is not None and rows.small is None  # the first run only counted
    rows.compiling.join()
    assert rows.small is not None
    rows.compiling, rows.stage = None, "rows"
    np.testing.assert_allclose(np.asarray(fn(*args, backend=backend, max_stack_depth=20)), want)


def test_short_launches_on_the_active_rows_equal_python(monkeypatch: pytest.MonkeyPatch) -> None:
    fn, args = cases(256)["guarded_tree"]
    want = np.asarray(fn(*args, dry_run=True))
    cache: dict = {}
    backend = abir.JaxBackend(code_cache=cache)
    fn(*args, backend=backend, max_stack_depth=20)
    rows = active_rows(cache)
    rows.compiling.join()
    rows.compiling, rows.stage = None, "rows"
    for launch in (1, 3, 7, 20):  # iterations run out before, during and after the small rows
        monkeypatch.setattr(base, "FIRST_LAUNCH_ITERATIONS", launch)
        monkeypatch.setattr(backend, "launch_seconds", 1e-9)
        np.testing.assert_array_equal(np.asarray(fn(*args, backend=backend, max_stack_depth=20)), want)


def test_runs_of_even_length_compile_nothing_more() -> None:
    n = np.full(256, 12)
    cache: dict = {}
    backend = abir.JaxBackend(code_cache=cache)
    fib(n, backend=backend, max_stack_depth=16)
    rows = active_rows(cache)
    assert rows.compiling is None and rows.stage == "batch" and backend.trace_count == 1


def test_the_trial_keeps_the_loop_faster_per_sweep() -> None:
    rows = compilation.ActiveRows(lambda state, limits: state, lambda count: None)  # type: ignore[arg-type,return-value]
    done = {base.STATUS_KEY: np.int32(0)}
    rows.small = lambda state, limits: state
    rows.stage = "trial-batch"
    for _ in range(compilation.TRIAL_RUNS):
        assert rows.stage == "trial-batch"
        rows.timed("batch", 0.0, 100, done)
        assert rows.stage == "trial-rows"
        rows.timed("rows", float("-inf"), 100, done)  # infinitely slow
    assert rows.stage == "batch" and rows.small is None


def test_runs_go_on_over_the_batch_while_the_small_rows_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call made while the loop over fewer rows is still compiling runs on the batch's rows
    (it does not wait for the compilation); the first call after the compilation starts the trial."""
    fn, args = cases(256)["fib"]
    want = np.asarray(fn(*args, dry_run=True))
    release = threading.Event()
    small_loop = compilation.ActiveRows.compile_in_background

    def held(self: compilation.ActiveRows, state: dict, rows: int) -> None:
        small = self.small_loop
        self.small_loop = lambda count: (release.wait(), small(count))[1]
        small_loop(self, state, rows)

    monkeypatch.setattr(compilation.ActiveRows, "compile_in_background", held)
    cache: dict = {}
    backend = abir.JaxBackend(code_cache=cache)
    fn(*args, backend=backend, max_stack_depth=20)
    rows = active_rows(cache)
    assert rows.stage == "compiling"
    np.testing.assert_array_equal(np.asarray(fn(*args, backend=backend, max_stack_depth=20)), want)
    assert rows.stage == "compiling" and rows.compiling.is_alive()  # ran without waiting
    release.set()
    rows.compiling.join()
    np.testing.assert_array_equal(np.asarray(fn(*args, backend=backend, max_stack_depth=20)), want)
    assert rows.stage in ("trial-rows", "batch") and rows.compiling is None
