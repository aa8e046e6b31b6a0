"""Performance properties of the machine that are visible without timing anything.

- On JAX the `[D, B]` stacks never pass through the `lax.switch` over blocks: the compiled
  program copies each stack at most once (at entry), never inside the loop.
- Stack pushes are write requests applied after the block (the split kernel form); the plain
  `state -> state` form and the split form give identical states on every backend.
- A pop of a value pushed in the same block reads the pending request and cancels it.
- Overflow is still detected and names the function, on every backend.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import jax

from test_machine import FIB, fib_reference, parse

from abir.backends.jax_backend import JaxBackend
from abir.backends.numpy_backend import NumpyBackend
from abir.backends.tf_backend import TensorFlowBackend
from abir.errors import StackOverflowError
from abir.vm import compile_machine

BACKENDS = {
    "numpy": NumpyBackend,
    "jax": JaxBackend,
    "tf": TensorFlowBackend,
    "tf-xla": lambda: TensorFlowBackend(jit_compile=True),
}

# One block pushes @x twice and pops once (one request left), peeks, then calls nothing.
PENDING = """
vm.var @x : i64 stack
vm.var @y : i64 register
vm.program @main(@x) -> (@y) {
  vm.block 0 attributes {function = "pending"} {
    %x = vm.read @x : i64
    %c10 = vm.constant 10 : i64
    %c100 = vm.constant 100 : i64
    %a = vm.prim "add"(%x, %c10) : (i64, i64) -> i64
    %b = vm.prim "add"(%x, %c100) : (i64, i64) -> i64
    vm.push @x
    vm.write @x, %a : i64
    vm.push @x
    vm.write @x, %b : i64
    vm.pop @x
    %top = vm.read @x : i64
    vm.peek @x
    %under = vm.read @x : i64
    %s = vm.prim "add"(%top, %under) : (i64, i64) -> i64
    vm.write @y, %s : i64
    vm.halt
  }
}
"""


@pytest.fixture(scope="module")
def fib():
    return compile_machine(parse(FIB))


def test_jax_loop_copies_no_stack_per_step(fib) -> None:
    backend = JaxBackend(code_cache={})
    depth, batch = 7, 5
    state = fib.initial_state(backend, [backend.asarray(np.arange(batch))], batch, depth)
    state = {key: jax.numpy.asarray(value) for key, value in state.items()}
    text = (
        jax.jit(backend._loop(tuple(fib.kernels(backend)), fib.num_blocks)).lower(state).compile().as_text()
    )
    stacks = [key for key in state if key.startswith("s:") or key == "pc_stack"]
    stack_copies = re.findall(rf"= [su](?:32|64)\[{depth},{batch}\]\{{1,0\}} copy\(", text)
    assert len(stacks) == 3
    assert len(stack_copies) <= len(stacks), "a [D, B] stack is copied inside the machine loop"
    assert "scatter(" in text  # pushes are scatters by index


@pytest.mark.parametrize("name", list(BACKENDS))
def test_split_and_plain_kernels_agree(fib, name: str) -> None:
    """Hiding `split` makes the backend run the plain `state -> state` kernels (each applying
    its own write requests); the final states are identical."""
    backend = BACKENDS[name]()
    inputs = [backend.asarray(np.array([0, 3, 7, 5]))]
    split = backend.run(fib.kernels(backend), fib.initial_state(backend, inputs, 4, 9), fib.num_blocks, None)
    plain_kernels = [lambda state, k=k: k(state) for k in fib.kernels(backend)]
    plain = backend.run(plain_kernels, fib.initial_state(backend, inputs, 4, 9), fib.num_blocks, None)
    assert set(split) == set(plain)
    for key in split:
        np.testing.assert_array_equal(backend.to_numpy(split[key]), backend.to_numpy(plain[key]), err_msg=key)
    np.testing.assert_array_equal(backend.to_numpy(split["r:ret"]), [fib_reference(n) for n in (0, 3, 7, 5)])


def test_static_write_counts(fib) -> None:
    machine = compile_machine(parse(PENDING))
    assert machine.plans[0].stack_writes == (("s:x", 1),)
    assert dict(fib.plans[2].stack_writes) == {"s:n": 1, "pc_stack": 1}
    assert fib.plans[4].stack_writes == ()  # vm.return pops; nothing to write


@pytest.mark.parametrize("name", list(BACKENDS))
def test_pop_reads_the_pending_push_of_the_same_block(name: str) -> None:
    machine = compile_machine(parse(PENDING))
    backend = BACKENDS[name]()
    (y,) = machine.run([backend.asarray(np.array([1, 2, 3], np.int64))], backend, max_stack_depth=2)
    # pop restores x+10 (pushed second), peek sees x (pushed first): y = 2x + 10
    np.testing.assert_array_equal(backend.to_numpy(y), [12, 14, 16])


@pytest.mark.parametrize("name", list(BACKENDS))
def test_pending_push_overflow_names_the_function(name: str) -> None:
    machine = compile_machine(parse(PENDING))
    with pytest.raises(StackOverflowError, match=r"'pending'.*max_stack_depth=1"):
        machine.run([np.array([1, 2], np.int64)], BACKENDS[name](), max_stack_depth=1)


@pytest.mark.parametrize("name", list(BACKENDS))
def test_fib_overflow_names_function_on_every_backend(fib, name: str) -> None:
    with pytest.raises(StackOverflowError, match=r"'fib'.*max_stack_depth=4") as error:
        fib.run([np.array([2, 9])], BACKENDS[name](), max_stack_depth=4)
    with pytest.raises(StackOverflowError) as reference:
        fib.run([np.array([2, 9])], NumpyBackend(), max_stack_depth=4)
    assert str(error.value) == str(reference.value)
