"""Polymorphic functions: one specialization per tuple of argument types (`infer-types`).

A function called with different argument types (an int and a float, a scalar and a vector)
gets one clone per signature (`@f`, `@f.t1`, ...), as a Python function would simply run on
both. Everything goes through the public API and is checked against plain Python per member.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from conftest import backend_params

import abir
from abir.backend_registry import spec_named
from abir.errors import TypeInferenceError
from abir.passes.infer_types import infer_types
from abir.types import ir_type

# ----- programs -------------------------------------------------------------------------------


def scale(v):
    return v * 2


def int_and_float(i, x):
    return scale(i) + 1, scale(x)


def literal_and_float(x):
    return scale(3), scale(x)


def scalar_and_vector(s, v):
    a = scale(s)
    b = scale(v)
    return a, b + a


def leaf(v):
    return v * 2


def ping(n, x):
    if n <= 0:
        return x
    return pong(n - 1, x + leaf(n))


def pong(n, x):
    if n <= 0:
        return x
    return ping(n - 1, x * 0.5 + leaf(x))


def acc_rec(n, acc):
    if n <= 0:
        return acc
    return acc_rec(n - 1, acc + n)


def acc_entry(n):
    return acc_rec(n, 0)


def ident(v):
    return v


def nine_types(a, b, c, d, e, f, g, h, i):
    return ident(a), ident(b), ident(c), ident(d), ident(e), ident(f), ident(g), ident(h), ident(i)


def eight_types(a, b, c, d, e, f, g, h):
    return ident(a), ident(b), ident(c), ident(d), ident(e), ident(f), ident(g), ident(h)


def halvings(x, n):
    # x turns from int to float at the first level (x / 2); the result (n) keeps its type.
    if x < 1:
        return n
    return halvings(x / 2, n + 1)


def halve_to(x, n):
    # The result is x itself: an int at depth 0, a float deeper. One batched result type cannot
    # be both, so this is an error (plain Python returns int or float per member).
    if n <= 0:
        return x
    return halve_to(x / 2, n - 1)


def grow(x, n):
    # The per-member shape doubles at every level: no finite set of specializations.
    if n <= 0:
        return n
    return grow(np.concatenate([x, x], axis=-1), n - 1)


def mixed_join(c, i, x):
    y = scale(i)
    if c > 0:
        y = scale(x)
    return y


# ----- helpers --------------------------------------------------------------------------------


def batched(*functions, type_inference=None):
    """A fresh Context with `functions` batched; the first one is returned batched."""
    ctx = abir.Context()
    result = [ctx.batch_uncurried(fn, type_inference=(type_inference or {}).get(fn.__name__)) for fn in functions]
    return ctx, result[0]


def make_backend(name: str):
    return spec_named(name).new_backend()


def member(array, i):
    row = np.asarray(array)[i]
    return row.item() if row.ndim == 0 else row


def assert_matches_python(fn, result, *args):
    """Each member of `result` equals plain Python on that member, with the same kind of number."""
    results = result if isinstance(result, tuple) else (result,)
    batch = len(np.asarray(args[0]))
    for i in range(batch):
        expected = fn(*(member(a, i) for a in args))
        expected = expected if isinstance(expected, tuple) else (expected,)
        assert len(expected) == len(results)
        for got_all, want in zip(results, expected, strict=True):
            got = np.asarray(got_all)[i]
            np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=f"{fn.__name__} member {i}")
            want_kind = np.asarray(want).dtype.kind
            assert np.asarray(got_all).dtype.kind == want_kind, (fn.__name__, i, np.asarray(got_all).dtype, want)


def symbols(module) -> list[str]:
    return [op.sym_name.data for op in module.ops if op.name == "functional.func"]


def specialized(ctx, main, sig):
    """`main`'s program after infer-types alone: `program_compiled` goes on to inline the
    non-recursive specializations (inline-calls), so their signatures are checked here."""
    module = ctx.program(main).clone()
    infer_types(module, main, [ir_type(t.dtype, t.shape) for t in sig])
    return module


BACKENDS = backend_params()


# ----- tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_helper_called_with_int_and_float(backend):
    ctx, fn = batched(int_and_float, scale)
    i, x = np.array([1, -2, 30]), np.array([0.5, 1.25, -3.0])
    result = fn(i, x, backend=make_backend(backend))
    assert np.asarray(result[0]).dtype == np.int64
    assert np.asarray(result[1]).dtype == np.float64
    assert_matches_python(int_and_float, result, i, x)
    sig = [abir.TensorType(np.int64, ()), abir.TensorType(np.float64, ())]
    assert symbols(specialized(ctx, "int_and_float", sig)) == ["int_and_float", "scale", "scale.t1"]
    assert symbols(ctx.program_compiled("int_and_float", sig)) == ["int_and_float"]  # both inlined


def test_literal_argument_keeps_python_int_semantics():
    # `scale(3)` is computed as plain Python computes it (an int), although `scale(x)` is float.
    ctx, fn = batched(literal_and_float, scale)
    x = np.array([0.5, 2.0])
    result = fn(x)
    assert_matches_python(literal_and_float, result, x)
    assert np.asarray(result[0]).dtype.kind == "i"


@pytest.mark.parametrize("backend", BACKENDS)
def test_helper_called_with_scalar_and_vector(backend):
    ctx, fn = batched(scalar_and_vector, scale)
    s = np.array([1.0, 2.0, -1.5, 4.0])
    v = np.arange(12.0).reshape(4, 3)
    result = fn(s, v, backend=make_backend(backend))
    assert np.asarray(result[1]).shape == (4, 3)
    assert_matches_python(scalar_and_vector, result, s, v)
    typed = specialized(
        ctx, "scalar_and_vector", [abir.TensorType(np.float64, ()), abir.TensorType(np.float64, (3,))]
    )
    funcs = {op.sym_name.data: op for op in typed.ops if op.name == "functional.func"}
    assert str(funcs["scale"].function_type) == "(f64) -> f64"
    assert str(funcs["scale.t1"].function_type) == "(tensor<3xf64>) -> tensor<3xf64>"


@pytest.mark.parametrize("backend", BACKENDS)
def test_mutual_recursion_with_polymorphic_leaf(backend):
    ctx, fn = batched(ping, pong, leaf)
    n, x = np.array([0, 1, 4, 7, 10]), np.array([1.0, 2.0, 3.0, 4.0, -0.5])
    result = fn(n, x, backend=make_backend(backend))
    assert_matches_python(ping, result, n, x)
    sig = [abir.TensorType(np.int64, ()), abir.TensorType(np.float64, ())]
    assert sorted(symbols(specialized(ctx, "ping", sig))) == ["leaf", "leaf.t1", "ping", "pong"]
    # the leaves are inlined into the mutual recursion, which stays calls
    assert sorted(symbols(ctx.program_compiled("ping", sig))) == ["ping", "pong"]


def test_stackless_runs_the_specializations():
    ctx, fn = batched(ping, pong, leaf)
    n, x = np.array([0, 3, 6]), np.array([1.0, 2.0, 3.0])
    assert_matches_python(ping, fn(n, x, stackless=True), n, x)


def test_literal_accumulator_shares_the_typed_specialization():
    # acc_rec(n, 0) and acc_rec(n - 1, acc + n_i32): the literal takes the i32 of its own kind
    # (NEP 50), so one specialization serves both calls; the result is int32 as in Python.
    ctx, fn = batched(acc_entry, acc_rec)
    n = np.array([0, 3, 5, -2], dtype=np.int32)
    result = fn(n)
    assert np.asarray(result).dtype == np.int32
    assert_matches_python(acc_entry, result, n)
    typed = ctx.program_compiled("acc_entry", [abir.TensorType(np.int32, ())])
    assert symbols(typed) == ["acc_entry", "acc_rec"]


def test_user_type_inference_applies_to_every_specialization():
    seen = []

    def scale_types(arg_types):
        seen.append(np.dtype(arg_types[0].dtype))
        return arg_types[0]

    ctx, fn = batched(int_and_float, scale, type_inference={"scale": scale_types})
    i, x = np.array([1, 2]), np.array([0.5, 1.5])
    assert_matches_python(int_and_float, fn(i, x), i, x)
    assert {np.dtype(np.int64), np.dtype(np.float64)} <= set(seen)


def test_user_type_inference_checked_per_specialization():
    ctx, fn = batched(int_and_float, scale, type_inference={"scale": lambda ts: abir.TensorType(np.float64, ())})
    with pytest.raises(TypeInferenceError, match=r"type_inference of @scale says result #0 is f64.*produce i64"):
        fn(np.array([1, 2]), np.array([0.5, 1.5]))


def test_eight_signatures_are_allowed():
    ctx, fn = batched(eight_types, ident)
    dtypes = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.float32, np.float64]
    args = [np.array([1, 2], dtype=d) for d in dtypes]
    result = fn(*args)
    assert [np.asarray(r).dtype for r in result] == [np.dtype(d) for d in dtypes]


def test_specialization_limit_error_names_function_and_signatures():
    ctx, fn = batched(nine_types, ident)
    dtypes = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.float32, np.float64]
    with pytest.raises(TypeInferenceError) as info:
        fn(*(np.array([1, 2], dtype=d) for d in dtypes))
    message = str(info.value)
    assert "@ident is called with more than 8 different argument type signatures" in message
    assert "@ident(i8)" in message and "@ident.t7(f32)" in message
    assert "a call in @nine_types now passes (f64)" in message
    assert "recursion" not in message


def test_recursion_whose_argument_type_changes_once_works():
    # halvings(int, int) calls halvings(float, int), which calls itself: two specializations.
    ctx, fn = batched(halvings)
    x, n = np.array([0, 1, 8, 1000]), np.array([0, 0, 0, 5])
    assert_matches_python(halvings, fn(x, n), x, n)
    typed = ctx.program_compiled("halvings", [abir.TensorType(np.int64, ()), abir.TensorType(np.int64, ())])
    assert symbols(typed) == ["halvings", "halvings.t1"]


def test_recursion_whose_result_type_changes_is_a_clear_error():
    ctx, fn = batched(halve_to)
    with pytest.raises(TypeInferenceError) as info:
        fn(np.array([8, 9]), np.array([0, 2]))
    message = str(info.value)
    base, recursive = (inspect.getsourcelines(halve_to)[1] + offset for offset in (4, 5))
    assert f"{__file__}:{recursive}: in batched function 'halve_to'" in message
    assert f"function 'halve_to' returns an int64 at line {base} and a float64 at line {recursive}" in message
    assert "change along its recursion: @halve_to receives (i64, i64) but calls @halve_to.t1 with (f64, i64)" in message
    # With a float argument the types stay put and it just works.
    x, n = np.array([8.0, 9.0]), np.array([0, 2])
    assert_matches_python(halve_to, fn(x, n), x, n)


def test_recursion_with_ever_changing_shapes_hits_the_limit():
    ctx, fn = batched(grow)
    with pytest.raises(TypeInferenceError) as info:
        fn(np.array([[1], [2]]), np.array([1, 2]))
    message = str(info.value)
    assert "@grow is called with more than 8 different argument type signatures" in message
    assert "@grow.t7(tensor<128xi64>, i64)" in message
    assert "part of a recursion through @grow" in message


def test_conflicting_join_inside_one_specialization_stays_an_error():
    ctx, fn = batched(mixed_join, scale)
    with pytest.raises(TypeInferenceError, match=r"variable 'y' is an int64 on the path from line \d+ and a float64"):
        fn(np.array([0, 1]), np.array([1, 2]), np.array([0.5, 1.5]))
