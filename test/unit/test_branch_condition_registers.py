"""A block's branch computes its condition from the registers the block wrote its operands to.

`abir.vm.kernels._branch_condition_from_registers`: where a block writes a value it computes to
a register and its branch's condition reads that value, the kernel computes the condition from
the register, once, just before the branch (so that XLA does not compute the value a second time
inside the program counter's update). It must not apply where the register no longer holds the
value (a later write or restore of it), where the condition has another use, or to operands the
block does not compute; and batched results stay equal to plain Python per member on every
backend, including members that leave the block by a side exit after the write.

A condition computed through further builtins moves with them (`_condition_cone`: the
condition's own builtin and each builtin whose every use is in the cone) to just before the
branch, reading their operands from registers (`abs(n) > 1` after `n = n // 2` reads `n`); a
side exit's (`vm.exit_if`) condition reads the registers written before the exit only; a builtin
with a use outside the cone keeps its place and slot.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_machine import COLLATZ, collatz_reference, parse

import abir
from abir.backend_registry import spec_named
from abir.backends.numpy_backend import NumpyBackend
from abir.vm import compile_machine

pytestmark = pytest.mark.about_backend("jax", "tf")  # a kernel change shared by every backend (conftest.py, rule 3)


def kernel_lines(text: str, block: int) -> list[str]:
    return [line.strip() for line in compile_machine(parse(text)).plans[block].code.source.splitlines()]


def lines_calling(lines: list[str], name: str) -> list[str]:
    return [line for line in lines if f"prim({name!r}" in line]


def line_calling(lines: list[str], name: str) -> str:
    (line,) = lines_calling(lines, name)
    return line


def assert_runs_as_python(text: str, n: np.ndarray, reference) -> None:
    """The machine of `text` on each of NumPy, JAX and TF gives `reference(m)` for every `m` of `n`."""
    want = [reference(m) for m in n.tolist()]
    for name in ("numpy", "jax", "tf"):
        backend = spec_named(name).new_backend()
        with backend.scope():
            n_out, steps = compile_machine(parse(text)).run([n], backend)
        assert list(zip(np.asarray(n_out).tolist(), np.asarray(steps).tolist(), strict=True)) == want, name


HALVING = """
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
    %more = vm.prim "greater"(%h, %one) : (i64, i64) -> i1
    vm.write @n, %h : i64
    vm.write @steps, %s1 : i64
    vm.branch %more, 0, 1
  }
  vm.block 1 {
    vm.halt
  }
}
"""


def test_the_condition_reads_the_written_register_once_after_the_write() -> None:
    lines = kernel_lines(HALVING, 0)
    (condition,) = lines_calling(lines, "greater")
    assert condition.startswith("v6 = prim('greater', [regs['r:n'], v4]")
    write = lines.index("regs['r:n'] = where(mask, v2, regs['r:n'])")
    assert write < lines.index(condition) < lines.index(next(line for line in lines if line.startswith("regs['pc']")))


def halving_loop(n: int) -> tuple[int, int]:
    steps = 0
    while True:
        n, steps = n // 2, steps + 1
        if n <= 1:
            return n, steps


def test_halving_runs_as_plain_python() -> None:
    n = np.array([1, 2, 3, 17, 1024, 1025, 99999, -5], np.int64)
    n_out, steps = compile_machine(parse(HALVING)).run([n], NumpyBackend())
    assert list(zip(n_out.tolist(), steps.tolist(), strict=True)) == [halving_loop(m) for m in n.tolist()]


def test_a_later_write_of_the_register_keeps_the_value() -> None:
    text = HALVING.replace("    vm.branch %more", "    vm.write @n, %s1 : i64\n    vm.branch %more")
    (condition,) = lines_calling(kernel_lines(text, 0), "greater")
    assert condition == "v6 = prim('greater', [v2, v4], dt_bool)"


def test_a_condition_with_another_use_keeps_its_place() -> None:
    text = HALVING.replace(
        "vm.var @steps : i64 register", "vm.var @steps : i64 register\nvm.var @flag : i1 register"
    ).replace("    vm.branch %more", "    vm.write @flag, %more : i1\n    vm.branch %more")
    lines = kernel_lines(text, 0)
    (condition,) = lines_calling(lines, "greater")
    assert condition == "v6 = prim('greater', [v2, v4], dt_bool)"
    assert lines.index(condition) < lines.index("regs['r:n'] = where(mask, v2, regs['r:n'])")


def test_a_restored_register_does_not_hold_the_written_value() -> None:
    text = (
        HALVING.replace("vm.var @n : i64 register", "vm.var @n : i64 stack")
        .replace("    %n = vm.read @n : i64\n", "    %n = vm.read @n : i64\n    vm.push @n\n")
        .replace("    vm.write @n, %h : i64\n", "    vm.write @n, %h : i64\n    vm.pop @n\n")
    )
    (condition,) = lines_calling(kernel_lines(text, 0), "greater")
    assert condition == "v6 = prim('greater', [v2, v4], dt_bool)"


def test_operands_the_block_reads_or_holds_constant_stay_slots() -> None:
    text = HALVING.replace('"greater"(%h, %one)', '"greater"(%n, %one)').replace(
        "vm.write @steps, %s1 : i64", "vm.write @steps, %n : i64"
    )
    (condition,) = lines_calling(kernel_lines(text, 0), "greater")
    assert condition == "v6 = prim('greater', [v0, v4], dt_bool)"


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
    vm.write @steps, %s1 : i64
    %three = vm.constant 3 : i64
    %enough = vm.prim "greater_equal"(%s1, %three) : (i64, i64) -> i1
    vm.exit_if %enough, 1
    %more = vm.prim "greater"(%h, %one) : (i64, i64) -> i1
    vm.branch %more, 0, 1
  }
  vm.block 1 {
    vm.halt
  }
}
"""


def halving_reference(n: int) -> tuple[int, int]:
    steps = 0
    while True:
        n, steps = n // 2, steps + 1
        if steps >= 3 or n <= 1:
            return n, steps


def test_members_leaving_by_a_side_exit_after_the_write_keep_their_exit() -> None:
    (condition,) = lines_calling(kernel_lines(EXITING, 0), "greater")
    assert "regs['r:n']" in condition
    assert_runs_as_python(EXITING, np.array([1, 2, 3, 5, 8, 9, 64, 1000, -7], np.int64), halving_reference)


def test_collatz_machine_on_numpy() -> None:
    n = np.array([1, 2, 3, 6, 7, 27, 97], np.int64)
    (count,) = compile_machine(parse(COLLATZ)).run([n], NumpyBackend())
    assert count.tolist() == [collatz_reference(m) for m in n.tolist()]


THROUGH_ABS = HALVING.replace(
    '%more = vm.prim "greater"(%h, %one)',
    '%size = vm.prim "abs"(%h) : (i64) -> i64\n    %more = vm.prim "greater"(%size, %one)',
)
"""HALVING with its condition computed through a builtin: `abs(n // 2) > 1`."""


def test_the_cone_moves_after_the_writes_and_reads_the_register() -> None:
    lines = kernel_lines(THROUGH_ABS, 0)
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
    lines = kernel_lines(text, 0)
    size, more = line_calling(lines, "abs"), line_calling(lines, "greater")
    assert size == "v6 = prim('abs', [v2], dt_int64)"
    assert lines.index(size) < lines.index("regs['r:n'] = where(mask, v2, regs['r:n'])")
    assert more == "v7 = prim('greater', [regs['r:size'], v4], dt_bool)"  # the register the block wrote it to


EXIT_AFTER_A_WRITE = """
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
    lines = kernel_lines(EXIT_AFTER_A_WRITE, 0)
    odd = line_calling(lines, "remainder")
    (stop,) = [line for line in lines if line.startswith("v8 = prim('equal'")]
    assert odd == "v7 = prim('remainder', [regs['r:n'], v1], dt_int64)"
    assert lines.index("regs['r:n'] = where(mask, v2, regs['r:n'])") < lines.index(odd) < lines.index(stop)
    assert lines.index(stop) < next(i for i, line in enumerate(lines) if "logical_and" in line)
    # `steps` is written after the exit: its branch reads the register, the exit does not see it
    assert line_calling(lines, "greater") == "v9 = prim('greater', [regs['r:steps'], v6], dt_bool)"


def exit_after_a_write_reference(n: int) -> tuple[int, int]:
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
    assert_runs_as_python(EXIT_AFTER_A_WRITE, n, exit_after_a_write_reference)


def halving_through_abs(n: int) -> tuple[int, int]:
    steps = 0
    while True:
        n, steps = n // 2, steps + 1
        if not abs(n) > 1:
            return n, steps


def test_the_cone_machine_runs_as_plain_python_on_every_backend() -> None:
    assert_runs_as_python(THROUGH_ABS, np.array([1, 2, 3, 17, 1024, 1025, 99999, -5, -64], np.int64), halving_through_abs)


# ----- Python programs whose loop condition reads the value the loop body writes -------------


def collatz_steps(n):
    steps = 0
    while n > 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps = steps + 1
    return steps


def halving_with_break(n, limit):
    steps = 0
    while n > 1:
        n = n // 2
        steps = steps + 1
        if steps >= limit:
            break
    return n, steps


def newton_sqrt(a):
    x = a
    while abs(x * x - a) > 1e-9 * a:
        x = 0.5 * (x + a / x)
    return x


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
    rng = np.random.default_rng(3)
    n = rng.integers(1, 5000, size=33).astype(np.int64)
    limit = rng.integers(1, 12, size=33).astype(np.int64)
    a = rng.uniform(0.01, 1e4, size=33)
    steps = context.batch_uncurried(collatz_steps)(n, backend=backend)
    assert np.asarray(steps).tolist() == [collatz_steps(m) for m in n.tolist()]
    halved = context.batch_uncurried(halving_with_break)(n, limit, backend=backend)
    assert [(int(x), int(y)) for x, y in zip(*map(np.asarray, halved), strict=True)] == [
        halving_with_break(m, k) for m, k in zip(n.tolist(), limit.tolist(), strict=True)
    ]
    roots = context.batch_uncurried(newton_sqrt)(a, backend=backend)
    assert np.asarray(roots).tolist() == [newton_sqrt(x) for x in a.tolist()]
    through_builtins = np.random.default_rng(5).integers(1, 3000, size=29).astype(np.int64)
    steps = context.batch_uncurried(collatz_abs)(through_builtins, backend=backend)
    assert np.asarray(steps).tolist() == [collatz_abs(m) for m in through_builtins.tolist()]
    cubes = np.random.default_rng(5).uniform(0.1, 1e5, size=29)
    roots, iterations = context.batch_uncurried(newton_cbrt)(cubes, backend=backend)
    want_roots, want_iterations = zip(*(newton_cbrt(x) for x in cubes.tolist()), strict=True)
    assert np.asarray(iterations).tolist() == list(want_iterations)
    np.testing.assert_allclose(np.asarray(roots), want_roots, rtol=1e-14)  # XLA may round its float ops otherwise
