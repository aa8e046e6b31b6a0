"""What a Python variable holds while the frontend compiles a function.

A frontend value is one of
* an `SSAValue`: a batched per-member tensor computed by the program;
* a `Static`: a compile-time Python object (a literal, a function, a module, a constant from the
  enclosing scope, a namedtuple class, ...);
* a structure: a tuple, list or namedtuple whose leaves are frontend values. Structures exist
  only at compile time; at function boundaries and control-flow joins they are flattened with
  optree into their leaves.
Variables may also be bound to `MaybeUndefined`, which makes every read a located error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import optree
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, IntegerAttr, i1, i64
from xdsl.ir import Attribute, SSAValue

from abir.dialects.functional import ConstantOp, PrimOp
from abir.opaque import Helper, pending_helper
from abir.types import element_type_of, ir_type


@dataclass(frozen=True, eq=False)
class Static:
    """A compile-time Python object used by the function (never a batched value)."""

    value: Any

    def same_as(self, other: Static) -> bool:
        """Whether two statics are interchangeable (same object, or equal literals of one type)."""
        if self.value is other.value:
            return True
        if type(self.value) is not type(other.value):
            return False
        if isinstance(self.value, bool | int | float | str):
            return bool(self.value == other.value)
        return False


@dataclass(frozen=True)
class MaybeUndefined:
    """A variable that is unbound on some path reaching this point."""

    name: str
    lineno: int
    """Where the variable is first assigned (for the error message)."""


def is_leaf(value: Any) -> bool:
    return isinstance(value, SSAValue | Static)


def flatten(value: Any) -> tuple[list[Any], optree.PyTreeSpec]:
    """Leaves (SSA values and statics) and structure of a frontend value."""
    leaves, treedef = optree.tree_flatten(value, is_leaf=is_leaf)
    return leaves, treedef


def unflatten(treedef: optree.PyTreeSpec, leaves: list[Any]) -> Any:
    return optree.tree_unflatten(treedef, leaves)


def unwrap_statics(value: Any) -> Any:
    """`value` with each `Static` leaf replaced by its Python object (batched leaves kept)."""
    leaves, treedef = flatten(value)
    return unflatten(treedef, [leaf.value if isinstance(leaf, Static) else leaf for leaf in leaves])


def drop_none(value: Any) -> Any:
    """Compile-time `None` leaves become empty structure nodes (no array)."""
    leaves, treedef = flatten(value)
    return unflatten(treedef, [None if isinstance(leaf, Static) and leaf.value is None else leaf for leaf in leaves])


def describe_object(value: Any) -> str:
    """How an error message names a compile-time object: `the callable f`, `the int 3`."""
    if callable(value):
        return f"the callable {getattr(value, '__qualname__', repr(value))}"
    return f"the {type(value).__name__} {value!r}"


LEAF = optree.tree_structure(0)
"""The structure of a single array."""


def is_materializable(value: Any) -> bool:
    """Whether a compile-time object can become a per-member constant tensor."""
    if isinstance(value, np.ndarray | np.generic):
        return value.dtype.kind in "biuf"
    return isinstance(value, bool | int | float)


def constant_op(value: Any) -> ConstantOp:
    """The constant op for a number or NumPy array. Python literals are `weak` (NEP 50)."""
    if isinstance(value, np.ndarray | np.generic):
        return _array_constant(np.asarray(value))
    if isinstance(value, bool):
        return ConstantOp(IntegerAttr(int(value), i1), weak=True)
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise OverflowError(f"the integer literal {value} does not fit in 64 bits")
        return ConstantOp(IntegerAttr(value, i64), weak=True)
    if isinstance(value, float):
        return ConstantOp(FloatAttr(value, 64), weak=True)
    raise TypeError(f"{type(value).__name__} {value!r} is not a number or a NumPy array")


def _array_constant(array: np.ndarray) -> ConstantOp:
    if array.ndim == 0:
        return ConstantOp(_scalar_attr(array))
    tensor_type = ir_type(array.dtype, array.shape)
    data = [int(x) if array.dtype == np.bool_ else x.item() for x in array.reshape(-1)]
    return ConstantOp(DenseIntOrFPElementsAttr.from_list(tensor_type, data))  # type: ignore[arg-type]


def _scalar_attr(array: np.ndarray) -> Attribute:
    element = element_type_of(array.dtype)
    if array.dtype.kind == "f":
        return FloatAttr(float(array), element)  # type: ignore[arg-type]
    return IntegerAttr(int(array), element)  # type: ignore[arg-type]


def awaits_result_structure(value: Any) -> bool:
    """Whether `value` is the result of a helper call lowered before type inference learned the
    structure the helper returns: the frontend may use it in place of what it cannot lower yet (a
    part of that structure, `result.field`, or a call taking it) through `stand_in`."""
    return _pending_helper(value) is not None


def stand_in(value: Any) -> Any:
    """`value` (see `awaits_result_structure`), used as a placeholder: once type inference learns
    the helper's structure it raises `HelperStructureLearned`, even when the call's flat results
    fit that structure, so that the program is lowered again without the placeholder."""
    helper = _pending_helper(value)
    assert helper is not None, "only a helper result awaiting its structure can stand in"
    helper.stood_in = True
    return value


def _pending_helper(value: Any) -> Helper | None:
    owner = getattr(value, "owner", None)
    if not isinstance(owner, PrimOp) or owner.callee is None:
        return None
    return pending_helper(owner.prim_name)
