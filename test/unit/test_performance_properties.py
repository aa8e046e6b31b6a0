"""Performance properties of the machine that are visible without timing anything.

- On JAX the `[D, B]` stacks never pass through the `lax.switch` over blocks: the compiled
  program copies each stack at most once (at entry), never inside the loop.
- Stack pushes are write requests applied after the block (the split kernel form); the plain
  `state -> state` form and the split form give identical states on every backend.
- A pop of a value pushed in the same block reads the pending request and cancels it.
- Overflow is still detected and names the function, on every backend.
- The per-member registers never pass through the conditional either: each block returns only
  the registers it writes (`register_writes`, padded into write slots per dtype and shape), so
  a register no running block writes is never copied per step.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import jax

from test_machine import COLLATZ, FIB, VECTOR, fib_reference, parse

from abir.backends.base import MAX_LAUNCH_ITERATIONS
from abir.backends.jax import JaxBackend, writes
from abir.backends.jax import loop as jax_loop
from abir.backends.jax.loop import machine_loop
from abir.backends.numpy_backend import NumpyBackend
from abir.backends.tf import TensorFlowBackend
from abir.backends.traced import RegisterLayout
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


@pytest.mark.parametrize("one_hot_max", [0, writes.ONE_HOT_STACK_MAX])
@pytest.mark.parametrize("execution", ["sweep", "switch"])
def test_jax_loop_copies_no_stack_per_step(
    fib, execution: str, one_hot_max: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pushes update the loop-carried stacks in place (scatters by index, or one-hot selects
    for stacks of at most `ONE_HOT_STACK_MAX` elements, as these [7, 5] ones)."""
    monkeypatch.setattr(writes, "ONE_HOT_STACK_MAX", one_hot_max)
    backend = JaxBackend(code_cache={}, execution=execution)
    depth, batch = 7, 5
    with backend.scope():  # int64 registers and stacks, as in a run
        state = fib.initial_state(backend, [backend.asarray(np.arange(batch))], batch, depth)
        state = {key: jax.numpy.asarray(value) for key, value in state.items()}
        text = (
            jax.jit(machine_loop(backend, tuple(fib.kernels(backend)), fib.num_blocks, fib.stack_keys))
            .lower(state, np.int32(MAX_LAUNCH_ITERATIONS))
            .compile()
            .as_text()
        )
    stacks = [key for key in state if key.startswith("s:") or key == "pc_stack"]
    stack_copies = re.findall(rf"= [su](?:32|64)\[{depth},{batch}\]\{{1,0\}} copy\(", text)
    assert len(stacks) == 3
    assert len(stack_copies) <= len(stacks), "a [D, B] stack is copied inside the machine loop"
    assert ("scatter(" in text) == (one_hot_max < depth * batch)


@pytest.mark.parametrize("name", list(BACKENDS))
@pytest.mark.make_test_keeps({"name": "numpy"}, {"name": "jax"}, {"name": "tf-xla"})  # "tf" compiles fib with XLA too
def test_split_and_plain_kernels_agree(fib, name: str) -> None:
    """Hiding `split` makes the backend run the plain `state -> state` kernels (each applying
    its own write requests); the final states are identical."""
    backend = BACKENDS[name]()
    with backend.scope():  # the states a run makes (JAX: int64)
        inputs = [backend.asarray(np.array([0, 3, 7, 5]))]
        split = backend.run(
            fib.kernels(backend), fib.initial_state(backend, inputs, 4, 9), fib.num_blocks, None, stack_keys=fib.stack_keys
        )
        plain_kernels = [lambda state, k=k: k(state) for k in fib.kernels(backend)]
        plain = backend.run(plain_kernels, fib.initial_state(backend, inputs, 4, 9), fib.num_blocks, None)
    assert set(split) == set(plain)
    for key in split:
        np.testing.assert_array_equal(backend.to_numpy(split[key]), backend.to_numpy(plain[key]), err_msg=key)
    np.testing.assert_array_equal(backend.to_numpy(split["r:ret"]), [fib_reference(n) for n in (0, 3, 7, 5)])


class PlainKernel:
    """A kernel in the plain `state -> state` form only, keeping its block plan (so a sweep
    still repeats a block that jumps to itself, without the conditional)."""

    def __init__(self, kernel) -> None:
        self.kernel, self.plan = kernel, kernel.plan

    def __call__(self, state):
        return self.kernel(state)


def test_plain_kernels_of_a_self_repeating_block_agree_on_jax(fib) -> None:
    backend = JaxBackend()
    kernels = fib.kernels(backend)
    assert any(k.plan.loops_to_itself for k in kernels)
    with backend.scope():  # the states a run makes (int64)
        inputs = [backend.asarray(np.array([0, 3, 7, 5]))]
        split = backend.run(
            kernels, fib.initial_state(backend, inputs, 4, 9), fib.num_blocks, None, stack_keys=fib.stack_keys
        )
        plain = backend.run(
            [PlainKernel(k) for k in kernels], fib.initial_state(backend, inputs, 4, 9), fib.num_blocks, None
        )
    for key in split:
        np.testing.assert_array_equal(backend.to_numpy(split[key]), backend.to_numpy(plain[key]), err_msg=key)


def test_static_write_counts(fib) -> None:
    machine = compile_machine(parse(PENDING))
    assert machine.plans[0].stack_writes == (("s:x", 1),)
    assert dict(fib.plans[2].stack_writes) == {"s:n": 1, "pc_stack": 1}
    assert fib.plans[4].stack_writes == ()  # vm.return pops; nothing to write


def test_static_pop_counts(fib) -> None:
    """What reverse mode's undo windows are sized by: a pop counts even when it takes back a
    push of its own block, a peek does not, a return pops the call stack."""
    machine = compile_machine(parse(PENDING))
    assert machine.plans[0].stack_pops == (("s:x", "sp:x", 1),)
    assert fib.plans[4].stack_pops == (("pc_stack", "pc_sp", 1),)
    assert fib.plans[0].stack_pops == ()


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


# Six vector registers; the hot loop (blocks 0-1) writes only @acc and @k, block 2 writes @out.
WIDE = """
vm.var @a : tensor<7xf64> register
vm.var @b : tensor<7xf64> register
vm.var @c : tensor<7xf64> register
vm.var @d : tensor<7xf64> register
vm.var @acc : tensor<7xf64> register
vm.var @out : tensor<7xf64> register
vm.var @k : i32 register
vm.program @wide(@a, @b, @c, @d, @k) -> (@out) {
  vm.block 0 {
    %k = vm.read @k : i32
    %zero = vm.constant 0 : i32
    %more = vm.prim "greater"(%k, %zero) : (i32, i32) -> i1
    vm.branch %more, 1, 2
  }
  vm.block 1 {
    %acc = vm.read @acc : tensor<7xf64>
    %a = vm.read @a : tensor<7xf64>
    %s = vm.prim "add"(%acc, %a) : (tensor<7xf64>, tensor<7xf64>) -> tensor<7xf64>
    vm.write @acc, %s : tensor<7xf64>
    %k = vm.read @k : i32
    %one = vm.constant 1 : i32
    %k1 = vm.prim "subtract"(%k, %one) : (i32, i32) -> i32
    vm.write @k, %k1 : i32
    vm.jump 0
  }
  vm.block 2 {
    %acc = vm.read @acc : tensor<7xf64>
    %b = vm.read @b : tensor<7xf64>
    %c = vm.read @c : tensor<7xf64>
    %d = vm.read @d : tensor<7xf64>
    %x = vm.prim "add"(%acc, %b) : (tensor<7xf64>, tensor<7xf64>) -> tensor<7xf64>
    %y = vm.prim "add"(%c, %d) : (tensor<7xf64>, tensor<7xf64>) -> tensor<7xf64>
    %z = vm.prim "multiply"(%x, %y) : (tensor<7xf64>, tensor<7xf64>) -> tensor<7xf64>
    vm.write @out, %z : tensor<7xf64>
    vm.halt
  }
}
"""


def _wide_inputs(batch: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    vectors = [rng.normal(size=(batch, 7)) for _ in range(4)]
    return [*vectors, np.arange(batch, dtype=np.int32) % 4]


def _compiled_loop_text(machine, backend: JaxBackend, batch: int) -> str:
    with backend.scope():  # float64 registers, as in a run
        state = machine.initial_state(backend, [backend.asarray(x) for x in _wide_inputs(batch)], batch, 4)
        state = {key: jax.numpy.asarray(value) for key, value in state.items()}
        loop = machine_loop(backend, tuple(machine.kernels(backend)), machine.num_blocks, machine.stack_keys)
        return jax.jit(loop).lower(state, np.int32(MAX_LAUNCH_ITERATIONS)).compile().as_text()


def test_jax_sweep_conditionals_return_only_written_registers(monkeypatch: pytest.MonkeyPatch) -> None:
    """One conditional per block; each returns the registers its block writes (block 1: acc and
    k and pc; block 2: out and pc), never all six vectors. (The program uses no stack, so it
    would run structured: test_structured_runs.py; here it sweeps.)"""
    monkeypatch.setattr(jax_loop, "structured", lambda kernels: False)
    machine = compile_machine(parse(WIDE))
    batch = 13
    text = _compiled_loop_text(machine, JaxBackend(code_cache={}), batch)
    conditionals = [line.split(" conditional(")[0] for line in text.splitlines() if " conditional(" in line]
    assert len(conditionals) == machine.num_blocks
    vector = f"f64[{batch},7]"
    assert sorted(c.count(vector) for c in conditionals) == [0, 1, 1], conditionals


def test_jax_switch_conditional_returns_only_written_registers() -> None:
    machine = compile_machine(parse(WIDE))
    batch = 13
    text = _compiled_loop_text(machine, JaxBackend(code_cache={}, execution="switch"), batch)
    vector = f"f64[{batch},7]"
    conditionals = [line for line in text.splitlines() if " conditional(" in line]
    assert len(conditionals) == 1
    result_type = conditionals[0].split(" conditional(")[0]
    # one write slot of the vector group (each block writes at most one vector register), not six
    assert result_type.count(vector) == 1, result_type
    # the six vector registers live in one group [6 + 1 scratch, B, 7], updated in place
    group = f"f64[7,{batch},7]"
    assert group in text
    assert not re.findall(rf"= {re.escape(group)}\{{[0-9,]+\}} copy\(", text), "a register group is copied"
    assert "dynamic-update-slice" in text


@pytest.mark.parametrize("name", list(BACKENDS))
def test_wide_program_on_every_backend(name: str) -> None:
    machine = compile_machine(parse(WIDE))
    backend = BACKENDS[name]()
    a, b, c, d, k = _wide_inputs(6)
    with backend.scope():  # the backend's own float64 arrays (JAX makes float32 ones outside it)
        (out,) = machine.run([backend.asarray(x) for x in (a, b, c, d, k)], backend)
    want = (a * k[:, None] + b) * (c + d)
    np.testing.assert_allclose(backend.to_numpy(out), want, rtol=1e-12)


@pytest.mark.parametrize("text", [FIB, COLLATZ, VECTOR, PENDING, WIDE])
def test_declared_register_writes_cover_what_kernels_change(text: str) -> None:
    """Every per-member key a kernel changes is in its `register_writes` (the backends pass
    only those out of the conditional, and assert it while tracing)."""
    machine = compile_machine(parse(text))
    backend = NumpyBackend()
    batch = 3
    types = [machine.variables[name].type for name in machine.inputs]
    leaves = [np.ones((batch, *t.shape), t.dtype) for t in types]
    state = machine.initial_state(backend, leaves, batch, 4)
    regs = {key: value for key, value in state.items() if not (key.startswith("s:") or key == "pc_stack")}
    stacks = {key: value for key, value in state.items() if key not in regs}
    for kernel in machine.kernels(backend):
        block = kernel.plan.index
        current = {**regs, "pc": np.full(batch, block, np.int32)}
        out, _ = kernel.split(dict(current), {key: value.copy() for key, value in stacks.items()})
        changed = {key for key in current if out[key] is not current[key]}
        assert changed <= set(kernel.register_writes), (block, changed - set(kernel.register_writes))
        assert "pc" in kernel.register_writes


def test_register_layout_slots() -> None:
    machine = compile_machine(parse(WIDE))
    kernels = machine.kernels(NumpyBackend())
    batch = 2
    state = machine.initial_state(NumpyBackend(), [np.asarray(x) for x in _wide_inputs(batch)], batch, 4)
    layout = RegisterLayout.build(kernels, {key: (v.dtype, v.shape) for key, v in state.items()})
    vector_group = layout.place["r:acc"][0]
    assert set(layout.groups[vector_group]) == {f"r:{v}" for v in ["a", "b", "c", "d", "acc", "out"]}
    assert layout.slots[vector_group] == 1
    scratch = len(layout.groups[vector_group])
    rows = layout.targets[vector_group][:, 0]
    assert rows[0] == scratch  # block 0 writes no vector register: its slot goes to scratch
    assert rows[1] == layout.place["r:acc"][1]
    assert rows[2] == layout.place["r:out"][1]


# @a and @b are always saved and restored together (one stack pointer); @c is also saved alone.
SHARED_POINTER = """
vm.var @a : i64 stack
vm.var @b : tensor<3xf64> stack
vm.var @c : i64 stack
vm.var @out : tensor<3xf64> register
vm.program @main(@a, @b, @c) -> (@out) {
  vm.block 0 {
    vm.push @a, @b, @c
    vm.push @c
    %a = vm.read @a : i64
    %one = vm.constant 1 : i64
    %a1 = vm.prim "add"(%a, %one) : (i64, i64) -> i64
    vm.write @a, %a1 : i64
    %b = vm.read @b : tensor<3xf64>
    %b2 = vm.prim "multiply"(%b, %b) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
    vm.write @b, %b2 : tensor<3xf64>
    vm.push @a, @b
    vm.jump 1
  }
  vm.block 1 {
    vm.pop @a, @b
    vm.pop @c
    %a = vm.read @a : i64
    %b = vm.read @b : tensor<3xf64>
    vm.pop @a, @b, @c
    %a0 = vm.read @a : i64
    %c = vm.read @c : i64
    %s = vm.prim "add"(%a, %a0) : (i64, i64) -> i64
    %t = vm.prim "add"(%s, %c) : (i64, i64) -> i64
    %f = vm.prim "astype"(%t) : (i64) -> f64
    %o = vm.prim "add"(%b, %f) : (tensor<3xf64>, f64) -> tensor<3xf64>
    vm.write @out, %o : tensor<3xf64>
    vm.halt
  }
}
"""


def test_variables_saved_together_share_a_stack_pointer() -> None:
    machine = compile_machine(parse(SHARED_POINTER))
    assert machine.pointers == {"a": "sp:a", "b": "sp:a", "c": "sp:c"}
    inputs = [np.zeros(2, np.int64), np.zeros((2, 3)), np.zeros(2, np.int64)]
    state = machine.initial_state(NumpyBackend(), inputs, 2, 4)
    assert {key for key in state if key.startswith("sp:")} == {"sp:a", "sp:c"}


@pytest.mark.parametrize("name", list(BACKENDS))
@pytest.mark.make_test_keeps({"name": "numpy"}, {"name": "jax"}, {"name": "tf-xla"})  # "tf" compiles fib with XLA too
def test_shared_stack_pointer_on_every_backend(name: str) -> None:
    machine = compile_machine(parse(SHARED_POINTER))
    backend = BACKENDS[name]()
    a, b, c = np.array([1, 5]), np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]]), np.array([10, 20])
    (out,) = machine.run([backend.asarray(x) for x in (a, b, c)], backend, max_stack_depth=3)
    # out = b*b + ((a + 1) + a + c)
    np.testing.assert_allclose(backend.to_numpy(out), b * b + (2 * a + 1 + c)[:, None])
    with pytest.raises(StackOverflowError, match="max_stack_depth=1"):
        machine.run([backend.asarray(x) for x in (a, b, c)], BACKENDS[name](), max_stack_depth=1)


def test_vector_times_closure_matrix_is_one_matmul() -> None:
    """`x @ P` with P a closure constant multiplies the batch of vectors by the one matrix
    ([B, n] @ [n, k]) instead of broadcasting P to [B, n, k] per call."""
    from abir.array_ops import make_product

    matrix = np.arange(12.0).reshape(1, 3, 4)
    vectors = np.arange(15.0).reshape(5, 3)
    matmul = make_product("matmul")
    text = jax.jit(matmul).lower(vectors, matrix).compile().as_text()
    assert "f64[5,3,4]" not in text
    want = np.stack([v @ matrix[0] for v in vectors])
    np.testing.assert_array_equal(np.asarray(jax.jit(matmul)(vectors, matrix)), want)
    np.testing.assert_array_equal(matmul(vectors, matrix), want)
    np.testing.assert_array_equal(matmul(vectors[:, None, :], matrix), want[:, None, :])
