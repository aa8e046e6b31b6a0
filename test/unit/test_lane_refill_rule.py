"""The refill rule of a run with lanes (`abir.backends.traced.sweep_costs`,
`TracedLoop.repeat_while_paying`): what a sweep costs in rounds of each loop, counted from the
program, and the launch limits rounded so that JAX finds their device scalars again
(`abir.backends.base.coarse_count`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import abir
from abir.backends import traced
from abir.backends.base import coarse_count


class Block:
    """A stand-in kernel: the registers it writes, its successors, whether it refills lanes."""

    def __init__(self, writes: tuple[str, ...], successors: tuple[int, ...] = (), refills: bool = False):
        self.register_writes = writes
        self.plan = type("Plan", (), {"successors": successors, "uses_stacks": False, "loops_to_itself": False})()
        self.refills_lanes = refills
        self.writes: dict[str, int] = {}
        self.indexed_keys: tuple[str, ...] = ("ring",) if refills else ()


def template(batch: int) -> dict[str, Any]:
    return {
        "pc": np.zeros(batch, np.int32),
        "x": np.zeros(batch, np.int64),
        "v": np.zeros((batch, 3), np.float64),
        "next": np.zeros(1, np.int32),
        "ring": np.zeros((16, batch), np.int64),
    }


def test_a_blocks_round_costs_what_it_writes_per_member() -> None:
    """One for finding its members, each register's elements per member, one for an array it
    writes at indexed rows or one not per member; the batch size does not change it."""
    block = Block(("pc", "x", "v"))
    assert traced.round_cost(block, template(8), ()) == 1 + 1 + 1 + 3
    assert traced.round_cost(block, template(1024), ()) == traced.round_cost(block, template(8), ())
    refill = Block(("pc", "x", "next", "ring"), refills=True)
    assert traced.round_cost(refill, template(8), ()) == 1 + 1 + 1 + 1 + 1


def test_a_sweep_costs_its_other_blocks_and_its_refill_in_rounds_of_each_loop() -> None:
    """Block 1 jumps to itself; block 0 runs once per sweep and the refill (block 2) at its end:
    the sweep costs their rounds over the loop's, and nothing is counted for a block that does
    not repeat."""
    kernels = [Block(("pc", "x")), Block(("pc", "v"), (1, 2)), Block(("pc", "x", "next", "ring"), refills=True)]
    kernels[1].plan.loops_to_itself = True
    parts = [(0, 0), (1, 1), (2, 2)]
    costs = traced.sweep_costs(kernels, parts, template(64), ())
    assert costs == {1: ((1 + 2) + (1 + 4)) / (1 + 1 + 3)}


@pytest.mark.parametrize("count", [1, 2, 3, 5, 63, 64, 95, 96, 97, 1000, 46_678, 2**30 - 1])
def test_launch_limits_are_rounded_down_to_two_values_a_doubling(count: int) -> None:
    rounded = coarse_count(count)
    assert 2 * count / 3 < rounded <= count
    assert rounded & (rounded - 1) == 0 or (rounded // 3) & (rounded // 3 - 1) == 0 and rounded % 3 == 0


def count_down_steps(n):
    steps = 0
    while n > 0:
        n = n - 1
        steps = steps + 1
    return steps


def test_a_loop_with_lanes_stops_repeating_once_a_round_runs_fewer_members_than_on_average(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a sweep counted as costing nothing, a loop stops at the first round that runs fewer
    members than the rounds before it did on average: members that finish early are refilled
    at once (many sweeps); counted as very costly, it runs until its last member leaves (few
    sweeps). Results equal plain Python's either way, and the counted cost lies between."""
    xs = np.array([1, 40, 2, 40, 3, 40, 1, 40] * 8, dtype=np.int64)
    want = [int(x) for x in xs]
    sweep_costs = traced.sweep_costs
    sweeps = {}
    for name, scale in (("cheap", 0.0), ("counted", 1.0), ("costly", 1e6)):
        count_down = abir.Context().batch()(count_down_steps)  # a program of its own: compiled again
        monkeypatch.setattr(
            traced, "sweep_costs", lambda *args, scale=scale: {k: v * scale for k, v in sweep_costs(*args).items()}
        )
        backend = abir.JaxBackend(collect_stats=True)
        stats = []
        run = backend.run

        def counted(*args: Any, run=run, backend=backend, stats=stats, **kwargs: Any) -> Any:
            state = run(*args, **kwargs)
            stats.append(backend.last_stats)
            return state

        monkeypatch.setattr(backend, "run", counted)
        np.testing.assert_array_equal(np.asarray(count_down(xs, backend=backend, lanes=8)), want)
        sweeps[name] = sum(s.sweeps for s in stats)
    assert sweeps["cheap"] > sweeps["costly"]
    assert sweeps["cheap"] >= sweeps["counted"] >= sweeps["costly"]
