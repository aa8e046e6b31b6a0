"""abir inside a TensorFlow user's `tf.function` (AutoGraph on, with and without
`jit_compile=True`): a batched function called with `backend=abir.TensorFlowBackend()` on
symbolic tensors stages its machine into that graph. Every result is checked against the plain
per-member Python run (`dry_run=True`)."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from interop_programs import fib, halving_steps  # noqa: E402

import abir  # noqa: E402

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
