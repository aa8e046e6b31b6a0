"""The machine state's layout and its masked updates, written once against the backend protocol.

The state is a flat `dict[str, array]`, every array with the batch dimension B:

    "pc"            int32 [B]        each member's program counter (halted members hold N)
    "pc_stack"      int32 [D, B]     saved return blocks (only when the program has vm.call)
    "pc_sp"         int32 [B]        per-member depth of pc_stack
    "r:<var>"       [B, *shape]      a register, or the top (current value) of a stack variable
    "s:<var>"       [D, B, *shape]   the saved values of a stack variable
    "sp:<var>"      int32 [B]        saved values of <var> (variables pushed and popped together
                                     by the same ops share one pointer, named after the first)
    "overflow"      int32 [B]        0, or 1 + the index of the block whose push overflowed
    "underflow"     int32 [B]        likewise for a pop/peek/return with nothing saved
    "steps_left"    int32 [B]        blocks a member may still run (only with `max_steps`)
    "stopped_at"    int32 [B]        -1, or the block a member stood at when its steps ran out

Backends know only "pc" and which keys are stacks (`is_stack_key`; the machine passes them to
`Backend.run` as `stack_keys`).

A kernel works on a `Frame`: the small per-member arrays of the state (pc, registers, stack
pointers, error flags: `regs`), read-only views of the stacks (`stacks`), and the stack writes
the block requests (`writes`). Stacks are never updated inside a kernel: a push appends a write
request `(rows, value)` (scatter `value[b]` to `stack[rows[b], b]`; rows equal to the depth D
mean "no write") and advances the stack pointer; a pop/peek reads the top, either the value a
push of the same block left pending, or the stack row below the pointer. The backend applies the
requests after the kernel, in order, as in-place scatters. This keeps the big `[D, B, ...]`
arrays out of traced conditionals (XLA would copy them through every `lax.switch` branch).

`mask` is bool `[B]`, true for the members standing at the running block. Reads see every row,
only these updates are masked. A push onto a full stack, or a pop/peek/return from an empty one,
writes nothing out of range: it marks the member, and `finish` records `1 + block` in its
`overflow` or `underflow` flag and stops it (pc := halt) so the run can finish.

A run with lanes (`abir.vm.lanes.run_lanes`: more members than rows) adds the keys of `LaneLayout`
(prefix `lanes:`): the arguments of every member, a ring of finished results per lane, output
and error flag, and which member each row (lane) runs. Its members halt at the refill block
(`LaneRefill`, index `LaneLayout.block`, one past the program's blocks), which puts each
arriving lane's results in its rings and starts the next unstarted member there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from abir.array_ops import ops_for
from abir.backends.base import Backend, Span, State, Writes, separate_stacks, span_row

OVERFLOW = "overflow"
UNDERFLOW = "underflow"
PC = "pc"
PC_STACK = "pc_stack"
PC_SP = "pc_sp"
STEPS_LEFT = "steps_left"
STOPPED_AT = "stopped_at"
STEP_LIMIT_KEYS = (STEPS_LEFT, STOPPED_AT)
"""Per-member registers of a run with a step limit (`count_step`)."""


def register_key(var: str) -> str:
    return f"r:{var}"


def stack_key(var: str) -> str:
    return f"s:{var}"


def pointer_key(var: str) -> str:
    return f"sp:{var}"


def flag_normal_value(key: str) -> int:
    """What a member's error flag (`OVERFLOW`, `UNDERFLOW`, `STOPPED_AT`) holds when nothing
    went wrong: -1 for `STOPPED_AT` (0 is a block), else 0."""
    return -1 if key == STOPPED_AT else 0


def is_stack_key(key: str) -> bool:
    """Whether a state key names a `[D, B, ...]` stack."""
    return key == PC_STACK or key.startswith("s:")


def split_state(state: State) -> tuple[State, State]:
    """(regs, stacks): the per-member arrays and the stacks of a full state."""
    return separate_stacks(state, {key for key in state if is_stack_key(key)})


class Frame:
    """The working state of one kernel execution (see the module docstring)."""

    __slots__ = ("overflow", "pending", "regs", "stacks", "underflow", "writes")

    def __init__(self, regs: State, stacks: Mapping[str, Any]):
        self.regs = regs
        self.stacks = stacks
        self.writes: Writes = {}
        self.pending: dict[str, list[int]] = {}
        """Per stack, the indices in `writes` of the requests a pop or peek may still read."""
        self.overflow: Any = None
        self.underflow: Any = None


BOOL = np.dtype(np.bool_)
INT32 = np.dtype(np.int32)
_INT32_SCALARS: dict[int, np.int32] = {}


def _int(backend: Backend, value: int) -> Any:
    """An int32 scalar operand (every backend's prims and `where` accept NumPy scalars)."""
    scalar = _INT32_SCALARS.get(value)
    if scalar is None:
        scalar = _INT32_SCALARS[value] = np.int32(value)
    return scalar


def _prim(backend: Backend, name: str, *args: Any, dtype: Any = BOOL) -> Any:
    return backend.builtin_prim(name, args, dtype)


def _either(backend: Backend, old: Any, new: Any) -> Any:
    return new if old is None else backend.builtin_prim("logical_or", (old, new), BOOL)


def block_mask(backend: Backend, regs: State, block: int) -> Any:
    """The members whose program counter is `block`."""
    return _prim(backend, "equal", regs[PC], _int(backend, block))


def write(backend: Backend, frame: Frame, var: str, value: Any, mask: Any) -> None:
    """`vm.write`: the masked members' current value of `var` becomes `value`."""
    key = register_key(var)
    frame.regs[key] = backend.where(mask, value, frame.regs[key])


def set_pc(backend: Backend, frame: Frame, target: Any, mask: Any) -> None:
    """pc := target (an int or a per-member int32 array) for the masked members."""
    if isinstance(target, int):
        target = _int(backend, target)
    frame.regs[PC] = backend.where(mask, target, frame.regs[PC])


def stack_push(
    backend: Backend, frame: Frame, pointer: str, saves: Sequence[tuple[str, Any]], mask: Any
) -> None:
    """Request `stack[sp[b], b] = value[b]` for each `(stack, value)` of `saves` (stacks that
    share the stack pointer `pointer`) and each masked member, and advance the pointer once."""
    prim = backend.builtin_prim
    depth = _int(backend, int(frame.stacks[saves[0][0]].shape[0]))
    sp = frame.regs[pointer]
    good = prim("logical_and", (mask, prim("less", (sp, depth), BOOL)), BOOL)
    rows = prim("where", (good, sp, depth), INT32)
    for stack, value in saves:
        requests = frame.writes.setdefault(stack, [])
        frame.pending.setdefault(stack, []).append(len(requests))
        requests.append((rows, value))
    frame.regs[pointer] = prim("add", (sp, good), INT32)
    bad = prim("not_equal", (mask, good), BOOL)  # masked, but the stack is full
    frame.overflow = _either(backend, frame.overflow, bad)


def stack_top(
    backend: Backend,
    frame: Frame,
    pointer: str,
    stacks: Sequence[str],
    mask: Any,
    drop: bool,
    keep: bool = False,
) -> tuple[list[Any], Any]:
    """The last saved value of each member on each of `stacks` (which share the stack pointer
    `pointer`); `drop`: and remove them for the masked members, moving the pointer once.

    Returns (values, valid) where `valid` is the masked members that had a saved value; the
    others are marked for `underflow`. A value pushed earlier in the same block is still a
    pending write request: it is read from there, and a drop cancels the request, or with
    `keep` (members left the block by a side exit since the push: theirs must still be written)
    only the dropping members' part of it."""
    prim = backend.builtin_prim
    sp = frame.regs[pointer]
    good = prim("logical_and", (mask, prim("greater", (sp, _int(backend, 0)), BOOL)), BOOL)
    top = None
    values = []
    for stack in stacks:
        pending = frame.pending.get(stack)
        if pending:
            requests = frame.writes[stack]
            index = pending.pop() if drop else pending[-1]
            rows, value = requests[index]
            values.append(value)
            if drop and keep:
                depth = _int(backend, int(frame.stacks[stack].shape[0]))
                requests[index] = (prim("where", (good, depth, rows), INT32), value)
            elif drop:
                del requests[index]
            continue
        if top is None:
            top = prim("subtract", (sp, _int(backend, 1)), INT32)
        values.append(backend.stack_read(frame.stacks[stack], top))
    if drop:
        frame.regs[pointer] = prim("subtract", (sp, good), INT32)
    bad = prim("not_equal", (mask, good), BOOL)  # masked, but nothing saved
    frame.underflow = _either(backend, frame.underflow, bad)
    return values, good


def push(backend: Backend, frame: Frame, names: Sequence[str], pointer: str, mask: Any) -> None:
    """`vm.push` of the variables `names`, which share the stack pointer `pointer`: save their
    current values (they stay current too)."""
    saves = [(stack_key(name), frame.regs[register_key(name)]) for name in names]
    stack_push(backend, frame, pointer, saves, mask)


def restore(backend: Backend, frame: Frame, names: Sequence[str], pointer: str, mask: Any, drop: bool) -> None:
    """`vm.pop` (drop) or `vm.peek` of the variables `names`, which share the stack pointer
    `pointer`: their last saved values become current."""
    values, valid = stack_top(backend, frame, pointer, [stack_key(name) for name in names], mask, drop)
    for name, value in zip(names, values, strict=True):
        write(backend, frame, name, value, valid)


def call(backend: Backend, frame: Frame, target: int, return_target: int, mask: Any) -> None:
    """`vm.call`: save `return_target` on the program-counter stack, then pc := target."""
    stack_push(backend, frame, PC_SP, [(PC_STACK, _int(backend, return_target))], mask)
    set_pc(backend, frame, target, mask)


@dataclass(frozen=True)
class Descent:
    """What a `vm.descend` does (its op's properties, with the state keys it touches)."""

    counter: str
    step: int
    predicate: str
    offset: int
    bound: int
    update_first: bool
    pushes: tuple[tuple[str, str, bool, bool], ...]
    """(variable, its stack pointer key, pushes the updated counter, pushed before the exit test)."""
    exit_target: int
    return_target: int


def descend(backend: Backend, frame: Frame, descent: Descent, mask: Any) -> None:
    """`vm.descend`: every iteration of a self-calling block at once, for the masked members.

    Iteration i starts with the counter at `c0 + i * step`; the first one whose test holds
    (`descent_length`) is the last: it makes only the pushes before the exit test. Each stack
    gets its pushes as one request for a `Span` of rows per member; a member that would push
    beyond a stack's depth overflows, as its iterations would."""
    prim = backend.builtin_prim
    start = frame.regs[register_key(descent.counter)]
    pc_depth = int(frame.stacks[PC_STACK].shape[0])
    full = descent_length(backend, descent, start, pc_depth + 1)
    full = backend.where(mask, full, _int(backend, 0))
    bad = _span_write(backend, frame, PC_STACK, PC_SP, full, mask, _int(backend, descent.return_target))
    for name, pointer, updated, early in descent.pushes:
        count = prim("add", (full, _int(backend, 1)), INT32) if early else full
        if name == descent.counter:
            step = _counter_step(backend, descent, start)
            pushed = _span_write(backend, frame, stack_key(name), pointer, count, mask, start, step, int(updated))
        else:
            pushed = _span_write(backend, frame, stack_key(name), pointer, count, mask, frame.regs[register_key(name)])
        bad = prim("logical_or", (bad, pushed), BOOL)
    counter_span = Span(None, None, _counter_step(backend, descent, start), _int(backend, int(descent.update_first)))
    final = span_row(backend, counter_span, start, full, backend.type_of(start).dtype)  # the counter's value after `full` moves
    write(backend, frame, descent.counter, final, mask)
    set_pc(backend, frame, descent.exit_target, mask)
    frame.overflow = _either(backend, frame.overflow, bad)


def _counter_step(backend: Backend, descent: Descent, start: Any) -> Any:
    """The counter's step, in the counter's dtype."""
    return np.asarray(descent.step, np.dtype(backend.type_of(start).dtype))


def descent_length(backend: Backend, descent: Descent, start: Any, never: int) -> Any:
    """Per member, the first i >= 0 with `start + offset + i * step <predicate> bound` (int32),
    or `never` when no i does. The counter moves by a constant, so each comparison has a closed
    form: an equality is met at one i or none, an order once crossed stays."""
    prim = backend.builtin_prim
    dtype = np.dtype(backend.type_of(start).dtype)
    step, predicate = descent.step, descent.predicate
    x = prim("add", (start, np.asarray(descent.offset, dtype)), dtype)
    bound = descent.bound + {"greater": 1, "less": -1}.get(predicate, 0)  # integers: > K is >= K + 1
    gap = prim("subtract", (np.asarray(bound, dtype), x), dtype)  # bound - x
    zero = np.asarray(0, dtype)
    if predicate == "equal":
        steps = prim("floor_divide", (gap, np.asarray(step, dtype)), dtype)
        exact = prim("equal", (prim("remainder", (gap, np.asarray(step, dtype)), dtype), zero), BOOL)
        reached = prim("logical_and", (exact, prim("greater_equal", (steps, zero), BOOL)), BOOL)
        found = steps
    elif predicate == "not_equal":
        reached = np.bool_(True)
        found = prim("where", (prim("equal", (gap, zero), BOOL), np.asarray(1, dtype), zero), dtype)
    else:  # x_i >= bound (greater, greater_equal) or x_i <= bound (less, less_equal)
        upward = predicate in ("greater", "greater_equal")
        already = prim("greater_equal" if upward else "less_equal", (x, np.asarray(bound, dtype)), BOOL)
        toward = step > 0 if upward else step < 0
        distance = gap if upward else prim("negative", (gap,), dtype)  # > 0 when not already there
        pace = abs(step)
        steps = prim("floor_divide", (prim("add", (distance, np.asarray(pace - 1, dtype)), dtype), np.asarray(pace, dtype)), dtype)
        found = prim("where", (already, zero, steps), dtype)
        reached = already if not toward else np.bool_(True)
    capped = prim("minimum", (found, np.asarray(never, dtype)), dtype)
    length = prim("where", (reached, capped, np.asarray(never, dtype)), dtype)
    return prim("astype", (length,), INT32)


def _span_write(
    backend: Backend,
    frame: Frame,
    stack: str,
    pointer: str,
    count: Any,
    mask: Any,
    value: Any,
    step: Any = None,
    shift: int = 0,
) -> Any:
    """Push `count[b]` values per masked member at once: row `sp[b] + j` of `stack` gets
    `value`, or with a `step`, `value + (j + shift) * step` (j from 0; `Span`); `pointer` moves
    by `count`. Returns the masked members for whom they do not fit; such a member still writes
    the rows that fit, as its iterations would have. The request's cost grows with the longest
    span in the batch, not with the stack's depth."""
    prim = backend.builtin_prim
    depth = _int(backend, int(frame.stacks[stack].shape[0]))
    sp = frame.regs[pointer]
    end = prim("add", (sp, count), INT32)
    fits = prim("less_equal", (end, depth), BOOL)
    room = prim("subtract", (depth, sp), INT32)
    written = prim("where", (mask, prim("minimum", (count, room), INT32), _int(backend, 0)), INT32)
    frame.writes.setdefault(stack, []).append((Span(sp, written, step, _int(backend, shift)), value))
    frame.regs[pointer] = backend.where(mask, prim("where", (fits, end, depth), INT32), sp)
    return prim("logical_and", (mask, prim("logical_not", (fits,), BOOL)), BOOL)


def return_(backend: Backend, frame: Frame, mask: Any) -> None:
    """`vm.return`: pc := the last saved return block, which is dropped."""
    (value,), valid = stack_top(backend, frame, PC_SP, [PC_STACK], mask, drop=True)
    set_pc(backend, frame, value, valid)


def finish(backend: Backend, frame: Frame, block: int, halt_index: int) -> None:
    """Members whose push overflowed (pop underflowed) in this block get `1 + block` in their
    `overflow` (`underflow`) flag and stop: pc := halt_index. (A member with a flag has halted,
    so it never runs another block: a flag, once set, is never overwritten.)"""
    failed = None
    for key, bad in ((OVERFLOW, frame.overflow), (UNDERFLOW, frame.underflow)):
        if bad is not None and not backend.known_none(bad):
            frame.regs[key] = backend.where(bad, _int(backend, block + 1), frame.regs[key])
            failed = _either(backend, failed, bad)
    if failed is not None:
        set_pc(backend, frame, halt_index, failed)


def count_step(backend: Backend, regs: State, mask: Any, halt_index: int) -> None:
    """The members at the block (`mask`) used one of their `steps_left`. One that has none
    left and has not halted stops where it stands: its next block goes to `stopped_at`, its pc
    to `halt_index`, so every execution ends the run with the same members stopped at the same
    blocks (a member's block sequence does not depend on how the backend schedules blocks)."""
    left = backend.where(mask, backend.builtin_prim("subtract", [regs[STEPS_LEFT], _int(backend, 1)], INT32),
                         regs[STEPS_LEFT])  # fmt: skip
    pc = regs[PC]
    exhausted = backend.builtin_prim("less_equal", [left, _int(backend, 0)], BOOL)
    running = backend.builtin_prim("less", [pc, _int(backend, halt_index)], BOOL)
    stop = backend.builtin_prim("logical_and", [mask, backend.builtin_prim("logical_and", [exhausted, running], BOOL)], BOOL)
    regs[STEPS_LEFT] = left
    regs[STOPPED_AT] = backend.where(stop, pc, regs[STOPPED_AT])
    regs[PC] = backend.where(stop, _int(backend, halt_index), pc)



# ----- lanes: more members than rows ------------------------------------------------------------

LANE_MEMBER = "lanes:member"
"""int32 [L]: the member each lane runs (-1 when it has none)."""
LANE_NEXT = "lanes:next"
"""int32 [1]: the first member not started yet."""
LANE_BASE = "lanes:base"
"""int32 [1]: the member whose arguments are row 0 of the pending arguments (`pending_key`)."""
LANE_END = "lanes:end"
"""int32 [1]: one past the last member whose arguments are pending: no lane starts it."""
LANE_MORE = "lanes:more"
"""int32 [1]: 1 when more members will come (a stream): the run pauses once every pending
member has started, for the caller to put the next ones in place."""
LANE_FILLED = "lanes:filled"
"""int32 [1]: how many rows of the rings (`ring_key`) the refill block has written."""
LANE_BUDGET = "lanes:budget"
"""int32 [1]: refill block runs left before the run pauses (`LaneRefill`)."""
LANE_SAVED_PC = "lanes:saved_pc"
"""int32 [L]: each lane's pc when the run paused (every pc is then the final halt)."""
LANE_MAX_STEPS = "lanes:max_steps"
"""int32 [1]: the `steps_left` a member starts with (only with `max_steps`)."""
RING_MEMBER = "lanes:ring:member"
"""int32 [K, L]: which member each ring entry holds, -1 for none (`ring_key`)."""


def pending_key(position: int) -> str:
    """The key of input `position`'s arguments of the members `LANE_BASE` to `LANE_END`
    (`[C, ...]`, C at least their number), or `[1, ...]` when every member shares it."""
    return f"lanes:in:{position}"


def ring_key(key: str) -> str:
    """The key of the `[K, L, ...]` ring of register `key`'s final values: the j-th run of the
    refill block writes row j, lane l's entry holding the value of the member lane l finished
    there (`RING_MEMBER` names it, -1 where the lane finished none), until the caller empties
    the rings (`LANE_FILLED` back to 0). One row per refill is a single slice update, where a
    row per lane's member would be a scatter (written column by column in a JAX loop compiled
    as one kernel)."""
    return f"lanes:ring:{key}"


@dataclass(frozen=True)
class LaneLayout:
    """What the refill block of a run with lanes reads and writes.

    `block` is where members halt (one past the program's blocks), `block + 1` the final halt of
    a lane with nothing left to run. `inputs` are the input register keys (argument `i` of
    member m is row `m - LANE_BASE` of `pending_key(i)`, or its only row when `shared[i]`),
    `results` the keys whose final value each member keeps (the outputs, then the error flags),
    `resets` every other per-lane key with the value a starting member finds there (as in
    `Machine.initial_state`), and `ring_rows` K (`ring_key`).

    A starting member begins at `start`: the entry, or where the blocks that only jump lead
    from it. `halts` are blocks from which such blocks lead to the halt: the refill takes
    their members as halted. `unreached` are blocks no member reaches (the entry when members
    start past it and no block jumps to it). A sweep runs neither (`skipped_blocks`)."""

    block: int
    ring_rows: int
    inputs: tuple[str, ...]
    shared: tuple[bool, ...]
    results: tuple[str, ...]
    resets: tuple[tuple[str, Any], ...]
    start: int = 0
    halts: tuple[int, ...] = ()
    unreached: tuple[int, ...] = ()

    def skipped_blocks(self) -> tuple[int, ...]:
        """The program's blocks a sweep of a run with lanes need not run."""
        return (*self.unreached, *self.halts)

    @property
    def final_halt(self) -> int:
        return self.block + 1

    def read_keys(self) -> tuple[str, ...]:
        """Every key the refill block reads."""
        steps = (LANE_MAX_STEPS,) if any(key == STEPS_LEFT for key, _ in self.resets) else ()
        pending = tuple(pending_key(position) for position in range(len(self.inputs)))
        return (*dict.fromkeys((*self.written_keys(), *self.results, *pending, *steps)),)

    def indexed_keys(self) -> tuple[str, ...]:
        """The members' arguments and the rings: read and written only at the rows a refill
        indexes, never whole in a sweep."""
        pending = tuple(pending_key(position) for position in range(len(self.inputs)))
        return (*pending, *map(ring_key, self.results), RING_MEMBER)

    def ring_keys(self) -> tuple[str, ...]:
        """The rings and their row count, written outside the refill's conditional."""
        return (*map(ring_key, self.results), RING_MEMBER, LANE_FILLED)

    def written_keys(self) -> tuple[str, ...]:
        """Every key the refill block may change."""
        own = (
            *(LANE_MEMBER, LANE_NEXT, LANE_FILLED, LANE_BUDGET, LANE_SAVED_PC),
            *(RING_MEMBER, LANE_BASE, LANE_END, LANE_MORE),
        )
        return (PC, *self.inputs, *(key for key, _ in self.resets), *own, *map(ring_key, self.results))


class LaneRefill:
    """The refill block of a run with lanes, as a split kernel (`abir.vm.kernels.BlockKernel`'s
    form, no stack writes): lanes whose member halted (pc = `layout.block`, or a block of
    `layout.halts`) put its results in their rings and take the next unstarted member, in
    member order, at `layout.start` with fresh registers and empty stacks; lanes with nothing
    left halt for good. `skipped_blocks` (`LaneLayout.skipped_blocks`) tells a sweeping loop
    which of the program's blocks to leave out.

    The refill runs under a conditional on a lane having arrived (or the budget below being
    spent), so a sweep in which no member halted costs a few reductions; the rings are
    written outside it (see `refill_lanes`).

    Every run of the block uses one unit of `LANE_BUDGET`; at zero, when a lane's ring is full,
    or when every pending member has started and more will come (`LANE_MORE`), the run pauses:
    every pc is saved in `LANE_SAVED_PC` and set to the final halt, so that the backend's loop
    returns and the caller can empty the rings and resume (`abir.vm.lanes.run_lanes`).
    `refills_lanes` tells a sweeping loop to run it at the end of every sweep. It writes
    nothing with a scatter of its own, only stack writes, which a JAX loop compiled as one
    kernel can make. `indexed_keys` are `LaneLayout.indexed_keys`: a backend sizing a sweep's
    state leaves them out."""

    refills_lanes = True

    def __init__(self, layout: LaneLayout, backend: Backend):
        self.layout = layout
        self.backend = backend
        self.writes: dict[str, int] = {}
        self.register_writes = layout.written_keys()
        self.indexed_keys = layout.indexed_keys()
        self.skipped_blocks = layout.skipped_blocks()
        self.__name__ = f"block_{layout.block}"

    def split(self, regs: State, stacks: State) -> tuple[State, Writes]:
        return refill_lanes(self.backend, self.layout, regs), {}

    def __call__(self, state: State) -> State:
        regs, stacks = split_state(state)
        return {**refill_lanes(self.backend, self.layout, regs), **stacks}


def refill_lanes(backend: Backend, layout: LaneLayout, regs: State) -> State:
    """`regs` (filled in place, as a kernel fills its registers) after a run of the refill
    block (see `LaneRefill`). The rings are written outside the conditional on refilling: a
    conditional copies the large arrays it passes through."""
    # read first: a lazily read register (`LazyRegisters`) must not be read in a nested trace
    current = {key: regs[key] for key in layout.read_keys()}
    pc = current[PC]
    arrived = _prim(backend, "equal", pc, _int(backend, layout.block))
    for block in layout.halts:
        arrived = _prim(backend, "logical_or", arrived, _prim(backend, "equal", pc, _int(backend, block)))
    due = _prim(backend, "greater", largest(_prim(backend, "astype", arrived, dtype=INT32)), _int(backend, 0))
    budget = _prim(backend, "subtract", current[LANE_BUDGET], _int(backend, 1), dtype=INT32)
    run = _prim(backend, "logical_or", due, _prim(backend, "less_equal", budget, _int(backend, 0)))
    regs.update(_stored(backend, layout, current, _prim(backend, "logical_and", arrived, run)))
    filled = _prim(backend, "add", current[LANE_FILLED], _prim(backend, "astype", run, dtype=INT32), dtype=INT32)
    regs[LANE_FILLED] = filled
    written = tuple(key for key in layout.written_keys() if key not in layout.ring_keys())

    def refill() -> tuple[Any, ...]:
        out = _refilled_and_paused(backend, layout, current, arrived, budget, filled)
        return tuple(_like(backend, out.get(key, current[key]), current[key]) for key in written)

    def wait() -> tuple[Any, ...]:
        out = {**current, LANE_BUDGET: budget, LANE_SAVED_PC: pc}
        return tuple(out[key] for key in written)

    chosen = backend.cond(_first(run), refill, wait)
    regs.update(zip(written, chosen, strict=True))
    return regs


def _stored(backend: Backend, layout: LaneLayout, current: State, storing: Any) -> State:
    """The rings with the results of the members of the lanes `storing` in their next row
    (`LANE_FILLED`; every sweep writes it, a row that no refill ran in is written again)."""
    member = current[LANE_MEMBER]
    finished = _prim(backend, "logical_and", storing, _prim(backend, "greater_equal", member, _int(backend, 0)))
    row = _first(current[LANE_FILLED])
    out = {ring_key(key): ring_write(current[ring_key(key)], row, current[key]) for key in layout.results}
    out[RING_MEMBER] = ring_write(current[RING_MEMBER], row, _prim(backend, "where", finished, member, _int(backend, -1), dtype=INT32))
    return out


def _refilled_and_paused(backend: Backend, layout: LaneLayout, current: State, arrived: Any, budget: Any, filled: Any) -> State:
    """The keys a refill changes (`_refilled`), and every pc at the final halt if the run
    pauses (see `LaneRefill`)."""
    out = _refilled(backend, layout, current, arrived)
    ring_full = _prim(backend, "greater_equal", filled, _int(backend, layout.ring_rows))
    all_started = _prim(backend, "greater_equal", out[LANE_NEXT], current[LANE_END])
    more = _prim(backend, "logical_and", _prim(backend, "greater", current[LANE_MORE], _int(backend, 0)), all_started)
    paused = _prim(backend, "logical_or", _prim(backend, "less_equal", budget, _int(backend, 0)), ring_full)
    paused = _prim(backend, "logical_or", paused, more)
    out[LANE_BUDGET] = budget
    out[LANE_SAVED_PC] = out[PC]
    out[PC] = _prim(backend, "where", paused, _int(backend, layout.final_halt), out[PC], dtype=INT32)
    return out


def _like(backend: Backend, value: Any, template: Any) -> Any:
    """`value` as an array of `template`'s dtype (both branches of a conditional must agree)."""
    return ops_for(template).cast(value, backend.type_of(template).dtype)


def _first(flags: Any) -> Any:
    """The scalar of a `[1]` array."""
    return flags[0]


def _refilled(backend: Backend, layout: LaneLayout, regs: State, arrived: Any) -> State:
    """The registers a refill changes: lanes that `arrived` start the next member, or halt
    for good when none is left."""
    end = regs[LANE_END]
    member = regs[LANE_MEMBER]
    out = {}
    arrived_ints = _prim(backend, "astype", arrived, dtype=INT32)
    rank = _prim(backend, "subtract", cumulative_sum(arrived_ints), _int(backend, 1), dtype=INT32)
    candidate = _prim(backend, "add", regs[LANE_NEXT], rank, dtype=INT32)
    start = _prim(backend, "logical_and", arrived, _prim(backend, "less", candidate, end))
    none_left = _prim(backend, "where", arrived, _int(backend, -1), member, dtype=INT32)
    out[LANE_MEMBER] = _prim(backend, "where", start, candidate, none_left, dtype=INT32)
    started = _prim(backend, "add", regs[LANE_NEXT], total(arrived_ints), dtype=INT32)
    out[LANE_NEXT] = _prim(backend, "minimum", started, end, dtype=INT32)
    source = _prim(backend, "where", start, _prim(backend, "subtract", candidate, regs[LANE_BASE], dtype=INT32), _int(backend, 0), dtype=INT32)
    first = _prim(backend, "multiply", source, _int(backend, 0), dtype=INT32)
    # a lane that arrived and starts no member halts for good, its registers never read again:
    # they are set as if it started one, by `arrived`, which needs no running sum (XLA would
    # compute the sum again in each register's update)
    for position, (key, shared) in enumerate(zip(layout.inputs, layout.shared, strict=True)):
        value = take_rows(regs[pending_key(position)], first if shared else source)
        out[key] = backend.where(arrived, value, regs[key])
    for key, initial in layout.resets:
        fresh = regs[LANE_MAX_STEPS] if key == STEPS_LEFT else initial
        out[key] = backend.where(arrived, fresh, regs[key])
    halted = _prim(backend, "where", arrived, _int(backend, layout.final_halt), regs[PC], dtype=INT32)
    out[PC] = _prim(backend, "where", start, _int(backend, layout.start), halted, dtype=INT32)
    return out


def ring_write(ring: Any, row: Any, values: Any) -> Any:
    """`ring` ([K, L, ...]) with row `row` (an int scalar below K) set to `values`; a NumPy
    ring, the run's own, is written in place."""
    if type(ring) is np.ndarray:
        ring[int(row)] = values
        return ring
    return ops_for(ring).set_row(ring, row, values)


def take_rows(array: Any, rows: Any) -> Any:
    """`array[rows]` (rows int32 [L] within range) on the array's own library."""
    ops = ops_for(array)
    return ops.gather(ops.expand_dims(array, 0), ops.expand_dims(rows, 0), 1)[0]


def cumulative_sum(ints: Any) -> Any:
    """The running sum of int32 [L] `ints`, as int32. Off NumPy it is log2(L) shifted adds
    (Hillis and Steele's scan): XLA lowers a running sum on CPU to a windowed reduction whose
    work grows with the square of the length, and a JAX loop compiled as one kernel runs every
    element of it."""
    if type(ints) is np.ndarray:
        return np.cumsum(ints, dtype=np.int32)
    ops = ops_for(ints)
    ints = ops.cast(ints, np.int32)
    lanes = int(ints.shape[0])
    shift = 1
    while shift < lanes:
        ints = ints + ops.concatenate([ints[:shift] * 0, ints[: lanes - shift]], 0)
        shift *= 2
    return ints


def total(ints: Any) -> Any:
    """The sum of int32 [L] `ints`, as int32 [1]."""
    ops = ops_for(ints)
    return ops.cast(ops.reduce("sum", ints, 0, keepdims=True), np.int32)


def largest(ints: Any) -> Any:
    """The largest of int32 [L] `ints`, as int32 [1]."""
    ops = ops_for(ints)
    return ops.cast(ops.reduce("max", ints, 0, keepdims=True), np.int32)
