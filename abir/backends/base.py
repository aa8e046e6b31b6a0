"""The protocol every backend implements (NumPy, JAX, TensorFlow).

The machine (`abir.vm`) is written once against this protocol. It builds, once per compiled
program, one kernel per `vm.block`: a pure function from machine state to machine state. The
state is a flat `dict[str, array]` whose arrays all carry the batch dimension B. A backend knows
only two things about it: `"pc"` (int32 [B]) holds each member's block, N (the number of blocks,
`halt_index`) once it has halted; and the keys the machine names as `stack_keys` when it calls
`run` hold `[D, B, ...]` stacks, every other key a per-member `[B, ...]` array. What the other
keys mean is the machine's business (`abir.vm.state_ops` documents the layout).

A backend then runs the machine its own way. The JAX and TensorFlow backends by default sweep:
one compiled `while` loop whose iterations run every block in index order under a conditional
on whether any member stands there (`execution="sweep"`). The NumPy backend (and
`execution="switch"`) runs `while next_block(pc) < N: state = kernels[next_block(pc)](state)`
(a Python loop, or a compiled `while` loop with a switch), where `next_block` applies the
backend's scheduling policy (`smallest_live_block` by default: halted members hold N, the
largest index, so they never hold the others back).

Kernels call only methods of this protocol, so one set of kernels serves every backend. Every
value a kernel computes carries a leading batch dimension of B, or of 1 for constants (which
broadcast through `where`). Inactive members' rows hold junk: prims run on every row.

`stack_write` and `stack_scatter` may update their `stack` argument in place (the NumPy backend
does, to keep a push O(B) instead of O(D*B)); the machine never uses a stack array again after
passing it there.

The machine's kernels (`abir.vm.machine.BlockKernel`) also offer a split form,
`kernel.split(regs, stacks) -> (regs, writes)`: `regs` is the state without its stacks, the
stacks are only read, and the stack pushes come back as write requests `(rows, value)` that the
backend applies after the kernel with `stack_scatter` (see `abir.vm.state_ops`). Every backend's
`run` uses that form when all kernels offer it (`splittable`), so the big stack arrays never pass
through a traced conditional, and falls back to plain `state -> state` kernels otherwise.

The traced backends (JAX, TF) also keep the per-member arrays out of the conditional: a
`RegisterLayout` packs the registers of one dtype and shape into one `[n + 1, B, ...]` array
(a group; the last row is scratch), the branches read those groups and return only the values
of the registers their block writes (`kernel.register_writes`), padded into a fixed number of
"write slots" per group, and after the conditional each slot is written back with one in-place
`dynamic_update_slice` at a row looked up from a per-block table (padding slots write the
scratch row). A step thus moves the block's writes, not the whole state.
"""

from __future__ import annotations

import abc
import contextlib
import time
from collections.abc import Callable, Collection, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from abir.lru import LRUCache
from abir.types import TensorType

State = dict[str, Any]
Kernel = Callable[[State], State]
Scheduler = Callable[["Backend", Any], Any]


def splittable(kernels: Sequence[Any]) -> bool:
    """Whether every kernel offers the split form `split(regs, stacks) -> (regs, writes)`."""
    return all(callable(getattr(kernel, "split", None)) and hasattr(kernel, "writes") for kernel in kernels)


def tail_start_of(kernels: Sequence[Any]) -> int:
    """The first block of the program's tail: the last blocks, from which members only move on
    to later blocks until they halt (kernels say so by `kernel.plan.in_tail`; see
    `abir.vm.machine.BlockPlan`). A sweeping execution holds members there until every live
    member is in the tail. The number of kernels when they do not say (no tail)."""
    start = len(kernels)
    while start > 0 and getattr(getattr(kernels[start - 1], "plan", None), "in_tail", False):
        start -= 1
    return start


RUN_CACHE_SIZE = 8
"""Compiled runs (machine loops) a program keeps by default: one per batch size, stack depth and
backend configuration it was called with, the least recently used dropped beyond this (pad
batches to powers of two, `pad_batch=True`, to need fewer)."""

LAUNCH_SECONDS = 0.5
"""How long one launch of a compiled machine loop may run by default (`Backend.run_in_launches`)."""
FIRST_LAUNCH_ITERATIONS = 1024
MAX_LAUNCH_ITERATIONS = 2**30


EXECUTIONS = ("sweep", "switch")
"""How a backend's run loop executes blocks: every block with members per iteration, in index
order (`sweep`), or the one block the scheduler picks (`switch`)."""


def loops_to_itself(kernel: Any) -> bool:
    """Whether the kernel's block may jump to itself (`kernel.plan.loops_to_itself`; see
    `abir.vm.machine.BlockPlan`). A sweeping execution repeats such a block until no member
    stands there, instead of sweeping every block once per iteration of the loop."""
    return bool(getattr(getattr(kernel, "plan", None), "loops_to_itself", False))


def register_writes(kernel: Any, keys: Sequence[str]) -> tuple[str, ...]:
    """The per-member keys (of `keys`) that `kernel.split` may change: its `register_writes`
    when it declares them, else all of them."""
    declared = getattr(kernel, "register_writes", None)
    if declared is None:
        return tuple(keys)
    return tuple(key for key in declared if key in keys)


@dataclass(frozen=True)
class RegisterLayout:
    """Where each per-member array lives in the packed groups, and each block's write slots.

    `groups[g]` lists the keys packed (in row order) into group g, all of one dtype and shape;
    row `len(groups[g])` is scratch. `written[block][g]` lists the keys block writes in group
    g, in slot order; `slots[g]` is the number of slots (the most any block writes in g) and
    `targets[g][block, j]` the row slot j of `block` writes (scratch when unused)."""

    groups: tuple[tuple[str, ...], ...]
    place: dict[str, tuple[int, int]]
    written: tuple[tuple[tuple[str, ...], ...], ...]
    slots: tuple[int, ...]
    targets: tuple[np.ndarray, ...]

    @classmethod
    def build(cls, kernels: Sequence[Any], signatures: dict[str, Any]) -> RegisterLayout:
        """`signatures` maps each per-member key to a hashable (dtype, shape) of its array."""
        by_signature: dict[Any, list[str]] = {}
        for key, signature in signatures.items():
            by_signature.setdefault(signature, []).append(key)
        groups = tuple(tuple(keys) for keys in by_signature.values())
        place = {key: (g, row) for g, keys in enumerate(groups) for row, key in enumerate(keys)}
        written = []
        for kernel in kernels:
            per_group: list[list[str]] = [[] for _ in groups]
            for key in register_writes(kernel, list(signatures)):
                per_group[place[key][0]].append(key)
            written.append(tuple(tuple(keys) for keys in per_group))
        slots = tuple(max((len(w[g]) for w in written), default=0) for g in range(len(groups)))
        targets = []
        for g, keys in enumerate(groups):
            table = np.full((len(written), slots[g]), len(keys), np.int32)
            for block, w in enumerate(written):
                table[block, : len(w[g])] = [place[key][1] for key in w[g]]
            targets.append(table)
        return cls(groups, place, tuple(written), slots, tuple(targets))


class LazyRegisters(dict):  # type: ignore[type-arg]
    """The registers a branch sees, read from the groups on first use (`unpack(key)`), so a
    branch traces only the reads its block makes. `unchanged(key)`: whether the key still holds
    the value first read (a kernel sets the keys it writes)."""

    def __init__(self, unpack: Callable[[str], Any]):
        super().__init__()
        self.unpack = unpack
        self.first: dict[str, Any] = {}

    def __missing__(self, key: str) -> Any:
        value = self[key] = self.first[key] = self.unpack(key)
        return value

    def unchanged(self, key: str) -> bool:
        return key in self.first and self[key] is self.first[key]


def separate_stacks(state: Mapping[str, Any], stack_keys: Collection[str]) -> tuple[State, State]:
    """(the per-member arrays, the stacks) of a state, the stacks being the keys `stack_keys`
    (the keys the machine names when it calls `Backend.run`)."""
    regs = {key: value for key, value in state.items() if key not in stack_keys}
    stacks = {key: value for key, value in state.items() if key in stack_keys}
    return regs, stacks


def smallest_live_block(backend: Backend, pc: Any) -> Any:
    """The reference scheduling policy: run the smallest block index any member holds.

    Blocks are numbered in schedule-priority order and halted members hold the largest index,
    so this picks the highest-priority block that still has live members."""
    return backend.reduce_min(pc)


def _batch_sum(backend: Backend, x: Any) -> Any:
    """Sum of `x` ([n, ...], n static) over its first axis, by pairwise `add`s of slices (the
    protocol has no sum reduction; slicing works on NumPy, JAX and TF arrays alike)."""
    n = int(x.shape[0])
    extra = None
    while n > 1:
        half = n // 2
        if n % 2:
            last = x[n - 1 : n]
            extra = last if extra is None else backend.builtin_prim("add", [extra, last], None)
        x = backend.builtin_prim("add", [x[:half], x[half : 2 * half]], None)
        n = half
    return x[0] if extra is None else backend.builtin_prim("add", [x, extra], None)[0]


def _live_block_counts(backend: Backend, pc: Any) -> tuple[Any, Any, Any]:
    """`(live, counts, smallest)` for int32 `pc` [B]: which members are live, how many live
    members hold each member's block (`counts[b]`, int32 [B]) and the smallest block held.

    The scheduler sees only `pc`, not the halt index N, so "live" is "below the largest index
    held" (halted members hold N, the largest), or every member when all hold one block. Without
    halted members this leaves out the top live block: it can still run, as the smallest.
    O(B^2) comparisons per step."""
    prim = backend.builtin_prim
    smallest = backend.reduce_min(pc)
    largest = prim("negative", [backend.reduce_min(prim("negative", [pc], np.int32))], np.int32)
    live = prim(
        "logical_or",
        [prim("less", [pc, largest], np.bool_), prim("equal", [smallest, largest], np.bool_)],
        np.bool_,
    )
    same = prim("equal", [backend.expand_event_dims(pc, 1), pc[None]], np.bool_)  # [B, B]
    same = prim("logical_and", [same, backend.expand_event_dims(live, 1)], np.bool_)
    counts = _batch_sum(backend, prim("astype", [same], np.int32))
    return live, counts, smallest


def _most_populous(backend: Backend, pc: Any, live: Any, counts: Any) -> Any:
    """The live block held by the most live members (the smallest such index on ties)."""
    prim = backend.builtin_prim
    counts = prim("where", [live, counts, np.int32(-1)], np.int32)
    most = prim("negative", [backend.reduce_min(prim("negative", [counts], np.int32))], np.int32)
    holders = prim("equal", [counts, most], np.bool_)
    return backend.reduce_min(prim("where", [holders, pc, np.int32(np.iinfo(np.int32).max)], np.int32))


def most_populous_block(backend: Backend, pc: Any) -> Any:
    """Scheduling policy: run the live block held by the most live members (ties: the smallest
    index). Traceable (backend ops only); O(B^2) per step. Measured on NUTS (64 chains x 20,
    depth 6, NumPy): 12,269 machine steps against the default's 12,991; prefer
    `sparse_skipping_scheduler`."""
    live, counts, _ = _live_block_counts(backend, pc)
    return _most_populous(backend, pc, live, counts)


def sparse_skipping_scheduler(fraction: float = 0.05) -> Scheduler:
    """A scheduling policy: the smallest live block (the default's priority order), unless fewer
    than `fraction` of the live members hold it; then the block held by the most live members.

    A nearly empty block at the front of the priority order (in NUTS: the recursion's bookkeeping
    blocks, reached by a few chains at a time) otherwise runs once for each straggler, while the
    bulk of the batch waits. Letting the bulk go first lets the stragglers gather and run later
    together. Results are the same under any policy; only the number of machine steps changes.
    Traceable (backend ops only, so JAX and TF run it inside the compiled loop); O(B^2) per step.

    Measured (NumPy, `RunStats.steps` / ideal): NUTS 64 chains x 20 transitions, depth 6:
    12,991 -> 10,115 (ideal 2,900; lane use 18% -> 23%); fib and the loop programs of
    test/unit/test_steps.py: unchanged or one step fewer."""
    fraction = float(fraction)

    def sparse_skipping(backend: Backend, pc: Any) -> Any:
        prim = backend.builtin_prim
        live, counts, smallest = _live_block_counts(backend, pc)
        at_smallest = prim("where", [prim("equal", [pc, smallest], np.bool_), counts, np.int32(0)], np.int32)
        held = prim("negative", [backend.reduce_min(prim("negative", [at_smallest], np.int32))], np.int32)
        live_count = _batch_sum(backend, prim("astype", [live], np.int32))
        enough = prim(
            "greater_equal",
            [
                prim("astype", [held], np.float64),
                prim("multiply", [live_count, np.float64(fraction)], np.float64),
            ],
            np.bool_,
        )
        return prim("where", [enough, smallest, _most_populous(backend, pc, live, counts)], np.int32)

    sparse_skipping.__qualname__ = sparse_skipping.__name__ = f"sparse_skipping_scheduler({fraction})"
    return sparse_skipping


@dataclass
class RunStats:
    """What one eager run of the machine did (collected by backends that run step by step).

    `steps` is the number of kernel executions; `block_steps[i]` how many of them ran block i
    and `block_members[i]` how many members were active in those steps, summed;
    `member_steps[b]` how many steps member b was active in (its own block count); `sweeps`
    the loop iterations of a sweeping execution (each may run many blocks), None otherwise, and
    `member_sweeps[b]` the sweeps in which member b ran a block (as many as it would take alone:
    a sweep holds a member back only in the program's tail)."""

    batch_size: int
    steps: int = 0
    block_steps: list[int] = field(default_factory=list)
    block_members: list[int] = field(default_factory=list)
    member_steps: list[int] = field(default_factory=list)
    sweeps: int | None = None
    member_sweeps: list[int] | None = None

    @classmethod
    def empty(cls, batch_size: int, num_blocks: int) -> RunStats:
        return cls(batch_size, 0, [0] * num_blocks, [0] * num_blocks, [0] * batch_size)

    def record(self, block: int, members: int) -> None:
        """Count one step of `block` run for `members` active members (a backend that counts
        steps per member fills `member_steps` itself)."""
        self.steps += 1
        self.block_steps[block] += 1
        self.block_members[block] += members

    @property
    def ideal_steps(self) -> int:
        """The longest member's own block count: the fewest steps any schedule could take."""
        return max(self.member_steps, default=0)

    @property
    def ideal_sweeps(self) -> int | None:
        """The most sweeps any member ran blocks in: the sweeps the longest member needs alone."""
        return max(self.member_sweeps, default=0) if self.member_sweeps is not None else None

    @property
    def lane_use(self) -> float:
        """Fraction of member slots doing useful work over all steps (1.0 = no masking waste)."""
        total = self.steps * self.batch_size
        return sum(self.block_members) / total if total else 1.0

    def occupancy(self, block: int) -> float:
        """Mean fraction of the batch active in the steps that ran `block` (0 if it never ran)."""
        runs = self.block_steps[block]
        return self.block_members[block] / (runs * self.batch_size) if runs else 0.0

    def summary(self) -> str:
        sweeps = ""
        if self.sweeps is not None:
            ideal = "" if self.member_sweeps is None else f" (ideal {self.ideal_sweeps})"
            sweeps = f" in {self.sweeps} sweeps{ideal}"
        return (
            f"{self.steps} steps (ideal {self.ideal_steps}){sweeps} over batch {self.batch_size}, "
            f"lane use {self.lane_use:.0%}"
        )


class Backend(abc.ABC):
    """Array operations and the run loop of one array library."""

    name: str = "abstract"
    scheduler: Scheduler = staticmethod(smallest_live_block)  # type: ignore[assignment]
    block_order: str = "priority"
    """The `schedule-blocks` policy the compiler numbers blocks by for this backend's run loop:
    `priority` when each step runs the block `scheduler` picks, `flow` when each iteration
    sweeps all blocks in index order."""
    superblocks: bool = False
    """Whether the compiler merges branch arms into their blocks for this backend
    (`form-superblocks`): a traced backend pays for each block run (a conditional, the masks,
    the pc) more than for the ops of a larger block; an eager one pays for every op it runs,
    also for members that already left the block. Measured on NUTS (examples/nuts.py, 64
    chains): JAX 11,244 -> 7,577 block runs, 995 -> 692 sweeps, 12% less CPU time (22% at 1,024
    chains); NumPy (switch) 0.59 -> 0.81 s."""
    last_stats: RunStats | None = None
    """Set by `run` on backends that can count steps eagerly (NumPy); None otherwise."""

    launch_seconds: float | None = LAUNCH_SECONDS
    """How long one launch of a compiled loop may run (`run_in_launches`; `configure_launches`)."""
    execution: str = "switch"

    def configure_execution(
        self, execution: str | None, scheduler: Scheduler | None, default: str, collect_stats: bool = False
    ) -> None:
        """Check and set `execution` (None: `default`, or `switch` when a scheduler is given),
        `scheduler` (default `smallest_live_block`) and the matching `block_order`."""
        if execution is None:
            execution = default if scheduler is None else "switch"
        if execution not in EXECUTIONS:
            raise ValueError(f"execution must be one of {', '.join(map(repr, EXECUTIONS))}, got {execution!r}")
        if scheduler is not None and execution != "switch":
            raise ValueError("a scheduler picks the block of each step of execution='switch'; a sweep runs them all")
        if collect_stats and execution != "sweep":
            raise ValueError("collect_stats is available with execution='sweep'")
        self.execution = execution
        self.block_order = "flow" if execution == "sweep" else "priority"
        self.scheduler = smallest_live_block if scheduler is None else scheduler

    def configure_launches(self, launch_seconds: float | None) -> None:
        """Check and set `launch_seconds` (see `run_in_launches`)."""
        if launch_seconds is not None and not (isinstance(launch_seconds, int | float) and launch_seconds > 0):
            raise ValueError(f"launch_seconds must be a positive number of seconds or None, got {launch_seconds!r}")
        self.launch_seconds = launch_seconds

    def run_in_launches(self, launch: Callable[[State, int], State], state: State, halt_index: int) -> State:
        """Run a compiled machine loop, `launch(state, iterations)` (at most `iterations` loop
        iterations, then the state), until every member has halted.

        A compiled loop cannot be interrupted while it runs (Ctrl-C waits for it), so with
        `launch_seconds` the run is cut into launches of about that long: the first runs
        `FIRST_LAUNCH_ITERATIONS` iterations, each next one as many as the last one's pace
        allows. Between launches Python handles signals (a KeyboardInterrupt stops the run) and
        reads the members' program counters to see whether all halted. `launch_seconds=None`
        runs the whole loop in one launch."""
        if self.launch_seconds is None:
            return launch(state, MAX_LAUNCH_ITERATIONS)
        iterations = FIRST_LAUNCH_ITERATIONS
        while True:
            start = time.perf_counter()
            state = launch(state, iterations)
            if int(self.to_numpy(state["pc"]).min()) >= halt_index:
                return state
            pace = iterations / max(time.perf_counter() - start, 1e-4)
            iterations = int(min(max(pace * self.launch_seconds, 64), MAX_LAUNCH_ITERATIONS))

    def scope(self, leaves: Sequence[Any] = ()) -> contextlib.AbstractContextManager[Any]:
        """The library settings a run on the argument `leaves` happens under (entered around a
        call's compilation and run); none by default."""
        return contextlib.nullcontext()

    def is_traced(self, value: Any) -> bool:
        """Whether `value` stands for an array of a computation being traced (a JAX tracer): its
        contents exist only when that computation runs, so the run is staged into it."""
        return False

    def stage_run(self, run: Callable[[list[Any]], list[Any]], leaves: Sequence[Any]) -> list[Any]:
        """`run(leaves)` (the output leaves of a machine run on the argument `leaves`) for
        arguments some of which are traced (`is_traced`); a backend may wrap it for the
        transformations of the computation being traced."""
        return run(list(leaves))

    def batch_sharding(self, leaves: Sequence[Any]) -> Any:
        """How the argument `leaves` are split over devices along the batch axis, or None (one
        device: the run is one machine)."""
        return None

    def run_sharded(
        self,
        run: Callable[[list[Any]], list[Any]],
        leaves: Sequence[Any],
        cache: MutableMapping[Any, Any],
        cache_key: Any,
    ) -> list[Any]:
        """`run` (a machine run, staged) once per shard of the batch (`batch_sharding`), each
        on its own device; the compiled program kept in `cache` under `cache_key` and the
        leaves' shapes and sharding."""
        raise NotImplementedError(f"{type(self).__name__} runs on one device")

    def check_when_run(
        self,
        check: Callable[[dict[str, np.ndarray]], None],
        values: Mapping[str, Any],
        normal: Mapping[str, int] | None = None,
        summary: str = "",
    ) -> None:
        """Call `check` on host copies of `values` (to raise a run's errors): now, or for traced
        values when the computation they belong to runs, if some value is not its `normal` one
        (default 0: what every member holds when nothing went wrong). `summary` describes the
        errors for a backend that cannot call back into Python from a staged computation."""
        check({key: self.to_numpy(value) for key, value in values.items()})

    # ----- arrays -------------------------------------------------------------------------
    @abc.abstractmethod
    def asarray(self, value: Any, dtype: Any = None) -> Any:
        """Convert a NumPy array, Python scalar or this backend's array to this backend's array."""

    @abc.abstractmethod
    def to_numpy(self, value: Any) -> np.ndarray:
        """A NumPy copy of one of this backend's arrays (used for errors and tests)."""

    @abc.abstractmethod
    def is_native(self, value: Any) -> bool:
        """Whether `value` is already this backend's array type (results keep the caller's kind)."""

    @abc.abstractmethod
    def zeros(self, shape: Sequence[int], dtype: Any) -> Any: ...

    @abc.abstractmethod
    def full(self, shape: Sequence[int], value: Any, dtype: Any) -> Any: ...

    @abc.abstractmethod
    def arange(self, n: int, dtype: Any = np.int32) -> Any: ...

    def type_of(self, value: Any) -> TensorType:
        """dtype and shape (including the batch dimension) of an array."""
        array = self.to_numpy(value) if not hasattr(value, "dtype") else value
        return TensorType(np.dtype(getattr(array.dtype, "as_numpy_dtype", array.dtype)), tuple(array.shape))

    def batch_size(self, value: Any) -> int:
        """Leading dimension of an argument leaf; scalars count as 1."""
        shape = tuple(getattr(value, "shape", ()))
        return int(shape[0]) if shape else 1

    def full_mask(self, batch_size: int) -> Any:
        return self.full((batch_size,), True, np.bool_)

    def zero_state(self, shapes: Mapping[str, tuple[tuple[int, ...], Any]]) -> State:
        """Zero arrays by state key (`shapes` maps each key to its shape and dtype): the machine's
        initial state, made in one call so a backend can make them all at once."""
        return {key: self.zeros(shape, dtype) for key, (shape, dtype) in shapes.items()}

    def pad_rows(self, array: Any, rows: int) -> Any:
        """`array` ([B, ...]) with zero rows appended up to `rows` (by way of NumPy here; the
        traced backends pad on the device)."""
        host = self.to_numpy(array)
        padding = np.zeros((rows - host.shape[0], *host.shape[1:]), host.dtype)
        return self.asarray(np.concatenate([host, padding]), host.dtype)

    def create_register(self, batch_size: int, type: TensorType) -> Any:
        """A zero `[B, *shape]` array for a register (or the top of a stack variable)."""
        return self.zeros((batch_size, *type.shape), type.dtype)

    def create_stack(self, max_stack_depth: int, batch_size: int, type: TensorType) -> Any:
        """A zero `[D, B, *shape]` array holding a stack variable's saved values."""
        return self.zeros((max_stack_depth, batch_size, *type.shape), type.dtype)

    # ----- primitives ---------------------------------------------------------------------
    @abc.abstractmethod
    def builtin_prim(self, name: str, args: Sequence[Any], result_dtype: Any) -> Any:
        """Run a builtin Array-API primitive (`abir.prims`) with NumPy semantics on whole-batch
        arrays. `result_dtype` is the inferred NumPy dtype of the result (used by `astype`, and
        to pin the dtype where the library's promotion would differ from NumPy's)."""

    def call_opaque(self, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
        """Call a user's opaque primitive on whole-batch arrays of this backend."""
        return fn(*args)

    # ----- masked state updates -------------------------------------------------------------
    @abc.abstractmethod
    def where(self, mask: Any, new: Any, old: Any) -> Any:
        """`mask` is bool [B]; `new` and `old` are [B, *shape] (new may broadcast). Broadcasts the
        mask over the trailing dimensions."""

    @abc.abstractmethod
    def stack_write(self, stack: Any, index: Any, value: Any, mask: Any) -> Any:
        """Return `stack` ([D, B, *shape]) with `stack[index[b], b] = value[b]` for members where
        `mask[b]`; others unchanged. Indices of unmasked members may be out of range. An update by
        index, never a mask over the whole stack."""

    def stack_scatter(self, stack: Any, rows: Any, value: Any) -> Any:
        """Return `stack` ([D, B, *shape]) with `stack[rows[b], b] = value[b]` for every member b
        whose row is in [0, D); a row of D means "no write" (`value` may broadcast)."""
        depth = int(stack.shape[0])
        return self.stack_write(
            stack, rows, value, self.builtin_prim("less", [rows, np.int32(depth)], np.bool_)
        )

    @abc.abstractmethod
    def stack_read(self, stack: Any, index: Any) -> Any:
        """`stack[clip(index[b], 0, D-1), b]` for every member b: shape [B, *shape]."""

    @abc.abstractmethod
    def reduce_min(self, value: Any) -> Any: ...

    def known_none(self, mask: Any) -> bool:
        """Whether bool `mask` is known to be all false right now (lets an eager backend skip
        masked updates that would change nothing; traced backends cannot know: False)."""
        return False

    def expand_event_dims(self, value: Any, count: int) -> Any:
        """Insert `count` size-1 axes right after the batch axis: `[B, *s] -> [B, 1.., *s]`.

        Per-member broadcasting aligns event shapes on the right; the batch axis must stay in
        front, so a lower-rank operand is expanded before a batched elementwise prim."""
        if count == 0:
            return value
        return value[(slice(None),) + (None,) * count]

    # ----- running --------------------------------------------------------------------------
    def next_block(self, pc: Any) -> Any:
        """The block the machine runs next, by this backend's `scheduler`."""
        return self.scheduler(self, pc)

    def switch_case(self, index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
        """`branches[index](*operands)`; traced backends build one switch over all branches."""
        return branches[int(self.to_numpy(index))](*operands)

    def while_loop(self, cond: Callable[[Any], Any], body: Callable[[Any], Any], state: Any) -> Any:
        """`while cond(state): state = body(state)`; traced backends build a loop op."""
        while bool(self.to_numpy(cond(state))):
            state = body(state)
        return state

    @abc.abstractmethod
    def run(
        self,
        kernels: Sequence[Kernel],
        state: State,
        halt_index: int,
        cache_key: Any,
        code_cache: MutableMapping[Any, Any] | None = None,
        stack_keys: Collection[str] = (),
    ) -> State:
        """Run `while min(pc) < halt_index: state = kernels[min(pc)](state)` and return the final
        state. `cache_key` identifies (program, signature, batch size) so compiled code can be
        reused across calls, kept in `code_cache` (the program's own cache, see `run_cache`);
        NumPy ignores both. `stack_keys` are the state's `[D, B, ...]` stacks, which split
        kernels get apart (`separate_stacks`)."""

    code_cache: MutableMapping[Any, Any] | None = None
    """A cache of compiled runs the user gave the backend (shared by the instances given it);
    None: each program keeps its compiled runs itself (`run_cache`)."""

    def run_cache(self, given: MutableMapping[Any, Any] | None) -> MutableMapping[Any, Any]:
        """Where `run` keeps its compiled loop: the backend's own `code_cache` if the user gave
        one, else the cache the caller `given` (the program's, freed with it), else one bounded
        cache of this backend instance (a run without a program, as in tests)."""
        if self.code_cache is not None:
            return self.code_cache
        if given is not None:
            return given
        own = self.__dict__.get("_instance_run_cache")
        if own is None:
            own = self.__dict__["_instance_run_cache"] = LRUCache(RUN_CACHE_SIZE)
        return own

    def compiled_run(
        self,
        cache: Any,
        kernels: Sequence[Kernel],
        halt_index: int,
        cache_key: Any,
        compile_loop: Callable[[tuple[Kernel, ...], int], Callable[[State], State]],
        config: tuple[Any, ...] = (),
    ) -> Callable[[State], State]:
        """The compiled machine loop for `kernels` from `cache`, compiled with `compile_loop` on a
        miss. Keyed by `cache_key` (program, signature, batch size), the halt index, the
        scheduler and the backend's `config`; without a `cache_key`, by the `kernels` list itself
        (the machine builds it once per program and backend), kept alive by the cache."""
        if cache_key is None:
            key: Any = ("kernels", id(kernels), int(halt_index), *config)
        else:
            key = (cache_key, type(self).__name__, int(halt_index), len(kernels), getattr(self, "scheduler", None), *config)
        entry = cache.get(key)
        if entry is None or (cache_key is None and entry[0] is not kernels):
            entry = (kernels, compile_loop(tuple(kernels), int(halt_index)))
            cache[key] = entry
        return entry[1]

    # ----- type inference helpers -----------------------------------------------------------
    def run_on_dummies(self, fn: Callable[..., Any], input_types: Sequence[TensorType]) -> Any:
        """Call `fn` on zero arrays shaped like `input_types` (batch dimension included)."""
        return fn(*(self.zeros(t.shape, t.dtype) for t in input_types))

    def merge_dtypes(self, a: Any, b: Any) -> np.dtype:
        return np.promote_types(a, b)

    def merge_shapes(self, a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
        return tuple(np.broadcast_shapes(tuple(a), tuple(b)))

    def broadcast_to_shape_of(self, value: Any, target: Any) -> Any:
        return self.where(self.full_mask(self.batch_size(target)), value, target)
