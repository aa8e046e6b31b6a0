"""A run's results and its per-step work do not depend on the stack capacity (`max_stack_depth`).

Recursive programs whose descents `summarize-descents` turns into `vm.descend` (a push of many
values per member at once, a `Span` write request) give, at every capacity that holds their
recursion, the plain Python result per member on NumPy, JAX and TensorFlow; at a capacity too
small they raise `abir.StackOverflowError` for exactly the members that recurse too deep. A
`Span` request given to each backend's `stack_scatter` writes exactly each member's rows.

Structurally, no operation of the JAX machine loop's body makes an array as large as a stack
other than the stack updates themselves (scatters and in-place slice updates): a step's work does
not grow with the capacity.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import abir
from abir.backend_registry import spec_named


def fib(n):
    if n > 2:
        return fib(n - 1) + fib(n - 2)
    return 1


def countdown_sum(n, x):
    if n <= 0:
        return x
    return countdown_sum(n - 1, x) + n


def saved_frames_of_fib(n: int) -> int:
    """The return blocks `fib(n)` has saved at its deepest (the outermost call saves none)."""
    return max(0, n - 2)


CAPACITIES = [16, 20, 64, 200]
FIB_ARGS = np.array([1, 2, 3, 5, 8, 11, 14, 15], dtype=np.int64)
"""Members at the base case and members recursing up to 14 frames deep."""


KEPT_BACKENDS = ({"backend_name": "numpy"}, {"backend_name": "jax"})
"""The backends `make test` runs at every capacity; TF (whose vm program is JAX's) at one or two,
every capacity under `make test-full`."""


def make_backend(name: str) -> abir.Backend:
    return spec_named(name).new_backend()


@pytest.fixture(scope="module")
def batched() -> dict[str, Any]:
    context = abir.Context()
    return {"fib": context.batch()(fib), "countdown_sum": context.batch()(countdown_sum)}


def python_per_member(function: Any, *args: np.ndarray) -> np.ndarray:
    return np.array([function(*(int(a[i]) for a in args)) for i in range(len(args[0]))])


@pytest.mark.parametrize("capacity", CAPACITIES)
@pytest.mark.make_test_keeps(*KEPT_BACKENDS, {"capacity": 16})
def test_fib_equals_python_per_member_at_each_capacity(batched, backend_name: str, capacity: int) -> None:
    got = batched["fib"](FIB_ARGS, backend=make_backend(backend_name), max_stack_depth=capacity)
    np.testing.assert_array_equal(np.asarray(got), python_per_member(fib, FIB_ARGS))


@pytest.mark.parametrize("capacity", [20, 64, 200])
@pytest.mark.make_test_keeps(*KEPT_BACKENDS, {"capacity": 20})
def test_a_descent_with_a_counter_equals_python_per_member(batched, backend_name: str, capacity: int) -> None:
    """A descent pushing its counter (row j gets `n - j`) and an invariant argument."""
    n = np.array([0, 1, 4, 9, 17], dtype=np.int64)
    x = np.array([5, -3, 7, 0, 2], dtype=np.int64)
    got = batched["countdown_sum"](n, x, backend=make_backend(backend_name), max_stack_depth=capacity)
    np.testing.assert_array_equal(np.asarray(got), python_per_member(countdown_sum, n, x))


@pytest.mark.parametrize("capacity", [6, 12, 13])
@pytest.mark.make_test_keeps(*KEPT_BACKENDS, {"capacity": 12}, {"capacity": 13})
def test_overflow_names_exactly_the_members_too_deep(batched, backend_name: str, capacity: int) -> None:
    """At 13 the deepest member (n = 15) just fits; at 12 it alone overflows."""
    too_deep = [i for i, n in enumerate(FIB_ARGS) if saved_frames_of_fib(int(n)) > capacity]
    function = batched["fib"]
    if not too_deep:
        got = function(FIB_ARGS, backend=make_backend(backend_name), max_stack_depth=capacity)
        np.testing.assert_array_equal(np.asarray(got), python_per_member(fib, FIB_ARGS))
        return
    with pytest.raises(abir.StackOverflowError) as info:
        function(FIB_ARGS, backend=make_backend(backend_name), max_stack_depth=capacity)
    assert list(info.value.members) == too_deep


def test_overflow_message_is_the_same_on_the_traced_backends(batched) -> None:
    """JAX and TF run the same vm program (with superblocks; NumPy's program has none)."""
    messages = []
    for name in ("jax", "tf"):
        with pytest.raises(abir.StackOverflowError) as info:
            batched["fib"](FIB_ARGS, backend=make_backend(name), max_stack_depth=6)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


# ----- span writes, directly ---------------------------------------------------------------

SPAN_START = np.array([0, 3, 38, 2, 30, 1], dtype=np.int32)
SPAN_COUNT = np.array([20, 0, 2, 5, 10, 1], dtype=np.int32)
"""Members writing 20 rows from the bottom, nothing, up to the top row (38 + 2 = D), rows in
the middle: more rows than one of JAX's windows (`SPAN_WINDOW_ROWS`), the last one clamped."""
DEPTH = 40


def expected_span(stack: np.ndarray, value: np.ndarray, step: Any, shift: int) -> np.ndarray:
    expected = stack.copy()
    for b, (start, count) in enumerate(zip(SPAN_START, SPAN_COUNT, strict=True)):
        for j in range(count):
            expected[start + j, b] = value[b] if step is None else value[b] + (j + shift) * step
    return expected


def test_a_span_of_vectors_writes_each_members_rows(backend_name: str) -> None:
    from abir.backends.base import Span

    rng = np.random.default_rng(1)
    stack = rng.normal(size=(DEPTH, len(SPAN_START), 3))
    value = rng.normal(size=(len(SPAN_START), 3))
    instance = make_backend(backend_name)
    with instance.scope():
        span = Span(instance.asarray(SPAN_START), instance.asarray(SPAN_COUNT))
        got = instance.stack_scatter(instance.asarray(stack.copy()), span, instance.asarray(value))
        np.testing.assert_array_equal(instance.to_numpy(got), expected_span(stack, value, None, 0))


def test_a_span_with_a_step_writes_the_counter_at_each_row(backend_name: str) -> None:
    from abir.backends.base import Span

    stack = np.full((DEPTH, len(SPAN_START)), -99, dtype=np.int64)
    value = np.array([10, 20, 30, 40, 50, 60], dtype=np.int64)
    step = np.asarray(-3, np.int64)
    instance = make_backend(backend_name)
    with instance.scope():
        span = Span(instance.asarray(SPAN_START), instance.asarray(SPAN_COUNT), step, np.int32(1))
        got = instance.stack_scatter(instance.asarray(stack.copy()), span, instance.asarray(value))
        np.testing.assert_array_equal(instance.to_numpy(got), expected_span(stack, value, -3, 1))


# ----- the loop body's work -----------------------------------------------------------------

STACK_UPDATES = {"scatter", "dynamic_update_slice"}
"""Primitives that update a stack (in place, inside the loop)."""
CONTROL_FLOW = {"while", "cond", "jit", "pjit", "closed_call"}
"""Primitives whose results are their inner computations' results (these are counted)."""


def sub_jaxprs(eqn: Any) -> Iterator[Any]:
    import jax.extend.core as jex

    for param in eqn.params.values():
        for item in param if isinstance(param, (tuple, list)) else [param]:
            if isinstance(item, jex.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, jex.Jaxpr):
                yield item


def loop_body_ops(jaxpr: Any, in_loop: bool = False) -> Iterator[Any]:
    """The equations inside the (outermost) machine `while` loop, nested ones included."""
    for eqn in jaxpr.eqns:
        if in_loop:
            yield eqn
        for sub in sub_jaxprs(eqn):
            yield from loop_body_ops(sub, in_loop or eqn.primitive.name == "while")


def stack_sized_ops(batched: dict[str, Any], depth: int, batch: int) -> Counter[str]:
    """Per primitive, the loop-body equations (stack updates and control flow aside) whose
    result has the stack's depth as a dimension, in the JAX trace of a staged fib run."""
    import jax

    n = (np.arange(batch) % 12).astype(np.int64)
    jaxpr = jax.make_jaxpr(lambda n: batched["fib"](n, backend=abir.JaxBackend(), max_stack_depth=depth))(n)
    found: Counter[str] = Counter()
    for eqn in loop_body_ops(jaxpr.jaxpr):
        name = eqn.primitive.name
        if name in STACK_UPDATES or name in CONTROL_FLOW:
            continue
        if any(depth in getattr(var.aval, "shape", ()) for var in eqn.outvars):
            found[name] += 1
    return found


@pytest.mark.parametrize("depth", [23, 211])
def test_no_loop_op_but_the_stack_updates_is_stack_sized(batched, depth: int) -> None:
    """At B = 1024 the stacks are above `ONE_HOT_STACK_MAX`, so pushes are scatters; the
    `vm.descend` span writes must be too (a select over the whole stack makes [D, B] arrays)."""
    assert stack_sized_ops(batched, depth, 1024) == Counter()


def test_the_structural_check_sees_a_whole_stack_select(batched) -> None:
    """The check above can fail: at a small batch, stacks of at most `ONE_HOT_STACK_MAX`
    elements are written by one-hot selects over the whole stack, which it reports."""
    assert stack_sized_ops(batched, 23, 64)["select_n"] > 0
