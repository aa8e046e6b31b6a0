"""Loops of several blocks in the sweeping execution (`abir.backends.traced.loop_ranges`).

A loop whose body is more than one block (a `while` with an `if` inside) repeats on its own,
in block order, while members stand in it, without the sweep's other blocks; nested loops
repeat the inner one. Results equal per-member Python on every backend, with trip counts that
differ per member; loops that call keep the plain sweep. In a run with lanes a range also stops
repeating once enough lanes wait for the refill block, which is in no range.
"""

from __future__ import annotations

import numpy as np
import pytest

import abir
from abir.backend_registry import backend_specs
from abir.backends.traced import TracedLoop, loop_ranges, tail_start_of


def rk23_steps(rate):
    """Bogacki-Shampine steps with error control: a loop body too large to become one block
    with the loop's test (`fuse-blocks` stops at `MAX_FUSED_OPS`)."""
    t = 0.0
    y = 0.01
    h = 0.01
    accepted = 0
    while t < 2.0:
        if t + h > 2.0:
            h = 2.0 - t
        k1 = rate * y * (1.0 - y)
        y2 = y + 0.5 * h * k1
        k2 = rate * y2 * (1.0 - y2)
        y3 = y + 0.75 * h * k2
        k3 = rate * y3 * (1.0 - y3)
        y_new = y + h * (2.0 * k1 + 3.0 * k2 + 4.0 * k3) / 9.0
        k4 = rate * y_new * (1.0 - y_new)
        error = abs(h * (-5.0 * k1 / 72.0 + k2 / 12.0 + k3 / 9.0 - k4 / 8.0))
        if error <= 1e-8:
            t = t + h
            y = y_new
            accepted = accepted + 1
        h = h * min(4.0, max(0.2, 0.9 * (1e-8 / (error + 1e-30)) ** (1.0 / 3.0)))
    return accepted


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


def depth(x):
    if x <= 0.0:
        return 0
    return depth(x - 1.0) + 1


def loop_of_calls(x):
    total = 0
    while x > 0.0:
        total = total + depth(x)
        x = x - 1.0
    return total


INPUTS = np.array([1.0, 7.0, 3.5, 2.0, 0.5, 6.0])


def machine_of(function, *others):
    ctx = abir.Context()
    for other in others:
        ctx.batch_uncurried(other)
    batched = ctx.batch_uncurried(function)
    return ctx._compiler.for_call(batched.name, (INPUTS,), abir.JaxBackend()).machine, batched


class PlanKernel:
    """A stand-in kernel giving its block's plan, as `BlockKernel` does."""

    def __init__(self, plan):
        self.plan = plan


def plan_kernels(machine):
    return [PlanKernel(plan) for plan in machine.plans]


def test_a_loop_of_several_blocks_is_one_range():
    machine, _ = machine_of(rk23_steps)
    kernels = plan_kernels(machine)
    ranges = loop_ranges(kernels, tail_start_of(kernels))
    assert len(ranges) == 1
    (first, last), = ranges.items()
    assert last > first and first in machine.plans[last].successors


def test_of_nested_loops_the_range_holds_the_inner_loop():
    machine, _ = machine_of(pair_sums)
    kernels = plan_kernels(machine)
    (first, last), = loop_ranges(kernels, tail_start_of(kernels)).items()
    assert any(plan.loops_to_itself for plan in machine.plans[first : last + 1])


def test_a_loop_that_calls_is_no_range():
    machine, _ = machine_of(loop_of_calls, depth)
    kernels = plan_kernels(machine)
    ranges = loop_ranges(kernels, tail_start_of(kernels))
    for first, last in ranges.items():
        assert not any(plan.uses_stacks for plan in machine.plans[first : last + 1])


@pytest.fixture(params=[min(spec.names, key=len) for spec in backend_specs()])
def backend(request):
    return next(spec for spec in backend_specs() if request.param in spec.names).new_backend()


@pytest.mark.parametrize("function", [rk23_steps, pair_sums, loop_of_calls])
@pytest.mark.make_test_keeps({"backend": "numpy"}, {"backend": "jax"}, {"function": pair_sums})
def test_loops_equal_python_per_member(function, backend):
    _, batched = machine_of(function, *((depth,) if function is loop_of_calls else ()))
    want = [function(n) for n in INPUTS]
    np.testing.assert_array_equal(batched(INPUTS, backend=backend, max_stack_depth=40), want)
    np.testing.assert_array_equal(batched(INPUTS, backend=backend, max_stack_depth=40, lanes=2), want)


def test_a_range_repeats_on_its_own_and_counts_its_rounds_as_sweeps(monkeypatch):
    machine, batched = machine_of(rk23_steps)
    kernels = plan_kernels(machine)
    (first, last), = loop_ranges(kernels, tail_start_of(kernels)).items()
    repeated = []
    repeat_range = TracedLoop.repeat_range

    def recording(self, *args, **kwargs):
        repeated.append(args[:2])
        return repeat_range(self, *args, **kwargs)

    monkeypatch.setattr(TracedLoop, "repeat_range", recording)
    backend = abir.JaxBackend(collect_stats=True)
    want = [rk23_steps(n) for n in INPUTS]
    np.testing.assert_array_equal(batched(INPUTS, backend=backend), want)
    assert repeated == [(first, last)]
    stats = backend.last_stats
    assert stats.ideal_sweeps <= stats.sweeps <= stats.ideal_sweeps + 1


class RefillKernel:
    """A stand-in for the refill block of a run with lanes (`abir.vm.state_ops.LaneRefill`)."""

    refills_lanes = True


def test_a_run_with_lanes_keeps_its_ranges_and_its_refill_block_is_in_none():
    machine, _ = machine_of(rk23_steps)
    kernels = plan_kernels(machine)
    want = loop_ranges(kernels, tail_start_of(kernels))
    with_refill = [*kernels, RefillKernel()]
    assert loop_ranges(with_refill, tail_start_of(with_refill)) == want != {}


def test_a_range_repeats_in_a_run_with_lanes_and_stops_when_it_no_longer_pays(monkeypatch):
    machine, batched = machine_of(rk23_steps)
    kernels = plan_kernels(machine)
    (first, last), = loop_ranges(kernels, tail_start_of(kernels)).items()
    costs = []
    repeat_range = TracedLoop.repeat_range

    def recording(self, *args, **kwargs):
        costs.append(args[5] if len(args) > 5 else kwargs.get("sweep_cost"))
        return repeat_range(self, *args, **kwargs)

    monkeypatch.setattr(TracedLoop, "repeat_range", recording)
    inputs = np.tile(INPUTS, 4)
    want = [rk23_steps(n) for n in inputs]
    np.testing.assert_array_equal(batched(inputs, backend=abir.JaxBackend(), lanes=8), want)
    assert costs and all(cost is not None and cost > 0 for cost in costs)
