"""The program-counter machine on hand-written vm programs (NumPy backend)."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.parser import Parser

from abir.backends.numpy_backend import NumpyBackend
from abir.dialects import make_context
from abir.errors import StackOverflowError, StackUnderflowError
from abir.opaque import register_opaque
from abir.vm import compile_machine

FIB = """
vm.var @n : i64 stack
vm.var @a : i64 stack
vm.var @ret : i64 register
vm.program @main(@n) -> (@ret) {
  vm.block 0 attributes {function = "main"} {
    vm.call 1, return 5
  }
  vm.block 1 attributes {function = "fib"} {
    %n = vm.read @n : i64
    %c2 = vm.constant 2 : i64
    %small = vm.prim "less"(%n, %c2) : (i64, i64) -> i1
    vm.branch %small, 4, 2
  }
  vm.block 2 attributes {function = "fib"} {
    %n = vm.read @n : i64
    %c1 = vm.constant 1 : i64
    %m = vm.prim "subtract"(%n, %c1) : (i64, i64) -> i64
    vm.push @n
    vm.write @n, %m : i64
    vm.call 1, return 3
  }
  vm.block 3 attributes {function = "fib"} {
    vm.pop @n
    %r = vm.read @ret : i64
    %n = vm.read @n : i64
    %c2 = vm.constant 2 : i64
    %m = vm.prim "subtract"(%n, %c2) : (i64, i64) -> i64
    vm.write @n, %m : i64
    vm.push @a
    vm.write @a, %r : i64
    vm.call 1, return 6
  }
  vm.block 4 attributes {function = "fib"} {
    %one = vm.constant 1 : i64
    vm.write @ret, %one : i64
    vm.return
  }
  vm.block 5 attributes {function = "main"} {
    vm.halt
  }
  vm.block 6 attributes {function = "fib"} {
    %a = vm.read @a : i64
    %b = vm.read @ret : i64
    %s = vm.prim "add"(%a, %b) : (i64, i64) -> i64
    vm.write @ret, %s : i64
    vm.pop @a
    vm.return
  }
}
"""

COLLATZ = """
vm.var @n : i64 register
vm.var @count : i32 register
vm.program @collatz(@n) -> (@count) {
  vm.block 0 attributes {function = "collatz"} {
    %n = vm.read @n : i64
    %one = vm.constant 1 : i64
    %more = vm.prim "greater"(%n, %one) : (i64, i64) -> i1
    vm.branch %more, 1, 4
  }
  vm.block 1 attributes {function = "collatz"} {
    %n = vm.read @n : i64
    %two = vm.constant 2 : i64
    %zero = vm.constant 0 : i64
    %r = vm.prim "remainder"(%n, %two) : (i64, i64) -> i64
    %even = vm.prim "equal"(%r, %zero) : (i64, i64) -> i1
    %c = vm.read @count : i32
    %inc = vm.constant 1 : i32
    %c1 = vm.prim "add"(%c, %inc) : (i32, i32) -> i32
    vm.write @count, %c1 : i32
    vm.branch %even, 2, 3
  }
  vm.block 2 attributes {function = "collatz"} {
    %n = vm.read @n : i64
    %two = vm.constant 2 : i64
    %h = vm.prim "floor_divide"(%n, %two) : (i64, i64) -> i64
    vm.write @n, %h : i64
    vm.jump 0
  }
  vm.block 3 attributes {function = "collatz"} {
    %n = vm.read @n : i64
    %three = vm.constant 3 : i64
    %one = vm.constant 1 : i64
    %t = vm.prim "multiply"(%n, %three) : (i64, i64) -> i64
    %u = vm.prim "add"(%t, %one) : (i64, i64) -> i64
    vm.write @n, %u : i64
    vm.jump 0
  }
  vm.block 4 attributes {function = "collatz"} {
    vm.halt
  }
}
"""

VECTOR = """
vm.var @v : tensor<3xf64> register
vm.var @s : f64 register
vm.var @k : i32 register
vm.program @affine(@v, @s, @k) -> (@v) {
  vm.block 0 {
    %k = vm.read @k : i32
    %zero = vm.constant 0 : i32
    %more = vm.prim "greater"(%k, %zero) : (i32, i32) -> i1
    vm.branch %more, 1, 2
  }
  vm.block 1 {
    %v = vm.read @v : tensor<3xf64>
    %s = vm.read @s : f64
    %c = vm.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf64>
    %m = vm.prim "multiply"(%v, %s) : (tensor<3xf64>, f64) -> tensor<3xf64>
    %w = vm.prim "add"(%m, %c) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
    vm.write @v, %w : tensor<3xf64>
    %k = vm.read @k : i32
    %one = vm.constant 1 : i32
    %k1 = vm.prim "subtract"(%k, %one) : (i32, i32) -> i32
    vm.write @k, %k1 : i32
    vm.jump 0
  }
  vm.block 2 {
    vm.halt
  }
}
"""


def parse(text: str):
    return Parser(make_context(), text).parse_module()


def fib_reference(n: int) -> int:
    return 1 if n < 2 else fib_reference(n - 1) + fib_reference(n - 2)


def collatz_reference(n: int) -> int:
    steps = 0
    while n > 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


@pytest.fixture(scope="module")
def fib():
    return compile_machine(parse(FIB))


def test_fib_recursive(fib):
    (out,) = fib.run([np.array([5, 6, 8, 9])], NumpyBackend())
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [8, 13, 34, 55])


@pytest.mark.parametrize("inputs", [[0], [1, 0, 2], [12, 3, 0, 7, 7], list(range(11))])
def test_fib_matches_python_per_member(fib, inputs):
    (out,) = fib.run([np.array(inputs, dtype=np.int64)], NumpyBackend())
    np.testing.assert_array_equal(out, [fib_reference(n) for n in inputs])


def test_fib_batches_across_recursion(fib):
    """All members share the steps of the longest member: the additions run fib(max) - 1 times."""
    backend = NumpyBackend()
    fib.run([np.array([3, 7, 4, 5])], backend)
    stats = fib.last_stats
    assert stats is not None and stats.batch_size == 4
    assert stats.block_steps[6] == fib_reference(7) - 1
    assert stats.steps == sum(stats.block_steps)
    assert 0 < stats.lane_use < 1
    assert stats.ideal_steps == stats.member_steps[1] == max(stats.member_steps)  # fib(7) is the longest
    assert stats.steps >= stats.ideal_steps


def test_fib_overflow_names_function_and_depth(fib):
    with pytest.raises(StackOverflowError, match=r"'fib'.*max_stack_depth=4.*max_stack_depth="):
        fib.run([np.array([2, 9])], NumpyBackend(), max_stack_depth=4)


def test_fib_deeper_stack_succeeds(fib):
    (out,) = fib.run([np.array([2, 9])], NumpyBackend(), max_stack_depth=9)
    np.testing.assert_array_equal(out, [2, 55])


def test_overflow_flag_recorded_per_member(fib):
    backend = NumpyBackend()
    batch, leaves = 2, [np.array([1, 9])]
    state = fib.initial_state(backend, leaves, batch, 4)
    state = backend.run(fib.kernels(backend), state, fib.num_blocks, None, stack_keys=fib.stack_keys)
    assert state["overflow"][0] == 0 and state["overflow"][1] > 0
    assert state["r:ret"][0] == 1  # the shallow member finished normally


def test_collatz_divergent_trip_counts():
    machine = compile_machine(parse(COLLATZ))
    inputs = np.array([1, 2, 3, 6, 7, 27, 97])
    (out,) = machine.run([inputs], NumpyBackend())
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [collatz_reference(int(n)) for n in inputs])
    stats = machine.last_stats
    # Every member runs the loop body once per iteration; the steps are at least the longest trip.
    assert stats.block_members[1] == sum(collatz_reference(int(n)) for n in inputs)
    assert stats.block_steps[1] >= collatz_reference(97)
    assert stats.block_members[4] == len(inputs)


def test_vector_registers_and_rank_broadcast():
    machine = compile_machine(parse(VECTOR))
    v = np.array([[0.0, 0.0, 0.0], [1.0, -1.0, 2.0]])
    s = np.array([2.0, 0.5])
    k = np.array([3, 1], dtype=np.int32)
    (out,) = machine.run([v, s, k], NumpyBackend())
    expected = v.copy()
    for b in range(2):
        for _ in range(k[b]):
            expected[b] = expected[b] * s[b] + np.array([1.0, 2.0, 3.0])
    assert out.shape == (2, 3)
    np.testing.assert_allclose(out, expected)


def test_size_one_inputs_broadcast():
    machine = compile_machine(parse(VECTOR))
    v = np.array([[1.0, 1.0, 1.0]])
    s = 2.0  # a Python scalar counts as batch size 1
    k = np.array([0, 1, 2], dtype=np.int32)
    (out,) = machine.run([v, s, k], NumpyBackend())
    np.testing.assert_allclose(out, [[1, 1, 1], [3, 4, 5], [7, 10, 13]])


def test_batch_size_mismatch_is_an_error():
    machine = compile_machine(parse(VECTOR))
    with pytest.raises(ValueError, match="batch sizes disagree"):
        machine.run([np.zeros((2, 3)), np.zeros(3), np.zeros(2, np.int32)], NumpyBackend())


def test_event_shape_mismatch_is_an_error():
    machine = compile_machine(parse(VECTOR))
    with pytest.raises(ValueError, match="'v'.*shape \\[3\\]"):
        machine.run([np.zeros((2, 4)), np.zeros(2), np.zeros(2, np.int32)], NumpyBackend())


def test_safe_casts_only():
    machine = compile_machine(parse(COLLATZ))
    (out,) = machine.run([np.array([6, 7], dtype=np.int32)], NumpyBackend())  # int32 -> int64 is safe
    np.testing.assert_array_equal(out, [8, 16])
    with pytest.raises(TypeError, match="'n'.*float64"):
        machine.run([np.array([6.0, 7.0])], NumpyBackend())


def test_underflow_raises():
    text = """
    vm.var @x : i64 stack
    vm.program @main(@x) -> (@x) {
      vm.block 0 attributes {function = "broken"} {
        vm.pop @x
        vm.halt
      }
    }
    """
    with pytest.raises(StackUnderflowError, match="'broken'"):
        compile_machine(parse(text)).run([np.array([1, 2])], NumpyBackend())


def test_return_without_call_underflows():
    text = """
    vm.var @x : i64 register
    vm.program @main(@x) -> (@x) {
      vm.block 0 attributes {function = "f"} {
        vm.call 1, return 1
      }
      vm.block 1 attributes {function = "f"} {
        vm.return
      }
    }
    """
    with pytest.raises(StackUnderflowError, match="vm block 1"):
        compile_machine(parse(text)).run([np.array([1])], NumpyBackend())


def test_opaque_prim_with_two_results():
    register_opaque("test_machine_divmod", lambda a, b: (a // b, a % b))
    text = """
    functional.opaque @test_machine_divmod "lambda a, b: (a // b, a % b)"
    vm.var @a : i64 register
    vm.var @b : i64 register
    vm.program @main(@a, @b) -> (@a, @b) {
      vm.block 0 {
        %a = vm.read @a : i64
        %b = vm.read @b : i64
        %q, %r = vm.prim @test_machine_divmod(%a, %b) : (i64, i64) -> (i64, i64)
        vm.write @a, %q : i64
        vm.write @b, %r : i64
        vm.halt
      }
    }
    """
    q, r = compile_machine(parse(text)).run([np.array([7, 9]), np.array([2, 4])], NumpyBackend())
    np.testing.assert_array_equal(q, [3, 2])
    np.testing.assert_array_equal(r, [1, 1])


def test_junk_rows_do_not_warn():
    """Inactive members divide by zero on junk data; nothing warns or crashes."""
    text = """
    vm.var @x : f64 register
    vm.program @main(@x) -> (@x) {
      vm.block 0 {
        %x = vm.read @x : f64
        %z = vm.constant 0.0 : f64
        %ok = vm.prim "not_equal"(%x, %z) : (f64, f64) -> i1
        vm.branch %ok, 1, 2
      }
      vm.block 1 {
        %x = vm.read @x : f64
        %one = vm.constant 1.0 : f64
        %y = vm.prim "divide"(%one, %x) : (f64, f64) -> f64
        vm.write @x, %y : f64
        vm.halt
      }
      vm.block 2 {
        vm.halt
      }
    }
    """
    with np.errstate(all="raise"):
        (out,) = compile_machine(parse(text)).run([np.array([0.0, 4.0])], NumpyBackend())
    np.testing.assert_array_equal(out, [0.0, 0.25])


def test_kernels_built_once_per_backend(fib):
    backend = NumpyBackend()
    assert fib.kernels(backend) is fib.kernels(backend)
    assert fib.kernels(NumpyBackend()) is not fib.kernels(backend)


def test_custom_scheduler_changes_steps_not_results(fib):
    def largest_live_block(backend, pc):
        live = pc[pc < fib.num_blocks]
        return live.max() if live.size else fib.num_blocks

    backend = NumpyBackend(scheduler=largest_live_block)
    (out,) = fib.run([np.array([3, 7, 4, 5])], backend)
    np.testing.assert_array_equal(out, [3, 21, 5, 8])


def _backend(name: str):
    if name == "jax":
        pytest.importorskip("jax")
        from abir.backends.jax import JaxBackend

        return JaxBackend()
    pytest.importorskip("tensorflow")
    from abir.backends.tf import TensorFlowBackend

    return TensorFlowBackend()


@pytest.mark.parametrize("backend_name", ["jax", "tf"])
def test_same_kernels_on_traced_backends(backend_name):
    """The kernels call only protocol methods, so JAX and TF run them and agree with NumPy."""
    backend = _backend(backend_name)
    cases = [
        (FIB, [np.array([5, 6, 8, 9])]),
        (COLLATZ, [np.array([1, 2, 3, 6, 7, 27, 97])]),
        (VECTOR, [np.array([[1.0, 1.0, 1.0]]), 2.0, np.array([0, 1, 2], dtype=np.int32)]),
    ]
    for text, args in cases:
        machine = compile_machine(parse(text))
        expected = machine.run(args, NumpyBackend())
        got = machine.run(args, backend)
        for want, have in zip(expected, got, strict=True):
            np.testing.assert_array_equal(backend.to_numpy(have), want)
    with pytest.raises(StackOverflowError, match="'fib'.*max_stack_depth=4"):
        compile_machine(parse(FIB)).run([np.array([2, 9])], backend, max_stack_depth=4)
