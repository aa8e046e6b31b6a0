"""The builtin array prims (`abir.array_prims`): array syntax becomes prims whose static
parameters are in the op, so the printed functional IR is the whole program: no opaque
declarations, a text round trip that keeps every parameter, types inferred from the text alone,
and malformed parameters rejected by the verifier with the entry named."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import FloatAttr, ModuleOp, SymbolRefAttr, f64, i64
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

import abir
from abir import array_prims
from abir.array_ops import ARRAY, BASIC, BATCHED
from abir.dialects import functional, make_context
from abir.errors import TypeInferenceError
from abir.passes.infer_types import infer_types
from abir.types import ir_type

TABLE = np.array([10, 20, 30, 40])


def every_array_operation(x, m, i):
    """One member: x a vector, m a matrix, i an integer."""
    picked = x[i] + TABLE[i] + m[i, 1:].sum() + x[[0, 2]].sum() + x[::-1][0]
    reduced = m.sum(axis=0) + m.max(axis=1, keepdims=True).T[0] + np.cumsum(x) + x.std(ddof=1)
    products = m @ x + np.dot(x, x) + np.outer(x, x)[0] + np.linalg.norm(x)
    shaped = np.concatenate([x, x])[:3] + np.stack([x, x])[1] + m.reshape(-1)[:3] + len(x) * x.shape[0]
    counts = m.ndim + m.size + np.argmax(x)
    y = x.copy()
    y[i] = 7.0
    return picked, reduced, products, shaped, counts, y, np.squeeze(m[None])[0], x.astype(m.dtype)


def arguments():
    rng = np.random.default_rng(0)
    return rng.normal(size=(5, 3)), rng.normal(size=(5, 3, 3)), np.array([0, 2, 1, 2, -1])


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


@pytest.fixture(scope="module")
def batched():
    ctx = abir.Context()
    return ctx, ctx.batch()(every_array_operation)


def test_array_syntax_leaves_no_opaque_declaration(batched):
    ctx, _ = batched
    module = ctx.module()
    assert not [op for op in module.walk() if isinstance(op, functional.OpaqueOp)]
    names = {op.prim_name for op in module.walk() if isinstance(op, functional.PrimOp) and op.is_array_prim}
    assert {"getitem", "setitem", "sum", "max", "std", "cumulative_sum", "matmul", "dot", "outer", "vector_norm",
            "concat", "stack", "reshape", "permute_dims", "squeeze", "dim", "ndim", "size", "argmax",
            "astype_like"} <= names  # fmt: skip


def test_printed_module_parses_to_the_same_ops_and_parameters(batched):
    ctx, _ = batched
    module = ctx.module()
    reparsed = parse(str(module))
    reparsed.verify()
    assert str(reparsed) == str(module)
    before = [(op.prim_name, op.param_values) for op in module.walk() if isinstance(op, functional.PrimOp)]
    after = [(op.prim_name, op.param_values) for op in reparsed.walk() if isinstance(op, functional.PrimOp)]
    assert after == before


@pytest.mark.parametrize("backend", ["numpy", "jax", "tf"])
def test_every_array_operation_equals_plain_python(batched, backend):
    _, fn = batched
    args = arguments()
    got = fn(*args, backend=backend)
    want = fn(*args, dry_run=True)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-9)


def test_types_are_inferred_from_the_text_alone():
    module = parse(
        """
        functional.func @f(%x: !functional.unknown, %i: !functional.unknown) -> (!functional.unknown, !functional.unknown) {
          %row = functional.prim "getitem" <{index = ["?", "1:"]}>(%x, %i) : (!functional.unknown, !functional.unknown) -> !functional.unknown
          %s = functional.prim "sum" <{axis = 0 : i64, keepdims}>(%x) : (!functional.unknown) -> !functional.unknown
          %t = functional.prim "permute_dims"(%x) : (!functional.unknown) -> !functional.unknown
          %p = functional.prim "matmul"(%t, %row) : (!functional.unknown, !functional.unknown) -> !functional.unknown
          functional.return %p, %s : !functional.unknown, !functional.unknown
        }
        """
    )
    infer_types(module, "f", [ir_type(np.float64, (3, 4)), i64])
    types = {op.prim_name: op.res[0].type for op in module.walk() if isinstance(op, functional.PrimOp)}
    assert str(types["getitem"]) == "tensor<3xf64>"
    assert str(types["sum"]) == "tensor<1x4xf64>"
    assert str(types["permute_dims"]) == "tensor<4x3xf64>"
    assert types["matmul"] == ir_type(np.float64, (4,))


def test_a_failing_array_prim_names_the_line_and_the_operation():
    ctx = abir.Context()

    @ctx.batch()
    def first(x):
        return x[0]

    with pytest.raises(TypeInferenceError) as info:
        first(np.array([1.0, 2.0]))
    message = str(info.value)
    assert "test_array_prims.py:" in message and "in batched function 'first'" in message
    assert "return x[0]" in message and 'array prim "getitem"' in message and "float64" in message


@pytest.mark.parametrize(
    "components",
    [
        [(BASIC, 0), (BASIC, -1), (BATCHED, None)],
        [(BASIC, slice(1, None)), (BASIC, Ellipsis), (BASIC, None), (BASIC, slice(None, None, -1))],
        [(BASIC, slice(None)), (ARRAY, np.array([[0, 2], [1, 1]]))],
        [(BASIC, slice(-3, 5, 2))],
    ],
)
def test_index_specs_round_trip(components):
    spec = array_prims.format_index(components)
    parsed = array_prims.parse_index(spec)
    assert len(parsed) == len(components)
    for (kind, value), (want_kind, want) in zip(parsed, components, strict=True):
        assert kind == want_kind
        if kind == ARRAY:
            np.testing.assert_array_equal(value, want)
        else:
            assert value == want


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        (["x"], "'x' is not an integer"),
        (["1:2:3:4"], "at most three parts"),
        (["[1, 2"], "not a JSON list of integers"),
        (["[1.5]"], "rectangular list of integers"),
        (["[" * 5000 + "]" * 5000], "not a JSON list of integers"),
        (["...", "..."], "at most one '...'"),
        (["9" * 5000], "is not an integer"),
    ],
)
def test_malformed_index_specs_say_which_entry(spec, fragment):
    with pytest.raises(ValueError, match=fragment.replace("[", r"\[").replace("(", r"\(")):
        array_prims.parse_index(spec)


def test_parameters_are_checked_by_the_verifier():
    op = functional.PrimOp("stack", [], [f64], {"axis": 0})
    with pytest.raises(VerifyException, match='"stack" takes at least 1 operand'):
        op.verify_()
    with pytest.raises(VerifyException, match='"dim" needs the parameter "axis"'):
        functional.PrimOp("dim", [], [i64]).verify_()


def test_prims_declare_effects_and_speculatability_for_xdsl():
    from xdsl.traits import is_side_effect_free, is_speculatable

    x = functional.ConstantOp(FloatAttr(1.0, f64))
    builtin = functional.PrimOp("exp", [x.res], [f64])
    array = functional.PrimOp("sum", [x.res], [f64], {"keepdims": True})
    opaque = functional.PrimOp(SymbolRefAttr("helper"), [x.res], [f64])
    assert all(is_side_effect_free(op) and is_speculatable(op) for op in (x, builtin, array))
    assert not is_side_effect_free(opaque) and not is_speculatable(opaque)


def test_equal_array_prims_from_different_lines_are_merged_once_typed():
    ctx = abir.Context()

    @ctx.batch()
    def twice(x, i):
        a = x[i] + x.sum()
        b = x[i] * x.sum()
        return a, b

    typed = ctx.program_compiled("twice", [abir.TensorType(np.float64, (3,)), abir.TensorType(np.int64, ())])
    names = [op.prim_name for op in typed.walk() if isinstance(op, functional.PrimOp)]
    assert names.count("getitem") == 1 and names.count("sum") == 1, names
    assert not any("abir.loc" in op.attributes for op in typed.walk() if isinstance(op, functional.PrimOp))
