"""The machine loop on JAX's primitives (`JaxLoop`), and the traceable loop function a run
compiles (`machine_loop`, `with_status`).

`JaxLoop` is `abir.backends.traced.TracedLoop` on `lax.while_loop`, `lax.cond` and
`lax.switch`, reductions by chunks (`abir.backends.jax.reductions`) and in-place row updates
(`dynamic_update_slice`); its sweep traces each kernel's `split` once (`jax.jit`) and runs a
costly block compacted when few members stand there (`abir.backends.jax.compaction`); a
standalone run's loop also counts its active members (`JaxLoop.rows`, for
`abir.backends.jax.one_kernel.ActiveRows`). A loop
traced to be one kernel (`scatter_free`) writes its stacks without scatters
(`abir.backends.jax.writes.write_column_by_column`); that mode holds for the whole trace of the
loop, kernels and helpers included (`abir.backends.jax.mode`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from abir.backends.base import FLAGGED, RUNNING, STATUS_KEY, Kernel, Span, State, Writes, apply_writes
from abir.backends.jax import compaction
from abir.backends.jax.compaction import compact_members, compact_run, compact_slots, full_batch_requests
from abir.backends.jax.mode import traced_as
from abir.backends.jax.reductions import batch_any, batch_min, batch_sum
from abir.backends.jax.structured import structured, structured_sweep
from abir.backends.jax.writes import scatter_columns, write_column_by_column
from abir.backends.traced import STATS_KEY, BlockRun, TracedLoop, counted_batch, refills_lanes


@dataclass(frozen=True)
class Fill:
    """A state array every element of which is `value`, not made yet: a run of its own puts it
    on the device once (`on_device`, by `abir.backends.jax.backend.Launch`); a staged run makes
    it in the caller's trace (`made`); read on the host (`np.asarray`), it is made there."""

    shape: tuple[int, ...]
    dtype: np.dtype
    value: Any = 0

    def made(self) -> Any:
        """The array, traced in the program being compiled (or made eagerly outside one)."""
        return jnp.full(self.shape, self.value, self.dtype)

    def on_device(self) -> Any:
        """The array made on the host and sent to JAX's default device: an eager `jnp.full`
        would compile a program of its own for each shape and dtype, a first call's cost far
        above a copy of the bytes (docs/performance.md#first-calls)."""
        return jax.device_put(np.asarray(self))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.full(self.shape, self.value, self.dtype if dtype is None else dtype)


def fills_of(state: State) -> dict[str, Fill]:
    """The entries of `state` not made yet."""
    return {key: value for key, value in state.items() if isinstance(value, Fill)}


def machine_loop(
    backend: Any,
    kernels: tuple[Kernel, ...],
    halt_index: int,
    stack_keys: Collection[str],
    scatter_free: bool = False,
    rows: str | None = None,
) -> Callable[[State, Any], State]:
    """The machine loop over `kernels` as a traceable function of the state and the most loop
    iterations to run (`Backend.run_in_launches`), traced in the mode `scatter_free`
    (`abir.backends.jax.one_kernel.OneKernelWherePossible`); `rows` as in `JaxLoop`."""
    build = JaxLoop(backend, kernels, halt_index, stack_keys, scatter_free, rows).function(backend.execution)

    def traced(state: State, iterations: Any) -> State:
        with traced_as(scatter_free=scatter_free):  # read by what the kernels call (`stack_scatter`, `call_opaque`)
            return build(state, iterations)

    return traced


def with_status(loop: Callable[[State, Any], State], halt_index: int, flags: Mapping[str, int]) -> Callable[[State, Any], State]:
    """`loop` that also returns the final state's `STATUS_KEY` (running and flagged bits)."""

    def loop_with_status(state: State, iterations: Any) -> State:
        state = dict(loop(state, iterations))
        # per member bits, then one reduction (XLA CPU does not fuse separate reductions)
        bits = jnp.where(state["pc"] < halt_index, RUNNING, 0)
        for key, normal in flags.items():
            bits = bits | jnp.where(state[key] != normal, FLAGGED, 0)
        state[STATUS_KEY] = lax.reduce(bits.astype(jnp.int32), np.int32(0), lax.bitwise_or, (0,))
        return state

    return loop_with_status


@functools.lru_cache(maxsize=16)
def iterations_on_device(iterations: int) -> jax.Array:
    """A launch's iteration limit as a device scalar, made once per value: a NumPy scalar
    argument is transferred on every call. (`jnp.int32(n)` would compile a conversion first.)"""
    return jax.device_put(np.int32(iterations))


class JaxLoop(TracedLoop):
    """The machine loop on JAX (see the module docstring); `scatter_free` when traced to be one
    kernel. `rows` (a standalone run's loop, `abir.backends.jax.one_kernel.ActiveRows`): None,
    a loop of `(state, iterations)`; else a loop of `(state, limits)`, `limits` the int32 [2]
    (most iterations, `stop`) (`compaction.limits_on_device`), whose sweeping loop also returns
    `FEW_ACTIVE_KEY` (with `"measure"`, over a batch that has `compaction.live_rows` only): with `"measure"`, it stops once one to `stop` members are active
    (`TracedLoop.active_count`; never when `stop` is 0); with `"active"` (a loop over the rows
    of the active members, `compaction.gather_active`), once at most `stop` members are
    active (with 0: once every live member is in the program's tail)."""

    def __init__(
        self,
        backend: Any,
        kernels: Sequence[Kernel],
        halt_index: int,
        stack_keys: Collection[str],
        scatter_free: bool = False,
        rows: str | None = None,
    ):
        super().__init__(backend, kernels, halt_index, stack_keys)
        self.scatter_free = scatter_free
        if rows not in (None, "measure", "active"):
            raise ValueError(f"rows must be None, 'measure' or 'active', not {rows!r}")
        self.rows = rows
        self.stop: Any = 0

    def function(self, execution: str) -> Callable[[State, Any], State]:
        build = super().function(execution)
        if self.rows is None:
            return build

        def loop(state: State, limits: Any) -> State:
            self.stop = limits[1]  # read by `sweep_loop` while this traces
            return build(state, limits[0])

        return loop

    def sweep_loop(self, state: State, iterations: Any) -> State:
        if STATS_KEY not in state and structured(self.kernels):  # counts nothing
            return structured_sweep(self, state, iterations)
        batch = int(state["pc"].shape[0])
        # a loop over a batch too small to gain counts nothing; one over the active rows does
        few_rows = compaction.live_rows(batch) if self.rows == "measure" else 0
        plain = self.rows is None or few_rows is None or not counted_batch(batch)
        if plain or STATS_KEY in state or any(map(refills_lanes, self.kernels)):  # counts nothing
            return super().sweep_loop(state, iterations)
        stop = self.stop
        if self.rows == "measure":
            until = lambda active: (active > 0) & (active <= stop)  # noqa: E731
        else:
            until = lambda active: active <= stop  # noqa: E731
        state, _, used, (few, swept) = self.sweeps(state, {}, iterations, few_rows=few_rows, until=until)
        return {**state, compaction.FEW_ACTIVE_KEY: jnp.stack([few, swept, used, self.active_count(state["pc"])])}

    def while_loop(self, cond: Callable[[Any], Any], body: Callable[[Any], Any], carry: Any) -> Any:
        return lax.while_loop(cond, body, carry)

    def cond(self, pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any], *operands: Any) -> Any:
        return lax.cond(pred, true_fn, false_fn, *operands)

    def switch(self, index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
        return lax.switch(index, list(branches), *operands)

    def any(self, x: Any) -> Any:
        return batch_any(x)

    def min(self, x: Any) -> Any:
        return batch_min(x)

    def sum(self, x: Any) -> Any:
        return jnp.sum(x)

    def equal(self, x: Any, y: Any) -> Any:
        return x == y

    def cast(self, x: Any, dtype: Any) -> Any:
        return jnp.asarray(x, dtype=dtype)

    def like(self, value: Any, template: Any) -> Any:
        return jnp.broadcast_to(jnp.asarray(value, dtype=template.dtype), template.shape)

    def constant(self, array: np.ndarray) -> Any:
        return jnp.asarray(array)

    def stack_rows(self, rows: Sequence[Any]) -> Any:
        return jnp.stack(rows)

    def set_row(self, array: Any, row: Any, value: Any) -> Any:
        return lax.dynamic_update_index_in_dim(array, value, row, 0)

    def add_at(self, vector: Any, index: int, amount: Any) -> Any:
        # an update of a one-element slice, not a scatter: a loop with counters stays one kernel
        return lax.dynamic_update_index_in_dim(vector, vector[index] + amount, index, 0)

    def apply_writes(self, stacks: State, writes: Writes) -> State:
        """In a loop traced to be one kernel (`scatter_free`), all of a block's row requests in
        one loop over the columns (`write_column_by_column`)."""
        if not self.scatter_free or any(isinstance(rows, Span) for requests in writes.values() for rows, _ in requests):
            return super().apply_writes(stacks, writes)
        return write_column_by_column(stacks, writes)

    def traced_split(self, kernel: Any) -> Callable[..., Any]:
        """Jitted, so that the work count (`compact_rows`) and every sweep step reuse one trace."""
        return jax.jit(kernel.split)

    def block_run(
        self,
        kernel: Any,
        split: Callable[..., Any],
        template: State,
        written: Sequence[str],
        pushed: Sequence[str],
        run: BlockRun,
        skip: BlockRun,
    ) -> BlockRun:
        """With at most `compact_rows` (C) members here, a costly block runs on those members'
        rows only (`compact_run`): one `lax.switch` of skipping, the compacted run and the run on
        every row, by the number of members here."""
        rows = compaction.compact_rows(kernel, template, self.stack_keys, split)
        if rows is None:
            return super().block_run(kernel, split, template, written, pushed, run, skip)

        def run_compact_gathered(regs: State, stacks: State, here: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
            members, slots = compact_slots(here, rows)
            values, writes = compact_run(kernel, written, regs, stacks, members, slots)
            updated = self.apply_writes(stacks, full_batch_requests(stacks, writes, slots, rows))
            return values, tuple(updated[key] for key in pushed)

        def run_compact(regs: State, stacks: State, here: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
            members = compact_members(here, rows)
            values, writes = compact_run(kernel, written, regs, stacks, members)
            updated = apply_writes(stacks, writes, lambda stack, at, value: scatter_columns(stack, at, members, value))
            return values, tuple(updated[key] for key in pushed)

        def choose(regs: State, stacks: State, here: Any, anyone_here: bool) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
            count = batch_sum(here.astype(jnp.int32))
            branch = jnp.where(count <= rows, 1, 2)
            if not anyone_here:
                branch = jnp.where(count == 0, 0, branch)
            compact = run_compact_gathered if self.scatter_free else run_compact
            return lax.switch(branch, [skip, compact, run], regs, stacks, here)  # type: ignore[no-any-return]

        return choose
