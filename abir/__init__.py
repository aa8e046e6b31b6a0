"""abir: auto-batching compiler for per-example Python with real control flow.

Write a Python function for ONE example, decorate it with `Context.batch`, and call it on a
batch: every member keeps its own program counter and the machine runs one basic block at a
time for the members that stand at it, on NumPy, TensorFlow or JAX/XLA.
"""

from abir.errors import (
    AbirError,
    StackOverflowError,
    StackUnderflowError,
    TypeInferenceError,
    UnsupportedSyntaxError,
)
from abir.types import TensorType, Type

__all__ = [
    "AbirError",
    "StackOverflowError",
    "StackUnderflowError",
    "TensorType",
    "Type",
    "TypeInferenceError",
    "UnsupportedSyntaxError",
]
