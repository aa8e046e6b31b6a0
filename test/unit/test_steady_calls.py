"""Repeated calls with arguments of one signature (`abir.calling.SteadyCall`).

A call whose arguments are arrays of the types, shapes and dtypes of an earlier plain run skips
the checks and look-ups that run made. It must give what the first call gives: the per-member
Python results, and the same errors for values the first call did not see (a stack overflow,
a step limit, a helper failing), on every backend; and it must not outlive its program (a new
decoration, a program evicted from the context's cache).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import abir
from abir import calling
from abir.backend_registry import backend_specs
from abir.errors import HelperError


def depth(n):
    if n == 0:
        return 0
    return depth(n - 1) + 1


def count_down(n):
    steps = 0
    while n > 0:
        n = n - 1
        steps = steps + 1
    return steps


def row_count(x):
    return x * 0 + np.size(x)  # 1 for one member, B for a whole batch


def uses_row_count(x):
    return row_count(x)


def reject_negative(x):
    if np.any(x < 0):
        raise ValueError("negative input")
    return x


def uses_reject_negative(x):
    return reject_negative(x) + 1


def per_member(function, *args):
    return np.array([function(*(a[b] for a in args)) for b in range(len(args[0]))])


@pytest.fixture(params=[min(spec.names, key=len) for spec in backend_specs()])
def backend(request):
    """A fresh backend of each registered kind."""
    return next(spec for spec in backend_specs() if request.param in spec.names).new_backend()


def flattening_forbidden(monkeypatch):
    """From now on, a call that flattens its arguments (the first call's path) fails the test."""

    def forbidden(*args, **kwargs):
        raise AssertionError("a steady call flattened its arguments again")

    monkeypatch.setattr(calling, "flatten_arguments", forbidden)


def test_repeated_calls_skip_the_checks_and_match_python(backend, monkeypatch):
    f = abir.Context().batch_uncurried(count_down)
    first, second = np.array([3, 0, 5]), np.array([7, 1, 2])
    np.testing.assert_array_equal(f(first, backend=backend), per_member(count_down, first))
    flattening_forbidden(monkeypatch)
    for _ in range(2):
        np.testing.assert_array_equal(f(second, backend=backend), per_member(count_down, second))


def test_a_steady_call_raises_the_stack_overflow_a_first_call_raises(backend):
    deep = np.array([1, 9, 2])
    with pytest.raises(abir.StackOverflowError) as fresh:
        abir.Context().batch_uncurried(depth)(deep, backend=backend, max_stack_depth=5)
    f = abir.Context().batch_uncurried(depth)
    shallow = np.array([1, 2, 3])
    for _ in range(2):
        np.testing.assert_array_equal(f(shallow, backend=backend, max_stack_depth=5), per_member(depth, shallow))
    with pytest.raises(abir.StackOverflowError) as steady:
        f(deep, backend=backend, max_stack_depth=5)
    assert str(steady.value) == str(fresh.value)
    assert steady.value.members == fresh.value.members == [1]


def test_a_steady_call_raises_the_step_limit_a_first_call_raises(backend):
    long = np.array([2, 50, 1])
    with pytest.raises(abir.StepLimitError) as fresh:
        abir.Context().batch_uncurried(count_down)(long, backend=backend, max_steps=20)
    f = abir.Context().batch_uncurried(count_down)
    short = np.array([2, 3, 1])
    for _ in range(2):
        np.testing.assert_array_equal(f(short, backend=backend, max_steps=20), per_member(count_down, short))
    with pytest.raises(abir.StepLimitError) as steady:
        f(long, backend=backend, max_steps=20)
    assert str(steady.value) == str(fresh.value)


@pytest.mark.parametrize("backend", ["numpy", "tf"])  # where NumPy code runs at run time
def test_a_primitive_failing_in_a_steady_call_is_explained(backend):
    ctx = abir.Context()
    ctx.primitive(reject_negative)
    f = ctx.batch_uncurried(uses_reject_negative)
    for _ in range(2):
        np.testing.assert_array_equal(f(np.array([4, 1, 2]), backend=backend), [5, 2, 3])
    with pytest.raises(HelperError, match=r"the helper 'reject_negative'") as info:
        f(np.array([4, -1, 2]), backend=backend)
    assert info.value.__cause__ is not None


def test_a_helper_failing_in_a_steady_call_names_the_padded_batch_as_a_first_call_does():
    def failing(ctx):
        ctx.primitive(reject_negative)
        return ctx.batch_uncurried(uses_reject_negative)

    negative = np.array([4, -1, 2])
    with pytest.raises(HelperError) as fresh:
        failing(abir.Context())(negative, backend="numpy", pad_batch=True)
    f = failing(abir.Context())
    for _ in range(2):
        np.testing.assert_array_equal(f(np.array([4, 1, 2]), backend="numpy", pad_batch=True), [5, 2, 3])
    with pytest.raises(HelperError, match="pad_batch=True runs your batch of 3 as 4 rows") as steady:
        f(negative, backend="numpy", pad_batch=True)
    assert str(steady.value) == str(fresh.value)


def test_a_new_decoration_is_not_bypassed_by_a_steady_call():
    ctx = abir.Context()
    f = ctx.batch_uncurried(uses_row_count)
    x = np.array([4, 1, 2])
    for _ in range(2):
        np.testing.assert_array_equal(f(x, backend="numpy"), [1, 1, 1])
    ctx.primitive(row_count)  # now called once on the whole batch
    np.testing.assert_array_equal(f(x, backend="numpy"), [3, 3, 3])


def test_a_program_evicted_from_the_cache_is_compiled_again():
    ctx = abir.Context(cache_size=1)
    f, g = ctx.batch_uncurried(count_down), ctx.batch_uncurried(depth)
    x = np.array([3, 1])
    for _ in range(2):
        np.testing.assert_array_equal(f(x, backend="numpy"), [3, 1])
    np.testing.assert_array_equal(g(x, backend="numpy"), [3, 1])  # evicts f's program
    assert len(ctx.compile_cache) == 1
    np.testing.assert_array_equal(f(x, backend="numpy"), [3, 1])
    assert len(ctx.compile_cache) == 1


def test_arguments_of_another_shape_or_kind_take_the_checked_path(monkeypatch):
    f = abir.Context().batch_uncurried(count_down)
    f(np.array([3, 1]), backend="numpy")
    with pytest.raises(TypeError, match=r"argument 0 of count_down\(\) is a str"):
        f("3", backend="numpy")
    floats = np.array([3.5, 1.0])  # another dtype: a program of its own
    np.testing.assert_array_equal(f(floats, backend="numpy"), per_member(count_down, floats))
    flattening_forbidden(monkeypatch)
    with pytest.raises(AssertionError, match="flattened its arguments again"):
        f(np.array([3, 1, 2]), backend="numpy")  # another batch size: checked again
    with pytest.raises(AssertionError, match="flattened its arguments again"):
        f([3, 1], backend="numpy")  # a list of numbers: read by np.asarray, checked again


def test_a_steady_jax_call_runs_from_its_input_leaves_and_continues_in_launches(monkeypatch):
    from abir.backends import base
    from abir.backends.jax.backend import SteadyLaunch

    monkeypatch.setattr(base, "FIRST_LAUNCH_ITERATIONS", 2)  # every run here takes more than one launch
    backend = abir.JaxBackend(launch_seconds=1e-6)
    f = abir.Context().batch_uncurried(depth)
    launches = []
    for x in (np.array([3, 0, 5]), np.array([7, 1, 2]), np.array([9, 4, 0])):
        np.testing.assert_array_equal(f(x, backend=backend, max_stack_depth=12), per_member(depth, x))
        steady = next(iter(f._context._compiler.steady.values()))
        launches.append(steady.run.launch)
    assert launches[0] is None  # made by the first steady call, which builds the machine's state
    assert isinstance(launches[1], SteadyLaunch) and launches[2] is launches[1]
    recursing_line = depth.__code__.co_firstlineno + 3
    with pytest.raises(abir.StackOverflowError, match=rf"'depth' at .*test_steady_calls.py:{recursing_line} .*: batch member 1 recursed"):
        f(np.array([1, 30, 2]), backend=backend, max_stack_depth=12)


def steady_launch_of(f):
    """The `SteadyLaunch` of a function's one steady call signature, its program compiled."""
    launch = next(iter(f._context._compiler.steady.values())).run.launch
    if launch.compiling is not None:
        launch.compiling.join()
    return launch


def test_a_steady_jax_call_runs_a_program_of_its_input_leaves():
    backend = abir.JaxBackend()
    f = abir.Context().batch_uncurried(count_down)
    for x in (np.array([3, 0, 5]), np.array([7, 1, 2]), np.array([9, 4, 0])):
        np.testing.assert_array_equal(f(x, backend=backend), per_member(count_down, x))
    launch = steady_launch_of(f)
    assert launch.program is not None
    ran, compiled = [], []
    program = launch.program
    launch.program = lambda *leaves: ran.append(leaves) or program(*leaves)

    def listener(name, secs, **kwargs):
        if "backend_compile" in name:
            compiled.append(name)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        x = np.array([11, 2, 6])
        np.testing.assert_array_equal(f(x, backend=backend), per_member(count_down, x))
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert len(ran) == 1
    assert not compiled  # the program compiled in the thread is the one called


def test_a_run_the_program_leaves_running_goes_on_in_launches_and_matches_one_launch(monkeypatch):
    from abir.backends import base

    monkeypatch.setattr(base, "FIRST_LAUNCH_ITERATIONS", 4)
    backend = abir.JaxBackend(launch_seconds=1e-6)
    f = abir.Context().batch_uncurried(depth)
    shallow = np.array([0, 1, 0])
    for _ in range(3):
        np.testing.assert_array_equal(f(shallow, backend=backend, max_stack_depth=40), per_member(depth, shallow))
    launch = steady_launch_of(f)
    assert launch.program is not None
    deep = np.array([25, 3, 30])  # far more sweeps than the program's 4 iterations
    one_launch = abir.Context().batch_uncurried(depth)(deep, backend=abir.JaxBackend(launch_seconds=None), max_stack_depth=40)
    np.testing.assert_array_equal(f(deep, backend=backend, max_stack_depth=40), one_launch)
    np.testing.assert_array_equal(one_launch, per_member(depth, deep))
    assert launch.program is None and not launch.programmable  # such runs stay on the launches
    np.testing.assert_array_equal(f(shallow, backend=backend, max_stack_depth=40), per_member(depth, shallow))


def test_an_error_in_a_run_of_the_program_names_the_member_and_line():
    backend = abir.JaxBackend()
    f = abir.Context().batch_uncurried(depth)
    shallow = np.array([1, 2, 3])
    for _ in range(3):
        np.testing.assert_array_equal(f(shallow, backend=backend, max_stack_depth=6), per_member(depth, shallow))
    assert steady_launch_of(f).program is not None
    with pytest.raises(abir.StackOverflowError) as fresh:
        abir.Context().batch_uncurried(depth)(np.array([1, 2, 9]), backend=abir.JaxBackend(), max_stack_depth=6)
    recursing_line = depth.__code__.co_firstlineno + 3
    with pytest.raises(abir.StackOverflowError, match=rf"test_steady_calls.py:{recursing_line} .*: batch member 2 recursed") as steady:
        f(np.array([1, 2, 9]), backend=backend, max_stack_depth=6)
    assert str(steady.value) == str(fresh.value)
    assert steady_launch_of(f).program is not None  # an error keeps the program for the next runs


def first_of(x, unused):
    return x


def test_the_program_of_a_run_with_inputs_its_loop_never_reads_compiles_and_runs():
    # XLA's one-kernel emitter stops the process on an input its kernel does not read
    backend = abir.JaxBackend()
    f = abir.Context().batch_uncurried(first_of)
    x, unused = np.arange(3.0), np.arange(3)
    for _ in range(3):
        np.testing.assert_array_equal(f(x, unused, backend=backend), x)
    assert steady_launch_of(f).program is not None
    np.testing.assert_array_equal(f(x + 1, unused, backend=backend), x + 1)


def passes_and_counts(x, n):
    steps = 0
    while n > 0:
        n = n - 1
        steps = steps + 1
    return (x, steps), n


def steady_passes_and_counts() -> tuple:
    """`passes_and_counts` batched and called until its steady launch exists: the function, its
    backend and that launch."""
    backend = abir.JaxBackend()
    f = abir.Context().batch_uncurried(passes_and_counts)
    x, n = np.arange(3.0), np.array([3, 0, 5])
    for _ in range(3):
        f(x, n, backend=backend)
    return f, backend, steady_launch_of(f)


def test_a_steady_jax_program_returns_structured_outputs_and_inputs_as_python_does():
    f, backend, launch = steady_passes_and_counts()
    assert launch.program is not None
    x, n = np.array([2.5, -1.0, 7.0]), np.array([1, 4, 2])
    (got_x, got_steps), got_n = f(x, n, backend=backend)
    assert isinstance(got_x, jax.Array)  # an input passed through comes back as the backend's array
    np.testing.assert_array_equal(got_x, x)
    np.testing.assert_array_equal(got_steps, [passes_and_counts(a, b)[0][1] for a, b in zip(x, n, strict=True)])
    np.testing.assert_array_equal(got_n, [passes_and_counts(a, b)[1] for a, b in zip(x, n, strict=True)])
    outputs = launch.finished_outputs([x, n])
    assert outputs is not None and len(outputs) == 3  # the outputs themselves, no state built


def test_the_outputs_of_a_program_are_picked_from_its_values_inputs_and_zeros():
    f, backend, launch = steady_passes_and_counts()
    assert launch.output_picks() is None  # every output register is written: the values as they come
    result0, result1, result2 = launch.output_keys
    x_key, _ = launch.input_keys
    launch.output_keys, launch.written = (result0, x_key, result2), (result0,)
    launch.zeros[result2] = zeros = jax.numpy.zeros(3)
    picks = launch.output_picks()
    x, n = np.array([2.5, -1.0, 7.0]), np.array([1, 4, 2])
    values, leaves = ["value"], [x, n]
    assert picks[0](values, leaves) == "value"
    np.testing.assert_array_equal(picks[1](values, leaves), x)
    assert isinstance(picks[1](values, leaves), jax.Array)
    assert picks[2](values, leaves) is zeros


def test_a_steady_jax_call_calls_its_program_through_jax_fast_path(monkeypatch):
    # a call JAX's C++ dispatch cannot serve goes through its Python path (tracing, cache
    # look-ups, argument handling): many microseconds a steady call must not spend
    from jax._src import pjit

    if not hasattr(pjit, "_run_python_pjit"):
        pytest.skip("this jax has no _run_python_pjit to count")
    backend = abir.JaxBackend()
    f = abir.Context().batch_uncurried(count_down)
    for x in (np.array([3, 0, 5]), np.array([7, 1, 2]), np.array([9, 4, 0])):
        f(x, backend=backend)
    assert steady_launch_of(f).program is not None
    f(np.array([3, 0, 5]), backend=backend)  # the program's first call
    slow = []
    python_path = pjit._run_python_pjit
    monkeypatch.setattr(pjit, "_run_python_pjit", lambda *args, **kwargs: slow.append(1) or python_path(*args, **kwargs))
    for x in (np.array([2, 6, 1]), np.array([5, 5, 0])):
        np.testing.assert_array_equal(f(x, backend=backend), per_member(count_down, x))
    assert not slow
