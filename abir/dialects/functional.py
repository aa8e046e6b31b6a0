"""The `functional` dialect: what the frontend emits.

SSA form in the MLIR style. Each decorated Python function becomes a `functional.func` whose
body is a control-flow graph (branches are `cf.br` / `cf.cond_br` with block arguments; loops
are back edges). The batch dimension is implicit: the IR says what happens to ONE example.

    functional.func @fib(%n: i64) -> i64 {
      %c2 = functional.constant 2 : i64
      %cond = functional.prim "greater"(%n, %c2) : (i64, i64) -> i1
      cf.cond_br %cond, ^recurse, ^base
    ^recurse:
      ...
      %f1 = functional.call @fib(%a1) : (i64) -> i64
      ...
    }

`functional.prim` is the unit of batched work: a builtin elementwise operation named as in the
Array API (`"add"`, `"where"`, ...; see `abir.prims`), a builtin array operation with its static
parameters (`"sum" <{axis = 0 : i64}>`, `"getitem" <{index = ["?", "1:"]}>`, `"matmul"`; see
`abir.array_prims`), or an opaque Python callable the user marked as batch-aware, referenced by
symbol (`@helper`) and declared once per module by `functional.opaque @helper "source text"`.
Values whose type is not known yet have type `!functional.unknown`; type inference replaces it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    FloatAttr,
    FunctionType,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    UnitAttr,
    i64,
)
from xdsl.dialects.utils import parse_func_op_like, print_func_op_like
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    ParametrizedAttribute,
    Region,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    ParamAttrConstraint,
    VarConstraint,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    FormatDirective,
    ParsingState,
    PrintingState,
    irdl_custom_directive,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    CallableOpInterface,
    ConditionallySpeculatable,
    ConstantLike,
    EffectInstance,
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    MemoryEffect,
    Pure,
    ReturnLike,
    SymbolOpInterface,
    SymbolUserOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from abir import array_prims, prims
from abir.dialects.parsing import operand_count_message, parsed_end
from abir.dialects.symbols import lookup_symbol
from abir.types import is_value_type


@irdl_attr_definition
class UnknownType(ParametrizedAttribute, TypeAttribute):
    """`!functional.unknown`: a per-member type that type inference has not determined yet."""

    name = "functional.unknown"


def types_compatible(a: Attribute, b: Attribute) -> bool:
    """Equal types, or at least one of them not known yet."""
    return a == b or isinstance(a, UnknownType) or isinstance(b, UnknownType)


def _check_types(what: str, expected: Sequence[Attribute], actual: Sequence[Attribute]) -> None:
    if len(expected) != len(actual):
        raise VerifyException(f"{what}: expected {len(expected)} value(s), got {len(actual)}")
    for i, (want, got) in enumerate(zip(expected, actual, strict=True)):
        if not types_compatible(want, got):
            raise VerifyException(f"{what}: value {i} has type {got}, but {want} is expected")


class FuncOpCallable(CallableOpInterface):
    """Lets xDSL's generic machinery see a `functional.func` as a callable."""

    @classmethod
    def get_callable_region(cls, op: Operation) -> Region:
        assert isinstance(op, FuncOp)
        return op.body

    @classmethod
    def get_argument_types(cls, op: Operation) -> tuple[Attribute, ...]:
        assert isinstance(op, FuncOp)
        return op.function_type.inputs.data

    @classmethod
    def get_result_types(cls, op: Operation) -> tuple[Attribute, ...]:
        assert isinstance(op, FuncOp)
        return op.function_type.outputs.data


@irdl_op_definition
class FuncOp(IRDLOperation):
    """A batched function: one Python function for one example, as a control-flow graph."""

    name = "functional.func"

    body = region_def()
    sym_name = prop_def(SymbolNameConstraint())
    function_type = prop_def(FunctionType)

    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface(), FuncOpCallable(), HasParent(ModuleOp))

    def __init__(
        self,
        name: str,
        function_type: FunctionType | tuple[Sequence[Attribute], Sequence[Attribute]],
        region: Region | None = None,
    ):
        if isinstance(function_type, tuple):
            function_type = FunctionType.from_lists(*function_type)
        if region is None:
            region = Region(Block(arg_types=function_type.inputs))
        super().__init__(
            properties={"sym_name": StringAttr(name), "function_type": function_type}, regions=[region]
        )

    @property
    def entry_block(self) -> Block:
        block = self.body.blocks.first
        assert block is not None
        return block

    def verify_(self) -> None:
        if not self.body.blocks:
            raise VerifyException(f"function @{self.sym_name.data} has no body")
        if self.entry_block.predecessors():
            raise VerifyException(
                f"function @{self.sym_name.data}: the entry block is the target of a branch; the entry block "
                "cannot be a branch target (branch to a separate loop-header block instead)"
            )
        arg_types = self.entry_block.arg_types
        if tuple(arg_types) != self.function_type.inputs.data:
            raise VerifyException(
                f"function @{self.sym_name.data}: entry block arguments {list(map(str, arg_types))} "
                f"differ from the parameter types {list(map(str, self.function_type.inputs.data))}"
            )

    # Hand-written, as xDSL's func.func: named entry-block arguments in the signature are not
    # expressible in the declarative format.
    @classmethod
    def parse(cls, parser: Parser) -> FuncOp:
        name, inputs, outputs, region, extra_attrs, _, _ = parse_func_op_like(
            parser, reserved_attr_names=("sym_name", "function_type")
        )
        op = FuncOp(name, (inputs, outputs), region)
        if extra_attrs is not None:
            op.attributes |= extra_attrs.data
        return op

    def print(self, printer: Printer) -> None:
        print_func_op_like(
            printer,
            self.sym_name,
            self.function_type,
            self.body,
            self.attributes,
            reserved_attr_names=("sym_name", "function_type"),
        )


@irdl_custom_directive
class OperandTypes(CustomDirective):
    """A type list of an op's variadic operands (`type($arguments)` or `functional-type(...)`),
    checked against the operands written before it: custom so that a list with too few or too
    many types is reported at the list itself, saying which operands and types are there. (The
    declarative format finds the mismatch only after the op, where the parser already stands on
    the next line.)"""

    types: FormatDirective

    def parse(self, parser: Parser, state: ParsingState) -> None:
        start = parser.pos
        before = list(state.operand_types)
        self.types.parse(parser, state)
        for index, (operands, types) in enumerate(zip(state.operands, state.operand_types, strict=True)):
            if before[index] is not None or not isinstance(operands, Sequence) or not isinstance(types, Sequence):
                continue
            if len(operands) != len(types):
                message = operand_count_message(state.op_type.name, operands, types)
                parser.raise_error(message, start, end_of_parsed(parser, start))

    def set_empty(self, state: ParsingState) -> None:
        self.types.set_empty(state)

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        self.types.print(printer, state, op)


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """Return from a `functional.func` with its (flattened) results."""

    name = "functional.return"

    arguments = var_operand_def()

    traits = lazy_traits_def(lambda: (IsTerminator(), ReturnLike(), HasParent(FuncOp)))

    custom_directives = (OperandTypes,)
    assembly_format = "($arguments^ `:` custom<OperandTypes>(type($arguments)))? attr-dict"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[list(values)])

    def verify_(self) -> None:
        func = self.parent_op()
        assert isinstance(func, FuncOp)
        _check_types(
            f"return from @{func.sym_name.data} does not match its result types",
            func.function_type.outputs.data,
            self.arguments.types,
        )


class CallSymbolUser(SymbolUserOpInterface):
    """Checks that a call names a function of the module with matching argument/result types."""

    def verify(self, op: Operation) -> None:
        assert isinstance(op, CallOp)
        name = op.callee.string_value()
        callee = lookup_symbol(op, op.callee)
        if callee is None:
            raise VerifyException(f"call to @{name}, but no function @{name} is defined in this module")
        if not isinstance(callee, FuncOp):
            raise VerifyException(f"call to @{name}, which is a {callee.name}, not a functional.func")
        ftype = callee.function_type
        if len(ftype.inputs) != len(op.arguments):
            raise VerifyException(
                f"call to @{name} passes {len(op.arguments)} argument(s), but @{name} takes {len(ftype.inputs)}"
            )
        _check_types(f"arguments of call to @{name}", ftype.inputs.data, op.arguments.types)
        if len(ftype.outputs) != len(op.results):
            raise VerifyException(
                f"call to @{name} expects {len(op.results)} result(s), but @{name} returns {len(ftype.outputs)}"
            )
        _check_types(f"results of call to @{name}", ftype.outputs.data, op.result_types)


@irdl_custom_directive
class Callee(CustomDirective):
    """The callee of a call, `@fib`; custom to say so when the `@` is missing."""

    callee: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        if (name := parser.parse_optional_symbol_name()) is None:
            parser.raise_error("expected the called function's symbol, such as @fib")
        self.callee.set(state, SymbolRefAttr(name))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_attribute(self.callee.get(op))  # type: ignore[arg-type]


@irdl_op_definition
class CallOp(IRDLOperation):
    """A batched call of a function of the same module (static callee; recursion allowed)."""

    name = "functional.call"

    arguments = var_operand_def()
    callee = prop_def(SymbolRefAttr)
    res = var_result_def()

    traits = traits_def(CallSymbolUser())

    custom_directives = (Callee, OperandTypes)
    assembly_format = (
        "custom<Callee>($callee) `(` $arguments `)` attr-dict `:` custom<OperandTypes>(functional-type($arguments, $res))"
    )

    def __init__(self, callee: str | SymbolRefAttr, arguments: Sequence[SSAValue | Operation], result_types: Sequence[Attribute]):
        if isinstance(callee, str):
            callee = SymbolRefAttr(callee)
        super().__init__(operands=[list(arguments)], result_types=[list(result_types)], properties={"callee": callee})


@irdl_custom_directive
class SourceText(CustomDirective):
    """An opaque callable's source text, a string literal; custom to say so where it is missing."""

    source: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        if (text := parser.parse_optional_str_literal()) is None:
            parser.raise_error('expected the callable\'s source text as a string literal, such as "lambda x: x"')
        self.source.set(state, StringAttr(text))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_attribute(self.source.get(op))  # type: ignore[arg-type]


@irdl_op_definition
class OpaqueOp(IRDLOperation):
    """Declares an opaque Python callable used by `functional.prim @name`, with its source text.

    The callable itself lives in a Python registry (`abir.opaque`); a program read from text can
    run only if its opaque callables are registered under the same names.
    """

    name = "functional.opaque"

    sym_name = prop_def(SymbolNameConstraint())
    source = prop_def(StringAttr)

    traits = traits_def(SymbolOpInterface(), HasParent(ModuleOp))

    custom_directives = (SourceText,)
    assembly_format = "$sym_name custom<SourceText>($source) attr-dict"

    def __init__(self, name: str, source: str):
        super().__init__(properties={"sym_name": StringAttr(name), "source": StringAttr(source)})


def verify_opaque_callee(op: Operation, callee: SymbolRefAttr | None) -> None:
    """Shared by the prim ops of all three dialects: an opaque prim's callee symbol names a
    `functional.opaque` declaration of the module."""
    if callee is None:
        return
    name = callee.string_value()
    decl = lookup_symbol(op, callee)
    if decl is None:
        raise VerifyException(f"prim @{name} has no `functional.opaque @{name}` declaration in this module")
    if not isinstance(decl, OpaqueOp):
        raise VerifyException(
            f"prim @{name} names a {decl.name}; an opaque prim must name a `functional.opaque` declaration"
        )


class PrimSymbolUser(SymbolUserOpInterface):
    """Checks that an opaque prim names a `functional.opaque` declaration."""

    def verify(self, op: Operation) -> None:
        assert isinstance(op, PrimOp)
        verify_opaque_callee(op, op.callee)


def verify_prim_signature(
    fn: str | None, callee: SymbolRefAttr | None, n_operands: int, n_results: int, params: DictionaryAttr | None = None
) -> None:
    """Shared by `functional.prim`, `stack.prim` and `vm.prim`: exactly one of a builtin name or
    a callee symbol; elementwise builtins have their Array-API arity, no parameters and a single
    result; array prims the operands, parameters and result `abir.array_prims` gives them."""
    if (fn is None) == (callee is None):
        raise VerifyException("a prim names exactly one of a builtin operation or an opaque callable")
    if fn is None:
        if params is not None:
            raise VerifyException("an opaque prim takes no parameters")
        return
    if array_prims.is_array_prim(fn):
        try:
            array_prims.check(fn, decode_params(params), n_operands, n_results)
        except ValueError as e:
            raise VerifyException(str(e)) from None
        return
    if not prims.is_builtin(fn):
        raise VerifyException(
            f'unknown builtin prim "{fn}"; use an Array-API name such as "add" or "less", or an array prim '
            f"({', '.join(array_prims.SIGNATURES)})"
        )
    if params is not None:
        raise VerifyException(f'builtin prim "{fn}" takes no parameters')
    arity = prims.ARITY[fn]
    if n_operands != arity:
        raise VerifyException(f'builtin prim "{fn}" takes {arity} operand(s), got {n_operands}')
    if n_results != 1:
        raise VerifyException(f'builtin prim "{fn}" has exactly one result, got {n_results}')


PrimParams = dict[str, Any]
"""The static parameters of an array prim as Python values (see `abir.array_prims`)."""


def encode_params(params: PrimParams | None) -> DictionaryAttr | None:
    """The `params` attribute of an array prim: ints as i64, tuples of ints as `array<i64: ...>`,
    True flags as unit attributes (False and None are left out), strings, lists of strings."""
    if not params:
        return None
    entries: dict[str, Attribute] = {}
    for key, value in params.items():
        if value is None or value is False:
            continue
        entries[key] = _encode_param(key, value)
    return DictionaryAttr(entries) if entries else None


def _encode_param(key: str, value: Any) -> Attribute:
    if value is True:
        return UnitAttr()
    if isinstance(value, int):
        return IntegerAttr(int(value), 64)
    if isinstance(value, str):
        return StringAttr(value)
    if isinstance(value, tuple):
        return DenseArrayBase.from_list(i64, [int(v) for v in value])
    if isinstance(value, list):
        return ArrayAttr([StringAttr(v) for v in value])
    raise TypeError(f"prim parameter {key}={value!r} has no attribute encoding")


def decode_params(params: DictionaryAttr | None) -> PrimParams:
    """The Python values of a prim's `params` attribute; a VerifyException for an attribute
    that is not a parameter value."""
    if params is None:
        return {}
    return {key: _decode_param(key, attr) for key, attr in params.data.items()}


def _decode_param(key: str, attr: Attribute) -> Any:
    if isinstance(attr, UnitAttr):
        return True
    if isinstance(attr, IntegerAttr):
        return int(attr.value.data)
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, DenseArrayBase):
        return tuple(int(v) for v in attr.get_values())
    if isinstance(attr, ArrayAttr) and all(isinstance(a, StringAttr) for a in attr.data):
        return [a.data for a in attr.data]  # type: ignore[attr-defined]
    raise VerifyException(
        f"prim parameter {key} = {attr} is not an integer, array<i64: ...>, unit flag, string or array of strings"
    )


@irdl_custom_directive
class PrimHead(CustomDirective):
    """The head of a prim op: a builtin name with its optional parameters (`"add"`,
    `"sum" <{axis = 0 : i64}>`) or an opaque callable's symbol (`@helper`).

    Custom because `fn` and `callee` are both optional builtin attributes: an optional group
    would parse any attribute into the first of them."""

    fn: AttributeVariable
    callee: AttributeVariable
    params: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        if (sym := parser.parse_optional_symbol_name()) is not None:
            self.callee.set(state, SymbolRefAttr(sym))
            return
        self.fn.set(state, StringAttr(parser.parse_str_literal(' for the prim: a builtin name such as "add", or @callee')))
        if params := parser.parse_optional_properties_dict():
            self.params.set(state, DictionaryAttr(params))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        if (callee := self.callee.get(op)) is not None:
            assert isinstance(callee, SymbolRefAttr)
            printer.print_symbol_name(callee.string_value())
            return
        fn = self.fn.get(op)
        assert isinstance(fn, StringAttr)
        printer.print_string_literal(fn.data)
        if (params := self.params.get(op)) is not None:
            assert isinstance(params, DictionaryAttr)
            printer.print_string(" <")
            printer.print_attr_dict(params.data)
            printer.print_string(">")


def prim_properties(fn: str | SymbolRefAttr, params: PrimParams | DictionaryAttr | None) -> dict[str, Attribute]:
    """The properties of a prim op naming `fn` (a builtin name or an opaque symbol) with `params`."""
    if isinstance(fn, SymbolRefAttr):
        return {"callee": fn}
    props: dict[str, Attribute] = {"fn": StringAttr(fn)}
    encoded = params if isinstance(params, DictionaryAttr) else encode_params(params)
    if encoded is not None:
        props["params"] = encoded
    return props


class SSAPrimOpBase(IRDLOperation):
    """A primitive on SSA values (`functional.prim`, `vm.prim`): a builtin Array-API operation
    named by string, or an opaque callable named by symbol, with the shared custom syntax
    `"add"(%a, %b) : (i64, i64) -> i64` / `@helper(%x) : (f64) -> (f64, f64)`."""

    arguments = var_operand_def()
    fn = opt_prop_def(StringAttr)
    callee = opt_prop_def(SymbolRefAttr)
    params = opt_prop_def(DictionaryAttr)
    res = var_result_def()

    custom_directives = (PrimHead, OperandTypes)
    assembly_format = (
        "custom<PrimHead>($fn, $callee, $params) `(` $arguments `)` attr-dict `:` "
        "custom<OperandTypes>(functional-type($arguments, $res))"
    )

    def __init__(
        self,
        fn: str | SymbolRefAttr,
        arguments: Sequence[SSAValue | Operation],
        result_types: Sequence[Attribute],
        params: PrimParams | DictionaryAttr | None = None,
    ):
        props = prim_properties(fn, params)
        super().__init__(operands=[list(arguments)], result_types=[list(result_types)], properties=props)

    @property
    def is_builtin(self) -> bool:
        """Whether the prim is a builtin elementwise operation (`abir.prims`)."""
        return self.fn is not None and not array_prims.is_array_prim(self.fn.data)

    @property
    def is_array_prim(self) -> bool:
        """Whether the prim is a builtin array operation (`abir.array_prims`)."""
        return self.fn is not None and array_prims.is_array_prim(self.fn.data)

    @property
    def param_values(self) -> PrimParams:
        """The static parameters as Python values."""
        return decode_params(self.params)

    @property
    def prim_name(self) -> str:
        """The builtin name, or the callee symbol for an opaque prim."""
        return self.fn.data if self.fn is not None else self.callee.string_value()  # type: ignore[union-attr]

    def verify_(self) -> None:
        verify_prim_signature(
            self.fn.data if self.fn is not None else None, self.callee, len(self.arguments), len(self.res), self.params
        )


class PrimEffects(MemoryEffect):
    """Builtin elementwise and array prims have no side effects; an opaque prim's are unknown
    (a user's callable), so xDSL's CSE and DCE leave it alone."""

    @classmethod
    def get_effects(cls, op: Operation) -> set[EffectInstance] | None:
        assert isinstance(op, SSAPrimOpBase)
        return set() if op.fn is not None else None


class PrimSpeculatable(ConditionallySpeculatable):
    """Builtin elementwise and array prims may run for members that would not reach them: they
    never trap (rows of inactive members hold junk anyway; per-member indices are clipped)."""

    @classmethod
    def is_speculatable(cls, op: Operation) -> bool:
        assert isinstance(op, SSAPrimOpBase)
        return op.fn is not None


@irdl_op_definition
class PrimOp(SSAPrimOpBase):
    """A batched primitive: a builtin Array-API operation or an opaque callable."""

    name = "functional.prim"

    traits = traits_def(PrimSymbolUser(), PrimEffects(), PrimSpeculatable())


# Discardable attributes the frontend puts on a `functional.prim` for `infer-types`, which
# reads and drops them (`abir.passes.prim_evaluation`):
LOCATION_ATTR = "abir.loc"
"""`"file:line"` of the Python construct an op comes from: on the array prims (until infer-types),
on `functional.call` (the call's own line) and on the terminators of functional and stack blocks
(the code their block runs, the call for a block ending in one; the passes keep it, stack-to-vm
puts it on the vm block)."""
CALL_LOCATION_ATTR = "abir.call_loc"
"""`"file:line"` of the call a stack or vm op saves state for: on `stack.push`/`stack.push_goto`
and `vm.push`/`vm.call` (set by lower-calls, kept by the passes), so that a stack overflow names
the call being made even where a block holds code of several statements."""
SOURCE_ATTR = "abir.source"
"""The Python construct's text (`"v[i]"`)."""
INTEGER_OPERANDS_ATTR = "abir.integer_operands"
"""The prim's operands must be integers or booleans, else type inference fails with the
attribute's text (the frontend's located error for a float `range()` bound)."""
ARRAY_OPERAND_ERROR_ATTR = "abir.array_operand_error"
"""On the prim of `x op= v`: type inference fails with the attribute's text when `x` (the first
operand) is a per-member array, which NumPy would update in place where abir cannot follow it."""
TRUTH_VALUE_ATTR = "abir.truth_value"
"""On the `astype` to i1 of a value used as a truth value: how it is used (`"the condition of
this `if`"`). Type inference requires each member's operand to have one element, as Python's
`bool()` of a NumPy array does (a size-1 array is reduced to its element), and raises a located
`TruthValueError` otherwise."""
SCALAR_CONVERSION_ATTR = "abir.scalar_conversion"
"""On the `astype` of Python's `float()` or `int()` (the builtin's name): each member's operand must
be a scalar, as NumPy converts only 0-dimensional arrays to Python scalars; type inference raises a
located `ScalarConversionError` otherwise."""
SELECT_ATTR = "abir.select"
"""On the `where` of a conditional expression, `and` or `or` (`"an `and`"`): Python gives
one operand itself, so each member's two candidates must have one shape, as where the paths of an
`if` meet; type inference raises a located error otherwise (a `where` would broadcast them)."""
IN_PLACE_RESULT_ATTR = "abir.in_place_result"
"""On the prim of `x op= v`: when `x` (the first operand) is a per-member array, NumPy updates it
in place, so the result keeps its dtype and shape; else type inference fails with the text."""


ConstantValue = IntegerAttr | FloatAttr | DenseIntOrFPElementsAttr
"""What a constant op holds: an integer (or boolean), float or dense tensor attribute."""


def typed_constant_value(value_type: VarConstraint) -> Any:
    """The constraint of a constant op's `value` whose type is `value_type`, as in `arith.constant`:
    the result type is the value's, so the custom syntax writes it once (`2 : i64`)."""
    return (
        IntegerAttr.constr(value_type)
        | ParamAttrConstraint(FloatAttr, (AnyAttr(), value_type))
        | ParamAttrConstraint(DenseIntOrFPElementsAttr, (value_type, AnyAttr()))
    )


CONSTANT_SYNTAX = (
    "an integer or float with its type (`2 : i64`, `0.5 : f64`), `true`, `false`, or "
    "`dense<[1, 2]> : tensor<2xi64>`"
)
"""What `functional.constant`, `stack.constant` and `vm.constant` accept as their value."""


def end_of_parsed(parser: Parser, start: int) -> int:
    """Where the text parsed since `start` ends, before the whitespace and comments the lexer has
    skipped (`parser.pos` is the start of the next token, often on the next line)."""
    return max(start, parsed_end(parser))


@irdl_custom_directive
class ConstantLiteral(CustomDirective):
    """A constant's value: `2 : i64`, `true`, `dense<[1, 2]> : tensor<2xi64>`.

    Custom so that a value of the wrong kind is reported where it is written, saying what a
    constant can be; the declarative `$value` says "attribute expected", or names no location for
    an attribute of another kind (a string)."""

    value: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        start = parser.pos
        value = parser.parse_optional_attribute()
        if not isinstance(value, IntegerAttr | FloatAttr | DenseIntOrFPElementsAttr):
            if value is None:
                parser.raise_error(f"expected a constant value: {CONSTANT_SYNTAX}")
            parser.raise_error(
                f"{value} is not a constant value; expected {CONSTANT_SYNTAX}", start, end_of_parsed(parser, start)
            )
        self.value.set(state, value)

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_attribute(self.value.get(op))  # type: ignore[arg-type]


def verify_constant_value(value: Attribute) -> None:
    """Shared by `functional.constant` and `vm.constant`: the value has a per-member type."""
    value_type = value.get_type()  # type: ignore[attr-defined]
    if not is_value_type(value_type):
        raise VerifyException(
            f"constant of type {value_type} is not a per-member value; use a bool, integer or float "
            "scalar type (i1, i32, i64, f32, f64, ...) or a static tensor of one"
        )


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A per-member constant. `weak` marks a Python literal: under NumPy-2 promotion it takes the
    dtype of the array it is combined with (an int32 minus a literal 1 stays int32)."""

    name = "functional.constant"

    T: ClassVar = VarConstraint("T", AnyAttr())
    value = prop_def(typed_constant_value(T))
    weak = opt_prop_def(UnitAttr)
    res = result_def(T)

    traits = traits_def(Pure(), ConstantLike())

    custom_directives = (ConstantLiteral,)
    assembly_format = "(`weak` $weak^)? custom<ConstantLiteral>($value) attr-dict"

    def __init__(self, value: Attribute, weak: bool = False):
        props: dict[str, Attribute] = {"value": value}
        if weak:
            props["weak"] = UnitAttr()
        super().__init__(properties=props, result_types=[value.get_type()])  # type: ignore[attr-defined]

    def verify_(self) -> None:
        verify_constant_value(self.value)


Functional = Dialect(
    "functional",
    [FuncOp, ReturnOp, CallOp, OpaqueOp, PrimOp, ConstantOp],
    [UnknownType],
)
