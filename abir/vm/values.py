"""Helpers shared by the machine and the stackless executor: constants, batched operands and
opaque calls.

Inside an executor every value carries a leading batch dimension: B for values computed from
the machine state, 1 for constants (they broadcast through `where`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, IntegerAttr
from xdsl.ir import Attribute

from abir.backends.base import Backend
from abir.opaque import lookup_opaque
from abir.types import tensor_type_of


def constant_array(value: Attribute) -> np.ndarray:
    """The NumPy array `[1, *shape]` (batch dimension of 1) of a typed constant attribute."""
    ttype = tensor_type_of(value.get_type())  # type: ignore[attr-defined]
    if isinstance(value, DenseIntOrFPElementsAttr):
        data = np.asarray(value.get_values())  # flat, row-major (or a single splat value)
        if data.size == int(np.prod(ttype.shape)):
            data = data.reshape(ttype.shape)
    elif isinstance(value, IntegerAttr | FloatAttr):
        data = np.asarray(value.value.data)
    else:
        raise TypeError(f"{value} is not a constant abir can materialize")
    if ttype.dtype == np.bool_:
        data = data != 0  # i1 `true` is stored as -1
    return np.broadcast_to(data.astype(ttype.dtype), ttype.shape).reshape((1, *ttype.shape))


def event_rank(type: Attribute) -> int:
    """The number of per-member (event) dimensions of a value of IR type `type`."""
    return len(tensor_type_of(type).shape)


def rank_padding(operand_types: Sequence[Attribute], result_types: Sequence[Attribute]) -> tuple[int, ...]:
    """For each operand, how many axes to insert after the batch axis so that the per-member
    broadcasting of an elementwise prim (aligned on the right) keeps the batch axis in front."""
    ranks = [event_rank(t) for t in (*operand_types, *result_types)]
    target = max(ranks, default=0)
    return tuple(target - event_rank(t) for t in operand_types)


def align_operands(backend: Backend, values: Sequence[Any], padding: Sequence[int]) -> list[Any]:
    """Apply `rank_padding` to whole-batch operands."""
    return [backend.expand_event_dims(v, pad) for v, pad in zip(values, padding, strict=True)]


def result_dtype(type: Attribute) -> np.dtype:
    """The NumPy dtype of a result of IR type `type`."""
    return np.dtype(tensor_type_of(type).dtype)


def call_opaque_prim(
    call_opaque: Callable[[Any, list[Any]], Any], symbol: str, arguments: list[Any], count: int
) -> tuple[Any, ...]:
    """The `count` results of opaque prim `symbol` called through a backend's `call_opaque`.

    Both executors call this. The callable is looked up at every call, so a helper registered
    again takes effect, and the number of results it returns is checked."""
    results = call_opaque(lookup_opaque(symbol), arguments)
    if count == 1:
        return (results,)
    results = tuple(results)
    if len(results) != count:
        raise TypeError(f"opaque primitive @{symbol} returned {len(results)} values, expected {count}")
    return results
