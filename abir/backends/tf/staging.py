"""Runs staged into a TF graph (called on the symbolic tensors of a `tf.function`), and their
errors.

A staged run's errors are checked where the graph allows (`check_in_graph`): collected as extra
outputs of an `abir.tf_function` (`tf_function`, `CheckedFunction`: raised on the host after
each call, also under XLA), else asserted in the graph; under a plain
`tf.function(jit_compile=True)`, where XLA drops assertions, the failing members' results are
poisoned (`poisoned`) and a warning is issued, once per batched function and limits in a
process (not per call or trace). The failed members of the runs being staged are collected in a
context variable set for the duration of each staged run's trace (`failures_collected`), never
on the backend object.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import numpy as np
import tensorflow as tf

from abir.backends.tf.prim_ops import as_tensor

_FAILURES: ContextVar[list[tf.Tensor] | None] = ContextVar("abir_tf_staged_failures", default=None)
"""The failed members [B] of the checks of the innermost run being staged (`failures_collected`)."""


@contextlib.contextmanager
def failures_collected() -> Iterator[list[tf.Tensor]]:
    """A list receiving, while the block traces a staged run, the failed members of each check
    that cannot raise (`keep_failure`); the enclosing run's list is restored after it."""
    failures: list[tf.Tensor] = []
    token = _FAILURES.set(failures)
    try:
        yield failures
    finally:
        _FAILURES.reset(token)


def keep_failure(failed: tf.Tensor) -> None:
    """`failed` ([B] bool) for the run being staged to poison, if a run is being staged."""
    failures = _FAILURES.get()
    if failures is not None:
        failures.append(failed)


class UnreportedErrorsWarning(UserWarning):
    """A batched function's run is staged into an XLA-compiled `tf.function`, which cannot
    raise its errors (stack overflow, `max_steps`); `abir.tf_function` can."""


class PendingCheck:
    """The error flags of a run staged into a graph (symbolic [B] tensors, `normal` where no
    error occurred), the `check` raising abir's error from host copies of them, and the
    `summary` an assertion in the graph prints instead."""

    def __init__(
        self,
        check: Callable[[dict[str, np.ndarray]], None],
        values: dict[str, Any],
        normal: dict[str, int],
        summary: str,
    ):
        self.check = check
        self.values = values
        self.normal = normal
        self.summary = summary

    def failed_members(self, values: Mapping[str, Any] | None = None) -> tf.Tensor:
        """[B] bool: the members whose flags (`self.values` by default) are not normal."""
        values = self.values if values is None else values
        flags = [tf.not_equal(value, as_tensor(self.normal.get(key, 0), value.dtype)) for key, value in values.items()]
        return functools.reduce(tf.logical_or, flags)

    def assert_in_graph(self, values: Mapping[str, Any] | None = None) -> None:
        """A `tf.debugging.Assert` failing the graph's run with the summary and the flags."""
        values = self.values if values is None else values
        details = [item for key, value in values.items() for item in (f"{key}:", value)]
        failed = tf.reduce_any(self.failed_members(values))
        tf.debugging.Assert(tf.logical_not(failed), [self.summary, *details], summarize=16)

    def raise_if_failed(self, values: Mapping[str, Any]) -> None:
        """abir's own error (`check`) if the eager flag `values` show one."""
        host = {key: np.asarray(value) for key, value in values.items()}
        if any(np.any(value != self.normal.get(key, 0)) for key, value in host.items()):
            self.check(host)


class _Collector(list[PendingCheck]):
    """The checks of the runs staged into `graph` (the body of an `abir.tf_function` being
    traced)."""

    def __init__(self, graph: Any):
        super().__init__()
        self.graph = graph


_COLLECTORS: list[_Collector] = []
"""The `abir.tf_function` bodies being traced, innermost last."""


def _collector_for(graph: Any) -> _Collector | None:
    """The collector of `graph` when it is the body of an `abir.tf_function` being traced (a run
    staged in a nested function or a control-flow branch is checked in its own graph)."""
    return next((c for c in reversed(_COLLECTORS) if c.graph is graph), None)


def compiled_by_xla() -> bool:
    """Whether the graph being built is compiled by XLA (`tf.function(jit_compile=True)` or
    nested in one): tracing such a function enters an XLA control-flow context."""
    from tensorflow.python.ops import control_flow_util

    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


def check_in_graph(pending: PendingCheck) -> tf.Tensor | None:
    """Check a staged run's flags where the graph being built allows: collected by the
    `abir.tf_function` whose body it is, else asserted in the graph, or, under XLA (which
    compiles assertions away), a warning; then returns the failed members [B], whose results
    the caller poisons."""
    collector = _collector_for(tf.compat.v1.get_default_graph())
    if collector is not None:
        collector.append(pending)
        return None
    if not compiled_by_xla():
        pending.assert_in_graph()
        return None
    _warn_once(pending.summary)
    return pending.failed_members()


_WARNED: set[str] = set()
"""The staged runs (`PendingCheck.summary`: the function and its limits) that
`UnreportedErrorsWarning` was issued for in this process."""


def _warn_once(summary: str) -> None:
    """`UnreportedErrorsWarning` for a run staged under plain XLA, pointing at the user's line,
    once per batched function and limits (`summary`) in the process: tracing again (another
    input shape, another `tf.function`) and calling add none, whatever the warning filters."""
    if summary in _WARNED:
        return
    _WARNED.add(summary)
    run, _, causes = summary.removeprefix("abir: ").partition(" failed: ")
    warnings.warn(
        f"abir: {run} is inside tf.function(jit_compile=True), where nothing can raise (XLA drops assertions): "
        "if it fails, the results of the failing members are NaN (floats) or the dtype's minimum (integers) and "
        "nothing else tells. Decorate the function with abir.tf_function(jit_compile=True) instead of "
        "tf.function: it raises abir's error after each call. Errors this run would not report: "
        f"{causes.split(' (per member')[0]}. (Shown once per batched function and limits.)",
        UnreportedErrorsWarning,
        stacklevel=_user_stacklevel(),
    )


def _user_stacklevel() -> int:
    """The `stacklevel` (for a warning issued by this function's caller) of the first frame
    outside abir, TensorFlow and AutoGraph's generated code: the user's line."""
    abir_dir = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))  # this file is abir/backends/tf/staging.py
    internal = (abir_dir, os.path.dirname(tf.__file__), "__autograph_generated")
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and any(part in frame.f_code.co_filename for part in internal):
        frame, level = frame.f_back, level + 1
    return level


def poisoned(output: tf.Tensor, failed: tf.Tensor) -> tf.Tensor:
    """`output` [B, ...] with the rows of `failed` members set to NaN (floats) or the dtype's
    minimum (signed integers; maximum if unsigned); bools are left as they are."""
    dtype = output.dtype
    if dtype.is_floating:
        poison = tf.constant(np.nan, dtype)
    elif dtype.is_integer:
        poison = tf.constant(dtype.max if dtype.is_unsigned else dtype.min, dtype)
    else:
        return output
    mask = tf.reshape(failed, [-1] + [1] * (output.shape.rank - 1))
    return tf.where(mask, poison, output)


class CheckedFunction:
    """A `tf.function` whose batched runs raise abir's own errors (`StackOverflowError`,
    `StepLimitError`, naming the function, the members and the limit) when a call returns, with
    or without `jit_compile=True`. While tracing, each run staged directly in its body adds its
    error flags to the function's outputs; a call checks them on the host after the compiled
    function returns (as `jax.experimental.checkify` does for JAX), since nothing inside an XLA
    program can raise. Called inside another graph it checks them with assertions there."""

    def __init__(self, fn: Callable[..., Any], options: Mapping[str, Any]):
        functools.update_wrapper(self, fn)
        self.python_function = fn
        self.function = tf.function(self._traced, **options)
        self._traces: dict[int, list[PendingCheck]] = {-1: []}

    def _traced(self, *args: Any, **kwargs: Any) -> tuple[Any, tf.Tensor, list[dict[str, Any]]]:
        """`fn`'s results, which trace made them, and the flags of the runs staged in it."""
        collector = _Collector(tf.compat.v1.get_default_graph())
        _COLLECTORS.append(collector)
        try:
            outputs = self.python_function(*args, **kwargs)
        finally:
            _COLLECTORS.remove(collector)
        token = -1  # nothing to check (also every call when functions run eagerly: nothing is kept)
        if collector:
            token = len(self._traces)
            self._traces[token] = list(collector)
        return outputs, tf.constant(token, tf.int32), [pending.values for pending in collector]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        outputs, token, flags = self.function(*args, **kwargs)
        if tf.is_symbolic_tensor(token):  # called while another graph is built: checked there
            traced = self.function.get_concrete_function(*args, **kwargs).structured_outputs[1]
            for pending, values in zip(self._traces[int(tf.get_static_value(traced))], flags, strict=True):
                check_in_graph(PendingCheck(pending.check, values, pending.normal, pending.summary))
            return outputs
        for pending, values in zip(self._traces[int(token)], flags, strict=True):
            pending.raise_if_failed(values)
        return outputs


def tf_function(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """`tf.function(fn, **options)` (same options: `jit_compile`, `autograph`, ...) whose
    batched runs raise abir's own errors after each call, also under XLA (`CheckedFunction`).
    Use it as `@abir.tf_function(jit_compile=True)` in place of `@tf.function(...)`."""
    if fn is None:
        return lambda f: CheckedFunction(f, options)
    return CheckedFunction(fn, options)
