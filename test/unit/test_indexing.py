"""Array syntax on batched values, end to end through the public API: indexing (compile-time and
per-member indices), methods and attributes, axis-aware NumPy functions, starred arguments.

Each function is written for ONE member; the batched result must equal the plain Python result
of every member (NumPy semantics on the member's own array)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import abir
from abir.errors import UnsupportedSyntaxError

TABLE = np.array([10, 20, 30, 40])
DIM = 3
State = collections.namedtuple("State", ["position", "momentum"])


def helper_three(a, b, c):
    return a * 100 + b * 10 + c


# -- functions under test (module level, one member each) --------------------------------------


def constant_indices(x):
    return x[0], x[-1], x[1:], x[::-1], x[..., 0], x[None], x[1:, None][:, 0], x[[0, 2]]


def matrix_indices(m):
    return m[1], m[:, 0], m[..., -1], m[0, 1:], m[1, 2], m.T, m[:, [2, 0]]


def loop_gather(x):
    total = 0
    for i in range(len(x)):
        if x[i] > 2:
            total = total + x[i] * i
    return total


def batched_index(x, i):
    return x[i], x[i - 1], TABLE[i]


def batched_matrix_index(m, i, j):
    return m[i], m[i, j], m[:, j], m[i, 1:], m.T[j][i]


def reductions(x):
    return (x.sum(), x.mean(), x.max(), x.min(), x.prod(), (x > 2).any(), (x > 2).all(), x.std(), x.var(),
            x.argmax(), x.argmin(), x.cumsum())  # fmt: skip


def axis_reductions(m):
    return (m.sum(axis=0), m.sum(axis=-1), m.max(0), m.mean(axis=1, keepdims=True), m.sum(axis=(0, 1)),
            m.argmax(axis=1), m.cumsum(axis=0))  # fmt: skip


def numpy_functions(m):
    return (np.sum(m), np.sum(m, axis=0), np.mean(m, axis=-1), np.max(m, axis=1), np.min(m), np.prod(m, 0),
            np.any(m > 4), np.all(m > -1, axis=0), np.argmax(m), np.cumsum(m, axis=1))  # fmt: skip


def vector_algebra(a, b):
    return np.dot(a, b), a @ b, a.dot(b), np.linalg.norm(a), np.concatenate([a, b]), np.stack([a, b]), \
        np.stack([a, b], axis=-1), np.outer(a, b), np.inner(a, b)


def matrix_algebra(m, v):
    return m @ v, np.dot(m[0], m.T), m @ m.T, np.linalg.norm(m), np.linalg.norm(m, axis=1), np.concatenate([m, m], axis=1)


def conversions(x):
    return x.astype(np.float32), x.astype(np.int64), np.float32(x), float(x[0]), int(x[1] * 1.5), x.astype(bool)


def astype_like(x, y):
    return x.astype(y.dtype)


def shape_facts(m):
    return m.shape[0], m.shape[1], m.shape[-1], len(m), m.ndim, m.size, np.ndim(m), np.size(m)


def reshaping(m):
    return m.reshape(-1), m.reshape(2, 3), m.reshape((3, 2)), m.flatten(), m.ravel(), m.transpose(), \
        np.transpose(m, (1, 0)), np.reshape(m, (6,)), m[None].squeeze(), m[:1].squeeze(0), m[0, 0:1].item()


def clipping(x):
    return x.clip(1, 4), np.clip(x, 2, 3), x.copy()


def starred(x):
    parts = (x[0], x[1], x[2])
    more = [*parts, x[0]]
    return helper_three(*parts), np.maximum(*parts[:2]), more[3], (*parts, 1)[3]


def starred_constant(x):
    return helper_three(*[x, 2], 3) + x


def mcmc_step(state, direction):
    """A small sampler step on vector state of shape [DIM]."""
    position, momentum = state
    for k in range(DIM):
        momentum = momentum - 0.1 * position
        position = position + 0.1 * momentum
        if position[k] > 1.0:
            position = position - direction * position[k]
    energy = 0.5 * np.sum(momentum**2) + 0.5 * (position @ position)
    return State(position, momentum), energy


# -- the checks ------------------------------------------------------------------------------------


def per_member(fn, args):
    """The plain Python result of every member, stacked like the batched result."""
    batch = max(len(np.asarray(a)) for a in _leaves(args))
    results = [_leaves(fn(*(_member(a, b) for a in args))) for b in range(batch)]
    return [np.stack([np.asarray(r[k]) for r in results]) for k in range(len(results[0]))]


def _leaves(value):
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _member(value, b):
    if isinstance(value, tuple):
        return type(value)(*(_member(v, b) for v in value))
    return np.asarray(value)[b]


def _as_numpy(value):
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def check(fn, *args, backend=None, exact_dtype=True):
    ctx = abir.Context()
    batched = ctx.batch_uncurried(fn)
    got = batched(*args) if backend is None else batched(*args, backend=backend)
    want = per_member(fn, args)
    got_leaves, want_leaves = _leaves(got), want
    assert len(got_leaves) == len(want_leaves)
    for k, (g, w) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        g = _as_numpy(g)
        assert g.shape == w.shape, f"result {k}: shape {g.shape} != {w.shape}"
        if exact_dtype:
            assert g.dtype == w.dtype, f"result {k}: dtype {g.dtype} != {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=f"result {k}")
    return got


VECTORS = np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 1, 4]])
MATRICES = np.arange(24).reshape(4, 2, 3) % 7


def test_constant_indices():
    check(constant_indices, VECTORS)


def test_constant_indices_on_matrices():
    check(matrix_indices, MATRICES)


def test_loop_counter_index():
    check(loop_gather, VECTORS)


def test_batched_index():
    check(batched_index, VECTORS, np.array([0, 2, 1, 2]))


def test_batched_indices_into_matrices():
    check(batched_matrix_index, MATRICES, np.array([0, 1, 1, 0]), np.array([2, 0, 1, 1]))


def test_junk_indices_are_clipped_not_raised():
    ctx = abir.Context()
    batched = ctx.batch_uncurried(batched_index)
    first, previous, table = batched(VECTORS, np.array([7, -9, 3, 1]))
    np.testing.assert_array_equal(first, [2, 3, 8, 1])  # negative indices wrap first, then clip into range
    np.testing.assert_array_equal(previous, [2, 3, 8, 9])
    np.testing.assert_array_equal(table, [40, 10, 40, 20])


def test_method_reductions():
    check(reductions, VECTORS.astype(np.float64))
    check(reductions, VECTORS)


def test_axis_reductions():
    check(axis_reductions, MATRICES)


def test_numpy_reductions_see_the_member_only():
    check(numpy_functions, MATRICES)


def test_vector_algebra():
    check(vector_algebra, VECTORS, VECTORS[::-1].copy())
    check(vector_algebra, VECTORS.astype(np.float32), VECTORS.astype(np.float32) / 2)


def test_matrix_algebra():
    check(matrix_algebra, MATRICES.astype(np.float64), np.array([[1.0, 0.5, 2.0]] * 4))


def test_conversions():
    check(conversions, VECTORS)


def test_astype_like_another_value():
    check(astype_like, VECTORS, np.array([1.5, 2.5, 0.0, 1.0], np.float32))


def test_shape_facts_are_per_member_ints():
    check(shape_facts, MATRICES)


def test_reshaping():
    check(reshaping, MATRICES)


def test_clip_and_copy():
    check(clipping, VECTORS)


def test_starred_arguments():
    check(starred, VECTORS)
    check(starred_constant, np.array([1, 2, 3]))


def test_mcmc_step_with_vector_state():
    rng = np.random.default_rng(0)
    state = State(rng.normal(size=(5, DIM)), rng.normal(size=(5, DIM)))
    check(mcmc_step, state, rng.normal(size=(5, DIM)))


def calls_numpy(x):  # as in test_end_to_end: the event axis, kept
    return x + np.sum(x, axis=-1, keepdims=True)


def test_existing_negative_axis_keepdims_behaviour():
    np.testing.assert_array_equal(
        abir.Context().batch_uncurried(calls_numpy)(np.array([[1, 2], [5, 6]])), [[4, 5], [16, 17]]
    )


# -- other backends ------------------------------------------------------------------------------------

BACKENDS = {
    "jax": lambda: abir.JaxBackend(),
    "tf": lambda: abir.TensorFlowBackend(),
    "tf-xla": lambda: abir.TensorFlowBackend(jit_compile=True),
}


@pytest.fixture(params=list(BACKENDS), scope="module")
def backend(request):
    """Each backend; the default TF backend ("tf") compiles these programs with XLA, so under
    `make test` its "tf-xla" run stands for it (conftest's TF rule)."""
    return BACKENDS[request.param]()


@pytest.mark.make_test_keeps({"backend": "jax"}, {"backend": "tf-xla"})
def test_backend_constant_and_batched_indices(backend):
    check(constant_indices, VECTORS, backend=backend)
    check(batched_matrix_index, MATRICES, np.array([0, 1, 1, 0]), np.array([2, 0, 1, 1]), backend=backend)


@pytest.mark.make_test_keeps({"backend": "jax"}, {"backend": "tf-xla"})
def test_backend_loop_gather(backend):
    check(loop_gather, VECTORS, backend=backend)


@pytest.mark.parametrize("namespace", ["numpy", "jax"])
def test_gather_from_one_row_equals_gather_from_the_spread_rows(namespace):
    """`ArrayOps.gather` of one row (every member's, such as a shared model parameter) indexes
    that row as it is; the result equals indexing the row spread to the batch."""
    from abir.array_ops import ops_for

    rng = np.random.default_rng(3)
    table = rng.normal(size=(1, 3, 4, 2))
    index = np.array([[2, 0], [1, 1], [0, 2], [5, -1]])  # clipped, and a negative one wrapped
    if namespace == "jax":
        jnp = pytest.importorskip("jax.numpy")
        table, index = jnp.asarray(table), jnp.asarray(index)
    ops = ops_for(table, index)
    spread = ops.xp.broadcast_to(table, (4, *table.shape[1:]))
    for axis in (1, 2, 3):
        np.testing.assert_array_equal(np.asarray(ops.gather(table, index, axis)), np.asarray(ops.gather(spread, index, axis)))


@pytest.mark.make_test_keeps({"backend": "jax"}, {"backend": "tf-xla"})
def test_backend_reductions_and_algebra(backend):
    check(axis_reductions, MATRICES, backend=backend)
    check(numpy_functions, MATRICES, backend=backend)
    check(vector_algebra, VECTORS, VECTORS[::-1].copy(), backend=backend)


@pytest.mark.make_test_keeps({"backend": "jax"}, {"backend": "tf-xla"})
def test_backend_shapes_conversions_reshaping(backend):
    check(shape_facts, MATRICES, backend=backend)
    check(conversions, VECTORS, backend=backend)
    check(reshaping, MATRICES, backend=backend)
    check(astype_like, VECTORS, np.array([1.5, 2.5, 0.0, 1.0], np.float32), backend=backend)


@pytest.mark.make_test_keeps({"backend": "jax"}, {"backend": "tf-xla"})
def test_backend_mcmc_step(backend):
    rng = np.random.default_rng(1)
    state = State(rng.normal(size=(6, DIM)), rng.normal(size=(6, DIM)))
    check(mcmc_step, state, rng.normal(size=(6, DIM)), backend=backend)


# -- what stays unsupported ----------------------------------------------------------------------------


def shape_tuple(x):
    return x.shape


def dtype_attribute(x):
    return np.zeros(3, x.dtype)


def batched_slice_bound(x, n):
    return x[:n]


def boolean_mask(x):
    return x[np.array([True, False, True])]


def tuple_with_batched_index(x, i):
    return (x, x + 1)[i]


def unknown_method(x):
    return x.tofile("x.bin")


def star_a_batched_array(x):
    return np.maximum(*x)


def two_index_arrays(m):
    return m[[0, 1], [1, 0]]


def batched_axis(x, k):
    return x.sum(axis=k)


def value_dependent_shape(x):
    return x.nonzero()


@pytest.mark.parametrize(
    ("fn", "message", "suggestion"),
    [
        (shape_tuple, "attribute '.shape' of a batched value is not supported", "x.shape[k]"),
        (dtype_attribute, "attribute '.dtype' of a batched value is not supported", "y.astype(x.dtype)"),
        (batched_slice_bound, "slice bounds must be compile-time constants", None),
        (boolean_mask, "boolean mask indices are not supported", "np.nonzero"),
        (tuple_with_batched_index, "indexing a tuple or list of batched values", "np.stack"),
        (unknown_method, "the method '.tofile()' of a batched value is not supported", "supported methods"),
        (star_a_batched_array, "`*args` in calls over a batched array is not supported", "x[0], x[1]"),
        (two_index_arrays, "an index array can only stand beside slices", "two steps"),
        (batched_axis, "axis must be a compile-time constant", None),
        (value_dependent_shape, "np.nonzero on per-member values is not supported: the shape of its result", "np.where"),
    ],
)
def test_unsupported(fn, message, suggestion):
    ctx = abir.Context()
    ctx.batch_uncurried(fn)
    with pytest.raises(UnsupportedSyntaxError) as info:
        ctx.module()
    assert message in str(info.value), str(info.value)
    if suggestion is not None:
        assert suggestion in str(info.value.suggestion), info.value.suggestion


def pick_with_index_array(m, i):
    return m[i, 0]


def test_per_member_index_array_next_to_an_integer_fails_at_type_inference():
    ctx = abir.Context()
    batched = ctx.batch_uncurried(pick_with_index_array)
    with pytest.raises(Exception, match="one per-member index array"):
        batched(MATRICES, np.array([[0, 1]] * 4))
