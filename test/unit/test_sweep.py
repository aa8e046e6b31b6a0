"""The JAX backend's sweeping execution: every block with members runs in each sweep, in index
order. Results equal the switching execution and NumPy; the statistics gathered inside the
compiled loop agree with NumPy's where the schedule cannot matter (each member's own block
count), and bad options are rejected with a message naming the choices."""

from __future__ import annotations

import numpy as np
import pytest
from test_machine import COLLATZ, FIB, collatz_reference, fib_reference, parse

from abir.backends.jax_backend import JaxBackend
from abir.backends.numpy_backend import NumpyBackend
from abir.vm import compile_machine

PROGRAMS = {
    "fib": (FIB, np.array([0, 1, 5, 9, 3, 12]), fib_reference),
    "collatz": (COLLATZ, np.array([1, 7, 27, 2, 97, 6]), collatz_reference),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_sweep_equals_switch_and_numpy(name: str) -> None:
    text, inputs, reference = PROGRAMS[name]
    machine = compile_machine(parse(text))
    want = [reference(int(n)) for n in inputs]
    for backend in (JaxBackend(), JaxBackend(execution="switch"), NumpyBackend()):
        (got,) = machine.run([inputs], backend, max_stack_depth=20)
        np.testing.assert_array_equal(backend.to_numpy(got), want, err_msg=f"{name} on {backend.name}")


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_sweep_statistics(name: str) -> None:
    text, inputs, _ = PROGRAMS[name]
    machine = compile_machine(parse(text))
    sweeping, eager = JaxBackend(collect_stats=True), NumpyBackend()
    machine.run([inputs], sweeping, max_stack_depth=20)
    assert machine.last_stats is sweeping.last_stats
    machine.run([inputs], eager, max_stack_depth=20)
    stats, reference = sweeping.last_stats, eager.last_stats
    # each member's own block count does not depend on the schedule
    assert stats.member_steps == reference.member_steps
    assert stats.ideal_steps == reference.ideal_steps
    # every block execution is counted once, with the members it ran for
    assert stats.steps == sum(stats.block_steps)
    assert sum(stats.block_members) == sum(stats.member_steps)
    assert stats.ideal_steps <= stats.sweeps * machine.num_blocks
    assert 0 < stats.sweeps <= stats.steps
    assert 0 < stats.lane_use <= 1
    assert f"in {stats.sweeps} sweeps" in stats.summary()
    ran = [block for block, runs in enumerate(stats.block_steps) if runs]
    assert all(0 < stats.occupancy(block) <= 1 for block in ran)


def test_statistics_only_when_asked() -> None:
    machine = compile_machine(parse(FIB))
    backend = JaxBackend()
    machine.run([np.array([3, 4])], backend)
    assert backend.last_stats is None


def test_sweep_reaches_the_ideal_on_a_loop() -> None:
    """Collatz's loop is one block that jumps back to itself: one sweep per iteration, so the
    sweeps equal the longest member's iterations (plus its entry and exit blocks, which run in
    the sweeps that the member enters and leaves the loop)."""
    text, inputs, reference = PROGRAMS["collatz"]
    backend = JaxBackend(collect_stats=True)
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
def test_bad_options(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        JaxBackend(**kwargs)
