"""Backend-specific tests of `TensorFlowBackend` (the shared protocol tests are in test_backend_conformance.py)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import tensorflow as tf  # noqa: E402

from abir.backends.tf_backend import TensorFlowBackend  # noqa: E402


@pytest.fixture(scope="module")
def backend() -> TensorFlowBackend:
    return TensorFlowBackend()


def test_run_on_dummies_runs_on_zero_tensors(backend: TensorFlowBackend) -> None:
    from abir.types import TensorType

    out = backend.run_on_dummies(
        lambda x, y: x * tf.cast(tf.reduce_sum(y, axis=1), x.dtype),
        [TensorType(np.float32, (4,)), TensorType(np.int64, (4, 3))],
    )
    assert backend.type_of(out) == (np.dtype(np.float32), (4,))


def test_prims_inside_a_graph_with_junk_zero_divisors(backend: TensorFlowBackend) -> None:
    """Inactive rows may hold zeros: integer division must not raise inside tf.function."""
    fn = tf.function(lambda x, y: backend.builtin_prim("floor_divide", [x, y], np.int64))
    got = fn(tf.constant([7, -7, 3], tf.int64), tf.constant([2, 0, 0], tf.int64))
    np.testing.assert_array_equal(got.numpy(), [3, 0, 0])


# ----- run: a hand-built two-block machine --------------------------------------------------------
def counter_kernels(backend: TensorFlowBackend) -> list:
    """Block 0: count += 1; go to block 1. Block 1: pc := count < limit ? 0 : 2 (halt)."""

    def step(state: dict) -> dict:
        mask = state["pc"] == 0
        count = backend.builtin_prim("add", [state["r:count"], 1], np.int64)
        return {
            **state,
            "r:count": backend.where(mask, count, state["r:count"]),
            "pc": backend.where(mask, 1, state["pc"]),
        }

    def test(state: dict) -> dict:
        mask = state["pc"] == 1
        more = backend.builtin_prim("less", [state["r:count"], state["r:limit"]], np.bool_)
        target = backend.builtin_prim("where", [more, 0, 2], np.int32)
        return {**state, "pc": backend.where(mask, target, state["pc"])}

    return [step, test]


def counter_state(backend: TensorFlowBackend, limits: np.ndarray) -> dict:
    batch = len(limits)
    return {
        "pc": backend.zeros((batch,), np.int32),
        "r:count": backend.zeros((batch,), np.int64),
        "r:limit": backend.asarray(limits.astype(np.int64)),
    }


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_run_counter_loop_members_stop_at_different_steps(jit_compile: bool) -> None:
    backend = TensorFlowBackend(jit_compile=jit_compile)
    limits = np.array([3, 1, 6, 2])
    out = backend.run(counter_kernels(backend), counter_state(backend, limits), 2, cache_key=("counter", 4))
    assert tf.is_tensor(out["r:count"])
    np.testing.assert_array_equal(backend.to_numpy(out["r:count"]), limits)
    np.testing.assert_array_equal(backend.to_numpy(out["pc"]), [2, 2, 2, 2])
    assert backend.trace_count == 1


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_run_reuses_compiled_code_per_cache_key(jit_compile: bool) -> None:
    backend = TensorFlowBackend(jit_compile=jit_compile)
    kernels = counter_kernels(backend)
    backend.run(kernels, counter_state(backend, np.array([1, 2])), 2, cache_key="k")
    out = backend.run(kernels, counter_state(backend, np.array([5, 4])), 2, cache_key="k")
    np.testing.assert_array_equal(backend.to_numpy(out["r:count"]), [5, 4])
    assert backend.trace_count == 1
    backend.run(kernels, counter_state(backend, np.array([1, 2, 3])), 2, cache_key="k3")
    assert backend.trace_count == 2


def test_run_shares_an_external_code_cache() -> None:
    cache: dict = {}
    first = TensorFlowBackend(code_cache=cache)
    first.run(counter_kernels(first), counter_state(first, np.array([2, 3])), 2, cache_key="shared")
    second = TensorFlowBackend(code_cache=cache)
    out = second.run(counter_kernels(second), counter_state(second, np.array([4, 1])), 2, cache_key="shared")
    np.testing.assert_array_equal(second.to_numpy(out["r:count"]), [4, 1])
    assert len(cache) == 1 and second.trace_count == 0


def test_run_with_all_members_halted_runs_no_step() -> None:
    backend = TensorFlowBackend()
    state = counter_state(backend, np.array([3]))
    state["pc"] = backend.full((1,), 2, np.int32)
    out = backend.run(counter_kernels(backend), state, 2, cache_key=None)
    np.testing.assert_array_equal(backend.to_numpy(out["r:count"]), [0])


# ----- the machine's hand-written vm programs on this backend -------------------------------------
from test_machine import COLLATZ, FIB, VECTOR, collatz_reference, fib_reference, parse  # noqa: E402

from abir.backends.numpy_backend import NumpyBackend  # noqa: E402
from abir.errors import StackOverflowError, StackUnderflowError  # noqa: E402
from abir.opaque import register_opaque  # noqa: E402
from abir.vm import compile_machine  # noqa: E402


@pytest.fixture(scope="module")
def fib_machine():
    return compile_machine(parse(FIB))


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_machine_fib(fib_machine, jit_compile: bool) -> None:
    (out,) = fib_machine.run([np.array([5, 6, 8, 9])], TensorFlowBackend(jit_compile=jit_compile))
    assert tf.is_tensor(out) and out.dtype == np.int64
    np.testing.assert_array_equal(backend_numpy(out), [8, 13, 34, 55])


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_machine_fib_matches_python_per_member(fib_machine, jit_compile: bool) -> None:
    inputs = [12, 3, 0, 7, 7, 1, 10]
    (out,) = fib_machine.run([np.array(inputs)], TensorFlowBackend(jit_compile=jit_compile))
    np.testing.assert_array_equal(backend_numpy(out), [fib_reference(n) for n in inputs])


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_machine_overflow_raises_the_numpy_error(fib_machine, jit_compile: bool) -> None:
    with pytest.raises(StackOverflowError) as numpy_error:
        fib_machine.run([np.array([2, 9])], NumpyBackend(), max_stack_depth=4)
    with pytest.raises(StackOverflowError) as tf_error:
        fib_machine.run([np.array([2, 9])], TensorFlowBackend(jit_compile=jit_compile), max_stack_depth=4)
    assert str(tf_error.value) == str(numpy_error.value)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_machine_overflowing_member_does_not_disturb_others(fib_machine, jit_compile: bool) -> None:
    backend = TensorFlowBackend(jit_compile=jit_compile)
    state = fib_machine.initial_state(backend, [backend.asarray(np.array([1, 9, 4]))], 3, 4)
    state = backend.run(fib_machine.kernels(backend), state, fib_machine.num_blocks, None)
    overflow = backend.to_numpy(state["overflow"])
    assert overflow[0] == 0 and overflow[1] > 0 and overflow[2] == 0
    np.testing.assert_array_equal(backend.to_numpy(state["r:ret"])[[0, 2]], [1, 5])


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_machine_underflow_raises(jit_compile: bool) -> None:
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
        compile_machine(parse(text)).run([np.array([1, 2])], TensorFlowBackend(jit_compile=jit_compile))


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_machine_collatz(jit_compile: bool) -> None:
    inputs = np.array([1, 2, 3, 6, 7, 27, 97])
    (out,) = compile_machine(parse(COLLATZ)).run([inputs], TensorFlowBackend(jit_compile=jit_compile))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(backend_numpy(out), [collatz_reference(int(n)) for n in inputs])


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_machine_vector_registers_and_size_one_inputs(jit_compile: bool) -> None:
    machine = compile_machine(parse(VECTOR))
    (out,) = machine.run(
        [np.array([[1.0, 1.0, 1.0]]), 2.0, np.array([0, 1, 2], dtype=np.int32)],
        TensorFlowBackend(jit_compile=jit_compile),
    )
    np.testing.assert_allclose(backend_numpy(out), [[1, 1, 1], [3, 4, 5], [7, 10, 13]])


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_machine_opaque_prim_gets_jax_arrays(jit_compile: bool) -> None:
    seen: list = []

    def divmod_(a, b):
        seen.append(a)
        return a // b, a % b

    register_opaque("test_tf_backend_divmod", divmod_)
    text = """
    functional.opaque @test_tf_backend_divmod "divmod_"
    vm.var @a : i64 register
    vm.var @b : i64 register
    vm.program @main(@a, @b) -> (@a, @b) {
      vm.block 0 {
        %a = vm.read @a : i64
        %b = vm.read @b : i64
        %q, %r = vm.prim @test_tf_backend_divmod(%a, %b) : (i64, i64) -> (i64, i64)
        vm.write @a, %q : i64
        vm.write @b, %r : i64
        vm.halt
      }
    }
    """
    q, r = compile_machine(parse(text)).run(
        [np.array([7, 9]), np.array([2, 4])], TensorFlowBackend(jit_compile=jit_compile)
    )
    np.testing.assert_array_equal(backend_numpy(q), [3, 2])
    np.testing.assert_array_equal(backend_numpy(r), [1, 1])
    assert seen and all(tf.is_tensor(a) for a in seen)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_machine_run_compiles_once_per_cache_key(fib_machine, jit_compile: bool) -> None:
    backend = TensorFlowBackend(jit_compile=jit_compile)
    fib_machine.run([np.array([5, 6])], backend, cache_key=("fib", 2))
    (out,) = fib_machine.run([np.array([9, 3])], backend, cache_key=("fib", 2))
    np.testing.assert_array_equal(backend_numpy(out), [55, 3])
    assert backend.trace_count == 1
    fib_machine.run([np.array([4, 4])], backend)  # no cache key: reuses per kernels list
    fib_machine.run([np.array([7, 1])], backend)
    assert backend.trace_count == 2


def backend_numpy(value) -> np.ndarray:
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def test_call_opaque_numpy_function_inside_a_graph(backend: TensorFlowBackend) -> None:
    """An opaque function written with NumPy runs through tf.numpy_function in graph mode."""

    def numpy_fn(x, y):
        return np.sum(x, axis=-1, keepdims=True) + y, np.int32(2) * y

    fn = tf.function(lambda x, y: backend.call_opaque(numpy_fn, [x, y]), autograph=False)
    total, doubled = fn(tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([[1.0], [2.0]]))
    np.testing.assert_array_equal(total.numpy(), [[4.0], [9.0]])
    assert doubled.dtype == tf.float64 and doubled.shape == (2, 1)  # NumPy: int32 * float32


def test_call_opaque_other_errors_propagate(backend: TensorFlowBackend) -> None:
    def broken(x):
        raise TypeError("bad operand")

    fn = tf.function(lambda x: backend.call_opaque(broken, [x]), autograph=False)
    with pytest.raises(TypeError, match="bad operand"):
        fn(tf.constant([1.0]))
