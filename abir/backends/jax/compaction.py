"""Compacted block runs: a costly block that few members reach runs on their gathered rows only.

Every block computes on all B rows and masks its writes, so a costly block that few members
reach in a sweep wastes most of its work. In the sweep execution such a block (at least
`COMPACT_MIN_ROW_WORK` element operations per member, counted on its traced kernel by
`abir.backends.jax.cost`) runs compacted when at most B / `COMPACT_FRACTION` members stand
there (`compact_run`). The loop (`abir.backends.jax.loop`) chooses, per sweep, between skipping
the block, the compacted run and the run on every row. On NUTS this is the momentum draw,
reached by a few chains in most sweeps (docs/performance.md#jax-and-tf-backends, "Compaction").

A whole run's active members move to fewer rows the same way (`live_rows`, `gather_active`,
`put_back`), chosen per compiled loop by `abir.backends.jax.one_kernel.ActiveRows`
(docs/performance.md#active-rows).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from abir.backends.base import Kernel, State, Writes, loops_to_itself, separate_stacks, splittable
from abir.backends.jax.cost import jaxpr_work
from abir.backends.traced import LazyRegisters, register_writes, writes_whole_stacks

COMPACT_MIN_ROW_WORK = 1000
"""A block whose work per member (`row_work`) is at least this runs compacted (`compact_run`)
when few members stand there. Compacting cheaper blocks too gains little at large batches, and
each compacted block adds to the first call's XLA compilation
(docs/performance.md#jax-and-tf-backends, "Compaction")."""
COMPACT_MIN_WORK_PER_WRITTEN = 50
"""A block that repeats in a loop of its own (`loops_to_itself`) runs compacted only when its
work per member is also at least this many times the elements of the registers it writes per
member (`written_per_member`). Unlike a block of the sweep, which runs under a conditional
anyway, a repeat runs without one; the conditional of the compacted run makes XLA copy the
registers the block writes on every repeat (a conditional's results are copied into the loop's
carried buffers), and a block of a few operations per element it writes costs about as much as
that copy; from 50 the copy costs a small part of the block (docs/performance.md#jax-and-tf-backends,
"Compaction")."""
COMPACT_FRACTION = 8
"""A compacted block runs on B // COMPACT_FRACTION rows (the fastest of B/4 ... B/32 on NUTS;
docs/performance.md#jax-and-tf-backends, "Compaction")."""


def compact_rows(
    kernel: Kernel, template: State, stack_keys: Collection[str], split: Callable[..., Any] | None = None
) -> int | None:
    """The rows a compacted run of `kernel` uses, or None when it always runs on the batch.
    `split` stands for `kernel.split`; `stack_keys` are the state's stacks."""
    batch = int(template["pc"].shape[0])
    rows = max(1, batch // COMPACT_FRACTION)
    if rows >= batch or not splittable([kernel]) or writes_whole_stacks(kernel):
        return None
    work = row_work(split or kernel.split, template, stack_keys)  # type: ignore[attr-defined]
    if work < COMPACT_MIN_ROW_WORK:
        return None
    if loops_to_itself(kernel) and work < COMPACT_MIN_WORK_PER_WRITTEN * written_per_member(kernel, template, stack_keys):
        return None
    return rows


def written_per_member(kernel: Kernel, template: State, stack_keys: Collection[str]) -> int:
    """The elements per member of the registers (not stacks) `kernel` may write."""
    batch = int(template["pc"].shape[0])
    keys = [key for key in template if key not in stack_keys]
    return sum(
        int(np.prod(template[key].shape[1:]))
        for key in register_writes(kernel, keys)
        if template[key].shape[:1] == (batch,)
    )


def row_work(split: Callable[..., Any], template: State, stack_keys: Collection[str]) -> float:
    """`jaxpr_work` of a kernel's `split` per member (traced on the run's own shapes, so opaque
    helpers see the arrays they get in the run)."""
    specs = {key: jax.ShapeDtypeStruct(value.shape, value.dtype) for key, value in template.items()}
    regs, stacks = separate_stacks(specs, stack_keys)
    jaxpr = jax.make_jaxpr(split)(regs, stacks).jaxpr
    return jaxpr_work(jaxpr) / int(template["pc"].shape[0])


def compact_members(here: Any, rows: int) -> Any:
    """The batch rows of the (at most `rows`) members `here`, in order, then B (out of range),
    by `nonzero` (a prefix sum and a scatter, cheaper than a stable argsort)."""
    return jnp.nonzero(here, size=rows, fill_value=here.shape[0])[0].astype(jnp.int32)


def compact_slots(here: Any, rows: int) -> tuple[Any, Any]:
    """(`compact_members`, each batch row's index among them or -1) without a scatter: member
    j is the first row whose prefix count of members reaches j + 1, found by a binary search of
    the prefix counts (`searchsorted`'s "scan": log2(B) rounds of `rows` lookups), which is
    faster at large batches than counting, for each j, the rows whose prefix count is at most j
    (docs/performance.md#jax-and-tf-backends, "Compaction")."""
    count = jnp.cumsum(here.astype(jnp.int32))
    wanted = jnp.arange(1, rows + 1, dtype=jnp.int32)
    members = jnp.searchsorted(count, wanted, side="left", method="scan").astype(jnp.int32)
    slots = jnp.where(here & (count <= rows), count - 1, -1)
    return members, slots


def full_batch_requests(stacks: State, writes: Writes, slots: Any, count: int) -> Writes:
    """The write requests `writes` of a compacted run (over `count` compact rows) as requests
    over the whole batch, by the batch rows' `slots` (`compact_slots`): the rows of members not
    there are out of range (written nowhere)."""
    taken = jnp.maximum(slots, 0)
    full: Writes = {}
    for key, requests in writes.items():
        stack = stacks[key]
        full[key] = []
        for rows, value in requests:
            rows = jnp.broadcast_to(jnp.asarray(rows, dtype=jnp.int32), (count,))[taken]
            value = jnp.broadcast_to(jnp.asarray(value, dtype=stack.dtype), (count, *stack.shape[2:]))[taken]
            full[key].append((jnp.where(slots >= 0, rows, stack.shape[0]), value))
    return full


def compact_run(
    kernel: Any, written: Sequence[str], regs: State, stacks: State, members: Any, slots: Any = None
) -> tuple[tuple[Any, ...], dict[str, list[tuple[Any, Any]]]]:
    """`kernel.split` run on the rows `members` (`compact_members`) only: their registers and
    stack columns are gathered into a batch of len(members) rows (padding reads the last row;
    its results are dropped), so the block does that many rows of work instead of B. Returns the
    `written` registers over the full batch (the members' rows scattered back, or gathered
    back by their `slots` when given: `compact_slots`) and the stack write requests over the
    compact rows (for `abir.backends.jax.writes.scatter_columns` with `members`, or
    `full_batch_requests`)."""
    batch = regs["pc"].shape[0]
    rows = members.shape[0]
    source = jnp.minimum(members, batch - 1)
    compact = LazyRegisters(lambda key: regs[key] if regs[key].shape[0] != batch else regs[key][source])  # one row: every member's
    compact_stacks = LazyRegisters(lambda key: stacks[key][:, source])
    out, writes = kernel.split(compact, compact_stacks)

    def back(key: str) -> Any:
        full = regs[key]
        value = jnp.broadcast_to(jnp.asarray(out[key], dtype=full.dtype), (rows, *full.shape[1:]))
        if slots is not None:
            taken = (slots >= 0).reshape((-1,) + (1,) * (full.ndim - 1))
            return jnp.where(taken, value[jnp.maximum(slots, 0)], full)
        return full.at[members].set(value, mode="drop")

    return tuple(back(key) for key in written), writes



LIVE_ROWS_FRACTION = 4
"""A standalone run whose sweeps mostly begin with few members active moves them to
B // LIVE_ROWS_FRACTION rows then (`abir.backends.jax.one_kernel.ActiveRows`)."""
LIVE_ROWS_MIN = 64
"""... when that is at least this many rows: on fewer, the loop over them never ran faster on
the suite's recursive programs (tree-eval, fib at B=64 and 128: docs/performance.md#active-rows),
so a smaller batch compiles no loop over fewer rows, and its runs count nothing (whether the
larger ones gain is measured: `ActiveRows`)."""
FEW_ACTIVE_KEY = "__few_active__"
"""The state entry a loop with `JaxLoop.rows` returns: int32 [4], the number of its sweeps that
began with one to `live_rows` members active, of all its sweeps, the loop iterations it used and
the members active at its end."""


@functools.lru_cache(maxsize=64)
def limits_on_device(iterations: int, stop: int) -> jax.Array:
    """A launch's (iteration limit, `stop`) for a loop with `abir.backends.jax.loop.JaxLoop.rows`, made once per value."""
    return jax.device_put(np.array([iterations, stop], np.int32))


def live_rows(batch: int) -> int | None:
    """The rows a run over `batch` rows moves its active members to, or None when that would be
    fewer than `LIVE_ROWS_MIN`."""
    rows = batch // LIVE_ROWS_FRACTION
    return rows if rows >= LIVE_ROWS_MIN else None


def gather_active(state: State, rows: int, tail: int, halt: int, stack_keys: Collection[str]) -> tuple[State, Any]:
    """The state of the (first `rows`) active members of `state` (program counters before
    `tail`) on `rows` rows, their registers and stack columns gathered (the rows of no member
    are halted copies of the last row), and each batch row's slot there or -1
    (`compact_slots`)."""
    batch = int(state["pc"].shape[0])
    members, slots = compact_slots(state["pc"] < tail, rows)
    source = jnp.minimum(members, batch - 1)
    small = {key: value[:, source] if key in stack_keys else value[source] for key, value in state.items()}
    small["pc"] = jnp.where(members < batch, small["pc"], halt)
    return small, slots


def put_back(state: State, small: State, slots: Any, stack_keys: Collection[str]) -> State:
    """The entries of `state` that `small` (a run on `gather_active`'s rows) has, with its values
    in the rows whose `slots` name them, gathered back without a scatter."""
    taken = slots >= 0
    at = jnp.maximum(slots, 0)
    result = {}
    for key, value in small.items():
        if key in stack_keys:
            result[key] = jnp.where(taken.reshape((1, -1) + (1,) * (value.ndim - 2)), value[:, at], state[key])
        else:
            result[key] = jnp.where(taken.reshape((-1,) + (1,) * (value.ndim - 1)), value[at], state[key])
    return result
