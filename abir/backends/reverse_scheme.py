"""How reverse-mode differentiation goes back through a machine run, written once for the traced
backends (JAX's `abir.backends.jax.reverse`, TensorFlow's `abir.backends.tf.reverse`).

The machine is a loop of sweeps (`abir.backends.traced.TracedLoop.single_sweep`) until every
member halts, their number known only when the run ends. Its backward pass, for each sweep from
the last, pulls the cotangent of the state's floating-point arrays back through that one sweep
(`pull_back`, by the backend's own differentiation), at the state before it. Integer and boolean
arrays (program counters, stack pointers, integer and boolean values) carry none. A float
argument shared by all members (a model's parameters) may arrive as one row and stay one in the
state when no kernel writes it (`with_shared_rows`): the kernels read it as every member's, so
each sweep's cotangent of it is one row, the sum over the members. The two designs differ in how
the backward pass finds the state before each sweep:

* an undo log (`UndoScheme`, whenever the kernels tell the rows they pop and no block writes
  whole spans of stack rows, `undo_loggable`): the forward pass logs, per sweep, the registers
  the kernels may write (not the read-only ones) as they were before it, and each stack's
  window (`StackWindow`): the rows just below each member's pointer that the sweep's pops may
  uncover, the only ones holding saved values that its pushes may overwrite, read by one gather
  before the sweep (outside its blocks' conditionals, which write the stacks in place): an
  entry of (written registers + window rows) x B values, whatever the stacks' depth. The log
  holds L entries (`undo_length`: `UNDO_TAPE_BYTES` over the entry's size, at most
  `MAX_UNDO_ENTRIES`), sweep s in row s mod L. Backward, from the final state, each sweep is
  undone (`undo_sweep`: registers restored, then the windows below the restored pointers) and
  pulled back through; rows at or above a pointer keep what the later sweeps left there, which
  no sweep reads before writing it. A run of n > L sweeps has only its last L in the log: once those are undone, the
  backward pass replays the run from its initial state (a residual anyway) into a log of its
  own for the n - L sweeps before, the shortest of `replay_lengths` (2 L, 2 L r, ... for r =
  `REPLAY_LOG_RATIO`, up to `REPLAY_LOG_BYTES`) that holds them, and undoes those: n - L
  logged sweeps replayed, and a replay log under max(4 L, 2 r (n - L)) entries (within
  `REPLAY_LOG_BYTES`), allocated only by runs that need it. A run
  longer still goes by rounds over the longest (the forward log itself when the longest would
  hold fewer than 2 L): the log keeps the last sweeps each replay reaches, so memory stays
  bounded, time grows by about m (m / M - 1) / 2 logged sweeps replayed for the m = n - L
  sweeps and a log of M.
* checkpoints (`CheckpointScheme`, for blocks writing whole spans of stack rows, `vm.descend`):
  the forward pass records the whole state before a sweep into a tape of C checkpoints
  (`tape_length`) every `stride` sweeps. The stride starts at 1; when the tape is full, every
  other checkpoint is dropped and the stride doubles, so a run of n sweeps keeps the state before
  every sweep when n <= C, else before every 2^ceil(log2(n / C))-th. When n <= C the state
  before each sweep is on the tape. Otherwise, segment by segment from the last, the states of
  the `stride` sweeps after a checkpoint are recomputed into a second buffer of C states (every
  `substride`-th of them, substride = ceil(stride / C), 1 while n <= C * C), and a state between
  two of those is recomputed from the one before it. The tape and the segment buffer cost 2 C
  times the state (C from `TAPE_BYTES`, at most `MAX_CHECKPOINTS`); the backward pass one
  sweep's pull-back per sweep, plus one recomputed sweep per sweep when n > C, plus about
  n (substride - 1) / 2 more when n > C * C.

A backend supplies its loops, conditional and tape rows (`TapeOps`), its sweep, its pull-back
through one sweep and the function boundary its differentiation knows (`jax.custom_vjp`,
`tf.custom_gradient`); the schemes' loops are written here once against `TapeOps`.
"""

from __future__ import annotations

import abc
import functools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from abir.backends.base import Kernel, State
from abir.backends.traced import read_only_keys, refills_lanes, writes_whole_stacks

TAPE_BYTES = 16 * 2**20
"""The memory each level of a run's tape may take (`tape_length`): the forward pass's
checkpoints, and the backward pass's states of one segment between two checkpoints."""

MAX_CHECKPOINTS = 64
"""The most states a level of the tape holds, however small the state: the forward pass's
checkpoints and the backward pass's segment states together cover runs of up to its square
sweeps with no sweep computed more than twice."""

UNDO_TAPE_BYTES = 4 * 2**20
"""The memory an undo log may take (`undo_length`); the log is allocated (and zeroed) by every
differentiated call, whatever the run's length."""

MAX_UNDO_ENTRIES = 512
"""The most sweeps an undo log holds, however small its entries."""

REPLAY_LOG_BYTES = 64 * 2**20
"""The memory the log of a run longer than its forward pass's log may take in the backward pass
(`replay_lengths`)."""

REPLAY_LOG_RATIO = 4
"""The ratio between consecutive lengths of `replay_lengths`: each is a copy of the backward
pass's loops in the compiled program, so fewer lengths compile faster, and longer steps zero more
log than a run uses."""

WINDOW = "undo-window:"
"""Prefix of an undo entry's arrays holding a stack's window (`StackWindow`)."""

Spec = tuple[tuple[int, ...], Any]
"""An array's (shape, NumPy dtype), as a tape is allocated from."""

Sweep = Callable[[State], State]
PullBack = Callable[[State, State], State]
"""`pull_back(state, adjoint)`: the cotangent of the float arrays of the state before a sweep
from `adjoint`, theirs after it."""


class TapeOps(abc.ABC):
    """The operations the schemes' loops are written in, on one backend's arrays: its loops and
    conditional, scalar arithmetic on its integers, and a tape's rows (a tape is a dict of
    arrays with one leading row axis)."""

    @abc.abstractmethod
    def while_loop(self, cond: Callable[[Any], Any], body: Callable[[Any], Any], carry: Any) -> Any:
        """`while cond(carry): carry = body(carry)`, staged as one loop."""

    @abc.abstractmethod
    def fori_loop(self, lower: Any, upper: Any, body: Callable[[Any, Any], Any], carry: Any) -> Any:
        """`for i in range(lower, upper): carry = body(i, carry)`, staged as one loop."""

    @abc.abstractmethod
    def cond(self, pred: Any, true_fn: Callable[[Any], Any], false_fn: Callable[[Any], Any], operand: Any) -> Any:
        """`true_fn(operand)` if the bool scalar `pred` holds, else `false_fn(operand)`."""

    @abc.abstractmethod
    def int32(self, value: Any) -> Any:
        """An int32 scalar."""

    @abc.abstractmethod
    def where(self, pred: Any, x: Any, y: Any) -> Any:
        """Elementwise `x if pred else y`."""

    @abc.abstractmethod
    def minimum(self, x: Any, y: Any) -> Any: ...

    @abc.abstractmethod
    def maximum(self, x: Any, y: Any) -> Any: ...

    @abc.abstractmethod
    def reduce_min(self, x: Any) -> Any:
        """The smallest element of `x`."""

    @abc.abstractmethod
    def zeros(self, shape: Sequence[int], dtype: Any) -> Any:
        """Zeros of `shape` and NumPy `dtype`."""

    @abc.abstractmethod
    def row(self, tape: State, index: Any) -> State:
        """Row `index` of each of `tape`'s arrays."""

    @abc.abstractmethod
    def write_row(self, tape: State, index: Any, state: State) -> State:
        """`tape` with row `index` of each array set to `state`'s array of that key."""

    @abc.abstractmethod
    def halve(self, tape: State, length: int) -> State:
        """`tape` with rows 0..length/2-1 set to its rows 0, 2, ..., length-2 (the rest kept)."""

    def new_tape(self, specs: Mapping[str, Spec], rows: int) -> State:
        """A tape of `rows` zero rows of each array of `specs`."""
        return {key: self.zeros((rows, *shape), dtype) for key, (shape, dtype) in specs.items()}


def spec_bytes(specs: Mapping[str, Spec]) -> int:
    """The bytes of the arrays of `specs`."""
    return sum(math.prod(shape) * np.dtype(dtype).itemsize for shape, dtype in specs.values())


def tape_length(state_bytes: int) -> int:
    """The number of states C a level of a run's tape holds, for a state of `state_bytes`: as many
    as `TAPE_BYTES` hold, even, at least 2 and at most `MAX_CHECKPOINTS`."""
    fitting = TAPE_BYTES // max(state_bytes, 1)
    return max(2, min(MAX_CHECKPOINTS, fitting)) // 2 * 2


def undo_length(entry_bytes: int) -> int:
    """The number of sweeps L an undo log holds: as many as `UNDO_TAPE_BYTES` hold, at least 2
    and at most `MAX_UNDO_ENTRIES`."""
    return max(2, min(MAX_UNDO_ENTRIES, UNDO_TAPE_BYTES // max(entry_bytes, 1)))


def replay_lengths(length: int, entry_bytes: int) -> tuple[int, ...]:
    """The lengths, shortest first, of the logs the backward pass may replay a run's first sweeps
    into, after a forward log of `length` entries: 2, 2 r, 2 r^2, ... times `length` (r:
    `REPLAY_LOG_RATIO`), up to the longest, as many entries as `REPLAY_LOG_BYTES` hold (at
    most `MAX_UNDO_ENTRIES`), less one shorter than the longest by under half. A run gets the
    shortest that holds its sweeps. When the longest would hold fewer than 2 `length` entries,
    only `length`: the backward pass then replays by rounds over the forward log itself (no
    second copy of its loops in the compiled program)."""
    longest = min(MAX_UNDO_ENTRIES, REPLAY_LOG_BYTES // max(entry_bytes, 1))
    if longest < 2 * length:
        return (length,)
    lengths = []
    shorter = 2 * length
    while shorter < longest:
        lengths.append(shorter)
        shorter *= REPLAY_LOG_RATIO
    if lengths and 2 * lengths[-1] > longest:  # too close to the longest to pay for its loops
        lengths.pop()
    return (*lengths, longest)


def shared_row_keys(state: Mapping[str, Any], kernels: Sequence[Kernel], stack_keys: Collection[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(the one-row registers of `state` that stay one row shared by every member: those no
    kernel writes, which the kernels read as every member's, so that a sweep's cotangent of such
    a register is one row summed over the members; the one-row registers a kernel writes, which
    become per-member, as in a run without reverse mode)."""
    batch = state["pc"].shape[0]
    rows = {key for key, value in state.items() if key not in stack_keys and len(value.shape) and value.shape[0] != batch}
    fixed = read_only_keys(kernels, state, stack_keys)
    return frozenset(rows & fixed), frozenset(rows - fixed)


# ----- the undo log ---------------------------------------------------------------------------


def undo_loggable(kernels: Collection[Kernel]) -> bool:
    """Whether a sweep can be undone from its stack windows (`StackWindow`): kernels that tell
    the rows they pop (`pops`, `abir.vm.kernels.BlockPlan.stack_pops`), writing one row per
    member and request (no `Span`), and no lanes."""
    return all(getattr(k, "pops", None) is not None for k in kernels) and not any(writes_whole_stacks(k) or refills_lanes(k) for k in kernels)


@dataclass(frozen=True)
class StackWindow:
    """The `rows` rows of `stack` just below each member's pointer (`pointer`) before a sweep:
    the only rows holding saved values that the sweep may overwrite. A push writes at its
    member's pointer, which the sweep's pops move down by at most `rows`; a row at or above the
    pointer holds nothing the sweep reads before writing it (a pop reads below the pointer), so
    the state before a sweep restored in its windows and registers differs from the true one only
    in rows no sweep reads, whose values change neither a result nor a cotangent."""

    stack: str
    pointer: str
    rows: int

    @property
    def key(self) -> str:
        """The undo entry's array holding the window ([rows, B, ...])."""
        return f"{WINDOW}{self.stack}"


def stack_windows(kernels: Sequence[Kernel], specs: Mapping[str, Spec]) -> list[StackWindow]:
    """The window of each stack that a sweep of `kernels` may both push onto and pop from: as many
    rows as its blocks may pop together (each block runs at most once per sweep), at most the
    stack's depth. A stack no block pops needs none: its pushes write only above its pointer."""
    pushed = {key for k in kernels for key in k.writes}  # type: ignore[attr-defined]
    pops: dict[tuple[str, str], int] = {}
    for k in kernels:
        for stack, pointer, count in k.pops:  # type: ignore[attr-defined]
            pops[(stack, pointer)] = pops.get((stack, pointer), 0) + count
    return [StackWindow(stack, pointer, min(count, specs[stack][0][0])) for (stack, pointer), count in pops.items() if stack in pushed]


def window_specs(specs: Mapping[str, Spec], windows: Sequence[StackWindow]) -> dict[str, Spec]:
    """The shapes and dtypes of the undo entry's arrays of `windows`, for a state of `specs`."""
    return {w.key: ((w.rows, *specs[w.stack][0][1:]), specs[w.stack][1]) for w in windows}


WindowRead = Callable[[Any, Any, int], Any]
"""`read(stack, pointer, rows)`: `stack[pointer[b] - 1 - j, b]` for j < `rows` and each member b,
as [rows, B, ...] (junk where the row is negative)."""

WindowWrite = Callable[[Any, Any, Any], Any]
"""`write(stack, pointer, window)`: `stack` with `stack[pointer[b] - 1 - j, b] = window[j, b]` for
each j and member b; a negative row writes nothing."""


def undo_sweep(state: State, entry: State, registers: Collection[str], windows: Sequence[StackWindow], write: WindowWrite) -> State:
    """The state before a sweep, from the state after it and the sweep's undo entry (its
    registers before it, stack pointers included, and its stack windows), up to rows no sweep
    reads (`StackWindow`)."""
    state = {**state, **{key: entry[key] for key in registers}}
    for w in windows:
        state[w.stack] = write(state[w.stack], state[w.pointer], entry[w.key])
    return state


@dataclass
class Scheme:
    """What both designs know of a run: `sweep`, `pull_back` through one sweep, the run's
    `halt_index` and most sweeps, over a state of `specs`."""

    ops: TapeOps
    sweep: Sweep
    pull_back: PullBack
    halt_index: int
    max_sweeps: int
    specs: Mapping[str, Spec]

    def running(self, state: State, swept: Any) -> Any:
        return (swept < self.max_sweeps) & (self.ops.reduce_min(state["pc"]) < self.halt_index)

    def run(self, state: State) -> State:
        """The run without a tape: the final state."""
        ops = self.ops
        carry = (ops.int32(0), state)
        return ops.while_loop(lambda c: self.running(c[1], c[0]), lambda c: (c[0] + 1, self.sweep(c[1])), carry)[1]  # type: ignore[no-any-return]


@dataclass
class UndoScheme(Scheme):
    """The undo-log design (module docstring) for one run of `kernels`: each sweep's entry holds
    the registers it may write and its stack `windows`, read before it by `read_window` and
    written back by `write_window`. `forward` is the logged forward pass, `backward` the
    cotangent of the initial state's float arrays."""

    kernels: Sequence[Kernel]
    stack_keys: Collection[str]
    read_window: WindowRead
    write_window: WindowWrite

    def __post_init__(self) -> None:
        fixed = read_only_keys(self.kernels, self.specs, self.stack_keys)
        self.registers = tuple(key for key in self.specs if key not in self.stack_keys and key not in fixed)
        self.windows = stack_windows(self.kernels, self.specs)
        self.entry_specs = {**{key: self.specs[key] for key in self.registers}, **window_specs(self.specs, self.windows)}
        self.length = undo_length(spec_bytes(self.entry_specs))

    def undo_entry(self, state: State) -> State:
        """The undo entry of the sweep from `state`: its registers, and its stack windows read
        from the stacks before the sweep writes them in place."""
        entry = {key: state[key] for key in self.registers}
        entry.update({w.key: self.read_window(state[w.stack], state[w.pointer], w.rows) for w in self.windows})
        return entry

    def new_log(self, length: int | None = None) -> State:
        """A log of `length` entries, by default L."""
        return self.ops.new_tape(self.entry_specs, length or self.length)

    def record(self, state: State, until: Any, log: State, length: int | None = None) -> tuple[Any, State, State]:
        """Sweeps from `state` while running and before sweep `until`, each one's undo entry
        written to row (its number mod `length`, by default L) of `log`: (sweeps run, final
        state, log)."""
        ops, length = self.ops, length or self.length

        def one(carry: tuple[Any, State, State]) -> tuple[Any, State, State]:
            swept, state, log = carry
            log = ops.write_row(log, swept % length, self.undo_entry(state))
            return swept + 1, self.sweep(state), log

        return ops.while_loop(lambda c: self.running(c[1], c[0]) & (c[0] < until), one, (ops.int32(0), state, log))  # type: ignore[no-any-return]

    def forward(self, state: State) -> tuple[Any, State, State]:
        """The logged forward pass: (sweeps run, final state, log)."""
        return self.record(state, self.ops.int32(self.max_sweeps), self.new_log())

    def undo_sweeps(self, first: Any, last: Any, state: State, adjoint: State, log: State, length: int) -> tuple[State, State]:
        """The sweeps from `last - 1` down to `first` (all in `log`, of `length` entries) undone
        from `state` (after `last` sweeps) and the adjoint pulled back through them."""
        ops = self.ops

        def one_back(i: Any, carry: tuple[State, State]) -> tuple[State, State]:
            state, adjoint = carry
            before = undo_sweep(state, ops.row(log, (last - 1 - i) % length), self.registers, self.windows, self.write_window)
            return before, self.pull_back(before, adjoint)

        return ops.fori_loop(ops.int32(0), last - first, one_back, (state, adjoint))  # type: ignore[no-any-return]

    def backward(self, initial: State, final: State, swept: Any, log: State, adjoint: State) -> State:
        """The cotangent of `initial`'s float arrays, from `adjoint`, that of `final`'s, given the
        forward pass's log of its `swept` sweeps."""
        ops, length = self.ops, self.length

        def within_log(adjoint: State) -> State:
            return self.undo_sweeps(ops.int32(0), swept, final, adjoint, log, length)[1]

        def before_log(adjoint: State) -> State:  # the run is longer than the log
            first = swept - length
            state, adjoint = self.undo_sweeps(first, swept, final, adjoint, log, length)
            return self.replayed(initial, first, state, adjoint, log)

        # two branches that each undo the logged sweeps (not one undo before a branch that may
        # return its operand unchanged, which TensorFlow's XLA bridge failed to compile)
        return ops.cond(swept <= length, within_log, before_log, adjoint)  # type: ignore[no-any-return]

    def replayed(self, initial: State, last: Any, state: State, adjoint: State, log: State) -> State:
        """The cotangent of `initial`'s float arrays from `adjoint`, that of `state` (after
        `last` sweeps), the first `last` sweeps replayed from `initial` into a log of the
        shortest of `replay_lengths` that holds them all (the longest, by rounds, if none
        does: over the forward pass's own `log` when the longest is L)."""
        lengths = replay_lengths(self.length, spec_bytes(self.entry_specs))
        back = functools.partial(self.replayed_by_rounds, initial, lengths[-1], log if lengths[-1] == self.length else None)
        for length in reversed(lengths[:-1]):
            back = self.by_fitting_log(length, functools.partial(self.replayed_by_rounds, initial, length, None), back)
        return back((last, state, adjoint))  # type: ignore[no-any-return]

    def by_fitting_log(self, length: int, fitting: Callable[[Any], State], longer: Callable[[Any], State]) -> Callable[[Any], State]:
        """`fitting` when the sweeps to replay (the carry's first item) fit a log of `length`,
        else `longer`."""
        return lambda carry: self.ops.cond(carry[0] <= length, fitting, longer, carry)  # type: ignore[no-any-return]

    def replayed_by_rounds(self, initial: State, length: int, log: State | None, carry: tuple[Any, State, State]) -> State:
        """The cotangent of `initial`'s float arrays, the carry (sweeps left, the state after
        them, its adjoint), by rounds over a log of `length` entries (`log`, or a new one):
        each round replays the run from `initial` up to the sweeps left, the log keeping the
        last `length` of them, and undoes those."""
        ops = self.ops

        def round_back(carry: tuple[Any, State, State, State]) -> tuple[Any, State, State, State]:
            last, state, adjoint, log = carry
            log = self.record(initial, last, log, length)[2]
            first = ops.maximum(last - length, 0)
            state, adjoint = self.undo_sweeps(first, last, state, adjoint, log, length)
            return first, state, adjoint, log

        last, state, adjoint = carry
        start = (last, state, adjoint, self.new_log(length) if log is None else log)
        return ops.while_loop(lambda c: c[0] > 0, round_back, start)[2]  # type: ignore[no-any-return]


# ----- checkpoints ----------------------------------------------------------------------------


@dataclass
class CheckpointScheme(Scheme):
    """The checkpoint design (module docstring) for one run. `forward` is the checkpointing
    forward pass, `backward` the cotangent of the initial state's float arrays."""

    def __post_init__(self) -> None:
        self.length = tape_length(spec_bytes(self.specs))

    def forward(self, state: State) -> tuple[Any, Any, State, State]:
        """The forward loop: (sweeps run, stride, tape, final state). Rows 0..C-1 of the tape are
        the checkpoints, row C is scratch, written by the sweeps that are not checkpointed (a
        write every sweep, rather than a conditional the whole tape would pass through). An inner
        loop fills the tape at one stride; while the run goes on after the tape is full, the
        outer loop thins it and doubles the stride."""
        ops, length, sweep = self.ops, self.length, self.sweep

        def tape_full(swept: Any, stride: Any) -> Any:
            return (swept % stride == 0) & (swept // stride >= length)

        def one_sweep(carry: tuple[Any, Any, State, State]) -> tuple[Any, Any, State, State]:
            swept, stride, tape, state = carry
            tape = ops.write_row(tape, ops.where(swept % stride == 0, swept // stride, length), state)
            return swept + 1, stride, tape, sweep(state)

        def fill(carry: tuple[Any, Any, State, State]) -> tuple[Any, Any, State, State]:
            return ops.while_loop(lambda c: self.running(c[3], c[0]) & ~tape_full(c[0], c[1]), one_sweep, carry)  # type: ignore[no-any-return]

        def thin_and_fill(carry: tuple[Any, Any, State, State]) -> tuple[Any, Any, State, State]:
            swept, stride, tape, state = carry
            return fill((swept, 2 * stride, ops.halve(tape, length), state))

        filled = fill((ops.int32(0), ops.int32(1), ops.new_tape(self.specs, length + 1), state))
        return ops.while_loop(lambda c: self.running(c[3], c[0]), thin_and_fill, filled)  # type: ignore[no-any-return]

    def segment_states(self, start: State, sweeps: Any, substride: Any, states: State) -> State:
        """`states` (C + 1 rows, the last scratch) holding the states of the segment of `sweeps`
        sweeps from `start`, every `substride`-th: row t is the state after t * substride sweeps
        (the backward pass recomputes the states between two of them)."""
        ops, length = self.ops, self.length

        def one_sweep(t: Any, carry: tuple[State, State]) -> tuple[State, State]:
            states, state = carry
            state = self.sweep(state)
            return ops.write_row(states, ops.where(t % substride == 0, t // substride, length), state), state

        states, _ = ops.fori_loop(ops.int32(1), sweeps, one_sweep, (ops.write_row(states, 0, start), start))
        return states

    def backward(self, tape: State, stride: Any, swept: Any, adjoint: State) -> State:
        """The cotangent of the initial state's float arrays, from `adjoint`, that of the final
        state's, given the forward pass's tape of its `swept` sweeps at `stride`."""
        ops, length, sweep, pull_back = self.ops, self.length, self.sweep, self.pull_back
        segments = (swept + stride - 1) // stride
        substride = (stride + length - 1) // length  # 1 unless the run has more than C * C sweeps

        def segment_back(i: Any, carry: tuple[State, State]) -> tuple[State, State]:
            adjoint, states = carry
            segment = segments - 1 - i
            sweeps = ops.minimum(stride, swept - segment * stride)
            states = self.segment_states(ops.row(tape, segment), sweeps, substride, states)

            def one_back(j: Any, adjoint: State) -> State:
                offset = sweeps - 1 - j
                start = ops.row(states, offset // substride)
                return pull_back(ops.fori_loop(ops.int32(0), offset % substride, lambda _, state: sweep(state), start), adjoint)

            return ops.fori_loop(ops.int32(0), sweeps, one_back, adjoint), states

        def from_checkpoints(adjoint: State) -> State:  # the run fits the tape: its states are there
            return ops.fori_loop(ops.int32(0), swept, lambda i, adjoint: pull_back(ops.row(tape, swept - 1 - i), adjoint), adjoint)  # type: ignore[no-any-return]

        def by_segments(adjoint: State) -> State:
            return ops.fori_loop(ops.int32(0), segments, segment_back, (adjoint, ops.new_tape(self.specs, length + 1)))[0]  # type: ignore[no-any-return]

        return ops.cond(stride == 1, from_checkpoints, by_segments, adjoint)  # type: ignore[no-any-return]
