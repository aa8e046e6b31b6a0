"""Item assignment of one row at a per-member index (`x[i] = v`, `x[i, :] = v`, `x[i, ...] = v`):
equal to plain Python per member on every backend, with members writing different rows, some
members not writing (the write under a branch), negative indices, rows of several axes, scalars broadcast to the row, and rows wider than
`SELECTED_WRITES` (where the JAX loop traced to be one kernel writes the row by one select,
so the loop stays one kernel)."""

from __future__ import annotations

import numpy as np
import pytest

import abir
from abir.backends.jax import array_ops

ctx = abir.Context()
WIDE = array_ops.SELECTED_WRITES + 4
ROWS = 6


@ctx.batch()
def record(x, n):
    """A loop recording rows of `x` ([3, WIDE]) at per-member rows, as a sampler keeps its draws;
    odd steps only on members with an odd `n`."""
    out = np.zeros((ROWS, WIDE))
    i = 0
    while i < n:
        if (i % 2 == 0) or (n % 2 == 1):
            out[(i * 3 + n) % ROWS] = x[i % 3] * (i + 1)
        i += 1
    return out


@ctx.batch()
def forms(x, i):
    """Each row form once: a row, a row with a slice, a scalar broadcast by Ellipsis, a row of a
    3-axis array, at indices that may be negative."""
    a = np.zeros((5, WIDE))
    a[i] = x
    a[i - 2, :] = x + 1.0
    a[i + 2, ...] = 2.5
    cube = np.zeros((4, 2, WIDE))
    cube[i] = np.ones((2, WIDE)) * i
    return a.sum(axis=1) + cube.sum(axis=(1, 2))[0]


X = np.arange(8 * 3 * WIDE, dtype=np.float64).reshape(8, 3, WIDE) / 7.0
N = np.array([0, 1, 2, 5, 6, 9, 3, 7])
INDICES = np.array([0, 1, 2, -1, -2, 1, 2, 0])


def test_rows_written_at_per_member_indices_equal_python(backend_name) -> None:
    got = record(X, N, backend=backend_name)
    np.testing.assert_allclose(np.asarray(got), record(X, N, dry_run=True), rtol=1e-12)


def test_each_row_form_equals_python(backend_name) -> None:
    x = X[:, 0]
    got = forms(x, INDICES, backend=backend_name)
    np.testing.assert_allclose(np.asarray(got), forms(x, INDICES, dry_run=True), rtol=1e-12)


@pytest.mark.parametrize("fn,args", [(record, (X, N)), (forms, (X[:, 0], INDICES))], ids=["record", "forms"])
def test_a_loop_writing_wide_rows_is_one_kernel(fn, args) -> None:
    from abir.backends.jax import one_kernel

    cache: dict = {}
    fn(*args, backend=abir.JaxBackend(code_cache=cache))
    ((_, loop),) = [entry[:2] for entry in cache.values()]
    assert isinstance(loop, one_kernel.OneKernelWherePossible)
    assert list(loop.chosen.values()) == [loop.fused]


def test_a_one_element_row_is_written_by_the_per_position_select() -> None:
    """`x[i] = v` on a member's vector (a row of one element) keeps the select over the member's
    [N] elements; the one-hot select over [N, 1] rows made edit-distance's loop 1.6x slower."""
    import jax

    from abir.backends.jax.mode import traced_as

    ops = array_ops.JaxArrayOps()
    x, positions, values = np.zeros((4, 7)), np.array([[0], [3], [6], [2]]), np.ones((4, 1))
    with traced_as(scatter_free=True):
        jaxpr = jax.make_jaxpr(lambda a, p, v: ops.scatter(a, p, v, whole_rows=True))(x, positions, values)
        written = np.asarray(ops.scatter(x, positions, values, whole_rows=True))
    want = x.copy()
    np.put_along_axis(want, positions, values, axis=1)
    np.testing.assert_array_equal(written, want)
    assert all(len(var.aval.shape) <= 2 for eqn in jaxpr.jaxpr.eqns for var in eqn.outvars)
