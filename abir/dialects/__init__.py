"""abir's dialects (one file each) and the registry of every dialect abir-opt understands."""

import re
from collections.abc import Callable

from xdsl.ir import Dialect, Operation
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
    terminator, an empty function body), which it raises unmarked."""
    try:
        module.verify()
    except VerifyException as error:
        if getattr(error, "__notes__", None):
            raise
        _innermost_failing(module).emit_error(str(error), error)


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
