"""The machine loop that reverse-mode differentiation (`jax.grad`, `jax.vjp`,
`jax.value_and_grad`, `jax.jacrev`) goes through (`machine_loop`, `differentiable_run`).

JAX differentiates no `lax.while_loop` in reverse mode, and the machine is one: sweeps
(`abir.backends.traced.TracedLoop.single_sweep`) until every member halts, their number known
only when the run ends. A run staged while reverse mode traces its arguments
(`abir.backends.jax.staging`) is instead a `jax.custom_vjp` function of the state:

* forward: the loop of sweeps, recording the state before a sweep into a tape of C checkpoints
  (`tape_length`, fixed when the loop is traced: XLA's shapes are static) every `stride`
  sweeps. The stride starts at 1; when the tape is full, every other checkpoint is dropped and
  the stride doubles, so a run of n sweeps keeps the state of every sweep when n <= C, else
  of every 2^ceil(log2(n / C))-th.
* backward: for each sweep k = n-1, ..., 0, the state before it is its checkpoint advanced by
  k mod stride sweeps (none when the run fits the tape), and the cotangent of the state's
  floating-point arrays is pulled back through that one sweep by `jax.vjp`. Integer and
  boolean arrays (program counters, stack pointers, integer and boolean values) carry none.

The tape costs C times the state; the backward pass one sweep's vjp per sweep, plus
n * (stride - 1) / 2 recomputed sweeps when the run outgrows the tape.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from abir.backends.base import Kernel, State
from abir.backends.jax.loop import JaxLoop

TAPE_BYTES = 64 * 2**20
"""The memory a run's tape of checkpoints may take (`tape_length`)."""

MAX_CHECKPOINTS = 1024
"""The most checkpoints a tape holds, however small the state."""


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
    """The number of checkpoints C of a run's tape: as many states as `TAPE_BYTES` hold, even,
    at least 2 and at most `MAX_CHECKPOINTS`."""
    size = sum(int(np.prod(value.shape)) * np.dtype(value.dtype).itemsize for value in state.values())
    fitting = TAPE_BYTES // max(size, 1)
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
        start = {**others, **floats}
        tape = {key: jnp.zeros((length + 1, *value.shape), value.dtype) for key, value in start.items()}
        swept, stride, tape, final = record_sweeps(sweep, running, start, tape, length)
        return final, (tape, stride, swept)

    def backward(residuals: tuple[State, Any, Any], cotangent: State) -> tuple[State, None]:
        tape, stride, swept = residuals

        def state_before(k: Any) -> State:
            checkpoint = {key: lax.dynamic_index_in_dim(rows, k // stride, 0, keepdims=False) for key, rows in tape.items()}
            return lax.fori_loop(0, k % stride, lambda _, state: sweep(state), checkpoint)  # type: ignore[no-any-return]

        def pull_back(i: Any, adjoint: State) -> State:
            floats, others = split(state_before(swept - 1 - i))
            _, pull = jax.vjp(lambda floats: split(sweep({**others, **floats}))[0], floats)
            return pull(adjoint)[0]  # type: ignore[no-any-return]

        adjoint = {key: cotangent[key] for key in float_keys}
        return lax.fori_loop(0, swept, pull_back, adjoint), None

    run.defvjp(forward, backward)
    return run(*split(state))


def record_sweeps(
    sweep: Callable[[State], State], running: Callable[[State, Any], Any], state: State, tape: State, length: int
) -> tuple[Any, Any, State, State]:
    """The forward loop of `differentiable_run`: (sweeps run, stride, tape, final state). Rows
    0..length-1 of `tape` are the checkpoints, row `length` is scratch, written by the sweeps
    that are not checkpointed (a write every sweep, rather than a conditional the whole tape
    would pass through). An inner loop fills the tape at one stride; the outer loop, when the
    tape is full, thins it and doubles the stride."""

    def tape_full(swept: Any, stride: Any) -> Any:
        return (swept % stride == 0) & (swept // stride >= length)

    def one_sweep(carry: tuple[Any, Any, State, State]) -> tuple[Any, Any, State, State]:
        swept, stride, tape, state = carry
        row = jnp.where(swept % stride == 0, swept // stride, length)
        tape = {key: lax.dynamic_update_index_in_dim(rows, state[key], row, 0) for key, rows in tape.items()}
        return swept + 1, stride, tape, sweep(state)

    def fill(carry: tuple[Any, Any, State, State]) -> tuple[Any, Any, State, State]:
        swept, stride, tape, state = carry
        full = tape_full(swept, stride)
        tape = {key: jnp.where(full, rows.at[: length // 2].set(rows[0:length:2]), rows) for key, rows in tape.items()}
        stride = jnp.where(full, 2 * stride, stride)
        return lax.while_loop(  # type: ignore[no-any-return]
            lambda c: running(c[3], c[0]) & ~tape_full(c[0], c[1]), one_sweep, (swept, stride, tape, state)
        )

    start = (jnp.int32(0), jnp.int32(1), tape, state)
    return lax.while_loop(lambda c: running(c[3], c[0]), fill, start)  # type: ignore[no-any-return]
