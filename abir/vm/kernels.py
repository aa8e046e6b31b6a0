"""Block plans and kernels: each `vm.block` of a program as a plan and one generated function.

`plan_blocks` reads a `vm.program`'s blocks once and turns each into a `BlockPlan`: a list of
small instructions over precomputed data (state keys, SSA slot numbers, constants, prim names),
and from those the source of one straight-line Python function per block (`KernelCode`). A
kernel (`BlockKernel`), built once per backend by binding that function to the backend's
methods, is then a plain function `state -> state` calling only backend methods, so it can run
eagerly (NumPy) or be traced (JAX, TF):

    mask = (pc == block)                     # members standing at this block
    values = [...]                           # the block's SSA values, full batch (junk rows)
    state  = masked writes / pushes / pops, then the pc update
"""


from __future__ import annotations

import linecache
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import CodeType
from typing import Any

import numpy as np
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, SSAValue

from abir import array_prims
from abir.backends.base import (
    Backend,
    State,
    Writes,
    apply_writes,
)
from abir.dialects import vm
from abir.dialects.functional import decode_params
from abir.vm import state_ops
from abir.vm.state_ops import Frame
from abir.vm.values import call_opaque_prim, constant_array, rank_padding, result_dtype


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
    stack_pops: tuple[tuple[str, str, int], ...] = ()
    """(stack key, its stack pointer key, the most rows the block may pop from it: pops and
    returns counted whether or not they take back a push of the same block), for each stack the
    block pops; the rows below a member's pointer that a sweep's pushes may overwrite lie within
    the sum of these over the sweep's blocks (`abir.backends.reverse_scheme`)."""
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


def _operand(slot: int, register: str | None, pad: int) -> str:
    """A builtin's operand: SSA value `slot`, or `register`'s value, with `pad` event axes."""
    operand = _value(slot) if register is None else f"regs[{register!r}]"
    return f"expand({operand}, {pad})" if pad else operand


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
    """A builtin `vm.prim`; operands of lower event rank get `padding` axes after the batch.
    `registers`, when given, names per operand a register to read it from instead of its slot
    (`None`: the slot), see `_branch_condition_from_registers`."""

    slot: int
    name: str
    args: tuple[int, ...]
    padding: tuple[int, ...]
    dtype: np.dtype
    registers: tuple[str | None, ...] = ()

    def render(self, source: _KernelSource) -> None:
        registers = self.registers or (None,) * len(self.args)
        operands = ", ".join(
            _operand(a, key, pad) for a, key, pad in zip(self.args, registers, self.padding, strict=True)
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


# ----- a branch's condition from the registers its block wrote --------------------------------


def _slots_read(instruction: Instruction) -> tuple[int, ...]:
    """The SSA slots an instruction reads."""
    match instruction:
        case Builtin() | ArrayPrim() | Opaque():
            return instruction.args
        case Write():
            return (instruction.slot,)
        case Branch() | ExitIf():
            return (instruction.cond,)
    return ()


def _slots_computed(instruction: Instruction) -> tuple[int, ...]:
    """The SSA slots an instruction computes (not a constant's or a register read's)."""
    match instruction:
        case Builtin() | ArrayPrim():
            return (instruction.slot,)
        case Opaque():
            return instruction.slots
    return ()


def _registers_changed(instruction: Instruction) -> tuple[str, ...]:
    """The register keys an instruction may change."""
    match instruction:
        case Write():
            return (instruction.key,)
        case Restore():
            return tuple(state_ops.register_key(name) for _, names in instruction.groups for name in names)
        case Descend():
            return (state_ops.register_key(instruction.descent.counter),)
    return ()


def _registers_holding(instructions: Sequence[Instruction]) -> dict[int, str]:
    """Per SSA slot written to a register, a register that holds it when the block ends (for
    every member of the mask at the write): its last write, with no restore of it after."""
    last: dict[str, int | None] = {}
    for instruction in instructions:
        for key in _registers_changed(instruction):
            last[key] = instruction.slot if isinstance(instruction, Write) else None
    return {slot: key for key, slot in last.items() if slot is not None}


def _branch_condition_from_registers(instructions: Sequence[Instruction]) -> tuple[Instruction, ...]:
    """The block's instructions, with each condition of a branch or side exit (`vm.exit_if`)
    computed from the registers the block wrote its operands to before it, just before it,
    where that applies.

    A condition that reads a fresh value the block also writes (collatz's next `n`, newton's
    next `x` in `abs(step) > 1e-12 * x`) makes XLA compute that value twice: fused into the
    register's masked write and again into the program counter's (docs/performance.md,
    "Structured runs (JAX)"). Read from the register, which is materialized anyway, it is
    computed once. It applies to the builtins the condition is computed through
    (`_condition_cone`: each used by the cone or the condition's instruction only, so still
    computed once), and to their operands the block computes (a constant or a register read
    costs nothing to recompute) and writes last to a register before the branch or exit (no
    later write or restore of it before)."""
    result = list(instructions)
    for position, instruction in enumerate(instructions):
        if isinstance(instruction, Branch | ExitIf):  # moving a cone keeps every later position
            result = _condition_from_registers(result, position)
    return tuple(result)


def _condition_from_registers(instructions: list[Instruction], position: int) -> list[Instruction]:
    """`instructions` with the condition of the branch or exit at `position` computed from
    registers just before it (`_branch_condition_from_registers`), where that applies."""
    exit_ = instructions[position]
    assert isinstance(exit_, Branch | ExitIf)
    cone = _condition_cone(instructions, exit_.cond)
    before = instructions[:position]
    computed = {slot for instruction in before for slot in _slots_computed(instruction)}
    holding = _registers_holding(before)
    moved = []
    for at in sorted(cone):
        builtin = instructions[at]
        assert isinstance(builtin, Builtin)
        registers = tuple(holding.get(a) if a in computed and a not in cone.values() else None for a in builtin.args)
        moved.append(replace(builtin, registers=registers) if any(registers) else builtin)
    if not any(m is not instructions[at] for m, at in zip(moved, sorted(cone), strict=True)):
        return instructions
    # A member of the mask here was in the mask at every write before (side exits only narrow
    # it), so the register holds its written value; a member outside the mask reads its
    # register's old value, and the masked write of the pc leaves it where it is.
    kept = [i for at, i in enumerate(before) if at not in cone]
    return [*kept, *moved, *instructions[position:]]


def _condition_cone(instructions: Sequence[Instruction], condition: int) -> dict[int, int]:
    """The builtins a branch's or exit's `condition` is computed through, `{position: slot}`:
    the condition's own builtin, and each builtin an operand of the cone comes from whose every
    use is in the cone (empty when the condition has another use or is not a builtin's)."""
    reads: dict[int, int] = {}
    for instruction in instructions:
        for slot in _slots_read(instruction):
            reads[slot] = reads.get(slot, 0) + 1
    producers = {i.slot: position for position, i in enumerate(instructions) if isinstance(i, Builtin)}
    if condition not in producers or reads.get(condition) != 1:
        return {}
    cone = {producers[condition]: condition}
    grown = True
    while grown:
        grown = False
        uses_in_cone: dict[int, int] = {}
        for position in cone:
            for slot in _slots_read(instructions[position]):
                uses_in_cone[slot] = uses_in_cone.get(slot, 0) + 1
        for slot, uses in uses_in_cone.items():
            position = producers.get(slot)
            if position is not None and position not in cone and uses == reads[slot]:
                cone[position] = slot
                grown = True
    return cone


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


def _stack_pops(ops: Sequence[Operation], pointers: Mapping[str, str]) -> tuple[tuple[str, str, int], ...]:
    """`BlockPlan.stack_pops` of a block's ops."""
    pops: dict[tuple[str, str], int] = {}
    for op in ops:
        if isinstance(op, vm.PopOp):
            for name in _var_names(op):
                key = (state_ops.stack_key(name), pointers[name])
                pops[key] = pops.get(key, 0) + 1
        elif isinstance(op, vm.ReturnOp):
            key = (state_ops.PC_STACK, state_ops.PC_SP)
            pops[key] = pops.get(key, 0) + 1
    return tuple((stack, pointer, count) for (stack, pointer), count in pops.items())


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
    a descent's exit, and for a return the return block of every call (or descent) it may
    return from (`vm.block_return_sites`; the halt index is not a block)."""
    sites = vm.block_return_sites(blocks, _function_of)
    successors = []
    for block in blocks:
        exits = set(vm.block_successors(block, (vm.TargetRole.NEXT, vm.TargetRole.CALLEE)))
        exits |= {back for _, back in sites.get(block.number, [])}
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


def static_returns(blocks: Sequence[vm.BlockOp]) -> dict[int, int] | None:
    """The return block of every block that returns, when each of them may return from one call
    only and nothing else pushes a return block (no `vm.descend`): a member returning there then
    always goes back to that call's return block, and the program needs no program-counter
    stack. None when some return may go back to several places (recursion, a function called
    from two places or tail-called from a function called elsewhere, or a return from the
    activation members start in: they enter it without a call), which then reads the stack."""
    if any(isinstance(op, vm.DescendOp) for block in blocks for op in block.body.block.ops):
        return None
    running = vm.activations(blocks, _function_of)
    returns: dict[int, int] = {}
    for number, sites in vm.block_return_sites(blocks, _function_of).items():
        if vm.PROGRAM_START in running[number] or len(sites) != 1:
            return None
        returns[number] = sites[0][1]
    return returns


def _without_call_stack(ops: Sequence[Operation], number: int, returns: Mapping[int, int]) -> list[Operation]:
    """A block's ops with its call or return turned into a jump (`static_returns`): the call
    to its callee's first block, the return to its one return block."""
    if isinstance(ops[-1], vm.CallOp):
        return [*ops[:-1], vm.JumpOp(ops[-1].target.value.data)]
    if isinstance(ops[-1], vm.ReturnOp):
        return [*ops[:-1], vm.JumpOp(returns[number])]
    return list(ops)


def _plan_block(
    block: vm.BlockOp,
    halt: int,
    pointers: Mapping[str, str],
    in_tail: bool = False,
    successors: tuple[int, ...] = (),
    returns: Mapping[int, int] | None = None,
) -> BlockPlan:
    """The plan of one block; with `returns` (`static_returns`), its call or return is a jump."""
    slots = _Slots()
    ops = list(block.body.block.ops)
    callee = ops[-1].target.value.data if isinstance(ops[-1], vm.CallOp) else None
    if returns is not None:
        ops = _without_call_stack(ops, block.number, returns)
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
        stack_pops=_stack_pops(ops, pointers),
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
    the same backend calls, in op order (but the builtins a branch's or exit's condition is
    computed through, which `_branch_condition_from_registers` moves to it), whatever the backend (NumPy runs
    them, JAX and TF trace them)."""

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
        for instruction in _branch_condition_from_registers(instructions):
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
    `writes` (the attribute) gives their static count per stack key, `pops` the rows it may pop
    per stack (`BlockPlan.stack_pops`), `register_writes` the
    per-member keys `split` may change (the others come back as the same objects). Calling the kernel on a
    full state (`state -> state`, the plain `Kernel` protocol) applies the requests itself.
    `split` is the block's generated function (`KernelCode`)."""

    split: Callable[[State, State], tuple[State, Writes]]

    def __init__(self, plan: BlockPlan, backend: Backend, halt: int):
        self.plan = plan
        self.backend = backend
        self.halt = halt
        self.writes = dict(plan.stack_writes)
        self.pops = plan.stack_pops
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


def plan_blocks(blocks: Sequence[vm.BlockOp]) -> tuple[list[BlockPlan], dict[str, str]]:
    """The plan of every block of a program, and the stack pointer key of each stack variable
    (`stack_pointers`)."""
    successors = _successors(blocks)
    halt, tail, pointers = len(blocks), tail_start(successors), stack_pointers(blocks)
    returns = static_returns(blocks)
    plans = [
        _plan_block(block, halt, pointers, block.number >= tail, tuple(sorted(successors[block.number])), returns)
        for block in blocks
    ]
    return plans, pointers
