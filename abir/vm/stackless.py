"""The stackless executor: the typed functional program run with Python recursion.

Every `functional.call` is a Python call of the executor with the mask of the members that
reached it, so members batch together only when they reach a call together (the "simpler,
previously published" algorithm the program-counter machine improves on). Within one
activation a queue holds (block, mask) pairs; the block with the smallest position runs next,
and masks waiting at the same block are merged (reconvergence after a branch or a loop).

Every value is a full-batch array. Each SSA definition, block argument and function result is
written under the mask of the members executing it, so a member's row always holds the value
of its own latest execution of the definition. Deciding that a mask is empty needs a concrete
value: this executor runs eagerly (NumPy, or JAX/TF outside a trace).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects import cf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from abir import array_prims
from abir.backends.base import Backend
from abir.dialects import functional
from abir.types import TensorType, tensor_type_of
from abir.vm.inputs import prepare_inputs
from abir.vm.values import align_operands, call_opaque_prim, constant_array, rank_padding, result_dtype

Env = dict[SSAValue, Any]


def _concrete_type(value: SSAValue) -> TensorType:
    try:
        return tensor_type_of(value.type)
    except TypeError as error:
        raise TypeError(
            f"the stackless executor needs a typed program, but a value has type {value.type}; "
            "run type inference first"
        ) from error


class _BlockQueue:
    """Pending (block position, mask) pairs; masks waiting at one block are merged."""

    def __init__(self, backend: Backend):
        self.backend = backend
        self.heap: list[int] = []
        self.masks: dict[int, Any] = {}

    def add(self, position: int, mask: Any) -> None:
        if not bool(np.any(self.backend.to_numpy(mask))):
            return
        if position in self.masks:
            self.masks[position] = self.backend.builtin_prim(
                "logical_or", [self.masks[position], mask], np.bool_
            )
        else:
            self.masks[position] = mask
            heapq.heappush(self.heap, position)

    def __bool__(self) -> bool:
        return bool(self.heap)

    def pop(self) -> tuple[int, Any]:
        position = heapq.heappop(self.heap)
        return position, self.masks.pop(position)


class _Activation:
    """One call of one function: its values, its pending blocks and its results."""

    def __init__(self, func: functional.FuncOp, backend: Backend):
        self.func = func
        self.env: Env = {}
        self.queue = _BlockQueue(backend)
        self.results: list[Any] = [None] * len(func.function_type.outputs)


class StacklessExecutor:
    """Runs the functions of a typed functional module over a batch of size `batch`."""

    def __init__(self, module: ModuleOp, backend: Backend, batch: int):
        self.backend = backend
        self.batch = batch
        self.functions = {op.sym_name.data: op for op in module.ops if isinstance(op, functional.FuncOp)}
        self._positions: dict[Block, int] = {}
        self._blocks: dict[functional.FuncOp, list[Block]] = {}
        self._constants: dict[Operation, np.ndarray] = {}

    def function(self, name: str) -> functional.FuncOp:
        if name not in self.functions:
            known = ", ".join(sorted(self.functions)) or "none"
            raise KeyError(f"no function @{name} in the module (functions: {known})")
        return self.functions[name]

    # ----- masked assignment ---------------------------------------------------------------
    def _masked(self, mask: Any, new: Any, old: Any, type: TensorType) -> Any:
        if old is None:
            old = self.backend.create_register(self.batch, type)
        return self.backend.where(mask, new, old)

    def _assign(self, env: Env, target: SSAValue, new: Any, mask: Any) -> None:
        env[target] = self._masked(mask, new, env.get(target), _concrete_type(target))

    # ----- calls and blocks -----------------------------------------------------------------
    def call(self, func: functional.FuncOp, mask: Any, args: Sequence[Any]) -> list[Any]:
        """Run `func` for the members in `mask`; rows of other members in the results are junk."""
        act = _Activation(func, self.backend)
        for arg, value in zip(func.entry_block.args, args, strict=True):
            self._assign(act.env, arg, value, mask)
        act.queue.add(0, mask)
        blocks = self._blocks.setdefault(func, list(func.body.blocks))
        while act.queue:
            position, block_mask = act.queue.pop()
            for op in blocks[position].ops:
                self._execute(act, op, block_mask)
        return act.results

    def _position(self, block: Block) -> int:
        if block not in self._positions:
            region = block.parent
            assert region is not None
            for index, each in enumerate(region.blocks):
                self._positions[each] = index
        return self._positions[block]

    def _goto(self, act: _Activation, block: Block, values: Sequence[SSAValue], mask: Any) -> None:
        """Write the block arguments (a parallel move: all sources read first), then enqueue."""
        sources = [act.env[v] for v in values]
        for arg, value in zip(block.args, sources, strict=True):
            self._assign(act.env, arg, value, mask)
        act.queue.add(self._position(block), mask)

    def _execute(self, act: _Activation, op: Operation, mask: Any) -> None:  # noqa: C901
        env, backend = act.env, self.backend
        match op:
            case functional.ConstantOp():
                if op not in self._constants:
                    self._constants[op] = constant_array(op.value)
                value = self._constants[op]
                self._assign(env, op.res, backend.asarray(value, value.dtype), mask)
            case functional.PrimOp() if op.is_array_prim:
                fn = array_prims.implementation(op.prim_name, op.param_values)
                self._assign(env, op.res[0], backend.call_opaque(fn, [env[a] for a in op.arguments]), mask)
            case functional.PrimOp() if op.fn is not None:
                padding = rank_padding(op.arguments.types, op.res.types)
                operands = align_operands(backend, [env[a] for a in op.arguments], padding)
                value = backend.builtin_prim(op.fn.data, operands, result_dtype(op.res[0].type))
                self._assign(env, op.res[0], value, mask)
            case functional.PrimOp():
                arguments = [env[a] for a in op.arguments]
                results = call_opaque_prim(backend.call_opaque, op.prim_name, arguments, len(op.results))
                self._assign_all(env, op.results, results, mask)
            case functional.CallOp():
                callee = self.function(op.callee.string_value())
                self._assign_all(env, op.results, self.call(callee, mask, [env[a] for a in op.arguments]), mask)
            case functional.ReturnOp():
                for i, (value, type) in enumerate(zip(op.arguments, act.func.function_type.outputs, strict=True)):
                    act.results[i] = self._masked(mask, env[value], act.results[i], tensor_type_of(type))
            case cf.BranchOp():
                self._goto(act, op.successor, op.arguments, mask)
            case cf.ConditionalBranchOp():
                cond = env[op.cond]
                taken = backend.builtin_prim("logical_and", [mask, cond], np.bool_)
                other = backend.builtin_prim("logical_and", [mask, backend.builtin_prim("logical_not", [cond], np.bool_)], np.bool_)
                self._goto(act, op.then_block, op.then_arguments, taken)
                self._goto(act, op.else_block, op.else_arguments, other)
            case _:
                raise NotImplementedError(f"the stackless executor cannot run {op.name}")

    def _assign_all(self, env: Env, targets: Sequence[SSAValue], values: Sequence[Any], mask: Any) -> None:
        if len(values) != len(targets):
            raise TypeError(f"expected {len(targets)} value(s), got {len(values)}")
        for target, value in zip(targets, values, strict=True):
            self._assign(env, target, value, mask)


def execute_stackless(typed_module: ModuleOp, entry: str, args: Sequence[Any], backend: Backend) -> list[Any]:
    """Run function `entry` of a typed functional module on the flat input leaves."""
    probe = StacklessExecutor(typed_module, backend, 1)
    func = probe.function(entry)
    types = [_concrete_type(arg) for arg in func.entry_block.args]
    names = [arg.name_hint or f"{entry} argument {i}" for i, arg in enumerate(func.entry_block.args)]
    batch, leaves = prepare_inputs(names, types, args, backend)
    executor = StacklessExecutor(typed_module, backend, batch)
    return executor.call(func, backend.full_mask(batch), leaves)
