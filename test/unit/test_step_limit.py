"""Runaway programs: `max_steps=` and `StepLimitError`, and compiled loops that Ctrl-C can stop.

A member may run at most `max_steps` blocks; members still running then stop where they stand
and the call raises `abir.StepLimitError` naming them. Since a member's block sequence does not
depend on scheduling, the same members stop at the same blocks on every backend and execution.
JAX and TF run their compiled loop in launches (`launch_seconds`), so a signal handler (Ctrl-C's
KeyboardInterrupt) runs between launches.
"""

from __future__ import annotations

import inspect
import signal
import threading

import numpy as np
import pytest

import abir
from abir.backends import base

ctx = abir.Context()


@ctx.batch(type_inference=lambda n: n)
def collatz(n):
    steps = 0
    while n != 1:  # 0 and negative starts never reach 1
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


@ctx.batch(type_inference=lambda n: n)
def countdown(n):
    if n <= 0:
        return n
    return countdown(n - 1)


def python_collatz(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


BACKENDS = {
    "numpy": abir.NumpyBackend,
    "numpy-sweep": lambda: abir.NumpyBackend(execution="sweep"),
    "jax": abir.JaxBackend,
    "jax-switch": lambda: abir.JaxBackend(execution="switch"),
    "tf": abir.TensorFlowBackend,
    "tf-xla": lambda: abir.TensorFlowBackend(jit_compile=True),
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request):
    return BACKENDS[request.param]()


def test_results_unchanged_within_the_limit(backend):
    starts = np.array([1, 6, 7, 27])
    got = collatz(starts, backend=backend, max_steps=10_000)
    assert np.asarray(got).tolist() == [python_collatz(int(n)) for n in starts]


def test_runaway_members_are_named(backend):
    with pytest.raises(abir.StepLimitError) as info:
        collatz(np.array([1, 0, 27, -3, 5]), backend=backend, max_steps=400)
    assert info.value.members == [1, 3]
    assert "max_steps=400 reached: 2 members still running" in str(info.value)
    assert "batch members 1, 3 in function 'collatz' at " in str(info.value)


def lines_of(function, first: str, last: str) -> range:
    """The lines of this file from the line of `function` containing `first` to the one with `last`."""
    lines, start = inspect.getsourcelines(function)
    begin = next(i for i, line in enumerate(lines) if first in line)
    end = next(i for i, line in enumerate(lines) if last in line)
    return range(start + begin, start + end + 1)


@pytest.mark.parametrize("make", [abir.NumpyBackend, abir.JaxBackend, abir.TensorFlowBackend],
                         ids=["numpy", "jax", "tf"])
def test_each_member_is_named_with_the_line_where_it_stands(make):
    loop = lines_of(collatz.__wrapped__, "while n != 1", "steps += 1")
    recursion = lines_of(countdown.__wrapped__, "if n <= 0", "return countdown")
    for function, args, lines in [(collatz, [1, 0, 27, -3], loop), (countdown, [3, 500], recursion)]:
        with pytest.raises(abir.StepLimitError) as info:
            function(np.array(args), backend=make(), max_steps=300, max_stack_depth=600)
        error = info.value
        assert len(error.locations) == len(error.members) > 0
        for location in error.locations:
            filename, _, line = location.rpartition(":")
            assert filename == __file__ and int(line) in lines, location
            assert f"in function '{function.__name__}' at {location} (vm block" in str(error)


@pytest.mark.parametrize(
    "makes",
    [
        (abir.NumpyBackend, lambda: abir.JaxBackend(execution="switch"), lambda: abir.TensorFlowBackend(execution="switch")),
        (lambda: abir.NumpyBackend(execution="sweep"), abir.JaxBackend, abir.TensorFlowBackend),
    ],
    ids=["priority-order", "flow-order"],
)
def test_every_execution_stops_the_same_members_at_the_same_blocks(makes):
    """A member's blocks do not depend on scheduling: the limit falls at the same block (for
    programs compiled with the same block order)."""
    stops = set()
    for make in makes:
        with pytest.raises(abir.StepLimitError) as info:
            countdown(np.array([3, 50, 80, 2]), backend=make(), max_steps=40)
        stops.add((tuple(info.value.members), tuple(info.value.blocks)))
    assert len(stops) == 1
    assert next(iter(stops))[0] == (1, 2)


def test_exactly_enough_steps_is_not_an_error():
    backend = abir.NumpyBackend(collect_stats=True)
    collatz(np.array([27]), backend=backend)
    needed = backend.last_stats.member_steps[0]
    assert collatz(np.array([27]), backend=abir.NumpyBackend(), max_steps=needed).tolist() == [111]
    with pytest.raises(abir.StepLimitError):
        collatz(np.array([27]), backend=abir.NumpyBackend(), max_steps=needed - 1)


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (0, ValueError, "max_steps must be between 1"),
        (-5, ValueError, "max_steps must be between 1"),
        (2**40, ValueError, "max_steps must be between 1"),
        (1.5, TypeError, "max_steps must be None or a positive int, got float"),
        (True, TypeError, "got bool"),
    ],
)
def test_bad_max_steps(value, error, message):
    with pytest.raises(error, match=message):
        collatz(np.array([3]), max_steps=value)


def test_max_steps_needs_the_machine():
    with pytest.raises(ValueError, match="stackless=True"):
        collatz(np.array([3]), max_steps=10, stackless=True)


@pytest.mark.parametrize("make", [abir.JaxBackend, abir.TensorFlowBackend], ids=["jax", "tf"])
def test_runs_in_several_launches_give_the_same_results(make, monkeypatch):
    monkeypatch.setattr(base, "FIRST_LAUNCH_ITERATIONS", 2)
    launches = []
    original = base.Backend.run_in_launches

    def counted(self, launch, state, halt_index):
        def counting_launch(state, iterations):
            launches.append(iterations)
            return launch(state, iterations)

        return original(self, counting_launch, state, halt_index)

    monkeypatch.setattr(base.Backend, "run_in_launches", counted)
    starts = np.array([27, 97, 1, 6])
    got = collatz(starts, backend=make(launch_seconds=1e-6, code_cache={}))
    assert np.asarray(got).tolist() == [python_collatz(int(n)) for n in starts]
    assert len(launches) > 1


@pytest.mark.parametrize("value", [0, -1.0, "1s"])
def test_bad_launch_seconds(value):
    with pytest.raises(ValueError, match="launch_seconds"):
        abir.JaxBackend(launch_seconds=value)


class _Alarm(Exception):
    pass


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
@pytest.mark.parametrize("make", [abir.NumpyBackend, abir.JaxBackend, abir.TensorFlowBackend], ids=["numpy", "jax", "tf"])
def test_a_signal_stops_a_runaway_run(make):
    """What Ctrl-C does: the signal handler's exception ends the run (the step limit is only a
    backstop, far beyond the alarm). The alarm rings every second until it lands: a handler's
    exception raised inside a finalizer (one the garbage collector runs) is dropped by Python
    itself, as a user's second Ctrl-C would follow the first."""
    backend = make()
    collatz(np.array([3, 5]), backend=backend)  # compiled before the alarm starts

    def ring(signum, frame):
        raise _Alarm

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, 1.0, 1.0)
    try:
        with pytest.raises(_Alarm):
            collatz(np.array([0, 5]), backend=backend, max_steps=2**31 - 1)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
