"""Backend-specific tests of `TensorFlowBackend` (the shared protocol tests are in test_backend_conformance.py)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import tensorflow as tf  # noqa: E402

from abir.backends.tf_backend import TensorFlowBackend  # noqa: E402


@pytest.fixture(scope="module")
def backend() -> TensorFlowBackend:
    return TensorFlowBackend()


def test_run_on_dummies_runs_on_zero_tensors(backend: TensorFlowBackend) -> None:
    from abir.types import TensorType

    out = backend.run_on_dummies(
        lambda x, y: x * tf.cast(tf.reduce_sum(y, axis=1), x.dtype),
        [TensorType(np.float32, (4,)), TensorType(np.int64, (4, 3))],
    )
    assert backend.type_of(out) == (np.dtype(np.float32), (4,))


def test_prims_inside_a_graph_with_junk_zero_divisors(backend: TensorFlowBackend) -> None:
    """Inactive rows may hold zeros: integer division must not raise inside tf.function."""
    fn = tf.function(lambda x, y: backend.builtin_prim("floor_divide", [x, y], np.int64))
    got = fn(tf.constant([7, -7, 3], tf.int64), tf.constant([2, 0, 0], tf.int64))
    np.testing.assert_array_equal(got.numpy(), [3, 0, 0])


def test_call_opaque_numpy_function_inside_a_graph(backend: TensorFlowBackend) -> None:
    """An opaque function written with NumPy runs through tf.numpy_function in graph mode."""

    def numpy_fn(x, y):
        return np.sum(x, axis=-1, keepdims=True) + y, np.int32(2) * y

    fn = tf.function(lambda x, y: backend.call_opaque(numpy_fn, [x, y]), autograph=False)
    total, doubled = fn(tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([[1.0], [2.0]]))
    np.testing.assert_array_equal(total.numpy(), [[4.0], [9.0]])
    assert doubled.dtype == tf.float64 and doubled.shape == (2, 1)  # NumPy: int32 * float32


def test_call_opaque_other_errors_propagate(backend: TensorFlowBackend) -> None:
    def broken(x):
        raise TypeError("bad operand")

    fn = tf.function(lambda x: backend.call_opaque(broken, [x]), autograph=False)
    with pytest.raises(TypeError, match="bad operand"):
        fn(tf.constant([1.0]))
