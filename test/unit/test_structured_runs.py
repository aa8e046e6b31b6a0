"""Structured runs on JAX (`abir.backends.jax.structured`): a program that uses no stack runs as
one pass over its blocks with its loops as nested batched `while` loops, not as a loop of sweeps.

The ranges (`loop_regions`) cover every jump back and nest; which programs qualify
(`structured`: no block uses a stack); the compiled loop's shape (one `while` per loop of the
source, none for the sweeps); and the machine's contract kept: results equal per-member Python
and the sweep's own results, with loops nested, left by `break`, `continue` and `return`, a
run resumed over launches, `max_steps` stopping the same members at the same blocks as NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest

import abir
from abir.backends import base
from abir.backends.jax import loop as jax_loop
from abir.backends.jax.structured import loop_regions, parts, structured


def pair_sums(x):
    total = 0.0
    i = 0
    while i < x:
        j = 0
        while j < i:
            total = total + i * j
            j = j + 1
        i = i + 1
    return total


def search(n):
    """Nested loops left by `break`, `continue` and an early `return`."""
    found = 0
    i = 0
    while i < n:
        i = i + 1
        if i % 3 == 0:
            continue
        j = 0
        while j < i:
            j = j + 1
            if (i * j) % 7 == 6:
                break
            if i * j > 40:
                return found + 100
            found = found + 1
    return found


def collatz(n):
    steps = n - n
    while n > 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps = steps + 1
    return steps


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


INPUTS = np.array([0, 1, 5, 9, 3, 12, 7, 2])


def batched(function):
    return abir.Context().batch_uncurried(function)


def machine_of(function):
    ctx = abir.Context()
    f = ctx.batch_uncurried(function)
    return ctx._compiler.for_call(f.name, (INPUTS,), abir.JaxBackend()).machine


class PlanKernel:
    """A stand-in kernel giving its block's plan, as `BlockKernel` does."""

    def __init__(self, plan):
        self.plan = plan


@pytest.mark.parametrize(
    ("successors", "regions"),
    [
        ([(1,), (2,), ()], {}),  # no jump back
        ([(1,), (1, 2), ()], {1: 1}),  # a block that jumps to itself
        ([(1,), (2,), (2, 3), (1, 4), ()], {1: 3, 2: 2}),  # nested: the inner one is its own range
        ([(1,), (2,), (3,), (1, 4), (2, 5), ()], {1: 4}),  # crossing ranges merge into their union
        ([(1,), (2,), (1, 3), (4,), (3, 5), ()], {1: 2, 3: 4}),  # disjoint loops one after the other
        ([(1,), (1, 2), (1, 3), ()], {1: 2}),  # two jumps back to one block: the outermost range
    ],
)
def test_ranges_cover_every_jump_back_and_nest(successors, regions):
    got = loop_regions(successors)
    assert got == regions
    for u, targets in enumerate(successors):
        for v in targets:
            if v <= u:
                assert any(first <= v and u <= last for first, last in got.items())
    spans = list(got.items())
    for a, b in spans:
        for c, d in spans:
            assert not a < c <= b < d


def test_a_pass_runs_each_outermost_range_as_a_loop_and_every_other_block_once():
    regions = {1: 3, 2: 2, 5: 5}
    assert parts(regions, 0, 6, repeating=False) == [(0, 0, False), (1, 3, True), (4, 4, False), (5, 5, True), (6, 6, False)]
    assert parts(regions, 1, 3, repeating=True) == [(1, 1, False), (2, 2, True), (3, 3, False)]


def test_a_program_without_a_stack_is_structured_and_a_recursive_one_is_not():
    assert structured([PlanKernel(plan) for plan in machine_of(pair_sums).plans])
    assert structured([PlanKernel(plan) for plan in machine_of(collatz).plans])
    assert not structured([PlanKernel(plan) for plan in machine_of(fib).plans])


@pytest.mark.parametrize(("function", "loops"), [(collatz, 1), (pair_sums, 2)])
def test_the_compiled_loop_has_one_while_per_loop_of_the_source(function, loops, monkeypatch):
    """No loop of sweeps around them (a sweep would add one `while`)."""
    traced = []
    while_loop = jax_loop.JaxLoop.while_loop

    def recording(self, cond, body, carry):
        traced.append(function.__name__)
        return while_loop(self, cond, body, carry)

    monkeypatch.setattr(jax_loop.JaxLoop, "while_loop", recording)
    batched(function)(INPUTS, backend=abir.JaxBackend())
    assert len(traced) == loops


def sweeping(monkeypatch):
    """Runs from here on take the loop of sweeps."""
    monkeypatch.setattr(jax_loop, "structured", lambda kernels: False)


@pytest.mark.parametrize("function", [pair_sums, search, collatz])
def test_results_equal_python_per_member_and_the_sweep(function, monkeypatch):
    want = [function(n) for n in INPUTS]
    got = batched(function)(INPUTS, backend=abir.JaxBackend())
    np.testing.assert_array_equal(got, want)
    sweeping(monkeypatch)
    np.testing.assert_array_equal(batched(function)(INPUTS, backend=abir.JaxBackend()), want)


def test_a_run_resumes_over_launches(monkeypatch):
    """Launches of two loop iterations leave members inside loops; the next pass takes them on."""
    monkeypatch.setattr(base, "FIRST_LAUNCH_ITERATIONS", 2)
    backend = abir.JaxBackend()
    monkeypatch.setattr(backend, "launch_seconds", 1e-9)
    launches = []
    run_in_launches = backend.run_in_launches

    def counted(launch, state, halt_index):
        def one(state, iterations):
            launches.append(iterations)
            return launch(state, iterations)

        return run_in_launches(one, state, halt_index)

    monkeypatch.setattr(backend, "run_in_launches", counted)
    want = [search(n) for n in INPUTS]
    np.testing.assert_array_equal(batched(search)(INPUTS, backend=backend), want)
    assert len(launches) > 1


def test_max_steps_stops_the_members_the_sweep_stops_where_it_stops_them(monkeypatch):
    starts = np.array([1, 0, 27, -3, 5, 97])
    errors = []
    for backend in (abir.NumpyBackend(), abir.JaxBackend(), "sweep"):
        if backend == "sweep":
            sweeping(monkeypatch)
            backend = abir.JaxBackend()
        with pytest.raises(abir.StepLimitError) as info:
            batched(collatz)(starts, backend=backend, max_steps=30)
        errors.append(info.value)
    numpy_error, structured_error, sweep_error = errors
    assert list(structured_error.members) == list(sweep_error.members) == list(numpy_error.members) == [2, 5]
    assert list(structured_error.blocks) == list(sweep_error.blocks)  # NumPy numbers its blocks otherwise
