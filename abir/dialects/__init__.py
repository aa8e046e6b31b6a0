"""abir's dialects (one file each) and the registry of every dialect abir-opt understands."""

import re
from collections.abc import Callable

from xdsl.ir import Dialect, Operation
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import VerifyException


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Lazy factories for our three dialects and the upstream ones our IR uses."""

    def get_builtin() -> Dialect:
        from xdsl.dialects.builtin import Builtin

        return Builtin

    def get_cf() -> Dialect:
        from xdsl.dialects.cf import Cf

        return Cf

    def get_arith() -> Dialect:
        from xdsl.dialects.arith import Arith

        return Arith

    def get_func() -> Dialect:
        from xdsl.dialects.func import Func

        return Func

    def get_functional() -> Dialect:
        from abir.dialects.functional import Functional

        return Functional

    def get_stack() -> Dialect:
        from abir.dialects.stack import Stack

        return Stack

    def get_vm() -> Dialect:
        from abir.dialects.vm import Vm

        return Vm

    return {
        "builtin": get_builtin,
        "cf": get_cf,
        "arith": get_arith,
        "func": get_func,
        "functional": get_functional,
        "stack": get_stack,
        "vm": get_vm,
    }


def make_context():
    """An xDSL context with every dialect of `get_all_dialects` registered (loaded lazily)."""
    from xdsl.context import Context

    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx


def verify_module(module: Operation) -> None:
    """`module.verify()`, with the failing op marked (as `verify_error_text` reads it) also for
    the structural checks xDSL makes outside an op's own verifier (a block that does not end in a
    terminator, an empty function body), which it raises unmarked; the error also remembers the
    op itself (`failing_op`), which a tool that read the module from text can point at."""
    try:
        _check_unique_symbols(module)
        module.verify()
    except VerifyException as error:
        if failing_op(error) is not None:
            raise
        op = _innermost_failing(module)
        mark_failing_op(error, op)
        if getattr(error, "__notes__", None):
            raise
        op.emit_error(str(error), error)


def _check_unique_symbols(module: Operation) -> None:
    """Fail at the second op that defines a symbol of a symbol table (xDSL's check of the table
    fails at the table: the whole module)."""
    for table in module.walk():
        if not table.has_trait(SymbolTable) or len(table.regions) != 1 or len(table.regions[0].blocks) != 1:
            continue
        first: dict[str, Operation] = {}
        for op in table.regions[0].block.ops:
            name = getattr(op.get_attr_or_prop("sym_name"), "data", None)
            if not isinstance(name, str):
                continue
            if name in first:
                message = f"@{name} is defined twice, here and by the {first[name].name} before; rename or remove one"
                error = VerifyException(message)
                mark_failing_op(error, op)
                op.emit_error(message, error)
            first[name] = op


_FAILING_OP = "abir_failing_op"
"""The attribute of an error that holds the op it rejects (see `mark_failing_op`)."""


def mark_failing_op(error: Exception, op: Operation) -> None:
    """Remember on `error` the op it rejects, so that a tool can point at the op's text: xDSL's
    `emit_error` only prints the op into a note."""
    setattr(error, _FAILING_OP, op)


def failing_op(error: BaseException) -> Operation | None:
    """The op `verify_module` or a pass (`mark_failing_op`) found `error` to reject, if any."""
    op = getattr(error, _FAILING_OP, None)
    return op if isinstance(op, Operation) else None


def enclosing_symbol(op: Operation) -> str | None:
    """The symbol of the nearest op around `op` that has one (its function or program)."""
    parent = op.parent_op()
    while parent is not None:
        name = parent.properties.get("sym_name") or parent.attributes.get("sym_name")
        if isinstance(data := getattr(name, "data", None), str):
            return data
        parent = parent.parent_op()
    return None


def _innermost_failing(op: Operation) -> Operation:
    """The deepest op under `op` (a failing op) whose verification, nested ops included, fails."""
    for region in op.regions:
        for block in region.blocks:
            for child in block.ops:
                try:
                    child.verify()
                except VerifyException:
                    return _innermost_failing(child)
    return op


def verify_error_text(error: Exception) -> str:
    """A verifier's message followed by where it fails: the op xDSL's verifier marks in the module
    it attaches to the error as a note (printed generically, the marker line under the op), and
    the symbol of the function or program around it. Ops read from text carry no file position,
    so the op itself is the location."""
    for note in getattr(error, "__notes__", ()):
        lines = note.splitlines()
        marked = next((i for i, line in enumerate(lines) if i > 0 and _MARKER.fullmatch(line)), None)
        if marked is None:
            continue
        op_line = lines[marked - 1]
        where = f"\n  at: {op_line.strip()}"
        if (symbol := _enclosing_symbol(lines[: marked - 1], _indent(op_line))) is not None:
            where += f"\n  in: @{symbol}"
        return f"{error}{where}"
    return str(error)


_MARKER = re.compile(r"\s*\^+-*")
"""The line xDSL's diagnostic printer puts under the failing op (`^^^^^^----`)."""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _enclosing_symbol(lines: list[str], indent: int) -> str | None:
    """The `sym_name` of the nearest line above indented less than `indent` that has one."""
    for line in reversed(lines):
        if _indent(line) < indent and not line.lstrip().startswith("^"):  # block labels are not ops
            indent = _indent(line)
            if (start := line.find('sym_name = "')) >= 0:
                start += len('sym_name = "')
                return line[start : line.index('"', start)]
    return None
