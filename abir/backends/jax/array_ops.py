"""The array prims' operations on JAX arrays (`jax_array_ops`, named in `abir.backend_registry`):
jax.numpy's, with each member's product by one large matrix emitted as a product per member, and
item assignment written by selects instead of a scatter (a whole row by one select), in a loop
traced to be one kernel (whose emitter cannot emit a scatter: `abir.backends.jax.one_kernel`).

XLA's one-kernel emitter (`abir.backends.jax.one_kernel`) makes a matrix product a loop of
multiply-adds, one output element after another, reading the matrix across its rows: a miss
of the first-level cache per multiply-add once the matrix takes `STRIDED_PRODUCT_MIN_BYTES`.
A product of one vector by the matrix it emits as a vectorized matrix-vector loop instead, so
`[B, K] @ [K, N]` becomes a loop over the B members of `[K] @ [K, N]`.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

from abir.array_ops import ArrayOps
from abir.backends.jax.cost import STRIDED_PRODUCT_MIN_BYTES
from abir.backends.jax.mode import trace_mode

SELECTED_WRITES = 8
"""At most this many positions per item assignment are written by selects (K selects over the
member's N elements, each unrolled in the loop's code); more keep the scatter, and the loop its
kernel sequence."""


def _large_matrix(matrix: Any) -> bool:
    shape = getattr(matrix, "shape", ())
    return len(shape) == 2 and int(np.prod(shape)) * np.dtype(matrix.dtype).itemsize >= STRIDED_PRODUCT_MIN_BYTES


class JaxArrayOps(ArrayOps):
    """jax.numpy's operations; where the loop is traced to be one kernel, `matmul` of per-member
    vectors (rows of a [B, K] array) by one large [K, N] matrix is a product per member and
    `scatter` (item assignment) a select per written position."""

    def __init__(self) -> None:
        super().__init__(jnp)

    def matmul(self, a: Any, b: Any) -> Any:
        if trace_mode().scatter_free and getattr(a, "ndim", 0) == 2 and _large_matrix(b):
            matrix = jnp.asarray(b)
            return lax.map(lambda row: lax.dot_general(row, matrix, (((0,), (0,)), ((), ()))), jnp.asarray(a))
        return super().matmul(a, b)

    def scatter(self, x: Any, positions: Any, values: Any, whole_rows: bool = False) -> Any:
        """Where the loop is traced to be one kernel, without a scatter: one row (`whole_rows`)
        by one select over the member's N elements, else at most `SELECTED_WRITES` positions,
        each in turn by such a select (so a later write to the same position wins, as in the
        scatter)."""
        if not trace_mode().scatter_free:
            return super().scatter(x, positions, values)
        if whole_rows and positions.shape[1] > 1:  # a row of one element is the select below
            return _select_row(x, positions, values)
        if positions.shape[1] > SELECTED_WRITES:
            return super().scatter(x, positions, values)
        elements = jnp.arange(x.shape[1], dtype=positions.dtype)[None, :]
        for k in range(positions.shape[1]):
            x = jnp.where(elements == positions[:, k : k + 1], values[:, k : k + 1], x)
        return x

    def set_row(self, x: Any, row: Any, value: Any) -> Any:
        return lax.dynamic_update_index_in_dim(x, jnp.asarray(value, x.dtype), row, 0)


def _select_row(x: Any, positions: Any, values: Any) -> Any:
    """`x` ([B, N]) with row `positions[b, 0] // K` of member b, seen as [N // K, K], replaced by
    `values[b]` ([B, K]): a one-hot select over the rows, N element operations whatever the
    row's length (a select per position costs K times that)."""
    batch, row = values.shape
    rows = x.reshape(batch, -1, row)
    hit = jnp.arange(rows.shape[1], dtype=positions.dtype)[None, :] == (positions[:, 0] // row)[:, None]
    return jnp.where(hit[:, :, None], values[:, None, :], rows).reshape(x.shape)


def jax_array_ops() -> ArrayOps:
    """The operations on JAX arrays and tracers (JAX's registry entry)."""
    return JaxArrayOps()
