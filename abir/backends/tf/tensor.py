"""How opaque helpers see TF tensors: as `NumpyTensor`s, with NumPy's operators, promotion and
a few ndarray methods computed by the backend's builtin prims; NumPy code that needs concrete
values runs through `tf.numpy_function` instead (`numpy_opaque`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree
import tensorflow as tf

from abir import prims
from abir.backends.base import Backend
from abir.backends.tf.prim_ops import as_tensor, numpy_dummy, numpy_result_dtype, tf_dtype

# Modules whose opaque callables get plain tensors: they choose their ops by the array type.
NATIVE_TENSOR_MODULES = frozenset({"abir.array_ops", "abir.numpy_calls"})

# NumPy ufuncs that are builtin prims (aliases such as np.pow / np.power are one ufunc).
_UFUNC_PRIMS: dict[Any, str] = {
    prims.numpy_function(name): name for name in (*prims.UNARY, *prims.BINARY) if name != "copy"
}


class NumpyTensor:
    """A tensor as an opaque helper sees it: NumPy's operators (including `>>`, `^`, `@`),
    promotion rules and a few ndarray methods and attributes (`astype`, `sum`, `reshape`,
    `dtype` as a NumPy dtype, `shape` as a tuple), computed with the backend's builtin prims.
    NumPy ufuncs that are builtin prims (`np.log(x)`, `np.logaddexp(x, y)`) stay TF ops; other
    NumPy functions get the values (`__array__`; eager only). TF functions take it as a tensor
    (`__tf_tensor__`)."""

    __array_priority__ = 100  # NumPy arrays and scalars defer their operators to it
    __hash__ = None  # type: ignore[assignment]  (== is elementwise)

    def __init__(self, tensor: tf.Tensor, backend: Backend):
        self.tensor = tensor
        self.backend = backend

    # ----- ndarray attributes and methods ---------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.tensor.dtype.as_numpy_dtype)

    @property
    def shape(self) -> tuple[int | None, ...]:
        return tuple(self.tensor.shape)

    @property
    def ndim(self) -> int:
        return int(self.tensor.shape.rank)

    def astype(self, dtype: Any) -> NumpyTensor:
        return NumpyTensor(as_tensor(self.tensor, np.dtype(dtype)), self.backend)

    def sum(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> NumpyTensor:
        """NumPy's sum: small integers and bools accumulate in the platform integer."""
        if out is not None:
            raise TypeError("NumpyTensor.sum does not take out=")
        if dtype is None:
            dtype = np.add.reduce(np.zeros(1, self.dtype)).dtype
        total = tf.reduce_sum(as_tensor(self.tensor, dtype), axis=axis, keepdims=keepdims)
        return NumpyTensor(total, self.backend)

    def reshape(self, *shape: Any) -> NumpyTensor:
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple | list) else shape
        return NumpyTensor(tf.reshape(self.tensor, shape), self.backend)

    def __getitem__(self, index: Any) -> NumpyTensor:
        return NumpyTensor(self.tensor[_unwrapped(index)], self.backend)

    def __tf_tensor__(self, dtype: Any = None, name: Any = None) -> tf.Tensor:
        return self.tensor if dtype is None else tf.convert_to_tensor(self.tensor, dtype=dtype, name=name)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """The values (eager only: a symbolic tensor raises NumPy's conversion error)."""
        return np.asarray(self.tensor, dtype=dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        name = _UFUNC_PRIMS.get(ufunc)
        if name is not None and method == "__call__" and not kwargs:
            return self._prim(name, *inputs)
        if tf.executing_eagerly():
            arrays = [np.asarray(x) if isinstance(x, NumpyTensor) else x for x in inputs]
            return getattr(ufunc, method)(*arrays, **kwargs)
        raise NotImplementedError(f"numpy {ufunc.__name__}.{method} has no TF equivalent for a symbolic tensor")

    def __repr__(self) -> str:
        return f"NumpyTensor({self.tensor!r})"

    def __bool__(self) -> bool:
        return bool(self.tensor)

    def _prim(self, name: str, *operands: Any) -> NumpyTensor:
        """Builtin prim `name` with NumPy's dtype rules."""
        operands = tuple(x.tensor if isinstance(x, NumpyTensor) else x for x in operands)
        return NumpyTensor(self.backend.builtin_prim(name, operands, numpy_result_dtype(name, operands)), self.backend)

    # ----- operators --------------------------------------------------------------------------
    def __matmul__(self, other: Any) -> NumpyTensor:
        return NumpyTensor(_matmul(self, other), self.backend)

    def __rmatmul__(self, other: Any) -> NumpyTensor:
        return NumpyTensor(_matmul(other, self), self.backend)


def _unwrapped(value: Any) -> Any:
    """`value` with `NumpyTensor`s replaced by their tensors (in tuples too: indices)."""
    if isinstance(value, tuple):
        return tuple(_unwrapped(v) for v in value)
    return value.tensor if isinstance(value, NumpyTensor) else value


def _matmul(a: Any, b: Any) -> tf.Tensor:
    """NumPy's `a @ b`: vectors are promoted to matrices and the added axis removed again."""
    dtype = np.result_type(numpy_dummy(_unwrapped(a)), numpy_dummy(_unwrapped(b)))
    x, y = as_tensor(_unwrapped(a), dtype), as_tensor(_unwrapped(b), dtype)
    vector_x, vector_y = x.shape.rank == 1, y.shape.rank == 1
    out = tf.linalg.matmul(x[None] if vector_x else x, y[:, None] if vector_y else y)
    if vector_x:
        out = tf.squeeze(out, -1 if vector_y else -2)
    if vector_y:
        out = tf.squeeze(out, -1)
    return out


def _binary_operator(name: str, reflected: bool) -> Callable[[NumpyTensor, Any], NumpyTensor]:
    if reflected:
        return lambda self, other: self._prim(name, other, self)
    return lambda self, other: self._prim(name, self, other)


for _name, _prim in {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide", "floordiv": "floor_divide",
    "mod": "remainder", "pow": "pow", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
    "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift",
}.items():  # fmt: skip
    setattr(NumpyTensor, f"__{_name}__", _binary_operator(_prim, reflected=False))
    setattr(NumpyTensor, f"__r{_name}__", _binary_operator(_prim, reflected=True))
for _name, _prim in {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
                     "eq": "equal", "ne": "not_equal"}.items():  # fmt: skip
    setattr(NumpyTensor, f"__{_name}__", _binary_operator(_prim, reflected=False))
for _name, _prim in {"neg": "negative", "pos": "positive", "abs": "abs", "invert": "bitwise_invert"}.items():
    setattr(NumpyTensor, f"__{_name}__", lambda self, _p=_prim: self._prim(_p, self))
del _name, _prim


def numpy_opaque(fn: Callable[..., Any], tensors: Sequence[tf.Tensor]) -> Any:
    """`fn` (NumPy code) staged as a `tf.numpy_function`, keeping its result structure."""
    dummies = [np.zeros(t.shape, t.dtype.as_numpy_dtype) for t in tensors]
    with np.errstate(all="ignore"):
        leaves, structure = optree.tree_flatten(fn(*dummies))
    templates = [np.asarray(leaf) for leaf in leaves]

    def flat(*arrays: np.ndarray) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            outs = optree.tree_leaves(fn(*arrays))
        return [np.asarray(out, like.dtype) for out, like in zip(outs, templates, strict=True)]

    results = tf.numpy_function(flat, list(tensors), [tf_dtype(t.dtype) for t in templates], stateful=False)
    for result, like in zip(results, templates, strict=True):
        result.set_shape(like.shape)
    return optree.tree_unflatten(structure, list(results))
