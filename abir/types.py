"""Per-member types: the user-facing `TensorType`/`Type` and their builtin-IR counterparts.

A per-member value is a NumPy dtype plus an event shape (never the batch dimension). In the IR
it is a builtin type: a scalar element type (`i1`, `i32`, `i64`, `f32`, `f64`, `complex<f64>`, ...) for shape
`()`, or a ranked `tensor<3xf64>` otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    ComplexType,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
)
from xdsl.dialects.builtin import (
    TensorType as BuiltinTensorType,
)
from xdsl.ir import Attribute


class TensorType(NamedTuple):
    """The type of one per-member array: a NumPy dtype and an event shape (no batch dim)."""

    dtype: Any
    shape: tuple[int, ...]


class Type(NamedTuple):
    """The type of one variable: a pattern (nested tuples/lists) of `TensorType` leaves."""

    tensors: Any


_FLOATS: dict[np.dtype, Attribute] = {
    np.dtype(np.float16): Float16Type(),
    np.dtype(np.float32): Float32Type(),
    np.dtype(np.float64): Float64Type(),
}


def element_type_of(dtype: Any) -> Attribute:
    """The builtin element type for a NumPy dtype (bool is `i1`, uint32 is `ui32`)."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return IntegerType(1)
    if dt in _FLOATS:
        return _FLOATS[dt]
    if dt.kind == "i":
        return IntegerType(dt.itemsize * 8)
    if dt.kind == "u":
        return IntegerType(dt.itemsize * 8, Signedness.UNSIGNED)
    if dt.kind == "c" and np.dtype(f"f{dt.itemsize // 2}") in _FLOATS:
        return ComplexType(_FLOATS[np.dtype(f"f{dt.itemsize // 2}")])
    raise TypeError(f"abir cannot represent dtype {dt} in its IR; use bool, int, uint, float or complex arrays")


def dtype_of(element_type: Attribute) -> np.dtype:
    """The NumPy dtype of a builtin element type."""
    if isinstance(element_type, IntegerType):
        width = element_type.width.data
        if width == 1:
            return np.dtype(np.bool_)
        if element_type.signedness.data == Signedness.UNSIGNED:
            return np.dtype(f"uint{width}")
        return np.dtype(f"int{width}")
    for dt, attr in _FLOATS.items():
        if element_type == attr:
            return dt
    if isinstance(element_type, ComplexType) and element_type.element_type in _FLOATS.values():
        return np.result_type(dtype_of(element_type.element_type), np.complex64)
    if isinstance(element_type, BFloat16Type):
        raise TypeError("bf16 values are not supported by abir's backends")
    raise TypeError(f"{element_type} is not a per-member element type abir understands")


def ir_type(dtype: Any, shape: Sequence[int] = ()) -> Attribute:
    """The builtin IR type of a per-member value with this dtype and event shape."""
    element = element_type_of(dtype)
    if len(shape) == 0:
        return element
    return BuiltinTensorType(element, list(shape))


def is_value_type(attr: Attribute) -> bool:
    """Whether `attr` is a concrete per-member type (scalar element or ranked static tensor)."""
    try:
        tensor_type_of(attr)
    except TypeError:
        return False
    return True


def tensor_type_of(attr: Attribute) -> TensorType:
    """The `TensorType` (dtype, event shape) of a builtin IR type."""
    if isinstance(attr, BuiltinTensorType):
        shape = tuple(attr.get_shape())
        if any(d < 0 for d in shape):
            raise TypeError(f"{attr} has a dynamic dimension; per-member shapes must be static")
        return TensorType(dtype_of(attr.element_type), shape)
    return TensorType(dtype_of(attr), ())


MAX_MEMBER_ELEMENTS = 1 << 24
"""The most elements a per-member type read from text may have (16 Mi). The tools refuse larger
types while parsing, before anything that size is allocated: xDSL's parser expands a splat
`dense` constant to one Python number per element."""


def oversized_message(type_text: str, shape: Sequence[int]) -> str | None:
    """What to say of a type whose static shape has more than `MAX_MEMBER_ELEMENTS` elements
    (dynamic dimensions count as none), or None if it is small enough."""
    count = 1
    for dim in shape:
        count *= max(int(dim), 0)
    if count <= MAX_MEMBER_ELEMENTS:
        return None
    return (
        f"{type_text} has {count} elements, more than {MAX_MEMBER_ELEMENTS} per member (16 Mi); abir refuses "
        "larger types rather than allocate them: use a smaller shape"
    )
