"""The stackless executor on hand-written typed functional programs."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.parser import Parser

from abir.backends.numpy_backend import NumpyBackend
from abir.dialects import make_context
from abir.opaque import register_opaque
from abir.vm.stackless import execute_stackless

FIB = """
functional.func @fib(%n: i64) -> i64 {
  %c2 = functional.constant 2 : i64
  %small = functional.prim "less"(%n, %c2) : (i64, i64) -> i1
  cf.cond_br %small, ^base, ^recurse
^recurse:
  %c1 = functional.constant 1 : i64
  %a1 = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
  %f1 = functional.call @fib(%a1) : (i64) -> i64
  %a2 = functional.prim "subtract"(%n, %c2) : (i64, i64) -> i64
  %f2 = functional.call @fib(%a2) : (i64) -> i64
  %s = functional.prim "add"(%f1, %f2) : (i64, i64) -> i64
  functional.return %s : i64
^base:
  %one = functional.constant 1 : i64
  functional.return %one : i64
}
"""

COLLATZ = """
functional.func @collatz(%n0: i64) -> i32 {
  %zero = functional.constant 0 : i32
  cf.br ^head(%n0, %zero : i64, i32)
^head(%n: i64, %count: i32):
  %one = functional.constant 1 : i64
  %more = functional.prim "greater"(%n, %one) : (i64, i64) -> i1
  cf.cond_br %more, ^body, ^done
^body:
  %two = functional.constant 2 : i64
  %r = functional.prim "remainder"(%n, %two) : (i64, i64) -> i64
  %z = functional.constant 0 : i64
  %even = functional.prim "equal"(%r, %z) : (i64, i64) -> i1
  %inc = functional.constant 1 : i32
  %next = functional.prim "add"(%count, %inc) : (i32, i32) -> i32
  cf.cond_br %even, ^half, ^triple
^half:
  %h = functional.prim "floor_divide"(%n, %two) : (i64, i64) -> i64
  cf.br ^head(%h, %next : i64, i32)
^triple:
  %three = functional.constant 3 : i64
  %t = functional.prim "multiply"(%n, %three) : (i64, i64) -> i64
  %u = functional.prim "add"(%t, %one) : (i64, i64) -> i64
  cf.br ^head(%u, %next : i64, i32)
^done:
  functional.return %count : i32
}
"""

GCD = """
functional.func @gcd(%a0: i64, %b0: i64) -> i64 {
  cf.br ^loop(%a0, %b0 : i64, i64)
^loop(%a: i64, %b: i64):
  %zero = functional.constant 0 : i64
  %more = functional.prim "not_equal"(%b, %zero) : (i64, i64) -> i1
  cf.cond_br %more, ^step, ^done
^step:
  %r = functional.prim "remainder"(%a, %b) : (i64, i64) -> i64
  cf.br ^loop(%b, %r : i64, i64)
^done:
  functional.return %a : i64
}
"""

EVEN_ODD = """
functional.func @is_even(%n: i64) -> i1 {
  %zero = functional.constant 0 : i64
  %done = functional.prim "equal"(%n, %zero) : (i64, i64) -> i1
  cf.cond_br %done, ^yes, ^recurse
^yes:
  %t = functional.constant true
  functional.return %t : i1
^recurse:
  %one = functional.constant 1 : i64
  %m = functional.prim "subtract"(%n, %one) : (i64, i64) -> i64
  %r = functional.call @is_odd(%m) : (i64) -> i1
  functional.return %r : i1
}
functional.func @is_odd(%n: i64) -> i1 {
  %zero = functional.constant 0 : i64
  %done = functional.prim "equal"(%n, %zero) : (i64, i64) -> i1
  cf.cond_br %done, ^no, ^recurse
^no:
  %f = functional.constant false
  functional.return %f : i1
^recurse:
  %one = functional.constant 1 : i64
  %m = functional.prim "subtract"(%n, %one) : (i64, i64) -> i64
  %r = functional.call @is_even(%m) : (i64) -> i1
  functional.return %r : i1
}
"""

NORM = """
functional.opaque @test_stackless_norm "lambda v: np.sqrt((v * v).sum(axis=-1))"
functional.func @scale(%v: tensor<3xf64>, %s: f64) -> (tensor<3xf64>, f64) {
  %w = functional.prim "multiply"(%v, %s) : (tensor<3xf64>, f64) -> tensor<3xf64>
  %n = functional.prim @test_stackless_norm(%w) : (tensor<3xf64>) -> f64
  functional.return %w, %n : tensor<3xf64>, f64
}
"""


def parse(text: str):
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def fib_reference(n: int) -> int:
    return 1 if n < 2 else fib_reference(n - 1) + fib_reference(n - 2)


def test_fib():
    (out,) = execute_stackless(parse(FIB), "fib", [np.array([5, 6, 8, 9])], NumpyBackend())
    np.testing.assert_array_equal(out, [8, 13, 34, 55])


@pytest.mark.parametrize("inputs", [[0], [1, 0, 2], [12, 3, 0, 7, 7]])
def test_fib_matches_python(inputs):
    (out,) = execute_stackless(parse(FIB), "fib", [np.array(inputs)], NumpyBackend())
    np.testing.assert_array_equal(out, [fib_reference(n) for n in inputs])


def test_collatz_loop_with_block_arguments():
    inputs = [1, 2, 3, 6, 7, 27, 97]
    (out,) = execute_stackless(parse(COLLATZ), "collatz", [np.array(inputs)], NumpyBackend())
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [0, 1, 7, 8, 16, 111, 118])


def test_parameter_swap_is_a_parallel_move():
    a, b = np.array([12, 17, 100, 0]), np.array([18, 5, 75, 4])
    (out,) = execute_stackless(parse(GCD), "gcd", [a, b], NumpyBackend())
    np.testing.assert_array_equal(out, np.gcd(a, b))


def test_mutual_recursion():
    n = np.array([0, 1, 4, 7])
    (out,) = execute_stackless(parse(EVEN_ODD), "is_even", [n], NumpyBackend())
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, n % 2 == 0)


def test_size_one_broadcast_vectors_and_opaque_results():
    register_opaque("test_stackless_norm", lambda v: np.sqrt((v * v).sum(axis=-1)))
    v = np.array([[3.0, 0.0, 4.0]])
    s = np.array([1.0, 2.0])
    w, n = execute_stackless(parse(NORM), "scale", [v, s], NumpyBackend())
    np.testing.assert_allclose(w, [[3, 0, 4], [6, 0, 8]])
    np.testing.assert_allclose(n, [5.0, 10.0])


def test_unknown_entry_is_an_error():
    with pytest.raises(KeyError, match="no function @fob.*fib"):
        execute_stackless(parse(FIB), "fob", [np.array([1])], NumpyBackend())


def test_untyped_program_is_rejected():
    text = """
    functional.func @f(%x: !functional.unknown) -> !functional.unknown {
      functional.return %x : !functional.unknown
    }
    """
    with pytest.raises(TypeError, match="type inference"):
        execute_stackless(parse(text), "f", [np.array([1])], NumpyBackend())
