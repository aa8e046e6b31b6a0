"""Structured runs: a program that uses no stack runs as nested batched loops, as `jax.vmap` of
its per-member `while` loops would, instead of a loop of sweeps.

A sweep (`abir.backends.traced.TracedLoop.sweeps`) visits the blocks in index order and waits for
the next sweep at every jump back; the loop of sweeps is what lets calls and returns jump back
anywhere. A program none of whose blocks uses a stack (no recursion: the compiler turned its
calls and returns into jumps, `abir.vm.kernels.static_returns`) jumps back only along its loops.
`loop_regions` covers every jump back u -> v (v <= u) by a range of blocks [v, u], merging
ranges that overlap without nesting, so the ranges nest. `structured_sweep` then runs the
blocks once, in index order, and each outermost range as a loop of its own that repeats its
blocks (and, inside, its inner ranges the same way) while a member stands in it: a member leaves
a range only forward or into an enclosing range, whose loop takes it on. So one pass takes every
member to the halt, and no loop of sweeps, tail hold or sweep counting is compiled: the program
XLA compiles is the nest of `while` loops of the user's source, each over the members still in
it, the others masked, as in a hand-written `jax.jit(jax.vmap(...))` with `lax.while_loop`.

Blocks run as in a sweep: masked by `pc`, under a conditional on "any member here" unless they
are the one block of a loop whose condition found a member there. The program counter stays the
state's, so results, errors, `max_steps` and launches are the machine's: a launch whose
iterations run out leaves members inside a loop, and the next launch's pass takes them on from
there (every block before them finds no member).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from abir.backends.base import State, loops_to_itself
from abir.backends.traced import TracedLoop, refills_lanes

Regions = dict[int, int]
"""`{first: last}` of each range of blocks that repeats as a loop of its own (`loop_regions`)."""


def structured(kernels: Sequence[Any]) -> bool:
    """Whether a run of `kernels` may be structured: every kernel gives its block's successors
    and none uses a stack or refills lanes."""
    plans = [getattr(kernel, "plan", None) for kernel in kernels]
    if any(plan is None or not hasattr(plan, "successors") for plan in plans):
        return False
    if any(plan.uses_stacks or plan.writes_whole_stacks for plan in plans):
        return False
    return not any(map(refills_lanes, kernels))


def loop_regions(successors: Sequence[Sequence[int]]) -> Regions:
    """Ranges of blocks, nested or disjoint, covering every jump back (u -> v with v <= u) of the
    blocks whose successors are `successors`: `{first: last}` (one entry per first block, the
    outermost range starting there)."""
    ranges = {(v, u) for u, targets in enumerate(successors) for v in targets if v <= u}
    merged = True
    while merged:
        merged = False
        for a, b in sorted(ranges):
            crossing = next(((c, d) for c, d in ranges if a < c <= b < d), None)
            if crossing is not None:
                ranges -= {(a, b), crossing}
                ranges.add((a, crossing[1]))
                merged = True
                break
    regions: Regions = {}
    for first, last in sorted(ranges):
        regions[first] = max(last, regions.get(first, last))
    return regions


def parts(regions: Mapping[int, int], first: int, last: int, repeating: bool) -> list[tuple[int, int, bool]]:
    """What one pass over the blocks first..last runs, in order: `(first, last, True)` for each
    outermost range of `regions` inside them, to repeat as a loop, `(block, block, False)` for
    every other block. `repeating`: whether [first, last] is itself the range being repeated
    (its own entry in `regions` is then not a part of it; `loop_regions` keeps the outermost
    range per first block, and its loop repeats any shorter range starting there)."""
    out = []
    block = first
    while block <= last:
        end = regions.get(block)
        if end is not None and end <= last and not (repeating and block == first):
            out.append((block, end, True))
            block = end + 1
        else:
            out.append((block, block, False))
            block += 1
    return out


Carry = tuple[State, Any]
"""(state, loop iterations used in this launch)."""


def structured_sweep(loop: TracedLoop, state: State, iterations: Any) -> State:
    """The run of `loop.kernels` (`structured`) from `state` as one pass over the blocks with the
    ranges of `loop_regions` as nested loops, at most `iterations` loop iterations in all."""
    regions = loop_regions([tuple(kernel.plan.successors) for kernel in loop.kernels])
    steps = loop.block_steps(state)

    def run_block(block: int, carry: Carry, anyone_here: bool = False) -> Carry:
        state, used = carry
        return steps[block](state, loop.equal(state["pc"], block), anyone_here), used

    def run_pass(first: int, last: int, carry: Carry, repeating: bool) -> Carry:
        for start, end, looping in parts(regions, first, last, repeating):
            if looping:
                carry = repeat(start, end, carry)
            else:  # a block outside every loop runs once per pass: masked, without a conditional
                carry = run_block(start, carry, anyone_here=not repeating)
        return carry

    def repeat(first: int, last: int, carry: Carry) -> Carry:
        """The range first..last as a loop: its blocks while a member stands in it (a block
        that jumps to itself without a conditional: the loop's condition found a member)."""

        def more(carry: Carry) -> Any:
            pc = carry[0]["pc"]
            inside = loop.equal(pc, first) if first == last else (pc >= first) & (pc <= last)
            return loop.any(inside) & (carry[1] < iterations)

        def again(carry: Carry) -> Carry:
            if first == last:
                assert loops_to_itself(loop.kernels[first])
                state, used = run_block(first, carry, anyone_here=True)
            else:
                state, used = run_pass(first, last, carry, repeating=True)
            return state, used + 1

        return loop.while_loop(more, again, carry)  # type: ignore[no-any-return]

    return run_pass(0, len(steps) - 1, (dict(state), loop.cast(0, np.int32)), repeating=False)[0]
