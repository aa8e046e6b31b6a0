"""The exception boundary of a batched call: what a user sees is an abir error (`abir.errors`) or
the Python error a member's plain run raises, never an exception from abir's machinery.

An exception of a class defined by xDSL, JAX or TensorFlow (but for the runtime errors through
which JAX and TensorFlow report failures inside a compiled program), or a programming error
(`AssertionError`, `AttributeError`, `NameError`) raised in abir's own code, is a bug in abir:
it becomes an `InternalError` naming the function and asking for a report, the original kept
as `__cause__`. Everything else passes unchanged: abir's errors, the `TypeError`s and
`ValueError`s abir raises for a call's arguments and options, and what a user's helper raises.
"""

from __future__ import annotations

import os
from typing import Any

from abir.errors import AbirError, InternalError

INTERNAL_MODULES = ("xdsl", "jax", "jaxlib", "tensorflow")
"""Packages whose own exception classes never describe a user's mistake in a batched call."""
RUNTIME_ERRORS = ("JaxRuntimeError", "XlaRuntimeError", "OpError")
"""Exception classes (by name, with their subclasses) through which JAX and TensorFlow report an
error raised while a compiled program runs (abir's runtime checks, a helper's failure): they
carry abir's or the user's message and pass unchanged."""
PROGRAMMING_ERRORS = (AssertionError, AttributeError, NameError)
"""Exception types that, raised in abir's own code, are a bug in abir."""
ABIR_DIRECTORY = os.path.dirname(os.path.abspath(__file__))


class batched_call_boundary:  # noqa: N801 (used as a function: `with batched_call_boundary(name):`)
    """Run a batched call of `function`, turning an internal exception into an `InternalError`
    (a class, not a generator: entered on every call, it costs a fraction of one)."""

    __slots__ = ("function",)

    def __init__(self, function: str):
        self.function = function

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: Any) -> None:
        if error is None or not isinstance(error, Exception) or isinstance(error, AbirError):
            return
        if is_internal(error):
            raise InternalError(
                f"calling batched function '{self.function}' failed inside abir with {type(error).__name__}: {error}\n"
                "This is a bug in abir, not in your program; please report it with the function and the "
                "arguments' shapes and dtypes"
            ) from error


def is_internal(error: BaseException) -> bool:
    """Whether `error` comes from abir's machinery rather than from the user's program or call."""
    root = type(error).__module__.split(".", 1)[0]
    if root in INTERNAL_MODULES:
        return not any(cls.__name__ in RUNTIME_ERRORS for cls in type(error).__mro__)
    return isinstance(error, PROGRAMMING_ERRORS) and _raised_in_abir(error)


def _raised_in_abir(error: BaseException) -> bool:
    """Whether the innermost frame of `error`'s traceback is in abir's own code."""
    traceback = error.__traceback__
    if traceback is None:
        return False
    while traceback.tb_next is not None:
        traceback = traceback.tb_next
    return os.path.abspath(traceback.tb_frame.f_code.co_filename).startswith(ABIR_DIRECTORY)
