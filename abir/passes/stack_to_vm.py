"""`stack-to-vm`: the allocated stack program -> numbered vm kernels.

Blocks are numbered in their current order (run `schedule-blocks` first). Inside a block:
temporaries become SSA values; registers and stacks are read with `vm.read` once (later reads
reuse the last value written or read in this block) and written back with `vm.write` (deferred:
only the last value is written, before any push/pop/peek of the variable and at the end of the
block); writes into dead variables vanish, and so do writes of the value the register already
holds (`@x = @x`, as passing a recursive call's unchanged arguments makes: each write is a masked
update of the whole batch on the machine); `stack.prim` -> `vm.prim`, `stack.constant` ->
`vm.constant`, push/pop/peek -> `vm.push/pop/peek`; terminators map to `vm.jump`, `vm.branch`,
`vm.call`, `vm.return` and `vm.halt`. Each `vm.block` keeps the `function` and `abir.loc`
attributes of its terminator, each `vm.push` and `vm.call` the `abir.call_loc` of its stack op.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from abir.dialects import functional, stack, vm
from abir.dialects.stack import StorageClass
from abir.passes.analysis import CALL_LOCATION_ATTR, FUNCTION_ATTR, LOCATION_ATTR, fail_at, the_program
from abir.passes.lower_calls import replace_module_body


@dataclass
class Declarations:
    types: dict[str, Attribute]
    storage: dict[str, StorageClass]


class KernelBuilder:
    """Translates one stack block into the body of a `vm.block`."""

    def __init__(self, decls: Declarations, numbers: dict[Block, int]):
        self.decls = decls
        self.numbers = numbers
        self.body = Block()
        self.values: dict[str, SSAValue] = {}
        self.pending: dict[str, SSAValue] = {}
        self.held: dict[str, SSAValue] = {}
        """The value each register is known to hold (read from it, or written to it)."""
        self.current: Operation | None = None
        """The stack op being translated (where an error points)."""

    def add(self, op: Operation) -> Operation:
        self.body.add_op(op)
        return op

    def read(self, name: str) -> SSAValue:
        if name in self.values:
            return self.values[name]
        if self.decls.storage[name] == StorageClass.TEMPORARY:
            assert self.current is not None
            fail_at(
                self.current,
                f"temporary @{name} is read before it is written in its block; a temporary holds a value "
                "only within one block (declare it register or stack, or let allocate-storage choose)",
            )
        value = self.add(vm.ReadOp(name, self.decls.types[name])).results[0]
        self.values[name] = self.held[name] = value
        return value

    def assign(self, name: str, value: SSAValue) -> None:
        self.values[name] = value
        if self.decls.storage[name] in (StorageClass.REGISTER, StorageClass.STACK):
            self.pending[name] = value

    def flush(self, names: list[str] | None = None) -> None:
        for name in list(self.pending) if names is None else names:
            if name not in self.pending:
                continue
            value = self.pending.pop(name)
            if self.held.get(name) is not value:
                self.add(vm.WriteOp(name, value))
                self.held[name] = value

    def translate(self, block: Block) -> Block:
        for op in block.ops:
            self.current = op
            self.op(op)
        return self.body

    def op(self, op: Operation) -> None:
        match op:
            case stack.ConstantOp():
                self.assign(op.var.string_value(), self.add(vm.ConstantOp(op.value)).results[0])
            case stack.PrimOp():
                args = [self.read(v.string_value()) for v in op.inputs.data]
                outs = [v.string_value() for v in op.outputs.data]
                fn = op.callee if op.callee is not None else op.prim_name
                prim = self.add(vm.PrimOp(fn, args, [self.decls.types[n] for n in outs], op.params))
                for name, value in zip(outs, prim.results, strict=True):
                    self.assign(name, value)
            case stack.WriteOp():
                sources = [self.read(v.string_value()) for v in op.sources.data]
                for target, value in zip(op.targets.data, sources, strict=True):
                    self.assign(target.string_value(), value)
            case stack.PushOp():
                names = [v.string_value() for v in op.vars.data]
                self.flush(names)
                self.add(with_call_location(op, vm.PushOp(*names)))
            case stack.PopOp() | stack.PeekOp():
                names = [v.string_value() for v in op.vars.data]
                self.flush(names)
                self.add(vm.PopOp(*names) if isinstance(op, stack.PopOp) else vm.PeekOp(*names))
                for name in names:
                    self.values.pop(name, None)
                    self.held.pop(name, None)
            case _:
                self.terminator(op)

    def terminator(self, op: Operation) -> None:
        cond = self.read(op.cond.string_value()) if isinstance(op, stack.BranchOp) else None
        self.flush()
        match op:
            case stack.GotoOp():
                self.add(vm.JumpOp(self.numbers[op.dest]))
            case stack.BranchOp():
                assert cond is not None
                self.add(vm.BranchOp(cond, self.numbers[op.then_dest], self.numbers[op.else_dest]))
            case stack.PushGotoOp():
                self.add(with_call_location(op, vm.CallOp(self.numbers[op.dest], self.numbers[op.return_dest])))
            case stack.IndirectGotoOp():
                self.add(vm.ReturnOp())
            case stack.HaltOp():
                self.add(vm.HaltOp())
            case _:
                fail_at(op, f"stack-to-vm cannot translate {op.name}; a stack program holds stack ops only")


def with_call_location(source: Operation, push: Operation) -> Operation:
    """The vm `push` with the `abir.call_loc` of the stack op it translates, if any."""
    if (location := source.attributes.get(CALL_LOCATION_ATTR)) is not None:
        push.attributes[CALL_LOCATION_ATTR] = location
    return push


def stack_to_vm(module: ModuleOp) -> ModuleOp:
    """A new vm module for an allocated stack module."""
    program = the_program(module)
    decl_ops = [op for op in module.ops if isinstance(op, stack.VarOp)]
    missing = [op.sym_name.data for op in decl_ops if op.storage is None]
    if missing:
        raise PassFailedException(f"variables {missing} have no storage class; run allocate-storage first")
    decls = Declarations(
        {op.sym_name.data: op.type for op in decl_ops},
        {op.sym_name.data: op.storage.data for op in decl_ops},  # type: ignore[union-attr]
    )
    blocks = list(program.body.blocks)
    numbers = {b: i for i, b in enumerate(blocks)}
    vm_blocks = []
    for block in blocks:
        kernel = vm.BlockOp(numbers[block], KernelBuilder(decls, numbers).translate(block))
        if (term := block.last_op) is not None:
            for name in (FUNCTION_ATTR, LOCATION_ATTR):
                if name in term.attributes:
                    kernel.attributes[name] = term.attributes[name]
        vm_blocks.append(kernel)
    runtime = (StorageClass.REGISTER, StorageClass.STACK)
    ops: list[Operation] = [op.clone() for op in module.ops if isinstance(op, functional.OpaqueOp)]
    ops += [vm.VarOp(n, decls.types[n], s) for n, s in decls.storage.items() if s in runtime]
    ops.append(vm.ProgramOp(program.sym_name.data, program.inputs.data, program.outputs.data, vm_blocks))
    return ModuleOp(ops)


@dataclass(frozen=True)
class StackToVmPass(ModulePass):
    """Translate an allocated, scheduled stack program into numbered vm block kernels."""

    name = "stack-to-vm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        replace_module_body(op, stack_to_vm(op))
