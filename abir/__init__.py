"""abir: auto-batching compiler for per-example Python with real control flow.

Write a Python function for ONE example, decorate it with `Context.batch`, and call it on a
batch: every member keeps its own program counter and the machine runs each basic block for the
members that stand at it (on JAX and TensorFlow sweeping the blocks in order, on NumPy one block
per step), on NumPy, TensorFlow or JAX/XLA.
"""

from typing import Any

from abir import random  # counter-based per-member draws (imports only NumPy)
from abir.errors import (
    AbirError,
    HelperError,
    MemberRunError,
    StackOverflowError,
    StackUnderflowError,
    StepLimitError,
    TypeInferenceError,
    UnsupportedSyntaxError,
)
from abir.types import TensorType, Type

# Heavy modules (the frontend, JAX, TensorFlow) load on first use.
_LAZY = {
    "Context": ("abir.context", "Context"),
    "truthy": ("abir.dry_run", "truthy"),
    "NumpyBackend": ("abir.backends.numpy_backend", "NumpyBackend"),
    "JaxBackend": ("abir.backends.jax", "JaxBackend"),
    "TensorFlowBackend": ("abir.backends.tf", "TensorFlowBackend"),
    "RunStats": ("abir.backends.base", "RunStats"),
    "BackendProtocol": ("abir.backends.base", "BackendProtocol"),
    "run_module": ("abir.running", "run_module"),
    "tf_function": ("abir.backends.tf", "tf_function"),
    "staged_error": ("abir.backends.jax", "staged_error"),
    "UncompilableHelperError": ("abir.opaque", "UncompilableHelperError"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'abir' has no attribute {name!r}")
    import importlib

    module_name, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module_name), attribute)
    globals()[name] = value
    return value


__all__ = [
    "AbirError",
    "BackendProtocol",
    "Context",
    "HelperError",
    "JaxBackend",
    "MemberRunError",
    "NumpyBackend",
    "RunStats",
    "StackOverflowError",
    "StackUnderflowError",
    "StepLimitError",
    "TensorFlowBackend",
    "TensorType",
    "Type",
    "TypeInferenceError",
    "UncompilableHelperError",
    "UnsupportedSyntaxError",
    "random",
    "run_module",
    "staged_error",
    "tf_function",
    "truthy",
]
