"""The TensorFlow backend: the machine loop is one `tf.function` (optionally XLA-compiled).

`run` stages the machine loop as one `tf.while_loop` inside a `tf.function(jit_compile=...)`,
traced once per `cache_key` (program, signature, batch size) and reused across calls. The loop
is `abir.backends.traced.TracedLoop` (sweeps, or one switch per step: `execution=`) on TF's
primitives (`_TfLoop`: `tf.cond`, `tf.switch_case`, `tensor_scatter_nd_update`).

The sweep is the default with and without XLA. Measured (steady state, CPU; `bench/run.py
--no-tfp --repeats 5` with a switch column added; NUTS: examples/nuts.py, 64 chains x 20
transitions, depth 6, 11,613 blocks in 1,006 sweeps against 12,991 switch steps):

    program  batch    graph sweep  graph switch    XLA sweep   XLA switch
    fib         64         327 ms        399 ms      20.2 ms      32.4 ms
    fib       1024         818 ms       1.06 s       91.1 ms       104 ms
    collatz     64        12.7 ms       10.9 ms      1.07 ms      1.15 ms
    collatz   1024        17.5 ms       14.9 ms      9.31 ms      10.1 ms
    NUTS        64         0.80 s      5.3-5.9 s  0.09-0.11 s  0.28-0.42 s

(Measured before the tail was held: collatz then ran its exit blocks once per leaving member,
and before `form-superblocks`, which the compiler runs for this backend as for JAX.) With
`collect_stats=True` the sweep counts, inside the loop, the blocks run, the members active in
each and each member's own block count (`last_stats`). The loop runs in launches of about
`launch_seconds` (`Backend.run_in_launches`), so Ctrl-C stops a runaway run between launches.

Called on the symbolic tensors of a `tf.function`, a run is staged into that graph. Its errors
are checked where the graph allows (`check_when_run`): collected as extra outputs of an
`abir.tf_function` (`tf_function`, `CheckedFunction`: raised on the host after each call, also
under XLA), else asserted in the graph; under a plain `tf.function(jit_compile=True)`, where XLA
drops assertions, poisoned results of the failing members and a warning, once per batched
function and limits in a process (not per call or trace).

Builtin prims follow NumPy semantics: operands are cast to the dtype NumPy computes in, the
result to the dtype NumPy gives, and integer division by zero yields 0 as in NumPy (TF would
raise). Opaque helpers get `NumpyTensor`s (NumPy operators and promotion on tensors).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import sys
import warnings
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np
import optree
import tensorflow as tf

from abir import prims
from abir.backends.base import LAUNCH_SECONDS, MAX_LAUNCH_ITERATIONS, Backend, Kernel, Scheduler, State
from abir.backends.traced import STATS_KEY, TracedLoop, run_stats, zero_counters

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


def _tf_function_for(name: str, dtype: tf.DType) -> Callable[..., tf.Tensor]:
    """The TF function computing prim `name` on operands of `dtype`."""
    if dtype == tf.bool and name in _BOOL_ALGEBRA:
        return _BOOL_ALGEBRA[name]
    if name.startswith("logical_"):
        return lambda *xs: (_UNARY if len(xs) == 1 else _BINARY)[name](*(tf.cast(x, tf.bool) for x in xs))
    return _UNARY[name] if name in _UNARY else _BINARY[name]


def _compute_dtype(name: str, dtype: tf.DType) -> tf.DType:
    """The dtype TF computes `name` in, for operands NumPy would compute in `dtype`."""
    narrow = dtype.is_integer and dtype.size < 4
    ordered_bool = dtype == tf.bool and name in ("less", "less_equal", "greater", "greater_equal")
    return tf.int32 if (narrow and name in _WIDEN_SMALL_INTS) or ordered_bool else dtype



_INSTANTIATED: weakref.WeakSet[Any] = weakref.WeakSet()
"""The compiled loops that ran once, under `_without_arithmetic_optimizer`."""


@contextlib.contextmanager
def _without_arithmetic_optimizer(loop: Any) -> Iterator[None]:
    """Grappler's arithmetic optimizer off while `loop`, abir's own `tf.function`, runs for the
    first time (its instantiation, when Grappler rewrites it), then the caller's setting back.
    In graph mode it rewrites sums in conditional branches into empty float32 tensors: a helper
    computing `p + p * 1` returned `[]` (`_same_shapes` covers the builtin adds it broke, not
    these). Later runs reuse the instantiated function (toggling on every call cost 0.2-4 ms)."""
    if loop in _INSTANTIATED:
        yield
        return
    _INSTANTIATED.add(loop)
    previous = tf.config.optimizer.get_experimental_options().get("arithmetic_optimization")
    tf.config.optimizer.set_experimental_options({"arithmetic_optimization": False})
    try:
        yield
    finally:
        restored = True if previous is None else previous
        tf.config.optimizer.set_experimental_options({"arithmetic_optimization": restored})


def _same_shapes(operands: list[tf.Tensor]) -> list[tf.Tensor]:
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


def _numpy_dummy(value: Any) -> Any:
    """A zero-dimensional NumPy stand-in with `value`'s dtype; Python scalars stay themselves
    (NumPy 2 promotes them weakly: `uint32 * 3` is uint32)."""
    if isinstance(value, bool | int | float | complex):
        return value
    return np.zeros((), np_dtype_of(value))


def _numpy_result_dtype(name: str, args: Sequence[Any]) -> np.dtype:
    """The dtype NumPy gives builtin prim `name` on operands like `args`."""
    return prims.apply_numpy(name, [_numpy_dummy(a) for a in args]).dtype


# Modules whose opaque callables get plain tensors: they choose their ops by the array type.
_NATIVE_TENSOR_MODULES = frozenset({"abir.array_ops", "abir.numpy_calls"})

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

    def __init__(self, tensor: tf.Tensor, backend: TensorFlowBackend):
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
        return NumpyTensor(self.backend.builtin_prim(name, operands, _numpy_result_dtype(name, operands)), self.backend)

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
    dtype = np.result_type(_numpy_dummy(_unwrapped(a)), _numpy_dummy(_unwrapped(b)))
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


class TensorFlowBackend(Backend):
    """TF tensors; `run` is one `tf.function` (`jit_compile=True`: XLA) around a `tf.while_loop`
    (block sweeps, or one `tf.switch_case` per step)."""

    name = "tensorflow"
    superblocks = True
    immutable_arrays = True

    def __init__(
        self,
        jit_compile: bool = False,
        code_cache: MutableMapping[Any, Any] | None = None,
        scheduler: Scheduler | None = None,
        *,
        execution: str | None = None,
        collect_stats: bool = False,
        launch_seconds: float | None = LAUNCH_SECONDS,
    ):
        """`jit_compile` compiles the whole run with XLA. `code_cache` maps a run's `cache_key`
        to its `tf.function`; pass a dict to keep traced code there yourself (default: each
        compiled program keeps its runs, bounded and freed with it; `Backend.run_cache`).
        `execution` is `"sweep"` (default) or `"switch"` (see the module docstring).
        `scheduler(backend, pc)` picks the next block of the `"switch"` execution (passing one
        selects it); it must be traceable (TF ops).
        `collect_stats`: count blocks and active members inside the loop (`last_stats`).
        `launch_seconds`: run the compiled loop in launches of about this long, so that Ctrl-C
        stops a run within about that time (`Backend.run_in_launches`); None: one launch."""
        self.configure_execution(execution, scheduler, "sweep", collect_stats)
        self.configure_launches(launch_seconds)
        self.collect_stats = bool(collect_stats)
        self.jit_compile = bool(jit_compile)
        self.code_cache = code_cache
        self.trace_count = 0  # how many times a run loop was traced
        self._staging: list[list[tf.Tensor]] = []  # per staged run being traced: its failed members

    def is_traced(self, value: Any) -> bool:
        """A symbolic tensor of a graph being built (inside a `tf.function`)."""
        return bool(tf.is_symbolic_tensor(value))

    def check_when_run(
        self,
        check: Callable[[dict[str, np.ndarray]], None],
        values: Mapping[str, Any],
        normal: Mapping[str, int] | None = None,
        summary: str = "",
    ) -> None:
        """Symbolic values (a run staged into a graph): in the body of an `abir.tf_function`
        they become extra outputs of that function, which raises abir's own error after it
        returns (`CheckedFunction`, with or without XLA). Elsewhere, without XLA, a
        `tf.debugging.Assert` in the caller's graph fails with `summary` and the values
        (`tf.errors.InvalidArgumentError`) when some value is not its `normal` one. Under
        `tf.function(jit_compile=True)` nothing can raise (XLA compiles assertions away): the
        failing members' results are poisoned (`stage_run`), and the first such trace of a
        batched function and limits warns (`UnreportedErrorsWarning`)."""
        if not any(self.is_traced(value) for value in values.values()):
            super().check_when_run(check, values, normal, summary)
            return
        failed = _check_in_graph(PendingCheck(check, dict(values), dict(normal or {}), summary))
        if failed is not None and self._staging:
            self._staging[-1].append(failed)

    def stage_run(self, run: Callable[[list[Any]], list[Any]], leaves: Sequence[Any]) -> list[Any]:
        """`run(leaves)` staged into the caller's graph; under XLA outside an `abir.tf_function`
        (where errors cannot raise) the results of the members whose run failed are poisoned:
        NaN for floats, the dtype's minimum (maximum if unsigned) for integers."""
        failures: list[tf.Tensor] = []
        self._staging.append(failures)
        try:
            outputs = run(list(leaves))
        finally:
            self._staging.pop()
        if not failures:
            return outputs
        failed = functools.reduce(tf.logical_or, failures)
        return [_poisoned(output, failed[: self.batch_size(output)]) for output in outputs]

    # ----- arrays -------------------------------------------------------------------------
    def asarray(self, value: Any, dtype: Any = None) -> Any:
        if dtype is not None:
            return as_tensor(value, dtype)
        return value if tf.is_tensor(value) else tf.convert_to_tensor(np.asarray(value))

    def to_numpy(self, value: Any) -> np.ndarray:
        return value.numpy() if hasattr(value, "numpy") else np.asarray(value)

    def is_native(self, value: Any) -> bool:
        """Tensors, and the `NumpyTensor` views of them handed to opaque helpers."""
        return tf.is_tensor(value) or isinstance(value, NumpyTensor)

    def zeros(self, shape: Sequence[int], dtype: Any) -> Any:
        return tf.zeros(tuple(shape), dtype=tf_dtype(dtype))

    def full(self, shape: Sequence[int], value: Any, dtype: Any) -> Any:
        return tf.fill(tuple(shape), as_tensor(value, dtype))

    def arange(self, n: int, dtype: Any = np.int32) -> Any:
        return tf.range(n, dtype=tf_dtype(dtype))

    def pad_rows(self, array: Any, rows: int) -> Any:
        array = self.asarray(array)
        return tf.pad(array, [(0, rows - int(array.shape[0]))] + [(0, 0)] * (len(array.shape) - 1))

    def batch_size(self, val: Any, name: str | None = None) -> int:
        shape = tuple(val.shape) if hasattr(val, "shape") else ()
        return int(shape[0]) if shape else 1

    # ----- primitives ---------------------------------------------------------------------
    def builtin_prim(self, name: str, args: Sequence[Any], result_dtype: Any) -> Any:
        """NumPy semantics: operands cast to NumPy's computing dtype, result to `result_dtype`.
        An integer power with a negative exponent truncates toward zero, as on the NumPy backend
        (tf.pow would raise, also for the junk rows of inactive members)."""
        if not prims.is_builtin(name):
            raise ValueError(f"{name!r} is not a builtin primitive (see abir.prims)")
        if result_dtype is None:
            result_dtype = _numpy_result_dtype(name, args)
        out_dtype = tf_dtype(result_dtype)
        if name == "astype":
            return as_tensor(args[0], out_dtype)
        if name == "where":
            cond, x, y = args
            return tf.where(as_tensor(cond, tf.bool), as_tensor(x, out_dtype), as_tensor(y, out_dtype))
        operand_dtypes = [np_dtype_of(a) for a in args]
        numpy_dtype = (
            np.result_type(*operand_dtypes)
            if name in prims.COMMON_DTYPE_PRIMS or any(getattr(d, "kind", None) == "c" for d in operand_dtypes)
            else result_dtype
        )
        compute = _compute_dtype(name, tf_dtype(numpy_dtype))
        operands = [as_tensor(a, compute) for a in args]
        if name == "add" and not self.jit_compile:
            operands = _same_shapes(operands)
        if name == "pow" and compute.is_integer:
            # a negative exponent truncates toward zero, as on NumPy (tf.pow raises, also for junk rows)
            base, exponent = operands
            negative = exponent < 0
            powered = tf.pow(base, tf.where(negative, tf.zeros_like(exponent), exponent))
            one = tf.ones_like(powered)
            odd_sign = tf.where(tf.equal(tf.math.floormod(exponent, 2), 0), one, -one)
            truncated = tf.where(tf.equal(base, 1), one, tf.where(tf.equal(base, -1), odd_sign, tf.zeros_like(powered)))
            return as_tensor(tf.where(negative, truncated, powered), out_dtype)
        return as_tensor(_tf_function_for(name, compute)(*operands), out_dtype)

    def call_opaque(self, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
        """`fn` on `NumpyTensor`s: tensors with NumPy's operators, methods (`astype`, `sum`,
        ...) and promotion, so a helper written for NumPy arrays (`x >> 16`, `.astype`,
        `np.log(x)`, `.sum(axis=-1)`) runs on the batch as TF ops, also under XLA; TF functions
        take them as tensors. Results are unwrapped to tensors. abir's own array callables
        (`abir.array_ops`, which pick TF ops by the array type) get the tensors.

        Inside a graph, a helper calling NumPy code that needs concrete values (raising NumPy's
        conversion error on a symbolic tensor) runs through `tf.numpy_function` instead, its
        output types found by a run on NumPy zeros; that path is not XLA-compilable
        (`jit_compile=True`)."""
        tensors = [self.asarray(a.tensor if isinstance(a, NumpyTensor) else a) for a in args]
        native = getattr(fn, "__module__", None) in _NATIVE_TENSOR_MODULES
        try:
            out = fn(*(tensors if native else [NumpyTensor(t, self) for t in tensors]))
        except (NotImplementedError, TypeError) as error:
            if tf.executing_eagerly() or "numpy" not in str(error).lower():
                raise
            return _numpy_opaque(fn, tensors)
        return optree.tree_map(self._unwrap, out)

    def _unwrap(self, value: Any) -> tf.Tensor:
        return value.tensor if isinstance(value, NumpyTensor) else self.asarray(value)

    # ----- masked state updates -------------------------------------------------------------
    def where(self, mask: Any, new: Any, old: Any, name: str | None = None) -> Any:
        """`mask` [B] broadcast over the trailing dims; the result keeps `old`'s dtype."""
        old = self.asarray(old)
        mask = tf.reshape(as_tensor(mask, tf.bool), [-1] + [1] * (old.shape.rank - 1))
        return tf.where(mask, as_tensor(new, old.dtype), old)

    def stack_write(self, stack: Any, index: Any, value: Any, mask: Any) -> Any:
        """`tensor_scatter_nd_update` at (index[b], b): masked-out or out-of-range members
        rewrite the value they already hold at the clipped row, so nothing else changes."""
        depth = stack.shape[0]
        index = as_tensor(index, tf.int32)
        ok = as_tensor(mask, tf.bool) & (index >= 0) & (index < depth)
        coords = self._coords(stack, index)
        old = tf.gather_nd(stack, coords)
        new = tf.broadcast_to(as_tensor(value, stack.dtype), tf.shape(old))
        return tf.tensor_scatter_nd_update(stack, coords, self.where(ok, new, old))

    def stack_scatter(self, stack: Any, rows: Any, value: Any) -> Any:
        """Members whose row is out of range rewrite the value they hold at the clipped row."""
        if rows is None:
            return value
        depth = stack.shape[0]
        rows = tf.broadcast_to(as_tensor(rows, tf.int32), tf.shape(stack)[1:2])
        coords = self._coords(stack, rows)
        old = tf.gather_nd(stack, coords)
        new = tf.broadcast_to(as_tensor(value, stack.dtype), tf.shape(old))
        return tf.tensor_scatter_nd_update(stack, coords, self.where(rows < depth, new, old))

    def stack_read(self, stack: Any, index: Any) -> Any:
        return tf.gather_nd(stack, self._coords(stack, as_tensor(index, tf.int32)))

    @staticmethod
    def _coords(stack: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
        """[B, 2] coordinates (clip(index[b], 0, D-1), b) into a [D, B, ...] stack."""
        rows = tf.clip_by_value(index, 0, stack.shape[0] - 1)
        return tf.stack([rows, tf.range(tf.shape(stack)[1], dtype=tf.int32)], axis=1)

    def reduce_min(self, t: Any, name: str | None = None) -> Any:
        return tf.reduce_min(t)

    # ----- running --------------------------------------------------------------------------
    def run(
        self,
        kernels: Sequence[Kernel],
        state: State,
        halt_index: int,
        cache_key: Any,
        code_cache: MutableMapping[Any, Any] | None = None,
        stack_keys: Collection[str] = (),
        error_flags: Mapping[str, int] | None = None,
    ) -> State:
        """One `tf.function` around a `tf.while_loop` (block sweeps, or one `tf.switch_case` per
        step), traced once per cache key and state signature. Without a `cache_key` the function
        is still reused for the same `kernels` list (the machine builds it once per program and
        backend)."""
        state = {key: self.asarray(value) for key, value in state.items()}
        staged = self.is_traced(state["pc"])
        if self.collect_stats and not staged:
            state[STATS_KEY] = zero_counters(self.zeros, len(kernels), int(state["pc"].shape[0]))

        def compile_loop(ks: tuple[Kernel, ...], halt: int) -> Callable[[State, Any], State]:
            loop = self._loop(ks, halt, stack_keys)
            return tf.function(loop, jit_compile=self.jit_compile, autograph=False, reduce_retracing=False)

        config = (self.jit_compile, self.execution, self.collect_stats)
        run = self.compiled_run(self.run_cache(code_cache), kernels, halt_index, cache_key, compile_loop, config)
        if staged:  # into the caller's graph: one launch, no host round trip
            state = dict(run(state, tf.constant(MAX_LAUNCH_ITERATIONS, tf.int32)))
        else:
            with _without_arithmetic_optimizer(run):
                state = dict(self.run_in_launches(lambda s, n: run(s, tf.constant(n, tf.int32)), state, halt_index))
        counters = state.pop(STATS_KEY, None)
        self.last_stats = None if counters is None else run_stats(counters)
        return state

    def _loop(
        self, kernels: tuple[Kernel, ...], halt_index: int, stack_keys: Collection[str]
    ) -> Callable[[State, Any], State]:
        """The machine loop over `kernels` (`abir.backends.traced`) as a traceable function of
        the state and the most loop iterations to run (`Backend.run_in_launches`)."""
        return _TfLoop(self, kernels, halt_index, stack_keys).function(self.execution)

    # ----- the reference's interface (`BackendProtocol`) ---------------------------------------
    def any(self, t: Any, name: str | None = None) -> Any:
        return tf.reduce_any(as_tensor(t, tf.bool))

    def cond(self, pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any], name: str | None = None) -> Any:
        """`tf.cond`: in a graph both branches are traced and one runs."""
        return tf.cond(as_tensor(pred, tf.bool), true_fn, false_fn)

    def prepare_for_cond(self, state: Any) -> Any:
        """In a graph, every leaf becomes a tensor (a conditional carries tensors only)."""
        if tf.executing_eagerly():
            return state
        return tf.nest.map_structure(tf.convert_to_tensor, state)

    def switch_case(
        self, branch_selector: Any, branch_callables: Sequence[Callable[..., Any]], *operands: Any, name: str | None = None
    ) -> Any:
        """`tf.switch_case` (an index out of range runs the last branch)."""
        branches = [functools.partial(branch, *operands) for branch in branch_callables]
        return tf.switch_case(as_tensor(branch_selector, tf.int32), branches)

    def while_loop(
        self, cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Sequence[Any], name: str | None = None
    ) -> Any:
        """`tf.while_loop` (a Python loop when executing eagerly)."""
        return list(tf.while_loop(cond, lambda *vs: list(body(*vs)), list(loop_vars)))


class _TfLoop(TracedLoop):
    """The machine loop on TensorFlow: `tf.while_loop`, `tf.cond` and `tf.switch_case`. Under
    XLA the switch packs the registers into groups updated in place; without XLA (no in-place
    updates, but tensors a switch passes through cost nothing) they pass through it whole."""

    def __init__(self, backend: TensorFlowBackend, kernels: Sequence[Kernel], halt_index: int, stack_keys: Collection[str]):
        super().__init__(backend, kernels, halt_index, stack_keys)
        self.grouped = backend.jit_compile

    def while_loop(self, cond: Callable[[Any], Any], body: Callable[[Any], Any], carry: Any) -> Any:
        return tuple(tf.while_loop(lambda *c: cond(c), lambda *c: tuple(body(c)), tuple(carry)))

    def cond(self, pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any], *operands: Any) -> Any:
        return tf.cond(pred, lambda: true_fn(*operands), lambda: false_fn(*operands))

    def switch(self, index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
        return tf.switch_case(index, [functools.partial(branch, *operands) for branch in branches])

    def any(self, x: Any) -> Any:
        return tf.reduce_any(x)

    def min(self, x: Any) -> Any:
        return tf.reduce_min(x)

    def sum(self, x: Any) -> Any:
        return tf.reduce_sum(x)

    def equal(self, x: Any, y: Any) -> Any:
        return tf.equal(x, y)

    def cast(self, x: Any, dtype: Any) -> Any:
        return as_tensor(x, dtype)

    def like(self, value: Any, template: Any) -> Any:
        return tf.broadcast_to(as_tensor(value, template.dtype), tf.shape(template))

    def constant(self, array: np.ndarray) -> Any:
        return tf.constant(array)

    def stack_rows(self, rows: Sequence[Any]) -> Any:
        return tf.stack(list(rows))

    def set_row(self, array: Any, row: Any, value: Any) -> Any:
        return tf.tensor_scatter_nd_update(array, tf.reshape(row, [1, 1]), tf.expand_dims(value, 0))

    def add_at(self, vector: Any, index: int, amount: Any) -> Any:
        return vector + tf.one_hot(index, int(vector.shape[0]), dtype=vector.dtype) * amount


def _numpy_opaque(fn: Callable[..., Any], tensors: Sequence[tf.Tensor]) -> Any:
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


# ----- errors of runs staged into a graph ---------------------------------------------------


class UnreportedErrorsWarning(UserWarning):
    """A batched function's run is staged into an XLA-compiled `tf.function`, which cannot
    raise its errors (stack overflow, `max_steps`); `abir.tf_function` can."""


class PendingCheck:
    """The error flags of a run staged into a graph (symbolic [B] tensors, `normal` where no
    error occurred), the `check` raising abir's error from host copies of them, and the
    `summary` an assertion in the graph prints instead."""

    def __init__(
        self,
        check: Callable[[dict[str, np.ndarray]], None],
        values: dict[str, Any],
        normal: dict[str, int],
        summary: str,
    ):
        self.check = check
        self.values = values
        self.normal = normal
        self.summary = summary

    def failed_members(self, values: Mapping[str, Any] | None = None) -> tf.Tensor:
        """[B] bool: the members whose flags (`self.values` by default) are not normal."""
        values = self.values if values is None else values
        flags = [tf.not_equal(value, as_tensor(self.normal.get(key, 0), value.dtype)) for key, value in values.items()]
        return functools.reduce(tf.logical_or, flags)

    def assert_in_graph(self, values: Mapping[str, Any] | None = None) -> None:
        """A `tf.debugging.Assert` failing the graph's run with the summary and the flags."""
        values = self.values if values is None else values
        details = [item for key, value in values.items() for item in (f"{key}:", value)]
        failed = tf.reduce_any(self.failed_members(values))
        tf.debugging.Assert(tf.logical_not(failed), [self.summary, *details], summarize=16)

    def raise_if_failed(self, values: Mapping[str, Any]) -> None:
        """abir's own error (`check`) if the eager flag `values` show one."""
        host = {key: np.asarray(value) for key, value in values.items()}
        if any(np.any(value != self.normal.get(key, 0)) for key, value in host.items()):
            self.check(host)


class _Collector(list[PendingCheck]):
    """The checks of the runs staged into `graph` (the body of an `abir.tf_function` being
    traced)."""

    def __init__(self, graph: Any):
        super().__init__()
        self.graph = graph


_COLLECTORS: list[_Collector] = []
"""The `abir.tf_function` bodies being traced, innermost last."""


def _collector_for(graph: Any) -> _Collector | None:
    """The collector of `graph` when it is the body of an `abir.tf_function` being traced (a run
    staged in a nested function or a control-flow branch is checked in its own graph)."""
    return next((c for c in reversed(_COLLECTORS) if c.graph is graph), None)


def _compiled_by_xla() -> bool:
    """Whether the graph being built is compiled by XLA (`tf.function(jit_compile=True)` or
    nested in one): tracing such a function enters an XLA control-flow context."""
    from tensorflow.python.ops import control_flow_util

    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


def _check_in_graph(pending: PendingCheck) -> tf.Tensor | None:
    """Check a staged run's flags where the graph being built allows: collected by the
    `abir.tf_function` whose body it is, else asserted in the graph, or, under XLA (which
    compiles assertions away), a warning; then returns the failed members [B], whose results
    the caller poisons."""
    collector = _collector_for(tf.compat.v1.get_default_graph())
    if collector is not None:
        collector.append(pending)
        return None
    if not _compiled_by_xla():
        pending.assert_in_graph()
        return None
    _warn_once(pending.summary)
    return pending.failed_members()


_WARNED: set[str] = set()
"""The staged runs (`PendingCheck.summary`: the function and its limits) that
`UnreportedErrorsWarning` was issued for in this process."""


def _warn_once(summary: str) -> None:
    """`UnreportedErrorsWarning` for a run staged under plain XLA, pointing at the user's line,
    once per batched function and limits (`summary`) in the process: tracing again (another
    input shape, another `tf.function`) and calling add none, whatever the warning filters."""
    if summary in _WARNED:
        return
    _WARNED.add(summary)
    run, _, causes = summary.removeprefix("abir: ").partition(" failed: ")
    warnings.warn(
        f"abir: {run} is inside tf.function(jit_compile=True), where nothing can raise (XLA drops assertions): "
        "if it fails, the results of the failing members are NaN (floats) or the dtype's minimum (integers) and "
        "nothing else tells. Decorate the function with abir.tf_function(jit_compile=True) instead of "
        "tf.function: it raises abir's error after each call. Errors this run would not report: "
        f"{causes.split(' (per member')[0]}. (Shown once per batched function and limits.)",
        UnreportedErrorsWarning,
        stacklevel=_user_stacklevel(),
    )


def _user_stacklevel() -> int:
    """The `stacklevel` (for a warning issued by this function's caller) of the first frame
    outside abir, TensorFlow and AutoGraph's generated code: the user's line."""
    internal = (os.path.dirname(os.path.dirname(__file__)), os.path.dirname(tf.__file__), "__autograph_generated")
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and any(part in frame.f_code.co_filename for part in internal):
        frame, level = frame.f_back, level + 1
    return level


def _poisoned(output: tf.Tensor, failed: tf.Tensor) -> tf.Tensor:
    """`output` [B, ...] with the rows of `failed` members set to NaN (floats) or the dtype's
    minimum (signed integers; maximum if unsigned); bools are left as they are."""
    dtype = output.dtype
    if dtype.is_floating:
        poison = tf.constant(np.nan, dtype)
    elif dtype.is_integer:
        poison = tf.constant(dtype.max if dtype.is_unsigned else dtype.min, dtype)
    else:
        return output
    mask = tf.reshape(failed, [-1] + [1] * (output.shape.rank - 1))
    return tf.where(mask, poison, output)


class CheckedFunction:
    """A `tf.function` whose batched runs raise abir's own errors (`StackOverflowError`,
    `StepLimitError`, naming the function, the members and the limit) when a call returns, with
    or without `jit_compile=True`. While tracing, each run staged directly in its body adds its
    error flags to the function's outputs; a call checks them on the host after the compiled
    function returns (as `jax.experimental.checkify` does for JAX), since nothing inside an XLA
    program can raise. Called inside another graph it checks them with assertions there."""

    def __init__(self, fn: Callable[..., Any], options: Mapping[str, Any]):
        functools.update_wrapper(self, fn)
        self.python_function = fn
        self.function = tf.function(self._traced, **options)
        self._traces: dict[int, list[PendingCheck]] = {-1: []}

    def _traced(self, *args: Any, **kwargs: Any) -> tuple[Any, tf.Tensor, list[dict[str, Any]]]:
        """`fn`'s results, which trace made them, and the flags of the runs staged in it."""
        collector = _Collector(tf.compat.v1.get_default_graph())
        _COLLECTORS.append(collector)
        try:
            outputs = self.python_function(*args, **kwargs)
        finally:
            _COLLECTORS.remove(collector)
        token = -1  # nothing to check (also every call when functions run eagerly: nothing is kept)
        if collector:
            token = len(self._traces)
            self._traces[token] = list(collector)
        return outputs, tf.constant(token, tf.int32), [pending.values for pending in collector]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        outputs, token, flags = self.function(*args, **kwargs)
        if tf.is_symbolic_tensor(token):  # called while another graph is built: checked there
            traced = self.function.get_concrete_function(*args, **kwargs).structured_outputs[1]
            for pending, values in zip(self._traces[int(tf.get_static_value(traced))], flags, strict=True):
                _check_in_graph(PendingCheck(pending.check, values, pending.normal, pending.summary))
            return outputs
        for pending, values in zip(self._traces[int(token)], flags, strict=True):
            pending.raise_if_failed(values)
        return outputs


def tf_function(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """`tf.function(fn, **options)` (same options: `jit_compile`, `autograph`, ...) whose
    batched runs raise abir's own errors after each call, also under XLA (`CheckedFunction`).
    Use it as `@abir.tf_function(jit_compile=True)` in place of `@tf.function(...)`."""
    if fn is None:
        return lambda f: CheckedFunction(f, options)
    return CheckedFunction(fn, options)
