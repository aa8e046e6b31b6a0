"""The machine loop that reverse-mode differentiation (`jax.grad`, `jax.vjp`,
`jax.value_and_grad`, `jax.jacrev`) goes through (`machine_loop`).

JAX differentiates no `lax.while_loop` in reverse mode, and the machine is one. A run staged
while reverse mode traces its arguments (`abir.backends.jax.staging`) is instead a
`jax.custom_vjp` function of the state, whose backward pass pulls the cotangent back sweep by
sweep, block by block (`pull_back`: each block that ran, by `jax.vjp` of that block alone),
finding the state before each sweep by an undo log or by checkpoints: the schemes of
`abir.backends.reverse_scheme`, which tells their designs and costs, run here on JAX's loops
(`JaxTapeOps`). A float argument shared by all members arrives as one row
(`JaxBackend.spread_row`) and stays one in the state when no kernel writes it
(`with_shared_rows`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from abir.backends.base import Kernel, State
from abir.backends.jax.loop import JaxLoop
from abir.backends.reverse_scheme import (
    CheckpointScheme,
    Spec,
    TapeOps,
    UndoScheme,
    shared_row_keys,
    undo_loggable,
)
from abir.backends.traced import TracedLoop


class JaxTapeOps(TapeOps):
    """`TapeOps` on JAX: `lax` loops and conditional, tape rows by dynamic slices."""

    def while_loop(self, cond: Callable[[Any], Any], body: Callable[[Any], Any], carry: Any) -> Any:
        return lax.while_loop(cond, body, carry)

    def fori_loop(self, lower: Any, upper: Any, body: Callable[[Any, Any], Any], carry: Any) -> Any:
        return lax.fori_loop(lower, upper, body, carry)

    def cond(self, pred: Any, true_fn: Callable[[Any], Any], false_fn: Callable[[Any], Any], operand: Any) -> Any:
        return lax.cond(pred, true_fn, false_fn, operand)

    def int32(self, value: Any) -> Any:
        return jnp.int32(value)

    def where(self, pred: Any, x: Any, y: Any) -> Any:
        return jnp.where(pred, x, y)

    def minimum(self, x: Any, y: Any) -> Any:
        return jnp.minimum(x, y)

    def maximum(self, x: Any, y: Any) -> Any:
        return jnp.maximum(x, y)

    def reduce_min(self, x: Any) -> Any:
        return jnp.min(x)

    def zeros(self, shape: Sequence[int], dtype: Any) -> Any:
        return jnp.zeros(tuple(shape), dtype)

    def row(self, tape: State, index: Any) -> State:
        return {key: lax.dynamic_index_in_dim(rows, index, 0, keepdims=False) for key, rows in tape.items()}

    def write_row(self, tape: State, index: Any, state: State) -> State:
        return {key: lax.dynamic_update_index_in_dim(rows, state[key], index, 0) for key, rows in tape.items()}

    def halve(self, tape: State, length: int) -> State:
        return {key: rows.at[: length // 2].set(rows[0:length:2]) for key, rows in tape.items()}


OPS = JaxTapeOps()


def machine_loop(
    backend: Any, kernels: tuple[Kernel, ...], halt_index: int, stack_keys: Collection[str]
) -> Callable[[State, int], State]:
    """The machine loop over `kernels` as `(state, iterations) -> state`, `iterations` (the
    most sweeps) a Python int: a `jax.custom_vjp` function differentiated by an undo log when
    the kernels allow one (`undo_loggable`), else by checkpoints."""

    def loop(state: State, iterations: int) -> State:
        backend.trace_count += 1  # runs only while tracing
        state, shared = with_shared_rows(dict(state), kernels, stack_keys)
        sweep = JaxLoop(backend, kernels, halt_index, stack_keys).single_sweep(state)
        plain = PlainStepLoop(backend, kernels, halt_index, stack_keys)
        pull = functools.partial(pull_back, functools.partial(plain.sweep_blocks, plain.block_steps(state)), float_keys_of(state))
        specs = specs_of(state)
        if not undo_loggable(kernels):
            final = differentiable_run(CheckpointScheme(OPS, sweep, pull, halt_index, int(iterations), specs), state)
        else:
            scheme = UndoScheme(OPS, sweep, pull, halt_index, int(iterations), specs, kernels, stack_keys, read_window, write_window)
            final = undo_logged_run(scheme, state)
        return spread_rows(final, shared)

    return loop


def with_shared_rows(state: State, kernels: Sequence[Kernel], stack_keys: Collection[str]) -> tuple[State, frozenset[str]]:
    """(`state`, the registers it holds as one row shared by every member,
    `reverse_scheme.shared_row_keys`); the one-row registers a kernel writes are spread to the
    batch here, as in a run without reverse mode."""
    shared, written = shared_row_keys(state, kernels, stack_keys)
    return spread_rows(state, written), shared


def spread_rows(state: State, keys: Collection[str]) -> State:
    """`state` with the one-row registers `keys` spread to every member's."""
    batch = state["pc"].shape[0]
    return {**state, **{key: jnp.broadcast_to(state[key], (batch, *state[key].shape[1:])) for key in keys}}


def specs_of(state: State) -> dict[str, Spec]:
    return {key: (tuple(value.shape), np.dtype(value.dtype)) for key, value in state.items()}


def carries_cotangent(value: Any) -> bool:
    return bool(jnp.issubdtype(value.dtype, jnp.inexact))


def float_keys_of(state: State) -> tuple[str, ...]:
    return tuple(key for key, value in state.items() if carries_cotangent(value))


def split_floats(state: State) -> tuple[State, State]:
    """(the float arrays of `state`, the others)."""
    floats = {key: value for key, value in state.items() if carries_cotangent(value)}
    return floats, {key: value for key, value in state.items() if key not in floats}


def differentiable_run(scheme: CheckpointScheme, state: State) -> State:
    """The run from `state` (`scheme.run`), differentiable in reverse mode by checkpoints."""

    @jax.custom_vjp
    def run(floats: State, others: State) -> State:
        return scheme.run({**others, **floats})

    def forward(floats: State, others: State) -> tuple[State, tuple[State, Any, Any]]:
        swept, stride, tape, final = scheme.forward({**others, **floats})
        return final, (tape, stride, swept)

    def backward(residuals: tuple[State, Any, Any], cotangent: State) -> tuple[State, None]:
        tape, stride, swept = residuals
        adjoint = {key: cotangent[key] for key in float_keys_of(tape)}
        return scheme.backward(tape, stride, swept, adjoint), None

    run.defvjp(forward, backward)
    return run(*split_floats(state))  # type: ignore[no-any-return]


def undo_logged_run(scheme: UndoScheme, state: State) -> State:
    """The run from `state` (`scheme.run`), differentiable in reverse mode by an undo log."""

    @jax.custom_vjp
    def run(floats: State, others: State) -> State:
        return scheme.run({**others, **floats})

    def forward(floats: State, others: State) -> tuple[State, tuple[State, State, Any, State]]:
        initial = {**others, **floats}
        swept, final, log = scheme.forward(initial)
        return final, (initial, final, swept, log)

    def backward(residuals: tuple[State, State, Any, State], cotangent: State) -> tuple[State, None]:
        initial, final, swept, log = residuals
        adjoint = {key: cotangent[key] for key in float_keys_of(initial)}
        return scheme.backward(initial, final, swept, log, adjoint), None

    run.defvjp(forward, backward)
    return run(*split_floats(state))  # type: ignore[no-any-return]


def pull_back(sweep_blocks: Callable[[State], tuple[State, list[tuple[Any, State, Any]]]], float_keys: Collection[str], state: State, adjoint: State) -> State:
    """`reverse_scheme.PullBack` block by block: the sweep from `state` run again keeping the
    state before each block (`sweep_blocks`: `TracedLoop.sweep_blocks` of `PlainStepLoop`'s
    steps), then the adjoint pulled back through each block from the last, under a conditional
    on whether any member ran it, whose arm is the vjp of that block alone (`block_adjoint`). A
    `jax.vjp` of the whole sweep would linearize every block's conditional into one that also
    carries its residuals out and one that transposes it: several times the kernels
    (docs/performance.md, "Training through recursion")."""
    _, ran = sweep_blocks(state)
    for step, before, here in reversed(ran):
        arm = functools.partial(block_adjoint, step, float_keys, here)
        adjoint = lax.cond(jnp.any(here), arm, lambda _, adjoint: adjoint, before, adjoint)
    return adjoint


def block_adjoint(step: Any, float_keys: Collection[str], here: Any, before: State, adjoint: State) -> State:
    """The cotangent of the float arrays of the state `before` a block that runs, from
    `adjoint`, theirs after it."""
    others = {key: value for key, value in before.items() if key not in float_keys}

    def block(floats: State) -> State:
        after = step({**others, **floats}, here, True)
        return {key: after[key] for key in float_keys}

    _, pull = jax.vjp(block, {key: before[key] for key in float_keys})
    return pull(adjoint)[0]  # type: ignore[no-any-return]


def window_rows(pointer: Any, rows: int) -> Any:
    """The rows of a `reverse_scheme.StackWindow` of `rows` rows, [rows, B] int32: `pointer - 1 - j`
    in row j."""
    return jnp.asarray(pointer, jnp.int32)[None, :] - 1 - jnp.arange(rows, dtype=jnp.int32)[:, None]


def read_window(stack: Any, pointer: Any, rows: int) -> Any:
    """`reverse_scheme.WindowRead` on JAX: one gather."""
    at = jnp.clip(window_rows(pointer, rows), 0, stack.shape[0] - 1)
    return stack[at, jnp.arange(stack.shape[1])[None, :]]


def write_window(stack: Any, pointer: Any, window: Any) -> Any:
    """`reverse_scheme.WindowWrite` on JAX: one scatter (a select per row of the window over the
    whole stack, as `stack_scatter` writes a small one, costs more in the backward pass:
    docs/performance.md, "Training through recursion")."""
    at = window_rows(pointer, window.shape[0])
    at = jnp.where(at >= 0, at, stack.shape[0])  # out of range: dropped
    return stack.at[at, jnp.arange(stack.shape[1])[None, :]].set(window, mode="drop")


class PlainStepLoop(JaxLoop):
    """The JAX loop whose blocks run under a plain conditional, with no compaction: the steps
    `pull_back` runs and differentiates block by block (a step told that a member is there
    runs its block alone)."""

    def block_run(self, kernel: Any, split: Any, template: State, written: Any, pushed: Any, run: Any, skip: Any) -> Any:
        return TracedLoop.block_run(self, kernel, split, template, written, pushed, run, skip)
