"""The machine loop of the traced backends (JAX, TensorFlow), written once.

JAX and TF stage the whole machine run as one compiled `while` loop. `TracedLoop` builds that
loop from a handful of primitives each backend supplies (its while loop, conditional and switch,
reductions over the batch, casts and an in-place row update), so both run the same design:

* `"sweep"` (the default): each iteration visits the blocks in index order and runs every
  block that has members at that moment, under a conditional on "any member here", so a member
  passes every forward jump within one sweep and waits only at a jump back (a loop, a call to an
  earlier block, a return). Blocks of the program's tail (`tail_start_of`) run only once every
  live member is in the tail; a block that jumps to itself repeats while members stand there,
  and so do the blocks of a loop of several blocks (`loop_ranges`), in order, while members
  stand in it.
  A block's conditional returns only what the block may change: the registers it writes and
  the stacks it pushes onto, its stack write requests scattered inside the branch; the other
  branch passes them through (XLA copies a value a conditional passes through, a small copy per
  value; padded requests applied after the conditional instead cost a scatter per skipped block,
  which measured slower: docs/performance.md#the-machines-fixed-costs).
A run with lanes (more members than rows) ends its kernels with a refill block
(`refills_lanes`), which each sweep runs at its end; a block that jumps to itself, or a loop of
several blocks, then repeats only while a round of it runs at least as many members as its
rounds so far did on average, a sweep's other blocks and refill counted as rounds
(`sweep_costs`, `repeat_while_paying`).
* `"switch"`: `while next_block(pc) < halt: state = switch(next_block(pc), blocks)(state)`, one
  block per iteration chosen by the backend's `scheduler` (the reference's design). With split
  kernels neither the registers nor the stacks pass through the switch: a `RegisterLayout`
  packs the registers of one dtype and shape into one `[n + 1, B, ...]` group (the last row is
  scratch), the branches return only the values of the registers their block writes, padded
  into a fixed number of write slots per group, and padded stack write requests (rows = D write
  nothing); after the switch each slot is one in-place row update at a row looked up from a
  per-block table, and each request one `stack_scatter`. A step thus moves the block's writes,
  not the whole state. A backend without in-place updates (TF graphs without XLA, where a
  tensor a switch passes through costs nothing) passes the registers through whole instead
  (`grouped = False`).

With `collect_stats`, the sweep also counts, inside the loop, the blocks run, the members
active in each and each member's own block count (the `STATS_KEY` entry of the state; `run_stats`
reads them into a `RunStats`).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from abir.backends.base import (
    Kernel,
    RunStats,
    State,
    Writes,
    apply_writes,
    loops_to_itself,
    separate_stacks,
    splittable,
    tail_start_of,
)

STATS_KEY = "__stats__"
"""The state entry holding the counters of a run with `collect_stats` (`zero_counters`)."""

LIVE_UNIT = 1 << 15
"""`active_and_live` sums (member active) + (member live) * LIVE_UNIT in one int32 reduction: a
batch of fewer than `LIVE_UNIT` members keeps both counts apart (`counted_batch`)."""


def counted_batch(batch: int) -> bool:
    """Whether a sweep loop over `batch` rows can count its active and live members in one
    reduction (`TracedLoop.active_and_live`)."""
    return batch < LIVE_UNIT


Step = Callable[..., State]
"""`step(state, here, anyone_here=False) -> state`: one block of a sweep (`TracedLoop.sweep_step`)."""
BlockRun = Callable[[State, State, Any, bool], tuple[tuple[Any, ...], tuple[Any, ...]]]
"""`(regs, stacks, here, anyone_here) -> (written values, pushed stacks)`: a split block run
for the members `here` (`TracedLoop.block_run`)."""


def writes_whole_stacks(kernel: Any) -> bool:
    """Whether the kernel's block writes many rows per member (`kernel.plan.writes_whole_stacks`:
    a request with a `Span` for rows, see `stack_scatter`). Such requests cannot be padded into the
    fixed-size requests of a switch over split kernels, nor scattered into compacted columns."""
    return bool(getattr(getattr(kernel, "plan", None), "writes_whole_stacks", False))


def refills_lanes(kernel: Any) -> bool:
    """Whether the kernel is the refill block of a run with lanes (`abir.vm.state_ops.LaneRefill`:
    lanes whose member halted start the next one). A sweep runs it at its end, every sweep and
    never compacted; its own work is conditional on a lane having arrived there."""
    return bool(getattr(kernel, "refills_lanes", False))


def lane_skipped_blocks(kernels: Sequence[Any]) -> frozenset[int]:
    """The blocks a sweep of a run with lanes leaves out: no member stands there, or the refill
    block takes their members (`abir.vm.state_ops.LaneLayout.skipped_blocks`)."""
    return frozenset(block for kernel in kernels if refills_lanes(kernel) for block in getattr(kernel, "skipped_blocks", ()))


def indexed_keys(kernels: Sequence[Any]) -> frozenset[str]:
    """The state keys that `kernels` read and write only at rows they index, never whole in a
    sweep (a run with lanes' members' arguments and rings: `abir.vm.state_ops.LaneRefill`)."""
    return frozenset(key for kernel in kernels for key in getattr(kernel, "indexed_keys", ()))


def loop_ranges(kernels: Sequence[Any], tail: int) -> dict[int, int]:
    """The loops of several consecutive blocks a sweep repeats on their own: `{first: last}`
    for each range of blocks before the tail whose last block may jump back to its first, from
    none of which a member moves to a block before the first, into which no later block jumps,
    and none of which uses the stacks (a call, a return or a push would leave the range and
    come back). Ranges do not overlap;
    the shortest is taken first, so of nested loops the inner one repeats. Kernels that do not
    give their blocks' successors (`kernel.plan.successors`) have none; the refill block of a
    run with lanes (`refills_lanes`) is in none (`repeat_range` lets its lanes reach it)."""
    plans = [getattr(kernel, "plan", None) for kernel in kernels if not refills_lanes(kernel)]
    if any(plan is None or not hasattr(plan, "successors") for plan in plans):
        return {}
    tail = min(tail, len(plans))

    def stays_from(first: int, block: int) -> bool:
        plan = plans[block]
        return not plan.uses_stacks and all(successor >= first for successor in plan.successors)

    def closed(first: int, last: int) -> bool:
        """No later block jumps back into the range (its members would wait for the range to
        empty instead of joining the next round)."""
        return all(not first <= successor <= last for plan in plans[last + 1 :] for successor in plan.successors)

    candidates = []
    for first in range(tail):
        for last in range(first + 1, tail):
            if not stays_from(first, last - 1):
                break
            if first in plans[last].successors and stays_from(first, last) and closed(first, last):
                candidates.append((last - first, first, last))
                break
    ranges: dict[int, int] = {}
    taken: set[int] = set()
    for _, first, last in sorted(candidates):
        blocks = set(range(first, last + 1))
        if taken.isdisjoint(blocks):
            ranges[first] = last
            taken |= blocks
    return ranges


def sweep_parts(blocks: int, ranges: Mapping[int, int]) -> list[tuple[int, int]]:
    """What a sweep runs, in order: `(first, last)` of each range of `ranges`, `(block, block)`
    of every other block."""
    parts = []
    block = 0
    while block < blocks:
        last = ranges.get(block, block)
        parts.append((block, last))
        block = last + 1
    return parts


def round_cost(kernel: Any, template: Mapping[str, Any], stack_keys: Collection[str]) -> int:
    """What one run of `kernel`'s block over the batch costs in a sweep, counted per member:
    the elements of the registers it may write (each computed, and passed through the block's
    conditional) and of the stack rows it pushes, one for an array it writes at indexed rows
    only (`indexed_keys`), and one for the reduction that finds its members. A loop on XLA's CPU
    backends costs about what it writes and copies, not what it computes."""
    batch = int(template["pc"].shape[0])
    keys = [key for key in template if key not in stack_keys]
    indexed = set(getattr(kernel, "indexed_keys", ()))
    cost = 1
    for key in register_writes(kernel, keys):
        shape = tuple(template[key].shape)
        cost += 1 if key in indexed or shape[:1] != (batch,) else int(np.prod(shape[1:]))
    for key, count in getattr(kernel, "writes", {}).items():
        cost += count * int(np.prod(tuple(template[key].shape)[2:])) if key in template else count
    return cost


def sweep_costs(
    kernels: Sequence[Any], parts: Sequence[tuple[int, int]], template: Mapping[str, Any], stack_keys: Collection[str]
) -> dict[int, float]:
    """For each part of a sweep with lanes that repeats (a block that jumps to itself, or a range
    of `loop_ranges`), by its first block: what the sweep's other parts and its refill block cost,
    counted in rounds of the part (`round_cost`). `parts` are the sweep's parts (`sweep_parts`,
    the blocks it leaves out removed), the refill block among them."""
    costs = {part: sum(round_cost(kernels[block], template, stack_keys) for block in range(part[0], part[1] + 1)) for part in parts}
    total = sum(costs.values())
    return {
        first: (total - costs[(first, last)]) / costs[(first, last)]
        for first, last in parts
        if first != last or loops_to_itself(kernels[first])
    }


def register_writes(kernel: Any, keys: Sequence[str]) -> tuple[str, ...]:
    """The per-member keys (of `keys`) that `kernel.split` may change: its `register_writes`
    when it declares them, else all of them."""
    declared = getattr(kernel, "register_writes", None)
    if declared is None:
        return tuple(keys)
    return tuple(key for key in declared if key in keys)


def read_only_keys(kernels: Sequence[Any], state: Mapping[str, Any], stack_keys: Collection[str]) -> frozenset[str]:
    """The registers of `state` no kernel of `kernels` changes (outside every kernel's declared
    `register_writes`, not the pc, a stack or the run's counters; none when a kernel does not
    declare its writes): per-member inputs only read, such as each member's data arrays. A
    compiled loop need not return them; returning one costs a copy of it on every launch (a
    computation's outputs do not share its inputs' buffers)."""
    written: set[str] = set()
    for kernel in kernels:
        declared = getattr(kernel, "register_writes", None)
        if declared is None:
            return frozenset()
        written.update(declared)
    changed = {*written, *stack_keys, "pc", STATS_KEY}
    return frozenset(key for key in state if key not in changed)


def pushed_stacks(kernel: Any) -> tuple[str, ...]:
    """The stacks a split kernel makes write requests to."""
    return tuple(key for key, n in kernel.writes.items() if n)


def write_counts(kernels: Sequence[Any], stacks: Mapping[str, Any]) -> dict[str, int]:
    """The number of write requests per stack every switch branch returns (the most any block
    makes)."""
    counts = {key: max(kernel.writes.get(key, 0) for kernel in kernels) for key in stacks}
    return {key: n for key, n in counts.items() if n}


@dataclass(frozen=True)
class RegisterLayout:
    """Where each per-member array lives in the packed groups, and each block's write slots.

    `groups[g]` lists the keys packed (in row order) into group g, all of one dtype and shape;
    row `len(groups[g])` is scratch. `written[block][g]` lists the keys block writes in group
    g, in slot order; `slots[g]` is the number of slots (the most any block writes in g) and
    `targets[g][block, j]` the row slot j of `block` writes (scratch when unused)."""

    groups: tuple[tuple[str, ...], ...]
    place: dict[str, tuple[int, int]]
    written: tuple[tuple[tuple[str, ...], ...], ...]
    slots: tuple[int, ...]
    targets: tuple[np.ndarray, ...]

    @classmethod
    def build(cls, kernels: Sequence[Any], signatures: dict[str, Any]) -> RegisterLayout:
        """`signatures` maps each per-member key to a hashable (dtype, shape) of its array."""
        by_signature: dict[Any, list[str]] = {}
        for key, signature in signatures.items():
            by_signature.setdefault(signature, []).append(key)
        groups = tuple(tuple(keys) for keys in by_signature.values())
        place = {key: (g, row) for g, keys in enumerate(groups) for row, key in enumerate(keys)}
        written = []
        for kernel in kernels:
            per_group: list[list[str]] = [[] for _ in groups]
            for key in register_writes(kernel, list(signatures)):
                per_group[place[key][0]].append(key)
            written.append(tuple(tuple(keys) for keys in per_group))
        slots = tuple(max((len(w[g]) for w in written), default=0) for g in range(len(groups)))
        targets = []
        for g, keys in enumerate(groups):
            table = np.full((len(written), slots[g]), len(keys), np.int32)
            for block, w in enumerate(written):
                table[block, : len(w[g])] = [place[key][1] for key in w[g]]
            targets.append(table)
        return cls(groups, place, tuple(written), slots, tuple(targets))


class LazyRegisters(dict):  # type: ignore[type-arg]
    """The registers a branch sees, read from the groups on first use (`unpack(key)`), so a
    branch traces only the reads its block makes. `unchanged(key)`: whether the key still holds
    the value first read (a kernel sets the keys it writes)."""

    def __init__(self, unpack: Callable[[str], Any]):
        super().__init__()
        self.unpack = unpack
        self.first: dict[str, Any] = {}

    def __missing__(self, key: str) -> Any:
        value = self[key] = self.first[key] = self.unpack(key)
        return value

    def unchanged(self, key: str) -> bool:
        return key in self.first and self[key] is self.first[key]


class TracedLoop(abc.ABC):
    """The machine loop over `kernels` for one traced backend: `function(execution)` is the
    traceable `(state, iterations) -> state` that runs at most `iterations` loop iterations
    (`Backend.run_in_launches`). A backend subclasses it with its primitives (the abstract
    methods) and `grouped`; `block_run` and `traced_split` are hooks for its own refinements.
    `backend` counts the traces of the loop in `trace_count`."""

    grouped: bool = True
    """Whether a switch over split kernels packs the registers into groups (`RegisterLayout`)."""

    def __init__(self, backend: Any, kernels: Sequence[Kernel], halt_index: int, stack_keys: Collection[str]):
        self.backend = backend
        self.kernels = tuple(kernels)
        self.halt = int(halt_index)
        self.stack_keys = stack_keys

    # ----- the backend's primitives ---------------------------------------------------------
    @abc.abstractmethod
    def while_loop(self, cond: Callable[[Any], Any], body: Callable[[Any], Any], carry: Any) -> Any:
        """`while cond(carry): carry = body(carry)`, staged as one loop."""

    @abc.abstractmethod
    def cond(self, pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any], *operands: Any) -> Any:
        """`true_fn(*operands)` if the bool scalar `pred` holds, else `false_fn(*operands)`."""

    @abc.abstractmethod
    def switch(self, index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
        """`branches[index](*operands)`, staged as one switch."""

    @abc.abstractmethod
    def any(self, x: Any) -> Any:
        """Whether any element of bool [B] `x` holds (a bool scalar)."""

    @abc.abstractmethod
    def min(self, x: Any) -> Any:
        """The smallest element of [B] `x`."""

    @abc.abstractmethod
    def sum(self, x: Any) -> Any:
        """The sum of the elements of `x`."""

    @abc.abstractmethod
    def equal(self, x: Any, y: Any) -> Any:
        """Elementwise `x == y`."""

    @abc.abstractmethod
    def cast(self, x: Any, dtype: Any) -> Any:
        """`x` as an array of NumPy `dtype`."""

    @abc.abstractmethod
    def like(self, value: Any, template: Any) -> Any:
        """`value` cast to `template`'s dtype and broadcast to its shape (as the branches of a
        conditional must return)."""

    @abc.abstractmethod
    def constant(self, array: np.ndarray) -> Any:
        """A NumPy array as a constant of the computation."""

    @abc.abstractmethod
    def stack_rows(self, rows: Sequence[Any]) -> Any:
        """The arrays `rows` stacked along a new first axis."""

    @abc.abstractmethod
    def set_row(self, array: Any, row: Any, value: Any) -> Any:
        """`array` with `array[row] = value` (row a scalar array), in place when it can be."""

    @abc.abstractmethod
    def add_at(self, vector: Any, index: int, amount: Any) -> Any:
        """`vector` with `amount` added to element `index`."""

    # ----- hooks ------------------------------------------------------------------------------
    def apply_writes(self, stacks: State, writes: Writes) -> State:
        """The stacks after a block's write requests (by default each by the backend's
        `stack_scatter`, in order)."""
        return apply_writes(stacks, writes, self.backend.stack_scatter)

    def traced_split(self, kernel: Any) -> Callable[..., Any]:
        """What the sweep calls for `kernel.split` (a backend may trace it once for all uses)."""
        return kernel.split  # type: ignore[no-any-return]

    def block_run(
        self,
        kernel: Any,
        split: Callable[..., Any],
        template: State,
        written: Sequence[str],
        pushed: Sequence[str],
        run: BlockRun,
        skip: BlockRun,
    ) -> BlockRun:
        """How a sweep runs split `kernel` (which changes the registers `written` and the stacks
        `pushed`) for the members `here`: `run` under a conditional on whether any member is
        there (`skip` otherwise), or `run` alone when the caller knows one is (`anyone_here`)."""

        def choose(regs: State, stacks: State, here: Any, anyone_here: bool) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
            if anyone_here:
                return run(regs, stacks, here)
            return self.cond(self.any(here), run, skip, regs, stacks, here)  # type: ignore[no-any-return]

        return choose

    # ----- the loop -----------------------------------------------------------------------------
    def function(self, execution: str) -> Callable[[State, Any], State]:
        """The machine loop of `execution` (`"sweep"` or `"switch"`)."""
        if execution == "sweep":
            build = self.sweep_loop
        elif not splittable(self.kernels) or any(writes_whole_stacks(kernel) for kernel in self.kernels):
            build = self.whole_switch_loop
        elif self.grouped:
            build = self.grouped_switch_loop
        else:
            build = self.split_switch_loop

        def loop(state: State, iterations: Any) -> State:
            self.backend.trace_count += 1  # runs only while tracing
            return build(dict(state), iterations)

        return loop

    def at_most(self, iterations: Any, cond: Callable[[Any], Any], body: Callable[[Any], Any], carry: Any) -> Any:
        """`while cond(carry): carry = body(carry)`, stopping after `iterations` iterations."""
        _, carry = self.while_loop(
            lambda c: (c[0] < iterations) & cond(c[1]), lambda c: (c[0] + 1, body(c[1])), (self.cast(0, np.int32), carry)
        )
        return carry

    def next_block(self, pc: Any) -> Any:
        """The block a switch runs next (the backend's `scheduler`), as int32."""
        return self.cast(self.backend.next_block(pc), np.int32)

    def conforming(self, kernel: Kernel, template: State) -> Callable[[State], State]:
        """`kernel` made to return exactly the keys, dtypes and shapes of `template` (as a
        conditional's branches must): missing keys keep their value, new values are cast back."""

        def branch(state: State) -> State:
            out = kernel(dict(state))
            return {key: self.like(out.get(key, state[key]), like) for key, like in template.items()}

        return branch

    # ----- sweeps -------------------------------------------------------------------------------
    def sweep_loop(self, state: State, iterations: Any) -> State:
        """The loop of sweeps (`sweeps`) over the whole run, with its counters when the state
        has them (`collect_stats`)."""
        counters = state.pop(STATS_KEY, {})
        state, counters, _, _ = self.sweeps(state, counters, iterations)
        return {**state, STATS_KEY: counters} if counters else dict(state)

    def sweeps(
        self,
        state: State,
        counters: dict[str, Any],
        iterations: Any,
        few_rows: int | None = None,
        until: Callable[[Any], Any] | None = None,
    ) -> tuple[State, dict[str, Any], Any, Any]:
        """Sweeps while a member is live and fewer than `iterations` loop iterations were used:
        `(state, counters, iterations used, few)`. With `few_rows`, the sweeps also count the
        members before the program's tail (`active_count`, once per sweep), stop early once
        `until(that count)` holds, and `few` is the numbers of sweeps that began with one to
        `few_rows` of them and of all sweeps (None without `few_rows`). The counters are an
        empty dict without `collect_stats`. The tail condition is evaluated once per
        sweep, at the tail's first block (tail blocks move members only forward, so it stays
        true through the tail); a block that jumps to itself repeats in a loop of its own (each
        repeat counts as a loop iteration, so a member that never leaves stops the launch), run
        without a conditional since the loop's condition found a member there
        (docs/performance.md#the-machines-fixed-costs); so do the blocks of a loop of several
        blocks (`loop_ranges`, `repeat_range`), without the sweep's other blocks' conditionals."""
        steps = self.block_steps(state)
        tail = tail_start_of(self.kernels)
        ranges = loop_ranges(self.kernels, tail)
        skipped = lane_skipped_blocks(self.kernels)
        parts = [part for part in sweep_parts(len(self.kernels), ranges) if part[0] != part[1] or part[0] not in skipped]
        with_lanes = any(refills_lanes(kernel) for kernel in self.kernels)
        costs = sweep_costs(self.kernels, parts, state, self.stack_keys) if with_lanes else {}

        def cond(carry: tuple[State, dict[str, Any], Any]) -> Any:
            state, _, used = carry
            return (used < iterations) & (self.min(state["pc"]) < self.halt)

        def run_block(
            block: int, carry: tuple[State, dict[str, Any], Any], anyone_here: bool = False, all_in_tail: Any = None
        ) -> tuple[State, dict[str, Any], Any]:
            state, counters, used = carry
            here = self.equal(state["pc"], block)
            if block >= tail:  # held until every live member is in the tail
                here = here & all_in_tail
            if counters:
                counters = self.count(counters, block, here)
            return steps[block](state, here, anyone_here), counters, used

        def run_one(block: int, carry: tuple[State, dict[str, Any], Any], all_in_tail: Any = None) -> tuple[State, dict[str, Any], Any]:
            if loops_to_itself(self.kernels[block]):
                assert block < tail  # a tail block moves members only to later blocks
                return self.repeat_block(block, carry, iterations, run_block, costs.get(block))
            return run_block(block, carry, all_in_tail=all_in_tail)

        def body(carry: tuple[State, dict[str, Any], Any]) -> tuple[State, dict[str, Any], Any]:
            all_in_tail = None
            for first, last in parts:
                if first == tail:
                    all_in_tail = self.min(carry[0]["pc"]) >= tail
                if first == last:
                    carry = run_one(first, carry, all_in_tail)
                else:
                    carry = self.repeat_range(first, last, carry, iterations, run_one, costs.get(first))
            state, counters, used = carry
            return state, self.end_sweep(counters) if counters else counters, used + 1

        start = (state, counters, self.cast(0, np.int32))
        if few_rows is None:
            return (*self.while_loop(cond, body, start), None)  # type: ignore[no-any-return]

        def counted(carry: tuple[tuple[State, dict[str, Any], Any], Any, Any, Any]) -> tuple[tuple[State, dict[str, Any], Any], Any, Any, Any]:
            sweep, few, swept, (active, _) = carry
            few = few + self.cast((active > 0) & (active <= few_rows), np.int32)
            sweep = body(sweep)
            return sweep, few, swept + 1, self.active_and_live(sweep[0]["pc"])

        def counted_cond(carry: tuple[tuple[State, dict[str, Any], Any], Any, Any, Any]) -> Any:
            active, live = carry[3]
            going = (carry[0][2] < iterations) & (live > 0)  # as `cond`, from the counts
            return going if until is None else going & ~until(active)

        zero = self.cast(0, np.int32)
        start_counted = (start, zero, zero, self.active_and_live(state["pc"]))
        (state, counters, used), few, swept, _ = self.while_loop(counted_cond, counted, start_counted)
        return state, counters, used, (few, swept)

    def active_and_live(self, pc: Any) -> tuple[Any, Any]:
        """(`active_count`, the number of members not halted), by one pass over `pc`."""
        tail = tail_start_of(self.kernels)
        both = self.sum(self.cast(pc < tail, np.int32) + self.cast(pc < self.halt, np.int32) * LIVE_UNIT)
        return both % LIVE_UNIT, both // LIVE_UNIT

    def active_count(self, pc: Any) -> Any:
        """The number of members before the program's tail (`tail_start_of`): active, where the
        others wait for them or have halted."""
        return self.sum(self.cast(pc < tail_start_of(self.kernels), np.int32))

    def repeat_block(
        self,
        block: int,
        carry: tuple[State, dict[str, Any], Any],
        iterations: Any,
        run_block: Callable[..., Any],
        sweep_cost: float | None = None,
    ) -> tuple[State, dict[str, Any], Any]:
        """A block that jumps to itself, by `run_block(block, carry, anyone_here=True)`, in a
        loop of its own while members stand there (each repeat counts as a loop iteration of the
        launch). In a run with lanes (`sweep_cost` set: see `sweep_costs`) it runs once first,
        and repeats only while doing so pays (`repeat_while_paying`)."""

        def again(carry: tuple[State, dict[str, Any], Any]) -> tuple[State, dict[str, Any], Any]:
            state, counters, used = run_block(block, carry, anyone_here=True)
            return state, counters, used + 1

        def more(carry: tuple[State, dict[str, Any], Any]) -> Any:
            return self.any(self.equal(carry[0]["pc"], block)) & (carry[2] < iterations)

        if sweep_cost is None:
            return self.while_loop(more, again, carry)  # type: ignore[no-any-return]

        def here(carry: tuple[State, dict[str, Any], Any]) -> Any:
            return self.equal(carry[0]["pc"], block)

        once = lambda carry: run_block(block, carry)  # noqa: E731 (once in every sweep: two loops' lanes never wait for each other)
        return self.repeat_while_paying(here, once, again, carry, iterations, sweep_cost)

    def repeat_range(
        self,
        first: int,
        last: int,
        carry: tuple[State, dict[str, Any], Any],
        iterations: Any,
        run_one: Callable[..., Any],
        sweep_cost: float | None = None,
    ) -> tuple[State, dict[str, Any], Any]:
        """The blocks `first` to `last` (a loop of `loop_ranges`), each by `run_one(block,
        carry)`, in a loop of their own while members stand there (each round counts as a loop
        iteration of the launch and, with counters, as a sweep). In a run with lanes
        (`sweep_cost` set) a round runs first, and the rounds go on only while they pay, as in
        `repeat_block`."""

        def again(carry: tuple[State, dict[str, Any], Any]) -> tuple[State, dict[str, Any], Any]:
            for block in range(first, last + 1):
                carry = run_one(block, carry)
            state, counters, used = carry
            return state, self.end_sweep(counters) if counters else counters, used + 1

        def inside(carry: tuple[State, dict[str, Any], Any]) -> Any:
            pc = carry[0]["pc"]
            return (pc >= first) & (pc <= last)

        def more(carry: tuple[State, dict[str, Any], Any]) -> Any:
            return self.any(inside(carry)) & (carry[2] < iterations)

        if sweep_cost is None:
            return self.while_loop(more, again, carry)  # type: ignore[no-any-return]
        return self.repeat_while_paying(inside, again, again, carry, iterations, sweep_cost)

    def repeat_while_paying(
        self,
        here: Callable[[Any], Any],
        once: Callable[[Any], Any],
        again: Callable[[Any], Any],
        carry: tuple[State, dict[str, Any], Any],
        iterations: Any,
        sweep_cost: float,
    ) -> tuple[State, dict[str, Any], Any]:
        """The rounds of a loop in a sweep with lanes: `once(carry)`, then `again(carry)` while
        members stand in the loop (`here(carry)`, bool [B]) and the next round would run at least
        as many of them as the sweep's rounds so far ran on average, the sweep's other blocks
        and its refill counted as `sweep_cost` rounds (the marginal value theorem: a round that
        runs fewer members than that average is worth less than a refill for the lanes that
        wait). Members only leave a loop while it repeats, so the lanes it runs fall round by
        round; one count of them per round tells both whether to go on and what the round ran."""

        def count(carry: tuple[State, dict[str, Any], Any]) -> Any:
            return self.cast(self.sum(self.cast(here(carry), np.int32)), np.int32)

        # in integers (a float sum is not vectorized): the cost so far, the sweep's other work
        # and the rounds (counted by the launch's iterations), stays below `rounds`, so that
        # lanes * cost fits in int32; a loop that repeats longer ends its sweep then and goes
        # on in the next
        rounds = (2**31 - 1) // max(int(carry[0]["pc"].shape[0]), 1)
        ran = count(carry)
        carry = once(carry)
        # cost = used - before: 1 + `sweep_cost` now, one more each round
        before = carry[2] - self.cast(1 + min(math.ceil(sweep_cost), rounds // 2), np.int32)

        # the launch's iterations, the members of this round and those of the rounds so far
        # are one int32 [3] of the loop's carry: updated by one operation per round, not three
        # (on TF, whose loop is not one kernel, each operation a kernel call)
        def paying(loop: tuple[State, dict[str, Any], Any]) -> Any:
            used, members, ran = loop[2][0], loop[2][1], loop[2][2]
            cost = used - before
            return (members > 0) & (members * cost >= ran) & (cost < rounds) & (used < iterations)

        def round_(loop: tuple[State, dict[str, Any], Any]) -> tuple[State, dict[str, Any], Any]:
            state, counters, counts = loop
            carry = again((state, counters, counts[0]))
            return carry[0], carry[1], self.stack_rows([carry[2], count(carry), counts[2] + counts[1]])

        start = (carry[0], carry[1], self.stack_rows([carry[2], count(carry), ran]))
        state, counters, counts = self.while_loop(paying, round_, start)
        return state, counters, counts[0]

    def single_sweep(self, template: State) -> Callable[[State], State]:
        """One sweep as a function of the state (shaped as `template`), with no loop inside: a
        block that jumps to itself runs once per sweep like the others, and no counters are
        kept. Its number of sweeps may differ from `sweep_loop`'s, its results do not; reverse
        mode differentiates it (`abir.backends.reverse_scheme`)."""
        steps = self.block_steps(template)

        def sweep(state: State) -> State:
            return self.sweep_blocks(steps, state)[0]

        return sweep

    def sweep_blocks(self, steps: Sequence[Step], state: State) -> tuple[State, list[tuple[Step, State, Any]]]:
        """One sweep of `steps` (`block_steps`) from `state`, as `single_sweep` runs it: the state
        after it, and for each block that may change the state, in order, its step, the state
        before it and where its members stand (`here`)."""
        tail = tail_start_of(self.kernels)
        ran: list[tuple[Step, State, Any]] = []
        all_in_tail = None
        for block, step in enumerate(steps):
            here = self.equal(state["pc"], block)
            if block >= tail:  # held until every live member is in the tail, as in `sweep_loop`
                if block == tail:
                    all_in_tail = self.min(state["pc"]) >= tail
                here = here & all_in_tail
            after = step(state, here)
            if after is not state:
                ran.append((step, state, here))
            state = after
        return state, ran

    def block_steps(self, template: State) -> list[Step]:
        """Each block's `sweep_step` for a state shaped as `template`."""
        splits = [self.traced_split(kernel) if splittable([kernel]) else None for kernel in self.kernels]
        return [self.sweep_step(kernel, split, template) for kernel, split in zip(self.kernels, splits, strict=True)]

    def sweep_step(self, kernel: Any, split: Callable[..., Any] | None, template: State) -> Step:
        """`step(state, here, anyone_here=False)`: `kernel` run when a member stands at its
        block (`here`, [B]); `anyone_here` when the caller knows one does. The step returns only
        what the block may change (see the module docstring); `split` stands for `kernel.split`."""
        if split is None:
            branch = self.conforming(kernel, template)

            def whole(state: State, here: Any, anyone_here: bool = False) -> State:
                return branch(state) if anyone_here else self.cond(self.any(here), branch, dict, state)  # type: ignore[no-any-return]

            return whole
        written = register_writes(kernel, [key for key in template if key not in self.stack_keys])
        pushed = pushed_stacks(kernel)
        if not written and not pushed:
            return lambda state, here, anyone_here=False: state

        def run(regs: State, stacks: State, here: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
            out, writes = split(dict(regs), stacks)
            updated = self.apply_writes(stacks, writes)
            return tuple(self.like(out[key], regs[key]) for key in written), tuple(updated[key] for key in pushed)

        def skip(regs: State, stacks: State, here: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
            return tuple(regs[key] for key in written), tuple(stacks[key] for key in pushed)

        if refills_lanes(kernel):  # every sweep: it counts the sweeps of a run with lanes
            def choose(regs: State, stacks: State, here: Any, anyone_here: bool) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
                return run(regs, stacks, here)
        else:
            choose = self.block_run(kernel, split, template, written, pushed, run, skip)

        def step(state: State, here: Any, anyone_here: bool = False) -> State:
            regs, stacks = separate_stacks(state, self.stack_keys)
            values, updated = choose(regs, stacks, here, anyone_here)
            return {**state, **dict(zip(written, values, strict=True)), **dict(zip(pushed, updated, strict=True))}

        return step

    # ----- switches -----------------------------------------------------------------------------
    def whole_switch_loop(self, state: State, iterations: Any) -> State:
        """The switch over plain `state -> state` kernels: the whole state passes through."""
        branches = [self.conforming(kernel, state) for kernel in self.kernels]

        def cond(s: State) -> Any:
            return self.next_block(s["pc"]) < self.halt

        def body(s: State) -> State:
            return self.switch(self.next_block(s["pc"]), branches, s)  # type: ignore[no-any-return]

        return self.at_most(iterations, cond, body, state)  # type: ignore[no-any-return]

    def split_switch_loop(self, state: State, iterations: Any) -> State:
        """The switch over split kernels, the carry (next block, registers, stacks): the
        registers pass through the switch whole, the stacks are only read there and updated by
        the padded write requests after it. The next block is computed once per step."""
        regs, stacks = separate_stacks(state, self.stack_keys)
        counts = write_counts(self.kernels, stacks)
        branches = [self.split_branch(kernel, regs, counts) for kernel in self.kernels]

        def body(carry: tuple[Any, State, State]) -> tuple[Any, State, State]:
            block, regs, stacks = carry
            regs, writes = self.switch(block, branches, regs, stacks)
            return self.next_block(regs["pc"]), regs, self.apply_writes(stacks, writes)

        start = (self.next_block(regs["pc"]), regs, stacks)
        _, regs, stacks = self.at_most(iterations, lambda c: c[0] < self.halt, body, start)
        return {**regs, **stacks}

    def grouped_switch_loop(self, state: State, iterations: Any) -> State:
        """The switch over split kernels, the carry (next block, register groups, stacks): each
        branch returns its block's write slots and padded write requests (see the module
        docstring), applied after the switch."""
        regs, stacks = separate_stacks(state, self.stack_keys)
        counts = write_counts(self.kernels, stacks)
        layout = RegisterLayout.build(self.kernels, {key: (value.dtype, tuple(value.shape)) for key, value in regs.items()})
        groups = tuple(self.stack_rows([*(regs[key] for key in keys), self.like(0, regs[keys[0]])]) for keys in layout.groups)
        targets = tuple(self.constant(table) for table in layout.targets)
        branches = [self.grouped_branch(kernel, layout, block, regs, counts) for block, kernel in enumerate(self.kernels)]
        pc_group, pc_row = layout.place["pc"]

        def body(carry: tuple[Any, Any, State]) -> tuple[Any, Any, State]:
            block, groups, stacks = carry
            slots, writes = self.switch(block, branches, groups, stacks)
            groups = list(groups)
            for g, values in enumerate(slots):
                rows = targets[g][block]
                for j, value in enumerate(values):
                    groups[g] = self.set_row(groups[g], rows[j], value)
            stacks = self.apply_writes(stacks, writes)
            return self.next_block(groups[pc_group][pc_row]), tuple(groups), stacks

        start = (self.next_block(regs["pc"]), groups, stacks)
        _, groups, stacks = self.at_most(iterations, lambda c: c[0] < self.halt, body, start)
        return {**{key: groups[g][row] for key, (g, row) in layout.place.items()}, **stacks}

    def split_branch(self, kernel: Any, template: State, counts: dict[str, int]) -> Callable[[State, State], Any]:
        """A switch branch running split `kernel`: registers with exactly the keys, dtypes and
        shapes of `template`, and `counts[key]` write requests per stack (`padded_requests`)."""

        def branch(regs: State, stacks: State) -> tuple[State, Writes]:
            out, writes = kernel.split(dict(regs), stacks)
            result = {key: self.like(out.get(key, value), template[key]) for key, value in regs.items()}
            return result, self.padded_requests(kernel, writes, stacks, counts, template["pc"])

        return branch

    def grouped_branch(
        self, kernel: Any, layout: RegisterLayout, block: int, template: State, counts: dict[str, int]
    ) -> Callable[[Any, State], Any]:
        """A switch branch running split `kernel` on the registers unpacked from the groups: per
        group `layout.slots[g]` values (the registers the block writes, in slot order, then
        zeros), and `counts[key]` write requests per stack (`padded_requests`)."""
        written = layout.written[block]
        declared = {key for keys in written for key in keys}

        def branch(groups: Any, stacks: State) -> tuple[tuple[tuple[Any, ...], ...], Writes]:
            current = LazyRegisters(lambda key: groups[layout.place[key][0]][layout.place[key][1]])
            out, writes = kernel.split(current, stacks)
            for key in out:
                assert key in declared or current.unchanged(key), f"{kernel.__name__} wrote {key} undeclared"
            slots = []
            for g, keys in enumerate(written):
                like = template[layout.groups[g][0]]
                values = [self.like(out[key], like) for key in keys]
                values += [self.like(0, like)] * (layout.slots[g] - len(keys))
                slots.append(tuple(values))
            return tuple(slots), self.padded_requests(kernel, writes, stacks, counts, template["pc"])

        return branch

    def padded_requests(self, kernel: Any, writes: Writes, stacks: State, counts: dict[str, int], pc: Any) -> Writes:
        """Exactly `counts[key]` write requests `(rows [B], value [B, ...])` per stack: the
        kernel's own, then requests that write nothing (rows = D). `pc` is an int32 [B] template."""
        padded = {}
        for key, count in counts.items():
            stack = stacks[key]
            requests = [(self.like(rows, pc), self.like(value, stack[0])) for rows, value in writes.get(key, [])]
            assert len(requests) <= count, f"{kernel.__name__} made more write requests to {key} than planned"
            if len(requests) < count:
                nothing = (self.like(np.int32(stack.shape[0]), pc), self.like(0, stack[0]))
                requests += [nothing] * (count - len(requests))
            padded[key] = requests
        return padded

    # ----- counters -----------------------------------------------------------------------------
    def count(self, counters: dict[str, Any], block: int, here: Any) -> dict[str, Any]:
        """The counters after `block` ran (or was skipped) for the members `here`."""
        members = self.sum(self.cast(here, np.int64))
        return {
            **counters,
            "block_steps": self.add_at(counters["block_steps"], block, self.cast(members > 0, np.int64)),
            "block_members": self.add_at(counters["block_members"], block, members),
            "member_steps": counters["member_steps"] + self.cast(here, np.int64),
            "ran": counters["ran"] | here,
        }

    def end_sweep(self, counters: dict[str, Any]) -> dict[str, Any]:
        """The counters after a sweep: one more sweep, and one more for each member that ran."""
        return {
            **counters,
            "sweeps": counters["sweeps"] + 1,
            "member_sweeps": counters["member_sweeps"] + self.cast(counters["ran"], np.int64),
            "ran": self.like(False, counters["ran"]),
        }


def zero_counters(zeros: Callable[[tuple[int, ...], Any], Any], num_blocks: int, batch: int) -> dict[str, Any]:
    """The counters of a run with `collect_stats` before it starts, made with `zeros(shape, dtype)`."""
    return {
        "sweeps": zeros((), np.int64),
        "block_steps": zeros((num_blocks,), np.int64),
        "block_members": zeros((num_blocks,), np.int64),
        "member_steps": zeros((batch,), np.int64),
        "member_sweeps": zeros((batch,), np.int64),
        "ran": zeros((batch,), np.bool_),
    }


def run_stats(counters: Mapping[str, Any]) -> RunStats:
    """The `RunStats` of a run's counters (`zero_counters`, updated by `TracedLoop.count`)."""
    block_steps = np.asarray(counters["block_steps"]).tolist()
    return RunStats(
        batch_size=int(counters["member_steps"].shape[0]),
        steps=int(sum(block_steps)),
        block_steps=block_steps,
        block_members=np.asarray(counters["block_members"]).tolist(),
        member_steps=np.asarray(counters["member_steps"]).tolist(),
        sweeps=int(counters["sweeps"]),
        member_sweeps=np.asarray(counters["member_sweeps"]).tolist(),
    )
