"""The machine loop on TensorFlow's primitives (`TfLoop`), and the graph optimizer setting its
plain (not XLA) compiled function runs under (`without_arithmetic_optimizer`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
from tensorflow.python.eager import context

from abir.backends.base import Kernel
from abir.backends.tf.prim_ops import as_tensor
from abir.backends.traced import TracedLoop


class TfLoop(TracedLoop):
    """The machine loop on TensorFlow: `tf.while_loop`, `tf.cond` and `tf.switch_case`. Under
    XLA the switch packs the registers into groups updated in place; without XLA (no in-place
    updates, but tensors a switch passes through cost nothing) they pass through it whole."""

    def __init__(
        self, backend: Any, kernels: Sequence[Kernel], halt_index: int, stack_keys: Collection[str], xla: bool
    ):
        super().__init__(backend, kernels, halt_index, stack_keys)
        self.grouped = xla

    def while_loop(self, cond: Callable[[Any], Any], body: Callable[[Any], Any], carry: Any) -> Any:
        return tuple(tf.while_loop(lambda *c: cond(c), lambda *c: tuple(body(c)), tuple(carry)))

    def cond(self, pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any], *operands: Any) -> Any:
        return tf.cond(pred, lambda: true_fn(*operands), lambda: false_fn(*operands))

    def switch(self, index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
        return tf.switch_case(index, [functools.partial(branch, *operands) for branch in branches])

    def any(self, x: Any) -> Any:
        return tf.reduce_any(x)

    def min(self, x: Any) -> Any:
        return tf.reduce_min(x)

    def sum(self, x: Any) -> Any:
        return tf.reduce_sum(x)

    def equal(self, x: Any, y: Any) -> Any:
        return tf.equal(x, y)

    def cast(self, x: Any, dtype: Any) -> Any:
        return as_tensor(x, dtype)

    def like(self, value: Any, template: Any) -> Any:
        return tf.broadcast_to(as_tensor(value, template.dtype), tf.shape(template))

    def constant(self, array: np.ndarray) -> Any:
        return tf.constant(array)

    def stack_rows(self, rows: Sequence[Any]) -> Any:
        return tf.stack(list(rows))

    def set_row(self, array: Any, row: Any, value: Any) -> Any:
        return tf.tensor_scatter_nd_update(array, tf.reshape(row, [1, 1]), tf.expand_dims(value, 0))

    def add_at(self, vector: Any, index: int, amount: Any) -> Any:
        return vector + tf.one_hot(index, int(vector.shape[0]), dtype=vector.dtype) * amount


@contextlib.contextmanager
def without_arithmetic_optimizer() -> Iterator[None]:
    """`tf.function`s called in the block run with Grappler's arithmetic optimizer off, the
    caller's other settings kept. In graph mode it rewrites sums in conditional branches into
    empty float32 tensors: a helper computing `p + p * 1` returned `[]`
    (`abir.backends.tf.prim_ops.same_shapes` covers the builtin adds it broke, not these). The
    thread's function call options, which each call passes its graph optimizer configuration
    with, are swapped for a copy with the optimizer off, then restored; each configuration keeps
    its own instantiation of the function, so no call re-instantiates it. (Setting the global
    option, `tf.config.optimizer`, for the first call only made the second call instantiate the
    function again under the restored option: the bug came back.)"""
    eager = context.context()
    previous = eager.function_call_options
    eager.function_call_options = _options_without_arithmetic(previous.config_proto_serialized, previous.executor_type)
    try:
        yield
    finally:
        eager.function_call_options = previous


@functools.cache
def _options_without_arithmetic(config_proto: bytes, executor_type: str) -> Any:
    """Function call options: `config_proto` with the arithmetic optimizer off."""
    config = config_pb2.ConfigProto.FromString(config_proto)
    config.graph_options.rewrite_options.arithmetic_optimization = rewriter_config_pb2.RewriterConfig.OFF
    return context.FunctionCallOptions(executor_type=executor_type, config_proto=config)
