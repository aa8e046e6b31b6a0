"""abir inside a TensorFlow user's `tf.function` (AutoGraph on, with and without
`jit_compile=True`): a batched function called with `backend=abir.TensorFlowBackend()` on
symbolic tensors stages its machine into that graph. Every result is checked against the plain
per-member Python run (`dry_run=True`). A staged run's errors fail the graph's run, or, in an
`abir.tf_function` (also under XLA, where nothing can raise inside the program), raise abir's
own error when the call returns."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from interop_programs import fib, halving_steps  # noqa: E402

import abir  # noqa: E402
from abir.backends.tf import UnreportedErrorsWarning  # noqa: E402

CTX = abir.Context()
batched_fib = CTX.batch_uncurried(fib)
halving = CTX.batch_uncurried(halving_steps)
N = np.array([3, 7, 10, 1])


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("backend_xla", [False, True])
def test_inside_a_tf_function_the_machine_is_staged_into_its_graph(jit_compile, backend_xla):
    backend = abir.TensorFlowBackend(jit_compile=backend_xla)
    staged = tf.function(lambda n: batched_fib(n, backend=backend) * 2, jit_compile=jit_compile)
    got = staged(tf.constant(N))
    assert tf.is_tensor(got)
    np.testing.assert_array_equal(got.numpy(), 2 * batched_fib(N, dry_run=True))
    graph = staged.get_concrete_function(tf.TensorSpec(N.shape, tf.int64)).graph
    assert not any(op.type in ("EagerPyFunc", "PyFunc") for op in graph.get_operations())


@pytest.mark.parametrize("jit_compile", [False, True])
def test_float_programs_and_a_shared_tolerance(jit_compile):
    x = np.array([1.0, 10.0, 1000.0])
    staged = tf.function(lambda x, t: halving(x, t, backend=abir.TensorFlowBackend()), jit_compile=jit_compile)
    values, steps = staged(tf.constant(x), tf.constant(0.3, tf.float64))
    want_values, want_steps = halving(x, 0.3, dry_run=True)
    np.testing.assert_array_equal(values.numpy(), want_values)
    np.testing.assert_array_equal(steps.numpy(), want_steps)


def test_a_staged_run_in_a_graph_reports_its_errors_when_the_graph_runs():
    deep = tf.function(lambda n: batched_fib(n, backend=abir.TensorFlowBackend(), max_stack_depth=3))
    np.testing.assert_array_equal(deep(tf.constant([3, 4])).numpy(), [2, 3])
    with pytest.raises(tf.errors.InvalidArgumentError, match="recursed deeper than max_stack_depth=3"):
        deep(tf.constant([3, 9]))


# under XLA: test_under_plain_xla_a_staged_run_warns_and_poisons_failing_members (conftest.py, rule 2)
@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=pytest.mark.full)])
def test_abir_tf_function_raises_abirs_errors_after_the_call(jit_compile):
    @abir.tf_function(jit_compile=jit_compile)
    def deep(n, x):
        backend = abir.TensorFlowBackend()
        return batched_fib(n, backend=backend, max_stack_depth=3) * 2, halving(x, 0.3, backend=backend, max_steps=20)

    x = np.array([1.0, 10.0])
    got, (values, steps) = deep(tf.constant([3, 4]), tf.constant(x))
    np.testing.assert_array_equal(got.numpy(), [4, 6])
    np.testing.assert_array_equal(steps.numpy(), halving(x, 0.3, dry_run=True)[1])
    with pytest.raises(abir.StackOverflowError, match="function 'fib'.*batch member 1 recursed deeper than max_stack_depth=3"):
        deep(tf.constant([3, 9]), tf.constant(x))
    with pytest.raises(abir.StepLimitError, match="max_steps=20 reached: 1 member still running .batch member 1 in function 'halving_steps' at "):
        deep(tf.constant([3, 4]), tf.constant(np.array([1.0, 1e300])))
    # a call of another shape traces again; each trace's errors are checked with its own flags
    with pytest.raises(abir.StackOverflowError, match="batch member 2 recursed"):
        deep(tf.constant([3, 4, 10]), tf.constant(np.array([1.0, 10.0, 5.0])))
    np.testing.assert_array_equal(deep(tf.constant([3, 4]), tf.constant(x))[0].numpy(), [4, 6])


def test_abir_tf_function_inside_other_functions():
    inner = abir.tf_function(lambda n: batched_fib(n, backend=abir.TensorFlowBackend(), max_stack_depth=3))
    checked_outer = abir.tf_function(lambda n: inner(n) + 1, jit_compile=True)
    np.testing.assert_array_equal(checked_outer(tf.constant([3, 4])).numpy(), [3, 4])
    with pytest.raises(abir.StackOverflowError, match="max_stack_depth=3"):  # collected by the outer one
        checked_outer(tf.constant([3, 9]))
    plain_outer = tf.function(lambda n: inner(n) + 1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="recursed deeper than max_stack_depth=3"):
        plain_outer(tf.constant([3, 9]))


def test_under_plain_xla_a_staged_run_warns_and_poisons_failing_members():
    """XLA cannot raise: the first trace warns, naming abir.tf_function and the errors the run
    would not report, and failing members' results are poisoned. (Limits unique to this test:
    the warning is issued once per batched function and limits in a process.)"""
    halving_xla = tf.function(lambda x: halving(x, 0.3, backend=abir.TensorFlowBackend(), max_steps=21), jit_compile=True)
    fib_xla = tf.function(lambda n: batched_fib(n, backend=abir.TensorFlowBackend(), max_stack_depth=4), jit_compile=True)
    with pytest.warns(UnreportedErrorsWarning, match="abir.tf_function.*reached max_steps=21") as warned:
        values, steps = halving_xla(tf.constant(np.array([10.0, 1e300, 5.0])))
    assert "staged run of 'halving_steps'" in str(warned[0].message) and warned[0].filename == __file__
    assert np.isnan(values.numpy()[1]) and steps.numpy()[1] == np.iinfo(np.int64).min
    np.testing.assert_array_equal(steps.numpy()[[0, 2]], halving(np.array([10.0, 5.0]), 0.3, dry_run=True)[1])
    with pytest.warns(UnreportedErrorsWarning, match="max_stack_depth=4"):
        np.testing.assert_array_equal(fib_xla(tf.constant([3, 9, 4])).numpy(), [2, np.iinfo(np.int64).min, 3])
    with warnings.catch_warnings():  # without XLA the graph's assertion raises: no warning
        warnings.simplefilter("error", UnreportedErrorsWarning)
        tf.function(lambda n: batched_fib(n, backend=abir.TensorFlowBackend()))(tf.constant([3, 4]))


def test_under_plain_xla_the_warning_comes_once_not_per_call_or_trace():
    """A correct program is not flooded: later calls, traces for other shapes and other
    tf.functions staging the same batched function with the same limits warn no more."""
    staged = tf.function(lambda n: batched_fib(n, backend=abir.TensorFlowBackend(), max_stack_depth=5), jit_compile=True)
    with pytest.warns(UnreportedErrorsWarning, match="max_stack_depth=5") as warned:
        np.testing.assert_array_equal(staged(tf.constant([3, 4])).numpy(), [2, 3])
    assert len(warned) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnreportedErrorsWarning)
        np.testing.assert_array_equal(staged(tf.constant([3, 4])).numpy(), [2, 3])
        np.testing.assert_array_equal(staged(tf.constant([3, 4, 5])).numpy(), [2, 3, 5])
        again = tf.function(lambda n: batched_fib(n, backend=abir.TensorFlowBackend(), max_stack_depth=5) + 1, jit_compile=True)
        np.testing.assert_array_equal(again(tf.constant([6])).numpy(), [9])


def test_abir_tf_function_run_eagerly_raises_at_once():
    checked = abir.tf_function(lambda n: batched_fib(n, backend=abir.TensorFlowBackend(), max_stack_depth=3))
    tf.config.run_functions_eagerly(True)
    try:
        np.testing.assert_array_equal(checked(tf.constant([3, 4])).numpy(), [2, 3])
        with pytest.raises(abir.StackOverflowError, match="max_stack_depth=3"):
            checked(tf.constant([3, 9]))
    finally:
        tf.config.run_functions_eagerly(False)
    assert list(checked._traces) == [-1]  # eager calls keep no trace records
