"""The exceptions abir raises to users. Each message says what went wrong and what to do."""

from __future__ import annotations


class AbirError(Exception):
    """Base class of abir's own errors."""


class UnsupportedSyntaxError(SyntaxError, AbirError):
    """Python outside abir's subset, reported with file, line, column, source line and a fix."""

    def __init__(
        self,
        message: str,
        *,
        filename: str | None = None,
        lineno: int | None = None,
        col_offset: int | None = None,
        source_line: str | None = None,
        suggestion: str | None = None,
    ):
        self.suggestion = suggestion
        full = message if suggestion is None else f"{message}. Instead: {suggestion}"
        super().__init__(full, (filename, lineno, None if col_offset is None else col_offset + 1, source_line))

    def __str__(self) -> str:
        where = f"{self.filename}:{self.lineno}" if self.filename else "<unknown>"
        if self.filename and self.offset is not None:
            where += f":{self.offset}"
        text = f"{where}: {self.msg}"
        if self.text:
            text += f"\n    {self.text.strip()}"
        return text


class LocatedSyntaxError(UnsupportedSyntaxError):
    """An `UnsupportedSyntaxError` the frontend could only decide once types were known: its
    text (recorded in the IR) already names the file, line and construct."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text_with_location = text

    def __str__(self) -> str:
        return self.text_with_location


class TypeInferenceError(TypeError, AbirError):
    """Types that cannot be determined, or that disagree with a user's `type_inference`."""


class TruthValueError(ValueError, AbirError):
    """A per-member array whose members have other than one element used as a truth value (an
    `if` or `while` condition, `and`, `or`, `not`, a conditional expression, `bool()`), where
    each member's plain Python run raises NumPy's ValueError; the message names the file, line,
    construct and a fix."""


class ScalarConversionError(TypeError, AbirError):
    """`float()` or `int()` of a per-member array (one or more axes), which each member's plain
    Python run refuses with NumPy's TypeError; the message names the file, line, construct and a
    fix."""


class InternalError(AbirError):
    """An exception from inside abir, xDSL or a backend that reached a batched call: a bug in
    abir. The message names the batched function; the original exception is the `__cause__`."""


class MemberRunError(RuntimeError, AbirError):
    """A run in which some members failed. `members` lists them by their index in the batch of
    the call; under `jax.vmap`, whose mapped calls run as one batch, `vmap_indices` gives each
    one's indices along the mapped axes (outermost first: member `members[i]` of the call at
    `vmap_indices[i]`, element `[*vmap_indices[i], members[i]]` of the results); outside vmap
    each is `()`."""

    def __init__(
        self, message: str, *, members: list[int] | None = None, vmap_indices: list[tuple[int, ...]] | None = None
    ):
        super().__init__(message)
        self.members = members if members is not None else []
        self.vmap_indices = vmap_indices if vmap_indices is not None else [() for _ in self.members]


class StackOverflowError(MemberRunError):
    """Members' recursion went deeper than `max_stack_depth` (`members`: which)."""


class StackUnderflowError(MemberRunError):
    """A member popped a value that was never pushed (a compiler bug, reported clearly)."""


class StepLimitError(MemberRunError):
    """Members still running after `max_steps` blocks. `members` lists them (batch indices;
    `vmap_indices` under `jax.vmap`), `blocks` the vm block where each stopped and `locations`
    its Python `file:line` (None where the program does not record one)."""

    def __init__(
        self,
        message: str,
        *,
        members: list[int],
        blocks: list[int],
        locations: list[str | None] | None = None,
        vmap_indices: list[tuple[int, ...]] | None = None,
    ):
        super().__init__(message, members=members, vmap_indices=vmap_indices)
        self.blocks = blocks
        self.locations = locations if locations is not None else [None] * len(members)


class HelperError(TypeError, AbirError):
    """An undecorated helper (a primitive: called once on whole-batch arrays) failed; the message
    names the helper, where it is called, and the two ways to fix it."""
