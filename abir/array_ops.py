"""Run-time callables of the builtin array prims (`abir.array_prims`).

Per-example code says `x[i]`, `x.sum()`, `np.dot(a, b)` about ONE member; an array prim
receives whole-batch arrays `[B, *event_shape]`. The callables here apply the member's operation
to the event dimensions: axes are shifted past the batch axis (`axis=k >= 0` becomes `k + 1`;
negative axes already count from the end), `axis=None` means every event axis (never the batch
axis), and per-member indices gather row by row.

Every callable works on the array type it is given: NumPy arrays (NumpyBackend and type
inference's dummy runs), JAX arrays and tracers (`jax.numpy`, inside `jit`) and TensorFlow
tensors (core `tf` ops, so graphs stay XLA-compilable; `abir.backends.tf.array_ops`).
`ops_for(*arrays)` picks the operations from the arrays' types through `abir.backend_registry`. Results are cast to the dtype NumPy would give, so that every backend
agrees with what type inference found on NumPy dummies.

Junk rows: the machine runs a prim on every row, including members that stand at another block,
whose values may be junk. Per-member indices are therefore clipped into range (negative ones
first wrap as in Python) so that a gather never fails; an out-of-range index in an ACTIVE row
reads the nearest valid element instead of raising `IndexError`.

Operands may have a batch dimension of 1 (constants) next to full-batch ones; operations taking
several arrays broadcast their batch dimensions first.

Item assignment (`make_setitem`) writes exactly the elements the same index reads (clipped the
same way), into a new array: `np.put_along_axis` on a copy, `.at[...].set` on JAX,
`tensor_scatter_nd_update` on TensorFlow.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from abir.backend_registry import load, spec_of_arrays

REDUCTIONS = ("sum", "mean", "max", "min", "prod", "any", "all", "std", "var", "argmax", "argmin")
"""Reductions over event axes: `axis` (None, int or tuple; argmax/argmin: None or int), `keepdims`."""
SCANS = ("cumsum", "cumprod")
"""Scans along one event axis (`axis=None` scans the flattened member)."""


# -- namespaces --------------------------------------------------------------------------------


def ops_for(*arrays: Any) -> ArrayOps:
    """The operations for these arrays: those of the registered backend that owns them (the
    highest priority one when they mix, e.g. TensorFlow over JAX), else NumPy's."""
    if all(type(a) is np.ndarray for a in arrays):
        return _NUMPY_OPS
    spec = spec_of_arrays(arrays)
    if spec is None:
        return _NUMPY_OPS
    return load(spec.array_ops)()


def numpy_ops() -> ArrayOps:
    """The operations on NumPy arrays (NumPy's registry entry)."""
    return _NUMPY_OPS


def numpy_dtype(dtype: Any) -> np.dtype:
    return np.dtype(getattr(dtype, "as_numpy_dtype", dtype))


def _quiet_numpy(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


class ArrayOps:
    """NumPy-like namespaces (numpy, jax.numpy): the operations the callables need. A backend
    whose arrays are no NumPy-like namespace, or that emits an operation its own way, subclasses
    it (TensorFlow's and JAX's live with their backends, `abir.backends.tf.array_ops`,
    `abir.backends.jax.array_ops`) and names its factory in `abir.backend_registry`."""

    reduces_in_input_dtype = False
    """Whether sum/prod/mean/std/var keep the input's dtype, so inputs are cast to the result's first."""

    def __init__(self, xp: Any):
        self.xp = xp

    def asarray(self, x: Any) -> Any:
        return self.xp.asarray(x)

    def event_shape(self, x: Any) -> tuple[int, ...]:
        return tuple(int(d) for d in x.shape[1:])

    def ndim(self, x: Any) -> int:
        return len(x.shape)

    def dtype(self, x: Any) -> np.dtype:
        return numpy_dtype(x.dtype)

    def cast(self, x: Any, dtype: Any) -> Any:
        dtype = numpy_dtype(dtype)
        return x if self.dtype(x) == dtype else x.astype(dtype)

    def broadcast_batch(self, arrays: Sequence[Any]) -> list[Any]:
        """The arrays with one common batch size (sizes of 1 broadcast)."""
        arrays = [self.asarray(a) for a in arrays]
        batch = max(a.shape[0] for a in arrays)
        return [a if a.shape[0] == batch else self.xp.broadcast_to(a, (batch, *a.shape[1:])) for a in arrays]

    def reshape_event(self, x: Any, shape: Sequence[int]) -> Any:
        return self.xp.reshape(x, (x.shape[0], *shape))

    def full_batch(self, x: Any, value: Any, dtype: Any) -> Any:
        return self.xp.full((x.shape[0],), value, dtype=numpy_dtype(dtype))

    def take(self, x: Any, indices: np.ndarray, axis: int) -> Any:
        return self.xp.take(x, indices, axis=axis)

    def positions(self, event: tuple[int, ...]) -> Any:
        """A batch of one member whose elements are their own flat positions (int64)."""
        size = int(np.prod(event, dtype=np.int64))
        return self.xp.reshape(self.xp.arange(size, dtype=np.int64), (1, *event))

    def broadcast_member(self, x: Any, like: Any, shape: tuple[int, ...]) -> Any:
        """`x` (a batch of 1 or of `like`'s size) as `[B, *shape]`, B the batch size of `like`."""
        return self.xp.broadcast_to(x, (like.shape[0], *shape))

    def scatter(self, x: Any, positions: Any, values: Any, whole_rows: bool = False) -> Any:
        """Per member b: `x[b]` with `x[b, positions[b, k]] = values[b, k]` (`[B, N]`, `[B, K]`).
        `whole_rows` tells that each member's K positions are one row of `x[b]` seen as
        `[N // K, K]` (`positions[b] = r * K + arange(K)`), for backends that write rows their
        own way."""
        if self.xp is np:
            out = np.array(x)  # a writable copy: `x` may be a read-only broadcast
            np.put_along_axis(out, positions, values, axis=1)
            return out
        rows = self.xp.arange(x.shape[0])[:, None]
        return x.at[rows, positions].set(values)

    def gather(self, x: Any, index: Any, axis: int) -> Any:
        """Per member b: `x[b]` indexed by `index[b]` (any shape) along `axis` (>= 1). One row of
        `x` (every member's) is indexed as it is, not spread to the batch first."""
        x, index = self.asarray(x), self.asarray(index)
        if x.shape[0] == 1 and index.shape[0] != 1:
            taken = self.xp.take(x[0], self.clip_index(index, x.shape[axis]), axis=axis - 1)
            return self.xp.moveaxis(taken, axis - 1, 0)
        x, index = self.broadcast_batch([x, index])
        size = x.shape[axis]
        index = self.clip_index(index, size)
        batch, member_shape = x.shape[0], tuple(index.shape[1:])
        flat = self.xp.reshape(index, (batch, -1))
        count = flat.shape[1]
        expanded = self.xp.reshape(flat, (batch, *(1,) * (axis - 1), count, *(1,) * (x.ndim - axis - 1)))
        out = self.xp.take_along_axis(x, expanded, axis=axis)
        return self.xp.reshape(out, (*x.shape[:axis], *member_shape, *x.shape[axis + 1 :]))

    def clip_index(self, index: Any, size: int) -> Any:
        index = self.cast(self.asarray(index), np.int64)
        index = self.xp.where(index < 0, index + size, index)
        return self.xp.clip(index, 0, max(size - 1, 0))

    def reduce(self, name: str, x: Any, axis: Any, keepdims: bool, ddof: int = 0) -> Any:
        kwargs: dict[str, Any] = {"axis": axis}
        if keepdims:
            kwargs["keepdims"] = True
        if name in ("std", "var"):
            kwargs["ddof"] = ddof
        return getattr(self.xp, name)(x, **kwargs)

    def scan(self, name: str, x: Any, axis: int) -> Any:
        return getattr(self.xp, name)(x, axis=axis)

    def transpose(self, x: Any, perm: Sequence[int]) -> Any:
        return self.xp.transpose(x, tuple(perm))

    def concatenate(self, arrays: Sequence[Any], axis: int) -> Any:
        return self.xp.concatenate(list(arrays), axis=axis)

    def stack(self, arrays: Sequence[Any], axis: int) -> Any:
        return self.xp.stack(list(arrays), axis=axis)

    def matmul(self, a: Any, b: Any) -> Any:
        return self.xp.matmul(a, b)

    def multiply(self, a: Any, b: Any) -> Any:
        return self.xp.multiply(a, b)

    def sqrt(self, x: Any) -> Any:
        return self.xp.sqrt(x)

    def abs(self, x: Any) -> Any:
        return self.xp.abs(x)

    def squeeze(self, x: Any, axis: tuple[int, ...]) -> Any:
        return self.xp.squeeze(x, axis=axis) if axis else x

    def expand_dims(self, x: Any, axis: int) -> Any:
        return self.xp.expand_dims(x, axis)

    def set_row(self, x: Any, row: Any, value: Any) -> Any:
        """`x` with its row `row` (an int scalar, within range) along the first axis replaced by
        `value`: an update of one slice, never a scatter (a JAX loop meant to be one kernel
        cannot contain one)."""
        x = self.xp.array(x, copy=True)
        x[int(row)] = value
        return x


_NUMPY_OPS = ArrayOps(np)
"""The operations on NumPy arrays (stateless, shared)."""


# -- axes --------------------------------------------------------------------------------------


def event_axis(axis: int) -> int:
    """A member's axis as an axis of the batch array: non-negative axes move past the batch."""
    return axis + 1 if axis >= 0 else axis


def event_axes(axis: Any, ndim: int) -> Any:
    """`axis` (None, int or tuple) of a member as axes of a batch array of rank `ndim`."""
    if axis is None:
        return tuple(range(1, ndim))
    if isinstance(axis, tuple):
        return tuple(event_axis(a) for a in axis)
    return event_axis(axis)


def _flatten_events(ops: ArrayOps, x: Any) -> Any:
    return ops.reshape_event(x, (int(np.prod(ops.event_shape(x), dtype=np.int64)),))


# -- indexing ----------------------------------------------------------------------------------

BASIC = "basic"
ARRAY = "array"
BATCHED = "batched"
IndexComponent = tuple[str, Any]
"""(BASIC, int | slice | None | Ellipsis), (ARRAY, compile-time integer array) or (BATCHED, None):
the next per-member index operand."""


def _consumes_axis(component: IndexComponent) -> bool:
    kind, value = component
    return kind != BASIC or (value is not None and value is not Ellipsis)


def make_index(components: Sequence[IndexComponent]) -> Callable[..., Any]:
    """The callable `(x, *per_member_indices) -> x[member index]` over whole-batch arrays."""
    components = tuple(components)
    general = _make_general_index(components)
    if not (len(components) == 1 and components[0][0] == BATCHED):
        return general

    def index_one_position(x: Any, *indices: Any) -> Any:
        if len(indices) == 1 and _one_numpy_position(x, indices[0]):
            return _numpy_position(x, indices[0])
        return general(x, *indices)

    return index_one_position


def _make_general_index(components: tuple[IndexComponent, ...]) -> Callable[..., Any]:
    if all(kind == BASIC for kind, _ in components):
        key = (slice(None), *(value for _, value in components))

        def index_basic(x: Any) -> Any:
            return x[key]

        return index_basic

    n_ints = sum(1 for kind, value in components if kind == BASIC and isinstance(value, int))

    def index(x: Any, *indices: Any) -> Any:
        ops = ops_for(x, *indices)
        x = ops.asarray(x)
        indices = tuple(ops.asarray(i) for i in indices)
        arrays = [i for i in indices if ops.ndim(i) > 1]
        others = len(indices) - len(arrays) + n_ints + sum(1 for kind, _ in components if kind == ARRAY)
        if arrays and (len(arrays) > 1 or others > 0):
            raise IndexError(
                "abir supports one per-member index array, with slices only beside it (got a "
                "per-member index array next to other integer or array indices); index in two steps"
            )
        for i in indices:
            if ops.dtype(i).kind not in "iu":
                raise IndexError(
                    f"per-member indices must be integers, got dtype {ops.dtype(i)}; convert the index "
                    "first, e.g. `x[int(i)]`"
                )
        expanded: list[IndexComponent] = []
        consumed = sum(1 for c in components if _consumes_axis(c))
        if consumed > ops.ndim(x) - 1:
            raise IndexError(f"too many indices: each member has {ops.ndim(x) - 1} dimension(s), the index uses {consumed}")
        for component in components:
            if component == (BASIC, Ellipsis):
                expanded += [(BASIC, slice(None))] * (ops.ndim(x) - 1 - consumed)
            else:
                expanded.append(component)
        supplied = iter(indices)
        axis, pending = 1, []

        def flush(x: Any, axis: int) -> tuple[Any, int]:
            if pending:
                x = x[(slice(None),) * axis + tuple(pending)]
                axis += sum(1 for p in pending if not isinstance(p, int))
                pending.clear()
            return x, axis

        for kind, value in expanded:
            if kind == BASIC:
                pending.append(value)
                continue
            x, axis = flush(x, axis)
            if kind == ARRAY:
                x = ops.take(x, value, axis)
                axis += value.ndim
            else:
                i = next(supplied)
                x = ops.gather(x, i, axis)
                axis += ops.ndim(i) - 1
        x, axis = flush(x, axis)
        return x

    return index


def _one_numpy_position(x: Any, i: Any) -> bool:
    """Whether `x[i]` is NumPy arrays' most common per-member read: one integer position `i[b]`
    along the first member axis of a non-empty `x`, both with the full batch."""
    return (
        type(x) is np.ndarray and type(i) is np.ndarray and i.ndim == 1 and x.ndim >= 2
        and i.dtype.kind in "iu" and x.shape[0] == i.shape[0] and x.shape[1] > 0
    )  # fmt: skip


def _numpy_position(x: np.ndarray, i: np.ndarray) -> np.ndarray:
    """`x[b, i[b]]` per member, the position wrapped and clipped as `ArrayOps.clip_index` does,
    by one fancy index (the general path's reshapes and `take_along_axis` cost several times
    more per step of a NumPy run)."""
    size = x.shape[1]
    i = np.minimum(np.maximum(np.where(i < 0, i + size, i), 0), size - 1)
    return x[np.arange(x.shape[0]), i]


def make_setitem(components: Sequence[IndexComponent]) -> Callable[..., Any]:
    """The callable `(x, value, *per_member_indices) -> x` with `x[member index] = value` done
    member by member, as a new array. The elements written are those `make_index(components)`
    reads (per-member indices clipped the same way); `value` broadcasts to them as NumPy
    broadcasts the right-hand side of an assignment and takes `x`'s dtype (as NumPy casts it)."""
    read = make_index(components)
    one_row_index = _one_row_index(components)

    def setitem(x: Any, value: Any, *indices: Any) -> Any:
        ops = ops_for(x, value, *indices)
        x, value = ops.asarray(x), ops.asarray(value)
        event = ops.event_shape(x)
        selected = read(ops.positions(event), *indices)  # the flat positions written, per member
        part = ops.event_shape(selected)
        if not part and ops.ndim(value) > 1:
            raise ValueError(
                "NumPy raises ValueError (setting an array element with a sequence): the index reaches one "
                f"element, and the value has shape {list(ops.event_shape(value))}. Instead: assign a scalar (`v[0]`)"
            )
        value = _fit_member(ops, ops.cast(value, ops.dtype(x)), len(part))
        # Any of the three may be one member for the whole batch (a constant array written with
        # a batched value, or a constant written at per-member indices): the result is batched.
        x, selected, value = ops.broadcast_batch([x, selected, value])
        value = ops.broadcast_member(value, x, part)
        count, size = int(np.prod(part, dtype=np.int64)), int(np.prod(event, dtype=np.int64))
        whole_rows = one_row_index and count > 0 and ops.ndim(indices[0]) == 1
        flat = ops.scatter(
            ops.reshape_event(x, (size,)), ops.reshape_event(selected, (count,)), ops.reshape_event(value, (count,)),
            whole_rows=whole_rows,
        )
        return ops.reshape_event(flat, event)

    return setitem


def _one_row_index(components: Sequence[IndexComponent]) -> bool:
    """Whether an index is a per-member index along the first axis with every other axis whole
    (`x[i]`, `x[i, :]`, `x[i, ...]`): with `i` a per-member integer, it selects one row."""
    if not components:
        return False
    first, *rest = components
    return first == (BATCHED, None) and all(component in ((BASIC, slice(None)), (BASIC, Ellipsis)) for component in rest)


def _fit_member(ops: ArrayOps, value: Any, rank: int) -> Any:
    """A member value with `rank` axes, as NumPy aligns the right-hand side of an assignment with
    the part written: size-1 leading axes dropped (`np.ones((1, 3))` into 3 elements), missing
    leading axes added (a scalar into a slice)."""
    while ops.ndim(value) - 1 > rank and ops.event_shape(value)[0] == 1:
        value = ops.squeeze(value, (1,))
    missing = rank - (ops.ndim(value) - 1)
    return ops.reshape_event(value, (*(1,) * missing, *ops.event_shape(value))) if missing > 0 else value


def make_scalar_check(error: Callable[[], Exception]) -> Callable[[Any], Any]:
    """The identity on per-member scalars; raises `error()` for members with axes (first when
    type inference runs it, so before the program runs)."""

    def require_scalar(x: Any) -> Any:
        ops = ops_for(x)
        if ops.ndim(ops.asarray(x)) > 1:
            raise error()
        return x

    return require_scalar


def after_in_place(old: Any, updated: Any) -> Any:
    """What a variable holding the same value as `x` holds after `x op= v` (`updated`): `x`'s
    array, updated in place, when members have axes; its own `old` value when they are scalars
    (immutable: Python rebinds `x` only)."""
    ops = ops_for(old, updated)
    return old if ops.ndim(ops.asarray(old)) <= 1 else updated


# -- shape facts -------------------------------------------------------------------------------


def make_shape_fact(what: str, dim: int | None = None) -> Callable[[Any], Any]:
    """`x.shape[dim]`, `len(x)`, `x.ndim` or `x.size` of each member, as a per-member int64."""

    def shape_fact(x: Any) -> Any:
        ops = ops_for(x)
        x = ops.asarray(x)
        shape = ops.event_shape(x)
        if what == "ndim":
            value = len(shape)
        elif what == "size":
            value = int(np.prod(shape, dtype=np.int64))
        else:
            if not shape:
                raise TypeError("len() of a per-member scalar" if what == "len" else "a per-member scalar has no dimensions")
            value = shape[dim if dim is not None else 0]
        return ops.full_batch(x, value, np.int64)

    return shape_fact


# -- conversions and reshaping -----------------------------------------------------------------


def astype_like(x: Any, like: Any) -> Any:
    """`x.astype(like.dtype)`."""
    ops = ops_for(x, like)
    return ops.cast(ops.asarray(x), ops.dtype(ops.asarray(like)))


def make_reshape(shape: tuple[int, ...]) -> Callable[[Any], Any]:
    def reshape(x: Any) -> Any:
        ops = ops_for(x)
        x = ops.asarray(x)
        event = ops.event_shape(x)
        target = list(shape)
        if -1 in target:
            known = int(np.prod([d for d in target if d != -1], dtype=np.int64))
            target[target.index(-1)] = int(np.prod(event, dtype=np.int64)) // max(known, 1)
        return ops.reshape_event(x, target)

    return reshape


def make_transpose(axes: tuple[int, ...] | None) -> Callable[[Any], Any]:
    """`x.T` / `x.transpose(axes)` of each member (`None`: reverse the event axes)."""

    def transpose(x: Any) -> Any:
        ops = ops_for(x)
        x = ops.asarray(x)
        n = ops.ndim(x) - 1
        member = tuple(reversed(range(n))) if axes is None else tuple(a % n for a in axes)
        return ops.transpose(x, (0, *(a + 1 for a in member)))

    return transpose


def make_squeeze(axis: Any) -> Callable[[Any], Any]:
    def squeeze(x: Any) -> Any:
        ops = ops_for(x)
        x = ops.asarray(x)
        shape = ops.event_shape(x)
        if axis is None:
            axes = tuple(i + 1 for i, d in enumerate(shape) if d == 1)
        else:
            member = axis if isinstance(axis, tuple) else (axis,)
            axes = tuple(a % len(shape) + 1 for a in member)
        return ops.squeeze(x, axes)

    return squeeze


# -- reductions and scans ------------------------------------------------------------------------


def _result_dtype(name: str, dtype: np.dtype, **kwargs: Any) -> np.dtype:
    return np.asarray(_quiet_numpy(getattr(np, name), np.zeros((2,), dtype), **kwargs)).dtype


def make_reduction(name: str, axis: Any, keepdims: bool, ddof: int = 0) -> Callable[[Any], Any]:
    """`np.<name>(member, axis=axis, keepdims=keepdims)` of each member."""
    if name in ("argmax", "argmin") and isinstance(axis, tuple):
        raise TypeError(f"{name} takes one axis or None")

    def reduce(x: Any) -> Any:
        ops = ops_for(x)
        x = ops.asarray(x)
        dtype = _result_dtype(name, ops.dtype(x), **({"ddof": ddof} if name in ("std", "var") else {}))
        if name in ("argmax", "argmin") and axis is None:
            flat = _flatten_events(ops, x)
            out = ops.reduce(name, flat, 1, False)
            if keepdims:
                out = ops.reshape_event(out, (1,) * (ops.ndim(x) - 1))
            return ops.cast(out, dtype)
        if name in ("sum", "prod", "mean", "std", "var") and ops.reduces_in_input_dtype:
            x = ops.cast(x, dtype)
        return ops.cast(ops.reduce(name, x, event_axes(axis, ops.ndim(x)), keepdims, ddof), dtype)

    return reduce


def make_scan(name: str, axis: int | None) -> Callable[[Any], Any]:
    def scan(x: Any) -> Any:
        ops = ops_for(x)
        x = ops.asarray(x)
        dtype = _result_dtype(name, ops.dtype(x))
        x = ops.cast(x, dtype)
        if axis is None:
            return ops.scan(name, _flatten_events(ops, x), 1)
        return ops.scan(name, x, event_axis(axis))

    return scan


# -- several operands ----------------------------------------------------------------------------


def _common(ops: ArrayOps, arrays: Sequence[Any]) -> list[Any]:
    arrays = ops.broadcast_batch(arrays)
    dtype = np.result_type(*(ops.dtype(a) for a in arrays))
    return [ops.cast(a, dtype) for a in arrays]


def make_concatenate(axis: int | None) -> Callable[..., Any]:
    def concatenate(*arrays: Any) -> Any:
        ops = ops_for(*arrays)
        arrays = _common(ops, arrays)
        if axis is None:
            return ops.concatenate([_flatten_events(ops, a) for a in arrays], 1)
        return ops.concatenate(arrays, event_axis(axis))

    return concatenate


def make_stack(axis: int) -> Callable[..., Any]:
    def stack(*arrays: Any) -> Any:
        ops = ops_for(*arrays)
        return ops.stack(_common(ops, arrays), event_axis(axis))

    return stack


def make_product(name: str) -> Callable[[Any, Any], Any]:
    """`np.dot`, `np.matmul` (`@`), `np.inner` (1-d) and `np.outer` of two members.

    On two NumPy arrays the shape logic is decided once per operand ranks and dtypes
    (`_numpy_product`): a call is then the same NumPy operations without the dispatch."""
    numpy_products: dict[tuple[Any, ...], Callable[[np.ndarray, np.ndarray], np.ndarray] | None] = {}

    def product(a: Any, b: Any) -> Any:
        if type(a) is np.ndarray and type(b) is np.ndarray:
            signature = (a.ndim, b.ndim, a.dtype, b.dtype)
            direct = numpy_products.get(signature, _UNPLANNED)
            if direct is _UNPLANNED:
                direct = numpy_products[signature] = _numpy_product(name, *signature)
            if direct is not None:
                return direct(a, b)
        return _product(name, ops_for(a, b), a, b)

    return product


_UNPLANNED: Any = object()


def _product(name: str, ops: ArrayOps, a: Any, b: Any) -> Any:
    """`make_product`'s operation on any array family."""
    if name in ("matmul", "dot") and _one_matrix_for_all(ops, a, b):
        dtype = np.result_type(ops.dtype(a), ops.dtype(b))
        return ops.matmul(ops.cast(ops.asarray(a), dtype), ops.cast(ops.asarray(b), dtype)[0])
    a, b = _common(ops, [a, b])
    na, nb = ops.ndim(a) - 1, ops.ndim(b) - 1
    if name == "outer":
        a, b = _flatten_events(ops, a), _flatten_events(ops, b)
        return ops.multiply(ops.expand_dims(a, 2), ops.expand_dims(b, 1))
    if name == "inner" and (na > 1 or nb > 1):
        raise TypeError("abir's np.inner takes per-member vectors (or scalars)")
    if name == "dot" and (na > 2 or nb > 2):
        raise TypeError("abir's np.dot takes per-member scalars, vectors or matrices; use np.matmul / @ for stacks")
    if na == 0 or nb == 0:
        if name == "matmul":
            raise TypeError("matmul: a per-member operand is a scalar (use * instead)")
        return ops.multiply(a, b)
    squeeze = []
    if na == 1:
        a = ops.expand_dims(a, 1)  # [B, 1, n]
        squeeze.append(-2)
    if nb == 1:
        b = ops.expand_dims(b, 2)  # [B, n, 1]
        squeeze.append(-1)
    while ops.ndim(a) < ops.ndim(b):
        a = ops.expand_dims(a, 1)
    while ops.ndim(b) < ops.ndim(a):
        b = ops.expand_dims(b, 1)
    out = ops.matmul(a, b)
    rank = ops.ndim(out)
    return ops.squeeze(out, tuple(sorted(s % rank for s in squeeze)))


def _one_matrix_for_all(ops: ArrayOps, a: Any, b: Any) -> bool:
    """Whether `a @ b` multiplies members' vectors or matrices `a` by ONE matrix `b` (a batch of
    1, e.g. a closure constant such as a precision matrix): then it is a single matmul with that
    matrix (`[B, n] @ [n, k]`), not a batched matmul with B copies of it (on XLA a broadcast of
    `[B, n, k]` per call)."""
    a, b = ops.asarray(a), ops.asarray(b)
    return ops.ndim(b) == 3 and b.shape[0] == 1 and ops.ndim(a) in (2, 3) and a.shape[0] != 1


def _numpy_product(
    name: str, ndim_a: int, ndim_b: int, dtype_a: np.dtype, dtype_b: np.dtype
) -> Callable[[np.ndarray, np.ndarray], np.ndarray] | None:
    """`_product` of NumPy batches of these ranks and dtypes as one direct function (None for
    the cases `_product` leaves to `multiply` or rejects): the batch broadcast and casts of
    `_common`, one reshape per operand for all its `expand_dims` (each inserts size-1 axes right
    after the batch axis, or the trailing axis of a vector `b`), `np.matmul` and `np.squeeze`."""
    na, nb = ndim_a - 1, ndim_b - 1
    if name == "outer" or min(na, nb) == 0 or (name == "inner" and max(na, nb) > 1) or (name == "dot" and max(na, nb) > 2):
        return None
    dtype = np.result_type(dtype_a, dtype_b)
    rank = max(na + (na == 1), nb + (nb == 1)) + 1  # the rank of both matmul operands
    ones_a = (1,) * (rank - ndim_a)  # inserted after the batch axis
    ones_b = (1,) * (rank - ndim_b - (nb == 1))
    trailing_b = (1,) if nb == 1 else ()
    squeeze = tuple(sorted(s % rank for s in (-2,) * (na == 1) + (-1,) * (nb == 1)))

    one_matrix = name in ("matmul", "dot") and nb == 2 and na in (1, 2)

    def direct(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if one_matrix and b.shape[0] == 1 and a.shape[0] != 1:  # see `_one_matrix_for_all`
            return np.matmul(a.astype(dtype, copy=False), b[0].astype(dtype, copy=False))
        if a.shape[0] != b.shape[0]:  # a batch of 1 (a constant) broadcasts
            a, b = _NUMPY_OPS.broadcast_batch([a, b])
        if a.dtype != dtype:
            a = a.astype(dtype)
        if b.dtype != dtype:
            b = b.astype(dtype)
        if ones_a:
            a = a.reshape((a.shape[0], *ones_a, *a.shape[1:]))
        if ones_b or trailing_b:
            b = b.reshape((b.shape[0], *ones_b, *b.shape[1:], *trailing_b))
        out = np.matmul(a, b)
        return np.squeeze(out, axis=squeeze) if squeeze else out

    return direct


def make_norm(axis: Any, keepdims: bool) -> Callable[[Any], Any]:
    """`np.linalg.norm(member)` with `ord=None`: the 2-norm of the flattened member (or along
    `axis`)."""

    def norm(x: Any) -> Any:
        ops = ops_for(x)
        x = ops.asarray(x)
        dtype = np.asarray(_quiet_numpy(np.linalg.norm, np.zeros((2,), ops.dtype(x)))).dtype
        magnitude = ops.cast(ops.abs(x), dtype)
        squares = ops.reduce("sum", ops.multiply(magnitude, magnitude), event_axes(axis, ops.ndim(x)), keepdims)
        return ops.sqrt(squares)

    return norm
