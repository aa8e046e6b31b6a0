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

The machine's kernels (`abir.vm.kernels.BlockKernel`) also offer a split form,
`kernel.split(regs, stacks) -> (regs, writes)`: `regs` is the state without its stacks, the
stacks are only read, and the stack pushes come back as write requests `(rows, value)` that the
backend applies after the kernel with `stack_scatter` (`apply_writes`; see `abir.vm.state_ops`).
Every backend's `run` uses that form when all kernels offer it (`splittable`), so the big stack arrays never pass
through a traced conditional, and falls back to plain `state -> state` kernels otherwise.

The traced backends (JAX, TF) build their compiled loop in `abir.backends.traced`, from
primitives of their library: one design for both.
"""

from __future__ import annotations

import abc
import contextlib
import contextvars
import time
from collections.abc import Callable, Collection, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from abir.backends import variables
from abir.lru import LRUCache
from abir.types import TensorType, Type

State = dict[str, Any]
Kernel = Callable[[State], State]
Scheduler = Callable[["Backend", Any], Any]
Writes = dict[str, list[tuple[Any, Any]]]
"""Stack key -> a block's write requests `(rows, value)`, to be applied in order (`apply_writes`)."""


class Span(NamedTuple):
    """The rows of a request that pushes many values per member at once (`vm.descend`): member
    b writes rows `start[b] + j` for `0 <= j < count[b]`. With the request's value `v`, row
    `start[b] + j` gets `v[b]`, or with a `step`, `v[b] + (j + shift) * step` (`span_row`).
    `count` is 0 for members that write nothing, and no span reaches past the depth D. A named
    tuple, so that traced libraries carry it through their functions as a tree of arrays."""

    start: Any
    """int32 [B]: each member's first row."""
    count: Any
    """int32 [B]: how many rows each member writes."""
    step: Any = None
    """None (every row gets the value), or a scalar of the stack's dtype."""
    shift: Any = 0
    """An int32 scalar added to the row offset j before it is multiplied by `step`."""


def span_row(backend: Any, span: Span, value: Any, j: Any, dtype: Any) -> Any:
    """The values a `Span` request with value `value` writes at row offset j (an int32 scalar)."""
    if span.step is None:
        return value
    prim = backend.builtin_prim
    moves = prim("add", [j, span.shift], np.int32)
    return prim("add", [value, prim("multiply", [moves, span.step], dtype)], dtype)


def splittable(kernels: Sequence[Any]) -> bool:
    """Whether every kernel offers the split form `split(regs, stacks) -> (regs, writes)`."""
    return all(callable(getattr(kernel, "split", None)) and hasattr(kernel, "writes") for kernel in kernels)


def tail_start_of(kernels: Sequence[Any]) -> int:
    """The first block of the program's tail: the last blocks, from which members only move on
    to later blocks until they halt (kernels say so by `kernel.plan.in_tail`; see
    `abir.vm.kernels.BlockPlan`). A sweeping execution holds members there until every live
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

ONE_HOT_STACK_MAX = 4096
"""A compiled backend writes a stack of at most this many elements with a select over the whole
stack on a one-hot row mask (one fused kernel, O(stack)) instead of a scatter (several kernels,
O(B)): JAX always, TensorFlow under XLA (docs/performance.md, "One-hot stack writes" and
"TensorFlow: one-hot stack writes")."""


def coarse_count(count: int) -> int:
    """`count` (positive) rounded down to a power of two or 3/2 of one: at most 1/3 less, and two
    values per doubling."""
    power = 1 << (count.bit_length() - 1)
    return power + power // 2 if count >= power + power // 2 else power


class LaunchPace:
    """The loop iterations per second of the last launch that ran out of its iterations, kept
    across the runs made `paced_by` it (`Backend.run_in_launches`); None before one has."""

    def __init__(self) -> None:
        self.per_second: float | None = None


_LAUNCH_PACE: contextvars.ContextVar[LaunchPace | None] = contextvars.ContextVar("abir_launch_pace", default=None)


@contextlib.contextmanager
def paced_by(pace: LaunchPace) -> Iterator[None]:
    """Runs in launches inside (`Backend.run_in_launches`) begin with a launch as long as
    `pace` allows, once a launch before ran out of iterations, instead of
    `FIRST_LAUNCH_ITERATIONS`, and keep their pace in it: a caller that runs one loop as many
    runs, each ending on its own (`abir.vm.lanes`), then makes each of them one launch."""
    token = _LAUNCH_PACE.set(pace)
    try:
        yield
    finally:
        _LAUNCH_PACE.reset(token)


STATUS_KEY = "__status__"
"""A Python int a backend's `run` may add to the state it returns, so that the caller reads one
number instead of the error flags: bit `RUNNING` set while some member has not halted, bit
`FLAGGED` when some `error_flags` value is not its normal one. Without it the caller reads the
flags themselves."""
RUNNING = 1
FLAGGED = 2


EXECUTIONS = ("sweep", "switch")
"""How a backend's run loop executes blocks: every block with members per iteration, in index
order (`sweep`), or the one block the scheduler picks (`switch`)."""


def loops_to_itself(kernel: Any) -> bool:
    """Whether the kernel's block may jump to itself (`kernel.plan.loops_to_itself`; see
    `abir.vm.kernels.BlockPlan`). A sweeping execution repeats such a block until no member
    stands there, instead of sweeping every block once per iteration of the loop."""
    return bool(getattr(getattr(kernel, "plan", None), "loops_to_itself", False))


def separate_stacks(state: Mapping[str, Any], stack_keys: Collection[str]) -> tuple[State, State]:
    """(the per-member arrays, the stacks) of a state, the stacks being the keys `stack_keys`
    (the keys the machine names when it calls `Backend.run`)."""
    regs = {key: value for key, value in state.items() if key not in stack_keys}
    stacks = {key: value for key, value in state.items() if key in stack_keys}
    return regs, stacks


def apply_writes(stacks: Mapping[str, Any], writes: Writes, scatter: Callable[[Any, Any, Any], Any]) -> State:
    """The stacks after a block's write requests, each applied in order by
    `scatter(stack, rows, value)` (a backend's `stack_scatter`)."""
    updated = dict(stacks)
    for key, requests in writes.items():
        stack = updated[key]
        for rows, value in requests:
            stack = scatter(stack, rows, value)
        updated[key] = stack
    return updated


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

    What it saves in machine steps: docs/performance.md#sparse-skipping."""
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


class SteadyLauncher(Protocol):
    """A run as a function of its input leaves (`Backend.steady_launcher`)."""

    def finished_outputs(self, leaves: Sequence[Any]) -> list[Any] | None:
        """The output registers (in the order of the machine's outputs) of a run from `leaves`
        where the launcher can run it without building its state and the run finished with no
        error flagged; else None (maybe after such a run), and the caller calls `from_start`."""
        ...

    def from_start(self, leaves: Sequence[Any]) -> State:
        """The state the run from `leaves` leaves, its `STATUS_KEY` read."""
        ...


@runtime_checkable
class BackendProtocol(Protocol):
    """The public backend protocol: everything the compiler and the machine ask of a backend.

    The first group of methods is the reference's backend interface (TensorFlow Probability's
    `auto_batching` `NumpyBackend`/`TensorFlowBackend`), with its signatures and meanings; the
    `name=` arguments are accepted, as there, and ignored. The second group are abir's
    extensions: the machine's kernels compute with `builtin_prim` and update the flat state
    with `where`, `stack_scatter` and `stack_read`, and `run` drives the whole loop (see the
    module docstring). A backend subclasses `Backend`, which implements most of this protocol
    once in terms of the rest, or implements every method here itself (a class subclassing
    this protocol directly must, or it cannot be instantiated). Arrays carry the batch
    dimension B first; "the backend's arrays" are whatever its library computes with."""

    # ----- the reference's interface ------------------------------------------------------------
    @abc.abstractmethod
    def any(self, t: Any, name: str | None = None) -> Any:
        """Whether any element of bool array `t` is true: a bool scalar of the backend."""

    @abc.abstractmethod
    def assert_matching_dtype(self, expected_dtype: Any, val: Any, message: str = "") -> None:
        """Raise ValueError (naming both dtypes and `message`) unless `val`'s dtype is
        `expected_dtype`."""

    @abc.abstractmethod
    def batch_size(self, val: Any, name: str | None = None) -> int:
        """The first (batch) dimension of `val`; 1 for a scalar."""

    @abc.abstractmethod
    def broadcast_to_shape_of(self, val: Any, target: Any, name: str | None = None) -> Any:
        """`val` broadcast to the shape of `target`, in `target`'s dtype (the reference's NumPy
        backend keeps `val`'s dtype, its TF backend takes `target`'s: abir takes `target`'s on
        every backend)."""

    @abc.abstractmethod
    def cond(self, pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any], name: str | None = None) -> Any:
        """`true_fn()` if the bool scalar `pred` holds, else `false_fn()`; both return the same
        structure of arrays. Traced backends stage one conditional (both branches traced)."""

    @abc.abstractmethod
    def create_variable(
        self, name: str | None, alloc: Any, type_: TensorType, max_stack_depth: int, batch_size: int
    ) -> Any:
        """A fresh zero variable (`abir.backends.variables`) for `batch_size` members of per-member
        type `type_` (dtype and event shape), stored as `alloc` says: `dead`/`null`,
        `temporary`, `register` or `stack`/`full` (a `StorageClass`, a name, or the reference's
        `VariableAllocation`); a stack variable saves up to `max_stack_depth` values per member.
        The result is an instance of one of `variable_class`."""

    @abc.abstractmethod
    def equal(self, t1: Any, t2: Any, name: str | None = None) -> Any:
        """Elementwise `t1 == t2` (bool, broadcast as NumPy does)."""

    @abc.abstractmethod
    def fill(self, value: Any, size: int, dtype: Any, shape: Sequence[int], name: str | None = None) -> Any:
        """A `[size, *shape]` array of `dtype` holding `value` everywhere."""

    @abc.abstractmethod
    def full_mask(self, size: int, name: str | None = None) -> Any:
        """An all-true bool `[size]` mask."""

    @abc.abstractmethod
    def initial_program_counter(self, size: int, dtype: Any, name: str | None = None) -> Any:
        """A `[size]` vector of zeros of `dtype`: every member's program counter before a
        run. The entry point is the caller's choice (abir's machine enters block 0 and sets the
        padding rows of a padded batch itself)."""

    @abc.abstractmethod
    def merge_dtypes(self, dt1: Any, dt2: Any) -> np.dtype:
        """The dtype both `dt1` and `dt2` promote to (NumPy's rules); None stands for "not
        known yet" and yields the other."""

    @abc.abstractmethod
    def merge_shapes(self, s1: Sequence[int | None] | None, s2: Sequence[int | None] | None) -> tuple[int | None, ...] | None:
        """The broadcast of shapes `s1` and `s2` (ValueError if they do not broadcast); a None
        dimension is unknown, a None shape of unknown rank (the result is then None)."""

    @abc.abstractmethod
    def not_equal(self, t1: Any, t2: Any, name: str | None = None) -> Any:
        """Elementwise `t1 != t2` (bool, broadcast as NumPy does)."""

    @abc.abstractmethod
    def prepare_for_cond(self, state: Any) -> Any:
        """`state` (a structure of arrays) made ready to pass through `cond`: every leaf one of
        the backend's arrays where its conditional needs that (TensorFlow graphs), else as is."""

    @abc.abstractmethod
    def reduce_min(self, t: Any, name: str | None = None) -> Any:
        """The smallest element of `t` (a scalar of the backend)."""

    @abc.abstractmethod
    def run_on_dummies(self, primitive_callable: Callable[..., Any], input_types: Sequence[Any]) -> Any:
        """`primitive_callable` called on placeholder arrays shaped like `input_types` (each a
        `TensorType` whose shape includes the batch dimension, a `Type`, or a nested tuple or
        list of them), for type inference: the result's leaves answer `type_of`."""

    @abc.abstractmethod
    def static_value(self, t: Any) -> Any:
        """The value of `t` as a NumPy array now, or None when it is not known before the traced
        computation it belongs to runs."""

    @abc.abstractmethod
    def switch_case(
        self, branch_selector: Any, branch_callables: Sequence[Callable[..., Any]], *operands: Any, name: str | None = None
    ) -> Any:
        """`branch_callables[branch_selector](*operands)` (the reference passes no operands; abir
        allows them). Traced backends stage one switch over all branches."""

    @abc.abstractmethod
    def type_of(self, t: Any, dtype_hint: Any = None) -> TensorType:
        """`TensorType(dtype, shape)` of `t`, the shape including the batch dimension; a Python
        constant takes `dtype_hint` when given."""

    @property
    @abc.abstractmethod
    def variable_class(self) -> tuple[type, ...]:
        """The classes of the variables `create_variable` returns (dead, temporary, register,
        stack)."""

    @abc.abstractmethod
    def where(self, condition: Any, x: Any, y: Any, name: str | None = None) -> Any:
        """`x` for the members where bool `[B]` `condition` holds, `y` elsewhere: the condition
        broadcasts over the trailing dimensions and `x` may broadcast to `y`. The result has
        `y`'s dtype and shape (in the machine, `y` is the value being updated)."""

    @abc.abstractmethod
    def while_loop(
        self, cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Sequence[Any], name: str | None = None
    ) -> Any:
        """`while cond(*loop_vars): loop_vars = body(*loop_vars)`, returning the final
        `loop_vars` (a sequence of the same structure). Traced backends stage one loop."""

    @abc.abstractmethod
    def wrap_straightline_callable(self, f: Callable[..., Any]) -> Callable[..., Any]:
        """`f` (one basic block's computation) prepared for this backend's execution. abir
        compiles the whole machine loop, never a block alone, so every abir backend returns `f`."""

    # ----- abir's extensions: the machine's arrays ------------------------------------------------
    name: str
    """abir extension: the backend's short name ("numpy", "jax", "tensorflow")."""
    block_order: str
    """abir extension: the `schedule-blocks` order the compiler numbers blocks in for this
    backend (`priority` or `flow`)."""
    superblocks: bool
    """abir extension: whether the compiler forms superblocks (`form-superblocks`) for it."""
    immutable_arrays: bool = False
    """abir extension: whether its arrays cannot change once made (JAX, TF), so that one zero
    state can start every run of the same shapes (`Machine.initial_state`); False unless a
    backend says so."""
    last_stats: RunStats | None
    """abir extension: what the last `run` did, if the backend counts it (set to None by the
    machine before each run)."""

    @abc.abstractmethod
    def asarray(self, value: Any, dtype: Any = None) -> Any:
        """abir extension: convert a NumPy array, Python scalar or this backend's array to this
        backend's array."""

    def run_input(self, array: np.ndarray) -> Any:
        """abir extension: a NumPy input leaf (cast and broadcast on the host) as the machine's
        `run` takes it in its initial state; by default this backend's array (`asarray`)."""
        return self.asarray(array, array.dtype)

    @abc.abstractmethod
    def to_numpy(self, value: Any) -> np.ndarray:
        """abir extension: a NumPy copy of one of this backend's arrays (used for errors and tests)."""

    @abc.abstractmethod
    def is_native(self, value: Any) -> bool:
        """abir extension: whether `value` is already this backend's array type (results keep the
        caller's kind)."""

    @abc.abstractmethod
    def zeros(self, shape: Sequence[int], dtype: Any) -> Any:
        """abir extension: a zero array."""

    @abc.abstractmethod
    def full(self, shape: Sequence[int], value: Any, dtype: Any) -> Any:
        """abir extension: an array holding `value` everywhere."""

    @abc.abstractmethod
    def arange(self, n: int, dtype: Any = np.int32) -> Any:
        """abir extension: `[0, 1, ..., n - 1]`."""

    @abc.abstractmethod
    def zero_state(self, shapes: Mapping[str, tuple[tuple[int, ...], Any]], staged: bool = False) -> State:
        """abir extension: the machine's initial state, zero arrays by state key (`shapes`
        maps each key to its shape and dtype); `staged`: for a run staged into the computation
        being traced."""

    @abc.abstractmethod
    def pad_rows(self, array: Any, rows: int) -> Any:
        """abir extension: `array` ([B, ...]) with zero rows appended up to `rows`."""

    @abc.abstractmethod
    def create_register(self, batch_size: int, type: TensorType) -> Any:
        """abir extension: a zero `[B, *shape]` array for a register of per-member `type`."""

    @abc.abstractmethod
    def create_stack(self, max_stack_depth: int, batch_size: int, type: TensorType) -> Any:
        """abir extension: a zero `[D, B, *shape]` array for a stack variable's saved values."""

    def spread_row(self, row: Any, batch_size: int, type: TensorType) -> Any:
        """abir extension: an input leaf of one row shared by all members (`[1, *shape]`, this
        backend's array) as the run's register: by default spread to `[B, *shape]`. A backend
        whose run reads a shared row as it is may keep it (JAX in reverse mode, which sums the
        row's cotangent over the members: `abir.backends.jax.reverse`)."""
        return self.where(self.full_mask(batch_size), row, self.create_register(batch_size, type))

    # ----- abir's extensions: computing and updating ------------------------------------------
    @abc.abstractmethod
    def builtin_prim(self, name: str, args: Sequence[Any], result_dtype: Any) -> Any:
        """abir extension: run a builtin Array-API primitive (`abir.prims`) with NumPy semantics on
        whole-batch arrays. `result_dtype` is the inferred NumPy dtype of the result (used by
        `astype`, and to pin the dtype where the library's promotion would differ from NumPy's)."""

    @abc.abstractmethod
    def call_opaque(self, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
        """abir extension: a user's batch-aware helper `fn` called on whole-batch arrays."""

    @abc.abstractmethod
    def stack_write(self, stack: Any, index: Any, value: Any, mask: Any) -> Any:
        """abir extension: return `stack` ([D, B, *shape]) with `stack[index[b], b] = value[b]` for
        members where `mask[b]`; others unchanged. Indices of unmasked members may be out of range.
        An update by index, never a mask over the whole stack."""

    @abc.abstractmethod
    def stack_scatter(self, stack: Any, rows: Any, value: Any) -> Any:
        """abir extension: `stack` with `stack[rows[b], b] = value[b]` for rows in [0, D) (a row
        of D writes nothing); may update `stack` in place. `rows` a `Span`: each member writes
        its span of rows (`state_ops.descend` pushes many values per member at once)."""

    @abc.abstractmethod
    def stack_read(self, stack: Any, index: Any) -> Any:
        """abir extension: `stack[clip(index[b], 0, D-1), b]` for every member b: shape [B, *shape]."""

    @abc.abstractmethod
    def known_none(self, mask: Any) -> bool:
        """abir extension: whether bool `mask` is known to be all false now (False if unknown)."""

    @abc.abstractmethod
    def expand_event_dims(self, value: Any, count: int) -> Any:
        """abir extension: `count` size-1 axes inserted right after the batch axis."""

    # ----- abir's extensions: running -----------------------------------------------------------
    @abc.abstractmethod
    def run(
        self,
        kernels: Sequence[Kernel],
        state: State,
        halt_index: int,
        cache_key: Any,
        code_cache: MutableMapping[Any, Any] | None = None,
        stack_keys: Collection[str] = (),
        error_flags: Mapping[str, int] | None = None,
    ) -> State:
        """abir extension: run the machine, `while min(pc) < halt_index: state =
        kernels[next block](state)`, and return the final state. `cache_key` identifies
        (program, signature, batch size) and `code_cache` (the program's own cache, see
        `Backend.run_cache`) keeps compiled code, so a compiling backend reuses its loop; an
        eager one may ignore both. `stack_keys` are the state's `[D, B, ...]` stacks, which split
        kernels get apart (`separate_stacks`). `error_flags` maps the state's error flags to the
        value every member holds when nothing went wrong; a backend may summarize them in the
        state's `STATUS_KEY` entry."""

    @abc.abstractmethod
    def scope(self, leaves: Sequence[Any] = ()) -> contextlib.AbstractContextManager[Any]:
        """abir extension: the library settings a call on argument `leaves` runs under."""

    @abc.abstractmethod
    def is_traced(self, value: Any) -> bool:
        """abir extension: whether `value` belongs to a computation being traced (its contents
        exist only when that computation runs)."""

    @abc.abstractmethod
    def stage_run(self, run: Callable[[list[Any]], list[Any]], leaves: Sequence[Any]) -> list[Any]:
        """abir extension: `run(leaves)` for traced argument leaves (staged into the caller's
        computation)."""

    def mapped_axes(self) -> tuple[int, ...]:
        """abir extension: for a run being staged under `jax.vmap`, whose mapped calls are
        folded into its batch, the sizes of the mapped axes, outermost first (errors name members
        by their call's vmap indices); `()` otherwise."""
        return ()

    @abc.abstractmethod
    def batch_sharding(self, leaves: Sequence[Any]) -> Any:
        """abir extension: how `leaves` are split over devices along the batch axis, or None."""

    @abc.abstractmethod
    def run_sharded(
        self,
        run: Callable[[list[Any]], list[Any]],
        leaves: Sequence[Any],
        cache: MutableMapping[Any, Any],
        cache_key: Any,
    ) -> list[Any]:
        """abir extension: `run` once per shard of a batch sharded over devices."""

    @abc.abstractmethod
    def check_when_run(
        self,
        check: Callable[[dict[str, np.ndarray]], None],
        values: Mapping[str, Any],
        normal: Mapping[str, int] | None = None,
        summary: str = "",
    ) -> None:
        """abir extension: `check` on host copies of `values` (a run's error flags), now or when
        the traced computation they belong to runs."""


class Backend(BackendProtocol):
    """Array operations and the run loop of one array library: `BackendProtocol` implemented
    once, most of the reference's interface in terms of abir's array methods, so that a library
    needs only the abstract methods (its arrays, `builtin_prim`, the masked updates, `run`)."""

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
    also for members that already left the block (docs/performance.md#form-superblocks)."""
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
        runs the whole loop in one launch. Within `paced_by`, the first launch is paced too."""
        iterations = self.first_launch_iterations()
        pace = _LAUNCH_PACE.get()
        if pace is not None and pace.per_second is not None and self.launch_seconds is not None:
            iterations = self.paced_iterations(pace.per_second)
        start = time.perf_counter()
        state = launch(state, iterations)
        return self.continue_launches(launch, state, halt_index, iterations, start)

    def first_launch_iterations(self) -> int:
        """The loop iterations of a run's first launch (`run_in_launches`)."""
        return MAX_LAUNCH_ITERATIONS if self.launch_seconds is None else FIRST_LAUNCH_ITERATIONS

    def continue_launches(
        self, launch: Callable[[State, int], State], state: State, halt_index: int, iterations: int, start: float
    ) -> State:
        """`run_in_launches` from the `state` a launch of `iterations` iterations begun at `start`
        (`time.perf_counter()`) left: further launches, each as long as the last one's pace
        allows, until every member has halted (none without `launch_seconds`)."""
        if self.launch_seconds is None:
            return state
        while not self._all_halted(state, halt_index):
            per_second = iterations / max(time.perf_counter() - start, 1e-4)
            kept = _LAUNCH_PACE.get()
            if kept is not None:
                kept.per_second = per_second
            iterations = self.paced_iterations(per_second)
            start = time.perf_counter()
            state = launch(state, iterations)
        return state

    def paced_iterations(self, per_second: float) -> int:
        """The iterations of a launch of about `launch_seconds` at `per_second` iterations a second,
        rounded down to a `coarse_count`: a backend that puts a launch's limit on the device once
        per value (`abir.backends.jax.loop.iterations_on_device`) then finds it there again."""
        assert self.launch_seconds is not None
        return coarse_count(int(min(max(per_second * self.launch_seconds, 64), MAX_LAUNCH_ITERATIONS)))

    def _all_halted(self, state: State, halt_index: int) -> bool:
        """Whether every member of a launch's `state` has halted, from its `STATUS_KEY` entry
        when the launch made one (one number to read), else from the program counters."""
        status = state.get(STATUS_KEY)
        if status is not None:
            return not int(self.to_numpy(status)) & RUNNING
        return int(self.to_numpy(state["pc"]).min()) >= halt_index

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
    def zero_state(self, shapes: Mapping[str, tuple[tuple[int, ...], Any]], staged: bool = False) -> State:
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
    def call_opaque(self, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
        """Call a user's opaque primitive on whole-batch arrays of this backend."""
        return fn(*args)

    # ----- masked state updates -------------------------------------------------------------
    @abc.abstractmethod
    def where(self, mask: Any, new: Any, old: Any, name: str | None = None) -> Any:
        """`mask` is bool [B]; `new` and `old` are [B, *shape] (new may broadcast). Broadcasts the
        mask over the trailing dimensions."""

    def stack_scatter(self, stack: Any, rows: Any, value: Any) -> Any:
        """Return `stack` ([D, B, *shape]) with `stack[rows[b], b] = value[b]` for every member b
        whose row is in [0, D); a row of D means "no write" (`value` may broadcast); `rows` a
        `Span`: `stack_span_write`."""
        if isinstance(rows, Span):
            return self.stack_span_write(stack, rows, value)
        depth = int(stack.shape[0])
        return self.stack_write(
            stack, rows, value, self.builtin_prim("less", [rows, np.int32(depth)], np.bool_)
        )

    def stack_span_write(self, stack: Any, span: Span, value: Any) -> Any:
        """`stack` with each member's `span` of rows written (see `Span`): one row scatter per
        row offset j, up to the longest span in the batch, so the cost grows with the spans'
        lengths, never with the depth D."""
        prim = self.builtin_prim
        depth = np.int32(stack.shape[0])
        longest = prim("negative", [self.reduce_min(prim("negative", [span.count], np.int32))], np.int32)

        def more(j: Any, stack: Any) -> Any:
            return prim("less", [j, longest], np.bool_)

        def write_row(j: Any, stack: Any) -> tuple[Any, Any]:
            rows = prim("where", [prim("less", [j, span.count], np.bool_), prim("add", [span.start, j], np.int32), depth],
                        np.int32)  # fmt: skip
            return prim("add", [j, np.int32(1)], np.int32), self.stack_scatter(stack, rows, span_row(self, span, value, j, stack.dtype))

        return self.while_loop(more, write_row, [np.int32(0), stack])[1]

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

    def launcher(
        self,
        kernels: Sequence[Kernel],
        state: State,
        halt_index: int,
        cache_key: Any,
        code_cache: MutableMapping[Any, Any] | None = None,
        stack_keys: Collection[str] = (),
        error_flags: Mapping[str, int] | None = None,
    ) -> Callable[[State], State] | None:
        """`run` with these arguments as a function of the initial state, for initial states
        like `state` (the same keys, shapes and dtypes), its per-run choices made once; None
        (the default) where the backend has none (`Machine.run` then calls `run`)."""
        return None

    def steady_launcher(
        self,
        launcher: Callable[[State], State],
        zeros: State,
        input_keys: Sequence[str],
        output_keys: Sequence[str] = (),
    ) -> SteadyLauncher | None:
        """`launcher` (made by `launcher`) as a function of a run's input leaves alone, for initial
        states that are `zeros` with the leaves under `input_keys` (leaves of the types, shapes
        and dtypes of the run that made it, on concrete arrays): the `output_keys` of a run that
        finished unflagged, else the state `launcher` would return, its `STATUS_KEY` read
        (`SteadyLauncher`). None (the default) where the backend has none (the machine then
        builds each initial state and calls `launcher`)."""
        return None

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

    # ----- the reference's interface (`BackendProtocol` documents each method) ---------------
    def any(self, t: Any, name: str | None = None) -> Any:
        """By `reduce_min` over the negation (a backend may use its library's reduction)."""
        none = self.builtin_prim("logical_not", [t], np.bool_)
        return self.builtin_prim("equal", [self.reduce_min(self.builtin_prim("astype", [none], np.int8)), 0], np.bool_)

    def assert_matching_dtype(self, expected_dtype: Any, val: Any, message: str = "") -> None:
        found = np.dtype(self.type_of(val, expected_dtype).dtype)
        if found != np.dtype(expected_dtype):
            raise ValueError(f"mismatched dtype: expected {np.dtype(expected_dtype)}, found {found}. {message}".rstrip())

    def batch_size(self, val: Any, name: str | None = None) -> int:
        shape = tuple(getattr(val, "shape", ()))
        return int(shape[0]) if shape else 1

    def broadcast_to_shape_of(self, val: Any, target: Any, name: str | None = None) -> Any:
        target = self.asarray(target)
        return self.where(self.full_mask(self.batch_size(target)), val, target)

    def cond(self, pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any], name: str | None = None) -> Any:
        return true_fn() if bool(self.to_numpy(pred)) else false_fn()

    def create_variable(
        self, name: str | None, alloc: Any, type_: TensorType, max_stack_depth: int, batch_size: int
    ) -> Any:
        return variables.new_variable(self, alloc, type_, max_stack_depth, batch_size)

    def equal(self, t1: Any, t2: Any, name: str | None = None) -> Any:
        return self.builtin_prim("equal", [t1, t2], np.bool_)

    def fill(self, value: Any, size: int, dtype: Any, shape: Sequence[int], name: str | None = None) -> Any:
        return self.full((int(size), *shape), value, dtype)

    def full_mask(self, size: int, name: str | None = None) -> Any:
        return self.full((size,), True, np.bool_)

    def initial_program_counter(self, size: int, dtype: Any, name: str | None = None) -> Any:
        return self.full((int(size),), 0, dtype)

    def merge_dtypes(self, dt1: Any, dt2: Any) -> np.dtype:
        if dt1 is None or dt2 is None:
            return None if dt1 is None and dt2 is None else np.dtype(dt2 if dt1 is None else dt1)
        return np.promote_types(dt1, dt2)

    def merge_shapes(
        self, s1: Sequence[int | None] | None, s2: Sequence[int | None] | None
    ) -> tuple[int | None, ...] | None:
        return merge_shapes(s1, s2)

    def not_equal(self, t1: Any, t2: Any, name: str | None = None) -> Any:
        return self.builtin_prim("not_equal", [t1, t2], np.bool_)

    def prepare_for_cond(self, state: Any) -> Any:
        return state

    def run_on_dummies(self, primitive_callable: Callable[..., Any], input_types: Sequence[Any]) -> Any:
        def dummy(t: TensorType) -> Any:
            return self.zeros(t.shape, t.dtype)

        return primitive_callable(*(map_tensor_types(dummy, t) for t in input_types))

    def static_value(self, t: Any) -> Any:
        return None if self.is_traced(t) else self.to_numpy(t)

    def switch_case(
        self, branch_selector: Any, branch_callables: Sequence[Callable[..., Any]], *operands: Any, name: str | None = None
    ) -> Any:
        return branch_callables[int(self.to_numpy(branch_selector))](*operands)

    def type_of(self, t: Any, dtype_hint: Any = None) -> TensorType:
        array = t if hasattr(t, "dtype") and hasattr(t, "shape") else np.asarray(t, dtype=dtype_hint)
        return TensorType(np.dtype(getattr(array.dtype, "as_numpy_dtype", array.dtype)), tuple(array.shape))

    @property
    def variable_class(self) -> tuple[type, ...]:
        return VARIABLE_CLASSES

    def while_loop(
        self, cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Sequence[Any], name: str | None = None
    ) -> Any:
        loop_vars = list(loop_vars)
        while bool(self.to_numpy(cond(*loop_vars))):
            loop_vars = list(body(*loop_vars))
        return loop_vars

    def wrap_straightline_callable(self, f: Callable[..., Any]) -> Callable[..., Any]:
        return f


VARIABLE_CLASSES = (
    variables.NullVariable,
    variables.TemporaryVariable,
    variables.RegisterVariable,
    variables.FullVariable,
)
"""The variable classes of every abir backend (`variable_class`)."""


def map_tensor_types(fn: Callable[[TensorType], Any], pattern: Any) -> Any:
    """`fn` applied to every `TensorType` leaf of `pattern` (a `TensorType`, a `Type`, or nested
    tuples and lists of them), in the same structure."""
    if isinstance(pattern, TensorType):
        return fn(pattern)
    if isinstance(pattern, Type):
        return map_tensor_types(fn, pattern.tensors)
    if isinstance(pattern, tuple | list):
        return type(pattern)(map_tensor_types(fn, item) for item in pattern)
    raise TypeError(f"expected a TensorType, a Type or a tuple or list of them, got {pattern!r}")


def merge_shapes(
    s1: Sequence[int | None] | None, s2: Sequence[int | None] | None
) -> tuple[int | None, ...] | None:
    """The broadcast of two shapes whose dimensions may be unknown (None); None if either rank
    is unknown. ValueError if known dimensions do not broadcast."""
    if s1 is None or s2 is None:
        return None
    a, b = tuple(s1), tuple(s2)
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b
    merged: list[int | None] = []
    for x, y in zip(a, b, strict=True):
        if x is not None and y is not None and x != y and 1 not in (x, y):
            raise ValueError(f"shapes {tuple(s1)} and {tuple(s2)} do not broadcast (dimension {x} against {y})")
        if x == 1 or y == 1:
            merged.append(y if x == 1 else x)
        else:
            merged.append(x if x is not None else y)
    return tuple(merged)
