"""What a run carries across its boundary: a program whose functions each return to one place
keeps no program-counter stack (`abir.vm.kernels.static_returns`), and a standalone JAX run
takes only its inputs from the host at each launch, the rest of its initial state put on the
device once (`abir.backends.jax.loop.Fill`), with no XLA program compiled but its loop. Results
and errors stay those of per-member Python."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from conftest import backend_params
from test_semantics_regressions import descends, loops_then_tail_calls

import abir
from abir.backend_registry import spec_named
from abir.backends import base
from abir.backends.jax import backend as jax_backend
from abir.backends.jax import one_kernel
from abir.errors import StackOverflowError, StepLimitError
from abir.vm import compile_machine, state_ops


def count_down(n):
    steps = 0
    while n > 0:
        n = n - 1
        steps = steps + 1
    return steps


def scaled(x):
    total = 0.0
    while x > 1.0:
        x = x / 2.0
        total = total + x
    return total


def calls_once(x):
    return scaled(x) + 1.0


def depth(n):
    if n == 0:
        return 0
    return depth(n - 1) + 1


def machine_of(function, *args, helpers=()):
    context = abir.Context()
    for helper in helpers:
        context.batch()(helper)
    context.batch()(function)
    return compile_machine(context.lowered_for_args(function.__name__, args))


def per_member(function, *args):
    return np.array([function(*(a[b] for a in args)) for b in range(len(args[0]))])


def test_a_program_without_recursion_has_no_program_counter_stack():
    machine = machine_of(count_down, np.arange(4))
    shapes = machine.state_shapes(4, 10)
    assert not machine.has_calls
    assert state_ops.PC_STACK not in shapes and state_ops.PC_SP not in shapes


def test_a_recursive_program_keeps_its_program_counter_stack():
    machine = machine_of(depth, np.arange(4))
    assert machine.has_calls
    assert state_ops.PC_STACK in machine.state_shapes(4, 10)


def test_a_function_tail_called_and_called_from_itself_keeps_its_program_counter_stack():
    """`descends` has one call (its own), but the entry's tail call enters it too, and its returns
    then go back where the entry's call does."""
    machine = machine_of(loops_then_tail_calls, np.arange(4), helpers=[descends])
    assert machine.has_calls
    assert state_ops.PC_STACK in machine.state_shapes(4, 10)


@pytest.mark.parametrize("backend_name", backend_params())
def test_a_function_called_once_returns_where_its_call_does(backend_name):
    context = abir.Context()
    context.batch()(scaled)
    batched = context.batch()(calls_once)
    x = np.array([0.5, 3.0, 17.0, 1000.0])
    got = batched(x, backend=spec_named(backend_name).new_backend())
    np.testing.assert_allclose(np.asarray(got), per_member(calls_once, x))


@pytest.mark.parametrize("backend_name", backend_params())
def test_a_program_without_a_stack_still_names_where_max_steps_stopped_it(backend_name):
    batched = abir.Context().batch()(count_down)
    with pytest.raises(StepLimitError, match=r"count_down.*test_run_boundary\.py:\d+"):
        batched(np.array([1, 2, 50]), backend=spec_named(backend_name).new_backend(), max_steps=10)


def inputs_of_launches(monkeypatch):
    """(key, type, shape) of the state each launch of a one-kernel-where-possible loop is called
    with."""
    seen = []
    call, chosen_for = one_kernel.OneKernelWherePossible.__call__, one_kernel.OneKernelWherePossible.chosen_for

    def recorded(run):
        def recording(state, iterations):
            seen.append([(key, type(value), np.shape(value)) for key, value in sorted(state.items())])
            return run(state, iterations)

        return recording

    monkeypatch.setattr(one_kernel.OneKernelWherePossible, "__call__", lambda self, *a: recorded(call.__get__(self))(*a))
    # a launch calls the loop chosen at the first one directly
    monkeypatch.setattr(one_kernel.OneKernelWherePossible, "chosen_for", lambda self, state: recorded(chosen_for(self, state)))
    return seen


def test_every_launch_of_a_jax_run_gives_its_loop_one_signature_made_on_the_device(monkeypatch):
    """A run longer than one launch continues on the same keys, types and shapes (its loop is
    compiled once), and only its input arrives from the host: the rest of the initial state is
    made on the device."""
    seen = inputs_of_launches(monkeypatch)
    monkeypatch.setattr(base, "FIRST_LAUNCH_ITERATIONS", 2)
    batched = abir.Context().batch()(depth)
    n = np.array([0, 3, 7, 12])
    got = batched(n, backend=abir.JaxBackend(launch_seconds=1e-6), max_stack_depth=200)
    np.testing.assert_array_equal(np.asarray(got), per_member(depth, n))
    shapes = [[(key, shape) for key, _, shape in launch] for launch in seen]  # jit's signature
    assert len(seen) > 1 and all(launch == shapes[0] for launch in shapes)
    host = [key for key, kind, _ in seen[0] if not issubclass(kind, jax.Array)]
    assert host == [state_ops.register_key("depth.n")]


def test_the_first_call_of_a_jax_run_compiles_its_loop_and_nothing_else():
    """The state's fills go to the device without a compiled program of their own (an eager
    `jnp.full` compiles one per shape and dtype)."""
    compiled = []

    def listener(event, duration, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            compiled.append(duration)

    batched = abir.Context().batch()(depth)
    n = np.array([0, 3, 7, 12])
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        got = batched(n, backend=abir.JaxBackend(), max_stack_depth=20)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    np.testing.assert_array_equal(np.asarray(got), per_member(depth, n))
    assert len(compiled) == 1


def test_errors_of_a_run_whose_state_is_made_in_its_program_stay_located():
    batched = abir.Context().batch()(depth)
    backend = abir.JaxBackend()
    batched(np.array([1, 2]), backend=backend, max_stack_depth=8)
    with pytest.raises(StackOverflowError, match=r"'depth' at .*test_run_boundary\.py:\d+.*member"):
        batched(np.array([1, 20]), backend=backend, max_stack_depth=8)
    with pytest.raises(StepLimitError, match=r"depth.*test_run_boundary\.py:\d+"):
        batched(np.array([1, 20]), backend=backend, max_stack_depth=40, max_steps=5)


def test_a_jax_run_without_a_stack_returns_no_stack_pointer_or_flag(monkeypatch):
    launched = []
    call = jax_backend.StandaloneRun.__call__

    def recording(self, state):
        out = call(self, state)
        launched.append(sorted(out))
        return out

    monkeypatch.setattr(jax_backend.StandaloneRun, "__call__", recording)
    batched = abir.Context().batch()(count_down)
    n = np.array([0, 3, 9])
    backend = abir.JaxBackend()
    for _ in range(2):  # the first call and a steady one
        np.testing.assert_array_equal(np.asarray(batched(n, backend=backend)), per_member(count_down, n))
    assert len(launched) == 2
    for keys in launched:
        assert not [key for key in keys if state_ops.is_stack_key(key) or key.startswith("sp:") or key == state_ops.PC_SP]
