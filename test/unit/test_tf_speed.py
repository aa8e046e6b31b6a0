"""The TensorFlow backend's fast paths keep results equal to per-member Python: stack writes by a
one-hot select under XLA (`ONE_HOT_STACK_MAX`), and later calls of a compiled loop made on its
concrete function (`SteadyFunction`). Structural checks of which path a graph takes; no timings."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from interop_programs import fib, halving_steps  # noqa: E402

import abir  # noqa: E402
from abir.backends.base import ONE_HOT_STACK_MAX  # noqa: E402
from abir.backends.tf import TensorFlowBackend  # noqa: E402
from abir.backends.tf.backend import MATERIALIZE_MIN_ELEMENTS_PER_MEMBER, SteadyFunction  # noqa: E402

CTX = abir.Context()
batched_fib = CTX.batch_uncurried(fib)
halving = CTX.batch_uncurried(halving_steps)


# jit_compile=True: the default (None) compiles the same program with XLA (test/unit/conftest.py, rule 2)
@pytest.mark.parametrize("jit_compile", [None, pytest.param(True, marks=pytest.mark.full), False])
def test_repeated_calls_equal_python(jit_compile):
    """The first call traces and compiles; the later ones (the concrete function's flat call)
    and a call with another batch size (another signature) give the per-member results."""
    backend = TensorFlowBackend(jit_compile=jit_compile)
    for n in (np.array([3, 7, 10, 1, 12]), np.array([3, 7, 10, 1, 12]), np.array([9, 2, 6])):
        np.testing.assert_array_equal(batched_fib(n, backend=backend, max_stack_depth=16), batched_fib(n, dry_run=True))
        x, tolerance = n.astype(np.float64) * 3.5, np.full(n.shape, 0.25)
        for got, want in zip(halving(x, tolerance, backend=backend), halving(x, tolerance, dry_run=True), strict=True):
            np.testing.assert_array_equal(got, want)


def _scatter_ops(function, *specs) -> int:
    graph = function.get_concrete_function(*specs).graph
    return sum(op.type == "TensorScatterUpdate" for op in graph.get_operations())


def _numpy_scatter(stack, rows, value, mask=None):
    out = stack.copy()
    for b, row in enumerate(rows):
        if 0 <= row < stack.shape[0] and (mask is None or mask[b]):
            out[row, b] = value[b]
    return out


@pytest.mark.parametrize("xla", [True, False])
@pytest.mark.parametrize("shape", [(6, 5), (4, 5, 3), (ONE_HOT_STACK_MAX // 4 + 1, 4)])
def test_stack_writes_one_hot_under_xla_only_for_small_stacks(xla, shape):
    backend = TensorFlowBackend()
    rng = np.random.default_rng(0)
    stack = rng.normal(size=shape)
    rows = np.array([0, shape[0] - 1, shape[0], 2, -1][: shape[1]] + [1] * max(0, shape[1] - 5), np.int32)
    value = rng.normal(size=shape[1:])
    mask = np.array([True, False, True, True, True][: shape[1]] + [True] * max(0, shape[1] - 5))
    scatter = tf.function(lambda s, r, v: backend.stack_scatter(s, r, v), jit_compile=xla, autograph=False)
    write = tf.function(lambda s, r, v, m: backend.stack_write(s, r, v, m), jit_compile=xla, autograph=False)
    args = (tf.constant(stack), tf.constant(rows), tf.constant(value))
    in_range = np.where(rows >= 0, rows, shape[0])  # stack_scatter's rows are never negative
    np.testing.assert_array_equal(scatter(args[0], tf.constant(in_range, tf.int32), args[2]).numpy(),
                                  _numpy_scatter(stack, in_range, value))  # fmt: skip
    np.testing.assert_array_equal(write(*args, tf.constant(mask)).numpy(), _numpy_scatter(stack, rows, value, mask))
    one_hot = xla and np.prod(shape) <= ONE_HOT_STACK_MAX
    assert (_scatter_ops(scatter, *args) == 0) == one_hot
    assert (_scatter_ops(write, *args, tf.constant(mask)) == 0) == one_hot


def test_steady_function_calls_each_signature_on_its_concrete_function():
    traced = []

    def loop(state, iterations):
        traced.append(1)
        return {"x": state["x"] * 2.0 + tf.cast(iterations, tf.float64), "pc": state["pc"] + 1}

    steady = SteadyFunction(tf.function(loop, jit_compile=True, autograph=False))
    for batch in (4, 4, 4, 3, 3):
        state = {"x": tf.constant(np.arange(batch, dtype=np.float64)), "pc": tf.zeros([batch], tf.int32)}
        got = steady(state, tf.constant(5, tf.int32))
        np.testing.assert_array_equal(got["x"].numpy(), np.arange(batch) * 2.0 + 5)
        np.testing.assert_array_equal(got["pc"].numpy(), np.ones(batch))
    assert len(steady.concrete) == 2 and len(traced) == 2


def _heavy_helper(x):
    for _ in range(MATERIALIZE_MIN_ELEMENTS_PER_MEMBER // 2):
        x = np.sin(x) + 1.0
    return x


def _conditionals(function, *specs) -> int:
    graph = function.get_concrete_function(*specs).graph
    return sum(op.type in ("If", "StatelessIf") for op in graph.get_operations())


@pytest.mark.parametrize("xla", [True, False])
def test_costly_helper_results_come_out_of_a_conditional_under_xla(xla):
    backend = TensorFlowBackend()
    x = tf.constant(np.linspace(-2.0, 2.0, 8))
    heavy = tf.function(lambda x: backend.call_opaque(_heavy_helper, [x]), jit_compile=xla, autograph=False)
    cheap = tf.function(lambda x: backend.call_opaque(np.sin, [x]), jit_compile=xla, autograph=False)
    np.testing.assert_allclose(heavy(x).numpy(), _heavy_helper(x.numpy()), rtol=1e-12)
    np.testing.assert_allclose(cheap(x).numpy(), np.sin(x.numpy()), rtol=1e-15)
    assert _conditionals(heavy, x) == (1 if xla else 0)
    assert _conditionals(cheap, x) == 0


def gaussian_draws(key, n):
    total = 0.0
    i = 0
    while i < n:
        total = total + abir.random.normal(key, i, shape=(12,)).sum()
        i += 1
    return total


batched_draws = CTX.batch_uncurried(gaussian_draws)


@pytest.mark.parametrize("jit_compile", [None, False])
def test_random_draws_equal_python(jit_compile):
    """A loop of normal draws (a helper costly enough to be materialized under XLA)."""
    keys = np.stack([abir.random.key(seed) for seed in range(5)])
    n = np.array([1, 4, 0, 3, 2])
    backend = TensorFlowBackend(jit_compile=jit_compile)
    for _ in range(2):
        np.testing.assert_allclose(batched_draws(keys, n, backend=backend), batched_draws(keys, n, dry_run=True), rtol=1e-12)
