"""The `vm` dialect: what backends execute.

A `vm.program` holds numbered blocks. The machine runs them in index order: the JAX and
TensorFlow backends by default sweep the blocks in that order, running each block that has
members (`order-sweeps` numbers the blocks for it); the NumPy backend runs, at each step, the
smallest block index that any live member holds (`schedule-blocks` priority order). Variables are declared once with a
storage class: `register` (one `[B, ...]` array) or `stack` (a `[B, ...]` top, a `[D, B, ...]`
stack and a per-member stack pointer); temporaries have disappeared into SSA values. Each
`vm.block` is a straight-line SSA kernel over the machine state, ending in a program-counter
terminator:

    vm.var @n : i64 stack
    vm.program @fib(@n) -> (@fib.result0) {
      vm.block 1 {
        %n = vm.read @n : i64
        %c2 = vm.constant 2 : i64
        %cond = vm.prim "greater"(%n, %c2) : (i64, i64) -> i1
        vm.branch %cond, 2, 5
      }
      vm.block 2 {
        ...
        vm.push @n
        vm.write @n, %a : i64
        vm.call 1, return 3
      }
    }

Prims see every member's row (junk in inactive rows); only `vm.write`, `vm.push`, `vm.pop` and
`vm.peek` are masked to the members standing at the block (minus those that left it by an
earlier `vm.exit_if %cond, N`, a side exit to block N).

Every op that names blocks carries the `BlockTargets` trait, the one place that says which
properties are block numbers and how each is reached (`TargetRole`); passes and the machine find
and rewrite targets only through it (`op_targets`, `retarget`, `block_successors`,
`return_sites`, `activations`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
)
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    irdl_custom_directive,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    ConstantLike,
    HasParent,
    IsTerminator,
    NoTerminator,
    OpTrait,
    Pure,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from abir.dialects.functional import (
    ConstantLiteral,
    PrimEffects,
    PrimSpeculatable,
    SSAPrimOpBase,
    end_of_parsed,
    typed_constant_value,
    verify_constant_value,
    verify_opaque_callee,
)
from abir.dialects.stack import (
    SavedValuesOpBase,
    StorageAttr,
    StorageClass,
    SymbolList,
    VarType,
    refs,
)
from abir.dialects.symbols import lookup_symbol
from abir.types import is_value_type, tensor_type_of

RUNTIME_STORAGE = (StorageClass.REGISTER, StorageClass.STACK)


def lookup_var(op: Operation, name: SymbolRefAttr) -> VarOp:
    decl = lookup_symbol(op, name)
    if not isinstance(decl, VarOp):
        raise VerifyException(f"variable @{name.string_value()} is used but never declared")
    return decl


@irdl_custom_directive
class RuntimeStorage(CustomDirective):
    """The storage class of a machine variable, `register` or `stack`; custom to say that these
    two are the machine's (the enum's own syntax lists the stack dialect's four)."""

    storage: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        start = parser.pos
        if (word := parser.parse_optional_keyword_in([s.value for s in StorageClass])) not in RUNTIME_STORAGE:
            found = f", not {word} (temporaries are SSA values inside a block, dead ones vanish)" if word else ""
            parser.raise_error(
                f"expected the variable's storage class: register or stack{found}",
                start if word is not None else None,
                end_of_parsed(parser, start) if word is not None else None,
            )
        self.storage.set(state, StorageAttr(StorageClass(word)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        storage = self.storage.get(op)
        assert isinstance(storage, StorageAttr)
        state.print_whitespace(printer)
        printer.print_string(storage.data.value)


@irdl_op_definition
class VarOp(IRDLOperation):
    """A machine variable: its per-member type and its storage class (register or stack)."""

    name = "vm.var"

    sym_name = prop_def(SymbolNameConstraint())
    type = prop_def(Attribute)
    storage = prop_def(StorageAttr)

    traits = traits_def(SymbolOpInterface(), HasParent(ModuleOp))

    custom_directives = (VarType, RuntimeStorage)
    assembly_format = "$sym_name `:` custom<VarType>($type) custom<RuntimeStorage>($storage) attr-dict"

    def __init__(self, name: str, type: Attribute, storage: StorageClass):
        super().__init__(properties={"sym_name": StringAttr(name), "type": type, "storage": StorageAttr(storage)})

    @property
    def is_stack(self) -> bool:
        return self.storage.data == StorageClass.STACK

    def verify_(self) -> None:
        if not is_value_type(self.type):
            raise VerifyException(f"variable @{self.sym_name.data} has type {self.type}, not a per-member type")
        if self.storage.data not in RUNTIME_STORAGE:
            raise VerifyException(
                f"variable @{self.sym_name.data} has storage class {self.storage.data.value}; the machine only "
                "holds register and stack variables (temporaries are SSA values inside a block)"
            )


@irdl_op_definition
class ProgramOp(IRDLOperation):
    """The executable program: input and output variables and blocks numbered 0..N-1; every
    member starts at block 0."""

    name = "vm.program"

    sym_name = prop_def(SymbolNameConstraint())
    inputs = prop_def(ArrayAttr[SymbolRefAttr])
    outputs = prop_def(ArrayAttr[SymbolRefAttr])
    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), HasParent(ModuleOp), NoTerminator())

    custom_directives = (SymbolList,)
    assembly_format = (
        "$sym_name `(` custom<SymbolList>($inputs) `)` `->` `(` custom<SymbolList>($outputs) `)` "
        "attr-dict-with-keyword $body"
    )

    def __init__(
        self,
        name: str,
        inputs: Sequence[str | SymbolRefAttr],
        outputs: Sequence[str | SymbolRefAttr],
        blocks: Sequence[BlockOp] = (),
    ):
        super().__init__(
            properties={"sym_name": StringAttr(name), "inputs": refs(inputs), "outputs": refs(outputs)},
            regions=[Region(Block(blocks))],
        )

    @property
    def blocks(self) -> list[BlockOp]:
        return [op for op in self.body.block.ops if isinstance(op, BlockOp)]

    def verify_(self) -> None:
        for op in self.body.block.ops:
            if not isinstance(op, BlockOp):
                raise VerifyException(
                    f"program @{self.sym_name.data} contains a {op.name}; a vm.program holds only vm.block ops"
                )
        blocks = self.blocks
        if not blocks:
            raise VerifyException(f"program @{self.sym_name.data} has no blocks")
        for position, block in enumerate(blocks):
            if block.index.value.data != position:
                raise VerifyException(
                    f"vm.block {block.index.value.data} is the block at position {position}; blocks must be "
                    "numbered 0, 1, 2, ... in order"
                )
        for name in (*self.inputs.data, *self.outputs.data):
            lookup_var(self, name)


@irdl_op_definition
class BlockOp(IRDLOperation):
    """`vm.block N { ... }`: the straight-line kernel run for the members whose pc is N."""

    name = "vm.block"

    index = prop_def(IntegerAttr[I64])
    body = region_def("single_block")

    # NoTerminator: the kernel's last op is checked by `verify_` below, with a clearer message
    # than xDSL's generic one.
    traits = traits_def(HasParent(ProgramOp), NoTerminator())

    assembly_format = "$index attr-dict-with-keyword $body"

    def __init__(self, index: int, body: Region | Block | None = None):
        if body is None:
            body = Block()
        if isinstance(body, Block):
            body = Region(body)
        super().__init__(properties={"index": IntegerAttr(index, 64)}, regions=[body])

    @property
    def number(self) -> int:
        return self.index.value.data

    def verify_(self) -> None:
        if self.body.block.args:
            raise VerifyException("vm.block kernels take no arguments; read the machine state with vm.read")
        last = self.body.block.last_op
        if last is None or not last.has_trait(IsTerminator):
            ends = "is empty" if last is None else f"ends in {last.name}"
            raise VerifyException(
                f"vm.block {self.number} {ends}; a kernel must end in a program-counter terminator "
                "(vm.jump, vm.branch, vm.call, vm.return or vm.halt)"
            )


class _InBlock(HasParent):
    def __init__(self) -> None:
        super().__init__(BlockOp)


@irdl_op_definition
class ReadOp(IRDLOperation):
    """Read a variable's current (top) value for every member."""

    name = "vm.read"

    var = prop_def(SymbolRefAttr)
    res = result_def()

    traits = traits_def(_InBlock())

    assembly_format = "$var attr-dict `:` type($res)"

    def __init__(self, var: str | SymbolRefAttr, type: Attribute):
        super().__init__(properties={"var": refs([var]).data[0]}, result_types=[type])

    def verify_(self) -> None:
        decl = lookup_var(self, self.var)
        if decl.type != self.res.type:
            raise VerifyException(f"read of @{self.var.string_value()} ({decl.type}) as {self.res.type}")


@irdl_op_definition
class WriteOp(IRDLOperation):
    """Write a value into a variable's current (top) value, for the members at this block."""

    name = "vm.write"

    var = prop_def(SymbolRefAttr)
    value = operand_def()

    traits = traits_def(_InBlock())

    assembly_format = "$var `,` $value attr-dict `:` type($value)"

    def __init__(self, var: str | SymbolRefAttr, value: SSAValue | Operation):
        super().__init__(properties={"var": refs([var]).data[0]}, operands=[value])

    def verify_(self) -> None:
        decl = lookup_var(self, self.var)
        if decl.type != self.value.type:
            raise VerifyException(f"cannot write a {self.value.type} into @{self.var.string_value()} ({decl.type})")


class _StackOpBase(SavedValuesOpBase):
    traits = traits_def(_InBlock())

    def verify_storage(self) -> None:
        for name in self.vars.data:
            if not lookup_var(self, name).is_stack:
                raise VerifyException(
                    f"variable @{name.string_value()} is {self.VERB} but its storage class is register; "
                    "only stack variables keep saved values"
                )


@irdl_op_definition
class PushOp(_StackOpBase):
    """Save the current value of each variable on its stack (masked)."""

    name = "vm.push"
    VERB: ClassVar[str] = "pushed"


@irdl_op_definition
class PopOp(_StackOpBase):
    """Restore each variable's last saved value and drop it (masked)."""

    name = "vm.pop"
    VERB: ClassVar[str] = "popped"


@irdl_op_definition
class PeekOp(_StackOpBase):
    """Restore each variable's last saved value and keep it saved (masked)."""

    name = "vm.peek"
    VERB: ClassVar[str] = "peeked"


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A constant SSA value inside a kernel."""

    name = "vm.constant"

    T: ClassVar = VarConstraint("T", AnyAttr())
    value = prop_def(typed_constant_value(T))
    res = result_def(T)

    traits = traits_def(Pure(), ConstantLike(), _InBlock())

    custom_directives = (ConstantLiteral,)
    assembly_format = "custom<ConstantLiteral>($value) attr-dict"

    def __init__(self, value: Attribute):
        super().__init__(properties={"value": value}, result_types=[value.get_type()])  # type: ignore[attr-defined]

    def verify_(self) -> None:
        verify_constant_value(self.value)


@irdl_op_definition
class PrimOp(SSAPrimOpBase):
    """A primitive on whole-batch values: a builtin Array-API operation or an opaque callable."""

    name = "vm.prim"

    traits = traits_def(_InBlock(), PrimEffects(), PrimSpeculatable())

    def verify_(self) -> None:
        super().verify_()
        verify_opaque_callee(self, self.callee)


def _program_size(op: Operation) -> int | None:
    block = op.parent_op()
    program = block.parent_op() if block is not None else None
    return len(program.blocks) if isinstance(program, ProgramOp) else None


def _check_targets(op: Operation, targets: Sequence[int]) -> None:
    size = _program_size(op)
    for target in targets:
        if size is not None and not 0 <= target < size:
            raise VerifyException(f"jump to block {target}, but the program has blocks 0..{size - 1}")


class TargetRole(Enum):
    """How a block target is reached: `NEXT`, pc := target now (a jump, a branch arm, a side exit,
    a descent's exit); `CALLEE`, the entry of the function a call enters; `RETURN`, pushed on the
    program-counter stack, reached by a later `vm.return`."""

    NEXT = "next"
    CALLEE = "callee"
    RETURN = "return"


ALL_ROLES = frozenset(TargetRole)


@dataclass(frozen=True)
class BlockTargets(OpTrait):
    """The one description of the blocks an op names: each `(property, role)` pair is an
    `IntegerAttr` property holding a block number. Passes and the machine read and rewrite block
    targets only through this trait (`targets`, `retarget`, `block_successors`)."""

    properties: tuple[tuple[str, TargetRole], ...]

    def targets(self, op: Operation, roles: Collection[TargetRole] = ALL_ROLES) -> tuple[int, ...]:
        """The block numbers `op` names in the given roles, in property order."""
        return tuple(_target_of(op, name) for name, role in self.properties if role in roles)

    def retarget(self, op: Operation, mapping: Mapping[int, int] | Callable[[int], int]) -> None:
        """Replace every target t by mapping[t] (a mapping leaves the targets it lacks alone)."""
        new = mapping if callable(mapping) else (lambda t: mapping.get(t, t))
        for name, _ in self.properties:
            op.properties[name] = IntegerAttr(new(_target_of(op, name)), 64)

    def set_target(self, op: Operation, position: int, target: int) -> None:
        """Point the `position`-th target (in property order) at `target`."""
        op.properties[self.properties[position][0]] = IntegerAttr(target, 64)

    def verify(self, op: Operation) -> None:
        _check_targets(op, self.targets(op))


def _target_of(op: Operation, name: str) -> int:
    attr = op.properties[name]
    assert isinstance(attr, IntegerAttr)
    return attr.value.data


def op_targets(op: Operation, roles: Collection[TargetRole] = ALL_ROLES) -> tuple[int, ...]:
    """The block numbers `op` names in the given roles (none for an op without `BlockTargets`)."""
    trait = op.get_trait(BlockTargets)
    return trait.targets(op, roles) if trait is not None else ()


def retarget(op: Operation, mapping: Mapping[int, int] | Callable[[int], int]) -> None:
    """`BlockTargets.retarget` for an op that names blocks; other ops are left alone."""
    if (trait := op.get_trait(BlockTargets)) is not None:
        trait.retarget(op, mapping)


def block_successors(block: BlockOp, roles: Collection[TargetRole] = ALL_ROLES) -> list[int]:
    """The targets in the given roles of every op of `block`, side exits first, in op order
    (repeated when named twice). A `vm.return`'s successors are not named by it: see
    `block_return_sites`."""
    return [target for op in block.body.block.ops for target in op_targets(op, roles)]


def retarget_blocks(blocks: Iterable[BlockOp], mapping: Mapping[int, int] | Callable[[int], int]) -> None:
    """`retarget` every op of every block."""
    for block in blocks:
        for op in block.body.block.ops:
            retarget(op, mapping)


def return_sites(
    blocks: Sequence[BlockOp], function_of: Callable[[BlockOp], Hashable]
) -> dict[Hashable, list[tuple[int, int]]]:
    """Per function, (block, return block) for each op that pushes a return block for it: a call
    for the function it enters (its callee's), a descent for the function of its own block.
    `blocks` are indexed by number."""
    sites: dict[Hashable, list[tuple[int, int]]] = {}
    for block in blocks:
        for op in block.body.block.ops:
            for back in op_targets(op, (TargetRole.RETURN,)):
                callee = op_targets(op, (TargetRole.CALLEE,))
                function = function_of(blocks[callee[0]] if callee else block)
                sites.setdefault(function, []).append((block.number, back))
    return sites


PROGRAM_START = "<program start>"
"""The `activations` key of the activation members begin in at block 0 (no op pushed a return
block for it)."""


def activations(blocks: Sequence[BlockOp], function_of: Callable[[BlockOp], Hashable]) -> list[set[Hashable]]:
    """Per block (by number), the activations a member standing there may be running, each named
    by the key `return_sites` files its return blocks under: the function a call enters, the
    function of a descent's block, `PROGRAM_START` for block 0. An activation goes on along
    jumps, branches, side exits and a descent's exit, and past a call or descent in its return
    block; it is not bound to its function's blocks: a tail call is a jump into another
    function's code, which then returns where its caller's call does."""
    found: list[set[Hashable]] = [set() for _ in blocks]
    if blocks:
        found[0].add(PROGRAM_START)
    for block in blocks:
        for op in block.body.block.ops:
            for callee in op_targets(op, (TargetRole.CALLEE,)):
                found[callee].add(function_of(blocks[callee]))
            if isinstance(op, DescendOp):
                found[block.number].add(function_of(block))
    roles = (TargetRole.NEXT, TargetRole.RETURN)
    spread_forward(found, range(len(blocks)), lambda number: block_successors(blocks[number], roles))
    return found


def spread_forward(found: Any, nodes: Iterable[Any], successors: Callable[[Any], Iterable[Any]]) -> None:
    """Grow each node's set in `found` (a list by index or a dict by node) by the sets of every
    node that reaches it along `successors`, to the fixpoint (the activations' flow, here and in
    `abir.passes.analysis.activations`)."""
    todo = list(nodes)
    while todo:
        node = todo.pop()
        for target in successors(node):
            if not found[node] <= found[target]:
                found[target] |= found[node]
                todo.append(target)


def block_return_sites(
    blocks: Sequence[BlockOp], function_of: Callable[[BlockOp], Hashable]
) -> dict[int, list[tuple[int, int]]]:
    """Per block ending in `vm.return`, the (block, return block) of every op that pushed a return
    block for an activation it may return from (`activations`, `return_sites`)."""
    sites = return_sites(blocks, function_of)
    running = activations(blocks, function_of)
    return {
        block.number: sorted({site for key in running[block.number] for site in sites.get(key, [])})
        for block in blocks
        if isinstance(block.body.block.last_op, ReturnOp)
    }


@irdl_op_definition
class JumpOp(IRDLOperation):
    """pc := target."""

    name = "vm.jump"
    target = prop_def(IntegerAttr[I64])
    traits = lazy_traits_def(lambda: (IsTerminator(), _InBlock(), BlockTargets((("target", TargetRole.NEXT),))))
    assembly_format = "$target attr-dict"

    def __init__(self, target: int):
        super().__init__(properties={"target": IntegerAttr(target, 64)})


@irdl_op_definition
class BranchOp(IRDLOperation):
    """Per member: pc := cond ? then_target : else_target."""

    name = "vm.branch"
    cond = operand_def(IntegerType(1))
    then_target = prop_def(IntegerAttr[I64])
    else_target = prop_def(IntegerAttr[I64])
    traits = lazy_traits_def(
        lambda: (
            IsTerminator(),
            _InBlock(),
            BlockTargets((("then_target", TargetRole.NEXT), ("else_target", TargetRole.NEXT))),
        )
    )
    assembly_format = "$cond `,` $then_target `,` $else_target attr-dict"

    def __init__(self, cond: SSAValue | Operation, then_target: int, else_target: int):
        super().__init__(
            operands=[cond],
            properties={"then_target": IntegerAttr(then_target, 64), "else_target": IntegerAttr(else_target, 64)},
        )


@irdl_op_definition
class ExitIfOp(IRDLOperation):
    """A side exit: per member, if cond then pc := target and the member leaves the block;
    the ops after it run (are masked) for the others only. A block with side exits is a
    superblock (one entry, several exits; `form-superblocks`)."""

    name = "vm.exit_if"
    cond = operand_def(IntegerType(1))
    target = prop_def(IntegerAttr[I64])
    traits = lazy_traits_def(lambda: (_InBlock(), BlockTargets((("target", TargetRole.NEXT),))))
    assembly_format = "$cond `,` $target attr-dict"

    def __init__(self, cond: SSAValue | Operation, target: int):
        super().__init__(operands=[cond], properties={"target": IntegerAttr(target, 64)})


@irdl_op_definition
class CallOp(IRDLOperation):
    """Push `return_target` on the program-counter stack, then pc := target."""

    name = "vm.call"
    target = prop_def(IntegerAttr[I64])
    return_target = prop_def(IntegerAttr[I64])
    traits = lazy_traits_def(
        lambda: (
            IsTerminator(),
            _InBlock(),
            BlockTargets((("target", TargetRole.CALLEE), ("return_target", TargetRole.RETURN))),
        )
    )
    assembly_format = "$target `,` `return` $return_target attr-dict"

    def __init__(self, target: int, return_target: int):
        super().__init__(
            properties={"target": IntegerAttr(target, 64), "return_target": IntegerAttr(return_target, 64)}
        )


DESCENT_PREDICATES = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
"""The comparisons a `vm.descend` may end on (`counter + offset <predicate> bound`)."""


@irdl_op_definition
class DescendOp(IRDLOperation):
    """A block that calls itself while an integer counter steps toward a base case, all of its
    iterations at once (`summarize-descents`). Per member, iteration i (from 0) starts with the
    counter at `c0 + i * step`; it ends the descent, jumping to `exit_target`, when
    `counter + offset <predicate> bound` holds at its start. Each iteration pushes `pushes` in
    order: the counter (its value before the update, or after it where `pushes_updated` says
    1) or a variable the block does not write; the pushes with `pushes_before_exit` 1 happen in
    the final iteration too (they came before the exit test). Every full iteration also pushes
    `return_target` on the program-counter stack. The counter ends at its final iteration's
    start value, plus `step` when `update_before_exit` is 1. A member that never reaches the
    base case overflows a stack, as the iterations would."""

    name = "vm.descend"
    counter = prop_def(SymbolRefAttr)
    step = prop_def(IntegerAttr[I64])
    predicate = prop_def(StringAttr)
    offset = prop_def(IntegerAttr[I64])
    bound = prop_def(IntegerAttr[I64])
    update_before_exit = prop_def(IntegerAttr[I64])
    pushes = prop_def(ArrayAttr[SymbolRefAttr])
    pushes_updated = prop_def(ArrayAttr[IntegerAttr[I64]])
    pushes_before_exit = prop_def(ArrayAttr[IntegerAttr[I64]])
    exit_target = prop_def(IntegerAttr[I64])
    return_target = prop_def(IntegerAttr[I64])
    traits = lazy_traits_def(
        lambda: (
            IsTerminator(),
            _InBlock(),
            BlockTargets((("exit_target", TargetRole.NEXT), ("return_target", TargetRole.RETURN))),
        )
    )
    assembly_format = (
        "$counter `step` $step `until` $predicate $offset `,` $bound `exit` $exit_target `return` $return_target "
        "`update_first` $update_before_exit `pushes` $pushes `updated` $pushes_updated `early` $pushes_before_exit "
        "attr-dict"
    )

    def __init__(
        self,
        counter: str,
        step: int,
        predicate: str,
        offset: int,
        bound: int,
        update_before_exit: bool,
        pushes: Sequence[tuple[str, bool, bool]],
        exit_target: int,
        return_target: int,
    ):
        def flags(values: Sequence[bool]) -> ArrayAttr[IntegerAttr[I64]]:
            return ArrayAttr([IntegerAttr(int(v), 64) for v in values])

        super().__init__(
            properties={
                "counter": SymbolRefAttr(counter),
                "step": IntegerAttr(step, 64),
                "predicate": StringAttr(predicate),
                "offset": IntegerAttr(offset, 64),
                "bound": IntegerAttr(bound, 64),
                "update_before_exit": IntegerAttr(int(update_before_exit), 64),
                "pushes": ArrayAttr([SymbolRefAttr(name) for name, _, _ in pushes]),
                "pushes_updated": flags([updated for _, updated, _ in pushes]),
                "pushes_before_exit": flags([before for _, _, before in pushes]),
                "exit_target": IntegerAttr(exit_target, 64),
                "return_target": IntegerAttr(return_target, 64),
            }
        )

    def push_list(self) -> list[tuple[str, bool, bool]]:
        """(variable, pushes the updated counter, pushed before the exit test) per push."""
        return [
            (name.string_value(), bool(updated.value.data), bool(before.value.data))
            for name, updated, before in zip(self.pushes.data, self.pushes_updated.data, self.pushes_before_exit.data, strict=True)
        ]

    def verify_(self) -> None:
        if self.predicate.data not in DESCENT_PREDICATES:
            raise VerifyException(f"vm.descend ends on one of {', '.join(DESCENT_PREDICATES)}, got {self.predicate.data!r}")
        if self.step.value.data == 0:
            raise VerifyException("vm.descend needs a non-zero step: a counter that does not move never reaches its base case")
        if not len(self.pushes.data) == len(self.pushes_updated.data) == len(self.pushes_before_exit.data):
            raise VerifyException("vm.descend needs one pushes_updated and one pushes_before_exit flag per push")
        for flag in (self.update_before_exit, *self.pushes_updated.data, *self.pushes_before_exit.data):
            if flag.value.data not in (0, 1):
                raise VerifyException(f"vm.descend flags are 0 or 1, got {flag.value.data}")
        counter = lookup_var(self, self.counter)
        if not (isinstance(counter.type, IntegerType) and counter.type.width.data > 1):
            raise VerifyException(f"the counter of vm.descend must be an integer variable, @{self.counter.string_value()} is {counter.type}")
        names = [name.string_value() for name in self.pushes.data]
        for name, updated, _ in self.push_list():
            var = lookup_var(self, SymbolRefAttr(name))
            if not var.is_stack:
                raise VerifyException(f"vm.descend pushes @{name}, whose storage class is register; only stack variables keep saved values")
            if tensor_type_of(var.type).shape:
                raise VerifyException(f"vm.descend pushes @{name}: only scalar variables")
            if updated and name != self.counter.string_value():
                raise VerifyException(f"vm.descend pushes the updated value of @{name}, which is not its counter")
        if len(set(names)) != len(names):
            raise VerifyException("vm.descend pushes each variable at most once per iteration")


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """Pop the program-counter stack into pc."""

    name = "vm.return"
    traits = lazy_traits_def(lambda: (IsTerminator(), _InBlock()))
    assembly_format = "attr-dict"


@irdl_op_definition
class HaltOp(IRDLOperation):
    """The member is finished (pc := number of blocks)."""

    name = "vm.halt"
    traits = lazy_traits_def(lambda: (IsTerminator(), _InBlock()))
    assembly_format = "attr-dict"


Vm = Dialect(
    "vm",
    [
        VarOp,
        ProgramOp,
        BlockOp,
        ReadOp,
        WriteOp,
        PushOp,
        PopOp,
        PeekOp,
        ConstantOp,
        PrimOp,
        JumpOp,
        BranchOp,
        ExitIfOp,
        CallOp,
        DescendOp,
        ReturnOp,
        HaltOp,
    ],
    [],
)
