"""The sweeping execution of the traced backends (JAX, TF graph, TF+XLA): every block with members
runs in each sweep, in index order. Results equal the switching execution and NumPy; the
statistics gathered inside the compiled loop agree with NumPy's where the schedule cannot matter
(each member's own block count), and bad options are rejected with a message naming the
choices."""

from __future__ import annotations

import numpy as np
import pytest
from test_machine import COLLATZ, FIB, collatz_reference, fib_reference, parse

import abir
from abir.backends.jax import JaxBackend
from abir.backends.numpy_backend import NumpyBackend
from abir.backends.tf import TensorFlowBackend
from abir.vm import compile_machine

TRACED = {
    "jax": JaxBackend,
    "tf": lambda **kwargs: TensorFlowBackend(jit_compile=False, **kwargs),
    "tf-xla": lambda **kwargs: TensorFlowBackend(jit_compile=True, **kwargs),
}

PROGRAMS = {
    "fib": (FIB, np.array([0, 1, 5, 9, 3, 12]), fib_reference),
    "collatz": (COLLATZ, np.array([1, 7, 27, 2, 97, 6]), collatz_reference),
}


@pytest.mark.parametrize("backend_name", list(TRACED))
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_sweep_equals_switch_and_numpy(name: str, backend_name: str) -> None:
    text, inputs, reference = PROGRAMS[name]
    machine = compile_machine(parse(text))
    want = [reference(int(n)) for n in inputs]
    make = TRACED[backend_name]
    assert make().execution == "sweep"
    for backend in (make(), make(execution="switch"), NumpyBackend()):
        (got,) = machine.run([inputs], backend, max_stack_depth=20)
        np.testing.assert_array_equal(backend.to_numpy(got), want, err_msg=f"{name} on {backend.name}")


@pytest.mark.parametrize("backend_name", list(TRACED))
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_sweep_statistics(name: str, backend_name: str) -> None:
    text, inputs, _ = PROGRAMS[name]
    machine = compile_machine(parse(text))
    sweeping, eager = TRACED[backend_name](collect_stats=True), NumpyBackend()
    machine.run([inputs], sweeping, max_stack_depth=20)
    assert machine.last_stats is sweeping.last_stats
    machine.run([inputs], eager, max_stack_depth=20)
    stats, reference = sweeping.last_stats, eager.last_stats
    assert isinstance(stats, abir.RunStats)
    # each member's own block count does not depend on the schedule
    assert stats.member_steps == reference.member_steps
    assert stats.ideal_steps == reference.ideal_steps
    # every block execution is counted once, with the members it ran for
    assert stats.steps == sum(stats.block_steps)
    assert sum(stats.block_members) == sum(stats.member_steps)
    assert stats.ideal_steps <= stats.sweeps * machine.num_blocks
    assert 0 < stats.sweeps <= stats.steps
    assert 0 < stats.lane_use <= 1
    assert f"in {stats.sweeps} sweeps (ideal {stats.ideal_sweeps})" in stats.summary()
    # a sweep holds no member back outside the tail: each runs at its own pace
    assert stats.ideal_sweeps <= stats.sweeps <= stats.ideal_sweeps + 1
    assert all(0 < n <= stats.sweeps for n in stats.member_sweeps)
    ran = [block for block, runs in enumerate(stats.block_steps) if runs]
    assert all(0 < stats.occupancy(block) <= 1 for block in ran)


@pytest.mark.parametrize("backend_name", list(TRACED))
def test_statistics_only_when_asked(backend_name: str) -> None:
    machine = compile_machine(parse(FIB))
    backend = TRACED[backend_name]()
    machine.run([np.array([3, 4])], backend)
    assert backend.last_stats is None


@pytest.mark.parametrize("backend_name", list(TRACED))
def test_sweep_reaches_the_ideal_on_a_loop(backend_name: str) -> None:
    """Collatz's loop is one block that jumps back to itself: one sweep per iteration, so the
    sweeps equal the longest member's iterations (plus its entry and exit blocks, which run in
    the sweeps that the member enters and leaves the loop)."""
    text, inputs, reference = PROGRAMS["collatz"]
    backend = TRACED[backend_name](collect_stats=True)
    compile_machine(parse(text)).run([inputs], backend)
    assert backend.last_stats.sweeps <= max(reference(int(n)) for n in inputs) + 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"execution": "fastest"}, "execution must be one of 'sweep', 'switch'"),
        ({"execution": "sweep", "scheduler": lambda backend, pc: backend.reduce_min(pc)}, "execution='switch'"),
        ({"execution": "switch", "collect_stats": True}, "collect_stats is available with execution='sweep'"),
    ],
)
@pytest.mark.parametrize("backend_name", list(TRACED))
def test_bad_options(kwargs: dict, message: str, backend_name: str) -> None:
    with pytest.raises(ValueError, match=message):
        TRACED[backend_name](**kwargs)


@pytest.mark.parametrize("backend_name", list(TRACED))
def test_a_scheduler_selects_the_switch(backend_name: str) -> None:
    backend = TRACED[backend_name](scheduler=lambda backend, pc: backend.reduce_min(pc))
    assert backend.execution == "switch" and backend.block_order == "priority"
    (out,) = compile_machine(parse(FIB)).run([np.array([5, 6])], backend)
    np.testing.assert_array_equal(backend.to_numpy(out), [fib_reference(5), fib_reference(6)])


def _leaf_first(depth, x):
    if depth == 0:
        return x * 0.5 + 1.0
    a = _leaf_first(depth - 1, x)
    b = _leaf_first(depth - 1, a)
    if a > b:
        return a - b
    return a + b


def _leaf_last(depth, x):
    if depth > 0:
        a = _leaf_last(depth - 1, x)
        b = _leaf_last(depth - 1, a)
        if a > b:
            return a - b
        return a + b
    return x * 0.5 + 1.0


def test_block_order_does_not_depend_on_the_source_order() -> None:
    """A recursive tree written leaf first or leaf last compiles to the same control-flow graph
    up to block order; the `flow` numbering makes the sweeps and block runs agree (the priority
    numbering of the switching execution depends on the source order)."""
    depths = np.array([0, 3, 5, 2, 4, 1, 5, 3])
    xs = np.linspace(-1.0, 1.0, len(depths))
    stats = []
    for function in (_leaf_first, _leaf_last):
        batched = abir.Context().batch_uncurried(function)
        backend = JaxBackend(collect_stats=True)
        got = batched(depths, xs, backend=backend)
        np.testing.assert_allclose(np.asarray(got), [function(int(d), float(x)) for d, x in zip(depths, xs, strict=True)])
        stats.append(backend.last_stats)
    first, last = stats
    assert first.ideal_steps == last.ideal_steps
    assert abs(first.sweeps - last.sweeps) <= 0.05 * first.sweeps, (first.summary(), last.summary())
    assert abs(first.steps - last.steps) <= 0.05 * first.steps, (first.summary(), last.summary())


def test_the_tail_runs_once() -> None:
    """Members leaving a loop wait in the program's tail (the return and the halt) until every
    member is there, so each tail block runs once: the block runs equal the ideal. The loop's one
    block, which jumps to itself, repeats within the first sweep."""
    def collatz(n):
        steps = n - n
        while n > 1:
            if n % 2 == 0:
                n = n // 2
            else:
                n = 3 * n + 1
            steps = steps + 1
        return steps

    backend = JaxBackend(collect_stats=True)
    inputs = np.array([1, 7, 27, 2, 97, 6])
    got = abir.Context().batch_uncurried(collatz)(inputs, backend=backend)
    np.testing.assert_array_equal(np.asarray(got), [collatz_reference(int(n)) for n in inputs])
    assert backend.last_stats.steps == backend.last_stats.ideal_steps
    # the loop is one block jumping to itself: it repeats inside the first sweep
    assert backend.last_stats.sweeps == 1
