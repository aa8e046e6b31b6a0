"""Runs with lanes: more members than rows, a halted member's lane taking the next member.

`run_lanes` runs every member of the input leaves on `lanes` rows: whenever a member halts, its
lane stores the member's results in a ring and starts the next member, inside the backend's loop
(the refill block, `state_ops.LaneRefill`). `lane_flushes` is the loop over chunks under it,
also used by calls that stream their members (`abir.calling`) and by runs over several devices
(`abir.lane_devices`).
"""


from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from abir.backends.base import (
    STATUS_KEY,
    Backend,
    LaunchPace,
    State,
    paced_by,
)
from abir.errors import StackOverflowError, StackUnderflowError, StepLimitError
from abir.vm import state_ops
from abir.vm.inputs import batch_size_of, prepare_inputs
from abir.vm.kernels import Jump
from abir.vm.machine import DEFAULT_MAX_STACK_DEPTH, Machine, check_max_steps, kept_for
from abir.vm.run_errors import raise_member_errors, raise_step_limit

FIRST_LANE_CHUNK = 64
"""Refill-block runs (sweeps, on JAX and TF) in the first chunk of a run with lanes; the next
chunks last about the backend's `launch_seconds` (`Machine.run_lanes`)."""
MAX_LANE_CHUNK = 2**30
MIN_RING_ROWS = 16
MAX_RING_ROWS = 4096
RING_BYTES = 4 << 20
"""A run with lanes keeps its finished members' results in rings of one row per refill
(`state_ops.ring_key`) taking about this many bytes, within `MIN_RING_ROWS` and
`MAX_RING_ROWS` rows; a full ring pauses the run to empty it, a chunk and a launch more. Every
launch copies the rings once (its inputs are not donated), so they are as large as lets a run
refill as often as its rule asks (`abir.backends.traced.sweep_costs`) in few chunks
(docs/performance.md#runs-with-lanes)."""


def run_lanes(
    machine: Machine,
    args: Sequence[Any],
    backend: Backend,
    lanes: int,
    max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH,
    cache_key: Any = None,
    max_steps: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> LaneOutcome:
    """Run the program for every member of the flat input leaves on `lanes` rows: whenever a
    member halts, its lane stores the member's results and starts the next member, inside
    the backend's loop (the refill block, `state_ops.LaneRefill`). The loop runs in chunks
    of about the backend's `launch_seconds` (one chunk when None): between chunks
    `on_progress(finished members)` is called, and a KeyboardInterrupt stops the run with
    the results finished by the last chunk. Errors of members (stack overflow, `max_steps`)
    do not stop the others; the outcome carries them."""
    if max_stack_depth < 1:
        raise ValueError(f"max_stack_depth must be at least 1, got {max_stack_depth}")
    check_max_steps(max_steps)
    with backend.scope(args):
        pending = pending_inputs(machine, args, backend)
        members = max(int(array.shape[0]) for array in pending)
        window = LaneWindow(pending, members, tuple(int(a.shape[0]) == 1 for a in pending))
        results = LaneResults(machine, members, max_steps is not None)
        interrupt = None
        try:
            for finished in lane_flushes(machine, iter([window]), backend, lanes, max_stack_depth, cache_key, max_steps):
                results.put(finished)
                if on_progress is not None:
                    on_progress(results.count)
        except KeyboardInterrupt as stopped:
            interrupt = stopped
        outputs = [
            backend.asarray(results.values[state_ops.register_key(name)], machine.variables[name].type.dtype)
            for name in machine.outputs
        ]
        flags = {key: results.values[key] for key in results.flag_keys}
        error: BaseException | None = interrupt
        if error is None and results.flagged:
            error = lane_member_errors(machine, backend, flags, max_stack_depth, max_steps)
        return LaneOutcome(outputs, results.finished, flags, error)


def lane_flushes(
    machine: Machine,
    windows: Iterator[LaneWindow],
    backend: Backend,
    lanes: int,
    max_stack_depth: int,
    cache_key: Any,
    max_steps: int | None,
) -> Iterator[FinishedMembers]:
    """Run the members of `windows` (blocks of members' arguments, numbered on from 0) on
    `lanes` rows, in chunks (see `run_lanes`); yield the members each chunk finished. A
    window's arguments are put in place once every member of the one before has started
    (the run pauses for it), so the lanes never drain between windows."""
    first = next(windows)
    upcoming = next(windows, None)
    counting = max_steps is not None
    layout = cached_lane_layout(machine, backend, first, lanes, max_stack_depth, counting)
    state = initial_lane_state(machine, backend, first, layout, lanes, max_stack_depth, max_steps, upcoming is not None)
    kernels = [*machine.kernels(backend, counting), state_ops.LaneRefill(layout, backend)]
    shapes = tuple(tuple(int(d) for d in a.shape) for a in first.arrays)
    key = None if cache_key is None else ("abir.lanes", cache_key, layout.ring_rows, shapes, counting)
    pace = lane_pace(machine, backend, key)
    chunk = pace.chunk if backend.launch_seconds is not None else MAX_LANE_CHUNK
    end = first.count
    launch_pace = pace.launches  # a chunk's run begins with a launch as long as the chunks before allow
    while True:
        state[state_ops.LANE_BUDGET] = np.array([chunk], np.int32)
        start = time.perf_counter()
        with paced_by(launch_pace):
            state = dict(backend.run(kernels, state, layout.final_halt, key, machine.run_cache, machine.stack_keys, {}))
        state.pop(STATUS_KEY, None)
        machine.last_stats = backend.last_stats
        finished = _take_finished(machine, backend, state, layout)
        if finished is not None:
            yield finished
        saved = np.array(backend.to_numpy(state[state_ops.LANE_SAVED_PC]))
        all_started = int(backend.to_numpy(state[state_ops.LANE_NEXT])[0]) >= end
        if upcoming is not None and all_started:
            end = _next_window(machine, backend, state, layout, upcoming, end, saved)
            upcoming = next(windows, None)
            state[state_ops.LANE_MORE] = np.array([int(upcoming is not None)], np.int32)
        elif int(saved.min()) >= layout.final_halt:
            return
        state[state_ops.PC] = saved
        used = chunk - int(backend.to_numpy(state[state_ops.LANE_BUDGET])[0])
        if backend.launch_seconds is not None and used > 0:
            per_second = used / max(time.perf_counter() - start, 1e-4)
            chunk = pace.chunk = int(min(max(per_second * backend.launch_seconds, FIRST_LANE_CHUNK), MAX_LANE_CHUNK))


@dataclass
class LanePace:
    """How long the chunks of a run with lanes last (`lane_flushes`): `chunk`, the refill-block
    runs of the next chunk, and `launches`, the pace of the backend's launches (`paced_by`)."""

    chunk: int = FIRST_LANE_CHUNK
    launches: LaunchPace = dataclasses.field(default_factory=LaunchPace)


def lane_pace(machine: Machine, backend: Backend, key: Any) -> LanePace:
    """The pace the runs of compiled loop `key` on `backend` left, kept with the program's
    compiled runs (`Machine.run_cache`), so that a call after the first begins with chunks and
    launches as long as `launch_seconds` allows, not with `FIRST_LANE_CHUNK` refills and the
    backend's first, short launch (each one more launch, and more chunks for the host to
    empty); a fresh one for a run without a key."""
    if key is None:
        return LanePace()
    return kept_for(backend, machine.run_cache, ("abir.lanes.pace", key), LanePace)


def _next_window(
    machine: Machine, backend: Backend, state: State, layout: state_ops.LaneLayout, window: LaneWindow, end: int, saved: np.ndarray
) -> int:
    """Put `window`'s arguments in place as members `end` on (every member before has
    started); lanes that halted for lack of members go back to the refill block. The new end."""
    for position, array in enumerate(window.arrays):
        state[state_ops.pending_key(position)] = array
    state[state_ops.LANE_BASE] = np.array([end], np.int32)
    state[state_ops.LANE_END] = np.array([end + window.count], np.int32)
    saved[saved >= layout.final_halt] = layout.block
    return end + window.count


def _take_finished(machine: Machine, backend: Backend, state: State, layout: state_ops.LaneLayout) -> FinishedMembers | None:
    """The members in the rings of `state` (host copies of their results), the rings
    emptied (`LANE_FILLED` back to 0); None when they hold none."""
    rows = int(backend.to_numpy(state[state_ops.LANE_FILLED])[0])
    if rows == 0:
        return None
    # whole rings to the host, sliced there: a slice on the device compiles per length
    members = np.asarray(backend.to_numpy(state[state_ops.RING_MEMBER]))[:rows].reshape(-1)
    held = np.flatnonzero(members >= 0)
    taken = members[held]
    count = len(taken)
    values = {}
    for key in layout.results:
        ring = np.asarray(backend.to_numpy(state[state_ops.ring_key(key)]))[:rows]
        if key in lane_flag_keys(True) and not (ring != state_ops.flag_normal_value(key)).any():
            values[key] = np.full(count, state_ops.flag_normal_value(key), ring.dtype)  # no member's error
        else:
            values[key] = ring.reshape(-1, *ring.shape[2:])[held]
    for key in lane_flag_keys(state_ops.STOPPED_AT in layout.results):
        if key not in values:  # a flag the program cannot set (`settable_flag_keys`)
            values[key] = np.full(count, state_ops.flag_normal_value(key), np.int32)
    state[state_ops.LANE_FILLED] = np.zeros(1, np.int32)
    return FinishedMembers(taken, values)


def pending_inputs(machine: Machine, args: Sequence[Any], backend: Backend) -> list[Any]:
    """Each input leaf checked and cast to its input type, as a backend array of its own
    rows: every member's (N) or one shared by all (1)."""
    types = [machine.variables[name].type for name in machine.inputs]
    if len(args) != len(types):
        raise TypeError(f"the program takes {len(types)} input(s) ({', '.join(machine.inputs)}), got {len(args)}")
    batch_size_of(
        f"'{machine.name}'",
        [tuple(getattr(a, "shape", ())) for a in args],
        lambda: [f"input {n!r}" for n in machine.inputs],
    )
    pending = []
    for name, want, leaf in zip(machine.inputs, types, args, strict=True):
        _, (array,) = prepare_inputs([name], [want], [leaf], backend, for_run=True)
        pending.append(backend.asarray(array, np.dtype(want.dtype)))
    return pending


def cached_lane_layout(
    machine: Machine, backend: Backend, window: LaneWindow, lanes: int, max_stack_depth: int, counting: bool
) -> state_ops.LaneLayout:
    """`lane_layout`, kept with the program's compiled runs (`Machine.run_cache`) for every call
    of the same lanes, stack depth, counting, shared arguments and ring sizes."""
    key = ("abir.lanes.layout", lanes, max_stack_depth, counting, window.shared, RING_BYTES, MIN_RING_ROWS, MAX_RING_ROWS)
    return kept_for(backend, machine.run_cache, key, lambda: lane_layout(machine, window, lanes, max_stack_depth, counting))


def lane_layout(
    machine: Machine, window: LaneWindow, lanes: int, max_stack_depth: int, counting: bool
) -> state_ops.LaneLayout:
    """What the refill block of a run on `lanes` rows, of members in windows like
    `window`, reads and resets."""
    results = (*(state_ops.register_key(name) for name in machine.outputs), *settable_flag_keys(machine, counting))
    shapes = machine.state_shapes(lanes, max_stack_depth)
    inputs = tuple(state_ops.register_key(name) for name in machine.inputs)
    # a register no block writes keeps, for every member, the value the run began with
    written = {key for plan in machine.plans for key in plan.register_writes}
    resets = tuple(
        (key, np.full((), state_ops.flag_normal_value(key), dtype))
        for key, (_, dtype) in shapes.items()
        if key in written and key != state_ops.PC and not state_ops.is_stack_key(key) and key not in inputs
    )
    if counting:
        resets += ((state_ops.STEPS_LEFT, np.zeros((), np.int32)), (state_ops.STOPPED_AT, np.full((), -1, np.int32)))
    ring_rows = min(max(RING_BYTES // (lanes * _lane_result_bytes(machine, shapes, results)), MIN_RING_ROWS), MAX_RING_ROWS)
    layout = state_ops.LaneLayout(machine.num_blocks, ring_rows, inputs, window.shared, results, resets)
    # with max_steps every block a member passes uses a step, the blocks that only jump too
    return layout if counting else dataclasses.replace(layout, **jumps_passed(machine))


def jumps_passed(machine: Machine) -> dict[str, Any]:
    """What a run with lanes need not run of the program's blocks that only jump (a call or
    return made a jump, the halt): `LaneLayout`'s `start` (where they lead from the entry),
    `halts` (the blocks from which they lead to the halt) and `unreached` (the entry, when
    members start past it and no block jumps to it). Each would otherwise run once per sweep
    over every lane for the members a refill starts or ends."""
    halt = machine.num_blocks

    def leads_to(block: int) -> int:
        seen = set()
        while block < halt and block not in seen and len(plan := machine.plans[block].instructions) == 1 and isinstance(plan[0], Jump):
            seen.add(block)
            block = plan[0].target
        return block

    start = leads_to(0)
    halts = tuple(block for block in range(halt) if leads_to(block) == halt)
    entered = any(0 in plan.successors for plan in machine.plans)
    unreached = (0,) if start != 0 and not entered and 0 not in halts else ()
    return {"start": start if start < halt else 0, "halts": halts, "unreached": unreached}


def _lane_result_bytes(machine: Machine, shapes: Mapping[str, tuple[tuple[int, ...], np.dtype]], results: Sequence[str]) -> int:
    """The bytes of one member's entries in the rings: its results and its number."""
    total = np.dtype(np.int32).itemsize
    for key in results:
        if key in shapes:
            shape, dtype = shapes[key][0][1:], shapes[key][1]
        elif key in state_ops.STEP_LIMIT_KEYS:
            shape, dtype = (), np.dtype(np.int32)
        else:  # an input register returned as an output
            var = machine.variables[key.removeprefix(state_ops.register_key(""))].type
            shape, dtype = tuple(var.shape), var.dtype
        total += math.prod(shape) * np.dtype(dtype).itemsize
    return total


def initial_lane_state(
    machine: Machine,
    backend: Backend,
    window: LaneWindow,
    layout: state_ops.LaneLayout,
    lanes: int,
    max_stack_depth: int,
    max_steps: int | None,
    more: bool,
) -> State:
    """Every lane at the refill block without a member (the first refill starts them), the
    arguments of `window`'s members pending and the rings empty (`state_ops.LaneLayout`).
    The zero arrays come from `Backend.zero_state` (made on the device where the backend can),
    the few others as NumPy arrays, which a backend's run takes as inputs."""
    # the input registers' values are the first refill's to set
    unset = [np.zeros((lanes, *(int(d) for d in a.shape[1:])), np.dtype(backend.type_of(a).dtype)) for a in window.arrays]
    state = machine.initial_state(backend, unset, lanes, max_stack_depth, max_steps)
    zeros: dict[str, tuple[tuple[int, ...], np.dtype]] = {
        state_ops.LANE_NEXT: ((1,), np.dtype(np.int32)),
        state_ops.LANE_BASE: ((1,), np.dtype(np.int32)),
        state_ops.LANE_FILLED: ((1,), np.dtype(np.int32)),
        state_ops.LANE_SAVED_PC: ((lanes,), np.dtype(np.int32)),
        state_ops.RING_MEMBER: ((layout.ring_rows, lanes), np.dtype(np.int32)),
    }
    for key in layout.results:
        template = state[key]
        zeros[state_ops.ring_key(key)] = ((layout.ring_rows, *(int(d) for d in template.shape)), np.dtype(backend.type_of(template).dtype))
    state.update(backend.zero_state(zeros))
    state[state_ops.PC] = np.full(lanes, layout.block, np.int32)
    state[state_ops.LANE_MEMBER] = np.full(lanes, -1, np.int32)
    state[state_ops.LANE_END] = np.array([window.count], np.int32)
    state[state_ops.LANE_MORE] = np.array([int(more)], np.int32)
    state[state_ops.LANE_BUDGET] = np.array([MAX_LANE_CHUNK], np.int32)
    if max_steps is not None:
        state[state_ops.LANE_MAX_STEPS] = np.array([max_steps], np.int32)
    for position, array in enumerate(window.arrays):
        state[state_ops.pending_key(position)] = array
    return state


def lane_member_errors(
    machine: Machine, backend: Backend, flags: Mapping[str, np.ndarray], max_stack_depth: int, max_steps: int | None
) -> Exception | None:
    """The error the members' flags of a run with lanes call for (members named by their
    index among all members), or None."""
    try:
        raise_member_errors(machine.plans, backend, dict(flags), max_stack_depth)
        if max_steps is not None:
            raise_step_limit(machine.plans, backend, dict(flags), max_steps)
    except (StackOverflowError, StackUnderflowError, StepLimitError) as error:
        return error
    return None


@dataclass
class LaneOutcome:
    """What a run with lanes (`Machine.run_lanes`) leaves: `outputs` (per output, `[N, ...]`
    backend arrays of every member's result; rows of members not finished hold zeros),
    `finished` (bool `[N]`, on the host: the members that halted, normally or by an error),
    `flags` (the members' error flags, by state key, `[N]` on the host) and `error` (what
    stopped the run or what some members raised, else None)."""

    outputs: list[Any]
    finished: np.ndarray
    flags: dict[str, np.ndarray]
    error: BaseException | None

    @property
    def succeeded(self) -> np.ndarray:
        """The members that halted without an error (bool `[N]`)."""
        ok = self.finished.copy()
        for key, flag in self.flags.items():
            ok &= flag == state_ops.flag_normal_value(key)
        return ok


def lane_flag_keys(counting: bool) -> tuple[str, ...]:
    """The error flags a run with lanes keeps per member (with `max_steps`: `stopped_at` too)."""
    return (state_ops.OVERFLOW, state_ops.UNDERFLOW, *((state_ops.STOPPED_AT,) if counting else ()))


def settable_flag_keys(machine: Machine, counting: bool) -> tuple[str, ...]:
    """The flags of `lane_flag_keys` the program's members can set, which the rings keep: a
    program without stacks neither overflows nor underflows one."""
    return tuple(key for key in lane_flag_keys(counting) if machine.stack_keys or key not in (state_ops.OVERFLOW, state_ops.UNDERFLOW))


@dataclass(frozen=True)
class LaneWindow:
    """A block of members for a run with lanes: per input, the members' arguments as a backend
    array (`count` rows or more; one row when `shared[i]`: every member's)."""

    arrays: list[Any]
    count: int
    shared: tuple[bool, ...]


@dataclass(frozen=True)
class FinishedMembers:
    """Members a chunk of a run with lanes finished: their numbers and, by result key (the
    output registers, then `lane_flag_keys`), their values (NumPy, one row per member)."""

    members: np.ndarray
    values: dict[str, np.ndarray]


class LaneResults:
    """The results of a run with lanes gathered on the host: `values` by result key (`[N, ...]`
    NumPy arrays; members not finished hold zeros, or a flag's normal value), `count` (how many
    members finished), `finished` (bool `[N]`) and `flagged` (whether some member's error flag
    is set: without, the run raises no member's error), filled by `put`."""

    def __init__(self, machine: Machine, members: int, counting: bool):
        self.flag_keys = lane_flag_keys(counting)
        types = {state_ops.register_key(name): machine.variables[name].type for name in machine.outputs}
        self.values = {key: np.zeros((members, *t.shape), t.dtype) for key, t in types.items()}
        for key in self.flag_keys:
            self.values[key] = np.full(members, state_ops.flag_normal_value(key), np.int32)
        self.members = members
        self.count = 0
        self.flagged = False
        self.taken: list[np.ndarray] = []  # the members of each `put`, for `finished`

    def put(self, finished: FinishedMembers) -> None:
        for key, values in self.values.items():
            taken = finished.values[key]
            if key in self.flag_keys:
                if not (taken != state_ops.flag_normal_value(key)).any():
                    continue  # every member's flag normal, as `values` already holds
                self.flagged = True
            values[finished.members] = taken
        self.count += len(finished.members)
        self.taken.append(finished.members)

    @property
    def finished(self) -> np.ndarray:
        """Whether each member finished (bool `[N]`; each member finishes once, so all did when
        `count` is N)."""
        if self.count == self.members:
            return np.ones(self.members, bool)
        finished = np.zeros(self.members, bool)
        for members in self.taken:
            finished[members] = True
        return finished
