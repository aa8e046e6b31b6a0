"""The machine loop that reverse-mode differentiation (`jax.grad`, `jax.vjp`,
`jax.value_and_grad`, `jax.jacrev`) goes through (`machine_loop`, `differentiable_run`).

JAX differentiates no `lax.while_loop` in reverse mode, and the machine is one: sweeps
(`abir.backends.traced.TracedLoop.single_sweep`) until every member halts, their number known
only when the run ends. A run staged while reverse mode traces its arguments
(`abir.backends.jax.staging`) is instead a `jax.custom_vjp` function of the state:

* forward: the loop of sweeps, recording the state before a sweep into a tape of C
  checkpoints (`tape_length`, fixed when the loop is traced: XLA's shapes are static) every
  `stride` sweeps. The stride starts at 1; when the tape is full, every other checkpoint is
  dropped and the stride doubles, so a run of n sweeps keeps the state before every sweep when
  n <= C, else before every 2^ceil(log2(n / C))-th.
* backward: for each sweep, from the last, the cotangent of the state's floating-point arrays
  is pulled back through that one sweep by `jax.vjp`, at the state before it. Integer and
  boolean arrays (program counters, stack pointers, integer and boolean values) carry none.
  When n <= C that state is on the tape. Otherwise, segment by segment from the last, the
  states of the `stride` sweeps after a checkpoint are recomputed into a second buffer of C
  states (every `substride`-th of them, substride = ceil(stride / C), 1 while n <= C * C), and
  a state between two of those is recomputed from the one before it.

The tape and the segment buffer cost 2 C times the state (C from `TAPE_BYTES`, at most
`MAX_CHECKPOINTS`); the backward pass one sweep's vjp per sweep, plus one recomputed sweep per
sweep when n > C, plus about n (substride - 1) / 2 more when n > C * C.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from abir.backends.base import Kernel, State
from abir.backends.jax.loop import JaxLoop
from abir.backends.jax.one_kernel import state_bytes

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
        sweep = JaxLoop(backend, kernels, halt_index, stack_keys).single_sweep(state)
        return differentiable_run(sweep, halt_index, dict(state), int(iterations))

    return loop


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

        def pull_back(state: State, adjoint: State) -> State:
            floats, others = split(state)
            _, pull = jax.vjp(lambda floats: split(sweep({**others, **floats}))[0], floats)
            return pull(adjoint)[0]  # type: ignore[no-any-return]

        def segment_back(i: Any, carry: tuple[State, State]) -> tuple[State, State]:
            adjoint, states = carry
            segment = segments - 1 - i
            sweeps = jnp.minimum(stride, swept - segment * stride)
            states = segment_states(sweep, row(tape, segment), sweeps, substride, states, length)

            def one_back(j: Any, adjoint: State) -> State:
                offset = sweeps - 1 - j
                start = row(states, offset // substride)
                return pull_back(lax.fori_loop(0, offset % substride, lambda _, state: sweep(state), start), adjoint)

            return lax.fori_loop(0, sweeps, one_back, adjoint), states

        def from_checkpoints(adjoint: State) -> State:  # the run fits the tape: its states are there
            return lax.fori_loop(0, swept, lambda i, adjoint: pull_back(row(tape, swept - 1 - i), adjoint), adjoint)  # type: ignore[no-any-return]

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
