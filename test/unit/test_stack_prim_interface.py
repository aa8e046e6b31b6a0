"""`stack.prim` answers the reference's `PrimOp` interface: `vars_in`, `vars_out`, `function`,
`skip_push_mask` and `replace(vars_out=...)`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

import abir
from abir.dialects import make_context
from abir.dialects import stack as st
from abir.opaque import register_opaque
from abir.passes.pipeline import compile_functional, lower_to_stack
from abir.types import ir_type, tensor_type_of

MODULE = """
functional.opaque @stack_prim_interface_pair "lambda v: (v + 1, v * 2)"
stack.var @n : i64 stack
stack.var @a : i64 register
stack.var @b : i64 register
stack.var @k : i32 register
stack.var @x : f64 register
stack.var @t : tensor<3xf64> register
stack.var @u : tensor<3xf64> register
stack.program @main(@n, @x, @t) -> (@u) {
^entry:
  stack.prim "add"(@n, @a) -> (@b)
  stack.prim "multiply"(@x, @t) -> (@u)
  stack.prim "astype"(@n) -> (@k)
  stack.prim "sum" <{axis = 0 : i64}>(@t) -> (@x)
  stack.prim @stack_prim_interface_pair(@n) -> (@a, @b)
  stack.halt
}
"""


def prims_of(module: ModuleOp) -> list[st.PrimOp]:
    return [op for op in module.walk() if isinstance(op, st.PrimOp)]


@pytest.fixture
def prim_ops() -> list[st.PrimOp]:
    module = Parser(make_context(), MODULE, "test").parse_module()
    module.verify()
    return prims_of(module)


def test_vars_in_vars_out_and_skip_push_mask(prim_ops: list[st.PrimOp]) -> None:
    add, multiply, astype, total, pair = prim_ops
    assert (add.vars_in, add.vars_out) == (["n", "a"], ["b"])
    assert (total.vars_in, total.vars_out) == (["t"], ["x"])
    assert (pair.vars_in, pair.vars_out) == (["n"], ["a", "b"])
    # a stack.prim writes its outputs in place; saving them is a separate stack.push
    assert add.skip_push_mask == {"b"} and pair.skip_push_mask == {"a", "b"}
    assert all(op.skip_push_mask == set(op.vars_out) for op in prim_ops)


def test_function_computes_on_whole_batch_numpy_arrays(prim_ops: list[st.PrimOp]) -> None:
    add, multiply, astype, total, pair = prim_ops
    n = np.array([1, 2, 3, 4], np.int64)
    t = np.arange(12, dtype=np.float64).reshape(4, 3)
    x = np.array([0.5, 1.0, 2.0, -1.0])
    (result,) = add.function(n, n * 10)
    np.testing.assert_array_equal(result, [11, 22, 33, 44])
    (result,) = multiply.function(x, t)  # x is per-member scalar: aligned after the batch axis
    np.testing.assert_array_equal(result, x[:, None] * t)
    (result,) = astype.function(n)
    assert result.dtype == np.int32  # the declared type of @k
    (result,) = total.function(t)
    np.testing.assert_array_equal(result, t.sum(axis=1))  # axis 0 of each member's event
    register_opaque("stack_prim_interface_pair", lambda v: (v + 1, v * 2))
    first, second = pair.function(n)
    np.testing.assert_array_equal(first, n + 1)
    np.testing.assert_array_equal(second, n * 2)


def test_replace_vars_out(prim_ops: list[st.PrimOp]) -> None:
    add, _, _, total, pair = prim_ops
    replaced = add.replace(vars_out=["a"])
    assert (replaced.vars_in, replaced.vars_out, replaced.prim_name) == (["n", "a"], ["a"], "add")
    assert replaced.parent is None and add.vars_out == ["b"]  # a copy; the original is unchanged
    assert total.replace(vars_out=["x"]).params == total.params
    assert pair.replace(vars_out=["b", "a"]).callee == pair.callee
    (result,) = replaced.function(np.array([1, 2]), np.array([3, 4]))
    np.testing.assert_array_equal(result, [4, 6])
    with pytest.raises(ValueError, match="nothing to replace"):
        add.replace()
    with pytest.raises(ValueError, match="astype needs the result dtype"):  # no declared @k outside a module
        prim_ops[2].replace(vars_out=["k"]).function(np.array([1, 2]))


ctx = abir.Context()


@ctx.batch()
def norm_steps(v, tol):
    steps = 0
    while (v * v).sum() > tol:
        v = v * 0.5
        steps += 1
    return steps


@ctx.batch()
def fib(n):
    if n > 2:
        return fib(n - 1) + fib(n - 2)
    return 1


@pytest.mark.parametrize(
    ("name", "arg_types"),
    [("fib", [ir_type(np.int64)]), ("norm_steps", [ir_type(np.float64, (3,)), ir_type(np.float64)])],
)
def test_every_lowered_prim_returns_its_declared_types(name: str, arg_types: list[Any]) -> None:
    """The reference's contract for `function`: one value per `vars_out`, of that variable's
    dtype and (batch and) event shape, given arrays of the `vars_in` types."""
    stack_module = lower_to_stack(compile_functional(ctx.module(), name, arg_types), name)
    ops = prims_of(stack_module)
    assert ops
    batch = 4
    for op in ops:
        declared = [tensor_type_of(st.var_type(op, ref)) for ref in (*op.inputs.data, *op.outputs.data)]
        ins, outs = declared[: len(op.vars_in)], declared[len(op.vars_in) :]
        args = [np.ones((batch, *t.shape), t.dtype) for t in ins]
        results = op.function(*args)
        assert len(results) == len(op.vars_out)
        for result, want in zip(results, outs, strict=True):
            assert (np.asarray(result).dtype, np.shape(result)) == (want.dtype, (batch, *want.shape)), op
