"""The JAX backend: the whole machine is one `jax.jit`-compiled XLA program.

`run` stages `while min(pc) < halt: state = switch(min(pc), kernels)(state)` as one
`lax.while_loop` around one `lax.switch`, so a run makes no host round trip per step. The
compiled program is cached per `cache_key` (program, signature, batch size) on the backend
instance, or in a dict the caller supplies, and reused across calls.

Importing this module enables `jax_enable_x64`, so int64/float64 behave as in NumPy.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402  (after enabling x64)
from jax import lax  # noqa: E402

from abir import prims  # noqa: E402
from abir.backends.base import (  # noqa: E402
    Backend,
    Kernel,
    LazyRegisters,
    RegisterLayout,
    Scheduler,
    State,
    is_stack_key,
    smallest_live_block,
    splittable,
)
from abir.types import TensorType  # noqa: E402


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


# Compiled runs keyed by (program, signature, batch size, ...): shared by all instances.
SHARED_CODE_CACHE: dict[Any, Any] = {}


class JaxBackend(Backend):
    """jax.numpy arrays; `run` is one jitted `lax.while_loop` over `lax.switch`."""

    name = "jax"

    def __init__(
        self, code_cache: MutableMapping[Any, Any] | None = None, scheduler: Scheduler = smallest_live_block
    ):
        """`code_cache` maps a run's `cache_key` to its jitted function; pass a dict to share
        compiled code between backend instances (default: one cache shared by every instance, so a new backend object per call does not recompile).
        `scheduler(backend, pc)` picks the next block; it must be traceable (jnp, not NumPy)."""
        self.scheduler = scheduler
        self.code_cache: MutableMapping[Any, Any] = SHARED_CODE_CACHE if code_cache is None else code_cache
        self.trace_count = 0  # how many times a run loop was traced (i.e. compiled)

    # ----- arrays -------------------------------------------------------------------------
    def asarray(self, value: Any, dtype: Any = None) -> Any:
        return jnp.asarray(value, dtype=None if dtype is None else np.dtype(dtype))

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def is_native(self, value: Any) -> bool:
        return isinstance(value, jax.Array)

    def zeros(self, shape: Sequence[int], dtype: Any) -> Any:
        return jnp.zeros(tuple(shape), dtype=np.dtype(dtype))

    def full(self, shape: Sequence[int], value: Any, dtype: Any) -> Any:
        return jnp.full(tuple(shape), value, dtype=np.dtype(dtype))

    def arange(self, n: int, dtype: Any = np.int32) -> Any:
        return jnp.arange(n, dtype=np.dtype(dtype))

    # ----- primitives ---------------------------------------------------------------------
    def builtin_prim(self, name: str, args: Sequence[Any], result_dtype: Any) -> Any:
        """NumPy semantics: operands are cast to the dtype NumPy computes in (the result dtype,
        or the common dtype for comparisons and logical ops), then the result to `result_dtype`."""
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
        else:
            result = getattr(jnp, name)(*operands)
        return result if result_dtype is None else result.astype(result_dtype)

    @staticmethod
    def _cast_operands(name: str, args: Sequence[Any], result_dtype: np.dtype | None) -> list[Any]:
        """The operands as jnp arrays of the dtype NumPy's ufunc loop would use."""
        if name in prims.COMMON_DTYPE_PRIMS or result_dtype is None:
            dt = np.result_type(*(dtype_of(a) for a in args))
        else:
            dt = result_dtype
        return [jnp.asarray(a, dtype=dt) for a in args]

    def call_opaque(self, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
        return fn(*(jnp.asarray(a) for a in args))

    # ----- masked state updates -------------------------------------------------------------
    def where(self, mask: Any, new: Any, old: Any) -> Any:
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
        loop the stack is a loop-carried buffer, so XLA updates it in place (O(B) per push)."""
        batch = stack.shape[1]
        rows = jnp.broadcast_to(jnp.asarray(rows, dtype=jnp.int32), (batch,))
        value = jnp.broadcast_to(jnp.asarray(value, dtype=stack.dtype), stack.shape[1:])
        return stack.at[rows, jnp.arange(batch)].set(value, mode="drop", unique_indices=True)

    def stack_read(self, stack: Any, index: Any) -> Any:
        depth, batch = stack.shape[0], stack.shape[1]
        rows = jnp.clip(jnp.asarray(index, dtype=jnp.int32), 0, depth - 1)
        return stack[rows, jnp.arange(batch)]

    def reduce_min(self, value: Any) -> Any:
        return jnp.min(value)

    # ----- running --------------------------------------------------------------------------
    def switch_case(self, index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
        return lax.switch(index, list(branches), *operands)

    def while_loop(self, cond: Callable[[Any], Any], body: Callable[[Any], Any], state: Any) -> Any:
        return lax.while_loop(cond, body, state)

    def run(self, kernels: Sequence[Kernel], state: State, halt_index: int, cache_key: Any) -> State:
        """One jitted `lax.while_loop`, compiled once per `cache_key` and state signature.

        Without a `cache_key` the compiled code is still reused for the same `kernels` list
        (the machine builds it once per program and backend), kept alive by the cache."""
        state = {key: jnp.asarray(value) for key, value in state.items()}
        run = self.compiled_run(
            self.code_cache, kernels, halt_index, cache_key, lambda ks, halt: jax.jit(self._loop(ks, halt))
        )
        return dict(run(state))

    def _loop(self, kernels: tuple[Kernel, ...], halt_index: int) -> Callable[[State], State]:
        """The machine loop over `kernels` as a traceable function of the state."""
        if splittable(kernels):
            return self._split_loop(kernels, halt_index)

        def loop(state: State) -> State:
            self.trace_count += 1  # runs only while tracing
            branches = [_conforming(kernel, state) for kernel in kernels]

            def cond(s: State) -> Any:
                return self.next_block(s["pc"]) < halt_index

            def body(s: State) -> State:
                return lax.switch(self.next_block(s["pc"]), branches, s)

            return lax.while_loop(cond, body, state)

        return loop

    def _split_loop(self, kernels: tuple[Kernel, ...], halt_index: int) -> Callable[[State], State]:
        """The loop over split kernels: the carry is (next block, register groups, stacks).
        Neither the registers nor the stacks pass through `lax.switch`: the branches read them
        and return only the block's register writes (write slots, see `RegisterLayout`) and
        padded stack write requests; after the switch each slot is one in-place
        `dynamic_update_slice` into its group and each request one scatter into its stack, so
        a step moves what its block writes, not the whole state. The next block is computed
        once per step."""

        def loop(state: State) -> State:
            self.trace_count += 1  # runs only while tracing
            regs = {key: value for key, value in state.items() if not is_stack_key(key)}
            stacks = {key: value for key, value in state.items() if is_stack_key(key)}
            counts = {key: max(kernel.writes.get(key, 0) for kernel in kernels) for key in stacks}  # type: ignore[attr-defined]
            counts = {key: n for key, n in counts.items() if n}
            layout = RegisterLayout.build(
                kernels, {key: (value.dtype, value.shape) for key, value in regs.items()}
            )
            groups = tuple(
                jnp.stack([*(regs[key] for key in keys), jnp.zeros_like(regs[keys[0]])])
                for keys in layout.groups
            )
            targets = tuple(jnp.asarray(table) for table in layout.targets)
            branches = [
                _split_branch(kernel, layout, block, regs, stacks, counts)
                for block, kernel in enumerate(kernels)
            ]
            pc_group, pc_row = layout.place["pc"]

            def cond(carry: tuple[Any, Any, State]) -> Any:
                return carry[0] < halt_index

            def body(carry: tuple[Any, Any, State]) -> tuple[Any, Any, State]:
                block, groups, stacks = carry
                slots, writes = lax.switch(block, branches, groups, stacks)
                groups = list(groups)
                for g, values in enumerate(slots):
                    rows = targets[g][block]
                    for j, value in enumerate(values):
                        groups[g] = lax.dynamic_update_index_in_dim(groups[g], value, rows[j], 0)
                stacks = dict(stacks)
                for key, requests in writes.items():
                    for rows, value in requests:
                        stacks[key] = self.stack_scatter(stacks[key], rows, value)
                return self.next_block(groups[pc_group][pc_row]).astype(jnp.int32), tuple(groups), stacks

            start = self.next_block(regs["pc"]).astype(jnp.int32)
            _, groups, stacks = lax.while_loop(cond, body, (start, groups, stacks))
            out = {key: groups[g][row] for key, (g, row) in layout.place.items()}
            return {**out, **stacks}

        return loop

    # ----- type inference helpers -----------------------------------------------------------
    def run_on_dummies(self, fn: Callable[..., Any], input_types: Sequence[TensorType]) -> Any:
        """Abstract evaluation with `jax.eval_shape`: returns `jax.ShapeDtypeStruct` leaves."""
        specs = [jax.ShapeDtypeStruct(tuple(t.shape), np.dtype(t.dtype)) for t in input_types]
        return jax.eval_shape(fn, *specs)


def _conforming(kernel: Kernel, template: State) -> Kernel:
    """`kernel` made to return exactly the keys, dtypes and shapes of `template` (as
    `lax.switch` requires): missing keys keep their value, new values are cast back."""

    def branch(state: State) -> State:
        out = kernel(dict(state))
        result = {}
        for key, like in template.items():
            value = jnp.asarray(out.get(key, state[key]), dtype=like.dtype)
            result[key] = jnp.broadcast_to(value, like.shape)
        return result

    return branch


def _split_branch(
    kernel: Any, layout: RegisterLayout, block: int, regs: State, stacks: State, counts: dict[str, int]
) -> Callable[..., Any]:
    """A `lax.switch` branch running split `kernel` on the registers unpacked from the groups:
    it returns, per group, `layout.slots[g]` values (the registers the block writes, in slot
    order, then zeros), and `counts[key]` write requests per stack (padded with requests that
    write nothing: rows = D)."""
    written = layout.written[block]

    def branch(groups: Any, stacks_in: State) -> tuple[Any, dict[str, list[tuple[Any, Any]]]]:
        current = LazyRegisters(lambda key: groups[layout.place[key][0]][layout.place[key][1]])
        out, writes = kernel.split(current, stacks_in)
        declared = {key for keys in written for key in keys}
        for key in out:
            assert key in declared or current.unchanged(key), f"{kernel.__name__} wrote {key} undeclared"
        slots = []
        for g, keys in enumerate(written):
            like = regs[layout.groups[g][0]]
            values = [jnp.broadcast_to(jnp.asarray(out[key], dtype=like.dtype), like.shape) for key in keys]
            values += [jnp.zeros(like.shape, like.dtype)] * (layout.slots[g] - len(keys))
            slots.append(tuple(values))
        padded = {}
        for key, count in counts.items():
            stack = stacks[key]
            depth, batch = stack.shape[0], stack.shape[1]
            requests = [
                (
                    jnp.broadcast_to(jnp.asarray(rows, dtype=jnp.int32), (batch,)),
                    jnp.broadcast_to(jnp.asarray(value, dtype=stack.dtype), stack.shape[1:]),
                )
                for rows, value in writes.get(key, [])
            ]
            assert len(requests) <= count, f"{kernel.__name__} made more write requests to {key} than planned"
            while len(requests) < count:
                requests.append(
                    (jnp.full((batch,), depth, jnp.int32), jnp.zeros(stack.shape[1:], stack.dtype))
                )
            padded[key] = requests
        return tuple(slots), padded

    return branch
