"""The Context API: decoration, modules and programs, specializations, caching, dry runs."""

from __future__ import annotations

import collections

import numpy as np
import optree
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from abir.context import BatchedFunction, Context, FrontendProgram, truthy
from abir.dialects import make_context
from abir.dialects.functional import CallOp, FuncOp, OpaqueOp
from abir.opaque import lookup_opaque

Pair = collections.namedtuple("Pair", ["a", "b"])


def round_trip(module: ModuleOp) -> None:
    """The printed module parses back to the same text and verifies."""
    text = str(module)
    parsed = Parser(make_context(), text).parse_module()
    parsed.verify()
    assert str(parsed) == text


def function_names(module: ModuleOp) -> list[str]:
    return [op.sym_name.data for op in module.ops if isinstance(op, FuncOp)]


def make_fib_context() -> tuple[Context, BatchedFunction]:
    ctx = Context()

    @ctx.batch(type_inference=lambda types: types[0])
    def fib(n):
        if n > 2:
            return fib(n - 1) + fib(n - 2)
        return 1

    return ctx, fib


def test_batch_returns_a_wrapped_batched_function():
    ctx, fib = make_fib_context()
    assert isinstance(fib, BatchedFunction)
    assert fib.__name__ == "fib" and fib.name == "fib"
    assert ctx.function_names() == ["fib"]
    assert ctx.python_function("fib") is fib.python_function


def test_module_and_program_verify_and_round_trip():
    ctx, _ = make_fib_context()
    module = ctx.module()
    module.verify()
    round_trip(module)
    assert function_names(ctx.program("fib")) == ["fib"]


def test_program_contains_only_reachable_functions():
    ctx = Context()

    @ctx.batch()
    def main(x):
        return helper(x) + 1

    @ctx.batch()
    def helper(x):
        return x * 2

    @ctx.batch()
    def unrelated(x):
        return x

    assert function_names(ctx.module()) == ["main", "helper", "unrelated"]
    assert function_names(ctx.program("main")) == ["main", "helper"]
    assert function_names(ctx.program("helper")) == ["helper"]


def test_build_program_specializes_on_argument_structure():
    ctx = Context()

    @ctx.batch()
    def swap(p):
        return Pair(p.b, p.a), p.a

    treedef = optree.tree_structure(Pair(np.zeros(1), np.zeros(1)))
    program = ctx.build_program("swap", [treedef])
    assert isinstance(program, FrontendProgram)
    assert program.entry == "swap.s1"
    assert program.output_treedef == optree.tree_structure((Pair(0, 0), 0))
    func = next(iter(program.module.ops))
    assert isinstance(func, FuncOp)
    assert len(func.function_type.inputs) == 2 and len(func.function_type.outputs) == 3
    round_trip(program.module)


def test_build_program_is_cached_and_invalidated_by_decoration():
    ctx, _ = make_fib_context()
    first = ctx.build_program("fib")
    assert ctx.build_program("fib") is first
    assert ctx.build_program("fib", [optree.tree_structure(0)]) is first

    @ctx.batch()
    def other(x):
        return x

    assert ctx.build_program("fib") is not first


def test_build_program_checks_its_arguments():
    ctx, _ = make_fib_context()
    with pytest.raises(KeyError, match="no batched function named 'nope'"):
        ctx.build_program("nope")
    with pytest.raises(TypeError, match="takes 1 argument"):
        ctx.build_program("fib", [optree.tree_structure(0)] * 2)


def test_type_inference_callables_cover_every_specialization():
    ctx = Context()
    infer = lambda types: types[0]  # noqa: E731

    @ctx.batch(type_inference=infer)
    def f(p):
        return p[0]

    @ctx.batch()
    def g(x):
        return f((x, x))

    ctx.module()
    callables = ctx.type_inference_callables()
    assert set(callables) == {"f", "f.s1"}
    # Each specialization's callable gets every argument's types in that argument's structure.
    assert callables["f.s1"](["a", "b"]) == ("a", "b")


def test_opaque_callables_are_registered_and_take_batched_leaves_only():
    ctx = Context()

    @ctx.primitive
    def scaled(v, factor):
        return v * factor

    @ctx.batch()
    def f(x):
        return scaled(x, factor=3)

    module = ctx.module()
    (decl,) = [op for op in module.ops if isinstance(op, OpaqueOp)]
    assert decl.source.data == "scaled(x, factor=3)"
    callable_ = lookup_opaque(decl.sym_name.data)
    np.testing.assert_array_equal(callable_(np.array([1, 2])), [3, 6])
    # A second build reuses the registered name.
    assert str(ctx.program("f")) == str(module)


def test_forward_references_and_mutual_recursion_in_any_order():
    ctx = Context()

    @ctx.batch()
    def a(x):
        if x > 0:
            return b(x - 1)
        return x

    @ctx.batch()
    def b(x):
        return a(x)

    module = ctx.module()
    calls = [op.callee.string_value() for op in module.walk() if isinstance(op, CallOp)]
    assert calls == ["b", "a"]


def test_specializations_in_recursion_with_namedtuple_state():
    ctx = Context()

    @ctx.batch()
    def count(state):
        while state.a < state.b:
            if state.a % 7 == 0:
                return count(Pair(state.a + 1, state.b))
            state = state._replace(a=state.a + 2)
        return state

    @ctx.batch()
    def main(x):
        return count(Pair(x, 100)).a

    module = ctx.module()
    assert function_names(module) == ["main", "count.s1"]
    round_trip(module)


def test_dry_run_calls_python_directly_member_by_member():
    ctx = Context()
    seen = []

    @ctx.batch()
    def f(x):
        seen.append(type(truthy(x > 0)))
        return g(x) + 1

    @ctx.batch()
    def g(x):
        return x * 2

    assert f(np.array([3]), dry_run=True) == 7
    assert seen == [bool]
    np.testing.assert_array_equal(f(np.array([1, 2]), dry_run=True), [3, 5])
    assert seen == [bool] * 3


def test_dry_run_results_carry_a_batch_dimension_and_options_are_checked():
    ctx, fib = make_fib_context()
    result = fib(np.array([1]), dry_run=True, max_stack_depth=4)  # the base case returns a Python 1
    assert isinstance(result, np.ndarray) and result.shape == (1,) and result[0] == 1
    np.testing.assert_array_equal(fib(np.array([10]), dry_run=True), [55])
    with pytest.raises(TypeError, match="max_depth"):
        fib(np.array([1]), dry_run=True, max_depth=4)


def test_batched_call_runs_the_program():
    ctx, fib = make_fib_context()
    np.testing.assert_array_equal(fib(np.array([3, 4, 10])), [2, 3, 55])


def test_truthy_outside_dry_run():
    assert truthy(np.array([1])) is True
    vector = np.array([0, 1])
    assert truthy(vector) is vector


def test_name_resolution_at_compile_time_sees_later_globals():
    ctx = Context()

    @ctx.batch()
    def f(x):
        return x * LATE_CONSTANT  # noqa: F821 (defined after decoration)

    globals()["LATE_CONSTANT"] = 5
    try:
        assert "constant weak 5 : i64" in str(ctx.module())
    finally:
        del globals()["LATE_CONSTANT"]


def _pick_second(x, y):
    return y


def test_broadcast_scalar_argument_comes_back_as_a_fresh_array() -> None:
    """A Python scalar spread over the batch is a writable [B] array in the result."""
    pick = Context().batch_uncurried(_pick_second)
    out = pick(np.arange(4.0), 0.5)
    np.testing.assert_array_equal(out, [0.5] * 4)
    out[0] = 1.0  # writable
