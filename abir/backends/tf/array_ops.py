"""TensorFlow's operations for the array prims (`abir.array_ops`) and the random draws
(`abir.random`): the factories TensorFlow's entry in `abir.backend_registry` names."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from abir.array_ops import ArrayOps, numpy_dtype
from abir.random import TensorFlowRandomOps

_HELPER_MODULE = "abir.backends.tf"
"""Where the TF backend's `NumpyTensor` lives (named, not imported: this module sits below it)."""


def tensorflow_ops() -> TensorFlowOps:
    """The array prims' operations on tensors."""
    return TensorFlowOps()


def tensorflow_random_ops(values: Sequence[Any]) -> TensorFlowRandomOps:
    """The random draws' operations on these values; results are `NumpyTensor`s (a helper's view
    of tensors) when an argument was one, so a helper keeps its NumPy operators."""
    import tensorflow as tf

    helper = next((value for value in values if type(value).__module__.startswith(_HELPER_MODULE)), None)
    if helper is None:
        return TensorFlowRandomOps(tf, None)
    numpy_tensor, backend = type(helper), helper.backend
    return TensorFlowRandomOps(tf, lambda tensor: numpy_tensor(tensor, backend))


class TensorFlowOps(ArrayOps):
    """The same operations with core TensorFlow ops (graph- and XLA-friendly; the batch size
    may be unknown while tracing, event dimensions are static)."""

    reduces_in_input_dtype = True

    def __init__(self) -> None:
        import tensorflow as tf

        self.tf = tf
        super().__init__(None)

    def asarray(self, x: Any) -> Any:
        return x if isinstance(x, self.tf.Tensor | self.tf.Variable) else self.tf.convert_to_tensor(x)

    def ndim(self, x: Any) -> int:
        return int(x.shape.rank)

    def cast(self, x: Any, dtype: Any) -> Any:
        dtype = numpy_dtype(dtype)
        return x if self.dtype(x) == dtype else self.tf.cast(x, self.tf.as_dtype(dtype))

    def _batch(self, x: Any) -> Any:
        return self.tf.shape(x)[:1]

    def broadcast_batch(self, arrays: Sequence[Any]) -> list[Any]:
        tf = self.tf
        arrays = [self.asarray(a) for a in arrays]
        if len(arrays) == 1:
            return arrays
        batch = self._batch(arrays[0])
        for a in arrays[1:]:
            batch = tf.maximum(batch, self._batch(a))
        return [tf.broadcast_to(a, tf.concat([batch, tf.shape(a)[1:]], 0)) for a in arrays]

    def reshape_event(self, x: Any, shape: Sequence[int]) -> Any:
        tf = self.tf
        return tf.reshape(x, tf.concat([self._batch(x), tf.constant(list(shape), tf.int32)], 0))

    def full_batch(self, x: Any, value: Any, dtype: Any) -> Any:
        tf = self.tf
        return tf.fill(self._batch(x), tf.constant(value, tf.as_dtype(numpy_dtype(dtype))))

    def positions(self, event: tuple[int, ...]) -> Any:
        tf = self.tf
        size = int(np.prod(event, dtype=np.int64))
        return tf.reshape(tf.range(size, dtype=tf.int64), [1, *event])

    def broadcast_member(self, x: Any, like: Any, shape: tuple[int, ...]) -> Any:
        tf = self.tf
        return tf.broadcast_to(x, tf.concat([self._batch(like), tf.constant(list(shape), tf.int32)], 0))

    def scatter(self, x: Any, positions: Any, values: Any, whole_rows: bool = False) -> Any:
        tf = self.tf
        shape = tf.shape(positions, out_type=tf.int64)
        rows = tf.broadcast_to(tf.range(shape[0])[:, None], shape)
        return tf.tensor_scatter_nd_update(x, tf.stack([rows, positions], axis=-1), values)

    def take(self, x: Any, indices: np.ndarray, axis: int) -> Any:
        size = int(x.shape[axis])
        indices = np.where(indices < 0, indices + size, indices)
        return self.tf.gather(x, indices, axis=axis)

    def gather(self, x: Any, index: Any, axis: int) -> Any:
        x, index = self.broadcast_batch([x, index])
        index = self.clip_index(index, int(x.shape[axis]))
        return self.tf.gather(x, index, axis=axis, batch_dims=1)

    def clip_index(self, index: Any, size: int) -> Any:
        tf = self.tf
        index = self.cast(self.asarray(index), np.int64)
        index = tf.where(index < 0, index + size, index)
        return tf.clip_by_value(index, tf.constant(0, tf.int64), tf.constant(max(size - 1, 0), tf.int64))

    def reduce(self, name: str, x: Any, axis: Any, keepdims: bool, ddof: int = 0) -> Any:
        tf = self.tf
        if name in ("argmax", "argmin"):
            fn = tf.math.argmax if name == "argmax" else tf.math.argmin
            out = fn(x, axis=axis, output_type=tf.int64)
            return tf.expand_dims(out, axis) if keepdims else out
        if name in ("any", "all"):
            x = self.cast(x, np.bool_)
        axis = list(axis) if isinstance(axis, tuple) else axis
        if name in ("std", "var"):
            var = tf.math.reduce_variance(x, axis=axis, keepdims=keepdims)
            if ddof:
                count = np.prod([int(x.shape[a]) for a in (axis if isinstance(axis, list) else [axis])])
                var = var * (count / max(count - ddof, 0)) if count > ddof else var * np.nan
            return tf.sqrt(var) if name == "std" else var
        fn = {"sum": tf.reduce_sum, "mean": tf.reduce_mean, "max": tf.reduce_max, "min": tf.reduce_min,
              "prod": tf.reduce_prod, "any": tf.reduce_any, "all": tf.reduce_all}[name]  # fmt: skip
        return fn(x, axis=axis, keepdims=keepdims)

    def scan(self, name: str, x: Any, axis: int) -> Any:
        fn = self.tf.math.cumsum if name == "cumsum" else self.tf.math.cumprod
        return fn(x, axis=axis)

    def transpose(self, x: Any, perm: Sequence[int]) -> Any:
        return self.tf.transpose(x, list(perm))

    def set_row(self, x: Any, row: Any, value: Any) -> Any:
        tf = self.tf
        return tf.tensor_scatter_nd_update(x, tf.reshape(tf.cast(row, tf.int32), [1, 1]), tf.expand_dims(tf.cast(value, x.dtype), 0))

    def concatenate(self, arrays: Sequence[Any], axis: int) -> Any:
        return self.tf.concat(list(arrays), axis=axis)

    def stack(self, arrays: Sequence[Any], axis: int) -> Any:
        return self.tf.stack(list(arrays), axis=axis)

    def matmul(self, a: Any, b: Any) -> Any:
        if a.dtype.is_floating:
            return self.tf.linalg.matmul(a, b)
        # integer matmul kernels are missing on some devices: multiply and reduce instead
        return self.tf.reduce_sum(self.tf.expand_dims(a, -1) * self.tf.expand_dims(b, -3), axis=-2)

    def multiply(self, a: Any, b: Any) -> Any:
        return self.tf.multiply(a, b)

    def sqrt(self, x: Any) -> Any:
        return self.tf.sqrt(x)

    def abs(self, x: Any) -> Any:
        return self.tf.abs(x)

    def squeeze(self, x: Any, axis: tuple[int, ...]) -> Any:
        return self.tf.squeeze(x, axis=list(axis)) if axis else x

    def expand_dims(self, x: Any, axis: int) -> Any:
        return self.tf.expand_dims(x, axis)

    def getitem(self, x: Any, key: tuple[Any, ...]) -> Any:
        return x[key]
