"""The backend protocol's conformance suite: every backend against NumPy semantics
(`abir.prims.apply_numpy`): every builtin prim over bool/int/float dtypes and mixed pairs,
`astype`, weak Python scalars, masked `where`, stack writes/reads by index, array helpers; and
every method of the reference's interface (`BackendProtocol`), eager and traced, with the
variables of `create_variable` (masked updates, push and pop) against per-member stacks."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from abir import prims
from abir.backend_registry import spec_named
from abir.backends.base import Backend, BackendProtocol
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


@pytest.fixture(scope="module")
def backend(backend_name: str) -> Iterator[Backend]:
    """Each registered backend under its `scope()`, as a run uses its operations (JAX: 64-bit types)."""
    backend = spec_named(backend_name).new_backend()
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
    from abir.backends.jax import writes

    monkeypatch.setattr(writes, "ONE_HOT_STACK_MAX", one_hot_max)
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


# ----- the reference's interface (`BackendProtocol`) ----------------------------------------------

REFERENCE_SIGNATURES = {
    "any": ("t", "name"),
    "assert_matching_dtype": ("expected_dtype", "val", "message"),
    "batch_size": ("val", "name"),
    "broadcast_to_shape_of": ("val", "target", "name"),
    "cond": ("pred", "true_fn", "false_fn", "name"),
    "create_variable": ("name", "alloc", "type_", "max_stack_depth", "batch_size"),
    "equal": ("t1", "t2", "name"),
    "fill": ("value", "size", "dtype", "shape", "name"),
    "full_mask": ("size", "name"),
    "initial_program_counter": ("size", "dtype", "name"),
    "merge_dtypes": ("dt1", "dt2"),
    "merge_shapes": ("s1", "s2"),
    "not_equal": ("t1", "t2", "name"),
    "prepare_for_cond": ("state",),
    "reduce_min": ("t", "name"),
    "run_on_dummies": ("primitive_callable", "input_types"),
    "static_value": ("t",),
    "switch_case": ("branch_selector", "branch_callables"),
    "type_of": ("t", "dtype_hint"),
    "where": ("condition", "x", "y", "name"),
    "while_loop": ("cond", "body", "loop_vars", "name"),
    "wrap_straightline_callable": ("f",),
}
"""Each method of the reference's backend interface and the names of its parameters (abir's
`where` names its operands `mask, new, old`; the positions and meaning are the reference's)."""

POSITIONAL_ALIASES = {"where": ("mask", "new", "old", "name")}


def staged(backend: Backend, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` as the backend's compiled code runs it: traced by `jax.jit` or `tf.function`
    (NumPy: called as is), so the traced path of each method is exercised."""
    if backend.name == "jax":
        import jax

        return jax.jit(fn)(*args)
    if backend.name == "tensorflow":
        import tensorflow as tf

        return tf.function(fn)(*args)
    return fn(*args)


def test_protocol_lists_the_reference_interface() -> None:
    """Every reference method is declared (abstract, with a docstring) by the protocol."""
    for name in [*REFERENCE_SIGNATURES, "variable_class"]:
        member = inspect.getattr_static(BackendProtocol, name)
        function = member.fget if isinstance(member, property) else member
        assert getattr(function, "__isabstractmethod__", False), name
        assert (function.__doc__ or "").strip(), f"{name} has no docstring"


@pytest.mark.parametrize("method", sorted(REFERENCE_SIGNATURES))
def test_reference_signature(backend: Backend, method: str) -> None:
    parameters = tuple(inspect.signature(getattr(backend, method)).parameters)
    want = REFERENCE_SIGNATURES[method]
    if parameters[: len(want)] != want:
        assert parameters[: len(want)] == POSITIONAL_ALIASES[method], (method, parameters)
    assert isinstance(backend, BackendProtocol)


def test_any(backend: Backend) -> None:
    for t in ([False, False], [False, True], [[False], [True]], [[False, False]]):
        got = backend.any(backend.asarray(np.array(t)))
        assert bool(backend.to_numpy(got)) == bool(np.any(t)), t
    assert bool(backend.to_numpy(staged(backend, backend.any, backend.asarray(np.array([False, True])))))


def test_assert_matching_dtype(backend: Backend) -> None:
    backend.assert_matching_dtype(np.float32, backend.asarray(np.ones(2, np.float32)))
    with pytest.raises(ValueError, match=r"expected int64, found float32\. in block 3"):
        backend.assert_matching_dtype(np.int64, backend.asarray(np.ones(2, np.float32)), "in block 3")


def test_batch_size(backend: Backend) -> None:
    assert backend.batch_size(backend.asarray(np.zeros((4, 2)))) == 4
    assert backend.batch_size(backend.asarray(np.float64(1.0))) == 1
    assert backend.batch_size(3.0) == 1


@pytest.mark.parametrize(("val", "target"), [(np.array([1.0, 2.0, 3.0]), np.zeros((4, 3), np.float32)),
                                             (2, np.zeros((3, 2), np.int32)),
                                             (np.array([[True], [False]]), np.zeros((2, 3), bool))])
def test_broadcast_to_shape_of(backend: Backend, val: Any, target: np.ndarray) -> None:
    got = backend.to_numpy(backend.broadcast_to_shape_of(val, backend.asarray(target)))
    assert_same(got, np.broadcast_to(np.asarray(val, target.dtype), target.shape), "broadcast_to_shape_of")


def test_cond(backend: Backend) -> None:
    x = backend.asarray(np.array([1, 2, 3]))
    for pred, want in ((True, [2, 3, 4]), (False, [0, 1, 2])):
        got = backend.cond(backend.asarray(np.bool_(pred)), lambda: x + 1, lambda: x - 1)
        np.testing.assert_array_equal(backend.to_numpy(got), want)

    def traced(x: Any) -> Any:
        state = backend.prepare_for_cond((x, x * 2))
        return backend.cond(backend.reduce_min(x) > 1, lambda: state, lambda: (state[1], state[0]))

    first, second = staged(backend, traced, x)
    np.testing.assert_array_equal(backend.to_numpy(first), [2, 4, 6])
    np.testing.assert_array_equal(backend.to_numpy(second), [1, 2, 3])


@pytest.mark.parametrize("op", ["equal", "not_equal"])
def test_equal_and_not_equal(backend: Backend, op: str) -> None:
    a, b = np.array([[1, 2], [3, 4]]), np.array([1, 4])
    got = backend.to_numpy(getattr(backend, op)(backend.asarray(a), backend.asarray(b)))
    assert_same(got, getattr(np, op)(a, b), op)


def test_fill_full_mask_and_initial_program_counter(backend: Backend) -> None:
    assert_same(backend.to_numpy(backend.fill(7, 3, np.int64, [2])), np.full((3, 2), 7, np.int64), "fill")
    assert_same(backend.to_numpy(backend.fill(0.5, 2, np.float32, [])), np.full(2, 0.5, np.float32), "fill")
    assert_same(backend.to_numpy(backend.full_mask(4)), np.ones(4, bool), "full_mask")
    for dtype in (np.int32, np.int64):
        assert_same(backend.to_numpy(backend.initial_program_counter(3, dtype)), np.zeros(3, dtype), "pc")


@pytest.mark.parametrize(("dt1", "dt2"), [(np.int32, np.float32), (np.int64, np.int64), (np.bool_, np.int8),
                                          (np.uint8, np.int8), (None, np.float32), (np.int32, None)])
def test_merge_dtypes(backend: Backend, dt1: Any, dt2: Any) -> None:
    known = [np.dtype(d) for d in (dt1, dt2) if d is not None]
    want = np.result_type(*known) if len(known) == 2 else known[0]
    assert backend.merge_dtypes(dt1, dt2) == want
    assert backend.merge_dtypes(None, None) is None


def test_merge_shapes(backend: Backend) -> None:
    assert backend.merge_shapes((3, 1), (4,)) == np.broadcast_shapes((3, 1), (4,))
    assert backend.merge_shapes((), (2, 5)) == (2, 5)
    assert backend.merge_shapes((None, 1), (3, 4)) == (3, 4)
    assert backend.merge_shapes((None, 2), (1, 2)) == (None, 2)
    assert backend.merge_shapes(None, (2,)) is None
    with pytest.raises(ValueError, match=r"shapes \(3,\) and \(4,\) do not broadcast"):
        backend.merge_shapes((3,), (4,))


def test_prepare_for_cond_keeps_structure_and_values(backend: Backend) -> None:
    state = {"a": backend.asarray(np.arange(3)), "b": (backend.asarray(np.ones(2)),)}
    prepared = backend.prepare_for_cond(state)
    assert set(prepared) == {"a", "b"} and len(prepared["b"]) == 1
    np.testing.assert_array_equal(backend.to_numpy(prepared["a"]), np.arange(3))


def test_reduce_min(backend: Backend) -> None:
    for array in (np.array([4, 2, 9]), np.array([[2.5, -1.0], [0.0, 3.0]])):
        assert_same(backend.to_numpy(backend.reduce_min(backend.asarray(array))), np.min(array), "reduce_min")


def test_run_on_dummies_and_type_of(backend: Backend) -> None:
    from abir.types import TensorType, Type

    types = [TensorType(np.float32, (4, 3)), Type((TensorType(np.int64, (4,)), [TensorType(np.bool_, (4,))]))]

    def primitive(x: Any, pair: Any) -> Any:
        ints, (flags,) = pair
        return x.sum(axis=1) if hasattr(x, "sum") else x[:, 0], ints, flags

    outs = backend.run_on_dummies(primitive, types)
    assert [backend.type_of(out) for out in outs] == [
        (np.dtype(np.float32), (4,)), (np.dtype(np.int64), (4,)), (np.dtype(np.bool_), (4,))
    ]
    assert backend.type_of(3, np.float32) == (np.dtype(np.float32), ())
    assert backend.type_of([1, 2]) == (np.asarray([1, 2]).dtype, (2,))


def test_static_value(backend: Backend) -> None:
    x = backend.asarray(np.array([1, 2]))
    np.testing.assert_array_equal(np.asarray(backend.static_value(x)), [1, 2])
    seen: list[Any] = []

    def traced(x: Any) -> Any:
        seen.append(backend.static_value(x))
        return x

    staged(backend, traced, x)
    if backend.name == "numpy":
        np.testing.assert_array_equal(seen[0], [1, 2])
    else:
        assert seen == [None]


def test_switch_case(backend: Backend) -> None:
    branches = [lambda: backend.asarray(np.int64(10)), lambda: backend.asarray(np.int64(20))]
    assert int(backend.to_numpy(backend.switch_case(backend.asarray(np.int32(1)), branches))) == 20
    with_operands = [lambda v: v + 1, lambda v: v * 10]
    x = backend.asarray(np.array([3, 4]))
    np.testing.assert_array_equal(backend.to_numpy(backend.switch_case(np.int32(1), with_operands, x)), [30, 40])

    def traced(index: Any, x: Any) -> Any:
        return backend.switch_case(index, with_operands, x)

    np.testing.assert_array_equal(backend.to_numpy(staged(backend, traced, backend.asarray(np.int32(0)), x)), [4, 5])


def test_while_loop(backend: Backend) -> None:
    """The reference's calling convention: `cond(*loop_vars)`, `body(*loop_vars)`; a per-member
    Collatz count, looping while any member is not at 1."""
    start = np.array([6, 1, 27])

    def collatz(n: Any, steps: Any) -> list[Any]:
        def cond(n: Any, steps: Any) -> Any:
            return backend.any(backend.not_equal(n, 1))

        def body(n: Any, steps: Any) -> tuple[Any, Any]:
            moving = backend.not_equal(n, 1)
            odd = backend.equal(n % 2, 1)
            nxt = backend.where(odd, 3 * n + 1, n // 2)
            return backend.where(moving, nxt, n), backend.where(moving, steps + 1, steps)

        return backend.while_loop(cond, body, [n, steps])

    for run in (collatz, lambda *args: staged(backend, collatz, *args)):
        n, steps = run(backend.asarray(start), backend.asarray(np.zeros(3, np.int64)))
        np.testing.assert_array_equal(backend.to_numpy(n), [1, 1, 1])
        np.testing.assert_array_equal(backend.to_numpy(steps), [8, 0, 111])


def test_wrap_straightline_callable(backend: Backend) -> None:
    wrapped = backend.wrap_straightline_callable(lambda a, b: a * b + 1)
    np.testing.assert_array_equal(backend.to_numpy(wrapped(backend.asarray(np.array([2, 3])), 4)), [9, 13])


def test_where_takes_the_reference_keywords(backend: Backend) -> None:
    got = backend.where(backend.asarray(np.array([True, False])), 1.5, backend.asarray(np.zeros((2, 2))), name="w")
    np.testing.assert_array_equal(backend.to_numpy(got), [[1.5, 1.5], [0, 0]])


# ----- variables ----------------------------------------------------------------------------------


class MemberStacks:
    """The meaning of a stack variable, member by member in plain Python: a current value and a
    list of saved values per member."""

    def __init__(self, batch: int, shape: tuple[int, ...], dtype: Any):
        self.current = [np.zeros(shape, dtype) for _ in range(batch)]
        self.saved: list[list[np.ndarray]] = [[] for _ in range(batch)]

    def update(self, value: np.ndarray, mask: np.ndarray) -> None:
        for b in np.flatnonzero(mask):
            self.current[b] = value[b].copy()

    def push(self, mask: np.ndarray) -> None:
        for b in np.flatnonzero(mask):
            self.saved[b].append(self.current[b].copy())

    def pop(self, mask: np.ndarray) -> None:
        for b in np.flatnonzero(mask):
            self.current[b] = self.saved[b].pop()

    def read(self) -> np.ndarray:
        return np.stack(self.current)


def random_operations(seed: int, batch: int, depth: int, steps: int = 40) -> list[tuple[str, np.ndarray, Any]]:
    """A sequence of (operation, mask, value) that never overflows or underflows a member."""
    rng = np.random.default_rng(seed)
    saved = np.zeros(batch, int)
    operations = []
    for step in range(steps):
        mask = rng.random(batch) < 0.6
        op = rng.choice(["update", "push", "pop"])
        if op == "push":
            mask &= saved < depth
            saved += mask
        elif op == "pop":
            mask &= saved > 0
            saved -= mask
        operations.append((str(op), mask, rng.normal(size=(batch, 2)) + step))
    return operations


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stack_variable_matches_per_member_stacks(backend: Backend, seed: int) -> None:
    """Masked updates, duplicating pushes and pops against the per-member model; every earlier
    variable still reads (and pops) as it did: operations never change their variable."""
    batch, depth = 5, 3
    var = backend.create_variable("x", "stack", (np.float64, (2,)), depth, batch)
    assert isinstance(var, backend.variable_class)
    model = MemberStacks(batch, (2,), np.float64)
    history = []
    for op, mask, value in random_operations(seed, batch, depth):
        if op == "update":
            var, _ = var.update(backend.asarray(value), backend.asarray(mask)), model.update(value, mask)
        else:
            var, _ = getattr(var, op)(backend.asarray(mask)), getattr(model, op)(mask)
        want = model.read()
        np.testing.assert_allclose(backend.to_numpy(var.read()), want, err_msg=f"after {op}")
        history.append((var, want, [len(s) for s in model.saved], [s[-1].copy() if s else None for s in model.saved]))
    for old, want, counts, tops in history:
        np.testing.assert_allclose(backend.to_numpy(old.read()), want)
        can_pop = np.array(counts) > 0
        popped = backend.to_numpy(old.pop(backend.asarray(can_pop)).read())
        for b in range(batch):
            np.testing.assert_allclose(popped[b], tops[b] if can_pop[b] else want[b])


def test_register_variable_updates_under_a_mask(backend: Backend) -> None:
    var = backend.create_variable("r", "register", (np.int32, ()), 4, 3)
    assert isinstance(var, backend.variable_class)
    var = var.update(backend.asarray(np.array([5, 6, 7], np.int32)), backend.asarray(np.array([True, False, True])))
    var = var.push(backend.full_mask(3)).update(9, backend.asarray(np.array([False, True, False])))
    var = var.pop(backend.full_mask(3))  # a register saves nothing: push and pop change nothing
    assert_same(backend.to_numpy(var.read()), np.array([5, 9, 7], np.int32), "register")


def test_temporary_and_null_variables(backend: Backend) -> None:
    temporary = backend.create_variable("t", "temporary", (np.float64, ()), 4, 2)
    with pytest.raises(ValueError, match="before it was written"):
        temporary.read()
    temporary = temporary.push(backend.full_mask(2)).update(backend.asarray(np.array([1.0, 2.0])), None)
    np.testing.assert_array_equal(backend.to_numpy(temporary.read()), [1.0, 2.0])
    with pytest.raises(ValueError, match="pushing a temporary variable"):
        temporary.push(backend.full_mask(2))
    with pytest.raises(ValueError, match="before it was written"):
        temporary.pop(backend.full_mask(2)).read()
    null = backend.create_variable("n", "null", (np.float64, ()), 4, 2)
    assert null.update(1.0, backend.full_mask(2)).push(None).pop(None) is null
    with pytest.raises(ValueError, match="holds no value"):
        null.read()
    with pytest.raises(ValueError, match="unknown variable allocation 'heap'"):
        backend.create_variable("h", "heap", (np.float64, ()), 4, 2)


def test_stack_variable_overflow_and_underflow(backend: Backend) -> None:
    """Eager backends raise, naming the members; traced ones skip the offending members' push
    or pop (their values stay)."""
    var = backend.create_variable("s", "stack", (np.int64, ()), 1, 2)
    var = var.update(backend.asarray(np.array([1, 2])), backend.full_mask(2)).push(
        backend.asarray(np.array([True, False]))
    )
    with pytest.raises(ValueError, match=r"stack overflow.*max_stack_depth=1.*batch members \[0\]"):
        var.push(backend.full_mask(2))
    with pytest.raises(ValueError, match=r"stack underflow.*batch members \[1\]"):
        var.pop(backend.full_mask(2))
    if backend.name == "numpy":
        return

    def traced(value: Any) -> Any:
        full = backend.create_variable("s", "stack", (np.int64, ()), 1, 2)
        full = full.update(value, backend.full_mask(2)).push(backend.full_mask(2)).update(value * 10, backend.full_mask(2))
        full = full.push(backend.full_mask(2)).pop(backend.full_mask(2))  # the second push is skipped
        return full.read(), full.pop(backend.full_mask(2)).read()  # the second pop is skipped

    first, second = staged(backend, traced, backend.asarray(np.array([1, 2])))
    np.testing.assert_array_equal(backend.to_numpy(first), [1, 2])
    np.testing.assert_array_equal(backend.to_numpy(second), [1, 2])
