"""Building a functional-dialect module from decorated functions.

A function is lowered once per structure of its arguments (a *specialization*); calls discover
new specializations, which are lowered depth-first so that a callee's result structure is known
at its call sites. Inside a recursive cycle the result structure of a function still being
lowered is unknown: the calling path (the rest of a statement sequence, or one operand of a
conditional expression, `and` or `or`, whose other operand then joins alone) is abandoned for
this round, the base cases give the structure, and the whole program is lowered again until no
call site is left unknown.

A Context's functions are the decorated ones and its *helpers*: undecorated functions of the
user's that a batched function calls (`abir.opaque.is_user_function`), registered by
`UserFunctions.helper_name` on their first call and then compiled per member exactly like
decorated functions (specializations, recursion, structures). Functions declared with
`Context.primitive` are not helpers: their calls stay opaque prims on whole batches.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import optree
from xdsl.dialects.builtin import ModuleOp

from abir.dialects.functional import OpaqueOp
from abir.errors import UnsupportedSyntaxError
from abir.frontend.lowering import FunctionLowering, LoweredFunction
from abir.frontend.source import FunctionSource
from abir.frontend.syntax import check_supported_syntax
from abir.frontend.values import LEAF
from abir.opaque import fresh_opaque_name, register_opaque

SpecKey = tuple[str, tuple[optree.PyTreeSpec, ...]]


@dataclass(frozen=True)
class FrontendProgram:
    """The frontend's result for one entry function and argument structure."""

    module: ModuleOp
    """Functional dialect, verified; only the functions reachable from the entry."""
    entry: str
    """Symbol of the entry function's specialization."""
    output_treedef: optree.PyTreeSpec
    """Rebuilds the entry's flat results into the Python structure it returns."""


@dataclass(frozen=True)
class FunctionEntry:
    """What a program needs to know about one decorated function or helper."""

    name: str
    source: FunctionSource
    batched: Any
    """The object users call: the `BatchedFunction` (calls to it are batched calls), or a
    helper's own Python function."""

    @property
    def n_params(self) -> int:
        args = self.source.tree.args
        return len(args.posonlyargs) + len(args.args)


class UserFunctions:
    """A Context's undecorated functions compiled per member (helpers) and its declared primitives.

    Helpers are keyed by the function object (the same function reached through any name is one
    helper) and named after it; a name a decorated function or another helper has gets a suffix
    (`step_2`). Each registered function and primitive is kept alive, so its id stays its own."""

    def __init__(self) -> None:
        self.entries: dict[str, FunctionEntry] = {}
        self._names: dict[int, str] = {}
        self._primitives: dict[int, Any] = {}

    def helper_name(self, function: Any, taken: Callable[[str], bool]) -> str:
        """The helper name of `function`, registering it on first use (`taken`: whether a
        decorated function has a name). Raises `UnsupportedSyntaxError` when its source cannot
        be read or holds syntax outside abir's subset."""
        name = self._names.get(id(function))
        if name is not None:
            return name
        source = FunctionSource.of(function)
        check_supported_syntax(source)
        name = source.name
        suffix = 1
        while taken(name) or name in self.entries:
            suffix += 1
            name = f"{source.name}_{suffix}"
        self.entries[name] = FunctionEntry(name, source, function)
        self._names[id(function)] = name
        return name

    def source(self, name: str) -> FunctionSource | None:
        """The source of helper `name`; None when `name` is not a helper (a decorated function)."""
        entry = self.entries.get(name)
        return entry.source if entry is not None else None

    def declare_primitive(self, function: Any) -> None:
        """Make `function` a whole-batch primitive (no longer a helper, if it was one)."""
        parts = _identity(function)
        self._primitives[tuple(id(part) for part in parts)] = parts
        self.forget(function)

    def is_primitive(self, function: Any) -> bool:
        """Whether `function` was declared, or is a method bound from a declared function."""
        method = getattr(function, "__func__", None)
        return self._declared(_identity(function)) or method is not None and self._declared((method,))

    def _declared(self, parts: tuple[Any, ...]) -> bool:
        declared = self._primitives.get(tuple(id(part) for part in parts))
        return declared is not None and all(a is b for a, b in zip(declared, parts, strict=True))

    def forget(self, function: Any) -> None:
        """Drop `function`'s helper registration (it became a primitive or was decorated)."""
        name = self._names.pop(id(function), None)
        if name is not None:
            del self.entries[name]

    def forget_name(self, name: str) -> None:
        """Drop the helper named `name`, if any (a decorated function now has that name)."""
        entry = self.entries.get(name)
        if entry is not None:
            self.forget(entry.source.function)


class SpecializationNames:
    """Stable symbols for specializations: `f` for all-leaves arguments, `f.s1`, `f.s2`, ... else."""

    def __init__(self) -> None:
        self.symbols: dict[SpecKey, str] = {}
        self._counts: dict[str, int] = {}

    def symbol(self, key: SpecKey) -> str:
        if key not in self.symbols:
            name, treedefs = key
            if all(t == LEAF for t in treedefs):
                self.symbols[key] = name
            else:
                self._counts[name] = self._counts.get(name, 0) + 1
                self.symbols[key] = f"{name}.s{self._counts[name]}"
        return self.symbols[key]


class OpaqueNames:
    """Opaque callables registered once per call site and compile-time arguments."""

    def __init__(self) -> None:
        self.by_key: dict[Any, tuple[str, Any]] = {}

    def name(self, key: Any, hint: str, fn: Callable[..., Any]) -> str:
        if key not in self.by_key:
            name = register_opaque(fresh_opaque_name(hint), fn)
            self.by_key[key] = (name, fn)
        return self.by_key[key][0]


MAX_ROUNDS = 16


class ProgramBuilder:
    """Lowers the specializations reachable from some entry points into one module."""

    def __init__(
        self,
        functions: dict[str, FunctionEntry],
        names: SpecializationNames,
        opaques: OpaqueNames,
        user_functions: UserFunctions | None = None,
    ):
        self.functions = functions
        """The decorated functions."""
        self.user_functions = user_functions if user_functions is not None else UserFunctions()
        self.names = names
        self.opaque_names = opaques
        self.outputs: dict[SpecKey, optree.PyTreeSpec] = {}
        self._batched = {id(entry.batched): name for name, entry in functions.items()}
        self._batched.update({id(entry.source.function): name for name, entry in functions.items()})

    def build(self, entries: Sequence[SpecKey]) -> tuple[ModuleOp, dict[SpecKey, optree.PyTreeSpec]]:
        """The module of everything reachable from `entries`, and every specialization's output."""
        for _ in range(MAX_ROUNDS):
            known = dict(self.outputs)
            lowered = self._round(entries)
            unknown = [result.unknown for result in lowered.values() if result.unknown is not None]
            if not unknown:
                return self._module(lowered), dict(self.outputs)
            if known == self.outputs:
                raise self._unresolved_error(unknown[0])
        raise self._unresolved_error(unknown[0])

    def _round(self, entries: Sequence[SpecKey]) -> dict[SpecKey, LoweredFunction]:
        self._lowered: dict[SpecKey, LoweredFunction | None] = {}
        self._opaques: dict[str, str] = {}
        for key in entries:
            self._ensure_lowered(key)
        return {key: result for key, result in self._lowered.items() if result is not None}

    def _ensure_lowered(self, key: SpecKey) -> None:
        if key in self._lowered:
            return
        self._lowered[key] = None  # in progress
        name, treedefs = key
        entry = self._entry(name)
        result = FunctionLowering(entry.source, self, self.names.symbol(key), treedefs).lower()
        if result.output is not None:
            self.outputs[key] = result.output
        self._lowered[key] = result

    def _module(self, lowered: dict[SpecKey, LoweredFunction]) -> ModuleOp:
        declarations = [OpaqueOp(name, source) for name, source in self._opaques.items()]
        module = ModuleOp([*declarations, *(result.func for result in lowered.values())])
        module.verify()
        return module

    def _entry(self, name: str) -> FunctionEntry:
        """The decorated function or helper `name`."""
        return self.functions.get(name) or self.user_functions.entries[name]

    def _caller(self, node: ast.AST) -> FunctionEntry:
        """The decorated function or helper whose body holds `node`."""
        entries = [*self.functions.values(), *self.user_functions.entries.values()]
        return next(e for e in entries if _contains(e.source.tree, node))

    def _unresolved_error(self, unknown: Any) -> UnsupportedSyntaxError:
        entry = self._entry(unknown.callee)
        caller = self._caller(unknown.node)
        return caller.source.error(
            unknown.node,
            f"cannot tell what '{unknown.callee}' returns: every path through it that returns calls "
            "itself (directly or through other functions) first",
            f"give '{entry.name}' a base case that returns without recursing",
        )

    # -- services for FunctionLowering ----------------------------------------------------------

    def batched_callee(self, obj: Any) -> str | None:
        return self._batched.get(id(obj))

    def call_target(
        self, name: str, arg_treedefs: tuple[optree.PyTreeSpec, ...], node: ast.AST
    ) -> tuple[str, optree.PyTreeSpec | None]:
        entry = self._entry(name)
        if len(arg_treedefs) != entry.n_params:
            caller = self._caller(node)
            raise caller.source.error(
                node,
                f"batched function '{name}' takes {entry.n_params} argument(s) but {len(arg_treedefs)} were given",
            )
        key = (name, arg_treedefs)
        self._ensure_lowered(key)
        return self.names.symbol(key), self.outputs.get(key)

    def helper_callee(self, fn: Any) -> str:
        return self.user_functions.helper_name(fn, lambda name: name in self.functions)

    def helper_source(self, name: str) -> FunctionSource | None:
        return self.user_functions.source(name)

    def is_primitive(self, fn: Any) -> bool:
        return self.user_functions.is_primitive(fn)

    def opaque(self, key: Any, hint: str, source: str, fn: Any) -> str:
        name = self.opaque_names.name(key, hint, fn)
        self._opaques[name] = source
        return name


def _identity(function: Any) -> tuple[Any, ...]:
    """The objects that identify a callable: itself, or for a bound method (made anew by every
    attribute read, `obj.method`) its object and its function."""
    receiver, method = getattr(function, "__self__", None), getattr(function, "__func__", None)
    if receiver is not None and method is not None:
        return (receiver, method)
    return (function,)


def _contains(tree: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(tree))
