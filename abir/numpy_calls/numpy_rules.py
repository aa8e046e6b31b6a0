"""The NumPy path: whole-batch rules (ufuncs, axis functions, stacked linear algebra, and rules of
their own), else the function member by member. The rules of several per-member arrays are
written for any NumPy-like namespace `xp`, so TensorFlow's path uses them too."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from abir.numpy_calls.calls import (
    Call,
    member_rank,
    named_arguments,
    quietly,
    select_output,
    top_level_operands,
)
from abir.numpy_calls.registry import ALL_AXES, AXIS, FLATTEN_RESTORE, UFUNC, numpy_object, parameters
from abir.numpy_calls.templates import Operand, fill_template, template_operands

# -- NumPy -----------------------------------------------------------------------------------------


def numpy_whole_batch_call(call: Call, operands: list[np.ndarray]) -> np.ndarray:
    batch = max((o.shape[0] for o in operands), default=1)
    if operands:
        fast = whole_batch_rule(call, operands, np)
        if fast is not None:
            try:
                return quietly(fast)
            except Exception:  # noqa: BLE001  (a member's own call says what is wrong, or fills in)
                pass
    return _member_by_member(call, operands, batch)


def _member_by_member(call: Call, operands: list[np.ndarray], batch: int) -> np.ndarray:
    rows = [o if o.shape[0] == batch else np.broadcast_to(o, (batch, *o.shape[1:])) for o in operands]
    results: list[np.ndarray | None] = []
    for b in range(batch):
        try:
            results.append(quietly(lambda b=b: call.member([r[b] for r in rows])))
        except (np.linalg.LinAlgError, FloatingPointError):
            results.append(None)
    shapes = {r.shape for r in results if r is not None}
    if len(shapes) > 1:
        raise ValueError(
            f"np.{call.entry.name} returned results of shapes {sorted(shapes)} for different members; "
            "a per-member result must have one shape for every member"
        )
    template = next((r for r in results if r is not None), None)
    if template is None:
        template = _member_template(call, [r[0] if len(r) else np.zeros(r.shape[1:], r.dtype) for r in rows])
    filler = np.full(template.shape, np.nan if template.dtype.kind in "fc" else 0, template.dtype)
    if not results:
        return np.empty((0, *template.shape), template.dtype)
    return np.stack([filler if r is None else r for r in results])


def _member_template(call: Call, member: list[np.ndarray]) -> np.ndarray:
    """The result of one member whose values made the function fail (a singular matrix): run
    on well-conditioned stand-ins of the same shapes for the result's shape and dtype."""
    stand_ins = [_well_conditioned(m) for m in member]
    return quietly(lambda: call.member(stand_ins))


def _well_conditioned(x: np.ndarray) -> np.ndarray:
    if x.ndim >= 2 and x.shape[-1] == x.shape[-2] and x.dtype.kind in "fc":
        return np.broadcast_to(np.eye(x.shape[-1], dtype=x.dtype), x.shape).copy()
    return np.ones_like(x)


def whole_batch_rule(call: Call, operands: list[Any], xp: Any = np) -> Callable[[], Any] | None:
    """The whole-batch computation of `call` in namespace `xp` (NumPy, or TensorFlow's NumPy
    API), if its batching has one for these operands and `xp` has the function."""
    fn = numpy_object(call.entry.name, xp)
    if fn is None:
        return None
    if call.entry.name in _SPECIAL_RULES:
        return _SPECIAL_RULES[call.entry.name](call, operands, xp, fn)
    if call.entry.batching == UFUNC:
        return _ufunc_rule(call, operands, xp, fn)
    if call.entry.batching == AXIS:
        return _axis_rule(call, operands, xp, fn)
    return None


def _ufunc_rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """Elementwise functions and gufuncs: the batch is one more loop dimension, once each
    operand's loop dimensions are padded to a common rank after the batch axis."""
    placed = top_level_operands(call)
    entry = call.entry
    if placed is None or entry.elementwise_in and not set(placed) <= set(entry.elementwise_in):
        return None
    if entry.name.endswith("_like") and "shape" in call.bound:
        return None
    named = named_arguments(call)
    cores = {name: (entry.core[i] if i < len(entry.core) else 0) for i, name in enumerate(named)}
    loop_ranks = {name: member_rank(operands[p.index]) - 1 - cores[name] for name, p in placed.items()}
    if min(loop_ranks.values(), default=0) < 0:
        return None
    broadcast = entry.elementwise_in or tuple(named)
    static_ranks = [
        np.ndim(v) - cores[name] for name, v in named.items() if name in broadcast and isinstance(v, np.ndarray | list)
    ]
    loop_rank = max([*loop_ranks.values(), *static_ranks, 0])
    aligned = list(operands)
    for name, place in placed.items():
        o = operands[place.index]
        shape = tuple(int(d) for d in o.shape)
        aligned[place.index] = xp.reshape(o, (shape[0], *(1,) * (loop_rank - loop_ranks[name]), *shape[1:]))
    return lambda: select_output(call, fn(*fill_template(call.args, aligned), **fill_template(call.kwargs, aligned)), xp)


def _axis_rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """Axis functions whose batched operands all are the first argument: the axes shifted past
    the batch axis (`axis=None` per `none_axis`)."""
    if not call.bound or not call.args or not isinstance(call.args[0], Operand):
        return None
    first = call.args[0]
    if any(o.index != first.index for o in template_operands((call.args[1:], call.kwargs))):
        return None
    x = operands[first.index]
    if call.entry.name == "pad":
        return _pad_rule(call, x, xp, fn)
    shape = tuple(int(d) for d in x.shape)
    arguments = dict(call.bound)
    restore: tuple[int, ...] | None = None
    for name in call.entry.axes:
        value = arguments.get(name, _default(call.entry.name, name))
        if value is not None:
            arguments[name] = _shift_axes(value)
        elif call.entry.none_axis == ALL_AXES:
            every = tuple(range(1, len(shape)))
            arguments[name] = every[0] if len(every) == 1 else every
        elif call.bound.get("keepdims"):
            return None
        else:
            restore = shape if call.entry.none_axis == FLATTEN_RESTORE else None
            x = xp.reshape(x, (shape[0], -1))
            arguments[name] = 1
    if call.entry.name.endswith(("percentile", "quantile")) and np.ndim(arguments.get("q")) != 0:
        return None
    arguments[next(iter(call.bound))] = x
    positional = [arguments.pop(name) for name in _positional_only(call.entry.name) if name in arguments]

    def run() -> Any:
        result = select_output(call, fn(*positional, **arguments), xp)
        return xp.reshape(result, restore) if restore is not None else result

    return run


def _positional_only(name: str) -> list[str]:
    signature = parameters(numpy_object(name))
    if signature is None:
        return []
    return [p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.POSITIONAL_ONLY]


def _default(function: str, parameter: str) -> Any:
    signature = parameters(numpy_object(function))
    if signature is None or parameter not in signature.parameters:
        return None
    default = signature.parameters[parameter].default
    return None if default is inspect.Parameter.empty else default


def _shift_axes(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return type(value)(_shift_axes(v) for v in value)
    return value + 1 if value >= 0 else value


def _pad_rule(call: Call, x: Any, xp: Any, fn: Callable[..., Any]) -> Callable[[], Any]:
    """`np.pad` with no padding on the batch axis (each per-axis argument gains a first row)."""
    rank = member_rank(x) - 1
    widths = np.broadcast_to(np.asarray(call.bound.get("pad_width"), dtype=np.int64), (rank, 2))
    kwargs = {k: v for k, v in call.bound.items() if k not in ("array", "pad_width", "kwargs")}
    kwargs.update(call.bound.get("kwargs", {}))
    for key in ("constant_values", "end_values", "stat_length"):
        if key in kwargs and np.ndim(kwargs[key]) >= 1:
            values = np.broadcast_to(np.asarray(kwargs[key]), (rank, 2))
            kwargs[key] = np.concatenate([np.zeros((1, 2), values.dtype), values])
    return lambda: fn(x, np.concatenate([np.zeros((1, 2), np.int64), widths]), **kwargs)


def _solve_rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """`solve(a, b)` on stacks; a member's vector `b` becomes a one-column matrix (NumPy reads a
    batch of vectors `[B, n]` as one matrix)."""
    named = named_arguments(call)
    a, b = named.get("a"), named.get("b")
    if not isinstance(b, Operand) or not isinstance(a, Operand | np.ndarray):
        return None
    rhs = operands[b.index]
    a_value = operands[a.index] if isinstance(a, Operand) else a
    if member_rank(rhs) == 2:
        return lambda: fn(a_value, rhs[..., None])[..., 0]
    if member_rank(rhs) == 3:
        return lambda: fn(a_value, rhs)
    return None


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum_rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """`einsum` with a new index for the batch axis on every batched operand and in front of the
    output (an implicit output made explicit first)."""
    subscripts, *inputs = call.args
    if call.kwargs or not isinstance(subscripts, str) or "." in subscripts:
        return None
    spec = subscripts.replace(" ", "")
    ins, _, out = spec.partition("->")
    terms = ins.split(",")
    if len(terms) != len(inputs) or any(not isinstance(i, Operand | np.ndarray) for i in inputs):
        return None
    if "->" not in spec:
        letters = "".join(terms)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    batch = next(c for c in _LETTERS if c not in spec)
    terms = [batch + t if isinstance(i, Operand) else t for t, i in zip(terms, inputs, strict=True)]
    values = [operands[i.index] if isinstance(i, Operand) else i for i in inputs]
    return lambda: fn(",".join(terms) + "->" + batch + out, *values)


_SPECIAL_RULES: dict[str, Callable[..., Callable[[], Any] | None]] = {
    "linalg.solve": _solve_rule,
    "einsum": _einsum_rule,
    "searchsorted": lambda *a: _searchsorted_rule(*a),
    "interp": lambda *a: _interp_rule(*a),
    "histogram": lambda *a: _histogram_rule(*a),
    "gradient": lambda *a: _gradient_rule(*a),
    "convolve": lambda *a: _convolution_rule(correlate=False)(*a),
    "correlate": lambda *a: _convolution_rule(correlate=True)(*a),
}
"""Whole-batch rules of functions that batch in their own way (`pad`'s is an axis rule's)."""



# -- rules of functions of several per-member arrays (NumPy and TensorFlow alike) ---------------


def _as_rows(value: Any, batch: int, xp: Any) -> Any | None:
    """A whole-batch operand, or a compile-time 1-D argument repeated for every member, as
    rows `[B, n]`; None if it is not a vector per member."""
    rows = xp.asarray(value)
    if member_rank(rows) not in (1, 2):
        return None
    if member_rank(rows) == 1:
        return xp.broadcast_to(rows[None], (batch, int(rows.shape[0])))
    return xp.broadcast_to(rows, (batch, int(rows.shape[1])))


def _vector_pair(
    call: Call, operands: Sequence[Any], xp: Any, first: str, second: str, others: tuple[str, ...] = ()
) -> tuple[Any, Any] | None:
    """Arguments `first` and `second` (each a batched vector or a compile-time vector) as rows
    `[B, n]`, `[B, m]`; None if an argument but these and `others` is batched, or either is
    not a vector."""
    named = named_arguments(call)
    if any(name not in (first, second, *others) for name in top_level_operands(call) or {"#": None}):
        return None
    batch = max(int(o.shape[0]) for o in operands)
    values = [operands[v.index] if isinstance(v, Operand) else v for v in (named.get(first), named.get(second))]
    if any(isinstance(v, Operand) and member_rank(operands[v.index]) != 2 for v in (named.get(first), named.get(second))):
        return None
    a, b = (_as_rows(v, batch, xp) for v in values)
    return None if a is None or b is None else (a, b)


def sliding_product(a: Any, v: Any, mode: str, correlate: bool, xp: Any) -> Any:
    """`np.convolve` (or `np.correlate`) of rows `a` [B, n] and `v` [B, m]: the full result is
    the windows of `a` zero-padded by m-1 times `v` reversed (or conjugated), then cut to `mode`."""
    n, m = int(a.shape[1]), int(v.shape[1])
    zeros = xp.zeros((int(a.shape[0]), m - 1), dtype=a.dtype)
    padded = xp.concatenate([zeros, a, zeros], axis=1)
    windows = xp.take(padded, np.arange(n + m - 1)[:, None] + np.arange(m)[None], axis=1)
    kernel = xp.conj(v) if correlate else xp.flip(v, axis=1)
    full = xp.sum(windows * kernel[:, None, :], axis=-1)
    short, long = min(n, m), max(n, m)
    if mode == "full":
        return full
    if mode == "valid":
        return full[:, short - 1 : long]
    start = short // 2 if correlate and n < m else (short - 1) // 2
    return full[:, start : start + long]


def _convolution_rule(correlate: bool) -> Callable[..., Callable[[], Any] | None]:
    def rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
        mode = call.bound.get("mode", "valid" if correlate else "full")
        pair = _vector_pair(call, operands, xp, "a", "v")
        if pair is None or mode not in ("full", "same", "valid") or min(int(pair[0].shape[1]), int(pair[1].shape[1])) < 1:
            return None
        return lambda: sliding_product(*pair, mode, correlate, xp)

    return rule


def sorted_positions(a: Any, v: Any, side: str, xp: Any) -> Any:
    """`np.searchsorted` of rows `v` [B, m] in sorted rows `a` [B, n]: a binary search of every
    value at once, ordering NaN last as NumPy sorts it."""
    n = int(a.shape[1])

    def less(x: Any, y: Any) -> Any:
        return xp.logical_or(x < y, xp.logical_and(xp.isnan(y), xp.logical_not(xp.isnan(x))))

    low = xp.zeros(v.shape, dtype=np.int64)
    high = xp.full(v.shape, n, dtype=np.int64)
    for _ in range(max(n, 1).bit_length()):
        middle = (low + high) // 2
        pivot = xp.take_along_axis(a, xp.minimum(middle, max(n - 1, 0)), axis=1)
        right = less(pivot, v) if side == "left" else xp.logical_not(less(v, pivot))
        active = low < high
        low = xp.where(xp.logical_and(active, right), middle + 1, low)
        high = xp.where(xp.logical_and(active, xp.logical_not(right)), middle, high)
    return low


def _searchsorted_rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """`searchsorted(a, v)` of a batched sorted `a` (a compile-time `a` is the ufunc rule's)."""
    named = named_arguments(call)
    a, v, side = named.get("a"), named.get("v"), call.bound.get("side", "left")
    if not isinstance(a, Operand) or call.bound.get("sorter") is not None or side not in ("left", "right"):
        return None
    rows = operands[a.index]
    if member_rank(rows) != 2 or np.dtype(getattr(rows.dtype, "as_numpy_dtype", rows.dtype)).kind == "c":
        return None
    batch = int(rows.shape[0])
    values = operands[v.index] if isinstance(v, Operand) else xp.broadcast_to(xp.asarray(v)[None], (batch, *np.shape(v)))
    shape = tuple(int(d) for d in values.shape)
    flat = xp.reshape(values, (batch, -1))
    return lambda: xp.reshape(sorted_positions(rows, flat, side, xp), shape)


def _interp_rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """`interp(x, xp, fp)` with per-member sample points: each value's interval found by
    `sorted_positions`, then NumPy's formula (a compile-time `xp` and `fp` is the ufunc rule's)."""
    named = named_arguments(call)
    if not isinstance(named.get("xp"), Operand) and not isinstance(named.get("fp"), Operand):
        return _ufunc_rule(call, operands, xp, fn)
    if call.bound.get("period") is not None or any(isinstance(named.get(k), Operand) for k in ("left", "right")):
        return None
    pair = _vector_pair(call, operands, xp, "xp", "fp", others=("x",))
    x = named.get("x")
    if pair is None or int(pair[0].shape[1]) != int(pair[1].shape[1]) or int(pair[0].shape[1]) < 2:
        return None
    batch = int(pair[0].shape[0])
    values = operands[x.index] if isinstance(x, Operand) else xp.broadcast_to(xp.asarray(x)[None], (batch, *np.shape(x)))
    shape = tuple(int(d) for d in values.shape)
    left, right = call.bound.get("left"), call.bound.get("right")
    return lambda: xp.reshape(interpolated(xp.reshape(values, (batch, -1)), *pair, left, right, xp), shape)


def interpolated(x: Any, points: Any, samples: Any, left: Any, right: Any, xp: Any) -> Any:
    """`np.interp` of rows `x` [B, m] on rows of sample points and values [B, n], as NumPy's C code computes it."""
    n = int(points.shape[1])
    points, samples = xp.asarray(points, dtype=np.float64), xp.asarray(samples)
    samples = samples if samples.dtype in (np.complex64, np.complex128) else xp.asarray(samples, dtype=np.float64)
    x = xp.asarray(x, dtype=np.float64)
    j = xp.clip(sorted_positions(points, x, "right", xp) - 1, 0, n - 2)
    x0, x1 = xp.take_along_axis(points, j, axis=1), xp.take_along_axis(points, j + 1, axis=1)
    y0, y1 = xp.take_along_axis(samples, j, axis=1), xp.take_along_axis(samples, j + 1, axis=1)
    slope = (y1 - y0) / (x1 - x0)
    result = slope * (x - x0) + y0
    result = xp.where(xp.isnan(result), slope * (x - x1) + y1, result)
    result = xp.where(xp.logical_and(xp.isnan(result), y0 == y1), y0, result)
    first, last = samples[:, :1], samples[:, n - 1 : n]
    result = xp.where(x == points[:, n - 1 : n], last, result)
    result = xp.where(x > points[:, n - 1 : n], last if right is None else right, result)
    return xp.where(x < points[:, :1], first if left is None else left, result)


def _histogram_rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """`histogram(a, bins=n, range=...)` with a number of equal bins and no weights: NumPy's own
    bin search (scaled position, corrected against the edges), counted with one `bincount`."""
    named = named_arguments(call)
    a, bins, bounds = named.get("a"), call.bound.get("bins", 10), call.bound.get("range")
    if xp is not np or not isinstance(a, Operand) or set(top_level_operands(call) or {"#": 0}) != {"a"}:
        return None
    if not isinstance(bins, int) or bins < 1 or call.bound.get("weights") is not None or call.bound.get("density"):
        return None
    values = operands[a.index]
    if values.dtype.kind not in "biuf" or values.ndim < 1:
        return None
    return lambda: _equal_bin_histogram(values.reshape(values.shape[0], -1), bins, bounds)[call.output]


def _equal_bin_histogram(a: np.ndarray, bins: int, bounds: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each row's `np.histogram(row, bins, bounds)`, computed as NumPy's equal-bin path does."""
    dtype = a.dtype if a.dtype.kind == "f" else np.dtype(np.float64)
    if bounds is not None:
        first, last = np.full(len(a), bounds[0], dtype), np.full(len(a), bounds[1], dtype)
    elif a.shape[1] == 0:
        first, last = np.zeros(len(a), dtype), np.ones(len(a), dtype)
    else:
        first, last = a.min(axis=1).astype(dtype), a.max(axis=1).astype(dtype)
    if not (np.all(np.isfinite(first)) and np.all(np.isfinite(last)) and np.all(first <= last)):
        raise ValueError("histogram range must be finite and increasing")
    same = first == last
    first, last = np.where(same, first - 0.5, first), np.where(same, last + 0.5, last)
    exact = np.float64 if bounds is not None else dtype  # NumPy's linspace runs in its edges' type
    edges = np.linspace(first.astype(exact), last.astype(exact), bins + 1, endpoint=True, axis=1).astype(dtype)
    keep = (a >= first[:, None]) & (a <= last[:, None])
    values = a.astype(dtype)
    scaled = (values - first[:, None]) / (last - first)[:, None] * bins
    index = np.where(keep, scaled, 0).astype(np.intp)
    index[index == bins] -= 1
    index -= values < np.take_along_axis(edges, index, axis=1)
    index += (values >= np.take_along_axis(edges, np.minimum(index + 1, bins), axis=1)) & (index != bins - 1)
    flat = (index + bins * np.arange(len(a))[:, None])[keep]
    counts = np.bincount(flat, minlength=bins * len(a)).reshape(len(a), bins)
    return counts.astype(np.int64), edges


def _gradient_rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """`gradient(f)` of a per-member vector with unit spacing: NumPy's own along the row axis."""
    named = named_arguments(call)
    f = named.get("f")
    extra = set(named) - {"f", "axis", "edge_order"}
    if xp is not np or not isinstance(f, Operand) or extra or named.get("axis") not in (None, 0, -1):
        return None
    values = operands[f.index]
    if values.ndim != 2:
        return None
    return lambda: fn(values, axis=1, edge_order=named.get("edge_order", 1))
