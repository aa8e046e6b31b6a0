"""What a JAX trace of the machine is for, scoped to that trace (`TraceMode`, `traced_as`).

The backend's methods (`stack_scatter`, `call_opaque`, `check_when_run`, `run`, `mapped_axes`)
are called by the machine while one of its runs is traced, with the protocol's arguments only.
How they stage their work depends on the trace around them: a loop meant to be one kernel, a
run folded into `jax.vmap` axes, a `shard_map` body. That context lives in a context variable
set for the duration of the trace and restored after it, never on the backend object, so a
backend is the same object before, during and after any trace.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any


@dataclasses.dataclass
class ShardTrace:
    """What a `shard_map` body being traced collects (`abir.backends.jax.sharding`): its number
    of members, the counters of its run when collected, the error flags of its runs (outputs of
    the body) and, per run, the check raising abir's error from them with each flag's normal
    value."""

    members: int
    counters: dict[str, Any] | None = None
    flags: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    checks: list[tuple[Callable[[dict[str, Any]], None], dict[str, int]]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class TraceMode:
    """The trace being built: `scatter_free` while tracing a loop meant to be one kernel
    (`abir.backends.jax.one_kernel`: stack writes, compaction and materialized helper results
    without scatters); `folds`, the `jax.vmap` axis sizes folded into the staged run's batch,
    innermost first (`abir.backends.jax.staging`); `shard`, the `shard_map` body being traced
    (`abir.backends.jax.sharding`), or None; `reverse` while staging a run that reverse-mode
    differentiation goes through (`abir.backends.jax.reverse`)."""

    scatter_free: bool = False
    folds: tuple[int, ...] = ()
    shard: ShardTrace | None = None
    reverse: bool = False


_OUTSIDE_ANY_TRACE = TraceMode()
_MODE: ContextVar[TraceMode] = ContextVar("abir_jax_trace_mode", default=_OUTSIDE_ANY_TRACE)


def trace_mode() -> TraceMode:
    """The mode of the trace being built (the default outside any)."""
    return _MODE.get()


@contextlib.contextmanager
def traced_as(**changes: Any) -> Iterator[TraceMode]:
    """The current mode with `changes` (`TraceMode`'s fields) for the duration of the block."""
    token = _MODE.set(dataclasses.replace(_MODE.get(), **changes))
    try:
        yield _MODE.get()
    finally:
        _MODE.reset(token)
