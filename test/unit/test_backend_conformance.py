"""The backend protocol's conformance suite: every backend against NumPy semantics
(`abir.prims.apply_numpy`): every builtin prim over bool/int/float dtypes and mixed pairs,
`astype`, weak Python scalars, masked `where`, stack writes/reads by index, array helpers."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import pytest

from abir import prims
from abir.backends.base import Backend
from abir.backends.numpy_backend import NumpyBackend

# Sample inputs per dtype; chosen inside every prim's domain where NumPy gives finite results
# for most prims, plus zeros so integer division by zero is exercised (NumPy gives 0).
SAMPLES = {
    "bool": np.array([True, False, True, False]),
    "int32": np.array([7, -3, 0, 2], dtype=np.int32),
    "int64": np.array([5, 4, -6, 1], dtype=np.int64),
    "float32": np.array([0.5, -1.25, 2.5, 0.0], dtype=np.float32),
    "float64": np.array([0.25, 3.5, -0.5, 1.5], dtype=np.float64),
}
SHIFT_AMOUNTS = np.array([1, 2, 0, 3], dtype=np.int64)


def numpy_reference(name: str, args: list[np.ndarray]) -> np.ndarray | None:
    """NumPy's result, or None where NumPy rejects the dtypes (nothing to compare)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return np.asarray(prims.apply_numpy(name, args))
        except (TypeError, ValueError):
            return None


def assert_same(got: np.ndarray, want: np.ndarray, name: str) -> None:
    """Same dtype, same shape, same values (NaN == NaN; float tolerance by dtype)."""
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape
    if want.dtype.kind in "fc":
        rtol = 1e-5 if want.dtype.itemsize <= 4 else 1e-12
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True, err_msg=name)
    else:
        np.testing.assert_array_equal(got, want, err_msg=name)


def prim_cases() -> list[tuple[str, tuple[str, ...]]]:
    """(prim, operand dtype names) for every builtin prim over the sample dtypes."""
    cases: list[tuple[str, tuple[str, ...]]] = []
    for name in prims.UNARY:
        cases += [(name, (d,)) for d in SAMPLES]
    for name in prims.BINARY:
        cases += [(name, (d, d)) for d in SAMPLES]
        cases += [(name, ("int32", "float64")), (name, ("bool", "int64")), (name, ("int64", "float32"))]
    cases += [("where", ("bool", d, d)) for d in SAMPLES] + [("where", ("bool", "int32", "float32"))]
    return cases


def operands(name: str, dtypes: tuple[str, ...]) -> list[np.ndarray]:
    args = [SAMPLES[d] for d in dtypes]
    if name in ("bitwise_left_shift", "bitwise_right_shift") and SAMPLES[dtypes[1]].dtype.kind == "i":
        args[1] = SHIFT_AMOUNTS.astype(args[1].dtype)
    return args


def make_backend(name: str) -> Backend:
    if name == "numpy":
        return NumpyBackend()
    if name == "jax":
        from abir.backends.jax_backend import JaxBackend

        return JaxBackend()
    from abir.backends.tf_backend import TensorFlowBackend

    return TensorFlowBackend()


@pytest.fixture(scope="module", params=["numpy", "jax", "tf"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """Each backend under its `scope()`, as a run uses its operations (JAX: 64-bit types)."""
    backend = make_backend(request.param)
    with backend.scope():
        yield backend


@pytest.mark.parametrize(
    ("name", "dtypes"), prim_cases(), ids=lambda v: v if isinstance(v, str) else "-".join(v)
)
def test_builtin_prim_matches_numpy(backend: Backend, name: str, dtypes: tuple[str, ...]) -> None:
    args = operands(name, dtypes)
    want = numpy_reference(name, args)
    if want is None:
        pytest.skip(f"NumPy rejects {name}{dtypes}")
    got = backend.builtin_prim(name, [backend.asarray(a) for a in args], want.dtype)
    assert backend.is_native(got)
    assert_same(backend.to_numpy(got), want, name)


@pytest.mark.parametrize("target", ["int32", "int64", "float32", "float64", "bool"])
@pytest.mark.parametrize("source", list(SAMPLES))
def test_astype_matches_numpy(backend: Backend, source: str, target: str) -> None:
    arg = SAMPLES[source]
    got = backend.builtin_prim("astype", [backend.asarray(arg)], np.dtype(target))
    assert_same(backend.to_numpy(got), prims.apply_numpy("astype", [arg], np.dtype(target)), "astype")


def test_python_scalar_operand_is_weak(backend: Backend) -> None:
    """An int32 minus a Python literal stays int32 (NumPy 2 promotion)."""
    x = np.array([3, 4], dtype=np.int32)
    want = prims.apply_numpy("subtract", [x, 1])
    got = backend.builtin_prim("subtract", [backend.asarray(x), 1], want.dtype)
    assert_same(backend.to_numpy(got), want, "subtract")


def test_unknown_prim_is_rejected(backend: Backend) -> None:
    with pytest.raises(ValueError, match="not a builtin"):
        backend.builtin_prim("frobnicate", [backend.asarray(np.ones(2))], np.float64)


def test_where_broadcasts_mask_over_trailing_dims(backend: Backend) -> None:
    mask = np.array([True, False, True])
    old = np.arange(12, dtype=np.float64).reshape(3, 2, 2)
    new = -np.ones((3, 2, 2))
    got = backend.to_numpy(backend.where(backend.asarray(mask), backend.asarray(new), backend.asarray(old)))
    np.testing.assert_array_equal(got, np.where(mask[:, None, None], new, old))


def test_where_broadcasts_a_scalar_and_keeps_old_dtype(backend: Backend) -> None:
    old = backend.asarray(np.array([[1, 2], [3, 4]], dtype=np.int32))
    got = backend.where(backend.asarray(np.array([False, True])), 7, old)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(backend.to_numpy(got), [[1, 2], [7, 7]])


def test_stack_write_masks_and_drops_out_of_range(backend: Backend) -> None:
    depth, batch = 3, 5
    stack = np.arange(depth * batch * 2, dtype=np.int64).reshape(depth, batch, 2)
    index = np.array([0, 2, 7, -1, 1])  # member 2 and 3 out of range but masked out
    mask = np.array([True, True, False, False, False])
    value = np.full((batch, 2), -9, dtype=np.int64)
    got = backend.to_numpy(
        backend.stack_write(
            backend.asarray(stack), backend.asarray(index), backend.asarray(value), backend.asarray(mask)
        )
    )
    want = stack.copy()
    want[0, 0] = -9
    want[2, 1] = -9
    np.testing.assert_array_equal(got, want)


def test_stack_write_out_of_range_unmasked_index_is_harmless(backend: Backend) -> None:
    if isinstance(backend, NumpyBackend):
        pytest.skip("NumPy checks indices eagerly; the machine never writes out of range (overflow is flagged first)")
    stack = np.zeros((2, 3), dtype=np.float32)
    got = backend.stack_write(
        backend.asarray(stack),
        backend.asarray(np.array([2, 5, 1])),
        backend.asarray(np.array([1.0, 2.0, 3.0], dtype=np.float32)),
        backend.asarray(np.array([True, True, True])),
    )
    np.testing.assert_array_equal(backend.to_numpy(got), [[0, 0, 0], [0, 0, 3]])


@pytest.mark.parametrize("one_hot_max", [0, 10**6])
def test_stack_scatter_writes_rows_and_drops_out_of_range(
    backend: Backend, one_hot_max: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row `rows[b]` of column b gets `value[b]`; a row of D writes nothing. On JAX
    both ways of writing (a scatter, a one-hot select for small stacks) are checked."""
    from abir.backends import jax_backend

    monkeypatch.setattr(jax_backend, "ONE_HOT_STACK_MAX", one_hot_max)
    stack = np.arange(3 * 4 * 2, dtype=np.float64).reshape(3, 4, 2)
    rows = np.array([0, 3, 2, 3])
    value = -np.arange(8, dtype=np.float64).reshape(4, 2) - 1
    got = backend.to_numpy(backend.stack_scatter(backend.asarray(stack), backend.asarray(rows), backend.asarray(value)))
    want = stack.copy()
    want[0, 0] = value[0]
    want[2, 2] = value[2]
    np.testing.assert_array_equal(got, want)


def test_stack_read_gathers_and_clips(backend: Backend) -> None:
    stack = np.arange(12, dtype=np.float64).reshape(3, 4)
    index = np.array([0, 2, -3, 9])
    got = backend.to_numpy(backend.stack_read(backend.asarray(stack), backend.asarray(index)))
    np.testing.assert_array_equal(got, stack[np.clip(index, 0, 2), np.arange(4)])


def test_arrays_and_types(backend: Backend) -> None:
    assert backend.to_numpy(backend.zeros((2, 3), np.int32)).dtype == np.int32
    np.testing.assert_array_equal(backend.to_numpy(backend.full((2,), 4, np.int64)), [4, 4])
    np.testing.assert_array_equal(backend.to_numpy(backend.arange(3)), [0, 1, 2])
    assert backend.is_native(backend.asarray(np.ones(2)))
    assert backend.is_native(np.ones(2)) == isinstance(backend, NumpyBackend)
    assert backend.type_of(backend.asarray(np.ones((4, 2), np.float32))) == (np.dtype(np.float32), (4, 2))
    assert int(backend.reduce_min(backend.asarray(np.array([4, 2, 9])))) == 2
