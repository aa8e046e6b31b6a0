"""Checking and broadcasting the flat argument leaves of a batched call.

Every argument has a leading batch dimension; sizes must agree or be 1 (broadcast); Python
scalars count as size 1. A leaf is cast to its variable's dtype only when the cast is safe.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from abir.backends.base import Backend
from abir.types import TensorType


def _is_python_scalar(value: Any) -> bool:
    return isinstance(value, bool | int | float) and not isinstance(value, np.generic)


def _scalar_fits(value: bool | int | float, dtype: np.dtype) -> bool:
    """Whether a Python scalar converts to `dtype` without changing its value or kind."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            return info.min <= value <= info.max
        return dtype.kind == "f"
    return dtype.kind == "f"


def _check_dtype(name: str, value: Any, have: np.dtype, want: np.dtype) -> None:
    ok = _scalar_fits(value, want) if _is_python_scalar(value) else np.can_cast(have, want, "safe")
    if not ok:
        raise TypeError(
            f"input {name!r} has dtype {have}, which cannot be converted safely to {want}, the type the "
            f"program was compiled for; pass an array of dtype {want} (e.g. x.astype(np.{want}))"
        )


def _event_shape(name: str, value: Any, backend: Backend, want: TensorType) -> tuple[int, ...]:
    """The leaf's shape with a batch dimension (Python scalars become size-1 batches)."""
    shape = () if _is_python_scalar(value) else tuple(backend.type_of(value).shape)
    if not shape:
        shape = (1,)
    if tuple(shape[1:]) != tuple(want.shape):
        raise ValueError(
            f"input {name!r} has shape {list(shape)}, but each batch member must have shape "
            f"{list(want.shape)} (leading batch dimension first)"
        )
    return shape


def batch_size_of(caller: str, shapes: Sequence[tuple[int, ...]], names: Callable[[], Sequence[str]]) -> int:
    """The common batch size of leaves with `shapes`: every leaf has leading dimension B or 1 (a
    scalar counts as 1). `caller` is who got them; `names()` names the leaves as an error does
    (called only for the error)."""
    sizes = [shape[0] if shape else 1 for shape in shapes]
    big = sorted(set(sizes) - {1})
    if len(big) > 1:
        which = ", ".join(f"{name} has {size}" for name, size in zip(names(), sizes, strict=True) if size != 1)
        raise ValueError(
            f"{caller} got arguments with mismatched batch sizes {', '.join(map(str, big))}; every argument's "
            f"leading (batch) dimension must be the same or 1 (the batch sizes disagree: {which})"
        )
    return big[0] if big else 1


def prepare_inputs(
    names: Sequence[str], types: Sequence[TensorType], args: Sequence[Any], backend: Backend, for_run: bool = False
) -> tuple[int, list[Any]]:
    """Check the leaves against the input types; return (B, leaves as `[B, *shape]` arrays).
    `for_run`: the leaves go into a machine run's state, so NumPy ones are as the backend's
    `run_input` keeps them."""
    if len(args) != len(types):
        raise TypeError(f"the program takes {len(types)} input(s) ({', '.join(names)}), got {len(args)}")
    shapes = []
    arrays = []
    for name, want, value in zip(names, types, args, strict=True):
        want_dtype = np.dtype(want.dtype)
        # the common call: nothing to check or cast (a traced value takes the caller's dtypes)
        if is_exact_input(value, want_dtype, want.shape) and not backend.is_traced(value):
            shapes.append(value.shape)
            arrays.append(value)
            continue
        have = np.asarray(value).dtype if _is_python_scalar(value) else np.dtype(backend.type_of(value).dtype)
        _check_dtype(name, value, have, want_dtype)
        shape = _event_shape(name, value, backend, want)
        shapes.append(shape)
        arrays.append(np.asarray(value, want_dtype) if _on_host(value) else backend.asarray(value, want_dtype))
    batch = batch_size_of("the program", shapes, lambda: [f"input {name!r}" for name in names])
    leaves = [
        _broadcast(backend, array, shape, batch, want, for_run)
        for array, shape, want in zip(arrays, shapes, types, strict=True)
    ]
    return batch, leaves


def is_exact_input(value: Any, dtype: np.dtype, event_shape: Sequence[int]) -> bool:
    """A NumPy or JAX array of exactly `dtype` with a batch dimension before `event_shape`."""
    shape = getattr(value, "shape", None)
    return (
        type(getattr(value, "dtype", None)) is type(dtype)
        and value.dtype == dtype
        and shape is not None
        and len(shape) == len(event_shape) + 1
        and tuple(shape[1:]) == tuple(event_shape)
    )


def _on_host(value: Any) -> bool:
    """A Python scalar or NumPy value: cast and broadcast with NumPy, then handed to the backend
    once (on JAX each eager cast or broadcast would compile a small XLA program first)."""
    return _is_python_scalar(value) or isinstance(value, np.ndarray | np.generic)


def _broadcast(
    backend: Backend, array: Any, shape: tuple[int, ...], batch: int, want: TensorType, for_run: bool
) -> Any:
    """Reshape scalars to a size-1 batch and spread size-1 batches to B (a backend's array by
    `Backend.spread_row`, which may keep the one row)."""
    if len(getattr(array, "shape", ())) == 0:
        array = array[None]
    if isinstance(array, np.ndarray):
        full = np.broadcast_to(array, (batch, *want.shape)).copy() if shape[0] != batch else array
        return backend.run_input(full) if for_run else backend.asarray(full, array.dtype)
    if shape[0] == batch:
        return array
    return backend.spread_row(array, batch, want)
