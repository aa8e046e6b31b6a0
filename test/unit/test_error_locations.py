"""The machine's errors name the statement a member is at, to the line, on every backend.

A block's location is the call's line when the block ends in a call (a call-only block runs
nothing else; a call site that absorbed its callee's entry test is still making that call), and
a stack overflow names the call whose push failed (`abir.call_loc` on the pushes), however the
passes fused the code around it. A runaway `while` loop stops at its header.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import abir
from abir.dialects import vm
from abir.passes.analysis import the_vm_program

ctx = abir.Context()


@ctx.batch()
def descend(n):
    if n == 0:  # never true for a negative n
        return 0
    k = n - 1
    return 1 + descend(k)  # the call


@ctx.batch()
def tree(n):
    if n <= 0:
        return 1
    left = tree(n - 1)  # the first call
    right = tree(n - 2)
    return left + right


@ctx.batch()
def wander(x):
    total = 0.0
    while x > 0:  # the header
        total = total + x
        x = x * 0.5 + 1.0
        if total > 1e300:
            total = 0.0
    return total


def line(function, marker: str) -> str:
    """`file:line` of the line of `function` holding `marker`."""
    lines, first = inspect.getsourcelines(function.__wrapped__)
    return f"{__file__}:{first + next(i for i, text in enumerate(lines) if marker in text)}"


BACKENDS = {
    "numpy": abir.NumpyBackend,
    "numpy-sweep": lambda: abir.NumpyBackend(execution="sweep"),
    "jax": abir.JaxBackend,
    "tf": abir.TensorFlowBackend,
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request):
    return BACKENDS[request.param]()


def test_a_member_deep_in_a_recursion_stands_at_the_call(backend):
    call = line(descend, "# the call")
    if backend.superblocks:
        # JAX and TF summarize the descent (`summarize-descents`): one block run makes all its
        # levels, so a descent that never reaches its base case overflows at once, at the call
        with pytest.raises(abir.StackOverflowError) as overflow:
            descend(np.array([3, -1, -5]), backend=backend, max_steps=60, max_stack_depth=200)
        assert overflow.value.members == [1, 2]
        assert f"stack overflow in function 'descend' at {call} (vm block" in str(overflow.value)
        return
    with pytest.raises(abir.StepLimitError) as info:
        descend(np.array([3, -1, -5]), backend=backend, max_steps=60, max_stack_depth=200)
    assert info.value.members == [1, 2]
    assert info.value.locations == [call, call]
    assert f"batch members 1, 2 in function 'descend' at {call} (vm block" in str(info.value)


def test_a_stack_overflow_names_the_call_not_the_end_of_its_block(backend):
    with pytest.raises(abir.StackOverflowError) as info:
        descend(np.array([3, -1]), backend=backend)
    assert f"stack overflow in function 'descend' at {line(descend, '# the call')} (vm block" in str(info.value)


def test_a_stack_overflow_names_the_call_that_recursed(backend):
    # tree(n - 1) goes deepest first; the block of that call also holds the statement before it
    with pytest.raises(abir.StackOverflowError) as info:
        tree(np.array([3, 40]), backend=backend)
    assert f"stack overflow in function 'tree' at {line(tree, '# the first call')} (vm block" in str(info.value)
    assert "batch member 1 recursed deeper than max_stack_depth=15" in str(info.value)


def test_a_runaway_while_loop_stops_at_its_header(backend):
    with pytest.raises(abir.StepLimitError) as info:
        wander(np.array([3.0, 0.0, 5.0]), backend=backend, max_steps=77)
    header = line(wander, "# the header")
    assert info.value.members == [0, 2]
    assert info.value.locations == [header, header]


def test_the_pushes_of_a_call_carry_its_line():
    program = the_vm_program(ctx.lowered_for_args("descend", [np.array([3])]), "test")
    call = line(descend, "# the call")
    calls = [op for block in program.blocks for op in block.body.block.ops if isinstance(op, vm.CallOp)]
    recursive = [op for op in calls if "abir.call_loc" in op.attributes]
    assert recursive and all(op.attributes["abir.call_loc"].data == call for op in recursive)
    call_only = [b for b in program.blocks if [op.name for op in b.body.block.ops] == ["vm.call"]]
    assert all(b.attributes["abir.loc"].data == call for b in call_only if "function" in b.attributes)
