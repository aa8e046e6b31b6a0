"""A backend written from the public protocol alone runs whole programs.

`CountingNumpyBackend` subclasses only `abir.BackendProtocol` (no abir backend code): NumPy
arrays, every protocol method written here, each call counted. Its `run` is the reference's
machine loop in the reference's own methods (`while_loop`, `reduce_min`, `switch_case`). If the
protocol left out something the compiler or the machine needs, these programs would fail on it.
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Callable, Collection, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np
import pytest

import abir
from abir import prims
from abir.backends import variables
from abir.backends.base import Backend
from abir.types import TensorType, Type


def counted(cls: type) -> type:
    """Wrap every public method of `cls` to count its calls in `self.calls`."""
    for attribute, member in list(vars(cls).items()):
        if attribute.startswith("_") or not callable(member):
            continue

        def wrapper(self: Any, *args: Any, __method: Callable[..., Any] = member, **kwargs: Any) -> Any:
            self.calls[__method.__name__] += 1
            return __method(self, *args, **kwargs)

        setattr(cls, attribute, functools.wraps(member)(wrapper))
    return cls


def _mask_for(mask: Any, ndim: int) -> np.ndarray:
    mask = np.asarray(mask, dtype=bool)
    return mask.reshape(mask.shape + (1,) * (ndim - mask.ndim))


@counted
class CountingNumpyBackend(abir.BackendProtocol):
    """NumPy behind the protocol, written from its docstrings; `calls` counts method calls."""

    name = "counting-numpy"
    block_order = "priority"
    superblocks = False
    last_stats = None

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    # ----- the reference's interface --------------------------------------------------------
    def any(self, t: Any, name: str | None = None) -> Any:
        return np.any(t)

    def assert_matching_dtype(self, expected_dtype: Any, val: Any, message: str = "") -> None:
        if np.asarray(val).dtype != np.dtype(expected_dtype):
            raise ValueError(f"expected {np.dtype(expected_dtype)}, found {np.asarray(val).dtype}. {message}")

    def batch_size(self, val: Any, name: str | None = None) -> int:
        return int(np.shape(val)[0]) if np.ndim(val) else 1

    def broadcast_to_shape_of(self, val: Any, target: Any, name: str | None = None) -> Any:
        target = np.asarray(target)
        return np.broadcast_to(np.asarray(val, target.dtype), target.shape).copy()

    def cond(self, pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any], name: str | None = None) -> Any:
        return true_fn() if pred else false_fn()

    def create_variable(
        self, name: str | None, alloc: Any, type_: TensorType, max_stack_depth: int, batch_size: int
    ) -> Any:
        return variables.new_variable(self, alloc, type_, max_stack_depth, batch_size)

    def equal(self, t1: Any, t2: Any, name: str | None = None) -> Any:
        return np.equal(t1, t2)

    def fill(self, value: Any, size: int, dtype: Any, shape: Sequence[int], name: str | None = None) -> Any:
        return np.full((size, *shape), value, dtype)

    def full_mask(self, size: int, name: str | None = None) -> Any:
        return np.ones(size, bool)

    def initial_program_counter(self, size: int, dtype: Any, name: str | None = None) -> Any:
        return np.zeros(size, dtype)

    def merge_dtypes(self, dt1: Any, dt2: Any) -> Any:
        return np.promote_types(dt1 or dt2, dt2 or dt1) if dt1 or dt2 else None

    def merge_shapes(self, s1: Any, s2: Any) -> Any:
        return np.broadcast_shapes(tuple(s1), tuple(s2))

    def not_equal(self, t1: Any, t2: Any, name: str | None = None) -> Any:
        return np.not_equal(t1, t2)

    def prepare_for_cond(self, state: Any) -> Any:
        return state

    def reduce_min(self, t: Any, name: str | None = None) -> Any:
        return np.min(t)

    def run_on_dummies(self, primitive_callable: Callable[..., Any], input_types: Sequence[Any]) -> Any:
        def dummy(t: Any) -> Any:
            if isinstance(t, Type):
                return dummy(t.tensors)
            if isinstance(t, TensorType):
                return np.zeros(t.shape, t.dtype)
            return type(t)(dummy(item) for item in t)

        return primitive_callable(*(dummy(t) for t in input_types))

    def static_value(self, t: Any) -> Any:
        return np.asarray(t)

    def switch_case(
        self, branch_selector: Any, branch_callables: Sequence[Callable[..., Any]], *operands: Any, name: str | None = None
    ) -> Any:
        return branch_callables[int(branch_selector)](*operands)

    def type_of(self, t: Any, dtype_hint: Any = None) -> TensorType:
        array = np.asarray(t, dtype=None if hasattr(t, "dtype") else dtype_hint)
        return TensorType(array.dtype, array.shape)

    @property
    def variable_class(self) -> tuple[type, ...]:
        return (variables.NullVariable, variables.TemporaryVariable, variables.RegisterVariable, variables.FullVariable)

    def where(self, condition: Any, x: Any, y: Any, name: str | None = None) -> Any:
        y = np.asarray(y)
        return np.where(_mask_for(condition, y.ndim), x, y).astype(y.dtype)

    def while_loop(
        self, cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Sequence[Any], name: str | None = None
    ) -> Any:
        loop_vars = list(loop_vars)
        while cond(*loop_vars):
            loop_vars = list(body(*loop_vars))
        return loop_vars

    def wrap_straightline_callable(self, f: Callable[..., Any]) -> Callable[..., Any]:
        return f

    # ----- abir's extensions --------------------------------------------------------------------
    def asarray(self, value: Any, dtype: Any = None) -> Any:
        return np.asarray(value, dtype)

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def is_native(self, value: Any) -> bool:
        return isinstance(value, np.ndarray)

    def zeros(self, shape: Sequence[int], dtype: Any) -> Any:
        return np.zeros(tuple(shape), dtype)

    def full(self, shape: Sequence[int], value: Any, dtype: Any) -> Any:
        return np.full(tuple(shape), value, dtype)

    def arange(self, n: int, dtype: Any = np.int32) -> Any:
        return np.arange(n, dtype=dtype)

    def zero_state(self, shapes: Mapping[str, tuple[tuple[int, ...], Any]], staged: bool = False) -> dict[str, Any]:
        return {key: np.zeros(shape, dtype) for key, (shape, dtype) in shapes.items()}

    def pad_rows(self, array: Any, rows: int) -> Any:
        array = np.asarray(array)
        return np.concatenate([array, np.zeros((rows - array.shape[0], *array.shape[1:]), array.dtype)])

    def create_register(self, batch_size: int, type: TensorType) -> Any:
        return np.zeros((batch_size, *type.shape), type.dtype)

    def create_stack(self, max_stack_depth: int, batch_size: int, type: TensorType) -> Any:
        return np.zeros((max_stack_depth, batch_size, *type.shape), type.dtype)

    def builtin_prim(self, name: str, args: Sequence[Any], result_dtype: Any) -> Any:
        with np.errstate(all="ignore"):
            result = np.asarray(prims.apply_numpy(name, args, result_dtype))
        return result if result_dtype is None else result.astype(result_dtype)

    def call_opaque(self, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
        return fn(*args)

    def stack_write(self, stack: Any, index: Any, value: Any, mask: Any) -> Any:
        stack = np.array(stack)
        members = np.flatnonzero(mask)
        stack[np.asarray(index)[members], members] = np.broadcast_to(value, stack.shape[1:])[members]
        return stack

    def stack_scatter(self, stack: Any, rows: Any, value: Any) -> Any:
        return self.stack_write(stack, rows, value, np.asarray(rows) < np.shape(stack)[0])

    def stack_read(self, stack: Any, index: Any) -> Any:
        stack = np.asarray(stack)
        return stack[np.clip(index, 0, stack.shape[0] - 1), np.arange(stack.shape[1])]

    def known_none(self, mask: Any) -> bool:
        return not np.any(mask)

    def expand_event_dims(self, value: Any, count: int) -> Any:
        return np.asarray(value)[(slice(None),) + (None,) * count]

    def run(
        self,
        kernels: Sequence[Callable[[dict[str, Any]], dict[str, Any]]],
        state: dict[str, Any],
        halt_index: int,
        cache_key: Any,
        code_cache: MutableMapping[Any, Any] | None = None,
        stack_keys: Collection[str] = (),
        error_flags: Mapping[str, int] | None = None,
    ) -> dict[str, Any]:
        """The reference's machine loop: run the smallest block any member holds until all
        members halted, in the reference's methods."""

        def live(state: dict[str, Any]) -> Any:
            return self.reduce_min(state["pc"]) < halt_index

        def step(state: dict[str, Any]) -> tuple[dict[str, Any]]:
            return (self.switch_case(self.reduce_min(state["pc"]), kernels, state),)

        (state,) = self.while_loop(live, step, [state])
        return state

    def scope(self, leaves: Sequence[Any] = ()) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def is_traced(self, value: Any) -> bool:
        return False

    def stage_run(self, run: Callable[[list[Any]], list[Any]], leaves: Sequence[Any]) -> list[Any]:
        return run(list(leaves))

    def batch_sharding(self, leaves: Sequence[Any]) -> Any:
        return None

    def run_sharded(
        self, run: Callable[[list[Any]], list[Any]], leaves: Sequence[Any], cache: MutableMapping[Any, Any], cache_key: Any
    ) -> list[Any]:
        raise NotImplementedError("one device")

    def check_when_run(
        self,
        check: Callable[[dict[str, np.ndarray]], None],
        values: Mapping[str, Any],
        normal: Mapping[str, int] | None = None,
        summary: str = "",
    ) -> None:
        check({key: np.asarray(value) for key, value in values.items()})


ctx = abir.Context()


@ctx.batch()
def fib(n):
    if n > 2:
        return fib(n - 1) + fib(n - 2)
    return 1


@ctx.batch()
def collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
        if steps > 500:
            break
    return steps


def plain_fib(n: int) -> int:
    return plain_fib(n - 1) + plain_fib(n - 2) if n > 2 else 1


def plain_collatz_steps(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
        if steps > 500:
            break
    return steps


PLAIN = {"fib": plain_fib, "collatz_steps": plain_collatz_steps}
"""The same programs run on one member in plain Python."""


def test_protocol_backend_is_no_abir_backend() -> None:
    backend = CountingNumpyBackend()
    assert isinstance(backend, abir.BackendProtocol)
    assert not isinstance(backend, Backend)
    bases = [cls for cls in type(backend).__mro__[1:] if cls.__module__.startswith("abir")]
    assert bases == [abir.BackendProtocol]


@pytest.mark.parametrize(
    ("function", "args"),
    [(fib, np.array([1, 3, 7, 10, 12])), (collatz_steps, np.array([1, 6, 27, 97, 7]))],
    ids=["fib", "collatz"],
)
def test_protocol_backend_runs_programs(function: Any, args: np.ndarray) -> None:
    """Results match plain Python member by member; the loop took as many steps as the NumPy
    backend's (the same schedule: the smallest block any member holds)."""
    backend = CountingNumpyBackend()
    got = function(args, backend=backend)
    want = [PLAIN[function.name](int(a)) for a in args]
    np.testing.assert_array_equal(got, want)
    reference = abir.NumpyBackend()
    np.testing.assert_array_equal(function(args, backend=reference), want)
    steps = backend.calls["switch_case"]
    assert steps == reference.last_stats.steps
    assert backend.calls["while_loop"] == backend.calls["run"] == 1
    assert backend.calls["reduce_min"] == 2 * steps + 1
    assert backend.calls["builtin_prim"] > steps and backend.calls["where"] > 0


def test_stack_overflow_is_reported_through_the_protocol() -> None:
    with pytest.raises(abir.StackOverflowError, match="max_stack_depth=4"):
        fib(np.array([3, 9]), backend=CountingNumpyBackend(), max_stack_depth=4)


def test_protocol_subclass_missing_a_method_cannot_be_made() -> None:
    class Incomplete(abir.BackendProtocol):
        def any(self, t: Any, name: str | None = None) -> Any:
            return np.any(t)

    with pytest.raises(TypeError, match="abstract method"):
        Incomplete()
