"""Builtin prims on TensorFlow ops with NumPy's semantics: operands cast to the dtype NumPy
computes in, the result to the dtype NumPy gives (`tf_function_for`, `compute_dtype`); integer
division by zero yields 0 as in NumPy (TF would raise); maximum and minimum propagate NaN.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from abir import prims

# Prims TF lacks kernels for on 8/16-bit integers: computed in int32, then cast back (the
# wrap-around of two's complement makes this identical to NumPy's narrow arithmetic).
_WIDEN_SMALL_INTS = {"add", "subtract", "multiply", "floor_divide", "remainder", "pow", "square", "negative",
                     "abs", "sign", "maximum", "minimum", "less", "less_equal", "greater", "greater_equal"}  # fmt: skip
_BOOL_ALGEBRA = {"add": tf.math.logical_or, "maximum": tf.math.logical_or, "bitwise_or": tf.math.logical_or,
                 "multiply": tf.math.logical_and, "minimum": tf.math.logical_and,
                 "bitwise_and": tf.math.logical_and, "bitwise_xor": tf.math.logical_xor,
                 "not_equal": tf.math.logical_xor}  # fmt: skip


def tf_dtype(dtype: Any) -> tf.DType:
    """The TF dtype of a NumPy dtype (or of a TF dtype)."""
    return dtype if isinstance(dtype, tf.DType) else tf.as_dtype(np.dtype(dtype))


def np_dtype_of(value: Any) -> Any:
    """The NumPy dtype of a tensor or array, or the Python scalar itself (weak promotion)."""
    if tf.is_tensor(value):
        return np.dtype(value.dtype.as_numpy_dtype)
    return value.dtype if hasattr(value, "dtype") else value


def as_tensor(value: Any, dtype: Any) -> tf.Tensor:
    """`value` as a tensor of `dtype` (casting tensors; NumPy-converting everything else)."""
    dt = tf_dtype(dtype)
    if tf.is_tensor(value):
        return value if value.dtype == dt else tf.cast(value, dt)
    return tf.convert_to_tensor(np.asarray(value).astype(dt.as_numpy_dtype))


def _float_like(x: tf.Tensor) -> bool:
    return x.dtype.is_floating


def _unary_float_only(fn: Callable[[tf.Tensor], tf.Tensor]) -> Callable[[tf.Tensor], tf.Tensor]:
    """`fn` on floats; identity on integers and bools (floor, ceil, round, trunc)."""
    return lambda x: fn(x) if _float_like(x) else x


def _predicate(fn: Callable[[tf.Tensor], tf.Tensor], on_exact: bool) -> Callable[[tf.Tensor], tf.Tensor]:
    """`fn` on floats; the constant `on_exact` on integers and bools (isnan, isinf, isfinite)."""
    return lambda x: fn(x) if _float_like(x) else tf.fill(tf.shape(x), on_exact)


def _log_base(base: float) -> Callable[[tf.Tensor], tf.Tensor]:
    return lambda x: tf.math.log(x) / tf.constant(math.log(base), dtype=x.dtype)


def _trunc(x: tf.Tensor) -> tf.Tensor:
    return tf.where(x < 0, tf.math.ceil(x), tf.math.floor(x))


def _abs(x: tf.Tensor) -> tf.Tensor:
    return x if x.dtype == tf.bool or x.dtype.is_unsigned else tf.abs(x)


def _invert(x: tf.Tensor) -> tf.Tensor:
    return tf.logical_not(x) if x.dtype == tf.bool else tf.bitwise.invert(x)


def _nan_propagating(
    fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """maximum/minimum propagating NaN as NumPy does."""

    def apply(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        result = fn(x, y)
        if not _float_like(x):
            return result
        return tf.where(tf.math.is_nan(x) | tf.math.is_nan(y), x + y, result)

    return apply


def _safe_division(
    fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """Integer floor_divide/remainder by zero give 0 (NumPy), never a TF error."""

    def apply(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        if _float_like(x):
            return fn(x, y)
        zero = tf.equal(y, tf.zeros_like(y))
        result = fn(x, tf.where(zero, tf.ones_like(y), y))
        return tf.where(zero, tf.zeros_like(result), result)

    return apply


def _hypot(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    """sqrt(x^2 + y^2) without intermediate overflow."""
    big = tf.maximum(tf.abs(x), tf.abs(y))
    small = tf.minimum(tf.abs(x), tf.abs(y))
    ratio = tf.math.divide_no_nan(small, big)
    return big * tf.sqrt(1 + ratio * ratio)


def _logaddexp(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    """log(exp(x) + exp(y)), stable; equal infinities give that infinity, NaN propagates."""
    delta = x - y
    stable = tf.maximum(x, y) + tf.math.log1p(tf.exp(-tf.abs(delta)))
    return tf.where(tf.math.is_nan(delta), x + y, stable)


_UNARY: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "negative": tf.negative, "positive": tf.identity, "abs": _abs, "logical_not": tf.logical_not,
    "bitwise_invert": _invert, "sqrt": tf.sqrt, "exp": tf.exp, "expm1": tf.math.expm1, "log": tf.math.log,
    "log1p": tf.math.log1p, "log2": _log_base(2.0), "log10": _log_base(10.0), "sin": tf.sin, "cos": tf.cos,
    "tan": tf.tan, "asin": tf.asin, "acos": tf.acos, "atan": tf.atan, "sinh": tf.sinh, "cosh": tf.cosh,
    "tanh": tf.tanh, "asinh": tf.asinh, "acosh": tf.acosh, "atanh": tf.atanh,
    "floor": _unary_float_only(tf.floor), "ceil": _unary_float_only(tf.math.ceil),
    "round": _unary_float_only(tf.round), "trunc": _unary_float_only(_trunc), "sign": tf.sign,
    "square": tf.square, "isnan": _predicate(tf.math.is_nan, False), "isinf": _predicate(tf.math.is_inf, False),
    "isfinite": _predicate(tf.math.is_finite, True), "copy": tf.identity,
}  # fmt: skip
_BINARY: dict[str, Callable[[tf.Tensor, tf.Tensor], tf.Tensor]] = {
    "add": tf.add, "subtract": tf.subtract, "multiply": tf.multiply, "divide": tf.math.truediv,
    "floor_divide": _safe_division(tf.math.floordiv), "remainder": _safe_division(tf.math.floormod),
    "pow": tf.pow, "less": tf.less, "less_equal": tf.less_equal, "greater": tf.greater,
    "greater_equal": tf.greater_equal, "equal": tf.equal, "not_equal": tf.not_equal,
    "logical_and": tf.logical_and, "logical_or": tf.logical_or, "logical_xor": tf.math.logical_xor,
    "bitwise_and": tf.bitwise.bitwise_and, "bitwise_or": tf.bitwise.bitwise_or,
    "bitwise_xor": tf.bitwise.bitwise_xor, "bitwise_left_shift": tf.bitwise.left_shift,
    "bitwise_right_shift": tf.bitwise.right_shift, "maximum": _nan_propagating(tf.maximum),
    "minimum": _nan_propagating(tf.minimum), "atan2": tf.atan2, "hypot": _hypot, "logaddexp": _logaddexp,
}  # fmt: skip


def tf_function_for(name: str, dtype: tf.DType) -> Callable[..., tf.Tensor]:
    """The TF function computing prim `name` on operands of `dtype`."""
    if dtype == tf.bool and name in _BOOL_ALGEBRA:
        return _BOOL_ALGEBRA[name]
    if name.startswith("logical_"):
        return lambda *xs: (_UNARY if len(xs) == 1 else _BINARY)[name](*(tf.cast(x, tf.bool) for x in xs))
    return _UNARY[name] if name in _UNARY else _BINARY[name]


def compute_dtype(name: str, dtype: tf.DType) -> tf.DType:
    """The dtype TF computes `name` in, for operands NumPy would compute in `dtype`."""
    narrow = dtype.is_integer and dtype.size < 4
    ordered_bool = dtype == tf.bool and name in ("less", "less_equal", "greater", "greater_equal")
    return tf.int32 if (narrow and name in _WIDEN_SMALL_INTS) or ordered_bool else dtype




def same_shapes(operands: list[tf.Tensor]) -> list[tf.Tensor]:
    """`operands` broadcast to one static shape when their shapes differ. Works around a
    Grappler bug (TF 2.21, graph mode): inside a `tf.cond`/`tf.switch_case` branch or a
    `tf.while_loop` body, the arithmetic optimizer's rewrite of a sum whose terms have different
    shapes and share an operand (`(x + 1) + x`, `(x + 1) + (x + 2)`) yields an empty float32
    tensor. XLA is not affected."""
    shapes = [x.shape for x in operands]
    if all(shape.is_fully_defined() for shape in shapes) and len({tuple(shape) for shape in shapes}) > 1:
        shape = functools.reduce(tf.broadcast_static_shape, shapes)
        return [x if x.shape == shape else tf.broadcast_to(x, shape) for x in operands]
    return operands


def numpy_dummy(value: Any) -> Any:
    """A zero-dimensional NumPy stand-in with `value`'s dtype; Python scalars stay themselves
    (NumPy 2 promotes them weakly: `uint32 * 3` is uint32)."""
    if isinstance(value, bool | int | float | complex):
        return value
    return np.zeros((), np_dtype_of(value))


def numpy_result_dtype(name: str, args: Sequence[Any]) -> np.dtype:
    """The dtype NumPy gives builtin prim `name` on operands like `args`."""
    return prims.apply_numpy(name, [numpy_dummy(a) for a in args]).dtype

