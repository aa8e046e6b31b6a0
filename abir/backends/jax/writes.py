"""How the JAX backend writes values to memory: stack writes (a scatter, a one-hot select, or
column by column inside a loop meant to be one kernel) and the results of costly helpers, put
in buffers of their own.

Every function here is traceable and takes the trace's mode (`scatter_free`) as an argument;
none reads or sets any state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from abir.backends.base import ONE_HOT_STACK_MAX, Span, State, Writes, span_row
from abir.backends.jax.cost import work_per_member

MATERIALIZE_MIN_ROW_WORK = 200
"""A batch-aware helper doing at least this many element operations per member (`jaxpr_work`)
has its results written to buffers of their own. XLA's CPU fusion otherwise recomputes an
elementwise producer inside each of its consumers: NUTS's momentum draw (`abir.random.normal`,
Threefry and Box-Muller, about 2,850 operations per member) was computed three times in its
block, once per register it is written to, and a rejection sampler's one normal draw per
member (about 270 operations) four times, in every fusion of its block that reads it, the
block's branch among them (docs/performance.md#jax-and-tf-backends, "Materialized helper
results"). A uniform draw (about 120 operations) stays fused."""


def stack_scatter(stack: Any, rows: Any, value: Any, scatter_free: bool) -> Any:
    """`stack[rows[b], b] = value[b]` for each member b; rows out of range write nothing. A
    stack of at most `ONE_HOT_STACK_MAX` elements is rewritten whole by a select on a one-hot
    row mask; with `scatter_free` the stack is written column by column."""
    batch = stack.shape[1]
    rows = jnp.broadcast_to(jnp.asarray(rows, dtype=jnp.int32), (batch,))
    value = jnp.broadcast_to(jnp.asarray(value, dtype=stack.dtype), stack.shape[1:])
    if scatter_free:
        return write_column_by_column({"stack": stack}, {"stack": [(rows, value)]})["stack"]
    if stack.size <= ONE_HOT_STACK_MAX:
        hit = jnp.arange(stack.shape[0], dtype=jnp.int32)[:, None] == rows[None, :]
        return jnp.where(hit.reshape(hit.shape + (1,) * (stack.ndim - 2)), value[None], stack)
    return stack.at[rows, jnp.arange(batch)].set(value, mode="drop", unique_indices=True)


SPAN_WINDOW_ROWS = 16
"""`span_by_windows` writes a `Span` request through windows of this many stack rows
(docs/performance.md#jax-and-tf-backends, "Span stack writes")."""


def span_by_windows(stack: Any, span: Span, value: Any, backend: Any) -> Any:
    """A `Span` request as a loop over windows of `SPAN_WINDOW_ROWS` rows (the whole stack if
    it has fewer), from the lowest row any member writes to the highest: each window one
    select between the span's values and the rows there, written back in place. The cost grows
    with the rows the spans cover together, never with the depth; no scatter, so a loop traced
    to be one kernel can contain it."""
    depth = stack.shape[0]
    size = min(SPAN_WINDOW_ROWS, depth)
    start = jnp.asarray(span.start, dtype=jnp.int32)
    count = jnp.asarray(span.count, dtype=jnp.int32)
    writing = count > 0
    first = jnp.min(jnp.where(writing, start, depth))
    end = jnp.max(jnp.where(writing, start + count, 0))
    event = (1,) * (stack.ndim - 2)

    def write_window(carry: tuple[Any, Any]) -> tuple[Any, Any]:
        low, stack = carry
        at = jnp.minimum(low, depth - size)
        offsets = at + jnp.arange(size, dtype=jnp.int32)[:, None] - start[None, :]
        inside = ((offsets >= 0) & (offsets < count[None, :])).reshape((size, -1, *event))
        rows = span_row(backend, span, value, offsets.reshape((size, -1, *event)), stack.dtype)
        window = lax.dynamic_slice_in_dim(stack, at, size, 0)
        window = jnp.where(inside, jnp.asarray(rows, stack.dtype), window)
        return low + size, lax.dynamic_update_slice_in_dim(stack, window, at, 0)

    return lax.while_loop(lambda carry: carry[0] < end, write_window, (first, stack))[1]


def write_column_by_column(stacks: State, writes: Writes) -> State:
    """`stacks` after the row requests `writes` (see `apply_writes`), all in one loop over the
    columns, each request in order an update of one element (rows out of range write nothing):
    a scatter without XLA's scatter, which a loop compiled as one kernel cannot contain
    (`abir.backends.jax.one_kernel`). There a loop iteration costs a few nanoseconds, less
    than rewriting the whole stack by a one-hot select (docs/performance.md#jax-and-tf-backends,
    "Scatter-free stack writes")."""
    keys = [key for key, requests in writes.items() if requests]
    if not keys:
        return dict(stacks)
    columns = stacks[keys[0]].shape[1]
    requests = []
    for key in keys:
        stack = stacks[key]
        for rows, value in writes[key]:
            rows = jnp.broadcast_to(jnp.asarray(rows, dtype=jnp.int32), (columns,))
            requests.append((keys.index(key), rows, jnp.broadcast_to(jnp.asarray(value, dtype=stack.dtype), stack.shape[1:])))

    def set_column(column: Any, current: tuple[Any, ...]) -> tuple[Any, ...]:
        current = list(current)
        for k, rows, value in requests:
            current[k] = _set_element(current[k], rows[column], column, value[column])
        return tuple(current)

    written = lax.fori_loop(jnp.int32(0), jnp.int32(columns), set_column, tuple(stacks[key] for key in keys))
    return {**stacks, **dict(zip(keys, written, strict=True))}


def _set_element(stack: Any, row: Any, column: Any, value: Any) -> Any:
    """`stack` with `stack[row, column] = value` when `row` is in range."""
    inside = (row >= 0) & (row < stack.shape[0])
    at = (jnp.where(inside, row, 0).astype(jnp.int32), column, *((jnp.int32(0),) * (stack.ndim - 2)))
    old = lax.dynamic_slice(stack, at, (1, 1, *stack.shape[2:]))
    return lax.dynamic_update_slice(stack, jnp.where(inside, value[None, None], old), at)


def scatter_columns(stack: Any, rows: Any, columns: Any, value: Any) -> Any:
    """`stack[rows[i], columns[i]] = value[i]`; out-of-range rows or columns are dropped."""
    count = columns.shape[0]
    rows = jnp.broadcast_to(jnp.asarray(rows, dtype=jnp.int32), (count,))
    value = jnp.broadcast_to(jnp.asarray(value, dtype=stack.dtype), (count, *stack.shape[2:]))
    return stack.at[rows, columns].set(value, mode="drop")


def in_own_buffers(result: Any, fn: Callable[..., Any], arrays: Sequence[Any], scatter_free: bool) -> Any:
    """`result`, the pytree `fn(*arrays)` returned, with its arrays in buffers of their own when
    `fn` does at least `MATERIALIZE_MIN_ROW_WORK` per member: `behind_conditional` with
    `scatter_free`, else `materialized`."""
    if work_per_member(fn, arrays) < MATERIALIZE_MIN_ROW_WORK:
        return result
    return jax.tree_util.tree_map(behind_conditional if scatter_free else materialized, result)


def behind_conditional(value: Any) -> Any:
    """`value` as the result of a conditional, which XLA's fusion does not see through, so its
    consumers read it from a buffer instead of each recomputing it: the scatter-free
    `materialized`. The predicate always holds (`x == x or x != x`) without XLA proving it for
    floats; the other branch, never taken, returns zeros (with two identical branches XLA
    removes the conditional). Should XLA fold the predicate, the value is only no longer
    materialized."""
    if not isinstance(value, jax.Array) or value.ndim == 0:
        return value
    first = value.reshape(-1)[0]
    return lax.cond((first == first) | (first != first), lambda v: v, jnp.zeros_like, value)


def materialized(value: Any) -> Any:
    """`value` copied into a buffer of its own by a scatter of its rows, which XLA never fuses
    into the consumers (an optimization barrier does not stop that fusion on the CPU)."""
    if not isinstance(value, jax.Array) or value.ndim == 0:
        return value
    rows = jnp.arange(value.shape[0])
    return jnp.zeros_like(value).at[rows].set(value, unique_indices=True, indices_are_sorted=True)
