"""The builtin primitive operations: elementwise functions named as in the Python Array API.

`functional.prim`, `stack.prim` and `vm.prim` name one of these (or an opaque callable). Every
backend maps each name to its own array namespace with NumPy semantics; `apply_numpy` is the
reference implementation, also used for dtype and shape inference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

UNARY = (
    "negative", "positive", "abs", "logical_not", "bitwise_invert", "sqrt", "exp", "expm1", "log",
    "log1p", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
    "asinh", "acosh", "atanh", "floor", "ceil", "round", "trunc", "sign", "square", "isnan", "isinf",
    "isfinite", "copy",
)  # fmt: skip
BINARY = (
    "add", "subtract", "multiply", "divide", "floor_divide", "remainder", "pow", "less", "less_equal",
    "greater", "greater_equal", "equal", "not_equal", "logical_and", "logical_or", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "maximum",
    "minimum", "atan2", "hypot", "logaddexp",
)  # fmt: skip
TERNARY = ("where",)
# `astype` converts its operand to the element type of the op's result type.
CONVERSIONS = ("astype",)

ARITY: dict[str, int] = {
    **{name: 1 for name in UNARY},
    **{name: 2 for name in BINARY},
    **{name: 3 for name in TERNARY},
    **{name: 1 for name in CONVERSIONS},
}

COMPARISONS = frozenset(
    {"less", "less_equal", "greater", "greater_equal", "equal", "not_equal", "isnan", "isinf", "isfinite"}
)


# Prims whose operands are compared/combined in their common promoted dtype (the result is bool):
# backends whose libraries do not promote mixed operands cast both to that dtype first.
COMMON_DTYPE_PRIMS = COMPARISONS | {"logical_and", "logical_or", "logical_xor", "logical_not"}


def is_builtin(name: str) -> bool:
    """Whether `name` is a builtin primitive."""
    return name in ARITY


def numpy_function(name: str) -> Callable[..., Any]:
    """The NumPy function implementing builtin primitive `name` (not `astype`/`copy`)."""
    if not is_builtin(name):
        raise ValueError(f'"{name}" is not a builtin prim; the builtin prims are {sorted(ARITY)}')
    if name == "copy":
        return np.copy
    return getattr(np, name)


def apply_numpy(name: str, args: Sequence[Any], result_dtype: Any = None) -> Any:
    """Run builtin primitive `name` with NumPy semantics (NEP 50 promotion for Python scalars)."""
    if name == "astype":
        if result_dtype is None:
            raise ValueError("astype needs the result dtype")
        return np.asarray(args[0]).astype(result_dtype)
    with np.errstate(all="ignore"):  # rows of inactive members hold junk (x % 0, log(-1), ...)
        return numpy_function(name)(*args)
