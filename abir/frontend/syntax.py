"""Decoration-time check that a function stays inside abir's Python subset.

Purely syntactic: it rejects what no lowering could accept (a signature with `*args`, defaults
or keyword-only parameters; generators and coroutines; `with`, `try`, `global`, `del`, nested
`def`, ...) with the line and a suggestion, before the function is ever compiled.
"""

from __future__ import annotations

import ast

from abir.frontend.lowering import UNSUPPORTED_STATEMENTS
from abir.frontend.source import FunctionSource

UNSUPPORTED_EXPRESSIONS: dict[str, tuple[str, str]] = {
    "Yield": ("batched functions cannot be generators (`yield`)", "return the values instead"),
    "YieldFrom": ("batched functions cannot be generators (`yield from`)", "return the values instead"),
    "Await": ("batched functions cannot be coroutines (`await`)", "write a plain synchronous function"),
}


def check_supported_syntax(source: FunctionSource) -> None:
    """Raise `UnsupportedSyntaxError` for the first construct outside the subset."""
    _check_signature(source)
    for statement in source.tree.body:
        for node in ast.walk(statement):
            kind = type(node).__name__
            table = UNSUPPORTED_STATEMENTS if isinstance(node, ast.stmt) else UNSUPPORTED_EXPRESSIONS
            if kind in table:
                message, suggestion = table[kind]
                raise source.error(node, message, suggestion)


def _check_signature(source: FunctionSource) -> None:
    args = source.tree.args
    if args.vararg is not None:
        raise source.error(args.vararg, f"`*{args.vararg.arg}` parameters are not supported",
                           "list the parameters one by one, or pass a tuple")
    if args.kwarg is not None:
        raise source.error(args.kwarg, f"`**{args.kwarg.arg}` parameters are not supported",
                           "list the parameters one by one")
    if args.kwonlyargs:
        raise source.error(args.kwonlyargs[0], "keyword-only parameters are not supported",
                           "make every parameter positional")
    if args.defaults:
        raise source.error(args.defaults[0], "parameter default values are not supported",
                           "pass every argument at each call")
