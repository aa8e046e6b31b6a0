"""The machine loop that reverse-mode differentiation (`jax.grad`, `jax.vjp`,
`jax.value_and_grad`, `jax.jacrev`) goes through (`machine_loop`).

JAX differentiates no `lax.while_loop` in reverse mode, and the machine is one: sweeps
(`abir.backends.traced.TracedLoop.single_sweep`) until every member halts, their number known
only when the run ends. A run staged while reverse mode traces its arguments
(`abir.backends.jax.staging`) is instead a `jax.custom_vjp` function of the state, whose
backward pass, for each sweep from the last, pulls the cotangent of the state's floating-point
arrays back through that one sweep by `jax.vjp`, at the state before it. Integer and boolean
arrays (program counters, stack pointers, integer and boolean values) carry none. A float
argument shared by all members (a model's parameters) arrives as one row
(`JaxBackend.spread_row`) and stays one in the state when no kernel writes it
(`with_shared_rows`): the kernels read it as every member's, so each sweep's cotangent of it is
one row, the sum over the members, instead of a per-member copy that every block's backward
conditional would pass through. The two designs differ in how the backward pass finds the state
before each sweep:

* an undo log (`undo_logged_run`, whenever every block is a split kernel writing one stack row
  per member and request, `undo_loggable`): the forward pass logs, per sweep, the registers the
  kernels may write (not the read-only ones) as they were before it, and for each stack write
  request of each block (`LogSlot`) the rows written and the values there before
  (`LoggedKernel`): an entry of (written registers + requests) x B values, whatever the stacks'
  depth. The log holds L entries (`undo_length`: `UNDO_TAPE_BYTES` over the entry's size, at
  most `MAX_UNDO_ENTRIES`), sweep s in row s mod L. Backward, from the final state, each sweep is
  undone (`undo_sweep`: registers restored, requests restored from the last) and pulled back
  through. A run of n > L sweeps has only its last L in the log: once those are undone, the run
  is replayed from its initial state (a residual anyway) up to the first sweep undone, logging
  the L sweeps before it, and so on: memory L entries, time n + about n (n / L - 1) / 2 logged
  sweeps replayed.
* checkpoints (`differentiable_run`, for blocks writing whole spans of stack rows, `vm.descend`):
  the forward pass records the whole state before a sweep into a tape of C checkpoints
  (`tape_length`) every `stride` sweeps. The stride starts at 1; when the tape is full, every
  other checkpoint is dropped and the stride doubles, so a run of n sweeps keeps the state before
  every sweep when n <= C, else before every 2^ceil(log2(n / C))-th. When n <= C the state
  before each sweep is on the tape. Otherwise, segment by segment from the last, the states of
  the `stride` sweeps after a checkpoint are recomputed into a second buffer of C states (every
  `substride`-th of them, substride = ceil(stride / C), 1 while n <= C * C), and a state between
  two of those is recomputed from the one before it. The tape and the segment buffer cost 2 C
  times the state (C from `TAPE_BYTES`, at most `MAX_CHECKPOINTS`); the backward pass one
  sweep's vjp per sweep, plus one recomputed sweep per sweep when n > C, plus about
  n (substride - 1) / 2 more when n > C * C.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from abir.backends.base import Kernel, State, Writes, splittable
from abir.backends.jax.loop import JaxLoop
from abir.backends.jax.one_kernel import state_bytes
from abir.backends.jax.writes import stack_scatter
from abir.backends.traced import TracedLoop, read_only_keys, refills_lanes, writes_whole_stacks

TAPE_BYTES = 16 * 2**20
"""The memory each level of a run's tape may take (`tape_length`): the forward pass's
checkpoints, and the backward pass's states of one segment between two checkpoints."""

MAX_CHECKPOINTS = 64
"""The most states a level of the tape holds, however small the state: the forward pass's
checkpoints and the backward pass's segment states together cover runs of up to its square
sweeps with no sweep computed more than twice."""


def machine_loop(
    backend: Any, kernels: tuple[Kernel, ...], halt_index: int, stack_keys: Collection[str]
) -> Callable[[State, int], State]:
    """The machine loop over `kernels` as `(state, iterations) -> state`, `iterations` (the
    most sweeps) a Python int: `differentiable_run` of one sweep of `JaxLoop`."""

    def loop(state: State, iterations: int) -> State:
        backend.trace_count += 1  # runs only while tracing
        state, shared = with_shared_rows(dict(state), kernels, stack_keys)
        sweep = JaxLoop(backend, kernels, halt_index, stack_keys).single_sweep(state)
        if not undo_loggable(kernels):
            final = differentiable_run(sweep, halt_index, state, int(iterations))
        else:
            logging = UndoLoggingLoop(backend, kernels, halt_index, stack_keys)
            final = undo_logged_run(sweep, logging, halt_index, state, int(iterations))
        return spread_rows(final, shared)

    return loop


def with_shared_rows(state: State, kernels: Sequence[Kernel], stack_keys: Collection[str]) -> tuple[State, frozenset[str]]:
    """(`state`, the registers it holds as one row shared by every member): the one-row
    registers (`Backend.spread_row`) no kernel writes, which the kernels read as every member's
    (the array operations broadcast a batch of one), so that a sweep's cotangent of such a
    register is one row summed over the members, whatever the batch. One that a kernel writes
    becomes per-member here (spread to the batch), as in a run without reverse mode."""
    batch = state["pc"].shape[0]
    rows = {key for key, value in state.items() if key not in stack_keys and value.ndim and value.shape[0] != batch}
    fixed = read_only_keys(kernels, state, stack_keys)
    return spread_rows(state, rows - fixed), frozenset(rows & fixed)


def spread_rows(state: State, keys: Collection[str]) -> State:
    """`state` with the one-row registers `keys` spread to every member's."""
    batch = state["pc"].shape[0]
    return {**state, **{key: jnp.broadcast_to(state[key], (batch, *state[key].shape[1:])) for key in keys}}


def tape_length(state: State) -> int:
    """The number of states C a level of a run's tape holds: as many as `TAPE_BYTES` hold,
    even, at least 2 and at most `MAX_CHECKPOINTS`."""
    fitting = TAPE_BYTES // max(state_bytes(state), 1)
    return max(2, min(MAX_CHECKPOINTS, fitting)) // 2 * 2


def carries_cotangent(value: Any) -> bool:
    return bool(jnp.issubdtype(value.dtype, jnp.inexact))


def differentiable_run(sweep: Callable[[State], State], halt_index: int, state: State, max_sweeps: int) -> State:
    """`sweep` repeated from `state` until every member's pc reaches `halt_index` (or
    `max_sweeps` sweeps ran), differentiable in reverse mode (see the module docstring)."""
    float_keys = tuple(key for key, value in state.items() if carries_cotangent(value))
    length = tape_length(state)

    def running(state: State, swept: Any) -> Any:
        return (swept < max_sweeps) & (jnp.min(state["pc"]) < halt_index)

    def split(state: State) -> tuple[State, State]:
        floats = {key: state[key] for key in float_keys}
        return floats, {key: value for key, value in state.items() if key not in floats}

    @jax.custom_vjp
    def run(floats: State, others: State) -> State:
        _, final = lax.while_loop(
            lambda c: running(c[1], c[0]), lambda c: (c[0] + 1, sweep(c[1])), (jnp.int32(0), {**others, **floats})
        )
        return final  # type: ignore[no-any-return]

    def forward(floats: State, others: State) -> tuple[State, tuple[State, Any, Any]]:
        swept, stride, tape, final = record_sweeps(sweep, running, {**others, **floats}, length)
        return final, (tape, stride, swept)

    def backward(residuals: tuple[State, Any, Any], cotangent: State) -> tuple[State, None]:
        tape, stride, swept = residuals
        segments = (swept + stride - 1) // stride
        substride = (stride + length - 1) // length  # 1 unless the run has more than C * C sweeps

        def states() -> State:
            return {key: jnp.zeros((length + 1, *rows.shape[1:]), rows.dtype) for key, rows in tape.items()}

        def segment_back(i: Any, carry: tuple[State, State]) -> tuple[State, State]:
            adjoint, states = carry
            segment = segments - 1 - i
            sweeps = jnp.minimum(stride, swept - segment * stride)
            states = segment_states(sweep, row(tape, segment), sweeps, substride, states, length)

            def one_back(j: Any, adjoint: State) -> State:
                offset = sweeps - 1 - j
                start = row(states, offset // substride)
                return pull_back(sweep, float_keys, lax.fori_loop(0, offset % substride, lambda _, state: sweep(state), start), adjoint)

            return lax.fori_loop(0, sweeps, one_back, adjoint), states

        def from_checkpoints(adjoint: State) -> State:  # the run fits the tape: its states are there
            return lax.fori_loop(0, swept, lambda i, adjoint: pull_back(sweep, float_keys, row(tape, swept - 1 - i), adjoint), adjoint)  # type: ignore[no-any-return]

        def by_segments(adjoint: State) -> State:
            return lax.fori_loop(0, segments, segment_back, (adjoint, states()))[0]  # type: ignore[no-any-return]

        adjoint = {key: cotangent[key] for key in float_keys}
        return lax.cond(stride == 1, from_checkpoints, by_segments, adjoint), None

    run.defvjp(forward, backward)
    return run(*split(state))


def row(tape: State, index: Any) -> State:
    return {key: lax.dynamic_index_in_dim(rows, index, 0, keepdims=False) for key, rows in tape.items()}


def write_row(tape: State, index: Any, state: State) -> State:
    return {key: lax.dynamic_update_index_in_dim(rows, state[key], index, 0) for key, rows in tape.items()}


def record_sweeps(
    sweep: Callable[[State], State], running: Callable[[State, Any], Any], state: State, length: int
) -> tuple[Any, Any, State, State]:
    """The forward loop of `differentiable_run`: (sweeps run, stride, tape, final state). Rows
    0..length-1 of the tape are the checkpoints, row `length` is scratch, written by the sweeps
    that are not checkpointed (a write every sweep, rather than a conditional the whole tape
    would pass through). An inner loop fills the tape at one stride; while the run goes on after
    the tape is full, the outer loop thins it and doubles the stride."""

    def tape_full(swept: Any, stride: Any) -> Any:
        return (swept % stride == 0) & (swept // stride >= length)

    def one_sweep(carry: tuple[Any, Any, State, State]) -> tuple[Any, Any, State, State]:
        swept, stride, tape, state = carry
        tape = write_row(tape, jnp.where(swept % stride == 0, swept // stride, length), state)
        return swept + 1, stride, tape, sweep(state)

    def fill(carry: tuple[Any, Any, State, State]) -> tuple[Any, Any, State, State]:
        return lax.while_loop(lambda c: running(c[3], c[0]) & ~tape_full(c[0], c[1]), one_sweep, carry)  # type: ignore[no-any-return]

    def thin_and_fill(carry: tuple[Any, Any, State, State]) -> tuple[Any, Any, State, State]:
        swept, stride, tape, state = carry
        tape = {key: rows.at[: length // 2].set(rows[0:length:2]) for key, rows in tape.items()}
        return fill((swept, 2 * stride, tape, state))

    tape = {key: jnp.zeros((length + 1, *value.shape), value.dtype) for key, value in state.items()}
    filled = fill((jnp.int32(0), jnp.int32(1), tape, state))
    return lax.while_loop(lambda c: running(c[3], c[0]), thin_and_fill, filled)  # type: ignore[no-any-return]


def segment_states(
    sweep: Callable[[State], State], start: State, sweeps: Any, substride: Any, states: State, length: int
) -> State:
    """`states` (length + 1 rows, the last scratch) holding the states of the segment of
    `sweeps` sweeps from `start`, every `substride`-th: row t is the state after t * substride
    sweeps (the backward pass recomputes the states between two of them)."""

    def one_sweep(t: Any, carry: tuple[State, State]) -> tuple[State, State]:
        states, state = carry
        state = sweep(state)
        return write_row(states, jnp.where(t % substride == 0, t // substride, length), state), state

    states, _ = lax.fori_loop(1, sweeps, one_sweep, (write_row(states, 0, start), start))
    return states


# ----- the undo log ---------------------------------------------------------------------------

UNDO_TAPE_BYTES = 4 * 2**20
"""The memory an undo log may take (`undo_length`); the log is allocated (and zeroed) by every
differentiated call, whatever the run's length."""

MAX_UNDO_ENTRIES = 512
"""The most sweeps an undo log holds, however small its entries."""

ONE_HOT_ROWS_MAX = 64
"""`rows_of` reads a stack of at most this many rows by a select over them, deeper ones by a gather."""

ROWS, OLD = "undo-rows:", "undo-old:"
"""Prefixes of the registers a logging sweep records a block's stack writes in, one pair per
write request (`LoggedKernel`): the rows written ([B] int32, the depth or more: none) and the
values there before the block ([B, ...])."""


def undo_loggable(kernels: Collection[Kernel]) -> bool:
    """Whether a sweep's stack writes can be logged: split kernels writing one row per member
    and request (no `Span`), and no lanes."""
    return splittable(list(kernels)) and not any(writes_whole_stacks(k) or refills_lanes(k) for k in kernels)


@dataclass(frozen=True)
class LogSlot:
    """The log registers of a block's `request`-th write request to `stack`."""

    block: int
    stack: str
    request: int

    @property
    def rows(self) -> str:
        return f"{ROWS}{self.block}:{self.request}:{self.stack}"

    @property
    def old(self) -> str:
        return f"{OLD}{self.block}:{self.request}:{self.stack}"


def log_slots(kernels: Sequence[Kernel]) -> list[LogSlot]:
    """Every write request a sweep may make, in the order the sweep makes them (each block
    runs once per sweep, in index order)."""
    return [LogSlot(block, key, r) for block, k in enumerate(kernels) for key, n in k.writes.items() for r in range(n)]  # type: ignore[attr-defined]


class LoggedKernel:
    """A split kernel whose split also writes, for each of its stack write requests, the rows
    and the values there before the block into its `LogSlot` registers (a block run on
    compacted rows logs those rows): the sweep step returns them with the other registers it
    writes, and a block that does not run leaves them as they were (empty, `empty_log`)."""

    def __init__(self, kernel: Any, split: Callable[..., Any], slots: Sequence[LogSlot]):
        self.kernel = kernel
        self.inner = split
        self.slots = {(slot.stack, slot.request): slot for slot in slots}
        declared = getattr(kernel, "register_writes", None)
        logs = [name for slot in slots for name in (slot.rows, slot.old)]
        self.register_writes = None if declared is None else (*declared, *logs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kernel, name)

    def split(self, regs: State, stacks: State) -> tuple[State, Writes]:
        out, writes = self.inner(regs, stacks)
        out = dict(out)
        for key, requests in writes.items():
            stack = stacks[key]
            batch = stack.shape[1]
            for request, (rows, _) in enumerate(requests):
                slot = self.slots[(key, request)]
                rows = jnp.broadcast_to(jnp.asarray(rows, dtype=jnp.int32), (batch,))
                out[slot.rows] = rows
                out[slot.old] = rows_of(stack, rows)
        return out, writes


def rows_of(stack: Any, rows: Any) -> Any:
    """`stack[rows[b], b]` for each member b (junk where rows is out of range): a select and a
    sum over the rows for a small stack (a gather costs more on XLA's CPU), as `stack_scatter`."""
    depth = stack.shape[0]
    if depth > ONE_HOT_ROWS_MAX:
        return stack[jnp.clip(rows, 0, depth - 1), jnp.arange(stack.shape[1])]
    hit = jnp.arange(depth, dtype=jnp.int32)[:, None] == rows[None, :]
    return jnp.sum(jnp.where(hit.reshape(hit.shape + (1,) * (stack.ndim - 2)), stack, jnp.zeros((), stack.dtype)), axis=0)


class UndoLoggingLoop(JaxLoop):
    """The JAX loop whose `single_sweep` also logs each block's stack writes (`LoggedKernel`):
    what `undo_sweep` needs to restore the stacks before the sweep. `slots`: the sweep's
    requests (`log_slots`)."""

    def __init__(self, backend: Any, kernels: Sequence[Kernel], halt_index: int, stack_keys: Collection[str]):
        super().__init__(backend, kernels, halt_index, stack_keys)
        self.slots = log_slots(kernels)

    def sweep_step(self, kernel: Any, split: Any, template: State) -> Any:
        block = next(i for i, other in enumerate(self.kernels) if other is kernel)
        logged = LoggedKernel(kernel, split, [slot for slot in self.slots if slot.block == block])
        return super().sweep_step(logged, logged.split, template)

    def block_run(self, kernel: Any, split: Any, template: State, written: Any, pushed: Any, run: Any, skip: Any) -> Any:
        return TracedLoop.block_run(self, kernel, split, template, written, pushed, run, skip)


def empty_log(state: State, slots: Sequence[LogSlot]) -> State:
    """A log with nothing in it: every slot's rows the depth."""
    log: State = {}
    for slot in slots:
        stack = state[slot.stack]
        log[slot.rows] = jnp.full(stack.shape[1:2], stack.shape[0], jnp.int32)
        log[slot.old] = jnp.zeros(stack.shape[1:], stack.dtype)
    return log


def undo_sweep(state: State, entry: State, registers: Collection[str], slots: Sequence[LogSlot]) -> State:
    """The state before a sweep, from the state after it and the sweep's undo entry (its
    registers before, and the rows its requests overwrote, restored from the last request)."""
    state = {**state, **{key: entry[key] for key in registers}}
    for slot in reversed(slots):
        state[slot.stack] = stack_scatter(state[slot.stack], entry[slot.rows], entry[slot.old], scatter_free=False)
    return state


def undo_length(entry_bytes: int) -> int:
    """The number of sweeps L an undo log holds: as many as `UNDO_TAPE_BYTES` hold, at least 2
    and at most `MAX_UNDO_ENTRIES`."""
    return max(2, min(MAX_UNDO_ENTRIES, UNDO_TAPE_BYTES // max(entry_bytes, 1)))


def undo_logged_run(
    sweep: Callable[[State], State], logging: UndoLoggingLoop, halt_index: int, state: State, max_sweeps: int
) -> State:
    """`sweep` repeated from `state` until every member's pc reaches `halt_index` (or
    `max_sweeps` sweeps ran), differentiable in reverse mode by an undo log (see the module
    docstring)."""
    float_keys = tuple(key for key, value in state.items() if carries_cotangent(value))
    stack_keys, slots = frozenset(logging.stack_keys), logging.slots
    fixed = read_only_keys(logging.kernels, state, stack_keys)
    registers = tuple(key for key in state if key not in stack_keys and key not in fixed)
    logging_sweep = logging.single_sweep({**state, **empty_log(state, slots)})

    def running(state: State, swept: Any) -> Any:
        return (swept < max_sweeps) & (jnp.min(state["pc"]) < halt_index)

    def split(state: State) -> tuple[State, State]:
        floats = {key: state[key] for key in float_keys}
        return floats, {key: value for key, value in state.items() if key not in floats}

    def logged_sweep(state: State) -> tuple[State, State]:
        """(the state after one sweep, the sweep's undo entry)."""
        after = logging_sweep({**state, **empty_log(state, slots)})
        entry = {key: state[key] for key in registers}
        entry.update({name: after[name] for slot in slots for name in (slot.rows, slot.old)})
        return {key: after[key] for key in state}, entry

    entry_shapes = jax.eval_shape(lambda state: logged_sweep(state)[1], state)
    length = undo_length(state_bytes(entry_shapes))

    def record(state: State, until: Any, log: State) -> tuple[Any, State, State]:
        return record_logged(logged_sweep, running, length, state, until, log)

    def new_log() -> State:
        return {key: jnp.zeros((length, *leaf.shape), leaf.dtype) for key, leaf in entry_shapes.items()}

    @jax.custom_vjp
    def run(floats: State, others: State) -> State:
        _, final = lax.while_loop(
            lambda c: running(c[1], c[0]), lambda c: (c[0] + 1, sweep(c[1])), (jnp.int32(0), {**others, **floats})
        )
        return final  # type: ignore[no-any-return]

    def forward(floats: State, others: State) -> tuple[State, tuple[State, State, Any, State]]:
        initial = {**others, **floats}
        swept, final, log = record(initial, jnp.int32(max_sweeps), new_log())
        return final, (initial, final, swept, log)

    def backward(residuals: tuple[State, State, Any, State], cotangent: State) -> tuple[State, None]:
        initial, final, swept, log = residuals

        def undo_sweeps(first: Any, last: Any, state: State, adjoint: State, log: State) -> tuple[State, State]:
            """The sweeps from `last - 1` down to `first` (all in the log) undone from `state`
            (after `last` sweeps) and the adjoint pulled back through them."""

            def one_back(i: Any, carry: tuple[State, State]) -> tuple[State, State]:
                state, adjoint = carry
                before = undo_sweep(state, row(log, (last - 1 - i) % length), registers, slots)
                return before, pull_back(sweep, float_keys, before, adjoint)

            return lax.fori_loop(0, last - first, one_back, (state, adjoint))  # type: ignore[no-any-return]

        def undo_round(carry: tuple[Any, State, State, State]) -> tuple[Any, State, State, State]:
            """The sweeps the log holds undone, then the log refilled with the L sweeps before
            those, replayed from the start."""
            last, state, adjoint, log = carry
            first = jnp.maximum(last - length, 0)
            state, adjoint = undo_sweeps(first, last, state, adjoint, log)
            return first, state, adjoint, record(initial, first, log)[2]

        def from_log(adjoint: State) -> State:  # the run fits the log
            return undo_sweeps(jnp.int32(0), swept, final, adjoint, log)[1]

        def by_rounds(adjoint: State) -> State:
            return lax.while_loop(lambda c: c[0] > 0, undo_round, (swept, final, adjoint, log))[2]  # type: ignore[no-any-return]

        adjoint = {key: cotangent[key] for key in float_keys}
        return lax.cond(swept <= length, from_log, by_rounds, adjoint), None

    run.defvjp(forward, backward)
    return run(*split(state))


def pull_back(sweep: Callable[[State], State], float_keys: Collection[str], state: State, adjoint: State) -> State:
    """The cotangent of the float arrays of the state before a sweep, from `adjoint`, theirs
    after it (integer and boolean arrays carry none)."""
    others = {key: value for key, value in state.items() if key not in float_keys}
    _, pull = jax.vjp(lambda floats: {key: sweep({**others, **floats})[key] for key in float_keys}, {key: state[key] for key in float_keys})
    return pull(adjoint)[0]  # type: ignore[no-any-return]


def record_logged(
    logged_sweep: Callable[[State], tuple[State, State]], running: Callable[[State, Any], Any], length: int,
    state: State, until: Any, log: State,
) -> tuple[Any, State, State]:  # fmt: skip
    """Sweeps from `state` while running and before sweep `until`, each one's undo entry
    written to row (its number mod `length`) of `log`: (sweeps run, final state, log)."""

    def one(carry: tuple[Any, State, State]) -> tuple[Any, State, State]:
        swept, state, log = carry
        state, entry = logged_sweep(state)
        return swept + 1, state, write_row(log, swept % length, entry)

    return lax.while_loop(lambda c: running(c[1], c[0]) & (c[0] < until), one, (jnp.int32(0), state, log))  # type: ignore[no-any-return]
