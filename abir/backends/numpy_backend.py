"""The NumPy backend: the eager reference implementation of the backend protocol.

Kernels run one after another in a Python loop, so this backend can also count machine steps
and active members per block (`last_stats`). Primitives run on every row, including the junk
rows of inactive members, with NumPy's floating-point warnings silenced.

Two executions of the loop (`execution=`, as on the JAX backend):

* `"switch"`: each step runs the one block the backend's `scheduler` picks
  (`smallest_live_block` by default), the reference design.
* `"sweep"`: the blocks are swept in index order, running every block that has members when
  the sweep reaches it (a member moves through every forward jump in one sweep); the next block
  is the smallest block above the one just run that holds a member (the same block again if it
  jumps to itself and members stand there), or a new sweep from the smallest block held. As on
  JAX, the blocks of the program's tail run only once every live member is in the tail.

A run with lanes (more members than rows) ends its kernels with a refill block (a kernel with
`refills_lanes`): once enough lanes wait at later blocks, the loop moves them on to it before
the scheduler's choice (`_toward_refill`).

The compiler does not form superblocks for this backend (`superblocks = False`): an eager step
pays for every op of its block, also for members that left it by a side exit, more than for
the step itself (docs/performance.md#form-superblocks).

A machine step costs tens of microseconds of Python and NumPy call overhead whatever the number
of active members, so the loop keeps its own per-step work small: the next block is one NumPy
reduction, the statistics are gathered in bulk (one `pc` reference per step, counted every few
hundred steps), and the stacks get a scratch row so a push is one unfiltered scatter.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from abir import prims
from abir.backends.base import (
    Backend,
    Kernel,
    RunStats,
    Scheduler,
    Span,
    State,
    Writes,
    apply_writes,
    loops_to_itself,
    separate_stacks,
    smallest_live_block,
    span_row,
    splittable,
    tail_start_of,
)

DEFAULT_EXECUTION = "switch"
"""The execution of a `NumpyBackend()` built without `execution=` or a scheduler."""
DEFAULT_MIN_SHARE = 0.0
"""The share of the live members a block must hold to run (`min_share`; when no block does,
the smallest block held runs). Measured (machine steps; examples/nuts.py 64 chains x 20
transitions, depth 6 / bench fib B=64): switch 0: 12,991 / 3,956; switch 0.2: 7,690 (NUTS
~30% faster) / 4,722 (fib ~5% slower); sweep 0: 11,613 / -; sweep 0.2: 8,397. Not a default:
it costs the ragged recursion of fib more steps than it saves per step."""

_FUNCTIONS: dict[str, Callable[..., Any]] = {}
"""Builtin prim name -> NumPy function (filled on first use)."""


@functools.lru_cache(maxsize=64)
def _members(batch: int) -> np.ndarray:
    """`arange(batch)`, cached (read only)."""
    members = np.arange(batch)
    members.flags.writeable = False
    return members


def _flat_rows(rows: np.ndarray, batch: int) -> np.ndarray:
    """The row of `[D * B, ...]` holding `stack[rows[b], b]`, per member b."""
    return rows.astype(np.intp) * batch + _members(batch)


class _ScratchStacks:
    """The stacks of one run, copied once into arrays with one extra scratch row, the row a
    write request of "no write" (rows = D) lands in. `views` are their first D rows (what the
    kernels read and the run returns); a request `(rows, value)` is one scatter into the stack
    seen as `[(D + 1) * B, ...]`, at flat rows computed once for the requests of a push group
    (they share `rows`)."""

    def __init__(self, stacks: State, batch: int, backend: Backend):
        self.batch = batch
        self.backend = backend  # computes the values of `Span` requests (`span_row`)
        self.views: dict[str, np.ndarray] = {}
        self.flat: dict[str, np.ndarray] = {}
        self._rows: Any = None
        self._flat_rows: np.ndarray | None = None
        for key, value in stacks.items():
            value = np.asarray(value)
            padded = np.zeros((value.shape[0] + 1, *value.shape[1:]), value.dtype)
            padded[:-1] = value
            self.views[key] = padded[:-1]
            self.flat[key] = padded.reshape(((value.shape[0] + 1) * batch, *value.shape[2:]))

    def apply(self, writes: Writes) -> None:
        """Apply a kernel's write requests in place, in order (`apply_writes`)."""
        self._rows = None
        apply_writes(self.flat, writes, self._scatter)

    def _scatter(self, flat: np.ndarray, rows: Any, value: Any) -> np.ndarray:
        """One request on a stack seen as `[(D + 1) * B, ...]`; requests of a push group share
        `rows`, so its flat rows are computed once."""
        if isinstance(rows, Span):  # many rows per member (`state_ops.descend`)
            return self._scatter_span(flat, rows, value)
        if rows is not self._rows:
            self._rows, self._flat_rows = rows, _flat_rows(np.asarray(rows), self.batch)
        flat[self._flat_rows] = value
        return flat


    def _scatter_span(self, flat: np.ndarray, span: Span, value: Any) -> np.ndarray:
        """A `Span` request: one scatter per row offset, up to the longest span."""
        start, count = np.asarray(span.start), np.asarray(span.count)
        depth = flat.shape[0] // self.batch - 1
        for j in range(int(count.max(initial=0))):
            rows = np.where(j < count, start + j, depth)
            row = span_row(self.backend, span, value, np.int32(j), flat.dtype)
            flat[_flat_rows(rows, self.batch)] = np.broadcast_to(row, (self.batch, *flat.shape[1:]))
        self._rows = None
        return flat


class _StepLog:
    """The statistics of one run, gathered in bulk: each step appends its block and the `pc`
    array it ran on (a reference: the loop never writes a `pc` array in place); every `chunk`
    steps the members active in each are counted at once."""

    def __init__(self, batch: int, num_blocks: int, chunk: int = 512):
        self.batch = batch
        self.num_blocks = num_blocks
        self.chunk = chunk
        self.blocks: list[int] = []
        self.pcs: list[np.ndarray] = []
        self.block_steps = np.zeros(num_blocks, np.int64)
        self.block_members = np.zeros(num_blocks, np.int64)
        self.member_steps = np.zeros(batch, np.int64)

    def record(self, block: int, pc: np.ndarray) -> None:
        self.blocks.append(block)
        self.pcs.append(pc)
        if len(self.blocks) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        if not self.blocks:
            return
        blocks = np.asarray(self.blocks, np.int64)
        active = np.stack(self.pcs) == blocks[:, None]  # [steps, B]
        self.member_steps += np.count_nonzero(active, axis=0)
        np.add.at(self.block_members, blocks, np.count_nonzero(active, axis=1))
        self.block_steps += np.bincount(blocks, minlength=self.num_blocks)
        self.blocks, self.pcs = [], []

    def stats(self, sweeps: int | None) -> RunStats:
        self.flush()
        block_steps = self.block_steps.tolist()
        return RunStats(
            batch_size=self.batch,
            steps=int(sum(block_steps)),
            block_steps=block_steps,
            block_members=self.block_members.tolist(),
            member_steps=self.member_steps.tolist(),
            sweeps=sweeps,
        )


REFILL_SHARE = 1 / 8
"""In a run with lanes, once this share of the lanes waits at blocks after the one just run
(the refill block included), the loop runs those blocks in order up to the refill block
before the scheduler's choice: lanes idle a little so that one refill serves many (each costs
a pass over every register), but never wait for the slowest member of a loop."""


def _toward_refill(pc: np.ndarray, ran: int, chosen: int, refill: int) -> int:
    """The block to run after block `ran` in a run with lanes (refill block `refill`), when
    the scheduler chose `chosen` (at most `ran`: a repeat or a jump back)."""
    ahead = (pc > ran) & (pc <= refill)
    if np.count_nonzero(ahead) < max(1.0, REFILL_SHARE * pc.shape[0]):
        return chosen
    return int(pc.min(where=ahead, initial=refill))


class NumpyBackend(Backend):
    """Array operations on `numpy.ndarray` and a Python `while` loop over machine steps."""

    name = "numpy"

    def __init__(
        self,
        scheduler: Scheduler | None = None,
        collect_stats: bool = True,
        *,
        execution: str | None = None,
        min_share: float | None = None,
    ):
        """`scheduler(backend, pc)` picks the block of each step of the `"switch"` execution
        (passing one selects it; default `smallest_live_block`).
        `collect_stats`: record `last_stats` (steps, active members per block and member).
        `execution` is `"sweep"` or `"switch"` (see the module docstring); default: `"switch"`
        when a scheduler is given, else `DEFAULT_EXECUTION`.
        `min_share` (without a scheduler): a block runs only if it holds at least this share of
        the live members, unless no block does (then the smallest block held runs). A switch
        runs the smallest such block, a sweep the next one ahead. Default `DEFAULT_MIN_SHARE`;
        0 gives the reference policy (`smallest_live_block`) and the JAX backend's sweep."""
        self.configure_execution(execution, scheduler, DEFAULT_EXECUTION)
        if min_share is not None and scheduler is not None:
            raise ValueError("min_share applies without a scheduler (the scheduler picks every block)")
        min_share = (
            (DEFAULT_MIN_SHARE if scheduler is None else 0.0) if min_share is None else float(min_share)
        )
        if not 0.0 <= min_share <= 1.0:
            raise ValueError(f"min_share must be in [0, 1], got {min_share}")
        self.min_share = min_share
        self.collect_stats = collect_stats
        self.last_stats = None
        self._quiet = False  # inside `run`, floating-point warnings are already silenced
        self._mask: Any = None  # the last mask `where` broadcast, and its reshaped views
        self._mask_views: dict[int, np.ndarray] = {}
        self._read_index: Any = None  # the last index `stack_read` saw, and its flat rows
        self._read_shape: tuple[int, int] = (0, 0)
        self._read_rows: Any = None

    # ----- arrays -------------------------------------------------------------------------
    def asarray(self, value: Any, dtype: Any = None) -> np.ndarray:
        return np.asarray(value, dtype=dtype)

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def is_native(self, value: Any) -> bool:
        return isinstance(value, np.ndarray)

    def zeros(self, shape: Sequence[int], dtype: Any) -> np.ndarray:
        return np.zeros(tuple(shape), dtype=dtype)

    def full(self, shape: Sequence[int], value: Any, dtype: Any) -> np.ndarray:
        return np.full(tuple(shape), value, dtype=dtype)

    def arange(self, n: int, dtype: Any = np.int32) -> np.ndarray:
        return np.arange(n, dtype=dtype)

    # ----- primitives ---------------------------------------------------------------------
    def builtin_prim(self, name: str, args: Sequence[Any], result_dtype: Any) -> np.ndarray:
        """NumPy semantics, with the result pinned to `result_dtype` and no warnings from junk rows.
        An integer to a negative integer power, which NumPy refuses (also in the junk rows of
        inactive members), truncates toward zero, as `int(b ** n)` of Python numbers: 1 for
        b == 1, 1 or -1 for b == -1 (n even or odd), else 0."""
        function = _FUNCTIONS.get(name)
        if function is None:
            if name == "astype":
                return np.asarray(prims.apply_numpy(name, args, result_dtype))
            function = _FUNCTIONS[name] = prims.numpy_function(name)
        if name == "pow" and np.result_type(*args).kind in "iu":
            base, exponent = np.asarray(args[0]), np.asarray(args[1])
            negative = exponent < 0
            result = np.power(base, np.where(negative, 0, exponent))
            if negative.any():
                truncated = np.where(base == 1, 1, np.where(base == -1, np.where(exponent % 2 == 0, 1, -1), 0))
                result = np.where(negative, truncated.astype(result.dtype), result)
        elif self._quiet:
            result = function(*args)
        else:
            with np.errstate(all="ignore"):
                result = function(*args)
        if type(result) is not np.ndarray:
            result = np.asarray(result)
        dtype = result.dtype
        if dtype is not result_dtype and result_dtype is not None and dtype != result_dtype:
            result = result.astype(result_dtype)
        return result

    def call_opaque(self, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
        if self._quiet:
            return fn(*args)
        with np.errstate(all="ignore"):
            return fn(*args)

    # ----- masked state updates -------------------------------------------------------------
    def where(self, mask: Any, new: Any, old: Any, name: str | None = None) -> np.ndarray:
        """A fresh array: `old` with the masked members' rows from `new`. A `new` of `old`'s
        dtype is copied in with `np.copyto` (cheaper than `np.where` for small batches); the
        mask broadcast over the event dimensions is cached for the next call with the same mask."""
        if type(old) is not np.ndarray:
            old = np.asarray(old)
        if type(mask) is not np.ndarray:
            mask = np.asarray(mask)
        extra = old.ndim - mask.ndim
        if extra > 0:
            if mask is not self._mask:
                self._mask, self._mask_views = mask, {}
            view = self._mask_views.get(extra)
            if view is None:
                view = self._mask_views[extra] = mask.reshape(mask.shape + (1,) * extra)
            mask = view
        dtype = old.dtype
        new_dtype = getattr(new, "dtype", None)
        if (new_dtype is dtype or new_dtype == dtype) and mask.shape[:1] == old.shape[:1]:
            result = old.copy()
            try:
                np.copyto(result, new, where=mask)
                return result
            except ValueError:  # `new` or the mask widen the shape: np.where broadcasts them all
                pass
        result = np.where(mask, new, old)
        return result if result.dtype == dtype else result.astype(dtype)

    def stack_write(self, stack: np.ndarray, index: Any, value: Any, mask: Any) -> np.ndarray:
        """Writes in place: only the masked members' slots are touched (O(B), not O(D*B))."""
        members = np.flatnonzero(mask)
        if members.size:
            value = np.broadcast_to(value, stack.shape[1:])
            stack[np.asarray(index)[members], members] = value[members]
        return stack

    def stack_scatter(self, stack: np.ndarray, rows: Any, value: Any) -> np.ndarray:
        """In place: only the members with a row below the depth are touched."""
        if isinstance(rows, Span):
            return self.stack_span_write(stack, rows, value)
        rows = np.asarray(rows)
        members = np.flatnonzero(rows < stack.shape[0])
        if members.size:
            value = np.asarray(value)
            if value.ndim and value.shape[0] == stack.shape[1]:
                stack[rows[members], members] = value[members]
            else:
                stack[rows[members], members] = np.broadcast_to(value, stack.shape[1:])[members]
        return stack

    def stack_read(self, stack: np.ndarray, index: Any) -> np.ndarray:
        """One `take` of flat row indices (`stack[row, b]` is row `row * B + b` of the stack
        seen as `[D * B, ...]`), computed once for the stacks of a group, which share `index`."""
        depth, batch = stack.shape[0], stack.shape[1]
        if index is not self._read_index or self._read_shape != (depth, batch):
            rows = np.minimum(np.maximum(index, 0), depth - 1)
            self._read_index, self._read_shape = index, (depth, batch)
            self._read_rows = _flat_rows(rows, batch)
        return stack.reshape((depth * batch, *stack.shape[2:])).take(self._read_rows, axis=0)

    def known_none(self, mask: Any) -> bool:
        return not (mask.any() if type(mask) is np.ndarray else np.any(mask))

    def reduce_min(self, t: Any, name: str | None = None) -> np.ndarray:
        return np.min(t)

    # ----- running --------------------------------------------------------------------------
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
        """A Python loop over machine steps; records `last_stats` when `collect_stats` is set.

        With split kernels the stacks stay out of the kernels and are updated in place: each is
        copied once into an array with one extra scratch row (the row a write request of "no
        write", rows = D, lands in), the kernels see its first D rows, and a request is one
        scatter. The caller's arrays are never written."""
        batch = int(state["pc"].shape[0])
        log = _StepLog(batch, len(kernels)) if self.collect_stats else None
        sweep = self.execution == "sweep"
        halt = int(halt_index)
        split = splittable(kernels)
        if split:
            regs, stack_arrays = separate_stacks(state, stack_keys)
            stacks = _ScratchStacks(stack_arrays, batch, self)
        pc = np.asarray(state["pc"])
        self._repeats = [loops_to_itself(kernel) for kernel in kernels]
        self._tail = tail_start_of(kernels)
        block = self._choose(pc, -1, halt)[0]
        sweeps = int(block < halt)
        refill = halt - 1 if kernels and getattr(kernels[-1], "refills_lanes", False) else None
        with np.errstate(all="ignore"):
            self._quiet = True
            try:
                while block < halt:
                    if split:
                        if log is not None:
                            log.record(block, pc)
                        regs, writes = kernels[block].split(regs, stacks.views)  # type: ignore[attr-defined]
                        if writes:
                            stacks.apply(writes)
                        pc = regs["pc"]
                        if type(pc) is not np.ndarray:
                            pc = np.asarray(pc)
                    else:
                        if log is not None:
                            log.record(block, pc.copy())
                        state = kernels[block](state)
                        pc = np.asarray(state["pc"])
                    ran = block
                    block, wrapped = self._choose(pc, block, halt)
                    sweeps += wrapped
                    if refill is not None and block <= ran:
                        block = _toward_refill(pc, ran, block, refill)
            finally:
                self._quiet = False
                self._mask, self._mask_views = None, {}
                self._read_index = self._read_rows = None
        self.last_stats = None if log is None else log.stats(sweeps if sweep else None)
        if split:
            return {**regs, **stacks.views}
        return state

    def _choose(self, pc: np.ndarray, after: int, halt: int) -> tuple[int, int]:
        """(the block to run after block `after` (-1: the first), 1 if a sweep starts there)."""
        if self.execution == "sweep" and not self.min_share:
            return self._next_in_sweep(pc, after, halt)
        if self.execution == "sweep":
            return self._next_held(pc, after, halt)
        if self.scheduler is not smallest_live_block:
            return int(self.next_block(pc)), 0
        if self.min_share:
            return self._next_held(pc, -1, halt)[0], 0
        return int(pc.min()), 0

    def _next_in_sweep(self, pc: np.ndarray, after: int, halt: int) -> tuple[int, int]:
        """(the block a sweep runs after block `after`, 1 if a new sweep starts there): the
        next block held, or `after` again if it jumps to itself and members stand there; blocks
        of the program's tail only once every live member is in the tail (as on JAX)."""
        floor = after if after >= 0 and self._repeats[after] else after + 1
        block = int(pc.min(where=pc >= floor, initial=halt))
        if block < halt and (block < self._tail or int(pc.min()) >= self._tail):
            return block, 0
        block = int(pc.min())
        return block, int(block < halt)

    def _next_held(self, pc: np.ndarray, after: int, halt: int) -> tuple[int, int]:
        """(the block to run after block `after`, 1 if the search wrapped around else 0).

        The smallest block above `after` holding at least `min_share` of the live members (at
        least one); when there is none, the search wraps to the smallest such block, or to the
        smallest block held if no block holds that share; `halt` when every member halted. A
        sweep passes the block it ran as `after` (a wrap starts a sweep); a switch passes -1."""
        if not self.min_share:
            block = int(pc.min(where=pc > after, initial=halt))
            if block < halt:
                return block, 0
            block = int(pc.min())
            return block, int(block < halt)
        counts = np.bincount(pc, minlength=halt + 1)
        live = pc.shape[0] - int(counts[halt])
        if not live:
            return halt, 0
        enough = counts[:halt] >= max(self.min_share * live, 1.0)
        if after + 1 < halt:
            ahead = int(enough[after + 1 :].argmax()) + after + 1  # the first true (0 if none)
            if enough[ahead]:
                return ahead, 0
        first = int(enough.argmax())
        return (first if enough[first] else int(pc.min())), 1

    # ----- the reference's interface (`BackendProtocol`) ---------------------------------------
    def any(self, t: Any, name: str | None = None) -> np.bool_:
        return np.any(t)

    def cond(self, pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any], name: str | None = None) -> Any:
        return true_fn() if pred else false_fn()

    def static_value(self, t: Any) -> np.ndarray:
        return np.asarray(t)

    def switch_case(
        self, branch_selector: Any, branch_callables: Sequence[Callable[..., Any]], *operands: Any, name: str | None = None
    ) -> Any:
        return branch_callables[int(branch_selector)](*operands)

    def while_loop(
        self, cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Sequence[Any], name: str | None = None
    ) -> list[Any]:
        loop_vars = list(loop_vars)
        while bool(cond(*loop_vars)):
            loop_vars = list(body(*loop_vars))
        return loop_vars

    def broadcast_to_shape_of(self, val: Any, target: Any, name: str | None = None) -> np.ndarray:
        target = np.asarray(target)
        return np.broadcast_to(np.asarray(val, dtype=target.dtype), target.shape).copy()
