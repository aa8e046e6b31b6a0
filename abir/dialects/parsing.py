"""The parser abir's tools read IR text with: xDSL's, with diagnostics located at the op.

xDSL's parser reports some errors where the next token starts, which after the last token of
an op is often the next line or the end of the file; raises a constraint of the declarative
format with no location; and says no more of an unknown op than that it is not registered.
`AbirParser` remembers the last token it consumed and the op it is in, so that such errors
point at the op (`parsed_end` is where its text ends), and names the dialect's ops and the
closest names for an unknown op. (`OperandTypes` in `functional.py` reports a type list of the
wrong length at the list itself; the parser reports it at the op for the other dialects' ops.)

xDSL keeps no source position on a parsed op either, so a verifier's error could only print the
op. `AbirParser.op_spans` records where each op's text starts (its first line, up to its last
token there), and `located_error_text` prints an error that knows its op (`failing_op`: a
verifier's, through `verify_module`, or a pass's) at that text, as a parse error is printed.
The parser also refuses a shaped type with more elements than a per-member type may have
(`abir.types.MAX_MEMBER_ELEMENTS`), at the type and before a `dense` constant of that type is
expanded.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, ShapedType
from xdsl.ir import Block, Operation, SSAValue, TypeAttribute
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Position, Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

from abir import array_prims, prims
from abir.dialects import enclosing_symbol, failing_op
from abir.types import oversized_message


class AbirParser(Parser):
    """xDSL's MLIR parser with errors located at the op they concern (see the module docstring)."""

    def __init__(self, ctx: Context, input: str, name: str = "<unknown>", line_offset: int = 0) -> None:
        self.last_span: Span | None = None
        self.op_spans: dict[Operation, Span] = {}
        """Where the text of each parsed op starts: its first line, up to its last token there."""
        self._line_offset = line_offset
        self._open_ops: list[_OpText] = []
        super().__init__(ctx, input, name)

    def _consume_token(self, expected_kind: Any = None) -> Any:
        token = super()._consume_token(expected_kind)
        self.last_span = token.span
        if self._open_ops and token.span.start < (text := self._open_ops[-1]).line_end:
            text.first_line_end = token.span.end
        return token

    def parse_operation(self) -> Operation:
        start = self.pos
        text = _OpText(start, self.lexer.input.get_end_of_line(start))
        self._open_ops.append(text)
        try:
            op = super().parse_operation()
        except VerifyException as error:
            # A constraint of the declarative format (an attribute of the wrong kind where a
            # symbol belongs): xDSL raises it with no location.
            message = constraint_message(str(error))
            name = text.name
            self.raise_error(f"{name + ': ' if name else ''}{message}", start, max(start, parsed_end(self)))
        finally:
            self._open_ops.pop()
        if self._open_ops and start < (outer := self._open_ops[-1]).line_end:
            outer.first_line_end = max(outer.first_line_end, text.first_line_end)  # nested on its first line
        self.op_spans[op] = Span(start, text.first_line_end, self.lexer.input, self._line_offset)
        return op

    def _parse_optional_builtin_parametrized_type(self) -> TypeAttribute | None:
        start = self.pos
        type_ = super()._parse_optional_builtin_parametrized_type()
        if isinstance(type_, ShapedType) and (message := oversized_message(str(type_), type_.get_shape())):
            # Refused here, before a `dense` constant of this type is expanded element by element.
            self.raise_error(message, start, parsed_end(self))
        return type_

    def _parse_block(self) -> Block:
        label = self._current_token
        block = super()._parse_block()
        name = label.text[1:]
        if label.kind == MLIRTokenKind.CARET_IDENT and name in self.blocks and self.blocks[name][1] is None:
            # xDSL records no definition for a block referenced before it is defined, and then
            # fails with a KeyError on a second definition instead of reporting it.
            self.blocks[name] = (block, label.span)
        return block

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        if self._current_token.kind == MLIRTokenKind.EOF:
            self.raise_error(
                "the text holds no op; a module is a list of ops, such as functional.func, stack.program or "
                "vm.program with their variables",
                0,
                0,
            )
        try:
            return super().parse_module(allow_implicit_module)
        except ParseError as error:
            # Raised at the next token without `raise_error` (a region's dangling block
            # references, found after its `}`): the parser still stands where it was raised.
            if error.span.start == self.pos and (span := self._span_before_line_break()) is not None:
                error.span = Span(*span, self.lexer.input)
            raise

    def _get_op_by_name(self, name: str) -> type[Operation]:
        if op_type := self.ctx.get_optional_op(name, dialect_stack=self._parser_state.dialect_stack):
            if self._open_ops:
                self._open_ops[-1].name = op_type.name
            return op_type
        self.raise_error(unknown_op_message(self.ctx, name), self.last_span)

    def raise_error(
        self, msg: str, at_position: Position | Span | None = None, end_position: Position | None = None
    ) -> NoReturn:
        """As xDSL's, but an error at the next token when that token is on a later line than the
        text parsed so far (something is missing at the end of a line, or of the file) points at
        the op being parsed, or at the last token, instead."""
        if at_position is None and (span := self._span_before_line_break()) is not None:
            at_position, end_position = span
        super().raise_error(msg, at_position, end_position)  # type: ignore[arg-type]

    def _span_before_line_break(self) -> tuple[Position, Position] | None:
        last = self.last_span
        content = self.lexer.input.content
        if last is None or last.end > self.pos or "\n" not in content[last.end : self.pos]:
            return None
        start = last.start
        if self._open_ops and "\n" not in content[self._open_ops[-1].start : last.end]:
            start = self._open_ops[-1].start
        return start, last.end

    def resolve_operands(
        self, args: Sequence[UnresolvedOperand], input_types: Sequence[Any], error_pos: Position
    ) -> Sequence[SSAValue]:
        types = list(input_types)
        if len(args) != len(types) and error_pos == self.pos and self._open_ops:
            # The declarative format checks the counts after the whole op, standing on the next
            # token: point at the op instead.
            start = self._open_ops[-1].start
            message = operand_count_message(self._open_ops[-1].name, args, types)
            self.raise_error(message, start, max(start, parsed_end(self)))
        return super().resolve_operands(args, types, error_pos)


@dataclass
class _OpText:
    """The text of an op being parsed: where it starts, where its first line ends, where the
    last token on that line consumed so far ends, and the op's name once known."""

    start: Position
    line_end: Position
    first_line_end: Position = field(init=False)
    name: str | None = None

    def __post_init__(self) -> None:
        self.first_line_end = self.start


def parsed_end(parser: Parser) -> Position:
    """Where the last token `parser` consumed ends (`parser.pos` is where the next one starts,
    after the whitespace and comments the lexer skipped, often on the next line)."""
    span = getattr(parser, "last_span", None)
    if span is not None and span.end <= parser.pos:
        return span.end
    return len(parser.lexer.input.content[: parser.pos].rstrip())


def located_error_text(error: Exception, op_spans: Mapping[Operation, Span], prefix: str = "") -> str | None:
    """A verifier's or a pass's error at the text of the op it rejects (`failing_op`), as a parse
    error is printed: `file:line:column`, the op's first line with carets under the op, `prefix`
    and the message, then the function or program around the op. None when the op is not known
    or was not read from the text (a pass made it)."""
    op = failing_op(error)
    span = op_spans.get(op) if op is not None else None
    if op is None or span is None:
        return None
    text = span.print_with_context(f"{prefix}{error}").rstrip("\n")
    if (symbol := enclosing_symbol(op)) is not None:
        text += f"\n  in: @{symbol}"
    return text


def operand_count_message(op_name: str | None, operands: Sequence[UnresolvedOperand], types: Sequence[Any]) -> str:
    """What to say of a type list whose length differs from the number of operands."""
    return (
        f"{op_name + ' has ' if op_name else ''}{_counted(len(operands), 'operand')}"
        f"{_listed(o.span.text for o in operands)} but {_counted(len(types), 'operand type')}"
        f"{_listed(map(str, types))}; write one type per operand, in order"
    )


_WRONG_BASE = re.compile(r"(?P<attr>.*) should be of base attribute (?P<base>[\w.]+)", re.DOTALL)
_EXPECTED_BASE = {"symbol_ref": "a symbol, such as @x", "builtin.integer": "an integer", "string": "a string literal"}


def constraint_message(message: str) -> str:
    """xDSL's message for an attribute of the wrong kind, said as what was expected."""
    if (match := _WRONG_BASE.fullmatch(message)) is None:
        return message
    base = match["base"]
    return f"expected {_EXPECTED_BASE.get(base, f'a {base} attribute')}, not {match['attr']}"


def unknown_op_message(ctx: Context, name: str) -> str:
    """What to say of an op name no registered dialect defines: the dialect's ops and the closest
    names, or the dialects there are."""
    dialect_name, dot, op_name = name.partition(".")
    dialects = sorted(ctx.registered_dialect_names)
    if not dot:
        return (
            f"unknown op '{name}': an op's name starts with its dialect ({', '.join(dialects)}), "
            f"such as functional.prim{_did_you_mean(_closest(name, _all_op_names(ctx, dialects)))}"
        )
    dialect = ctx.get_optional_dialect(dialect_name)
    if dialect is None:
        all_ops = _all_op_names(ctx, dialects)
        respelled = [f"{d}.{op_name}" for d in _closest(dialect_name, dialects) if f"{d}.{op_name}" in all_ops]
        return (
            f"unknown op '{name}': there is no dialect '{dialect_name}'; the dialects are "
            f"{', '.join(dialects)}{_did_you_mean(respelled or _closest(name, all_ops))}"
        )
    ops = sorted(op.name.partition(".")[2] for op in dialect.operations)
    close = [f"{dialect_name}.{op}" for op in _closest(op_name, ops)]
    message = (
        f"unknown op '{name}': the {dialect_name} dialect has no op '{op_name}'; its ops are "
        f"{', '.join(ops)}{_did_you_mean(close)}"
    )
    if "prim" in ops and (prims.is_builtin(op_name) or array_prims.is_array_prim(op_name)):
        message += f'; elementwise and array operations are prims: {dialect_name}.prim "{op_name}"(...)'
    return message


def _all_op_names(ctx: Context, dialects: Iterable[str]) -> list[str]:
    names: list[str] = []
    for dialect_name in dialects:
        if (dialect := ctx.get_optional_dialect(dialect_name)) is not None:
            names += (op.name for op in dialect.operations)
    return names


def _closest(name: str, candidates: Sequence[str]) -> list[str]:
    return difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)


def _did_you_mean(close: Sequence[str]) -> str:
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def _counted(count: int, noun: str) -> str:
    return f"{count or 'no'} {noun}{'' if count == 1 else 's'}"


def _listed(items: Iterable[str]) -> str:
    text = ", ".join(items)
    return f" ({text})" if text else ""
