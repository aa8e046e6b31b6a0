"""A branch's or side exit's condition computed through builtins reads the registers its block wrote.

`abir.vm.kernels._branch_condition_from_registers` moves the builtins the condition is computed
through (`_condition_cone`: the condition's own, and each builtin whose every use is in the
cone) to just before the branch, and reads their operands that the block computes and writes
last from those registers: `abs(n) > 1` after `n = n // 2` reads `n` from its register instead of
computing the floor division again. A side exit's (`vm.exit_if`) condition reads the registers
written before the exit only. A builtin with a use outside the cone keeps its place and slot;
batched results equal plain Python per member on every backend.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_machine import parse

import abir
from abir.backend_registry import spec_named
from abir.vm import compile_machine

pytestmark = pytest.mark.about_backend("jax", "tf")  # a kernel change shared by every backend (conftest.py, rule 3)

THROUGH_ABS = """
vm.var @n : i64 register
vm.var @steps : i64 register
vm.program @halving(@n) -> (@n, @steps) {
  vm.block 0 {
    %n = vm.read @n : i64
    %two = vm.constant 2 : i64
    %h = vm.prim "floor_divide"(%n, %two) : (i64, i64) -> i64
    %s = vm.read @steps : i64
    %one = vm.constant 1 : i64
    %s1 = vm.prim "add"(%s, %one) : (i64, i64) -> i64
    %size = vm.prim "abs"(%h) : (i64) -> i64
    %more = vm.prim "greater"(%size, %one) : (i64, i64) -> i1
    vm.write @n, %h : i64
    vm.write @steps, %s1 : i64
    vm.branch %more, 0, 1
  }
  vm.block 1 {
    vm.halt
  }
}
"""


def kernel_lines(text: str) -> list[str]:
    return [line.strip() for line in compile_machine(parse(text)).plans[0].code.source.splitlines()]


def line_calling(lines: list[str], name: str) -> str:
    (line,) = [line for line in lines if f"prim({name!r}" in line]
    return line


def test_the_cone_moves_after_the_writes_and_reads_the_register() -> None:
    lines = kernel_lines(THROUGH_ABS)
    size, more = line_calling(lines, "abs"), line_calling(lines, "greater")
    assert size == "v6 = prim('abs', [regs['r:n']], dt_int64)"
    assert more == "v7 = prim('greater', [v6, v4], dt_bool)"
    write = lines.index("regs['r:n'] = where(mask, v2, regs['r:n'])")
    pc = next(i for i, line in enumerate(lines) if line.startswith("regs['pc']"))
    assert write < lines.index(size) < lines.index(more) < pc


def test_a_cone_builtin_used_elsewhere_keeps_its_place_and_slot() -> None:
    text = THROUGH_ABS.replace("vm.var @steps : i64 register", "vm.var @steps : i64 register\nvm.var @size : i64 register").replace(
        "    vm.branch %more", "    vm.write @size, %size : i64\n    vm.branch %more"
    )
    lines = kernel_lines(text)
    size, more = line_calling(lines, "abs"), line_calling(lines, "greater")
    assert size == "v6 = prim('abs', [v2], dt_int64)"
    assert lines.index(size) < lines.index("regs['r:n'] = where(mask, v2, regs['r:n'])")
    assert more == "v7 = prim('greater', [regs['r:size'], v4], dt_bool)"  # the register the block wrote it to


EXITING = """
vm.var @n : i64 register
vm.var @steps : i64 register
vm.program @halving(@n) -> (@n, @steps) {
  vm.block 0 {
    %n = vm.read @n : i64
    %two = vm.constant 2 : i64
    %h = vm.prim "floor_divide"(%n, %two) : (i64, i64) -> i64
    vm.write @n, %h : i64
    %s = vm.read @steps : i64
    %one = vm.constant 1 : i64
    %s1 = vm.prim "add"(%s, %one) : (i64, i64) -> i64
    %three = vm.constant 3 : i64
    %odd = vm.prim "remainder"(%h, %two) : (i64, i64) -> i64
    %stop = vm.prim "equal"(%odd, %one) : (i64, i64) -> i1
    vm.exit_if %stop, 1
    vm.write @steps, %s1 : i64
    %more = vm.prim "greater"(%s1, %three) : (i64, i64) -> i1
    vm.branch %more, 1, 0
  }
  vm.block 1 {
    vm.halt
  }
}
"""


def test_a_side_exit_reads_the_registers_written_before_it() -> None:
    lines = kernel_lines(EXITING)
    odd = line_calling(lines, "remainder")
    (stop,) = [line for line in lines if line.startswith("v8 = prim('equal'")]
    assert odd == "v7 = prim('remainder', [regs['r:n'], v1], dt_int64)"
    assert lines.index("regs['r:n'] = where(mask, v2, regs['r:n'])") < lines.index(odd) < lines.index(stop)
    assert lines.index(stop) < next(i for i, line in enumerate(lines) if "logical_and" in line)
    # `steps` is written after the exit: its branch reads the register, the exit does not see it
    assert line_calling(lines, "greater") == "v9 = prim('greater', [regs['r:steps'], v6], dt_bool)"


def exiting_reference(n: int) -> tuple[int, int]:
    steps = 0
    while True:
        n = n // 2
        if n % 2 == 1:
            return n, steps
        steps = steps + 1
        if steps > 3:
            return n, steps


def test_the_exiting_machine_runs_as_plain_python_on_every_backend() -> None:
    n = np.array([0, 1, 2, 3, 12, 17, 64, 1024, 99999, -6, -64], np.int64)
    want = [exiting_reference(m) for m in n.tolist()]
    for name in ("numpy", "jax", "tf"):
        backend = spec_named(name).new_backend()
        with backend.scope():
            n_out, steps = compile_machine(parse(EXITING)).run([n], backend)
        assert list(zip(np.asarray(n_out).tolist(), np.asarray(steps).tolist(), strict=True)) == want, name


def halving_through_abs(n: int) -> tuple[int, int]:
    steps = 0
    while True:
        n, steps = n // 2, steps + 1
        if not abs(n) > 1:
            return n, steps


def test_the_machine_runs_as_plain_python_on_every_backend() -> None:
    n = np.array([1, 2, 3, 17, 1024, 1025, 99999, -5, -64], np.int64)
    want = [halving_through_abs(m) for m in n.tolist()]
    for name in ("numpy", "jax", "tf"):
        backend = spec_named(name).new_backend()
        with backend.scope():
            n_out, steps = compile_machine(parse(THROUGH_ABS)).run([n], backend)
        assert list(zip(np.asarray(n_out).tolist(), np.asarray(steps).tolist(), strict=True)) == want, name


def collatz_abs(n):
    steps = 0
    while abs(n) > 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps = steps + 1
    return steps


def newton_cbrt(a):
    x = a + 1.0
    iterations = 0
    step = 1.0
    while abs(step) > 1e-12 * x:
        step = (x * x * x - a) / (3.0 * x * x)
        x = x - step
        iterations = iterations + 1
    return x, iterations


@pytest.mark.parametrize("backend_name", ["numpy", "jax", "tf"])
def test_python_programs_equal_plain_python_on_every_backend(backend_name: str) -> None:
    context = abir.Context()
    backend = spec_named(backend_name).new_backend()
    rng = np.random.default_rng(5)
    n = rng.integers(1, 3000, size=29).astype(np.int64)
    a = rng.uniform(0.1, 1e5, size=29)
    steps = context.batch_uncurried(collatz_abs)(n, backend=backend)
    assert np.asarray(steps).tolist() == [collatz_abs(m) for m in n.tolist()]
    roots, iterations = context.batch_uncurried(newton_cbrt)(a, backend=backend)
    want_roots, want_iterations = zip(*(newton_cbrt(x) for x in a.tolist()), strict=True)
    assert np.asarray(iterations).tolist() == list(want_iterations)
    np.testing.assert_allclose(np.asarray(roots), want_roots, rtol=1e-14)  # XLA may round its float ops otherwise
