"""The JAX backend: the whole machine is one `jax.jit`-compiled XLA program.

`run` stages the machine loop as one `lax.while_loop`, so a run makes no host round trip per
step. The loop is `abir.backends.traced.TracedLoop` (sweeps, or one switch per step:
`execution=`) on JAX's primitives (`_JaxLoop`: `lax.cond`, `lax.switch`, reductions by chunks,
`dynamic_update_slice`). Measured on NUTS (examples/nuts.py, 64 chains x 20 transitions, depth
6; `bench/nuts.py`): 692 sweeps running 7,577 blocks (995 sweeps and 11,244 blocks without
superblocks), against about 13,000 single-block steps for `"switch"`.

Every block computes on all B rows and masks its writes, so a costly block that few members
reach in a sweep wastes most of its work. In the sweep execution such a block (at least
`COMPACT_MIN_ROW_WORK` element operations per member, counted on its traced kernel) runs
compacted when at most B/8 members stand there: on their gathered rows only (`_compact_run`).
On NUTS this is the momentum draw, reached by a few chains in most sweeps (B=1024: 882 -> 405
ms on one core).

The compiled loop runs in launches of about `launch_seconds` (`Backend.run_in_launches`), so
Ctrl-C stops a runaway run between two launches. The compiled program is cached per `cache_key`
(program, signature, batch size) with the program (`Backend.run_cache`), or in a dict the caller
supplies, and reused across calls. With `collect_stats=True` the loop also counts, inside the compiled
program, the blocks run, the members active in each and each member's own block count
(`last_stats`); without it the loop carries no counters.

Called on tracers (inside `jax.jit`, `lax.scan`, ...), a run is staged into the caller's
computation as one launch (`stage_run`), under a `custom_vmap` rule that folds `jax.vmap`'s
mapped axes into the batch; arguments sharded over devices along the batch axis run one machine
per shard (`run_sharded`).

A standalone run compiles its loop as one XLA kernel where XLA can and its state or its batch is
small (`OneKernelWherePossible`): XLA's CPU runtime otherwise calls each of the loop's kernels on
its own, about 0.1 us a call, which made most of a sweep's cost at small batch sizes, and XLA
compiles each of them on its own (about 15 ms a kernel: most of NUTS's first call at B=1024).

A standalone run (called outside any JAX trace) happens under `jax.enable_x64(True)`, so int64 and
float64 behave as in NumPy; the setting is scoped to abir's own run (`JaxBackend.scope`), never
changed for the rest of the process.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from abir import prims
from abir.backends.base import (
    FLAGGED,
    LAUNCH_SECONDS,
    MAX_LAUNCH_ITERATIONS,
    RUNNING,
    STATUS_KEY,
    Backend,
    Kernel,
    RunStats,
    Scheduler,
    State,
    Writes,
    apply_writes,
    map_tensor_types,
    separate_stacks,
    splittable,
)
from abir.backends.traced import (
    STATS_KEY,
    BlockRun,
    LazyRegisters,
    TracedLoop,
    run_stats,
    writes_whole_stacks,
    zero_counters,
)
from abir.errors import AbirError
from abir.types import TensorType


@contextlib.contextmanager
def _callers_dtypes() -> Iterator[None]:
    """A run staged into a caller's trace without 64-bit types: JAX narrows the program's int64
    and float64 to int32 and float32 (the caller's policy), without a warning per array."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Explicitly requested dtype", category=UserWarning)
        yield


REVERSE_MODE_FAILURE = "Linearization failed to produce known values"
"""The start of the error JAX raises when reverse-mode differentiation meets a while loop."""


def _is_python_number(value: Any) -> bool:
    return isinstance(value, bool | int | float) and not isinstance(value, np.generic)


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


def dtype_of(value: Any) -> Any:
    """The NumPy dtype of an array, or the Python scalar itself (weak in NumPy 2 promotion)."""
    return value.dtype if hasattr(value, "dtype") else value


def _integer(dtype: Any) -> bool:
    return np.issubdtype(np.dtype(dtype), np.integer)


def _safe_int_division(name: str, x: Any, y: Any) -> Any:
    """Integer floor_divide/remainder by zero give 0, as in NumPy (XLA would give junk)."""
    zero = y == 0
    result = getattr(jnp, name)(x, jnp.where(zero, jnp.ones_like(y), y))
    return jnp.where(zero, jnp.zeros_like(result), result)



class JaxBackend(Backend):
    """jax.numpy arrays; `run` is one jitted `lax.while_loop` (block sweeps, or one `lax.switch`
    per step)."""

    name = "jax"
    superblocks = True
    immutable_arrays = True

    def __init__(
        self,
        code_cache: MutableMapping[Any, Any] | None = None,
        scheduler: Scheduler | None = None,
        *,
        execution: str | None = None,
        collect_stats: bool = False,
        launch_seconds: float | None = LAUNCH_SECONDS,
        one_kernel: bool | None = None,
    ):
        """`code_cache` maps a run's `cache_key` to its jitted function; pass a dict to keep
        compiled code there yourself (default: each compiled program keeps its runs, bounded and
        freed with it, so a new backend object per call does not recompile either).
        `execution` is `"sweep"` (default) or `"switch"` (see the module docstring).
        `scheduler(backend, pc)` picks the next block of the `"switch"` execution (passing one
        selects it); it must be traceable (jnp, not NumPy).
        `collect_stats`: count blocks and active members inside the loop (`last_stats`).
        `launch_seconds`: run the compiled loop in launches of about this long, so that Ctrl-C
        stops a run within about that time (`Backend.run_in_launches`); None: one launch.
        `one_kernel`: compile a standalone run's loop as one XLA kernel where XLA can
        (`OneKernelWherePossible`): None (default) when its state or its batch is small
        enough, True at any size, False never."""
        if not (one_kernel is None or isinstance(one_kernel, bool)):
            raise TypeError(f"one_kernel must be None, True or False, not {one_kernel!r}")
        self.configure_execution(execution, scheduler, "sweep", collect_stats)
        self.configure_launches(launch_seconds)
        self.collect_stats = bool(collect_stats)
        self.one_kernel = one_kernel
        self.code_cache = code_cache
        self.trace_count = 0  # how many times a run loop was traced (i.e. compiled)
        self.shard_stats: list[RunStats] | None = None  # per shard, after a sharded run with collect_stats
        self._shards: list[_ShardTrace] = []  # the shard_map bodies being traced
        self._folds: list[int] = []  # the vmapped axes folded into the run being traced, innermost first
        self.scatter_free = False  # while tracing a loop meant to be one kernel (`OneKernelWherePossible`)

    def scope(self, leaves: Sequence[Any] = ()) -> contextlib.AbstractContextManager[Any]:
        """64-bit types for abir's own run (NumPy's int64 and float64), whatever the process's
        `jax_enable_x64`; the setting is restored when the run ends. A run on tracers (staged
        into the caller's trace) follows the caller's setting instead: without 64-bit types the
        program's int64 and float64 values are int32 and float32, as everywhere in that trace."""
        if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
            return _callers_dtypes()
        return jax.enable_x64(True)

    def is_traced(self, value: Any) -> bool:
        return isinstance(value, jax.core.Tracer)

    def mapped_axes(self) -> tuple[int, ...]:
        """The sizes of the `jax.vmap` axes folded into the batch of the run being staged,
        outermost first (nested vmaps apply their rules innermost first)."""
        return tuple(reversed(self._folds))

    def stage_run(self, run: Callable[[list[Any]], list[Any]], leaves: Sequence[Any]) -> list[Any]:
        """`run` as a `jax.custom_batching.custom_vmap` function of the array leaves (Python
        numbers stay weak constants), so that `jax.vmap` over the call folds its mapped axis into
        the batch instead of batching every op of the machine (`_fold_mapped_axis`)."""
        positions = [i for i, leaf in enumerate(leaves) if not _is_python_number(leaf)]

        def unstaged(*arrays: Any) -> tuple[Any, ...]:
            merged = list(leaves)
            for position, array in zip(positions, arrays, strict=True):
                merged[position] = array
            return tuple(run(merged))

        staged = jax.custom_batching.custom_vmap(unstaged)

        @staged.def_vmap
        def folded(axis_size: int, in_batched: Sequence[bool], *arrays: Any) -> tuple[Any, Any]:
            if not any(in_batched):  # e.g. the primal part of a vmapped jvp: the same for every call
                outputs = unstaged(*arrays)
                return outputs, tuple(False for _ in outputs)
            self._folds.append(axis_size)
            try:
                return _fold_mapped_axis(staged, axis_size, in_batched, arrays)
            finally:
                self._folds.pop()

        try:
            return list(staged(*(leaves[i] for i in positions)))
        except ValueError as err:
            if REVERSE_MODE_FAILURE not in str(err):
                raise
            raise TypeError(
                "a batched function cannot be differentiated in reverse mode (jax.grad, jax.vjp, "
                "jax.jacrev): its machine is a while loop of data-dependent length; use forward mode, "
                "jax.jvp or jax.jacfwd, which differentiate through the loop"
            ) from err

    def batch_sharding(self, leaves: Sequence[Any]) -> jax.sharding.NamedSharding | None:
        """The `NamedSharding` of the first argument split over more than one device along its
        batch axis (the others follow it), or None."""
        for leaf in leaves:
            sharding = getattr(leaf, "sharding", None)
            if (
                isinstance(sharding, jax.sharding.NamedSharding)
                and len(sharding.device_set) > 1
                and len(leaf.shape) > 0
                and sharding.spec
                and sharding.spec[0] is not None
            ):
                return sharding
        return None

    def run_sharded(
        self,
        run: Callable[[list[Any]], list[Any]],
        leaves: Sequence[Any],
        cache: MutableMapping[Any, Any],
        cache_key: Any,
    ) -> list[Any]:
        """One machine per shard: `jax.shard_map` over the batch axis of the first sharded
        argument's mesh, each device running the staged machine on its own members (its loop
        ends when they have halted, with no communication between devices). Arguments of B
        members are split along the batch axis (put there if they live elsewhere, as NumPy
        arrays do); arguments shared by all members are copied to every device. The results carry the same sharding.
        Each shard returns its error flags with its results, and the call raises abir's own
        error from them (`StackOverflowError`, `StepLimitError`), naming members by their index
        in the whole batch, as a run on one device does: the sharded program has no host
        callback, so a failed run leaves no failed runtime token behind (JAX would raise it
        again from its exit handler). With `collect_stats`, each shard's machine counts its own
        run (`shard_stats`, one `RunStats` per shard in mesh order; `last_stats` is None)."""
        sharding = self.batch_sharding(leaves)
        assert sharding is not None
        batch = max((int(leaf.shape[0]) for leaf in leaves if getattr(leaf, "shape", ())), default=1)
        batch_spec = jax.sharding.PartitionSpec(sharding.spec[0])
        axes = sharding.spec[0] if isinstance(sharding.spec[0], tuple) else (sharding.spec[0],)
        shards = int(np.prod([sharding.mesh.shape[axis] for axis in axes]))
        positions = [i for i, leaf in enumerate(leaves) if not _is_python_number(leaf)]
        arrays = [leaves[i] for i in positions]
        specs = tuple(
            batch_spec if getattr(a, "shape", ()) and int(a.shape[0]) == batch and batch > 1 else jax.sharding.PartitionSpec()
            for a in arrays
        )
        constants = tuple((i, leaves[i]) for i in range(len(leaves)) if i not in positions)
        shapes = tuple((tuple(a.shape), np.dtype(a.dtype).str) for a in arrays)
        key = (cache_key, sharding.mesh, batch_spec, specs, shapes, constants, self.collect_stats)
        entry = cache.get(key)
        if entry is None:
            checks: list[_ShardCheck] = []  # filled when `sharded` is traced, on its first call

            def per_shard(*shard: Any) -> tuple[Any, Any, Any]:
                merged = list(leaves)
                for position, array in zip(positions, shard, strict=True):
                    merged[position] = array
                trace = _ShardTrace(batch // shards)
                self._shards.append(trace)
                try:  # no custom_vmap (stage_run): nothing vmaps this body, and the counters leave it
                    outputs = tuple(run(merged))
                finally:
                    self._shards.pop()
                checks[:] = trace.checks
                return outputs, _stacked_counters(trace.counters), trace.flags

            sharded = jax.jit(
                jax.shard_map(per_shard, mesh=sharding.mesh, in_specs=specs, out_specs=batch_spec, check_vma=False)
            )
            entry = cache[key] = (sharded, checks)
        sharded, checks = entry
        placed = [
            jax.device_put(a, jax.sharding.NamedSharding(sharding.mesh, spec)) for a, spec in zip(arrays, specs, strict=True)
        ]
        outputs, counters, flags = sharded(*placed)
        self.last_stats = None
        self.shard_stats = None if counters is None else _shard_stats(counters, shards)
        for check, values in zip(checks, flags, strict=True):
            check.raise_if_failed(values)
        return list(outputs)

    def check_when_run(
        self,
        check: Callable[[dict[str, np.ndarray]], None],
        values: Mapping[str, Any],
        normal: Mapping[str, int] | None = None,
        summary: str = "",
    ) -> None:
        """Traced values: `check` runs as a callback of the staged computation, only when some
        value differs from its `normal` one (so a run without errors makes no host round trip),
        and its error surfaces as a `jax.errors.JaxRuntimeError` carrying abir's message."""
        if not any(self.is_traced(value) for value in values.values()):
            super().check_when_run(check, values, normal, summary)
            return
        normal = normal or {}
        if self._shards:  # a shard's flags leave its shard_map body (`run_sharded`)
            members = self._shards[-1].members
            self._shards[-1].flags.append({key: value[:members] for key, value in values.items()})  # no padding rows
            self._shards[-1].checks.append(_ShardCheck(check, normal))
            return
        flags = dict(values)
        raised = functools.reduce(
            jnp.logical_or, [jnp.any(value != normal.get(key, 0)) for key, value in flags.items()]
        )

        def call_check(flags: dict[str, Any]) -> None:
            jax.debug.callback(functools.partial(_check_and_keep, check), flags)

        lax.cond(raised, call_check, lambda flags: None, flags)

    # ----- arrays -------------------------------------------------------------------------
    def asarray(self, value: Any, dtype: Any = None) -> Any:
        if isinstance(value, np.ndarray | np.generic):  # cast on the host: no XLA program to compile
            return jnp.asarray(value if dtype is None else np.asarray(value, np.dtype(dtype)))
        return jnp.asarray(value, dtype=None if dtype is None else np.dtype(dtype))

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def is_native(self, value: Any) -> bool:
        return isinstance(value, jax.Array)

    def zeros(self, shape: Sequence[int], dtype: Any) -> Any:
        """Made on the host and transferred (eager `jnp.zeros` compiles a program per shape)."""
        return jnp.asarray(np.zeros(tuple(shape), dtype=np.dtype(dtype)))

    def full(self, shape: Sequence[int], value: Any, dtype: Any) -> Any:
        return jnp.asarray(np.full(tuple(shape), value, dtype=np.dtype(dtype)))

    def arange(self, n: int, dtype: Any = np.int32) -> Any:
        return jnp.arange(n, dtype=np.dtype(dtype))

    def pad_rows(self, array: Any, rows: int) -> Any:
        array = jnp.asarray(array)
        return jnp.pad(array, [(0, rows - array.shape[0])] + [(0, 0)] * (array.ndim - 1))

    def run_input(self, array: np.ndarray) -> Any:
        """Kept on the host: the jitted run moves NumPy arguments to the device within its own
        call, where a `jnp.asarray` first is a dispatch of its own (about 45 us of a 230 us
        collatz call at B=64)."""
        return array

    def zero_state(self, shapes: Mapping[str, tuple[tuple[int, ...], Any]], staged: bool = False) -> State:
        """Broadcasts of the caller's computation when `staged`; else made on the host and moved
        in one transfer. A jitted maker, one dispatch per call, cost a compilation of its own
        instead: 0.13 s of NUTS's first call at B=64, 0.17 s at B=4096, where the machine makes
        the zeros once per batch size and depth (`Machine._reused_zero_state`; NUTS B=4096:
        19 MB, moved in 4-5 ms)."""
        if staged:
            return {key: jnp.zeros(tuple(shape), np.dtype(dtype)) for key, (shape, dtype) in shapes.items()}
        return jax.device_put({key: np.zeros(tuple(shape), np.dtype(dtype)) for key, (shape, dtype) in shapes.items()})

    # ----- primitives ---------------------------------------------------------------------
    def builtin_prim(self, name: str, args: Sequence[Any], result_dtype: Any) -> Any:
        """NumPy semantics: operands are cast to the dtype NumPy computes in (the result dtype,
        or the common dtype for comparisons and logical ops), then the result to `result_dtype`.
        Integer division by zero and integer powers with a negative exponent give what the NumPy
        backend gives (0; a power truncated toward zero), never junk."""
        if not prims.is_builtin(name):
            raise ValueError(f"{name!r} is not a builtin primitive (see abir.prims)")
        result_dtype = None if result_dtype is None else np.dtype(result_dtype)
        if name == "astype":
            return jnp.asarray(args[0]).astype(result_dtype)
        if name == "where":
            cond, x, y = args
            dt = result_dtype if result_dtype is not None else np.result_type(dtype_of(x), dtype_of(y))
            return jnp.where(jnp.asarray(cond, dtype=bool), jnp.asarray(x, dt), jnp.asarray(y, dt))
        operands = self._cast_operands(name, args, result_dtype)
        if name in ("floor_divide", "remainder") and _integer(operands[0].dtype):
            result = _safe_int_division(name, *operands)
        elif name == "pow" and _integer(operands[0].dtype):
            # a negative exponent truncates toward zero, as on NumPy (jnp.power gives junk)
            base, exponent = operands
            negative = exponent < 0
            powered = jnp.power(base, jnp.where(negative, jnp.zeros_like(exponent), exponent))
            one = jnp.ones_like(powered)
            odd_sign = jnp.where(exponent % 2 == 0, one, -one)
            truncated = jnp.where(base == 1, one, jnp.where(base == -1, odd_sign, jnp.zeros_like(powered)))
            result = jnp.where(negative, truncated, powered)
        else:
            result = getattr(jnp, name)(*operands)
        return result if result_dtype is None else result.astype(result_dtype)

    @staticmethod
    def _cast_operands(name: str, args: Sequence[Any], result_dtype: np.dtype | None) -> list[Any]:
        """The operands as jnp arrays of the dtype NumPy's ufunc loop would use."""
        complex_operand = any(getattr(dtype_of(a), "kind", None) == "c" for a in args)
        if name in prims.COMMON_DTYPE_PRIMS or result_dtype is None or complex_operand:
            dt = np.result_type(*(dtype_of(a) for a in args))
        else:
            dt = result_dtype
        return [jnp.asarray(a, dtype=dt) for a in args]

    def call_opaque(self, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
        """`fn` on the arrays; the results of a costly helper go to buffers of their own
        (`MATERIALIZE_MIN_ROW_WORK`)."""
        arrays = [jnp.asarray(a) for a in args]
        traced = jax.jit(fn)  # traced once: its work count and its call share the trace
        result = traced(*arrays)
        if _helper_row_work(traced, arrays) >= MATERIALIZE_MIN_ROW_WORK:
            result = jax.tree_util.tree_map(_behind_conditional if self.scatter_free else _materialized, result)
        return result

    # ----- masked state updates -------------------------------------------------------------
    def where(self, mask: Any, new: Any, old: Any, name: str | None = None) -> Any:
        """`mask` [B] broadcast over the trailing dims; the result keeps `old`'s dtype and shape."""
        old = jnp.asarray(old)
        mask = jnp.asarray(mask, dtype=bool).reshape((-1,) + (1,) * (old.ndim - 1))
        return jnp.where(mask, jnp.asarray(new, dtype=old.dtype), old)

    def stack_write(self, stack: Any, index: Any, value: Any, mask: Any) -> Any:
        """Scatter `value[b]` to `stack[index[b], b]` where `mask[b]` and the index is in range;
        every other write is redirected out of range and dropped (O(B) work, not O(D*B))."""
        depth, batch = stack.shape[0], stack.shape[1]
        index = jnp.asarray(index, dtype=jnp.int32)
        ok = jnp.asarray(mask, dtype=bool) & (index >= 0) & (index < depth)
        rows = jnp.where(ok, index, depth)
        value = jnp.broadcast_to(jnp.asarray(value, dtype=stack.dtype), stack.shape[1:])
        return stack.at[rows, jnp.arange(batch)].set(value, mode="drop")

    def stack_scatter(self, stack: Any, rows: Any, value: Any) -> Any:
        """Scatter by index; rows of D (or anything out of range) are dropped. Inside the run
        loop the stack is a loop-carried buffer, so XLA updates it in place (O(B) per push).
        A stack of at most `ONE_HOT_STACK_MAX` elements is rewritten whole instead, by a
        select on a one-hot row mask: one fused kernel where the scatter takes three. A loop
        traced to be one kernel (`scatter_free`) writes column by column."""
        if rows is None:
            return value
        batch = stack.shape[1]
        rows = jnp.broadcast_to(jnp.asarray(rows, dtype=jnp.int32), (batch,))
        value = jnp.broadcast_to(jnp.asarray(value, dtype=stack.dtype), stack.shape[1:])
        if self.scatter_free:
            return _write_column_by_column({"stack": stack}, {"stack": [(rows, value)]})["stack"]
        if stack.size <= ONE_HOT_STACK_MAX:
            hit = jnp.arange(stack.shape[0], dtype=jnp.int32)[:, None] == rows[None, :]
            return jnp.where(hit.reshape(hit.shape + (1,) * (stack.ndim - 2)), value[None], stack)
        return stack.at[rows, jnp.arange(batch)].set(value, mode="drop", unique_indices=True)

    def stack_read(self, stack: Any, index: Any) -> Any:
        depth, batch = stack.shape[0], stack.shape[1]
        rows = jnp.clip(jnp.asarray(index, dtype=jnp.int32), 0, depth - 1)
        return stack[rows, jnp.arange(batch)]

    def reduce_min(self, t: Any, name: str | None = None) -> Any:
        return jnp.min(t)

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
        """One jitted `lax.while_loop`, compiled once per `cache_key` and state signature.

        Without a `cache_key` the compiled code is still reused for the same `kernels` list
        (the machine builds it once per program and backend), kept alive by the cache. A run of
        its own also returns its `STATUS_KEY`, computed in the loop's program: one number read
        per launch instead of the program counters and every error flag (collatz B=64: ~10 us
        of a 180 us call)."""
        staged = self.is_traced(state["pc"])
        # NumPy inputs of a run of its own go to the device with the call (`run_input`); in the
        # caller's trace they become arrays of the caller's dtypes
        kept = jax.Array if staged else (jax.Array, np.ndarray)
        state = {key: value if isinstance(value, kept) else jnp.asarray(value) for key, value in state.items()}
        shard = self._shards[-1] if staged and self._shards else None
        if self.collect_stats and (not staged or shard is not None):
            state[STATS_KEY] = zero_counters(jnp.zeros, len(kernels), state["pc"].shape[0])
        flags = {} if staged else dict(error_flags or {})

        def compile_loop(ks: tuple[Kernel, ...], halt: int) -> Callable[[State, Any], State]:
            if staged:  # inlined into the caller's computation, compiled with the caller's options
                return jax.jit(self._loop(ks, halt, stack_keys))

            def loop(scatter_free: bool) -> Callable[[State, Any], State]:
                return _with_status(self._loop(ks, halt, stack_keys, scatter_free), halt, flags)

            if self.one_kernel is False:
                return JitWithOptions(loop(False), LOOP_COMPILER_OPTIONS)
            return OneKernelWherePossible(loop, any_size=self.one_kernel is True)

        run = self.compiled_run(
            self.run_cache(code_cache),
            kernels,
            halt_index,
            cache_key,
            compile_loop,
            (self.execution, self.collect_stats, self.one_kernel, staged, tuple(flags.items())),
        )
        if staged:  # into the caller's computation: one launch, no host round trip
            state = dict(run(state, np.int32(MAX_LAUNCH_ITERATIONS)))
        else:

            def launch(state: State, iterations: int) -> State:
                state = dict(state)
                state.pop(STATUS_KEY, None)  # made by the last launch, not a loop input
                return run(state, _iterations_on_device(iterations))

            state = dict(self.run_in_launches(launch, state, halt_index))
            state[STATUS_KEY] = int(np.asarray(state[STATUS_KEY]))
        counters = state.pop(STATS_KEY, None)
        if shard is not None:  # counted on the shard's device, returned by its shard_map body
            shard.counters, counters = counters, None
        self.last_stats = None if counters is None else run_stats(counters)
        return state

    def _loop(
        self, kernels: tuple[Kernel, ...], halt_index: int, stack_keys: Collection[str], scatter_free: bool = False
    ) -> Callable[[State, Any], State]:
        """The machine loop over `kernels` (`abir.backends.traced`) as a traceable function of
        the state and the most loop iterations to run (`Backend.run_in_launches`); with
        `scatter_free`, traced without scatters where abir chooses (`OneKernelWherePossible`)."""
        build = _JaxLoop(self, kernels, halt_index, stack_keys).function(self.execution)

        def traced(state: State, iterations: Any) -> State:
            # read by what the kernels call while they are traced (`stack_scatter`, `call_opaque`)
            self.scatter_free = scatter_free
            try:
                return build(state, iterations)
            finally:
                self.scatter_free = False

        return traced

    # ----- the reference's interface (`BackendProtocol`) ---------------------------------------
    def any(self, t: Any, name: str | None = None) -> Any:
        return jnp.any(t)

    def cond(self, pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any], name: str | None = None) -> Any:
        """`lax.cond`: both branches traced, one run."""
        return lax.cond(pred, true_fn, false_fn)

    def run_on_dummies(self, primitive_callable: Callable[..., Any], input_types: Sequence[Any]) -> Any:
        """Abstract evaluation with `jax.eval_shape`: returns `jax.ShapeDtypeStruct` leaves."""

        def spec(t: TensorType) -> jax.ShapeDtypeStruct:
            return jax.ShapeDtypeStruct(tuple(t.shape), np.dtype(t.dtype))

        return jax.eval_shape(primitive_callable, *(map_tensor_types(spec, t) for t in input_types))

    def switch_case(
        self, branch_selector: Any, branch_callables: Sequence[Callable[..., Any]], *operands: Any, name: str | None = None
    ) -> Any:
        """`lax.switch` (an index out of range is clamped into it)."""
        return lax.switch(branch_selector, list(branch_callables), *operands)

    def while_loop(
        self, cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Sequence[Any], name: str | None = None
    ) -> Any:
        """`lax.while_loop` over the tuple of `loop_vars`."""
        final = lax.while_loop(lambda vs: cond(*vs), lambda vs: tuple(body(*vs)), tuple(loop_vars))
        return list(final)


ONE_HOT_STACK_MAX = 4096
"""`stack_scatter` writes a stack of at most this many elements with a one-hot select over the
whole stack (no index concatenation, no broadcast of the value, no scatter: one kernel where
the scatter takes three; the scatter costs O(B), the select O(stack)). Measured on one core,
steady, threshold 0 -> 4096: NUTS B=64 (its int stacks are 768 elements, its vector stacks
7,680) 21.7 -> 20.9 ms (selecting the vector stacks too: 21.5 ms); fib B=64 (1,280) 4.42 ->
4.35 ms; collatz B=1024 (4,096) 0.640 -> 0.625 ms; fib B=1024 (20,480) 22.4 ms, selecting
there: 24.4 ms."""

REDUCTION_CHUNK = 32
CHUNKED_REDUCTION_MAX = 192
"""XLA's CPU compiler splits a reduction of more than `REDUCTION_CHUNK` elements into a tree of
three kernels, while reductions of up to that many, combined elementwise, fuse into one kernel
for up to `CHUNKED_REDUCTION_MAX` elements (six chunks; beyond that they split again). The
machine loop reduces its [B] masks and program counters several times per sweep ("any member
here?", the smallest pc), each a kernel launch, so batches up to that size reduce by chunks
(NUTS B=64, one core: 22.8 -> 22.0 ms; recursive Fibonacci B=64: 5.2 -> 4.5 ms)."""


def _batch_reduce(x: Any, reduce: Callable[[Any], Any], combine: Callable[[Any, Any], Any]) -> Any:
    """`reduce(x)` of a [B] array, by chunks of `REDUCTION_CHUNK` when B allows (see above)."""
    size = x.shape[0]
    if size <= REDUCTION_CHUNK or size > CHUNKED_REDUCTION_MAX:
        return reduce(x)
    parts = [reduce(x[start : start + REDUCTION_CHUNK]) for start in range(0, size, REDUCTION_CHUNK)]
    return functools.reduce(combine, parts)


def batch_any(x: Any) -> Any:
    return _batch_reduce(x, jnp.any, jnp.logical_or)


def batch_min(x: Any) -> Any:
    return _batch_reduce(x, jnp.min, jnp.minimum)


def batch_sum(x: Any) -> Any:
    return _batch_reduce(x, jnp.sum, jnp.add)


@functools.lru_cache(maxsize=16)
def _iterations_on_device(iterations: int) -> jax.Array:
    """A launch's iteration limit as a device scalar, made once per value: a NumPy scalar
    argument is transferred on every call (about 3 us of a launch). (`jnp.int32(n)` would
    compile a conversion first.)"""
    return jax.device_put(np.int32(iterations))


def _with_status(loop: Callable[[State, Any], State], halt_index: int, flags: Mapping[str, int]) -> Callable[[State, Any], State]:
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


ONE_KERNEL_MAX_STATE_BYTES = 1 << 20
"""A standalone run whose state takes at most this many bytes, or whose batch has at most
`ONE_KERNEL_MAX_BATCH` members, compiles its loop as one kernel where XLA can
(`OneKernelWherePossible`)."""
ONE_KERNEL_MAX_BATCH = 2048
"""See `ONE_KERNEL_MAX_STATE_BYTES`. One kernel saves a fixed cost per kernel call and sweep but
writes the stacks column by column, work that grows with the batch: recursive Fibonacci (0.4 KB
of state per member) loses from about 2,048 members on (B=2048 27.2 -> 28.0 ms, B=4096 53.1 ->
56.0 ms, B=16384 214 -> 231 ms), Collatz (no stack) wins at every size, NUTS (4 KB per member)
up to B=2048 (256: 43.9 -> 42.6 ms, 1024: 182 -> 174 ms, 2048: 378 -> 361 ms) and ties at 4096
(802 -> 789 ms); one core, steady, against the sequence of kernels. (Wide elementwise work can
lose at any size, which no size limit tells: `np.tanh` on 100 numbers per member, 0.53 -> 0.68
ms at B=64; README, "One kernel".)"""
NOT_IN_ONE_KERNEL = frozenset({
    "sort", "custom_call", "ffi_call", "pure_callback", "io_callback", "debug_callback",
    "lu", "cholesky", "eigh", "eig", "qr", "svd", "schur", "hessenberg", "tridiagonal", "tridiagonal_solve",
    "householder_product", "geqrf", "geqp3", "triangular_solve", "lu_pivots_to_permutation", "fft",
})  # fmt: skip
"""Primitives XLA's CPU compiler cannot emit into one kernel (its `IrEmitter`), besides the
scatters (`one_kernel_possible`): sorts, calls out of the kernel, and the linear algebra and
FFTs that XLA lowers to library calls."""
LOOP_COMPILER_OPTIONS = {"xla_cpu_prefer_vector_width": 512}
"""XLA options for a standalone run's loop: 512-bit vectors where the CPU has them (XLA prefers
256 bits by default, which spares some Intel CPUs a lower clock under AVX-512; elsewhere LLVM
keeps the widths the CPU has). Measured on this machine's AVX-512 core, steady: recursive fib
B=64 (one kernel) 1.13 -> 0.85 ms, B=4096 (kernel sequence) 61.1 -> 52.4 ms; NUTS B=64 10.95 ->
10.4 ms, B=1024 192 -> 183 ms."""
ONE_KERNEL_COMPILER_OPTIONS = {**LOOP_COMPILER_OPTIONS, "xla_cpu_experimental_ynn_fusion_type": ""}
"""Also without YNNPACK's fusions of dot products (custom fusions, which one kernel cannot call)."""


class JitWithOptions:
    """`jax.jit(fn, compiler_options=options)`, or plain `jax.jit(fn)` on a jax whose `jit` takes
    no options, or once the first call finds an option this jaxlib does not have (its compile
    error names it "No such compile option")."""

    def __init__(self, fn: Callable[..., Any], options: Mapping[str, Any]):
        self.fn = fn
        try:
            self.jitted = jax.jit(fn, compiler_options=dict(options))
        except TypeError:
            self.jitted = jax.jit(fn)

    def __call__(self, *args: Any) -> Any:
        try:
            return self.jitted(*args)
        except Exception as error:
            if "No such compile option" not in str(error):
                raise
            self.jitted = jax.jit(self.fn)
            return self.jitted(*args)


def _state_bytes(state: State) -> int:
    """The bytes of a state's arrays."""
    return sum(leaf.size * np.dtype(leaf.dtype).itemsize for leaf in jax.tree_util.tree_leaves(state))


def one_kernel_possible(jaxpr: Any) -> bool:
    """Whether XLA's CPU compiler can emit `jaxpr` as one kernel: no scatter, sort, custom
    call or host callback in it or in any nested jaxpr."""
    from jax.extend.core import jaxprs_in_params

    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name.startswith("scatter") or name in NOT_IN_ONE_KERNEL:
            return False
        if not all(one_kernel_possible(getattr(sub, "jaxpr", sub)) for sub in jaxprs_in_params(eqn.params)):
            return False
    return True


class OneKernelWherePossible:
    """A standalone run's machine loop `(state, iterations) -> state`, jitted, and compiled as
    one kernel where XLA's CPU compiler can do it.

    XLA's CPU runtime runs a compiled program as a sequence of kernels, a call each (about
    0.1 us: a sweep of fib's 8 blocks is about 43 of them). A call tagged `xla_cpu_small_call`
    (the tag XLA's own `SmallWhileLoopHoistingPass` gives a while loop of under 1 KB) is emitted
    as one kernel instead, the loop and its conditionals inlined, by XLA's `IrEmitter`, which
    cannot emit scatters, sorts, custom calls or custom fusions. So `loop(scatter_free=True)`
    is traced first (stack writes, compaction and materialized helper results without
    scatters), and tagged when its jaxpr has none of these (`one_kernel_possible`; dot products
    then leave YNNPACK, `ONE_KERNEL_COMPILER_OPTIONS`) and its state takes at most
    `ONE_KERNEL_MAX_STATE_BYTES` or its batch at most `ONE_KERNEL_MAX_BATCH` members (any size
    with `any_size`); otherwise, or when the tagged compilation fails (XLA refuses it as
    unimplemented, or an older jax lacks the option or the tag), the run uses
    `loop(scatter_free=False)` as a sequence of kernels, which raises any error of the program
    itself. Decided once per state signature.

    Measured on one core, steady, against the sequence of kernels: recursive fib (`bench/run.py`'s
    inputs) B=64 3.0 -> 1.14 ms, B=1024 13.7 -> 13.2 ms; Collatz B=64 152 -> 120 us, B=1024
    692 -> 375 us, B=4096 2.4 -> 1.2 ms, B=16384 9.0 -> 4.2 ms; NUTS (`bench/nuts.py`) B=64
    15.4 -> 11.3 ms, B=1024 182 -> 174 ms; the limits' docstrings give the sizes that lose.
    First calls compile faster: fib B=64 1.36 -> 0.70 s, NUTS B=64 4.1 -> 2.9 s, B=1024 3.9-4.3
    -> 3.3-3.5 s."""

    def __init__(self, loop: Callable[[bool], Callable[[State, Any], State]], any_size: bool = False):
        self.loop = loop
        self.any_size = any_size
        self.scatter_free_loop = jax.jit(loop(True))
        self.fused = JitWithOptions(self._tagged, ONE_KERNEL_COMPILER_OPTIONS)
        self._plain: Callable[[State, Any], State] | None = None
        self.chosen: dict[Any, Callable[[State, Any], State]] = {}

    @property
    def plain(self) -> Callable[[State, Any], State]:
        """The loop with scatters, as a sequence of kernels (traced when first needed)."""
        if self._plain is None:
            self._plain = JitWithOptions(self.loop(False), LOOP_COMPILER_OPTIONS)
        return self._plain

    def _tagged(self, state: State, iterations: Any) -> State:
        from jax.experimental.xla_metadata import set_xla_metadata

        # attached to the call op producing the results: not inlined, emitted as one kernel
        return set_xla_metadata(  # type: ignore[no-any-return]
            self.scatter_free_loop(state, iterations), xla_cpu_small_call="true", inlineable="false"
        )

    def __call__(self, state: State, iterations: Any) -> State:
        leaves, tree = jax.tree_util.tree_flatten(state)
        signature = (tree, *((leaf.shape, leaf.dtype) for leaf in leaves))
        run = self.chosen.get(signature)
        if run is None:
            return self._first_call(signature, state, iterations)
        return run(state, iterations)

    def _first_call(self, signature: Any, state: State, iterations: Any) -> State:
        small = (
            self.any_size
            or _state_bytes(state) <= ONE_KERNEL_MAX_STATE_BYTES
            or state["pc"].shape[0] <= ONE_KERNEL_MAX_BATCH
        )
        if small and one_kernel_possible(self.scatter_free_loop.trace(state, iterations).jaxpr):
            try:
                result = self.fused(state, iterations)
            except Exception:  # XLA refuses the one kernel (or this jax cannot ask for it): kernels
                pass
            else:
                self.chosen[signature] = self.fused
                return result
        run = self.chosen[signature] = self.plain
        return run(state, iterations)


STAGED_ERRORS_KEPT = 16
"""How many of the latest errors raised by staged runs `staged_error` can return."""

_staged_errors: collections.deque[AbirError] = collections.deque(maxlen=STAGED_ERRORS_KEPT)


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


class _ShardTrace:
    """A shard_map body being traced (`JaxBackend.run_sharded`): its number of members, the
    counters of its run, when collected, and the error flags of its runs (outputs of the body)
    with the checks that raise abir's errors from them."""

    def __init__(self, members: int):
        self.members = members
        self.counters: dict[str, Any] | None = None
        self.flags: list[dict[str, Any]] = []
        self.checks: list[_ShardCheck] = []


class _ShardCheck:
    """How to check one run's error flags once the sharded call returns them (per member of
    the whole batch): `check` raises abir's error; `normal` is each flag's value without one."""

    def __init__(self, check: Callable[[dict[str, np.ndarray]], None], normal: Mapping[str, int]):
        self.check = check
        self.normal = dict(normal)

    def raise_if_failed(self, values: Mapping[str, Any]) -> None:
        """abir's own error if some member's flag in `values` (the whole batch's) is not normal."""
        host = {key: np.asarray(value) for key, value in values.items()}
        if any(np.any(value != self.normal.get(key, 0)) for key, value in host.items()):
            self.check(host)


def _stacked_counters(counters: dict[str, Any] | None) -> dict[str, Any] | None:
    """A shard's counters as shard_map outputs split along the batch axis: per-member counters
    as they are, the others with a leading axis of one row per shard."""
    if counters is None:
        return None
    return {key: value if key.startswith("member_") else value[None] for key, value in counters.items() if key != "ran"}


def _shard_stats(counters: dict[str, Any], shards: int) -> list[RunStats]:
    """One `RunStats` per shard from the counters of all shards (`_stacked_counters`)."""
    host = {key: np.asarray(value) for key, value in counters.items()}
    members = {key: np.split(host[key], shards) for key in ("member_steps", "member_sweeps")}
    return [
        run_stats({
            "block_steps": host["block_steps"][i], "block_members": host["block_members"][i],
            "sweeps": host["sweeps"][i], **{key: parts[i] for key, parts in members.items()},
        })  # fmt: skip
        for i in range(shards)
    ]


class _JaxLoop(TracedLoop):
    """The machine loop on JAX: `lax.while_loop`, `lax.cond` and `lax.switch`, reductions by
    chunks (`batch_any`), in-place row updates (`dynamic_update_slice`); the sweep traces each
    kernel's `split` once (`jax.jit`) and runs a costly block compacted when few members stand
    there (`_compact_rows`)."""

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
        one loop over the columns (`_write_column_by_column`)."""
        if not self.backend.scatter_free or any(rows is None for requests in writes.values() for rows, _ in requests):
            return super().apply_writes(stacks, writes)
        return _write_column_by_column(stacks, writes)

    def traced_split(self, kernel: Any) -> Callable[..., Any]:
        """Jitted, so that the work count (`_compact_rows`) and every sweep step reuse one trace."""
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
        """With at most `_compact_rows` (C) members here, a costly block runs on those members'
        rows only (`_compact_run`): one `lax.switch` of skipping, the compacted run and the run on
        every row, by the number of members here."""
        rows = _compact_rows(kernel, template, self.stack_keys, split)
        if rows is None:
            return super().block_run(kernel, split, template, written, pushed, run, skip)

        def run_compact_gathered(regs: State, stacks: State, here: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
            members, slots = _compact_slots(here, rows)
            values, writes = _compact_run(kernel, written, regs, stacks, members, slots)
            updated = self.apply_writes(stacks, _full_batch_requests(stacks, writes, slots, rows))
            return values, tuple(updated[key] for key in pushed)

        def run_compact(regs: State, stacks: State, here: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
            members = _compact_members(here, rows)
            values, writes = _compact_run(kernel, written, regs, stacks, members)
            updated = apply_writes(stacks, writes, lambda stack, at, value: _scatter_columns(stack, at, members, value))
            return values, tuple(updated[key] for key in pushed)

        def choose(regs: State, stacks: State, here: Any, anyone_here: bool) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
            count = batch_sum(here.astype(jnp.int32))
            branch = jnp.where(count <= rows, 1, 2)
            if not anyone_here:
                branch = jnp.where(count == 0, 0, branch)
            compact = run_compact_gathered if self.backend.scatter_free else run_compact
            return lax.switch(branch, [skip, compact, run], regs, stacks, here)  # type: ignore[no-any-return]

        return choose


COMPACT_MIN_ROW_WORK = 1000
"""A block whose work per member (`_row_work`) is at least this runs compacted
(`_compact_run`) when few members stand there. Measured on NUTS (examples/nuts.py, one core,
steady), first when the members were found by sorting B flags: only its momentum draw
(Threefry + Box-Muller, 2,851 per row) gained, 46.0 -> 35.6 ms at B=64 and 651 -> 405 ms at
B=1024, and compacting the blocks of more than 200 made both sizes slower. Since the members
are found by a prefix sum (`_compact_members`), compacting also the blocks of more than 250
(the leapfrog, two tree merges) takes B=1024 from 199-202 to 185-188 ms and leaves B=64 as it
was, but each compacted block adds about 0.4 s to the first call's XLA compilation (3.0 s with
no block compacted, 3.5 s with the momentum draw, 4.9 s with four blocks): not worth it.
Running a compacted block in chunks of C members instead of keeping the full-batch path
compiles no faster and is slower where many members stand (the leapfrog: B=64 17 -> 30 ms)."""
COMPACT_FRACTION = 8
"""A compacted block runs on B // COMPACT_FRACTION rows (NUTS, one core: B/4, B/8, B/16, B/32
took 442, 404, 421, 558 ms at B=1024, and B/4, B/8, B/16 37.7, 36.5, 37.3 ms at B=64)."""


def _compact_rows(
    kernel: Kernel, template: State, stack_keys: Collection[str], split: Callable[..., Any] | None = None
) -> int | None:
    """The rows a compacted run of `kernel` uses, or None when it always runs on the batch.
    `split` stands for `kernel.split`; `stack_keys` are the state's stacks."""
    batch = int(template["pc"].shape[0])
    rows = max(1, batch // COMPACT_FRACTION)
    if rows >= batch or not splittable([kernel]) or writes_whole_stacks(kernel):
        return None
    if _row_work(split or kernel.split, template, stack_keys) < COMPACT_MIN_ROW_WORK:  # type: ignore[attr-defined]
        return None
    return rows


def _row_work(split: Callable[..., Any], template: State, stack_keys: Collection[str]) -> float:
    """`jaxpr_work` of a kernel's `split` per member (traced on the run's own shapes, so opaque
    helpers see the arrays they get in the run)."""
    specs = {key: jax.ShapeDtypeStruct(value.shape, value.dtype) for key, value in template.items()}
    regs, stacks = separate_stacks(specs, stack_keys)
    jaxpr = jax.make_jaxpr(split)(regs, stacks).jaxpr
    return jaxpr_work(jaxpr) / int(template["pc"].shape[0])


MATERIALIZE_MIN_ROW_WORK = 1000
"""A batch-aware helper doing at least this many element operations per member (`jaxpr_work`)
has its results written to buffers of their own. XLA's CPU fusion otherwise recomputes an
elementwise producer inside each of its consumers: NUTS's momentum draw (`abir.random.normal`,
Threefry and Box-Muller, about 2,850 operations per member) was computed three times in its
block, once per register it is written to. Measured on one core, steady: NUTS B=64 20.2 ->
18.7 ms; its uniform draws (about 100 operations) gain nothing."""


def _helper_row_work(fn: Callable[..., Any], arrays: Sequence[Any]) -> float:
    """`jaxpr_work` of `fn` on `arrays` per member (rows of the arguments' leading axis)."""
    rows = max((int(a.shape[0]) for a in arrays if a.ndim), default=1)
    return jaxpr_work(jax.make_jaxpr(fn)(*arrays).jaxpr) / max(rows, 1)


def _write_column_by_column(stacks: State, writes: Writes) -> State:
    """`stacks` after the row requests `writes` (see `apply_writes`), all in one loop over the
    columns, each request in order an update of one element (rows out of range write nothing):
    a scatter without XLA's scatter, which a loop compiled as one kernel cannot contain
    (`OneKernelWherePossible`). There a loop iteration costs a few nanoseconds; rewriting the
    whole stack by a one-hot select instead made recursive fib at B=64 1.48 ms instead of 1.19
    ms, NUTS 12.5 ms instead of 11.5 ms (one loop per request; one per block: 1.14-1.16 and
    11.3 ms)."""
    keys = [key for key, requests in writes.items() if requests]
    if not keys:
        return dict(stacks)
    columns = stacks[keys[0]].shape[1]
    requests = []
    for key in keys:
        stack = stacks[key]
        for rows, value in writes[key]:
            rows = jnp.broadcast_to(jnp.asarray(rows, dtype=jnp.int32), (columns,))
            requests.append((keys.index(key), rows, jnp.broadcast_to(jnp.asarray(value, dtype=stack.dtype), stack.shape[1:])))

    def set_column(column: Any, current: tuple[Any, ...]) -> tuple[Any, ...]:
        current = list(current)
        for k, rows, value in requests:
            current[k] = _set_element(current[k], rows[column], column, value[column])
        return tuple(current)

    written = lax.fori_loop(jnp.int32(0), jnp.int32(columns), set_column, tuple(stacks[key] for key in keys))
    return {**stacks, **dict(zip(keys, written, strict=True))}


def _set_element(stack: Any, row: Any, column: Any, value: Any) -> Any:
    """`stack` with `stack[row, column] = value` when `row` is in range."""
    inside = (row >= 0) & (row < stack.shape[0])
    at = (jnp.where(inside, row, 0).astype(jnp.int32), column, *((jnp.int32(0),) * (stack.ndim - 2)))
    old = lax.dynamic_slice(stack, at, (1, 1, *stack.shape[2:]))
    return lax.dynamic_update_slice(stack, jnp.where(inside, value[None, None], old), at)


def _behind_conditional(value: Any) -> Any:
    """`value` as the result of a conditional, which XLA's fusion does not see through, so its
    consumers read it from a buffer instead of each recomputing it: the scatter-free
    `_materialized` (NUTS B=64 in one kernel: 23.1 -> 12.6 ms). The predicate always holds
    (`x == x or x != x`) without XLA proving it for floats; the other branch, never taken,
    returns zeros (with two identical branches XLA removes the conditional). Should XLA fold
    the predicate, the value is only no longer materialized."""
    if not isinstance(value, jax.Array) or value.ndim == 0:
        return value
    first = value.reshape(-1)[0]
    return lax.cond((first == first) | (first != first), lambda v: v, jnp.zeros_like, value)


def _materialized(value: Any) -> Any:
    """`value` copied into a buffer of its own by a scatter of its rows, which XLA never fuses
    into the consumers (an optimization barrier does not stop that fusion on the CPU)."""
    if not isinstance(value, jax.Array) or value.ndim == 0:
        return value
    rows = jnp.arange(value.shape[0])
    return jnp.zeros_like(value).at[rows].set(value, unique_indices=True, indices_are_sorted=True)


def _compact_members(here: Any, rows: int) -> Any:
    """The batch rows of the (at most `rows`) members `here`, in order, then B (out of range).
    (`nonzero` is a prefix sum and a scatter: 0.6 us at B=64 where a stable argsort took 4.)"""
    return jnp.nonzero(here, size=rows, fill_value=here.shape[0])[0].astype(jnp.int32)


def _compact_slots(here: Any, rows: int) -> tuple[Any, Any]:
    """(`_compact_members`, each batch row's index among them or -1) without a scatter: member
    j is the first row whose prefix count of members reaches j + 1, found by a binary search of
    the prefix counts (`searchsorted`'s "scan": log2(B) rounds of `rows` lookups). Counting, for
    each j, the rows whose prefix count is at most j (a [rows, B] comparison) made NUTS at B=1024
    in one kernel 228 ms instead of 174 ms (one core, steady; B=64 10.5 ms either way)."""
    count = jnp.cumsum(here.astype(jnp.int32))
    wanted = jnp.arange(1, rows + 1, dtype=jnp.int32)
    members = jnp.searchsorted(count, wanted, side="left", method="scan").astype(jnp.int32)
    slots = jnp.where(here & (count <= rows), count - 1, -1)
    return members, slots


def _full_batch_requests(stacks: State, writes: Writes, slots: Any, count: int) -> Writes:
    """The write requests `writes` of a compacted run (over `count` compact rows) as requests
    over the whole batch, by the batch rows' `slots` (`_compact_slots`): the rows of members not
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


def _compact_run(
    kernel: Any, written: Sequence[str], regs: State, stacks: State, members: Any, slots: Any = None
) -> tuple[tuple[Any, ...], dict[str, list[tuple[Any, Any]]]]:
    """`kernel.split` run on the rows `members` (`_compact_members`) only: their registers and
    stack columns are gathered into a batch of len(members) rows (padding reads the last row;
    its results are dropped), so the block does that many rows of work instead of B. Returns the
    `written` registers over the full batch (the members' rows scattered back, or gathered
    back by their `slots` when given: `_compact_slots`) and the stack write requests over the
    compact rows (for `_scatter_columns` with `members`, or `_full_batch_requests`)."""
    batch = regs["pc"].shape[0]
    rows = members.shape[0]
    source = jnp.minimum(members, batch - 1)
    compact = LazyRegisters(lambda key: regs[key][source])
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


def _scatter_columns(stack: Any, rows: Any, columns: Any, value: Any) -> Any:
    """`stack[rows[i], columns[i]] = value[i]`; out-of-range rows or columns are dropped."""
    count = columns.shape[0]
    rows = jnp.broadcast_to(jnp.asarray(rows, dtype=jnp.int32), (count,))
    value = jnp.broadcast_to(jnp.asarray(value, dtype=stack.dtype), (count, *stack.shape[2:]))
    return stack.at[rows, columns].set(value, mode="drop")


TRANSCENDENTAL_PRIMITIVES = frozenset(
    {
        *("exp", "exp2", "log", "log1p", "expm1", "pow", "sqrt", "rsqrt", "cbrt", "logistic"),
        *("sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh"),
        *("erf", "erfc", "erf_inv", "lgamma", "digamma"),
    }
)
"""Primitives counted as `TRANSCENDENTAL_COST` element operations each (XLA CPU evaluates them
in software, about as slow as that many adds)."""
TRANSCENDENTAL_COST = 10
FREE_PRIMITIVES = frozenset(
    {"reshape", "squeeze", "broadcast_in_dim", "expand_dims", "convert_element_type", "copy", "slice"}
)


def jaxpr_work(jaxpr: Any) -> int:
    """A rough count of the element operations `jaxpr` performs: each operation's output
    elements (a matrix product's multiply-adds; `TRANSCENDENTAL_COST` per element of a
    transcendental function; reshapes and casts free), through nested jaxprs (the costlier
    branch of a conditional, one iteration of a loop)."""
    from jax.extend.core import jaxprs_in_params

    total = 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        inner = [jaxpr_work(getattr(sub, "jaxpr", sub)) for sub in jaxprs_in_params(eqn.params)]
        if inner:
            total += max(inner) if name == "cond" else sum(inner)
            continue
        size = sum(int(np.prod(v.aval.shape)) for v in eqn.outvars if hasattr(v.aval, "shape"))
        if name in FREE_PRIMITIVES:
            continue
        if name == "dot_general":
            (lhs_contract, _), _ = eqn.params["dimension_numbers"]
            lhs_shape = eqn.invars[0].aval.shape
            total += size * int(np.prod([lhs_shape[d] for d in lhs_contract]))
        elif name in TRANSCENDENTAL_PRIMITIVES:
            total += TRANSCENDENTAL_COST * size
        else:
            total += size
    return total
