"""`form-superblocks` and the machine's side exits (`vm.exit_if`).

The pass merges a branch arm entered from one block only into that block behind a side exit;
the machine narrows the block's mask at the exit. Results must equal the per-member Python run
on every backend, with and without the pass (the traced backends use it by default; the NumPy
backend does not, so it is switched on per instance here).
"""

from __future__ import annotations

import numpy as np
import pytest

import abir
from abir.dialects import vm
from abir.passes.form_superblocks import loop_depths
from abir.vm import compile_machine

ctx = abir.Context()


@ctx.batch(type_inference=lambda types: types[0])
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


@ctx.batch(type_inference=lambda types: types[0])
def guarded_tree(n, limit):
    """A recursion with an early return between its two calls (like NUTS's `build_tree`)."""
    if n < 2:
        return n
    left = guarded_tree(n - 1, limit)
    if left > limit:
        return left
    return left + guarded_tree(n - 2, limit) + 1


@ctx.batch(type_inference=lambda types: types[0])
def doubling_loop(n):
    """A loop with two exits (a `break`) around a call, inside an outer loop."""
    total = 0
    for i in range(n):
        depth = 0
        while depth < 5:
            total = total + fib(depth + i % 3)
            if total % 7 == 3:
                break
            depth += 1
    return total


@ctx.batch(type_inference=lambda types: types[0])
def shared_exit(x):
    """Both nested tests lead to the same return: the arm is entered by a side exit and a
    branch of one block (it must not be absorbed)."""
    if x > 0:  # noqa: SIM102 (the nesting is the point: two tests, one shared exit)
        if x > 2:
            return x * 2
    return x - 1


def _python(fn, *args):
    """The plain Python function run member by member (calls between batched functions go to
    the plain functions)."""
    return np.asarray(fn(*args, dry_run=True))


def _superblock_backends():
    numpy_with = abir.NumpyBackend()
    numpy_with.superblocks = True
    sweep_with = abir.NumpyBackend(execution="sweep")
    sweep_with.superblocks = True
    return {
        "numpy+superblocks": numpy_with,
        "numpy-sweep+superblocks": sweep_with,
        "numpy": abir.NumpyBackend(),
        "jax": abir.JaxBackend(),
        "tf": abir.TensorFlowBackend(),
    }


CASES = {
    "fib": (fib, [np.arange(12)]),
    "guarded_tree": (guarded_tree, [np.array([0, 1, 5, 9, 3, 12, 7]), np.array([3, 40, 2, 100, 1, 60, 8])]),
    "doubling_loop": (doubling_loop, [np.array([0, 1, 4, 9, 3])]),
    "shared_exit": (shared_exit, [np.array([-1, 0, 1, 2, 3, 7])]),
}


@pytest.mark.parametrize("backend_name", list(_superblock_backends()))
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.make_test_keeps(
    *({"backend_name": name} for name in _superblock_backends() if name != "tf"), {"name": "fib"}, {"name": "shared_exit"}
)
def test_batched_equals_python(name: str, backend_name: str) -> None:
    fn, args = CASES[name]
    got = fn(*args, backend=_superblock_backends()[backend_name], max_stack_depth=20)
    np.testing.assert_array_equal(np.asarray(got), _python(fn, *args))


def test_traced_backends_get_superblocks_and_numpy_does_not() -> None:
    def exits(backend) -> int:
        module = ctx.lowered_for_args("guarded_tree", (np.array([3]), np.array([1])), backend=backend)
        return sum(isinstance(op, vm.ExitIfOp) for op in module.walk())

    assert exits(abir.JaxBackend()) > 0
    assert exits(abir.TensorFlowBackend()) > 0
    assert exits(abir.NumpyBackend()) == 0


def test_fewer_block_runs_on_a_recursion() -> None:
    """On the sweeping machine each member runs no more blocks, and from n = 4 on fewer: the
    recursing arms run inside the blocks that branch to them."""
    runs = {}
    for superblocks in (False, True):
        backend = abir.NumpyBackend(execution="sweep", collect_stats=True)
        backend.superblocks = superblocks
        guarded_tree(np.arange(14), np.full(14, 10**6), backend=backend, max_stack_depth=20)
        runs[superblocks] = backend.last_stats.member_steps
    assert all(a <= b for a, b in zip(runs[True], runs[False], strict=True))
    assert all(a < b for a, b in zip(runs[True][4:], runs[False][4:], strict=True))  # n >= 4


SIDE_EXIT_PUSH_POP = """
builtin.module {
  vm.var @n : i64 stack
  vm.var @out : i64 register
  vm.program @main(@n) -> (@out) {
    vm.block 0 {
      %n = vm.read @n : i64
      %c = vm.constant 3 : i64
      %big = vm.prim "greater"(%n, %c) : (i64, i64) -> i1
      vm.push @n
      %zero = vm.constant 0 : i64
      vm.write @n, %zero : i64
      vm.exit_if %big, 1
      vm.pop @n
      %m = vm.read @n : i64
      vm.write @out, %m : i64
      vm.halt
    }
    vm.block 1 {
      vm.pop @n
      %m = vm.read @n : i64
      %ten = vm.constant 10 : i64
      %r = vm.prim "multiply"(%m, %ten) : (i64, i64) -> i64
      vm.write @out, %r : i64
      vm.halt
    }
  }
}
"""


@pytest.mark.parametrize("make", [abir.NumpyBackend, abir.JaxBackend, abir.TensorFlowBackend], ids=["numpy", "jax", "tf"])
def test_a_push_survives_for_members_that_left_before_its_pop(make) -> None:
    """Members that leave by the side exit keep the value pushed before it (block 1 pops it);
    the others take it back at once (the pop of the same block)."""
    from xdsl.parser import Parser

    from abir.dialects import make_context

    machine = compile_machine(Parser(make_context(), SIDE_EXIT_PUSH_POP).parse_module())
    n = np.array([1, 5, 2, 8, 3, 4])
    (out,) = machine.run([n], make(), max_stack_depth=4)
    np.testing.assert_array_equal(np.asarray(out), np.where(n > 3, n * 10, n))


def test_loop_depths_tell_an_inner_loop_from_the_outer_one() -> None:
    # 0 -> 1 (outer header) -> 2 (inner header) <-> 3, 3 -> 4 (leaves the inner loop) -> 1 or 5
    successors = {0: [1], 1: [2], 2: [3], 3: [2, 4], 4: [1, 5], 5: []}
    assert loop_depths(successors) == {0: 0, 1: 1, 2: 2, 3: 2, 4: 1, 5: 0}


def test_a_self_loop_is_a_loop() -> None:
    assert loop_depths({0: [1], 1: [1, 2], 2: []}) == {0: 0, 1: 1, 2: 0}
