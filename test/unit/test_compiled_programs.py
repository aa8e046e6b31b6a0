"""The Context's introspection API: typed, lowered IR per signature, and compile caching."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

import abir
from abir.dialects import functional, make_context, vm

Point = collections.namedtuple("Point", ["x", "y"])


def fib(n):
    if n > 1:
        return fib(n - 1) + fib(n - 2)
    return 1


def norm1(p):
    return abs(p.x) + abs(p.y)


@pytest.fixture
def ctx():
    context = abir.Context()
    context.batch_uncurried(fib)
    context.batch_uncurried(norm1)
    return context


def reparse(module: ModuleOp) -> ModuleOp:
    parsed = Parser(make_context(), str(module)).parse_module()
    parsed.verify()
    return parsed


def test_program_compiled_is_typed_functional_ir(ctx):
    typed = ctx.program_compiled("fib", [abir.TensorType(np.int32, ())])
    funcs = [op for op in typed.ops if isinstance(op, functional.FuncOp)]
    assert [f.sym_name.data for f in funcs] == ["fib"]
    assert str(funcs[0].function_type) == "(i32) -> i64"
    assert str(reparse(typed)) == str(typed)


def test_program_compiled_without_signature_is_the_frontend_program(ctx):
    assert str(ctx.program_compiled("fib")) == str(ctx.program("fib"))


def test_program_lowered_is_a_vm_program(ctx):
    lowered = ctx.program_lowered("fib", [abir.TensorType(np.int64, ())])
    programs = [op for op in lowered.ops if isinstance(op, vm.ProgramOp)]
    assert len(programs) == 1 and programs[0].blocks[0].number == 0
    storage = {op.sym_name.data: op.storage.data.value for op in lowered.ops if isinstance(op, vm.VarOp)}
    assert sorted(name for name, kind in storage.items() if kind == "stack") == ["fib.n", "fib.v0_4"]
    assert str(reparse(lowered)) == str(lowered)


def test_program_lowered_needs_a_signature(ctx):
    with pytest.raises(ValueError, match="signature"):
        ctx.program_lowered("fib")


def test_signature_with_structure(ctx):
    sig = [Point(abir.TensorType(np.float32, (3,)), abir.TensorType(np.float32, (3,)))]
    lowered = ctx.program_lowered("norm1", sig)
    assert "tensor<3xf32>" in str(lowered)
    with pytest.raises(TypeError, match="TensorType"):
        ctx.program_lowered("norm1", [Point(1, 2)])


def test_lowered_for_args_matches_the_call(ctx):
    args = (Point(np.ones((4, 3), np.float32), np.zeros((4, 3), np.float32)),)
    lowered = ctx.lowered_for_args("norm1", args)
    sig = [Point(abir.TensorType(np.float32, (3,)), abir.TensorType(np.float32, (3,)))]
    assert lowered is ctx.program_lowered("norm1", sig)


def test_compiled_once_per_signature_not_per_batch_size(ctx):
    first = ctx.lowered_for_args("fib", (np.array([1, 2, 3]),))
    assert ctx.lowered_for_args("fib", (np.array([4]),)) is first
    assert ctx.lowered_for_args("fib", (np.array([4], np.int32),)) is not first


def test_decorating_a_new_function_invalidates_compiled_programs(ctx):
    first = ctx.lowered_for_args("fib", (np.array([1, 2, 3]),))

    def other(x):
        return x

    ctx.batch_uncurried(other)
    assert ctx.lowered_for_args("fib", (np.array([1, 2, 3]),)) is not first


def test_block_code_cache_keeps_compiled_programs(ctx):
    cache: dict = {}
    batched = abir.Context().batch_uncurried(fib)
    np.testing.assert_array_equal(batched(np.array([5, 6]), block_code_cache=cache), [8, 13])
    assert len(cache) == 1
    np.testing.assert_array_equal(batched(np.array([7, 8, 9]), block_code_cache=cache), [21, 34, 55])
    assert len(cache) == 1
    with pytest.raises(TypeError, match="block_code_cache"):
        batched(np.array([5]), block_code_cache=[])


def test_jax_does_not_recompile_for_a_second_call():
    backend = abir.JaxBackend()
    batched = abir.Context().batch_uncurried(fib)
    batched(np.array([5, 6, 7]), backend=backend)
    traces = backend.trace_count
    np.testing.assert_array_equal(batched(np.array([8, 9, 3]), backend=backend), [34, 55, 3])
    assert backend.trace_count == traces
    other = abir.JaxBackend()  # a new backend object per call reuses the compiled run too
    np.testing.assert_array_equal(batched(np.array([8, 9, 3]), backend=other), [34, 55, 3])
    assert other.trace_count == 0


def test_max_stack_depth_must_be_positive(ctx):
    batched = abir.Context().batch_uncurried(fib)
    with pytest.raises(ValueError, match="max_stack_depth"):
        batched(np.array([3]), max_stack_depth=0)
