"""The program-counter machine: a `vm.program` compiled into one kernel per block.

`compile_machine` reads the vm module once and turns each `vm.block` into a list of small
instructions over precomputed data (state keys, SSA slot numbers, constants, prim names), and
those into the source of one straight-line Python function per block. A kernel, built once per
backend by binding that function to the backend's methods, is then a plain function
`state -> state` calling only backend methods, so it can run eagerly (NumPy) or be traced
(JAX, TF):

    mask = (pc == block)                     # members standing at this block
    values = [...]                           # the block's SSA values, full batch (junk rows)
    state  = masked writes / pushes / pops, then the pc update

`Machine.run` builds the initial state, lets the backend loop over steps, checks the per-member
error flags and returns the output variables' registers.
"""

from __future__ import annotations

import dataclasses
import functools
import linecache
import math
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from types import CodeType
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue

from abir import array_prims
from abir.backends.base import (
    FLAGGED,
    RUN_CACHE_SIZE,
    STATUS_KEY,
    Backend,
    Kernel,
    RunStats,
    State,
    Writes,
    apply_writes,
)
from abir.dialects import vm
from abir.dialects.functional import decode_params
from abir.errors import StackOverflowError, StackUnderflowError, StepLimitError
from abir.lru import LRUCache
from abir.types import TensorType, tensor_type_of
from abir.vm import state_ops
from abir.vm.inputs import batch_size_of, is_exact_input, prepare_inputs
from abir.vm.state_ops import Frame
from abir.vm.values import call_opaque_prim, constant_array, rank_padding, result_dtype

DEFAULT_MAX_STACK_DEPTH = 15
KERNEL_SETS = 8
"""Backend instances a machine keeps its kernels for (a new backend object per call would
otherwise add a set per call)."""
ZERO_STATES = 4
"""Zero states a machine keeps for reuse (one per backend kind and batch shape)."""
FIRST_LANE_CHUNK = 64
"""Refill-block runs (sweeps, on JAX and TF) in the first chunk of a run with lanes; the next
chunks last about the backend's `launch_seconds` (`Machine.run_lanes`)."""
MAX_LANE_CHUNK = 2**30
MIN_RING_ROWS = 16
MAX_RING_ROWS = 256
RING_BYTES = 1 << 20
"""A run with lanes keeps its finished members' results in rings of one row per refill
(`state_ops.ring_key`) taking about this many bytes, within `MIN_RING_ROWS` and
`MAX_RING_ROWS` rows; a full ring pauses the run to empty it."""
REUSED_ZERO_STATE_BYTES = 32 << 20
"""The largest zero state a machine keeps (NUTS B=4096: 19 MB): making a bigger one, a transfer
of a few GB/s on JAX, costs little next to its run."""


@dataclass(frozen=True)
class Variable:
    """A machine variable: name, per-member type and whether it has a stack."""

    name: str
    type: TensorType
    is_stack: bool


@dataclass(frozen=True)
class BlockPlan:
    """The precomputed body of one block: its instructions, their generated code, and what the
    backends and a user error message need."""

    index: int
    function: str | None
    instructions: tuple[Instruction, ...]
    code: KernelCode
    uses_stacks: bool
    callee: int | None
    stack_writes: tuple[tuple[str, int], ...] = ()
    """(stack key, number of write requests the block leaves for the backend), for each stack
    the block pushes onto (a pop of a value pushed in the same block cancels its request)."""
    register_writes: tuple[str, ...] = (state_ops.PC,)
    """The per-member state keys (registers, stack pointers, pc, error flags) the block's
    kernel may change; every other key comes back from `BlockKernel.split` untouched (the
    same object), so traced backends pass only these through their conditional."""
    location: str | None = None
    """`file:line` of the Python code the block runs (its `abir.loc`; the call's line for a block
    that ends in a call), for error messages."""
    call_locations: tuple[str, ...] = ()
    """`file:line` of the calls the block's pushes serve (their `abir.call_loc`, in order, each
    once): where a member whose push overflows is (a block that absorbed a callee's entry may
    push for two calls)."""
    in_tail: bool = False
    """Whether the block is in the program's tail: the blocks from `Machine.tail_start` on, from
    which members only move to later blocks until they halt. A member there has nothing left
    that others could share, so a sweeping execution may hold it until every live member is in
    the tail, and run each tail block once for all of them (a loop's members leaving one by one
    would otherwise run the exit path once per iteration)."""
    loops_to_itself: bool = False
    """Whether the block may jump to itself (a loop whose body is one block): a sweeping
    execution repeats it while members stand there."""
    writes_whole_stacks: bool = False
    """Whether its kernel writes many rows per member at once (`vm.descend`; `Backend.stack_scatter`
    with a `Span` for rows)."""
    successors: tuple[int, ...] = ()
    """The blocks a member here may go to next, in order (the halt index is not a block): a
    sweeping execution finds the loops of several blocks from them
    (`abir.backends.traced.loop_ranges`)."""


# ----- instructions ---------------------------------------------------------------------------
#
# Planning turns each vm op into an instruction: a small record of precomputed data (state
# keys, SSA slot numbers, constants, prim names). A kernel is one straight-line Python function
# per block, generated from its instructions (`_KernelSource`): each instruction renders the
# Python statements that call the backend methods for its op, SSA value i is the local `v<i>`,
# and the objects the statements refer to (constants, dtypes, keys) are bound by name. The
# source is compiled once per plan; each backend gets the function with its methods bound.


class _KernelSource:
    """The body lines of one block's kernel and the objects they refer to by name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = {}
        self.constants = 0
        self.functions = 0

    def constant(self, value: np.ndarray) -> str:
        """A name the kernel's code reads the constant array `value` by (`c0`, `c1`, ...)."""
        name = f"c{self.constants}"
        self.constants += 1
        self.namespace[name] = value
        return name

    def dtype(self, dtype: np.dtype) -> str:
        """The name of `dtype` (`dt_float64`)."""
        name = f"dt_{dtype.name}"
        self.namespace[name] = dtype
        return name

    def function(self, fn: Callable[..., Any]) -> str:
        """A name the kernel's code calls `fn` by (`f0`, `f1`, ...)."""
        name = f"f{self.functions}"
        self.functions += 1
        self.namespace[name] = fn
        return name

    def block(self, index: int) -> str:
        """The name of block index `index` as an int32 scalar (`pc_3`)."""
        name = f"pc_{index}"
        self.namespace[name] = np.int32(index)
        return name

    def emit(self, *lines: str) -> None:
        self.lines.extend(lines)


def _value(slot: int) -> str:
    return f"v{slot}"


def _values(slots: Sequence[int]) -> str:
    return ", ".join(_value(slot) for slot in slots)


def _masked_write(key: str, value: str, mask: str = "mask") -> str:
    """`state_ops.write` of `key` (a register key, or the pc)."""
    return f"regs[{key!r}] = where({mask}, {value}, regs[{key!r}])"


@dataclass(frozen=True)
class Read:
    """`vm.read`: the register's current value."""

    slot: int
    key: str

    def render(self, source: _KernelSource) -> None:
        source.emit(f"{_value(self.slot)} = regs[{self.key!r}]")


@dataclass(frozen=True, eq=False)
class Constant:
    """`vm.constant`: a backend array of `value` (batch dimension 1)."""

    slot: int
    value: np.ndarray

    def render(self, source: _KernelSource) -> None:
        value, dtype = source.constant(self.value), source.dtype(self.value.dtype)
        source.emit(f"{_value(self.slot)} = asarray({value}, {dtype})")


@dataclass(frozen=True)
class Builtin:
    """A builtin `vm.prim`; operands of lower event rank get `padding` axes after the batch."""

    slot: int
    name: str
    args: tuple[int, ...]
    padding: tuple[int, ...]
    dtype: np.dtype

    def render(self, source: _KernelSource) -> None:
        operands = ", ".join(
            _value(a) if not pad else f"expand({_value(a)}, {pad})"
            for a, pad in zip(self.args, self.padding, strict=True)
        )
        dtype = source.dtype(self.dtype)
        source.emit(f"{_value(self.slot)} = prim({self.name!r}, [{operands}], {dtype})")


@dataclass(frozen=True, eq=False)
class ArrayPrim:
    """A builtin array `vm.prim` (`abir.array_prims`): its implementation, built from the name
    and parameters when the kernel is planned, called on the whole-batch operands."""

    slot: int
    name: str
    params: dict[str, Any]
    args: tuple[int, ...]

    def render(self, source: _KernelSource) -> None:
        fn = source.function(array_prims.implementation(self.name, self.params))
        source.emit(f"{_value(self.slot)} = opaque({fn}, [{_values(self.args)}])")


@dataclass(frozen=True)
class Opaque:
    """An opaque `vm.prim`: the callable registered as `symbol` (looked up at every call)."""

    slots: tuple[int, ...]
    symbol: str
    args: tuple[int, ...]

    def render(self, source: _KernelSource) -> None:
        call = f"call_opaque_prim(opaque, {self.symbol!r}, [{_values(self.args)}], {len(self.slots)})"
        source.emit(f"{_values(self.slots)}, = {call}")


@dataclass(frozen=True)
class Write:
    """`vm.write`: a masked write of a register."""

    key: str
    slot: int

    def render(self, source: _KernelSource) -> None:
        source.emit(_masked_write(self.key, _value(self.slot)))


PointerGroups = tuple[tuple[str, tuple[str, ...]], ...]
"""(stack pointer key, the variables of a push/pop/peek that share it), per pointer."""


@dataclass(frozen=True)
class Push:
    """`vm.push`: per stack pointer, one `state_ops.stack_push` of the variables' registers."""

    groups: PointerGroups

    def render(self, source: _KernelSource) -> None:
        for pointer, names in self.groups:
            saves = ", ".join(
                f"({state_ops.stack_key(name)!r}, regs[{state_ops.register_key(name)!r}])" for name in names
            )
            source.emit(f"stack_push(backend, frame, {pointer!r}, [{saves}], mask)")


@dataclass(frozen=True)
class Restore:
    """`vm.pop` (`drop`) or `vm.peek`: per stack pointer, the saved tops become current. `keep`:
    a pop of values pushed before a side exit of the same block (`state_ops.stack_top`)."""

    groups: PointerGroups
    drop: bool
    keep: bool = False

    def render(self, source: _KernelSource) -> None:
        for pointer, names in self.groups:
            stacks = ", ".join(repr(state_ops.stack_key(name)) for name in names)
            keep = ", keep=True" if self.keep else ""
            source.emit(f"tops, valid = stack_top(backend, frame, {pointer!r}, [{stacks}], mask, {self.drop}{keep})")
            source.emit(*(_masked_write(state_ops.register_key(name), f"tops[{i}]", "valid") for i, name in enumerate(names)))


@dataclass(frozen=True)
class Jump:
    """`vm.jump` (and `vm.halt`: a jump to the halt index)."""

    target: int

    def render(self, source: _KernelSource) -> None:
        source.emit(_masked_write(state_ops.PC, source.block(self.target)))


@dataclass(frozen=True)
class Branch:
    """`vm.branch`: pc := then or else target, per member."""

    cond: int
    then_target: int
    else_target: int

    def render(self, source: _KernelSource) -> None:
        then_, else_ = source.block(self.then_target), source.block(self.else_target)
        choice = f"prim('where', [{_value(self.cond)}, {then_}, {else_}], int32)"
        source.emit(_masked_write(state_ops.PC, choice))


@dataclass(frozen=True)
class ExitIf:
    """`vm.exit_if`: members for which the condition holds leave for `target` (pc := target)
    and drop out of the mask, so the rest of the block runs for the others only."""

    cond: int
    target: int

    def render(self, source: _KernelSource) -> None:
        leaving = f"prim('logical_and', [mask, {_value(self.cond)}], bool_)"
        source.emit(
            _masked_write(state_ops.PC, source.block(self.target), leaving),
            f"mask = prim('logical_and', [mask, prim('logical_not', [{_value(self.cond)}], bool_)], bool_)",
        )


@dataclass(frozen=True)
class Call:
    """`vm.call`: save the return block on the pc stack, then pc := target (`state_ops.call`)."""

    target: int
    return_target: int

    def render(self, source: _KernelSource) -> None:
        back = source.block(self.return_target)
        source.emit(
            f"stack_push(backend, frame, {state_ops.PC_SP!r}, [({state_ops.PC_STACK!r}, {back})], mask)",
            _masked_write(state_ops.PC, source.block(self.target)),
        )


@dataclass(frozen=True)
class Return:
    """`vm.return`: pc := the saved return block, which is dropped (`state_ops.return_`)."""

    def render(self, source: _KernelSource) -> None:
        source.emit(
            f"tops, valid = stack_top(backend, frame, {state_ops.PC_SP!r}, [{state_ops.PC_STACK!r}], mask, True)",
            _masked_write(state_ops.PC, "tops[0]", "valid"),
        )


@dataclass(frozen=True)
class Descend:
    """`vm.descend`: a self-calling block's iterations at once (`state_ops.descend`)."""

    descent: state_ops.Descent

    def render(self, source: _KernelSource) -> None:
        source.namespace["descent"] = self.descent
        source.emit("descend(backend, frame, descent, mask)")


Instruction = (
    Read | Constant | Builtin | ArrayPrim | Opaque | Write | Push | Restore | Jump | Branch | ExitIf | Call | Descend | Return
)


# ----- planning --------------------------------------------------------------------------


class _Slots:
    """Numbers the SSA values of one block."""

    def __init__(self) -> None:
        self.numbers: dict[SSAValue, int] = {}

    def define(self, value: SSAValue) -> int:
        self.numbers[value] = len(self.numbers)
        return self.numbers[value]

    def use(self, value: SSAValue) -> int:
        return self.numbers[value]


def _var_names(op: vm.PushOp | vm.PopOp | vm.PeekOp) -> tuple[str, ...]:
    return tuple(ref.string_value() for ref in op.vars.data)


def stack_pointers(blocks: Sequence[vm.BlockOp]) -> dict[str, str]:
    """The stack pointer key of every stack variable. Variables that are pushed, popped and
    peeked by exactly the same ops always hold the same number of saved values, so they share
    one pointer (named after the first of them): a push or pop of such a group moves one pointer
    and computes one row index (NUTS's `build_tree`: 9 stack variables, 3 pointers)."""
    ops_of: dict[str, list[tuple[int, int, int]]] = {}
    for block in blocks:
        for position, op in enumerate(block.body.block.ops):
            if isinstance(op, vm.PushOp | vm.PopOp | vm.PeekOp):
                for name in _var_names(op):
                    ops_of.setdefault(name, []).append((block.number, position, 0))
            elif isinstance(op, vm.DescendOp):  # each of its pushes moves its own pointer
                for i, ref in enumerate(op.pushes.data):
                    ops_of.setdefault(ref.string_value(), []).append((block.number, position, i))
    owner: dict[tuple[tuple[int, int, int], ...], str] = {}
    return {
        name: state_ops.pointer_key(owner.setdefault(tuple(ops), name)) for name, ops in sorted(ops_of.items())
    }


def _pointer_groups(names: Sequence[str], pointers: Mapping[str, str]) -> PointerGroups:
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(pointers[name], []).append(name)
    return tuple((pointer, tuple(group)) for pointer, group in groups.items())


def _plan_op(  # noqa: C901
    op: Operation, slots: _Slots, halt: int, pointers: Mapping[str, str], keeping: bool = False
) -> Instruction:
    """The instruction that executes one vm op (`keeping`: a pop that keeps the request of the
    push it takes back, see `_pending_requests`)."""
    match op:
        case vm.ReadOp():
            return Read(slots.define(op.res), state_ops.register_key(op.var.string_value()))
        case vm.ConstantOp():
            return Constant(slots.define(op.res), constant_array(op.value))
        case vm.PrimOp() if op.fn is not None and array_prims.is_array_prim(op.fn.data):
            args = tuple(slots.use(a) for a in op.arguments)
            return ArrayPrim(slots.define(op.res[0]), op.fn.data, decode_params(op.params), args)
        case vm.PrimOp() if op.fn is not None:
            args = tuple(slots.use(a) for a in op.arguments)
            padding = rank_padding(op.arguments.types, op.res.types)
            return Builtin(slots.define(op.res[0]), op.fn.data, args, padding, result_dtype(op.res[0].type))
        case vm.PrimOp():
            args = tuple(slots.use(a) for a in op.arguments)
            return Opaque(tuple(slots.define(r) for r in op.res), op.prim_name, args)
        case vm.WriteOp():
            return Write(state_ops.register_key(op.var.string_value()), slots.use(op.value))
        case vm.PushOp():
            return Push(_pointer_groups(_var_names(op), pointers))
        case vm.PopOp() | vm.PeekOp():
            return Restore(_pointer_groups(_var_names(op), pointers), drop=isinstance(op, vm.PopOp), keep=keeping)
        case vm.JumpOp():
            return Jump(op.target.value.data)
        case vm.BranchOp():
            return Branch(slots.use(op.cond), op.then_target.value.data, op.else_target.value.data)
        case vm.ExitIfOp():
            return ExitIf(slots.use(op.cond), op.target.value.data)
        case vm.CallOp():
            return Call(op.target.value.data, op.return_target.value.data)
        case vm.DescendOp():
            return Descend(_descent(op, pointers))
        case vm.ReturnOp():
            return Return()
        case vm.HaltOp():
            return Jump(halt)
    raise NotImplementedError(f"the machine cannot execute {op.name}")


def _descent(op: vm.DescendOp, pointers: Mapping[str, str]) -> state_ops.Descent:
    return state_ops.Descent(
        counter=op.counter.string_value(),
        step=op.step.value.data,
        predicate=op.predicate.data,
        offset=op.offset.value.data,
        bound=op.bound.value.data,
        update_first=bool(op.update_before_exit.value.data),
        pushes=tuple((name, pointers[name], updated, early) for name, updated, early in op.push_list()),
        exit_target=op.exit_target.value.data,
        return_target=op.return_target.value.data,
    )


STACK_OPS = (vm.PushOp, vm.PopOp, vm.PeekOp, vm.CallOp, vm.DescendOp, vm.ReturnOp)


def _pending_requests(ops: Sequence[Operation]) -> tuple[set[int], tuple[tuple[str, int], ...]]:
    """What `state_ops` does with a block's pushes, replayed on its ops: (the positions of the
    pops that keep the request of the push they take back, the write requests the kernel leaves
    per stack). A pop takes back the last push of the same block still pending, if any, and
    cancels its request, unless a side exit (`vm.exit_if`) lies in between: the members that
    left by it keep their push, so the request stays (for them only)."""
    pending: dict[str, list[bool]] = {}  # per stack: its pending pushes, crossed by an exit?
    requests: dict[str, int] = {}
    keeping = set()

    def push(key: str) -> None:
        pending.setdefault(key, []).append(False)
        requests[key] = requests.get(key, 0) + 1

    def take_back(position: int, key: str) -> None:
        pushes = pending.get(key)
        if not pushes:
            return  # the pop reads the stack itself
        if pushes.pop():
            keeping.add(position)
        else:
            requests[key] -= 1

    for position, op in enumerate(ops):
        match op:
            case vm.ExitIfOp():
                pending = {key: [True] * len(pushes) for key, pushes in pending.items()}
            case vm.PushOp():
                for name in _var_names(op):
                    push(state_ops.stack_key(name))
            case vm.CallOp():
                push(state_ops.PC_STACK)
            case vm.DescendOp():  # one write of each whole stack
                for key in (*(state_ops.stack_key(ref.string_value()) for ref in op.pushes.data), state_ops.PC_STACK):
                    requests[key] = requests.get(key, 0) + 1
            case vm.PopOp():
                for name in _var_names(op):
                    take_back(position, state_ops.stack_key(name))
            case vm.ReturnOp():
                take_back(position, state_ops.PC_STACK)
    return keeping, tuple((key, count) for key, count in requests.items() if count)


def _register_writes(ops: Sequence[Operation], pointers: Mapping[str, str]) -> tuple[str, ...]:
    """The per-member state keys a block's kernel may change (a superset is harmless: the
    kernel returns the unchanged value for a key it did not touch)."""
    keys = {state_ops.PC: None}  # every block ends in a jump, branch, call, return or halt
    for op in ops:
        if isinstance(op, vm.WriteOp):
            keys[state_ops.register_key(op.var.string_value())] = None
        elif isinstance(op, vm.PushOp):
            keys.update(dict.fromkeys(pointers[name] for name in _var_names(op)))
            keys[state_ops.OVERFLOW] = None
        elif isinstance(op, vm.PopOp | vm.PeekOp):
            for name in _var_names(op):
                keys[state_ops.register_key(name)] = None
                if isinstance(op, vm.PopOp):
                    keys[pointers[name]] = None
            keys[state_ops.UNDERFLOW] = None
        elif isinstance(op, vm.CallOp):
            keys[state_ops.PC_SP] = keys[state_ops.OVERFLOW] = None
        elif isinstance(op, vm.DescendOp):
            keys[state_ops.register_key(op.counter.string_value())] = None
            keys.update(dict.fromkeys(pointers[ref.string_value()] for ref in op.pushes.data))
            keys[state_ops.PC_SP] = keys[state_ops.OVERFLOW] = None
        elif isinstance(op, vm.ReturnOp):
            keys[state_ops.PC_SP] = keys[state_ops.UNDERFLOW] = None
    return tuple(keys)


def _successors(blocks: Sequence[vm.BlockOp]) -> list[set[int]]:
    """Each block's possible next blocks: side exits, jump and branch targets, a call's callee,
    a descent's exit, and for a return the return block of every call (or descent) of its
    function (the halt index is not a block)."""
    sites = vm.return_sites(blocks, _function_of)
    successors = []
    for block in blocks:
        exits = set(vm.block_successors(block, (vm.TargetRole.NEXT, vm.TargetRole.CALLEE)))
        if isinstance(block.body.block.last_op, vm.ReturnOp):
            exits |= {back for _, back in sites.get(_function_of(block), [])}
        successors.append(exits)
    return successors


def tail_start(successors: Sequence[set[int]]) -> int:
    """The smallest index t such that every block from t on only moves members to later blocks
    (or halts): the program's tail (`BlockPlan.in_tail`); `successors` as `_successors` gives."""
    start = len(successors)
    while start > 0 and all(s > start - 1 for s in successors[start - 1]):
        start -= 1
    return start


def _function_of(block: vm.BlockOp) -> str | None:
    function = block.attributes.get("function")
    return function.data if isinstance(function, StringAttr) else None


def _location_of(block: vm.BlockOp) -> str | None:
    location = block.attributes.get("abir.loc")
    return location.data if isinstance(location, StringAttr) else None


def _call_locations(ops: Sequence[Operation]) -> tuple[str, ...]:
    locations = (op.attributes.get("abir.call_loc") for op in ops if isinstance(op, vm.PushOp | vm.CallOp | vm.DescendOp))
    return tuple(dict.fromkeys(loc.data for loc in locations if isinstance(loc, StringAttr)))


def static_returns(blocks: Sequence[vm.BlockOp]) -> dict[str, int] | None:
    """The return block of every function, when each function is entered by one `vm.call` and
    nothing else pushes a return block (no `vm.descend`): a member returning from a function
    then always goes back to that call's return block, and the program needs no
    program-counter stack. None when some function has several return sites (recursion, or a
    function called from two places, or the entry function called again: members start in it
    without a call), whose returns read the stack."""
    sites = vm.return_sites(blocks, _function_of)
    if any(len(places) != 1 for places in sites.values()):
        return None
    if blocks and _function_of(blocks[0]) in sites:
        return None
    if any(isinstance(op, vm.DescendOp) for block in blocks for op in block.body.block.ops):
        return None
    returns = {function: back for function, [(_, back)] in sites.items() if isinstance(function, str)}
    for block in blocks:
        if isinstance(block.body.block.last_op, vm.ReturnOp) and _function_of(block) not in returns:
            return None
    return returns


def _without_call_stack(ops: Sequence[Operation], function: str | None, returns: Mapping[str, int]) -> list[Operation]:
    """A block's ops with its call or return turned into a jump (`static_returns`): the call
    to its callee's first block, the return to its function's one return block."""
    if isinstance(ops[-1], vm.CallOp):
        return [*ops[:-1], vm.JumpOp(ops[-1].target.value.data)]
    if isinstance(ops[-1], vm.ReturnOp) and function is not None:
        return [*ops[:-1], vm.JumpOp(returns[function])]
    return list(ops)


def _plan_block(
    block: vm.BlockOp,
    halt: int,
    pointers: Mapping[str, str],
    in_tail: bool = False,
    successors: tuple[int, ...] = (),
    returns: Mapping[str, int] | None = None,
) -> BlockPlan:
    """The plan of one block; with `returns` (`static_returns`), its call or return is a jump."""
    slots = _Slots()
    ops = list(block.body.block.ops)
    callee = ops[-1].target.value.data if isinstance(ops[-1], vm.CallOp) else None
    if returns is not None:
        ops = _without_call_stack(ops, _function_of(block), returns)
    keeping, stack_writes = _pending_requests(ops)
    instructions = tuple(_plan_op(op, slots, halt, pointers, i in keeping) for i, op in enumerate(ops))
    terminator = ops[-1]
    uses_stacks = any(isinstance(op, STACK_OPS) for op in ops)
    return BlockPlan(
        index=block.number,
        function=_function_of(block),
        location=_location_of(block),
        call_locations=_call_locations(ops),
        instructions=instructions,
        code=KernelCode.generate(block.number, instructions, uses_stacks),
        uses_stacks=uses_stacks,
        callee=block.number if isinstance(terminator, vm.DescendOp) else callee,
        stack_writes=stack_writes,
        register_writes=_register_writes(ops, pointers),
        in_tail=in_tail,
        loops_to_itself=block.number in successors,
        writes_whole_stacks=isinstance(terminator, vm.DescendOp),
        successors=successors,
    )


# ----- kernels ---------------------------------------------------------------------------------

_KERNEL_NAMES: dict[str, Any] = {
    "Frame": Frame,
    "stack_push": state_ops.stack_push,
    "stack_top": state_ops.stack_top,
    "descend": state_ops.descend,
    "finish": state_ops.finish,
    "count_step": state_ops.count_step,
    "call_opaque_prim": call_opaque_prim,
    "bool_": np.bool_,
    "int32": np.int32,
}
"""The names every kernel's code may use besides its own bindings and the backend's methods."""


@dataclass(frozen=True, eq=False)
class KernelCode:
    """The generated Python function of one block, compiled once and bound per backend.

    `source` defines `block_<index>(regs, stacks) -> (regs, writes)` (`BlockKernel`);
    `namespace` holds the constants it refers to by name. The backend's methods are bound
    once per kernel (`prim`, `where`, `asarray`, `expand`, `opaque`), and every vm op becomes
    the same backend calls, in op order, whatever the backend (NumPy runs them, JAX and TF
    trace them)."""

    name: str
    source: str
    namespace: Mapping[str, Any]
    code: CodeType

    @classmethod
    def generate(
        cls, index: int, instructions: Sequence[Instruction], uses_stacks: bool, count_steps: bool = False
    ) -> KernelCode:
        """The kernel of a block; with `count_steps`, for a run with a step limit
        (`state_ops.count_step` after the block's own updates)."""
        source = _KernelSource()
        block = source.block(index)
        if uses_stacks:
            source.emit("frame = Frame(regs, stacks)")
        source.emit(f"mask = prim('equal', (regs[{state_ops.PC!r}], {block}), bool_)")
        if count_steps:
            source.emit("entered = mask")  # side exits narrow `mask`; every member entered counts
        for instruction in instructions:
            instruction.render(source)
        if uses_stacks:
            source.emit(f"finish(backend, frame, {index}, halt)")
        if count_steps:
            source.emit("count_step(backend, regs, entered, halt)")
        source.emit("return regs, frame.writes" if uses_stacks else "return regs, {}")
        name = f"block_{index}"
        text = f"def {name}(regs, stacks):\n" + "".join(f"    {line}\n" for line in source.lines)
        filename = f"<abir kernel {name} {id(source):x}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)  # tracebacks
        return cls(name, text, source.namespace, compile(text, filename, "exec"))

    def bind(self, backend: Backend, halt: int) -> Callable[[State, State], tuple[State, Writes]]:
        """The kernel function calling `backend`'s methods; `halt` is the halt index."""
        names = {
            **_KERNEL_NAMES,
            **self.namespace,
            "backend": backend,
            "halt": halt,
            "prim": backend.builtin_prim,
            "where": backend.where,
            "asarray": backend.asarray,
            "expand": backend.expand_event_dims,
            "opaque": backend.call_opaque,
        }
        exec(self.code, names)  # noqa: S102 (our own generated source)
        return names[self.name]  # type: ignore[no-any-return]


class BlockKernel:
    """The kernel of one planned block on one backend.

    `split(regs, stacks) -> (regs, writes)` is the form backends run: `regs` holds the state's
    per-member arrays (a fresh dict the kernel may fill), `stacks` the `[D, B, ...]` stacks,
    read only; `writes` are the stack write requests to apply afterwards (`state_ops`).
    `writes` (the attribute) gives their static count per stack key, `register_writes` the
    per-member keys `split` may change (the others come back as the same objects). Calling the kernel on a
    full state (`state -> state`, the plain `Kernel` protocol) applies the requests itself.
    `split` is the block's generated function (`KernelCode`)."""

    split: Callable[[State, State], tuple[State, Writes]]

    def __init__(self, plan: BlockPlan, backend: Backend, halt: int):
        self.plan = plan
        self.backend = backend
        self.halt = halt
        self.writes = dict(plan.stack_writes)
        self.register_writes = plan.register_writes
        self.__name__ = f"block_{plan.index}"
        self.split = plan.code.bind(backend, halt)

    def __call__(self, state: State) -> State:
        regs, stacks = state_ops.split_state(state)
        regs, writes = self.split(regs, stacks)
        return {**regs, **apply_writes(stacks, writes, self.backend.stack_scatter)}


def make_kernel(plan: BlockPlan, backend: Backend, halt: int) -> BlockKernel:
    """The kernel of one planned block on one backend."""
    return BlockKernel(plan, backend, halt)


# ----- the machine ----------------------------------------------------------------------


def _find_program(module: ModuleOp) -> vm.ProgramOp:
    programs = [op for op in module.ops if isinstance(op, vm.ProgramOp)]
    if len(programs) != 1:
        raise ValueError(f"a vm module must hold exactly one vm.program, found {len(programs)}")
    return programs[0]


def _variables(module: ModuleOp) -> dict[str, Variable]:
    return {
        op.sym_name.data: Variable(op.sym_name.data, tensor_type_of(op.type), op.is_stack)
        for op in module.ops
        if isinstance(op, vm.VarOp)
    }


class Machine:
    """A compiled vm program: block plans, and kernels built lazily once per backend."""

    def __init__(
        self,
        name: str,
        variables: dict[str, Variable],
        inputs: Sequence[str],
        outputs: Sequence[str],
        plans: Sequence[BlockPlan],
        pointers: Mapping[str, str] | None = None,
    ):
        self.name = name
        self.variables = variables
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.plans = tuple(plans)
        self.pointers = dict(pointers) if pointers is not None else {
            name: state_ops.pointer_key(name) for name, var in variables.items() if var.is_stack
        }
        """The stack pointer key of each stack variable (`stack_pointers`)."""
        self.has_calls = any(
            isinstance(instruction, Call | Return | Descend) for plan in plans for instruction in plan.instructions
        )
        """Whether the program keeps return blocks on its program-counter stack (`static_returns`)."""
        self.last_stats: RunStats | None = None
        self.run_cache = LRUCache(RUN_CACHE_SIZE)
        """The compiled runs of this program (`Backend.run_cache`), freed with it."""
        self._kernels: MutableMapping[tuple[int, bool], tuple[Backend, list[Kernel]]] = LRUCache(KERNEL_SETS)
        self._counting_plans: tuple[BlockPlan, ...] | None = None
        self._zero_states: MutableMapping[Any, State] = LRUCache(ZERO_STATES)
        self._launchers: MutableMapping[Any, tuple[Backend, Callable[[State], State] | None]] = LRUCache(KERNEL_SETS)

    @property
    def num_blocks(self) -> int:
        return len(self.plans)

    @functools.cached_property
    def stack_keys(self) -> frozenset[str]:
        """The state keys of the `[D, B, ...]` stacks (what `Backend.run` keeps apart)."""
        keys = {state_ops.stack_key(name) for name, var in self.variables.items() if var.is_stack}
        return frozenset({*keys, state_ops.PC_STACK} if self.has_calls else keys)

    def kernels(self, backend: Backend, count_steps: bool = False) -> list[Kernel]:
        """The block kernels for `backend` (built on first use, then reused); with
        `count_steps`, the kernels of a run with a step limit (`state_ops.count_step`)."""
        entry = self._kernels.get((id(backend), count_steps))
        if entry is None or entry[0] is not backend:
            plans = self._step_counting_plans() if count_steps else self.plans
            entry = (backend, [make_kernel(plan, backend, self.num_blocks) for plan in plans])
            self._kernels[(id(backend), count_steps)] = entry
        return entry[1]

    def _step_counting_plans(self) -> tuple[BlockPlan, ...]:
        if self._counting_plans is None:
            self._counting_plans = tuple(
                dataclasses.replace(
                    plan,
                    code=KernelCode.generate(plan.index, plan.instructions, plan.uses_stacks, count_steps=True),
                    register_writes=(*plan.register_writes, *state_ops.STEP_LIMIT_KEYS),
                )
                for plan in self.plans
            )
        return self._counting_plans

    def initial_state(
        self, backend: Backend, leaves: Sequence[Any], batch: int, max_stack_depth: int, max_steps: int | None = None
    ) -> State:
        """Zero registers and stacks, the inputs in their registers, every pc at block 0 (and
        with `max_steps`, every member's `steps_left`)."""
        staged = any(backend.is_traced(leaf) for leaf in leaves)
        if backend.immutable_arrays and not staged:
            state = self._reused_zero_state(backend, batch, max_stack_depth)
        else:
            state = backend.zero_state(self.state_shapes(batch, max_stack_depth), staged=staged)
        for name, leaf in zip(self.inputs, leaves, strict=True):
            state[state_ops.register_key(name)] = leaf
        if max_steps is not None:
            state[state_ops.STEPS_LEFT] = backend.full((batch,), max_steps, np.int32)
            state[state_ops.STOPPED_AT] = backend.full((batch,), -1, np.int32)
        return state

    def state_shapes(self, batch: int, max_stack_depth: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """The shape and dtype of every state array but the input registers."""
        scalar = ((batch,), np.dtype(np.int32))
        shapes: dict[str, tuple[tuple[int, ...], np.dtype]] = {
            state_ops.PC: scalar,
            state_ops.OVERFLOW: scalar,
            state_ops.UNDERFLOW: scalar,
        }
        if self.has_calls:
            shapes[state_ops.PC_STACK] = ((max_stack_depth, batch), np.dtype(np.int32))
            shapes[state_ops.PC_SP] = scalar
        for var in self.variables.values():
            shape, dtype = tuple(var.type.shape), np.dtype(var.type.dtype)
            shapes[state_ops.register_key(var.name)] = ((batch, *shape), dtype)
            if var.is_stack:
                shapes[state_ops.stack_key(var.name)] = ((max_stack_depth, batch, *shape), dtype)
                shapes[self.pointers.get(var.name, state_ops.pointer_key(var.name))] = scalar
        for name in self.inputs:
            del shapes[state_ops.register_key(name)]
        return shapes

    def _reused_zero_state(self, backend: Backend, batch: int, max_stack_depth: int) -> State:
        """A copy of the zero state made before for this backend type, batch and depth, on a
        backend whose arrays never change (`Backend.immutable_arrays`), when it is small (at
        most `REUSED_ZERO_STATE_BYTES`). Making the zeros is a dispatch of its own, a noticeable
        part of a small call (docs/performance.md#the-machines-fixed-costs)."""
        key = (type(backend), batch, max_stack_depth)
        zeros = self._zero_states.get(key)
        if zeros is None:
            shapes = self.state_shapes(batch, max_stack_depth)
            size = sum(math.prod(shape) * dtype.itemsize for shape, dtype in shapes.values())
            if size > REUSED_ZERO_STATE_BYTES:
                return backend.zero_state(shapes)
            zeros = self._zero_states[key] = backend.zero_state(shapes)
        return dict(zeros)

    def run(
        self,
        args: Sequence[Any],
        backend: Backend,
        max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH,
        cache_key: Any = None,
        max_steps: int | None = None,
        padded_batch: int | None = None,
    ) -> list[Any]:
        """Run the program on the flat input leaves; return the output registers. With
        `max_steps`, a member may run at most that many blocks: members that have not halted by
        then stop, and the run raises `StepLimitError` naming them and where they stand. With
        `padded_batch` (at least the batch size), the machine runs that many rows: the extra
        ones are members halted from the start, and the results are cut back to the batch."""
        if max_stack_depth < 1:
            raise ValueError(f"max_stack_depth must be at least 1, got {max_stack_depth}")
        check_max_steps(max_steps)
        with backend.scope(args):
            return self._run(args, backend, max_stack_depth, cache_key, max_steps, padded_batch)

    def steady_run(
        self, backend: Backend, leaves: Sequence[Any], max_stack_depth: int, cache_key: Any
    ) -> SteadyRun | None:
        """`run` (without `max_steps` or padding) for input leaves of the types, shapes and
        dtypes of `leaves`, the leaves of a run just made: those pass every check of
        `prepare_inputs` unchanged, so it is skipped (`SteadyRun`). None when such leaves are
        not run as they are (one is cast, broadcast, or traced)."""
        types = [self.variables[name].type for name in self.inputs]
        if len(leaves) != len(types) or staged_leaves(backend, leaves):
            return None
        exact = (is_exact_input(leaf, np.dtype(want.dtype), want.shape) for leaf, want in zip(leaves, types, strict=True))
        if not all(exact) or len({int(leaf.shape[0]) for leaf in leaves}) != 1:
            return None
        return SteadyRun(self, backend, int(leaves[0].shape[0]), max_stack_depth, cache_key)

    def _run(
        self,
        args: Sequence[Any],
        backend: Backend,
        max_stack_depth: int,
        cache_key: Any,
        max_steps: int | None,
        padded_batch: int | None,
    ) -> list[Any]:
        types = [self.variables[name].type for name in self.inputs]
        batch, leaves = prepare_inputs(self.inputs, types, args, backend, for_run=True)
        rows = batch if padded_batch is None else max(int(padded_batch), batch)
        if rows > batch:
            # a leaf of one row where the batch has more is every member's (`Backend.spread_row`)
            leaves = [backend.pad_rows(leaf, rows) if leaf.shape[0] == batch else leaf for leaf in leaves]
        state = self.initial_state(backend, leaves, rows, max_stack_depth, max_steps)
        if rows > batch:
            state[state_ops.PC] = backend.asarray(np.where(np.arange(rows) < batch, 0, self.num_blocks).astype(np.int32))
        backend.last_stats = None
        counting = max_steps is not None
        if counting and cache_key is not None:
            cache_key = (cache_key, "max_steps")
        error_flags = {state_ops.OVERFLOW: 0, state_ops.UNDERFLOW: 0}
        if counting:
            error_flags[state_ops.STOPPED_AT] = -1
        kernels = self.kernels(backend, counting)
        launcher = None if staged_leaves(backend, leaves) else self._launcher(backend, kernels, state, cache_key, error_flags)
        state = self._launched(backend, kernels, state, cache_key, error_flags, launcher)
        self.last_stats = backend.last_stats
        status = state.pop(STATUS_KEY, None)
        if backend.is_traced(state[state_ops.PC]):
            names = MemberNames(batch, backend.mapped_axes())
            check = functools.partial(self._raise_run_errors, backend, max_stack_depth, max_steps, names)
            limit = "" if max_steps is None else f", or reached max_steps={max_steps}"
            summary = (
                f"abir: the staged run of '{self.name}' failed: a member recursed deeper than max_stack_depth="
                f"{max_stack_depth}, or restored a value never saved{limit} (per member: overflow/underflow = "
                "1 + the vm block, stopped_at = the vm block); run it outside the traced function for the full error"
            )
            backend.check_when_run(check, {key: state[key] for key in error_flags}, error_flags, summary)
        elif status is None or status & FLAGGED:
            self._raise_errors(backend, state, max_stack_depth)
            if counting:
                self._raise_step_limit(backend, state, max_steps)
        outputs = self._outputs(backend, state)
        return outputs if rows == batch else [output[:batch] for output in outputs]

    def _launched(
        self,
        backend: Backend,
        kernels: list[Kernel],
        state: State,
        cache_key: Any,
        error_flags: Mapping[str, int],
        launcher: Callable[[State], State] | None,
    ) -> State:
        """The state a run from `state` leaves: through `launcher` (`_launcher`) where there is
        one, else the backend's `run`."""
        if launcher is not None:
            return launcher(state)
        return backend.run(kernels, state, self.num_blocks, cache_key, self.run_cache, self.stack_keys, error_flags)

    def _outputs(self, backend: Backend, state: State) -> list[Any]:
        """The output registers of a finished run's `state`, as the backend's arrays (a register
        no block writes may come back as the backend left it: a JAX `Fill`)."""
        outputs = [state[state_ops.register_key(name)] for name in self.outputs]
        return [output if backend.is_native(output) else backend.asarray(output) for output in outputs]

    def _launcher(
        self, backend: Backend, kernels: list[Kernel], state: State, cache_key: Any, error_flags: Mapping[str, int]
    ) -> Callable[[State], State] | None:
        """The backend's `Backend.launcher` for runs under `cache_key` (made on the first, then
        reused), or None (no `cache_key`, or the backend has none)."""
        if cache_key is None or not isinstance(backend, Backend):
            return None
        key = (id(backend), cache_key)
        entry = self._launchers.get(key)
        if entry is None or entry[0] is not backend:
            made = backend.launcher(kernels, state, self.num_blocks, cache_key, self.run_cache, self.stack_keys, error_flags)
            entry = self._launchers[key] = (backend, made)
        return entry[1]

    # ----- lanes: more members than rows --------------------------------------------------------
    def run_lanes(
        self,
        args: Sequence[Any],
        backend: Backend,
        lanes: int,
        max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH,
        cache_key: Any = None,
        max_steps: int | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> LaneOutcome:
        """Run the program for every member of the flat input leaves on `lanes` rows: whenever a
        member halts, its lane stores the member's results and starts the next member, inside
        the backend's loop (the refill block, `state_ops.LaneRefill`). The loop runs in chunks
        of about the backend's `launch_seconds` (one chunk when None): between chunks
        `on_progress(finished members)` is called, and a KeyboardInterrupt stops the run with
        the results finished by the last chunk. Errors of members (stack overflow, `max_steps`)
        do not stop the others; the outcome carries them."""
        if max_stack_depth < 1:
            raise ValueError(f"max_stack_depth must be at least 1, got {max_stack_depth}")
        check_max_steps(max_steps)
        with backend.scope(args):
            pending = self.pending_inputs(args, backend)
            members = max(int(array.shape[0]) for array in pending)
            window = LaneWindow(pending, members, tuple(int(a.shape[0]) == 1 for a in pending))
            results = LaneResults(self, members, max_steps is not None)
            interrupt = None
            try:
                for finished in self.lane_flushes(iter([window]), backend, lanes, max_stack_depth, cache_key, max_steps):
                    results.put(finished)
                    if on_progress is not None:
                        on_progress(int(results.finished.sum()))
            except KeyboardInterrupt as stopped:
                interrupt = stopped
            outputs = [
                backend.asarray(results.values[state_ops.register_key(name)], self.variables[name].type.dtype)
                for name in self.outputs
            ]
            flags = {key: results.values[key] for key in results.flag_keys}
            error: BaseException | None = interrupt
            if error is None:
                error = self.lane_member_errors(backend, flags, max_stack_depth, max_steps)
            return LaneOutcome(outputs, results.finished, flags, error)

    def lane_flushes(
        self,
        windows: Iterator[LaneWindow],
        backend: Backend,
        lanes: int,
        max_stack_depth: int,
        cache_key: Any,
        max_steps: int | None,
    ) -> Iterator[FinishedMembers]:
        """Run the members of `windows` (blocks of members' arguments, numbered on from 0) on
        `lanes` rows, in chunks (see `run_lanes`); yield the members each chunk finished. A
        window's arguments are put in place once every member of the one before has started
        (the run pauses for it), so the lanes never drain between windows."""
        first = next(windows)
        upcoming = next(windows, None)
        counting = max_steps is not None
        layout = self.lane_layout(first, lanes, max_stack_depth, counting)
        state = self.initial_lane_state(backend, first, layout, lanes, max_stack_depth, max_steps, upcoming is not None)
        kernels = [*self.kernels(backend, counting), state_ops.LaneRefill(layout, backend)]
        shapes = tuple(tuple(int(d) for d in a.shape) for a in first.arrays)
        key = None if cache_key is None else ("abir.lanes", cache_key, layout.ring_rows, shapes, counting)
        chunk = FIRST_LANE_CHUNK if backend.launch_seconds is not None else MAX_LANE_CHUNK
        end = first.count
        while True:
            state[state_ops.LANE_BUDGET] = backend.asarray(np.array([chunk], np.int32))
            start = time.perf_counter()
            state = dict(backend.run(kernels, state, layout.final_halt, key, self.run_cache, self.stack_keys, {}))
            state.pop(STATUS_KEY, None)
            self.last_stats = backend.last_stats
            finished = self._take_finished(backend, state, layout)
            if finished is not None:
                yield finished
            saved = np.array(backend.to_numpy(state[state_ops.LANE_SAVED_PC]))
            all_started = int(backend.to_numpy(state[state_ops.LANE_NEXT])[0]) >= end
            if upcoming is not None and all_started:
                end = self._next_window(backend, state, layout, upcoming, end, saved)
                upcoming = next(windows, None)
                state[state_ops.LANE_MORE] = backend.asarray(np.array([int(upcoming is not None)], np.int32))
            elif int(saved.min()) >= layout.final_halt:
                return
            state[state_ops.PC] = backend.asarray(saved)
            used = chunk - int(backend.to_numpy(state[state_ops.LANE_BUDGET])[0])
            if backend.launch_seconds is not None and used > 0:
                pace = used / max(time.perf_counter() - start, 1e-4)
                chunk = int(min(max(pace * backend.launch_seconds, FIRST_LANE_CHUNK), MAX_LANE_CHUNK))

    def _next_window(
        self, backend: Backend, state: State, layout: state_ops.LaneLayout, window: LaneWindow, end: int, saved: np.ndarray
    ) -> int:
        """Put `window`'s arguments in place as members `end` on (every member before has
        started); lanes that halted for lack of members go back to the refill block. The new end."""
        for position, array in enumerate(window.arrays):
            state[state_ops.pending_key(position)] = array
        state[state_ops.LANE_BASE] = backend.asarray(np.array([end], np.int32))
        state[state_ops.LANE_END] = backend.asarray(np.array([end + window.count], np.int32))
        saved[saved >= layout.final_halt] = layout.block
        return end + window.count

    def _take_finished(self, backend: Backend, state: State, layout: state_ops.LaneLayout) -> FinishedMembers | None:
        """The members in the rings of `state` (host copies of their results), the rings
        emptied (`LANE_FILLED` back to 0); None when they hold none."""
        rows = int(backend.to_numpy(state[state_ops.LANE_FILLED])[0])
        if rows == 0:
            return None
        # whole rings to the host, sliced there: a slice on the device compiles per length
        members = np.asarray(backend.to_numpy(state[state_ops.RING_MEMBER]))[:rows]
        held = members >= 0
        values = {key: np.asarray(backend.to_numpy(state[state_ops.ring_key(key)]))[:rows][held] for key in layout.results}
        state[state_ops.LANE_FILLED] = backend.zeros((1,), np.int32)
        return FinishedMembers(members[held], values)

    def pending_inputs(self, args: Sequence[Any], backend: Backend) -> list[Any]:
        """Each input leaf checked and cast to its input type, as a backend array of its own
        rows: every member's (N) or one shared by all (1)."""
        types = [self.variables[name].type for name in self.inputs]
        if len(args) != len(types):
            raise TypeError(f"the program takes {len(types)} input(s) ({', '.join(self.inputs)}), got {len(args)}")
        batch_size_of(
            f"'{self.name}'",
            [tuple(getattr(a, "shape", ())) for a in args],
            lambda: [f"input {n!r}" for n in self.inputs],
        )
        pending = []
        for name, want, leaf in zip(self.inputs, types, args, strict=True):
            _, (array,) = prepare_inputs([name], [want], [leaf], backend, for_run=True)
            pending.append(backend.asarray(array, np.dtype(want.dtype)))
        return pending

    def lane_layout(
        self, window: LaneWindow, lanes: int, max_stack_depth: int, counting: bool
    ) -> state_ops.LaneLayout:
        """What the refill block of a run on `lanes` rows, of members in windows like
        `window`, reads and resets."""
        results = (*(state_ops.register_key(name) for name in self.outputs), *lane_flag_keys(counting))
        shapes = self.state_shapes(lanes, max_stack_depth)
        inputs = tuple(state_ops.register_key(name) for name in self.inputs)
        resets = tuple(
            (key, np.full((), state_ops.flag_normal_value(key), dtype))
            for key, (_, dtype) in shapes.items()
            if key != state_ops.PC and not state_ops.is_stack_key(key) and key not in inputs
        )
        if counting:
            resets += ((state_ops.STEPS_LEFT, np.zeros((), np.int32)), (state_ops.STOPPED_AT, np.full((), -1, np.int32)))
        ring_rows = min(max(RING_BYTES // (lanes * self._lane_result_bytes(shapes, results)), MIN_RING_ROWS), MAX_RING_ROWS)
        return state_ops.LaneLayout(self.num_blocks, ring_rows, inputs, window.shared, results, resets)

    def _lane_result_bytes(self, shapes: Mapping[str, tuple[tuple[int, ...], np.dtype]], results: Sequence[str]) -> int:
        """The bytes of one member's entries in the rings: its results and its number."""
        total = np.dtype(np.int32).itemsize
        for key in results:
            if key in shapes:
                shape, dtype = shapes[key][0][1:], shapes[key][1]
            elif key in state_ops.STEP_LIMIT_KEYS:
                shape, dtype = (), np.dtype(np.int32)
            else:  # an input register returned as an output
                var = self.variables[key.removeprefix(state_ops.register_key(""))].type
                shape, dtype = tuple(var.shape), var.dtype
            total += math.prod(shape) * np.dtype(dtype).itemsize
        return total

    def initial_lane_state(
        self,
        backend: Backend,
        window: LaneWindow,
        layout: state_ops.LaneLayout,
        lanes: int,
        max_stack_depth: int,
        max_steps: int | None,
        more: bool,
    ) -> State:
        """Every lane at the refill block without a member (the first refill starts them), the
        arguments of `window`'s members pending and the rings empty (`state_ops.LaneLayout`)."""
        # the input registers' values are the first refill's to set
        unset = [np.zeros((lanes, *(int(d) for d in a.shape[1:])), np.dtype(backend.type_of(a).dtype)) for a in window.arrays]
        state = self.initial_state(backend, [backend.asarray(a) for a in unset], lanes, max_stack_depth, max_steps)
        state[state_ops.PC] = backend.asarray(np.full(lanes, layout.block, np.int32))
        state[state_ops.LANE_MEMBER] = backend.asarray(np.full(lanes, -1, np.int32))
        state[state_ops.LANE_NEXT] = backend.asarray(np.zeros(1, np.int32))
        state[state_ops.LANE_BASE] = backend.asarray(np.zeros(1, np.int32))
        state[state_ops.LANE_END] = backend.asarray(np.array([window.count], np.int32))
        state[state_ops.LANE_MORE] = backend.asarray(np.array([int(more)], np.int32))
        state[state_ops.LANE_FILLED] = backend.zeros((1,), np.int32)
        state[state_ops.LANE_BUDGET] = backend.asarray(np.array([MAX_LANE_CHUNK], np.int32))
        state[state_ops.LANE_SAVED_PC] = backend.zeros((lanes,), np.int32)
        state[state_ops.RING_MEMBER] = backend.zeros((layout.ring_rows, lanes), np.int32)
        if max_steps is not None:
            state[state_ops.LANE_MAX_STEPS] = backend.asarray(np.array([max_steps], np.int32))
        for position, array in enumerate(window.arrays):
            state[state_ops.pending_key(position)] = array
        for key in layout.results:
            template = state[key]
            ring = (layout.ring_rows, lanes, *(int(d) for d in template.shape[1:]))
            state[state_ops.ring_key(key)] = backend.zeros(ring, np.dtype(backend.type_of(template).dtype))
        return state

    def lane_member_errors(
        self, backend: Backend, flags: Mapping[str, np.ndarray], max_stack_depth: int, max_steps: int | None
    ) -> Exception | None:
        """The error the members' flags of a run with lanes call for (members named by their
        index among all members), or None."""
        try:
            self._raise_errors(backend, dict(flags), max_stack_depth)
            if max_steps is not None:
                self._raise_step_limit(backend, dict(flags), max_steps)
        except (StackOverflowError, StackUnderflowError, StepLimitError) as error:
            return error
        return None

    # ----- errors ---------------------------------------------------------------------------
    def _describe(self, block: int, pushing: bool = False) -> str:
        """Where members at `block` are: its function and line (`pushing`: the lines of the
        calls its pushes serve, for an overflow)."""
        plan = self.plans[block]
        if not plan.function:
            return f"the program (vm block {block})"
        where = f"function {python_name(plan.function)!r}"
        if pushing and plan.call_locations:
            where += f" at {' or '.join(plan.call_locations)}"
        elif plan.location is not None:
            where += f" at {plan.location}"
        callee = self.plans[plan.callee].function if plan.callee is not None else None
        if callee and callee != plan.function:
            where += f" calling {python_name(callee)!r}"
        return f"{where} (vm block {block} of IR function @{plan.function})"

    def _raise_run_errors(
        self,
        backend: Backend,
        max_stack_depth: int,
        max_steps: int | None,
        names: MemberNames,
        flags: dict[str, np.ndarray],
    ) -> None:
        """The errors of a staged run, from host copies of its error flags."""
        self._raise_errors(backend, flags, max_stack_depth, names)
        if max_steps is not None:
            self._raise_step_limit(backend, flags, max_steps, names)

    def _raise_errors(
        self, backend: Backend, state: State, max_stack_depth: int, names: MemberNames | None = None
    ) -> None:
        overflow = backend.to_numpy(state[state_ops.OVERFLOW])
        if overflow.any():
            names = names or MemberNames()
            members = np.flatnonzero(overflow)
            raise StackOverflowError(
                f"stack overflow in {self._describe(int(overflow[members[0]]) - 1, pushing=True)}: "
                f"{names.describe(members)} recursed deeper than max_stack_depth={max_stack_depth}. Pass a larger "
                f"max_stack_depth= (e.g. max_stack_depth={2 * max_stack_depth}), or check that the "
                "recursion terminates",
                **names.attributes(members),
            )
        underflow = backend.to_numpy(state[state_ops.UNDERFLOW])
        if underflow.any():
            names = names or MemberNames()
            members = np.flatnonzero(underflow)
            raise StackUnderflowError(
                f"stack underflow in {self._describe(int(underflow[members[0]]) - 1)}: "
                f"{names.describe(members)} restored a value that was never saved. This is a bug in abir's "
                "lowering (or in hand-written vm IR); please report it with the program",
                **names.attributes(members),
            )


    def _raise_step_limit(self, backend: Backend, state: State, max_steps: int, names: MemberNames | None = None) -> None:
        stopped_at = backend.to_numpy(state[state_ops.STOPPED_AT])
        stopped = np.flatnonzero(stopped_at >= 0)
        if not len(stopped):
            return
        names = names or MemberNames()
        places = []
        for block in sorted({int(stopped_at[m]) for m in stopped}):
            members = stopped[stopped_at[stopped] == block]
            places.append(f"{names.describe(members)} in {self._describe(block)}")
        shown = "; ".join(places[:4]) + (f"; and {len(places) - 4} more places" if len(places) > 4 else "")
        raise StepLimitError(
            f"max_steps={max_steps} reached: {len(stopped)} member{'s' if len(stopped) > 1 else ''} still "
            f"running ({shown}). Each member may run at most max_steps blocks of the program; pass a "
            "larger max_steps= if the program is just long, or check that its loops and recursion end "
            "for these members (run them with dry_run=True)",
            blocks=[int(stopped_at[m]) for m in stopped],
            locations=[self.plans[int(stopped_at[m])].location for m in stopped],
            **names.attributes(stopped),
        )


class SteadyRun:
    """`Machine.run` on input leaves known to be of the input types, `batch` members each (see
    `Machine.steady_run`): the initial state, the backend's run (its `Backend.launcher` where it
    has one) and the error checks, nothing else."""

    def __init__(self, machine: Machine, backend: Backend, batch: int, max_stack_depth: int, cache_key: Any):
        self.machine = machine
        self.backend = backend
        self.batch = batch
        self.max_stack_depth = max_stack_depth
        self.cache_key = cache_key
        self.error_flags = {state_ops.OVERFLOW: 0, state_ops.UNDERFLOW: 0}
        self.inputs = tuple(state_ops.register_key(name) for name in machine.inputs)
        self.zeros: State | None = None
        """The initial state but the inputs, kept where `Machine._reused_zero_state` would
        reuse it."""
        shapes = machine.state_shapes(batch, max_stack_depth)
        size = sum(math.prod(shape) * dtype.itemsize for shape, dtype in shapes.values())
        self.keeps_zeros = backend.immutable_arrays and size <= REUSED_ZERO_STATE_BYTES
        self.launcher: Callable[[State], State] | None = None

    def initial_state(self, leaves: Sequence[Any]) -> State:
        """`Machine.initial_state` for `leaves`."""
        if self.zeros is None:
            state = self.machine.initial_state(self.backend, leaves, self.batch, self.max_stack_depth)
            if self.keeps_zeros:
                self.zeros = {key: value for key, value in state.items() if key not in self.inputs}
            return state
        state = dict(self.zeros)
        state.update(zip(self.inputs, leaves, strict=True))
        return state

    def __call__(self, leaves: Sequence[Any]) -> list[Any]:
        machine, backend = self.machine, self.backend
        state = self.initial_state(leaves)
        kernels = machine.kernels(backend)
        if self.launcher is None:
            self.launcher = machine._launcher(backend, kernels, state, self.cache_key, self.error_flags)
        state = machine._launched(backend, kernels, state, self.cache_key, self.error_flags, self.launcher)
        machine.last_stats = backend.last_stats
        status = state.pop(STATUS_KEY, None)
        if status is None or status & FLAGGED:
            machine._raise_errors(backend, state, self.max_stack_depth)
        return machine._outputs(backend, state)


@dataclass
class LaneOutcome:
    """What a run with lanes (`Machine.run_lanes`) leaves: `outputs` (per output, `[N, ...]`
    backend arrays of every member's result; rows of members not finished hold zeros),
    `finished` (bool `[N]`, on the host: the members that halted, normally or by an error),
    `flags` (the members' error flags, by state key, `[N]` on the host) and `error` (what
    stopped the run or what some members raised, else None)."""

    outputs: list[Any]
    finished: np.ndarray
    flags: dict[str, np.ndarray]
    error: BaseException | None

    @property
    def succeeded(self) -> np.ndarray:
        """The members that halted without an error (bool `[N]`)."""
        ok = self.finished.copy()
        for key, flag in self.flags.items():
            ok &= flag == state_ops.flag_normal_value(key)
        return ok


def lane_flag_keys(counting: bool) -> tuple[str, ...]:
    """The error flags a run with lanes keeps per member (with `max_steps`: `stopped_at` too)."""
    return (state_ops.OVERFLOW, state_ops.UNDERFLOW, *((state_ops.STOPPED_AT,) if counting else ()))


@dataclass(frozen=True)
class LaneWindow:
    """A block of members for a run with lanes: per input, the members' arguments as a backend
    array (`count` rows or more; one row when `shared[i]`: every member's)."""

    arrays: list[Any]
    count: int
    shared: tuple[bool, ...]


@dataclass(frozen=True)
class FinishedMembers:
    """Members a chunk of a run with lanes finished: their numbers and, by result key (the
    output registers, then `lane_flag_keys`), their values (NumPy, one row per member)."""

    members: np.ndarray
    values: dict[str, np.ndarray]


class LaneResults:
    """The results of a run with lanes gathered on the host: `values` by result key (`[N, ...]`
    NumPy arrays; members not finished hold zeros, or a flag's normal value), and `finished`
    (bool `[N]`), filled by `put`."""

    def __init__(self, machine: Machine, members: int, counting: bool):
        self.flag_keys = lane_flag_keys(counting)
        types = {state_ops.register_key(name): machine.variables[name].type for name in machine.outputs}
        self.values = {key: np.zeros((members, *t.shape), t.dtype) for key, t in types.items()}
        for key in self.flag_keys:
            self.values[key] = np.full(members, state_ops.flag_normal_value(key), np.int32)
        self.finished = np.zeros(members, bool)

    def put(self, finished: FinishedMembers) -> None:
        for key, values in self.values.items():
            values[finished.members] = finished.values[key]
        self.finished[finished.members] = True


class MemberNames:
    """How a run names its members to the user: by their index in the batch, or, for a run of
    the calls of a `jax.vmap` folded into one batch (`mapped`: the sizes of the vmapped axes,
    outermost first; row `(v_1 * V_2 + v_2) * B + b` is member `b` of the call at `(v_1, v_2)`),
    by their index in their call's batch and the call's vmap indices."""

    def __init__(self, batch: int = 0, mapped: Sequence[int] = ()):
        self.mapped = tuple(int(size) for size in mapped)
        self.per_call = batch // max(1, int(np.prod(self.mapped)))

    def attributes(self, members: np.ndarray) -> dict[str, Any]:
        """The error's `members` (in their call's batch) and `vmap_indices`."""
        if not self.mapped:
            return {"members": members.tolist(), "vmap_indices": [() for _ in members]}
        calls, within = np.divmod(members, self.per_call)
        indices = np.unravel_index(calls, self.mapped)
        return {
            "members": within.tolist(),
            "vmap_indices": [tuple(int(axis[i]) for axis in indices) for i in range(len(members))],
        }

    def describe(self, members: np.ndarray, shown: int = 8) -> str:
        """`batch member 3`, `batch members 1, 4`; under vmap `batch member 1 (vmap index 2)`."""
        found = self.attributes(members)
        names = [str(m) for m in found["members"][:shown]]
        if self.mapped:
            names = [
                f"{name} (vmap {'index' if len(v) == 1 else 'indices'} {', '.join(map(str, v))})"
                for name, v in zip(names, found["vmap_indices"], strict=False)
            ]
        more = f" and {len(members) - shown} more" if len(members) > shown else ""
        return f"batch member{'s' if len(members) > 1 else ''} {', '.join(names)}{more}"


def staged_leaves(backend: Backend, leaves: Sequence[Any]) -> bool:
    """Whether some of a run's input leaves belong to a computation being traced."""
    return any(backend.is_traced(leaf) for leaf in leaves)


def check_max_steps(max_steps: Any) -> None:
    """`max_steps` is None or a positive int that fits an int32 counter."""
    if max_steps is None:
        return
    if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer):
        raise TypeError(f"max_steps must be None or a positive int, got {type(max_steps).__name__}")
    if not 1 <= max_steps <= np.iinfo(np.int32).max:
        raise ValueError(f"max_steps must be between 1 and {np.iinfo(np.int32).max} (or None), got {max_steps}")


def python_name(symbol: str) -> str:
    """The Python function an IR function symbol comes from: specializations per argument
    structure (`fib.s1`) or per argument types (`scale.t2`) add a dotted suffix."""
    return symbol.split(".", 1)[0]


def compile_machine(vm_module: ModuleOp, verify: bool = True) -> Machine:
    """Read a vm module once and plan every block (kernels are built per backend on demand);
    `verify=False` for a module the caller has just verified (`lower_to_vm` does)."""
    if verify:
        vm_module.verify()
    program = _find_program(vm_module)
    blocks = list(program.blocks)
    successors = _successors(blocks)
    halt, tail, pointers = len(blocks), tail_start(successors), stack_pointers(blocks)
    returns = static_returns(blocks)
    plans = [
        _plan_block(block, halt, pointers, block.number >= tail, tuple(sorted(successors[block.number])), returns)
        for block in blocks
    ]
    return Machine(
        program.sym_name.data,
        _variables(vm_module),
        [ref.string_value() for ref in program.inputs.data],
        [ref.string_value() for ref in program.outputs.data],
        plans,
        pointers,
    )
