"""The program-counter machine: a `vm.program` compiled into one kernel per block.

`compile_machine` reads the vm module once and turns each `vm.block` into a list of small
steps over precomputed data (variable names, SSA slot numbers, constants, prim names). A
kernel, built once per backend, is then a plain function `state -> state` that replays those
steps calling only backend methods, so it can run eagerly (NumPy) or be traced (JAX, TF):

    mask = (pc == block)                     # members standing at this block
    values = [...]                           # the block's SSA values, full batch (junk rows)
    state  = masked writes / pushes / pops, then the pc update

`Machine.run` builds the initial state, lets the backend loop over steps, checks the per-member
error flags and returns the output variables' registers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue

from abir.backends.base import Backend, Kernel, RunStats, State
from abir.dialects import vm
from abir.errors import StackOverflowError, StackUnderflowError
from abir.opaque import lookup_opaque
from abir.types import TensorType, tensor_type_of
from abir.vm import state_ops
from abir.vm.inputs import prepare_inputs
from abir.vm.state_ops import Frame, Writes
from abir.vm.values import align_operands, constant_array, rank_padding, result_dtype

Env = list[Any]
Step = Callable[[Backend, Frame, Env, Any], None]
"""One op of a kernel: (backend, frame, SSA values by slot, mask); updates the frame."""

DEFAULT_MAX_STACK_DEPTH = 15


@dataclass(frozen=True)
class Variable:
    """A machine variable: name, per-member type and whether it has a stack."""

    name: str
    type: TensorType
    is_stack: bool


@dataclass(frozen=True)
class BlockPlan:
    """The precomputed body of one block: its steps and what a user error message needs."""

    index: int
    function: str | None
    steps: tuple[Step, ...]
    slots: int
    uses_stacks: bool
    callee: int | None
    stack_writes: tuple[tuple[str, int], ...] = ()
    """(stack key, number of write requests the block leaves for the backend), for each stack
    the block pushes onto (a pop of a value pushed in the same block cancels its request)."""
    register_writes: tuple[str, ...] = (state_ops.PC,)
    """The per-member state keys (registers, stack pointers, pc, error flags) the block's
    kernel may change; every other key comes back from `BlockKernel.split` untouched (the
    same object), so traced backends pass only these through their conditional."""
    in_tail: bool = False
    """Whether the block is in the program's tail: the blocks from `Machine.tail_start` on, from
    which members only move to later blocks until they halt. A member there has nothing left
    that others could share, so a sweeping execution may hold it until every live member is in
    the tail, and run each tail block once for all of them (a loop's members leaving one by one
    would otherwise run the exit path once per iteration)."""


# ----- steps -------------------------------------------------------------------------------


def _read_step(slot: int, var: str) -> Step:
    key = state_ops.register_key(var)

    def step(backend: Backend, frame: Frame, env: Env, mask: Any) -> None:
        env[slot] = frame.regs[key]

    return step


def _constant_step(slot: int, value: np.ndarray) -> Step:
    def step(backend: Backend, frame: Frame, env: Env, mask: Any) -> None:
        env[slot] = backend.asarray(value, value.dtype)

    return step


def _builtin_step(
    slot: int, name: str, args: tuple[int, ...], padding: tuple[int, ...], dtype: np.dtype
) -> Step:
    if not any(padding):

        def plain(backend: Backend, frame: Frame, env: Env, mask: Any) -> None:
            env[slot] = backend.builtin_prim(name, [env[a] for a in args], dtype)

        return plain

    def step(backend: Backend, frame: Frame, env: Env, mask: Any) -> None:
        operands = align_operands(backend, [env[a] for a in args], padding)
        env[slot] = backend.builtin_prim(name, operands, dtype)

    return step


def _opaque_step(slots: tuple[int, ...], symbol: str, args: tuple[int, ...]) -> Step:
    def step(backend: Backend, frame: Frame, env: Env, mask: Any) -> None:
        results = backend.call_opaque(lookup_opaque(symbol), [env[a] for a in args])
        if len(slots) == 1:
            results = (results,)
        if len(results) != len(slots):
            raise TypeError(
                f"opaque primitive @{symbol} returned {len(results)} values, expected {len(slots)}"
            )
        for slot, value in zip(slots, results, strict=True):
            env[slot] = value

    return step


def _write_step(var: str, slot: int) -> Step:
    def step(backend: Backend, frame: Frame, env: Env, mask: Any) -> None:
        state_ops.write(backend, frame, var, env[slot], mask)

    return step


PointerGroups = tuple[tuple[str, tuple[str, ...]], ...]
"""(stack pointer key, the variables of a push/pop/peek that share it), per pointer."""


def _push_step(groups: PointerGroups) -> Step:
    def step(backend: Backend, frame: Frame, env: Env, mask: Any) -> None:
        for pointer, names in groups:
            state_ops.push(backend, frame, names, pointer, mask)

    return step


def _restore_step(groups: PointerGroups, drop: bool) -> Step:
    def step(backend: Backend, frame: Frame, env: Env, mask: Any) -> None:
        for pointer, names in groups:
            state_ops.restore(backend, frame, names, pointer, mask, drop)

    return step


def _jump_step(target: int) -> Step:
    def step(backend: Backend, frame: Frame, env: Env, mask: Any) -> None:
        state_ops.set_pc(backend, frame, target, mask)

    return step


def _branch_step(cond: int, then_target: int, else_target: int) -> Step:
    targets = (np.int32(then_target), np.int32(else_target))

    def step(backend: Backend, frame: Frame, env: Env, mask: Any) -> None:
        choice = backend.builtin_prim("where", [env[cond], *targets], np.int32)
        state_ops.set_pc(backend, frame, choice, mask)

    return step


def _call_step(target: int, return_target: int) -> Step:
    def step(backend: Backend, frame: Frame, env: Env, mask: Any) -> None:
        state_ops.call(backend, frame, target, return_target, mask)

    return step


def _return_step() -> Step:
    def step(backend: Backend, frame: Frame, env: Env, mask: Any) -> None:
        state_ops.return_(backend, frame, mask)

    return step


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
    ops_of: dict[str, list[tuple[int, int]]] = {}
    for block in blocks:
        for position, op in enumerate(block.body.block.ops):
            if isinstance(op, vm.PushOp | vm.PopOp | vm.PeekOp):
                for name in _var_names(op):
                    ops_of.setdefault(name, []).append((block.number, position))
    owner: dict[tuple[tuple[int, int], ...], str] = {}
    return {
        name: state_ops.pointer_key(owner.setdefault(tuple(ops), name)) for name, ops in sorted(ops_of.items())
    }


def _pointer_groups(names: Sequence[str], pointers: Mapping[str, str]) -> PointerGroups:
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(pointers[name], []).append(name)
    return tuple((pointer, tuple(group)) for pointer, group in groups.items())


def _plan_op(op: Operation, slots: _Slots, block: int, halt: int, pointers: Mapping[str, str]) -> Step:  # noqa: C901
    """The step that executes one vm op."""
    match op:
        case vm.ReadOp():
            return _read_step(slots.define(op.res), op.var.string_value())
        case vm.ConstantOp():
            return _constant_step(slots.define(op.res), constant_array(op.value))
        case vm.PrimOp() if op.fn is not None:
            args = tuple(slots.use(a) for a in op.arguments)
            padding = rank_padding(op.arguments.types, op.res.types)
            return _builtin_step(
                slots.define(op.res[0]), op.fn.data, args, padding, result_dtype(op.res[0].type)
            )
        case vm.PrimOp():
            args = tuple(slots.use(a) for a in op.arguments)
            return _opaque_step(tuple(slots.define(r) for r in op.res), op.prim_name, args)
        case vm.WriteOp():
            return _write_step(op.var.string_value(), slots.use(op.value))
        case vm.PushOp():
            return _push_step(_pointer_groups(_var_names(op), pointers))
        case vm.PopOp() | vm.PeekOp():
            return _restore_step(_pointer_groups(_var_names(op), pointers), drop=isinstance(op, vm.PopOp))
        case vm.JumpOp():
            return _jump_step(op.target.value.data)
        case vm.BranchOp():
            return _branch_step(slots.use(op.cond), op.then_target.value.data, op.else_target.value.data)
        case vm.CallOp():
            return _call_step(op.target.value.data, op.return_target.value.data)
        case vm.ReturnOp():
            return _return_step()
        case vm.HaltOp():
            return _jump_step(halt)
    raise NotImplementedError(f"the machine cannot execute {op.name}")


STACK_OPS = (vm.PushOp, vm.PopOp, vm.PeekOp, vm.CallOp, vm.ReturnOp)


def _stack_writes(ops: Sequence[Operation]) -> tuple[tuple[str, int], ...]:
    """The write requests a block's kernel leaves per stack (as `state_ops` builds them)."""
    pending: dict[str, int] = {}

    def pop(key: str) -> None:
        if pending.get(key):
            pending[key] -= 1

    for op in ops:
        if isinstance(op, vm.PushOp):
            for name in _var_names(op):
                pending[state_ops.stack_key(name)] = pending.get(state_ops.stack_key(name), 0) + 1
        elif isinstance(op, vm.PopOp):
            for name in _var_names(op):
                pop(state_ops.stack_key(name))
        elif isinstance(op, vm.CallOp):
            pending[state_ops.PC_STACK] = pending.get(state_ops.PC_STACK, 0) + 1
        elif isinstance(op, vm.ReturnOp):
            pop(state_ops.PC_STACK)
    return tuple((key, count) for key, count in pending.items() if count)


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
        elif isinstance(op, vm.ReturnOp):
            keys[state_ops.PC_SP] = keys[state_ops.UNDERFLOW] = None
    return tuple(keys)


def _successors(blocks: Sequence[vm.BlockOp]) -> list[set[int]]:
    """Each block's possible next blocks: jump and branch targets, a call's callee, and for a
    return the return block of every call of its function (the halt index is not a block)."""
    functions = [_function_of(block) for block in blocks]
    return_sites: dict[str | None, set[int]] = {}
    for block in blocks:
        term = block.body.block.last_op
        if isinstance(term, vm.CallOp):
            return_sites.setdefault(functions[term.target.value.data], set()).add(term.return_target.value.data)
    successors = []
    for index, block in enumerate(blocks):
        match block.body.block.last_op:
            case vm.JumpOp() as term:
                successors.append({term.target.value.data})
            case vm.BranchOp() as term:
                successors.append({term.then_target.value.data, term.else_target.value.data})
            case vm.CallOp() as term:
                successors.append({term.target.value.data})
            case vm.ReturnOp():
                successors.append(return_sites.get(functions[index], set()))
            case _:
                successors.append(set())
    return successors


def tail_start(blocks: Sequence[vm.BlockOp]) -> int:
    """The smallest index t such that every block from t on only moves members to later blocks
    (or halts): the program's tail (`BlockPlan.in_tail`)."""
    successors = _successors(blocks)
    start = len(blocks)
    while start > 0 and all(s > start - 1 for s in successors[start - 1]):
        start -= 1
    return start


def _function_of(block: vm.BlockOp) -> str | None:
    function = block.attributes.get("function")
    return function.data if isinstance(function, StringAttr) else None


def _plan_block(block: vm.BlockOp, halt: int, pointers: Mapping[str, str], in_tail: bool = False) -> BlockPlan:
    slots = _Slots()
    ops = list(block.body.block.ops)
    steps = tuple(_plan_op(op, slots, block.number, halt, pointers) for op in ops)
    terminator = ops[-1]
    return BlockPlan(
        index=block.number,
        function=_function_of(block),
        steps=steps,
        slots=len(slots.numbers),
        uses_stacks=any(isinstance(op, STACK_OPS) for op in ops),
        callee=terminator.target.value.data if isinstance(terminator, vm.CallOp) else None,
        stack_writes=_stack_writes(ops),
        register_writes=_register_writes(ops, pointers),
        in_tail=in_tail,
    )


class BlockKernel:
    """The kernel of one planned block on one backend.

    `split(regs, stacks) -> (regs, writes)` is the form backends run: `regs` holds the state's
    per-member arrays (a fresh dict the kernel may fill), `stacks` the `[D, B, ...]` stacks,
    read only; `writes` are the stack write requests to apply afterwards (`state_ops`).
    `writes` (the attribute) gives their static count per stack key, `register_writes` the
    per-member keys `split` may change (the others come back as the same objects). Calling the kernel on a
    full state (`state -> state`, the plain `Kernel` protocol) applies the requests itself."""

    def __init__(self, plan: BlockPlan, backend: Backend, halt: int):
        self.plan = plan
        self.backend = backend
        self.halt = halt
        self.writes = dict(plan.stack_writes)
        self.register_writes = plan.register_writes
        self.__name__ = f"block_{plan.index}"

    def split(self, regs: State, stacks: State) -> tuple[State, Writes]:
        backend, plan = self.backend, self.plan
        frame = Frame(regs, stacks)
        mask = state_ops.block_mask(backend, regs, plan.index)
        env: Env = [None] * plan.slots
        for step in plan.steps:
            step(backend, frame, env, mask)
        if plan.uses_stacks:
            state_ops.finish(backend, frame, plan.index, self.halt)
        return frame.regs, frame.writes

    def __call__(self, state: State) -> State:
        regs, stacks = state_ops.split_state(state)
        regs, writes = self.split(regs, stacks)
        return {**regs, **state_ops.apply_writes(self.backend, stacks, writes)}


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
        self.has_calls = any(plan.callee is not None for plan in plans)
        self.last_stats: RunStats | None = None
        self._kernels: dict[int, tuple[Backend, list[Kernel]]] = {}

    @property
    def num_blocks(self) -> int:
        return len(self.plans)

    def kernels(self, backend: Backend) -> list[Kernel]:
        """The block kernels for `backend` (built on first use, then reused)."""
        entry = self._kernels.get(id(backend))
        if entry is None or entry[0] is not backend:
            entry = (backend, [make_kernel(plan, backend, self.num_blocks) for plan in self.plans])
            self._kernels[id(backend)] = entry
        return entry[1]

    def initial_state(
        self, backend: Backend, leaves: Sequence[Any], batch: int, max_stack_depth: int
    ) -> State:
        """Zero registers and stacks, the inputs in their registers, every pc at block 0."""
        state: State = {
            state_ops.PC: backend.zeros((batch,), np.int32),
            state_ops.OVERFLOW: backend.zeros((batch,), np.int32),
            state_ops.UNDERFLOW: backend.zeros((batch,), np.int32),
        }
        if self.has_calls:
            state[state_ops.PC_STACK] = backend.zeros((max_stack_depth, batch), np.int32)
            state[state_ops.PC_SP] = backend.zeros((batch,), np.int32)
        for var in self.variables.values():
            state[state_ops.register_key(var.name)] = backend.create_register(batch, var.type)
            if var.is_stack:
                state[state_ops.stack_key(var.name)] = backend.create_stack(max_stack_depth, batch, var.type)
                state[self.pointers.get(var.name, state_ops.pointer_key(var.name))] = backend.zeros((batch,), np.int32)
        for name, leaf in zip(self.inputs, leaves, strict=True):
            state[state_ops.register_key(name)] = leaf
        return state

    def run(
        self,
        args: Sequence[Any],
        backend: Backend,
        max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH,
        cache_key: Any = None,
    ) -> list[Any]:
        """Run the program on the flat input leaves; return the output registers."""
        if max_stack_depth < 1:
            raise ValueError(f"max_stack_depth must be at least 1, got {max_stack_depth}")
        types = [self.variables[name].type for name in self.inputs]
        batch, leaves = prepare_inputs(self.inputs, types, args, backend)
        state = self.initial_state(backend, leaves, batch, max_stack_depth)
        backend.last_stats = None
        state = backend.run(self.kernels(backend), state, self.num_blocks, cache_key)
        self.last_stats = backend.last_stats
        self._raise_errors(backend, state, max_stack_depth)
        return [state[state_ops.register_key(name)] for name in self.outputs]

    # ----- errors ---------------------------------------------------------------------------
    def _describe(self, block: int) -> str:
        plan = self.plans[block]
        if not plan.function:
            return f"the program (vm block {block})"
        where = f"function {python_name(plan.function)!r}"
        callee = self.plans[plan.callee].function if plan.callee is not None else None
        if callee and callee != plan.function:
            where += f" calling {python_name(callee)!r}"
        return f"{where} (vm block {block} of IR function @{plan.function})"

    @staticmethod
    def _members(members: np.ndarray, shown: int = 8) -> str:
        listed = ", ".join(str(m) for m in members[:shown])
        more = f" and {len(members) - shown} more" if len(members) > shown else ""
        return f"batch member{'s' if len(members) > 1 else ''} {listed}{more}"

    def _raise_errors(self, backend: Backend, state: State, max_stack_depth: int) -> None:
        overflow = backend.to_numpy(state[state_ops.OVERFLOW])
        if overflow.any():
            members = np.flatnonzero(overflow)
            raise StackOverflowError(
                f"stack overflow in {self._describe(int(overflow[members[0]]) - 1)}: "
                f"{self._members(members)} recursed deeper than max_stack_depth={max_stack_depth}. Pass a larger "
                f"max_stack_depth= (e.g. max_stack_depth={2 * max_stack_depth}), or check that the "
                "recursion terminates"
            )
        underflow = backend.to_numpy(state[state_ops.UNDERFLOW])
        if underflow.any():
            members = np.flatnonzero(underflow)
            raise StackUnderflowError(
                f"stack underflow in {self._describe(int(underflow[members[0]]) - 1)}: "
                f"{self._members(members)} restored a value that was never saved. This is a bug in abir's "
                "lowering (or in hand-written vm IR); please report it with the program"
            )


def python_name(symbol: str) -> str:
    """The Python function an IR function symbol comes from: specializations per argument
    structure (`fib.s1`) or per argument types (`scale.t2`) add a dotted suffix."""
    return symbol.split(".", 1)[0]


def compile_machine(vm_module: ModuleOp) -> Machine:
    """Read a vm module once and plan every block (kernels are built per backend on demand)."""
    vm_module.verify()
    program = _find_program(vm_module)
    blocks = list(program.blocks)
    halt, tail, pointers = len(blocks), tail_start(blocks), stack_pointers(blocks)
    plans = [_plan_block(block, halt, pointers, block.number >= tail) for block in blocks]
    return Machine(
        program.sym_name.data,
        _variables(vm_module),
        [ref.string_value() for ref in program.inputs.data],
        [ref.string_value() for ref in program.outputs.data],
        plans,
        pointers,
    )
