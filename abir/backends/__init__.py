"""Backends: one protocol (`base.BackendProtocol`, implemented once in `base.Backend`), one
implementation per array library; `variables` holds the variables `create_variable` returns.

`NumpyBackend` is imported eagerly; `JaxBackend` and `TensorFlowBackend` load their library
only when first named, so importing abir does not import JAX or TensorFlow.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from abir.backends.base import (
    Backend,
    BackendProtocol,
    Kernel,
    RunStats,
    Scheduler,
    State,
    smallest_live_block,
)
from abir.backends.numpy_backend import NumpyBackend

_LAZY = {
    "JaxBackend": "abir.backends.jax",
    "TensorFlowBackend": "abir.backends.tf",
}

__all__ = [
    "Backend",
    "BackendProtocol",
    "JaxBackend",
    "Kernel",
    "NumpyBackend",
    "RunStats",
    "Scheduler",
    "State",
    "TensorFlowBackend",
    "smallest_live_block",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'abir.backends' has no attribute {name!r}")
