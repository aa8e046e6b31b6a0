"""The `stack` dialect: calls lowered to an explicit machine over named variables.

Not SSA. A module holds typed variable declarations (`stack.var`) and one `stack.program`
whose region is a single control-flow graph with every function body flattened into it.
Blocks take no arguments; values move between variables with `stack.write` (a parallel copy,
so `a, b = b, a` needs no temporary).

    stack.var @n : i64 stack
    stack.var @cond : i1
    stack.program @fib(@n) -> (@fib.result0) {
    ^entry:
      stack.push_goto ^exit, ^fib          // save the return block, jump to the callee
    ^exit:
      stack.halt
    ^fib:
      stack.constant @c2 = 2 : i64
      stack.prim "greater"(@n, @c2) -> (@cond)
      stack.branch @cond, ^recurse, ^base
      ...
    }

Each variable is a cell holding the current (top) value; `stack.push @x` saves that value on
the variable's own stack, `stack.pop @x` restores the last saved value, and `stack.peek @x`
restores it without removing it (a pop followed by a push, fused). `stack.push_goto ^r, ^f`
pushes block `^r` on the program-counter stack and jumps to `^f`; `stack.indirect_goto`
returns by popping it. Storage classes (`dead`, `temporary`, `register`, `stack`) are chosen
by the storage-allocation pass and printed after the type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    UnitAttr,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SpacedOpaqueSyntaxAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    successor_def,
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
from xdsl.traits import HasParent, IsTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.mlir_lexer import MLIRTokenKind
from xdsl.utils.str_enum import StrEnum

from abir import array_prims, prims
from abir.dialects.functional import (
    ConstantLiteral,
    ConstantValue,
    PrimHead,
    decode_params,
    prim_properties,
    verify_opaque_callee,
    verify_prim_signature,
)
from abir.dialects.symbols import lookup_symbol
from abir.types import is_value_type, tensor_type_of


class StorageClass(StrEnum):
    """Where a variable lives at run time, cheapest first."""

    DEAD = "dead"  # never read: writes are dropped
    TEMPORARY = "temporary"  # never crosses a block boundary: an SSA value inside one kernel
    REGISTER = "register"  # one [B, ...] array
    STACK = "stack"  # [B, ...] top plus a [D, B, ...] stack and a per-member stack pointer


@irdl_attr_definition
class StorageAttr(EnumAttribute[StorageClass], SpacedOpaqueSyntaxAttribute):
    """`#stack<storage register>`: the storage class of a variable (`register` in custom syntax)."""

    name = "stack.storage"


@irdl_custom_directive
class OptionalStorage(CustomDirective):
    """An optional storage class keyword (`stack.var @x : i64` before allocation).

    Custom because xDSL's optional groups parse an enum attribute unconditionally."""

    storage: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        for storage in StorageClass:
            if parser.parse_optional_keyword(storage.value) is not None:
                self.storage.set(state, StorageAttr(storage))
                return
        word = parser._current_token  # noqa: SLF001 (a bare word without a dot is no op name)
        if word.kind == MLIRTokenKind.BARE_IDENT and "." not in word.text:
            parser.raise_error(
                f"unknown storage class '{word.text}'; expected {', '.join(StorageClass)}", word.span
            )

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        if (storage := self.storage.get(op)) is not None:
            assert isinstance(storage, StorageAttr)
            state.print_whitespace(printer)
            printer.print_string(storage.data.value)


@irdl_custom_directive
class VarType(CustomDirective):
    """A variable's per-member type (`i64`, `tensor<3xf64>`); custom to say so where it is missing."""

    type: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        if (type_ := parser.parse_optional_type()) is None:
            parser.raise_error("expected the variable's per-member type, such as i64, f32 or tensor<3xf64>")
        self.type.set(state, type_)

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_attribute(self.type.get(op))  # type: ignore[arg-type]


@irdl_custom_directive
class SymbolList(CustomDirective):
    """`@a, @b`, possibly empty: an array of symbol references (variables) without brackets."""

    names: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        names: list[SymbolRefAttr] = []
        if (first := parser.parse_optional_symbol_name()) is not None:
            names.append(SymbolRefAttr(first))
            while parser.parse_optional_punctuation(",") is not None:
                if (name := parser.parse_optional_symbol_name()) is None:
                    parser.raise_error("expected a variable after ',': a symbol such as @x")
                names.append(SymbolRefAttr(name))
        else:
            word = parser._current_token  # noqa: SLF001 (a bare word without a dot is no op name)
            if word.kind == MLIRTokenKind.BARE_IDENT and "." not in word.text:
                parser.raise_error(f"expected a variable, written as a symbol: @{word.text}", word.span)
        self.names.set(state, ArrayAttr(names))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        names = self.names.get(op)
        assert isinstance(names, ArrayAttr)
        if names.data:
            state.print_whitespace(printer)
            printer.print_list(names.data, lambda n: printer.print_symbol_name(n.string_value()))  # type: ignore[attr-defined]


def lookup_variable(op: Operation, name: SymbolRefAttr, var_class: type[Operation]) -> Operation:
    """The declaration of variable `name` seen from `op`, or a verifier error naming it."""
    decl = lookup_symbol(op, name)
    if not isinstance(decl, var_class):
        raise VerifyException(f"variable @{name.string_value()} is used but never declared")
    return decl


def var_type(op: Operation, name: SymbolRefAttr) -> Attribute:
    return lookup_variable(op, name, VarOp).type  # type: ignore[attr-defined]


def var_storage(op: Operation, name: SymbolRefAttr) -> StorageClass | None:
    storage = lookup_variable(op, name, VarOp).storage  # type: ignore[attr-defined]
    return None if storage is None else storage.data


def check_stack_storage(op: Operation, names: Sequence[SymbolRefAttr], verb: str) -> None:
    """Push/pop/peek need a variable that has (or may still get) a stack."""
    for name in names:
        storage = var_storage(op, name)
        if storage is not None and storage != StorageClass.STACK:
            raise VerifyException(
                f"variable @{name.string_value()} is {verb} but its storage class is {storage.value}; "
                "only `stack` variables keep saved values"
            )


def check_readable(op: Operation, names: Sequence[SymbolRefAttr]) -> None:
    for name in names:
        if var_storage(op, name) == StorageClass.DEAD:
            raise VerifyException(f"variable @{name.string_value()} is read but its storage class is dead")


def refs(names: Sequence[str | SymbolRefAttr]) -> ArrayAttr[SymbolRefAttr]:
    return ArrayAttr(SymbolRefAttr(n) if isinstance(n, str) else n for n in names)


@irdl_op_definition
class VarOp(IRDLOperation):
    """Declares a named per-member variable with its type and (once allocated) storage class."""

    name = "stack.var"

    sym_name = prop_def(SymbolNameConstraint())
    type = prop_def(Attribute)
    storage = opt_prop_def(StorageAttr)

    traits = traits_def(SymbolOpInterface(), HasParent(ModuleOp))

    custom_directives = (VarType, OptionalStorage)
    assembly_format = "$sym_name `:` custom<VarType>($type) custom<OptionalStorage>($storage) attr-dict"

    def __init__(self, name: str, type: Attribute, storage: StorageClass | None = None):
        props: dict[str, Attribute] = {"sym_name": StringAttr(name), "type": type}
        if storage is not None:
            props["storage"] = StorageAttr(storage)
        super().__init__(properties=props)

    def verify_(self) -> None:
        if not is_value_type(self.type):
            raise VerifyException(
                f"variable @{self.sym_name.data} has type {self.type}; variables need a concrete per-member "
                "type (run type inference first)"
            )


@irdl_op_definition
class ProgramOp(IRDLOperation):
    """The whole lowered program: inputs, outputs and one control-flow graph (entry first)."""

    name = "stack.program"

    sym_name = prop_def(SymbolNameConstraint())
    inputs = prop_def(ArrayAttr[SymbolRefAttr])
    outputs = prop_def(ArrayAttr[SymbolRefAttr])
    body = region_def()

    traits = traits_def(SymbolOpInterface(), HasParent(ModuleOp))

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
        region: Region | None = None,
    ):
        super().__init__(
            properties={"sym_name": StringAttr(name), "inputs": refs(inputs), "outputs": refs(outputs)},
            regions=[region if region is not None else Region(Block())],
        )

    def verify_(self) -> None:
        if not self.body.blocks:
            raise VerifyException(f"program @{self.sym_name.data} has no blocks")
        for block in self.body.blocks:
            if block.args:
                raise VerifyException("stack blocks take no arguments; move values with stack.write")
        if self.body.blocks.first.predecessors():  # type: ignore[union-attr]
            raise VerifyException(
                f"program @{self.sym_name.data}: the entry block is the target of a jump; the entry block "
                "cannot be a jump target (jump to a separate block instead)"
            )
        for name in (*self.inputs.data, *self.outputs.data):
            lookup_variable(self, name, VarOp)


class _InProgram(HasParent):
    def __init__(self) -> None:
        super().__init__(ProgramOp)


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """`stack.constant @c = 2 : i64`: write a constant into a variable."""

    name = "stack.constant"

    var = prop_def(SymbolRefAttr)
    value = prop_def(ConstantValue)
    weak = opt_prop_def(UnitAttr)

    traits = traits_def(_InProgram())

    custom_directives = (ConstantLiteral,)
    assembly_format = "$var `=` (`weak` $weak^)? custom<ConstantLiteral>($value) attr-dict"

    def __init__(self, var: str | SymbolRefAttr, value: Attribute):
        super().__init__(properties={"var": refs([var]).data[0], "value": value})

    def verify_(self) -> None:
        expected = var_type(self, self.var)
        if self.value.get_type() != expected:
            raise VerifyException(
                f"constant of type {self.value.get_type()} written to @{self.var.string_value()} of type {expected}"
            )


@irdl_op_definition
class PrimOp(IRDLOperation):
    """`stack.prim "add"(@a, @b) -> (@c)`: read variables, compute, write the result variables.

    Results are written after all operands are read, so an op may write its own input."""

    name = "stack.prim"

    fn = opt_prop_def(StringAttr)
    callee = opt_prop_def(SymbolRefAttr)
    params = opt_prop_def(DictionaryAttr)
    inputs = prop_def(ArrayAttr[SymbolRefAttr])
    outputs = prop_def(ArrayAttr[SymbolRefAttr])

    traits = traits_def(_InProgram())

    custom_directives = (PrimHead, SymbolList)
    assembly_format = (
        "custom<PrimHead>($fn, $callee, $params) `(` custom<SymbolList>($inputs) `)` "
        "`->` `(` custom<SymbolList>($outputs) `)` attr-dict"
    )

    def __init__(
        self,
        fn: str | SymbolRefAttr,
        inputs: Sequence[str | SymbolRefAttr],
        outputs: Sequence[str | SymbolRefAttr],
        params: DictionaryAttr | None = None,
    ):
        props: dict[str, Attribute] = {"inputs": refs(inputs), "outputs": refs(outputs)}
        props |= prim_properties(fn, params)
        super().__init__(properties=props)

    @property
    def prim_name(self) -> str:
        return self.fn.data if self.fn is not None else self.callee.string_value()  # type: ignore[union-attr]

    def verify_(self) -> None:
        verify_prim_signature(
            self.fn.data if self.fn is not None else None, self.callee, len(self.inputs), len(self.outputs), self.params
        )
        verify_opaque_callee(self, self.callee)
        check_readable(self, self.inputs.data)
        for name in self.outputs.data:
            lookup_variable(self, name, VarOp)

    # ----- the reference's `PrimOp` interface -----------------------------------------------
    @property
    def vars_in(self) -> list[str]:
        """The names of the variables the prim reads, in operand order."""
        return [name.string_value() for name in self.inputs.data]

    @property
    def vars_out(self) -> list[str]:
        """The names of the variables the prim writes, in result order."""
        return [name.string_value() for name in self.outputs.data]

    @property
    def skip_push_mask(self) -> frozenset[str]:
        """The outputs updated in place rather than pushed: all of them. A `stack.prim` never
        saves the old values of its outputs (the reference's prim pushes those not in this
        set); saving is an explicit `stack.push` before it."""
        return frozenset(self.vars_out)

    @property
    def function(self) -> Callable[..., tuple[Any, ...]]:
        """The computation on whole-batch NumPy arrays (leading batch dimension, one argument
        per `vars_in`), returning a tuple with one array per `vars_out`: a builtin prim with
        NumPy semantics (operands of lower event rank aligned after the batch axis, the result
        in the declared dtype of its output variable when the op is in a module), an array prim
        by its implementation (`abir.array_prims`), an opaque prim by the callable registered
        under its name (looked up when called)."""
        return prim_function(self)

    def replace(self, vars_out: Sequence[str | SymbolRefAttr] | None = None) -> PrimOp:
        """A copy (not inserted anywhere) writing `vars_out` instead."""
        if vars_out is None:
            raise ValueError("stack.prim replace: nothing to replace; pass vars_out=[...] (the output variables)")
        callee = self.callee if self.callee is not None else self.prim_name
        op = PrimOp(callee, self.inputs.data, vars_out, self.params)
        op.attributes |= self.attributes
        return op


def prim_function(op: PrimOp) -> Callable[..., tuple[Any, ...]]:
    """`PrimOp.function`: see there."""
    count = len(op.outputs.data)
    if op.callee is not None:
        symbol = op.callee.string_value()

        def opaque(*args: Any) -> tuple[Any, ...]:
            from abir.opaque import lookup_opaque  # the registry of the user's callables

            results = lookup_opaque(symbol)(*args)
            return (results,) if count == 1 else tuple(results)

        return opaque
    name = op.prim_name
    if array_prims.is_array_prim(name):
        implementation = array_prims.implementation(name, decode_params(op.params))
        return lambda *args: (implementation(*args),)
    dtype = _declared_dtype(op)

    def builtin(*args: Any) -> tuple[Any, ...]:
        arrays = [np.asarray(a) for a in args]
        rank = max(a.ndim for a in arrays)
        aligned = [a.reshape(a.shape[:1] + (1,) * (rank - a.ndim) + a.shape[1:]) for a in arrays]
        result = np.asarray(prims.apply_numpy(name, aligned, dtype))
        return (result if dtype is None else result.astype(dtype),)

    return builtin


def _declared_dtype(op: PrimOp) -> np.dtype | None:
    """The dtype of the prim's (first) output variable, or None outside a module declaring it
    (xDSL's symbol lookup raises ValueError for an op in no module)."""
    try:
        return tensor_type_of(var_type(op, op.outputs.data[0])).dtype
    except (VerifyException, ValueError, TypeError):
        return None


@irdl_op_definition
class WriteOp(IRDLOperation):
    """`stack.write @a, @b = @b, @t`: a parallel copy (all sources are read before any write)."""

    name = "stack.write"

    targets = prop_def(ArrayAttr[SymbolRefAttr])
    sources = prop_def(ArrayAttr[SymbolRefAttr])

    traits = traits_def(_InProgram())

    custom_directives = (SymbolList,)
    assembly_format = "custom<SymbolList>($targets) `=` custom<SymbolList>($sources) attr-dict"

    def __init__(self, targets: Sequence[str | SymbolRefAttr], sources: Sequence[str | SymbolRefAttr]):
        super().__init__(properties={"targets": refs(targets), "sources": refs(sources)})

    def verify_(self) -> None:
        if len(self.targets) != len(self.sources) or not self.targets.data:
            raise VerifyException(
                f"stack.write needs as many sources as targets (and at least one); got {len(self.targets)} "
                f"target(s) and {len(self.sources)} source(s)"
            )
        names = [t.string_value() for t in self.targets.data]
        if twice := next((n for i, n in enumerate(names) if n in names[:i]), None):
            raise VerifyException(f"stack.write writes @{twice} twice; each target may appear only once")
        check_readable(self, self.sources.data)
        for target, source in zip(self.targets.data, self.sources.data, strict=True):
            t_type, s_type = var_type(self, target), var_type(self, source)
            if t_type != s_type:
                raise VerifyException(
                    f"cannot write @{target.string_value()} ({t_type}) from @{source.string_value()} ({s_type})"
                )


class SavedValuesOpBase(IRDLOperation):
    """push/pop/peek (in `stack` and `vm`): an operation on the saved values of one or more
    stack variables, written `stack.push @a, @b`."""

    vars = prop_def(ArrayAttr[SymbolRefAttr])
    VERB: ClassVar[str] = ""

    custom_directives = (SymbolList,)
    assembly_format = "custom<SymbolList>($vars) attr-dict"

    def __init__(self, *names: str | SymbolRefAttr):
        super().__init__(properties={"vars": refs(names)})

    def verify_(self) -> None:
        if not self.vars.data:
            raise VerifyException(f"{self.name} needs at least one variable")
        self.verify_storage()

    def verify_storage(self) -> None:
        """Each dialect checks that the variables can hold saved values."""
        raise NotImplementedError


class _StackOpBase(SavedValuesOpBase):
    traits = traits_def(_InProgram())

    def verify_storage(self) -> None:
        check_stack_storage(self, self.vars.data, self.VERB)


@irdl_op_definition
class PushOp(_StackOpBase):
    """Save the current value of each variable on its stack."""

    name = "stack.push"
    VERB: ClassVar[str] = "pushed"


@irdl_op_definition
class PopOp(_StackOpBase):
    """Restore each variable's last saved value and drop it from the stack."""

    name = "stack.pop"
    VERB: ClassVar[str] = "popped"


@irdl_op_definition
class PeekOp(_StackOpBase):
    """Restore each variable's last saved value and keep it saved (a fused pop + push)."""

    name = "stack.peek"
    VERB: ClassVar[str] = "peeked"


@irdl_op_definition
class GotoOp(IRDLOperation):
    """Jump to a block."""

    name = "stack.goto"
    dest = successor_def()
    traits = traits_def(IsTerminator(), _InProgram())
    assembly_format = "$dest attr-dict"

    def __init__(self, dest: Block):
        super().__init__(successors=[dest])


@irdl_op_definition
class BranchOp(IRDLOperation):
    """Per member: jump to the first block if the boolean variable holds, else to the second."""

    name = "stack.branch"
    cond = prop_def(SymbolRefAttr)
    then_dest = successor_def()
    else_dest = successor_def()
    traits = traits_def(IsTerminator(), _InProgram())
    assembly_format = "$cond `,` $then_dest `,` $else_dest attr-dict"

    def __init__(self, cond: str | SymbolRefAttr, then_dest: Block, else_dest: Block):
        super().__init__(properties={"cond": refs([cond]).data[0]}, successors=[then_dest, else_dest])

    def verify_(self) -> None:
        check_readable(self, [self.cond])
        cond_type = var_type(self, self.cond)
        if cond_type != IntegerType(1):
            raise VerifyException(
                f"branch condition @{self.cond.string_value()} has type {cond_type}; a per-member i1 is needed"
            )


@irdl_op_definition
class PushGotoOp(IRDLOperation):
    """A call: push the return block on the program-counter stack and jump to the callee."""

    name = "stack.push_goto"
    return_dest = successor_def()
    dest = successor_def()
    traits = traits_def(IsTerminator(), _InProgram())
    assembly_format = "$return_dest `,` $dest attr-dict"

    def __init__(self, return_dest: Block, dest: Block):
        super().__init__(successors=[return_dest, dest])


@irdl_op_definition
class IndirectGotoOp(IRDLOperation):
    """A return: pop the program-counter stack and jump to the block found there."""

    name = "stack.indirect_goto"
    traits = traits_def(IsTerminator(), _InProgram())
    assembly_format = "attr-dict"


@irdl_op_definition
class HaltOp(IRDLOperation):
    """The member is finished."""

    name = "stack.halt"
    traits = traits_def(IsTerminator(), _InProgram())
    assembly_format = "attr-dict"


Stack = Dialect(
    "stack",
    [
        VarOp,
        ProgramOp,
        ConstantOp,
        PrimOp,
        WriteOp,
        PushOp,
        PopOp,
        PeekOp,
        GotoOp,
        BranchOp,
        PushGotoOp,
        IndirectGotoOp,
        HaltOp,
    ],
    [StorageAttr],
)
