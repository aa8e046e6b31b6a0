"""A steady JAX call whose run is one compiled program of its input leaves
(`abir.backends.jax.backend.SteadyLaunch.finished_outputs`) goes from the call to that program
(`abir.calling.SteadyCall`) without the machine's run, and a run the program cannot finish
(an error flagged) still takes the machine's run and raises the first call's error."""

from __future__ import annotations

import numpy as np
import pytest

import abir
from abir.vm import machine


def count_down(n):
    steps = 0
    while n > 0:
        n = n - 1
        steps = steps + 1
    return steps


def depth(n):
    if n == 0:
        return 0
    return depth(n - 1) + 1


def steady_of(f):
    """The one `SteadyCall` of `f`'s context, its launcher's program compiled."""
    (steady,) = f._context._compiler.steady.values()
    launch = steady.run.launch
    if launch.compiling is not None:
        launch.compiling.join()
    return steady, launch


def test_a_finished_run_of_the_program_skips_the_machine_run(monkeypatch):
    backend = abir.JaxBackend()
    f = abir.Context().batch_uncurried(count_down)
    for x in (np.array([3, 0, 5]), np.array([7, 1, 2]), np.array([9, 4, 0])):
        f(x, backend=backend)
    steady, launch = steady_of(f)
    f(np.array([3, 0, 5]), backend=backend)
    assert launch.program is not None and steady.finished is not None

    def forbidden(self, leaves):
        raise AssertionError("a finished steady run went through the machine's run")

    monkeypatch.setattr(machine.SteadyRun, "__call__", forbidden)
    for x in (np.array([2, 6, 1]), np.array([5, 5, 0])):
        np.testing.assert_array_equal(f(x, backend=backend), [count_down(int(v)) for v in x])


def test_a_flagged_run_of_the_program_raises_the_first_calls_error():
    backend = abir.JaxBackend()
    f = abir.Context().batch_uncurried(depth)
    for x in (np.array([3, 0, 5]), np.array([2, 1, 2]), np.array([4, 4, 0])):
        np.testing.assert_array_equal(f(x, backend=backend, max_stack_depth=8), x)
    steady, launch = steady_of(f)
    f(np.array([1, 2, 3]), backend=backend, max_stack_depth=8)
    if launch.program is None:
        pytest.skip("no program of the input leaves was compiled for this run")
    with pytest.raises(Exception) as first:
        abir.Context().batch_uncurried(depth)(np.array([1, 30, 2]), backend=abir.JaxBackend(), max_stack_depth=8)
    with pytest.raises(type(first.value)) as steady_error:
        f(np.array([1, 30, 2]), backend=backend, max_stack_depth=8)
    assert str(steady_error.value) == str(first.value)
    assert steady.finished is not None
