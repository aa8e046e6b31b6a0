"""The Python source of a decorated function: its AST, its names, and located errors.

`FunctionSource.of(fn)` parses the function once (at decoration), keeping the file name and the
line/column offsets so that every error names the user's own file, line and source text.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import linecache
import textwrap
import types
from dataclasses import dataclass, field
from typing import Any

from abir.errors import UnsupportedSyntaxError


@dataclass
class FunctionSource:
    """A parsed decorated function with everything needed to report errors in its terms."""

    function: types.FunctionType
    filename: str
    tree: ast.FunctionDef
    source: str
    """The dedented source text `tree` was parsed from (for source segments)."""
    line_offset: int
    col_offset: int
    lines: list[str] = field(default_factory=list)

    @staticmethod
    def of(function: Any) -> FunctionSource:
        """Parse `function`, or raise `UnsupportedSyntaxError` if it is not a plain `def`."""
        if not isinstance(function, types.FunctionType) or function.__name__ == "<lambda>":
            raise _not_a_function_error(function)
        filename = function.__code__.co_filename
        try:
            raw = inspect.getsource(function)
        except (OSError, TypeError) as e:
            raise UnsupportedSyntaxError(
                f"cannot read the source of {function.__qualname__}: {e}",
                filename=filename,
                lineno=function.__code__.co_firstlineno,
                suggestion="define batched functions in a .py file (not in an interactive prompt or exec)",
            ) from None
        source = textwrap.dedent(raw)
        col_offset = _indent_of(raw) - _indent_of(source)
        tree = ast.parse(source, filename=filename)
        definition = tree.body[0]
        lines = linecache.getlines(filename) or raw.splitlines()
        result = FunctionSource(function, filename, definition, source, 0, col_offset, lines)  # type: ignore[arg-type]
        result.line_offset = function.__code__.co_firstlineno - 1
        if isinstance(definition, ast.AsyncFunctionDef):
            raise result.error(definition, "async functions cannot be batched", "write a plain `def`")
        if not isinstance(definition, ast.FunctionDef) or definition.name != function.__name__:
            raise _not_a_function_error(function, filename)
        return result

    @property
    def name(self) -> str:
        return self.function.__name__

    def lineno(self, node: ast.AST) -> int:
        """The line of `node` in the user's file."""
        return getattr(node, "lineno", 1) + self.line_offset

    def location(self, node: ast.AST) -> str:
        """`file:line` of `node` (what the IR's `abir.loc` attributes hold)."""
        return f"{self.filename}:{self.lineno(node)}"

    def source_line(self, lineno: int) -> str | None:
        if 1 <= lineno <= len(self.lines):
            return self.lines[lineno - 1].rstrip("\n")
        return None

    def segment(self, node: ast.AST) -> str:
        """The source text of an expression, as written."""
        return ast.get_source_segment(self.source, node) or ast.unparse(node)

    def error(self, node: ast.AST, message: str, suggestion: str | None = None) -> UnsupportedSyntaxError:
        """An `UnsupportedSyntaxError` located at `node`, in function `self.name`."""
        lineno = self.lineno(node)
        col = getattr(node, "col_offset", 0) + self.col_offset
        return UnsupportedSyntaxError(
            f"in batched function '{self.name}': {message}",
            filename=self.filename,
            lineno=lineno,
            col_offset=col,
            source_line=self.source_line(lineno),
            suggestion=suggestion,
        )

    def enclosing_names(self) -> dict[str, Any]:
        """Names visible from the function body besides its locals: closure cells over globals
        over builtins. Read at compile time, so cells filled after decoration are seen."""
        names: dict[str, Any] = dict(vars(builtins))
        names.update(self.function.__globals__)
        for name, cell in zip(self.function.__code__.co_freevars, self.function.__closure__ or (), strict=True):
            try:
                names[name] = cell.cell_contents
            except ValueError:  # an empty cell: the name is not bound (yet)
                names.pop(name, None)
        return names


def _indent_of(text: str) -> int:
    first = text.splitlines()[0] if text else ""
    return len(first) - len(first.lstrip())


def _not_a_function_error(obj: Any, filename: str | None = None) -> UnsupportedSyntaxError:
    code = getattr(obj, "__code__", None)
    if isinstance(obj, types.FunctionType) and obj.__name__ == "<lambda>":
        return UnsupportedSyntaxError(
            "a lambda cannot be a batched function",
            filename=code.co_filename if code is not None else filename,
            lineno=code.co_firstlineno if code is not None else None,
            suggestion="write a named `def` function and decorate it",
        )
    return UnsupportedSyntaxError(
        f"only Python functions can be batched, got {type(obj).__name__} {obj!r}",
        filename=filename,
        suggestion="decorate a `def` function with `@ctx.batch()`",
    )
