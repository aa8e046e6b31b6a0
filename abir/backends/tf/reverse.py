"""The machine loop that `tf.GradientTape` goes through (`differentiable_run`).

A tape cannot record the machine's loop of data-dependent length usefully (TF would keep every
sweep's intermediates, and XLA differentiates no loop of unknown length). A run whose float
inputs a tape watches, or one staged into a graph (which TF may differentiate later), is
instead a `tf.custom_gradient` function of the state's float arrays, whose gradient pulls the
cotangent back sweep by sweep with a `tf.GradientTape` around one sweep (`pull_back`), finding
the state before each sweep by an undo log or by checkpoints: the schemes of
`abir.backends.reverse_scheme`, which tells their designs and costs, run here on TF's loops
(`TfTapeOps`). Under a tape the forward pass keeps the scheme's residuals (`ReverseLoop.forward`);
a run staged without one runs as any run, and its gradient, if TF asks for one, first replays
the run keeping them (`ReverseLoop.replayed_backward`). Integer and boolean arrays carry no
gradient.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from typing import Any

import tensorflow as tf
from tensorflow.python.eager import record

from abir.backends.base import Kernel, Span, State, Writes, apply_writes, span_row
from abir.backends.reverse_scheme import (
    CheckpointScheme,
    Scheme,
    Spec,
    TapeOps,
    UndoScheme,
    undo_loggable,
)
from abir.backends.tf.loop import TfLoop
from abir.backends.tf.prim_ops import as_tensor


class TfTapeOps(TapeOps):
    """`TapeOps` on TensorFlow: `tf.while_loop` and `tf.cond`, tape rows by gathers and
    scatters."""

    def while_loop(self, cond: Callable[[Any], Any], body: Callable[[Any], Any], carry: Any) -> Any:
        return tf.while_loop(lambda c: cond(c), lambda c: (body(c),), (carry,))[0]

    def fori_loop(self, lower: Any, upper: Any, body: Callable[[Any, Any], Any], carry: Any) -> Any:
        upper = tf.cast(upper, tf.int32)
        loop = self.while_loop(lambda c: c[0] < upper, lambda c: (c[0] + 1, body(c[0], c[1])), (tf.cast(lower, tf.int32), carry))
        return loop[1]

    def cond(self, pred: Any, true_fn: Callable[[Any], Any], false_fn: Callable[[Any], Any], operand: Any) -> Any:
        return tf.cond(pred, lambda: true_fn(operand), lambda: false_fn(operand))

    def int32(self, value: Any) -> Any:
        return tf.cast(value, tf.int32)

    def where(self, pred: Any, x: Any, y: Any) -> Any:
        return tf.where(pred, x, y)

    def minimum(self, x: Any, y: Any) -> Any:
        return tf.minimum(x, y)

    def maximum(self, x: Any, y: Any) -> Any:
        return tf.maximum(x, y)

    def reduce_min(self, x: Any) -> Any:
        return tf.reduce_min(x)

    def zeros(self, shape: Sequence[int], dtype: Any) -> Any:
        return tf.zeros(tuple(shape), tf.as_dtype(dtype))

    def row(self, tape: State, index: Any) -> State:
        return {key: tf.gather(rows, index) for key, rows in tape.items()}

    def write_row(self, tape: State, index: Any, state: State) -> State:
        at = tf.reshape(tf.cast(index, tf.int32), [1, 1])
        return {key: tf.tensor_scatter_nd_update(rows, at, tf.expand_dims(state[key], 0)) for key, rows in tape.items()}

    def halve(self, tape: State, length: int) -> State:
        return {key: tf.concat([rows[0:length:2], rows[length // 2 :]], 0) for key, rows in tape.items()}


OPS = TfTapeOps()


def carries_gradient(value: Any) -> bool:
    return bool(value.dtype.is_floating or value.dtype.is_complex)


def specs_of(state: State) -> dict[str, Spec]:
    return {key: (tuple(value.shape), value.dtype.as_numpy_dtype) for key, value in state.items()}


def pull_back(sweep: Callable[[State], State], float_keys: Sequence[str], state: State, adjoint: State) -> State:
    """The gradient of the float arrays of the state before a sweep, from `adjoint`, theirs
    after it, by a tape around the sweep (integer and boolean arrays carry none)."""
    floats = [state[key] for key in float_keys]
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(floats)
        after = sweep({**state, **dict(zip(float_keys, floats, strict=True))})
    grads = tape.gradient(
        [after[key] for key in float_keys],
        floats,
        output_gradients=[adjoint[key] for key in float_keys],
        unconnected_gradients=tf.UnconnectedGradients.ZERO,
    )
    return {key: tf.convert_to_tensor(grad) for key, grad in zip(float_keys, grads, strict=True)}


def window_rows(pointer: Any, rows: int) -> list[Any]:
    """The rows of a `reverse_scheme.StackWindow` of `rows` rows: `pointer - 1 - j` for each j."""
    pointer = as_tensor(pointer, tf.int32)
    return [pointer - (1 + j) for j in range(rows)]


def read_window(backend: Any, stack: Any, pointer: Any, rows: int) -> Any:
    """`reverse_scheme.WindowRead` on TF: the backend's `stack_read` of each row."""
    return tf.stack([backend.stack_read(stack, tf.maximum(row, 0)) for row in window_rows(pointer, rows)])


def write_window(backend: Any, stack: Any, pointer: Any, window: Any) -> Any:
    """`reverse_scheme.WindowWrite` on TF: the backend's `stack_scatter` of each row (the depth
    for a negative row: no write)."""
    depth = int(stack.shape[0])
    for j, row in enumerate(window_rows(pointer, int(window.shape[0]))):
        stack = backend.stack_scatter(stack, tf.where(row >= 0, row, depth), window[j])
    return stack


class DifferentiatedLoop(TfLoop):
    """The TF loop whose sweeps the gradient goes through. Under XLA a request for a `Span` of
    stack rows (`vm.descend`) is written row by row in a Python loop to the stack's depth instead
    of a `tf.while_loop`: XLA cannot compile the gradient of a loop inside a conditional (its
    accumulators are variants, which the conditional's other branch must fake)."""

    def apply_writes(self, stacks: State, writes: Writes) -> State:
        if not self.grouped:  # without XLA
            return super().apply_writes(stacks, writes)
        return apply_writes(stacks, writes, self.unrolled_scatter)

    def unrolled_scatter(self, stack: Any, rows: Any, value: Any) -> Any:
        if not isinstance(rows, Span):
            return self.backend.stack_scatter(stack, rows, value)
        count, start, depth = as_tensor(rows.count, tf.int32), as_tensor(rows.start, tf.int32), int(stack.shape[0])
        for offset in range(depth):
            j = tf.constant(offset, tf.int32)
            row = tf.where(j < count, start + j, depth)
            stack = self.backend.stack_scatter(stack, row, span_row(self.backend, rows, value, j, stack.dtype))
        return stack


Compile = Callable[[Callable[..., Any]], Callable[..., Any]]
"""How a function of the loop becomes a `tf.function` (with XLA or not)."""


class ReverseLoop:
    """The machine loop over `kernels` as the scheme's compiled passes (`reverse_scheme`: an
    undo log when the kernels allow one, `undo_loggable`, else checkpoints), each a
    `tf.function` made by `compile`, at most `max_sweeps` sweeps: `forward(state)` -> (final
    state, residuals), `backward(initial, residuals, adjoint)` -> the gradient of the initial
    state's float arrays, and `replayed_backward(initial, adjoint)`, the forward pass's
    residuals recomputed first."""

    def __init__(
        self, backend: Any, kernels: Sequence[Kernel], halt_index: int, stack_keys: Collection[str], xla: bool,
        max_sweeps: int, compile: Compile,
    ):  # fmt: skip
        self.backend = backend
        self.kernels = tuple(kernels)
        self.halt_index = halt_index
        self.stack_keys = stack_keys
        self.xla = xla
        self.max_sweeps = max_sweeps
        self.undo = undo_loggable(kernels)
        self.forward = compile(self._forward)
        self.backward = compile(self._backward)
        self.replayed_backward = compile(self._replayed_backward)

    def scheme(self, state: State) -> Scheme:
        """The scheme of a run from states shaped as `state` (built while tracing)."""
        self.backend.trace_count += 1
        loop = DifferentiatedLoop(self.backend, self.kernels, self.halt_index, self.stack_keys, self.xla)
        sweep = loop.single_sweep(state)
        float_keys = [key for key, value in state.items() if carries_gradient(value)]
        pull = functools.partial(pull_back, sweep, float_keys)
        specs = specs_of(state)
        if not self.undo:
            return CheckpointScheme(OPS, sweep, pull, self.halt_index, self.max_sweeps, specs)
        read, write = functools.partial(read_window, self.backend), functools.partial(write_window, self.backend)
        return UndoScheme(OPS, sweep, pull, self.halt_index, self.max_sweeps, specs, self.kernels, self.stack_keys, read, write)

    def _forward(self, state: State) -> tuple[State, tuple[Any, ...]]:
        scheme = self.scheme(state)
        if isinstance(scheme, UndoScheme):
            swept, final, log = scheme.forward(state)
            return final, (swept, final, log)
        swept, stride, tape, final = scheme.forward(state)
        return final, (swept, stride, tape)

    def _backward(self, initial: State, residuals: tuple[Any, ...], adjoint: State) -> State:
        scheme = self.scheme(initial)
        if isinstance(scheme, UndoScheme):
            swept, final, log = residuals
            return scheme.backward(initial, final, swept, log, adjoint)
        swept, stride, tape = residuals
        return scheme.backward(tape, stride, swept, adjoint)  # type: ignore[attr-defined,no-any-return]

    def _replayed_backward(self, initial: State, adjoint: State) -> State:
        _, residuals = self._forward(initial)
        return self._backward(initial, residuals, adjoint)


SECOND_DERIVATIVE = (
    "a tape recorded the gradient of a batched function on the TensorFlow backend (a second derivative, "
    "e.g. a tape around tape.gradient): the gradient's own loop over the run's sweeps cannot be differentiated "
    "again. Instead: take second derivatives on the JAX backend (jax.hessian, jax.jacfwd(jax.grad(f))), or "
    "compute the gradient outside the outer tape (see docs/language.md)"
)


def refusing_second_derivatives(inputs: list[Any], cotangents: list[Any]) -> list[Any]:
    """`cotangents` (computed from `inputs`), recorded as one function of `inputs` whose gradient
    raises `SECOND_DERIVATIVE`: in a graph, a tape that differentiates a gradient of the run gets
    abir's error instead of a gradient of None (TF builds a function's gradient with a tape of its
    own recording, so a recording tape there is not always the user's)."""

    @tf.custom_gradient
    def recorded(*values: Any) -> tuple[list[Any], Callable[..., list[Any]]]:
        def refuse(*_: Any) -> list[Any]:
            raise TypeError(SECOND_DERIVATIVE)

        return [tf.identity(value) for value in values[len(inputs) :]], refuse

    return list(recorded(*inputs, *cotangents))


def differentiable_run(loop: ReverseLoop, run: Callable[[State], State] | None, state: State) -> State:
    """The run of `loop` from `state` as a `tf.custom_gradient` function of its float arrays.
    With `run` (a run staged without a tape), the forward pass is `run` and the gradient replays
    the scheme's forward pass; without, the forward pass keeps the scheme's residuals."""
    float_keys = [key for key, value in state.items() if carries_gradient(value)]
    others = {key: value for key, value in state.items() if key not in float_keys}
    results: State = {}

    @tf.custom_gradient
    def differentiable(*floats: Any) -> tuple[list[Any], Callable[..., list[Any]]]:
        initial = {**others, **dict(zip(float_keys, floats, strict=True))}
        with record.stop_recording():  # the gradient is `gradient`'s: the tape need not see inside
            if run is None:
                final, residuals = loop.forward(initial)
            else:
                final, residuals = run(initial), None
        results.update(final)

        def gradient(*grads: Any) -> list[Any]:
            # eagerly, a tape recording here would fail on the sweeps' XLA functions before
            # reaching `refusing_second_derivatives`
            if tf.executing_eagerly() and record.should_record_backprop([*floats, *(g for g in grads if g is not None)]):
                raise TypeError(SECOND_DERIVATIVE)
            adjoint = {key: tf.zeros_like(final[key]) if grad is None else tf.convert_to_tensor(grad) for key, grad in zip(float_keys, grads, strict=True)}
            if residuals is None:
                got = loop.replayed_backward(initial, adjoint)
            else:
                got = loop.backward(initial, residuals, adjoint)
            return refusing_second_derivatives([*floats, *(g for g in grads if g is not None)], [got[key] for key in float_keys])

        return [final[key] for key in float_keys], gradient

    if not float_keys:
        return dict(loop.forward(state)[0] if run is None else run(state))
    outputs = differentiable(*(state[key] for key in float_keys))
    return {**results, **dict(zip(float_keys, outputs, strict=True))}
