"""Runs on fewer rows that go down levels (`abir.backends.jax.one_kernel.row_levels`): once at
most a quarter of the rows a run moved its active members to are active, they move to a
quarter of those rows, within the same computation (`OneKernelWherePossible.on_levels`).

As in test_active_rows.py, the tests set the choice of rows themselves (`stage = "rows"`) and
check what must hold however fast each loop is: results equal to the per-member Python run,
also when a launch's iterations run out on any level.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def on_rows(fn, args, monkeypatch: pytest.MonkeyPatch, one_kernel: bool | None = None, fused: bool = False) -> abir.JaxBackend:
    """A backend whose runs of `fn` on `args` have compiled their loop over fewer rows and run it
    from now on, with levels of 64 and 16 rows (`LIVE_ROWS_MIN` lowered to 16). Unless `fused`,
    the loop is compiled as kernels (the one-kernel choice refused), which go down the levels; a
    loop compiled as one kernel stays on the 64 rows."""
    monkeypatch.setattr(compaction, "LIVE_ROWS_MIN", 16)
    if not fused:
        monkeypatch.setattr(compilation.OneKernelWherePossible, "wanted", lambda self, state, iterations: False)
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
    assert gathered == ([64] if fused else [64, 16])  # kernels go down a level
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


@pytest.mark.parametrize(
    ("one_kernel", "fused"),
    [(None, False), (None, True), pytest.param(True, True, marks=pytest.mark.full)],
    ids=["kernels", "default", "one-kernel"],
)
@pytest.mark.parametrize("name", ["fib", "guarded_tree"])
# each program and each way of launching once: the levels are the same code for both programs
@pytest.mark.make_test_keeps({"name": "fib", "fused": True}, {"name": "guarded_tree", "fused": False})
def test_runs_down_the_levels_equal_python(monkeypatch: pytest.MonkeyPatch, name: str, one_kernel: bool | None, fused: bool) -> None:
    fn, args = cases(BATCH)[name]
    want = np.asarray(fn(*args, dry_run=True))
    backend = on_rows(fn, args, monkeypatch, one_kernel, fused)
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


HEAVY_TAIL_RUN = """
import sys
import numpy as np
sys.path.insert(0, {bench!r})
import abir
import lanes as bench_lanes
workload = bench_lanes.WORKLOADS["heavy-tail"]
inputs = workload.make_inputs(1024)
got = bench_lanes.as_tuple(abir.Context().batch_uncurried(workload.function)(*inputs, backend=abir.JaxBackend()))
for value, wanted in zip(got, bench_lanes.python_run(workload, inputs), strict=True):
    np.testing.assert_array_equal(value, wanted)
print("equal")
"""


def test_a_one_kernel_loop_over_fewer_rows_stays_on_one_level() -> None:
    """bench/lanes.py's heavy-tailed sampler at 1,024 members, whose loop is one kernel: with the
    loop over fewer rows called at two levels in one computation, XLA's one-kernel emitter
    stopped the process (a failed check, `ir_emitter.cc`: "All or none of the slices should have
    an explicit index"); run in a process of its own so that such a stop fails this test only."""
    bench = str(Path(__file__).resolve().parents[2] / "bench")
    done = subprocess.run([sys.executable, "-c", HEAVY_TAIL_RUN.format(bench=bench)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("equal"), done.stderr[-2000:]
