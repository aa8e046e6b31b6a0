"""The NumPy backend: the eager reference implementation of the backend protocol.

Kernels run one after another in a Python loop, so this backend can also count machine steps
and active members per block (`last_stats`). Primitives run on every row, including the junk
rows of inactive members, with NumPy's floating-point warnings silenced.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from abir import prims
from abir.backends.base import (
    Backend,
    Kernel,
    RunStats,
    Scheduler,
    State,
    is_stack_key,
    smallest_live_block,
    splittable,
)

_FUNCTIONS: dict[str, Callable[..., Any]] = {}
"""Builtin prim name -> NumPy function (filled on first use)."""


@functools.lru_cache(maxsize=64)
def _members(batch: int) -> np.ndarray:
    """`arange(batch)`, cached (read only)."""
    members = np.arange(batch)
    members.flags.writeable = False
    return members


class NumpyBackend(Backend):
    """Array operations on `numpy.ndarray` and a Python `while` loop over machine steps."""

    name = "numpy"

    def __init__(self, scheduler: Scheduler = smallest_live_block, collect_stats: bool = True):
        self.scheduler = scheduler
        self.collect_stats = collect_stats
        self.last_stats = None
        self._quiet = False  # inside `run`, floating-point warnings are already silenced

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
        """NumPy semantics, with the result pinned to `result_dtype` and no warnings from junk rows."""
        if not self._quiet:
            with np.errstate(all="ignore"):
                return self._prim(name, args, result_dtype)
        return self._prim(name, args, result_dtype)

    @staticmethod
    def _prim(name: str, args: Sequence[Any], result_dtype: Any) -> np.ndarray:
        function = _FUNCTIONS.get(name)
        if function is None:
            if name == "astype":
                return np.asarray(prims.apply_numpy(name, args, result_dtype))
            function = _FUNCTIONS[name] = prims.numpy_function(name)
        result = function(*args)
        if type(result) is not np.ndarray:
            result = np.asarray(result)
        if result_dtype is not None and result.dtype != result_dtype:
            result = result.astype(result_dtype)
        return result

    def call_opaque(self, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
        with np.errstate(all="ignore"):
            return fn(*args)

    # ----- masked state updates -------------------------------------------------------------
    def where(self, mask: Any, new: Any, old: Any) -> np.ndarray:
        mask = np.asarray(mask)
        old = np.asarray(old)
        if mask.ndim != old.ndim:
            mask = mask.reshape(mask.shape + (1,) * (old.ndim - mask.ndim))
        result = np.where(mask, new, old)
        return result if result.dtype == old.dtype else result.astype(old.dtype)

    def stack_write(self, stack: np.ndarray, index: Any, value: Any, mask: Any) -> np.ndarray:
        """Writes in place: only the masked members' slots are touched (O(B), not O(D*B))."""
        members = np.flatnonzero(mask)
        if members.size:
            value = np.broadcast_to(value, stack.shape[1:])
            stack[np.asarray(index)[members], members] = value[members]
        return stack

    def stack_scatter(self, stack: np.ndarray, rows: Any, value: Any) -> np.ndarray:
        """In place: only the members with a row below the depth are touched."""
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
        rows = np.minimum(np.maximum(index, 0), stack.shape[0] - 1)
        return stack[rows, _members(stack.shape[1])]

    def known_none(self, mask: Any) -> bool:
        return not np.any(mask)

    def reduce_min(self, value: Any) -> np.ndarray:
        return np.min(value)

    # ----- running --------------------------------------------------------------------------
    def run(self, kernels: Sequence[Kernel], state: State, halt_index: int, cache_key: Any) -> State:
        """A Python loop over machine steps; records `last_stats` when `collect_stats` is set.

        With split kernels the stacks stay out of the kernels and are updated in place (the
        state's stack arrays are copied once first, so the caller's arrays are never written)."""
        batch = int(state["pc"].shape[0])
        stats = RunStats.empty(batch, len(kernels)) if self.collect_stats else None
        member_steps = np.zeros(batch, np.int64)
        split = splittable(kernels)
        if split:
            regs = {key: value for key, value in state.items() if not is_stack_key(key)}
            stacks = {key: np.array(value) for key, value in state.items() if is_stack_key(key)}
        pc = np.asarray(state["pc"])
        block = int(self.next_block(pc))
        with np.errstate(all="ignore"):
            self._quiet = True
            try:
                while block < halt_index:
                    if stats is not None:
                        active = pc == block
                        member_steps += active
                        stats.record(block, int(np.count_nonzero(active)))
                    if split:
                        regs, writes = kernels[block].split(regs, stacks)  # type: ignore[attr-defined]
                        for key, requests in writes.items():
                            stack = stacks[key]
                            for rows, value in requests:
                                self.stack_scatter(stack, rows, value)
                        pc = np.asarray(regs["pc"])
                    else:
                        state = kernels[block](state)
                        pc = np.asarray(state["pc"])
                    block = int(self.next_block(pc))
            finally:
                self._quiet = False
        if stats is not None:
            stats.member_steps = member_steps.tolist()
        self.last_stats = stats
        return {**regs, **stacks} if split else state

    # ----- reference protocol helpers ---------------------------------------------------------
    def switch_case(self, index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
        return branches[int(index)](*operands)

    def while_loop(self, cond: Callable[[Any], Any], body: Callable[[Any], Any], state: Any) -> Any:
        while bool(cond(state)):
            state = body(state)
        return state

    def merge_dtypes(self, a: Any, b: Any) -> np.dtype:
        return np.promote_types(a, b)

    def broadcast_to_shape_of(self, value: Any, target: Any) -> np.ndarray:
        target = np.asarray(target)
        return np.broadcast_to(np.asarray(value, dtype=target.dtype), target.shape).copy()
