"""The machine on the traced backends (JAX sweeping and switching; TF in graph mode and under XLA): a hand-built
two-block loop through `Backend.run`, and the machine's hand-written vm programs (fib, collatz,
vectors, overflow/underflow, opaque prims), each checked against NumPy / plain Python; compiled
code reused per cache key. Backend-specific details stay in test_jax_backend.py and
test_tf_backend.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest
from test_machine import COLLATZ, FIB, VECTOR, collatz_reference, fib_reference, parse

from abir.backends.base import Backend
from abir.backends.numpy_backend import NumpyBackend
from abir.errors import StackOverflowError, StackUnderflowError
from abir.opaque import register_opaque
from abir.vm import compile_machine

pytestmark = pytest.mark.about_backend("jax", "tf")  # every program family on every backend (conftest.py, rule 3)


def jax_backend(**kwargs) -> Backend:
    from abir.backends.jax import JaxBackend

    return JaxBackend(**kwargs)


def jax_switch_backend(**kwargs) -> Backend:
    from abir.backends.jax import JaxBackend

    return JaxBackend(execution="switch", **kwargs)


def tf_graph_backend(**kwargs) -> Backend:
    from abir.backends.tf import TensorFlowBackend

    return TensorFlowBackend(jit_compile=False, **kwargs)


def tf_xla_backend(**kwargs) -> Backend:
    from abir.backends.tf import TensorFlowBackend

    return TensorFlowBackend(jit_compile=True, **kwargs)


@pytest.fixture(
    params=[jax_backend, jax_switch_backend, tf_graph_backend, tf_xla_backend],
    ids=["jax", "jax-switch", "tf", "tf-xla"],
)
def make_backend(request: pytest.FixtureRequest) -> Iterator[Callable[..., Backend]]:
    """A factory of fresh backend objects (trace counts are per object), under the backend's
    `scope()` as a call runs them (the hand-built states hold int64 counters)."""
    with request.param().scope():
        yield request.param


@pytest.fixture(scope="module")
def fib_machine():
    return compile_machine(parse(FIB))


# ----- run: a hand-built two-block machine --------------------------------------------------------
def counter_kernels(backend: Backend) -> list:
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


def counter_state(backend: Backend, limits: np.ndarray) -> dict:
    batch = len(limits)
    return {
        "pc": backend.zeros((batch,), np.int32),
        "r:count": backend.zeros((batch,), np.int64),
        "r:limit": backend.asarray(limits.astype(np.int64)),
    }


def test_run_counter_loop_members_stop_at_different_steps(make_backend) -> None:
    backend = make_backend()
    limits = np.array([3, 1, 6, 2])
    out = backend.run(counter_kernels(backend), counter_state(backend, limits), 2, cache_key=("counter", 4))
    assert backend.is_native(out["r:count"])
    np.testing.assert_array_equal(backend.to_numpy(out["r:count"]), limits)
    np.testing.assert_array_equal(backend.to_numpy(out["pc"]), [2, 2, 2, 2])
    assert backend.trace_count == 1


def test_run_reuses_compiled_code_per_cache_key(make_backend) -> None:
    backend = make_backend()
    kernels = counter_kernels(backend)
    backend.run(kernels, counter_state(backend, np.array([1, 2])), 2, cache_key="k")
    out = backend.run(kernels, counter_state(backend, np.array([5, 4])), 2, cache_key="k")
    np.testing.assert_array_equal(backend.to_numpy(out["r:count"]), [5, 4])
    assert backend.trace_count == 1
    backend.run(kernels, counter_state(backend, np.array([1, 2, 3])), 2, cache_key="k3")
    assert backend.trace_count == 2


def test_run_shares_an_external_code_cache(make_backend) -> None:
    cache: dict = {}
    first = make_backend(code_cache=cache)
    first.run(counter_kernels(first), counter_state(first, np.array([2, 3])), 2, cache_key="shared")
    second = make_backend(code_cache=cache)
    out = second.run(counter_kernels(second), counter_state(second, np.array([4, 1])), 2, cache_key="shared")
    np.testing.assert_array_equal(second.to_numpy(out["r:count"]), [4, 1])
    assert len(cache) == 1 and second.trace_count == 0


def test_run_with_all_members_halted_runs_no_step(make_backend) -> None:
    backend = make_backend()
    state = counter_state(backend, np.array([3]))
    state["pc"] = backend.full((1,), 2, np.int32)
    out = backend.run(counter_kernels(backend), state, 2, cache_key=None)
    np.testing.assert_array_equal(backend.to_numpy(out["r:count"]), [0])


# ----- the machine's hand-written vm programs ------------------------------------------------------
def test_machine_fib(fib_machine, make_backend) -> None:
    backend = make_backend()
    (out,) = fib_machine.run([np.array([5, 6, 8, 9])], backend)
    assert backend.is_native(out) and backend.to_numpy(out).dtype == np.int64
    np.testing.assert_array_equal(backend.to_numpy(out), [8, 13, 34, 55])


def test_machine_fib_matches_python_per_member(fib_machine, make_backend) -> None:
    backend = make_backend()
    inputs = [12, 3, 0, 7, 7, 1, 10]
    (out,) = fib_machine.run([np.array(inputs)], backend)
    np.testing.assert_array_equal(backend.to_numpy(out), [fib_reference(n) for n in inputs])


def test_machine_overflow_raises_the_numpy_error(fib_machine, make_backend) -> None:
    with pytest.raises(StackOverflowError) as numpy_error:
        fib_machine.run([np.array([2, 9])], NumpyBackend(), max_stack_depth=4)
    with pytest.raises(StackOverflowError) as traced_error:
        fib_machine.run([np.array([2, 9])], make_backend(), max_stack_depth=4)
    assert str(traced_error.value) == str(numpy_error.value)


def test_machine_overflowing_member_does_not_disturb_others(fib_machine, make_backend) -> None:
    backend = make_backend()
    state = fib_machine.initial_state(backend, [backend.asarray(np.array([1, 9, 4]))], 3, 4)
    state = backend.run(
        fib_machine.kernels(backend), state, fib_machine.num_blocks, None, stack_keys=fib_machine.stack_keys
    )
    overflow = backend.to_numpy(state["overflow"])
    assert overflow[0] == 0 and overflow[1] > 0 and overflow[2] == 0
    np.testing.assert_array_equal(backend.to_numpy(state["r:ret"])[[0, 2]], [1, 5])


def test_machine_underflow_raises(make_backend) -> None:
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
        compile_machine(parse(text)).run([np.array([1, 2])], make_backend())


def test_machine_collatz(make_backend) -> None:
    backend = make_backend()
    inputs = np.array([1, 2, 3, 6, 7, 27, 97])
    (out,) = compile_machine(parse(COLLATZ)).run([inputs], backend)
    assert backend.to_numpy(out).dtype == np.int32
    np.testing.assert_array_equal(backend.to_numpy(out), [collatz_reference(int(n)) for n in inputs])


def test_machine_vector_registers_and_size_one_inputs(make_backend) -> None:
    backend = make_backend()
    machine = compile_machine(parse(VECTOR))
    (out,) = machine.run([np.array([[1.0, 1.0, 1.0]]), 2.0, np.array([0, 1, 2], dtype=np.int32)], backend)
    np.testing.assert_allclose(backend.to_numpy(out), [[1, 1, 1], [3, 4, 5], [7, 10, 13]])


def test_machine_opaque_prim_gets_the_backends_arrays(make_backend) -> None:
    backend = make_backend()
    seen: list = []

    def divmod_(a, b):
        seen.append(a)
        return a // b, a % b

    register_opaque("test_machine_on_backends_divmod", divmod_)
    text = """
    functional.opaque @test_machine_on_backends_divmod "divmod_"
    vm.var @a : i64 register
    vm.var @b : i64 register
    vm.program @main(@a, @b) -> (@a, @b) {
      vm.block 0 {
        %a = vm.read @a : i64
        %b = vm.read @b : i64
        %q, %r = vm.prim @test_machine_on_backends_divmod(%a, %b) : (i64, i64) -> (i64, i64)
        vm.write @a, %q : i64
        vm.write @b, %r : i64
        vm.halt
      }
    }
    """
    q, r = compile_machine(parse(text)).run([np.array([7, 9]), np.array([2, 4])], backend)
    np.testing.assert_array_equal(backend.to_numpy(q), [3, 2])
    np.testing.assert_array_equal(backend.to_numpy(r), [1, 1])
    assert seen and all(backend.is_native(a) for a in seen)


def test_machine_run_compiles_once_per_cache_key(fib_machine, make_backend) -> None:
    backend = make_backend()
    fib_machine.run([np.array([5, 6])], backend, cache_key=("fib", 2))
    (out,) = fib_machine.run([np.array([9, 3])], backend, cache_key=("fib", 2))
    np.testing.assert_array_equal(backend.to_numpy(out), [55, 3])
    assert backend.trace_count == 1
    fib_machine.run([np.array([4, 4])], backend)  # no cache key: reuses per kernels list
    fib_machine.run([np.array([7, 1])], backend)
    assert backend.trace_count == 2
