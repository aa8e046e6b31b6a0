"""Runs staged into the caller's JAX computation (called on tracers: inside `jax.jit`,
`lax.scan`, `jax.vmap`, ...), and the errors they raise.

A staged run is one launch of the loop inlined into the caller's computation, under a
`custom_vmap` rule that folds `jax.vmap`'s mapped axes into the batch (`stage_run`), or, when
reverse-mode differentiation traces it (`differentiated`), without one, in the trace mode
`reverse` (`abir.backends.jax.reverse`); its dtypes follow the caller's `jax_enable_x64`
(`callers_dtypes`). Its error flags are checked by a host
callback only when some flag is set (`check_in_trace`), and the abir error that callback raises
is kept for `staged_error`, since JAX hands the caller only its text.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from abir.backends.jax.mode import trace_mode, traced_as
from abir.errors import AbirError

REVERSE_MODE_FAILURE = "Linearization failed to produce known values"
"""The start of the error JAX raises when reverse-mode differentiation meets a while loop."""

STAGED_ERRORS_KEPT = 16
"""How many of the latest errors raised by staged runs `staged_error` can return."""

_staged_errors: collections.deque[AbirError] = collections.deque(maxlen=STAGED_ERRORS_KEPT)


@contextlib.contextmanager
def callers_dtypes() -> Iterator[None]:
    """A run staged into a caller's trace without 64-bit types: JAX narrows the program's int64
    and float64 to int32 and float32 (the caller's policy), without a warning per array."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Explicitly requested dtype", category=UserWarning)
        yield


def is_python_number(value: Any) -> bool:
    return isinstance(value, bool | int | float) and not isinstance(value, np.generic)


def differentiated(values: Sequence[Any]) -> bool:
    """Whether reverse-mode differentiation (`jax.grad`, `jax.vjp`, ...) traces any of `values`:
    JAX's linearizing tracer, named as JAX names it (its class is not public API)."""
    return any(type(value).__name__ == "LinearizeTracer" for value in values)


def stage_run(run: Callable[[list[Any]], list[Any]], leaves: Sequence[Any]) -> list[Any]:
    """`run` as a `jax.custom_batching.custom_vmap` function of the array leaves (Python
    numbers stay weak constants), so that `jax.vmap` over the call folds its mapped axis into
    the batch instead of batching every op of the machine (`_fold_mapped_axis`); the folded
    axes are the trace mode's `folds` while the folded run is traced. When reverse mode traces
    the leaves (`differentiated`), `run` is staged in the trace mode `reverse`, as it is, with
    no `custom_vmap` (JAX linearizes none: its derivative would be a `custom_vmap` of the
    machine's loop and its derivative, which reverse mode cannot split)."""
    if differentiated(leaves):
        with traced_as(reverse=True):
            return list(run(list(leaves)))
    positions = [i for i, leaf in enumerate(leaves) if not is_python_number(leaf)]

    def unstaged(*arrays: Any) -> tuple[Any, ...]:
        merged = list(leaves)
        for position, array in zip(positions, arrays, strict=True):
            merged[position] = array
        return tuple(run(merged))

    staged = jax.custom_batching.custom_vmap(unstaged)

    @staged.def_vmap
    def folded(axis_size: int, in_batched: Sequence[bool], *arrays: Any) -> tuple[Any, Any]:
        reverse = differentiated(arrays)  # vmap inside reverse mode: e.g. jax.grad of a vmapped call
        if not any(in_batched):  # e.g. the primal part of a vmapped jvp: the same for every call
            with traced_as(reverse=reverse):
                outputs = unstaged(*arrays)
            return outputs, tuple(False for _ in outputs)
        if reverse:
            with traced_as(folds=(*trace_mode().folds, axis_size), reverse=True):
                return _fold_mapped_axis(unstaged, axis_size, in_batched, arrays)
        with traced_as(folds=(*trace_mode().folds, axis_size)):
            return _fold_mapped_axis(staged, axis_size, in_batched, arrays)

    try:
        return list(staged(*(leaves[i] for i in positions)))
    except ValueError as err:
        if REVERSE_MODE_FAILURE not in str(err):
            raise
        raise TypeError(
            "reverse mode (jax.grad, jax.vjp, jax.jacrev) of forward mode (jax.jvp, jax.jacfwd) of a batched "
            "function: forward mode stages its machine as a while loop, which reverse mode cannot go through. "
            "Instead: take the derivatives the other way round, forward over reverse (jax.hessian, "
            "jax.jacfwd(jax.grad(f)))"
        ) from err


def _fold_mapped_axis(
    staged: Callable[..., tuple[Any, ...]], axis_size: int, in_batched: Sequence[bool], arrays: Sequence[Any]
) -> tuple[tuple[Any, ...], tuple[bool, ...]]:
    """The vmap rule of a staged run: each call of the mapped function sees a batch of B
    members, so the V = `axis_size` calls are one run of V*B members. A mapped argument
    ([V, B, ...], or [V, 1, ...] / [V] shared by a call's members) and an unmapped one of B
    members ([B, ...], the same for every call) become [V*B, ...] (row v*B + b is member b of
    call v); an unmapped argument shared by all members stays as it is. The results, [V*B, ...],
    are split back into [V, B, ...]. `staged` is called again, so nested vmaps fold one by one."""
    per_call = [array.shape[1:] if batched else array.shape for array, batched in zip(arrays, in_batched, strict=True)]
    sizes = {shape[0] for shape in per_call if shape and shape[0] != 1}
    members = sizes.pop() if sizes else 1

    def fold(array: Any, batched: bool, shape: tuple[int, ...]) -> Any:
        event = tuple(shape[1:])
        if not batched:
            if not shape or shape[0] == 1:
                return array
            array = jnp.broadcast_to(array, (axis_size, *shape))
        elif not shape:
            array = array.reshape(axis_size, 1)
        array = jnp.broadcast_to(array, (axis_size, members, *event))
        return array.reshape(axis_size * members, *event)

    outputs = staged(*(fold(a, b, s) for a, b, s in zip(arrays, in_batched, per_call, strict=True)))
    unfolded = tuple(out.reshape(axis_size, members, *out.shape[1:]) for out in outputs)
    return unfolded, tuple(True for _ in unfolded)


def check_in_trace(check: Callable[[dict[str, np.ndarray]], None], flags: Mapping[str, Any], normal: Mapping[str, int]) -> None:
    """`check` as a callback of the staged computation, run only when some flag differs from its
    `normal` value (so a run without errors makes no host round trip); its error surfaces as a
    `jax.errors.JaxRuntimeError` carrying abir's message, and is kept for `staged_error`."""
    flags = dict(flags)
    raised = functools.reduce(jnp.logical_or, [jnp.any(value != normal.get(key, 0)) for key, value in flags.items()])

    def call_check(flags: dict[str, Any]) -> None:
        jax.debug.callback(functools.partial(_check_and_keep, check), flags)

    lax.cond(raised, call_check, lambda flags: None, flags)


def _check_and_keep(check: Callable[[dict[str, np.ndarray]], None], flags: dict[str, np.ndarray]) -> None:
    """`check` (a callback of a staged computation), keeping the abir error it raises: JAX
    turns it into a `JaxRuntimeError` that carries only its text."""
    try:
        check(flags)
    except AbirError as error:
        _staged_errors.append(_detached(error))
        raise


def _detached(error: AbirError) -> AbirError:
    """A copy of `error`'s message and attributes without its traceback, whose frames (the
    callback's, JAX's) hold the machine: a kept error must not keep its program alive."""
    copy = BaseException.__new__(type(error))
    copy.args = error.args
    copy.__dict__.update(error.__dict__)
    return copy


def staged_error(error: BaseException) -> AbirError | None:
    """The abir error (`StackOverflowError`, `StepLimitError`, with `members`, `vmap_indices`,
    ...) that a run staged into a JAX computation raised, given the `jax.errors.JaxRuntimeError`
    running that computation raised (which carries only its message); None if `error` does not
    come from one of the last `STAGED_ERRORS_KEPT` such errors."""
    text = str(error)
    return next((raised for raised in reversed(_staged_errors) if str(raised) in text), None)
