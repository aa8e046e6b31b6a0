"""The benchmark programs for TFP's `tfp.experimental.auto_batching` (the reference system).

Imported only when `tensorflow_probability` is importable. TFP has no `while` loops, so Collatz
is written as tail recursion (TFP turns tail calls into jumps); fibonacci is the same program.
Its functions are registered in a fresh TFP Context per benchmark so that compile caches do not
leak between measurements.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow_probability.python.experimental import auto_batching as ab


def fib(n):
    if ab.truthy(n > 1):
        return fib(n - 1) + fib(n - 2)
    else:
        return 1


def collatz(n, steps):
    if ab.truthy(n > 1):
        if ab.truthy(n % 2 == 0):
            return collatz(n // 2, steps + 1)
        else:
            return collatz(3 * n + 1, steps + 1)
    else:
        return steps


def _register(program: str) -> Any:
    context = ab.Context()
    if program == "fib":
        return context.batch_uncurried(fib, type_inference=lambda arg_types: arg_types[0])
    return context.batch_uncurried(collatz, type_inference=lambda arg_types: arg_types[1])


def _arguments(program: str, x: Any) -> tuple[Any, ...]:
    return (x,) if program == "fib" else (x, x - x)


def runner(program: str, backend: str, max_stack_depth: int) -> Callable[[np.ndarray], Any]:
    """A callable on int64 inputs: backend "tfp-numpy" (eager NumPy VM) or "tfp-tf-xla" (the whole
    VM inside `tf.function(jit_compile=True)` with `safety_checks=False`, as TFP's XLA tests do)."""
    batched = _register(program)
    if backend == "tfp-numpy":
        numpy_backend = ab.NumpyBackend()
        return lambda x: batched(
            *_arguments(program, x), backend=numpy_backend, max_stack_depth=max_stack_depth
        )
    tf_backend = ab.TensorFlowBackend(safety_checks=False)

    @tf.function(autograph=False, jit_compile=True)
    def compiled(x: tf.Tensor) -> tf.Tensor:
        return batched(*_arguments(program, x), backend=tf_backend, max_stack_depth=max_stack_depth)

    return lambda x: compiled(tf.constant(x)).numpy()
