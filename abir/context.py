"""The user-facing `Context`: decorate per-example Python functions and get batched programs.

    ctx = abir.Context()

    @ctx.batch(type_inference=lambda arg_types: arg_types[0])
    def fib(n):
        if n > 2:
            return fib(n - 1) + fib(n - 2)
        return 1

    ctx.module()          # functional-dialect IR of every decorated function
    ctx.program("fib")    # only what `fib` reaches

Functions decorated in one `Context` may call each other by name in any order (forward
references, recursion, mutual recursion). A function of the user's that is not decorated is
compiled per member all the same when a batched function calls it (a *helper*, registered in the
context on its first call); a function declared with `ctx.primitive` is instead called once on
whole-batch arrays. `build_program` is what the rest of the pipeline uses:
the module for an entry function specialized to the structure of its arguments. The context owns
an `abir.calling.Compiler`, which compiles and runs its calls and reads the context only through
`abir.calling.ProgramSource` (`build_program`, `type_inference_callables`, `forget_programs`,
`generation`).

`f(..., dry_run=True)` is the reference a batched run is compared against: the plain Python
function run member by member on each member's own values, results stacked.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from typing import Any

import numpy as np
import optree
from xdsl.dialects.builtin import ModuleOp

from abir.backends.base import Backend
from abir.boundary import batched_call_boundary
from abir.calling import (
    CompiledProgram,
    Compiler,
    TypeInference,
    flatten_arguments,
    leaf_batch_size,
    parse_call_options,
)
from abir.dry_run import dry_running, in_dry_run, truthy
from abir.errors import UnsupportedSyntaxError
from abir.frontend.lowering import called_names
from abir.frontend.program import (
    FrontendProgram,
    FunctionEntry,
    OpaqueNames,
    ProgramBuilder,
    SpecializationNames,
    SpecKey,
    UserFunctions,
)
from abir.frontend.source import FunctionSource
from abir.frontend.syntax import check_supported_syntax
from abir.frontend.values import LEAF
from abir.lru import LRUCache

__all__ = ["BatchedFunction", "Context", "FrontendProgram", "TypeInference", "truthy"]
# `truthy` and `FrontendProgram` live in lower layers; importing them from here keeps working.

PROGRAM_CACHE_SIZE = 32
"""Compiled programs a `Context` keeps by default (`Context(cache_size=...)`)."""


class BatchedFunction:
    """A decorated function: call it on a batch (with `dry_run=True`: plain Python per member)."""

    autograph_info__: dict[str, Any] = {}  # noqa: RUF012
    # The mark `tf.autograph.experimental.do_not_convert` gives a function: AutoGraph (on by
    # default in a `tf.function`) then calls a batched function as it is, instead of rewriting
    # abir's own Python (which it cannot) while tracing the user's function.

    def __init__(self, context: Context, name: str, function: Callable[..., Any], type_inference: TypeInference | None):
        functools.update_wrapper(self, function)
        self._context = context
        self.name = name
        self.python_function = function
        self.type_inference = type_inference

    def __call__(self, *args: Any, dry_run: bool = False, **kwargs: Any) -> Any:
        if in_dry_run():
            return self.python_function(*args, **kwargs)
        if dry_run:
            return self._dry_run(args, kwargs)
        with batched_call_boundary(self.name):
            return self._context._compiler.call(self.name, args, kwargs)

    def imap(
        self, members: Iterable[Sequence[Any]], *, lanes: int, chunk_size: int | None = None, **kwargs: Any
    ) -> Iterator[tuple[int, Any]]:
        """`(index, result)` of every member of `members` (each the tuple of one member's
        arguments), in the order they finish, run through `lanes` lanes and read `chunk_size`
        members at a time (`abir.calling.Compiler.imap`); `kwargs` are call options."""
        with batched_call_boundary(self.name):
            yield from self._context._compiler.imap(self.name, members, lanes, chunk_size, kwargs)

    def _dry_run(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The plain Python function run once per member on that member's values (NumPy scalars
        and arrays without the batch dimension; Python numbers and size-1 batches are shared by
        every member, as in a batched call), calls to batched functions going to their plain
        functions; the members' results stacked along a new leading batch dimension."""
        parse_call_options(self.name, kwargs)  # checked as for a batched call; plain Python ignores them
        leaves, treedefs = flatten_arguments(self.name, args)
        batch_size = leaf_batch_size(self.name, leaves, treedefs)
        host = [_on_host(leaf) for leaf in leaves]
        results = []
        with dry_running():
            for index in range(batch_size):
                member = iter(_member(leaf, index) for leaf in host)
                member_args = [optree.tree_unflatten(t, [next(member) for _ in range(t.num_leaves)]) for t in treedefs]
                results.append(self.python_function(*member_args))
        if not results:  # no member to run: the types a batched call infers, batch size 0
            return self._context._compiler.empty_results(self.name, args)
        return _stack_members(self.name, results)

    def __repr__(self) -> str:
        return f"<abir batched function {self.name}>"


def _on_host(leaf: Any) -> Any:
    """A JAX or TF argument leaf as a NumPy array; NumPy values and Python numbers unchanged."""
    if isinstance(leaf, bool | int | float | np.ndarray | np.generic):
        return leaf
    return np.asarray(leaf)


def _member(leaf: Any, index: int) -> Any:
    """Member `index`'s value of an argument leaf: its row of a batch, the only row of a size-1
    batch, or the leaf itself for a Python number or a 0-d array (shared by every member)."""
    if np.ndim(leaf) == 0:
        return leaf
    return leaf[0] if np.shape(leaf)[0] == 1 else leaf[index]


def _stack_members(name: str, results: list[Any]) -> Any:
    """The members' results stacked leaf by leaf (one structure for all members)."""
    flat = [optree.tree_flatten(result) for result in results]
    structure = flat[0][1]
    for index, (_, other) in enumerate(flat):
        if other != structure:
            raise ValueError(
                f"in a dry run of '{name}', member 0 returned {structure} but member {index} returned {other}; "
                "a batched function returns one structure for every member"
            )
    stacked = [np.stack([np.asarray(leaves[i]) for leaves, _ in flat]) for i in range(structure.num_leaves)]
    return optree.tree_unflatten(structure, stacked)


class Context:
    """A set of batched functions that may call each other by name."""

    def __init__(self, cache_size: int = PROGRAM_CACHE_SIZE) -> None:
        """`cache_size`: how many compiled programs (one per function, argument types and
        backend configuration called) the context keeps, the least recently used dropped
        beyond it; each keeps its compiled runs (`abir.backends.base.RUN_CACHE_SIZE`)."""
        self._functions: dict[str, FunctionEntry] = {}
        self._type_inference: dict[str, TypeInference] = {}
        self._names = SpecializationNames()
        self._opaques = OpaqueNames()
        self._user_functions = UserFunctions()
        self._programs: dict[tuple[str, tuple[optree.PyTreeSpec, ...]], FrontendProgram] = {}
        self._module: ModuleOp | None = None
        self.generation = 0
        """Incremented whenever a function is decorated (keys caches of compiled programs)."""
        self.compile_cache: MutableMapping[Any, Any] = LRUCache(cache_size)
        """Compiled programs of this context, for calls that pass no `block_code_cache`; freed
        with the context."""
        self._compiler = Compiler(self, self.compile_cache)

    # -- decoration -------------------------------------------------------------------------

    def batch(self, type_inference: TypeInference | None = None) -> Callable[[Callable[..., Any]], BatchedFunction]:
        """Decorator: `@ctx.batch()` or `@ctx.batch(type_inference=...)`."""
        if isinstance(type_inference, BatchedFunction) or (
            callable(type_inference) and getattr(type_inference, "__code__", None) is not None
            and _looks_like_decorated_def(type_inference)
        ):
            raise UnsupportedSyntaxError(
                "`ctx.batch` needs parentheses when used as a decorator",
                filename=type_inference.__code__.co_filename,
                lineno=type_inference.__code__.co_firstlineno,
                suggestion="write `@ctx.batch()` (or `@ctx.batch(type_inference=...)`)",
            )

        def decorate(function: Callable[..., Any]) -> BatchedFunction:
            return self.batch_uncurried(function, type_inference)

        return decorate

    def batch_uncurried(self, function: Callable[..., Any], type_inference: TypeInference | None = None) -> BatchedFunction:
        """Register `function` as a batched function of this context."""
        source = FunctionSource.of(function)
        check_supported_syntax(source)
        name = source.name
        if name in self._functions:
            raise UnsupportedSyntaxError(
                f"this Context already has a batched function named '{name}'",
                filename=source.filename,
                lineno=source.lineno(source.tree),
                source_line=source.source_line(source.lineno(source.tree)),
                suggestion="give each batched function of a Context its own name",
            )
        if self._user_functions.is_primitive(function):
            raise UnsupportedSyntaxError(
                f"'{name}' is declared a primitive of this Context (`ctx.primitive`), so it cannot be batched too",
                filename=source.filename,
                lineno=source.lineno(source.tree),
                source_line=source.source_line(source.lineno(source.tree)),
                suggestion="keep one: `@ctx.batch()` runs it per example, `@ctx.primitive` once on whole batches",
            )
        batched = BatchedFunction(self, name, function, type_inference)
        self._functions[name] = FunctionEntry(name, source, batched)
        self._user_functions.forget(function)
        self._user_functions.forget_name(name)
        if type_inference is not None:
            self._type_inference[name] = type_inference
        self._programs.clear()
        self._module = None
        self.generation += 1
        return batched

    def primitive(self, function: Callable[..., Any] | None = None) -> Any:
        """Declare `function` a primitive: a call from a batched function runs it once per block
        run on whole-batch arrays `[B, ...]` (it must work on each member's row along the leading
        axis, on the backend's arrays) instead of compiling it per member. Usable as
        `@ctx.primitive`, `@ctx.primitive()` and `ctx.primitive(fn)` (for a library function, e.g.
        `ctx.primitive(scipy.special.logsumexp)`); returns `function` unchanged, so that plain
        Python (and `dry_run=True`) calls it as it is."""
        if function is None:
            return self.primitive
        if isinstance(function, BatchedFunction):
            raise TypeError(
                f"'{function.name}' is a batched function of a Context, so it cannot be a primitive too; "
                "keep one: `@ctx.batch()` runs it per example, `@ctx.primitive` once on whole batches"
            )
        if not callable(function):
            raise TypeError(f"ctx.primitive takes a callable, got {type(function).__name__} {function!r}")
        self._user_functions.declare_primitive(function)
        self._programs.clear()
        self._module = None
        self.generation += 1
        return function

    # -- inspection -------------------------------------------------------------------------

    def function_names(self) -> list[str]:
        """Names of the decorated functions, in decoration order."""
        return list(self._functions)

    def python_function(self, name: str) -> Callable[..., Any]:
        """The original Python function of batched function `name` (for dry runs)."""
        return self._entry(name).source.function

    def module(self) -> ModuleOp:
        """The functional-dialect module of every decorated function.

        Functions no other function calls are lowered for all-array arguments; the others as
        their callers call them (so a function taking a namedtuple state gets that structure)."""
        if self._module is None:
            entries = [(name, (LEAF,) * self._functions[name].n_params) for name in self._module_roots()]
            self._module, _ = self._builder().build(entries)
        return self._module

    def _module_roots(self) -> list[str]:
        calls = {name: called_names(entry.source.tree) & set(self._functions) for name, entry in self._functions.items()}
        roots = [name for name in self._functions if not any(name in calls[c] for c in calls if c != name)]
        reached = set(roots)
        work = list(roots)
        while work:
            for callee in calls[work.pop()] - reached:
                reached.add(callee)
                work.append(callee)
        return roots + [name for name in self._functions if name not in reached]

    def program(self, main: str) -> ModuleOp:
        """The functional-dialect module of `main` and everything it calls."""
        return self.build_program(main).module

    def build_program(self, main: str, arg_treedefs: Sequence[optree.PyTreeSpec] | None = None) -> FrontendProgram:
        """`main` specialized to its arguments' structures (None: every argument is one array)."""
        entry = self._entry(main)
        treedefs = tuple(arg_treedefs) if arg_treedefs is not None else (LEAF,) * entry.n_params
        if len(treedefs) != entry.n_params:
            raise TypeError(f"'{main}' takes {entry.n_params} argument(s), got {len(treedefs)} structure(s)")
        key: SpecKey = (main, treedefs)
        if key not in self._programs:
            module, outputs = self._builder().build([key])
            self._programs[key] = FrontendProgram(module, self._names.symbol(key), outputs[key])
        return self._programs[key]

    def type_inference_callables(self) -> dict[str, TypeInference]:
        """Function symbol (every specialization made so far) -> the user's `type_inference`,
        called with one type per argument in that argument's structure (a tuple argument's type
        is a tuple of `TensorType`s), as the reference does."""
        result = dict(self._type_inference)
        for (name, treedefs), symbol in self._names.symbols.items():
            if name in self._type_inference:
                result[symbol] = _with_argument_structures(self._type_inference[name], treedefs)
        return result

    # -- execution --------------------------------------------------------------------------

    def program_compiled(self, main: str, sig: Sequence[Any] | None = None, backend: Backend | None = None) -> ModuleOp:
        """`main` typed for signature `sig` (one `TensorType` pattern per argument) and cleaned up:
        the functional IR the stackless executor runs. Without `sig`, the untyped `program(main)`."""
        if sig is None:
            return self.program(main)
        return self._compiled_for_signature(main, sig, backend).verified_typed

    def program_lowered(self, main: str, sig: Sequence[Any] | None = None, backend: Backend | None = None) -> ModuleOp:
        """`main` lowered to the vm dialect for signature `sig`: the IR the machine runs."""
        if sig is None:
            raise ValueError(
                f"program_lowered('{main}') needs a signature: one abir.TensorType pattern per argument, "
                "e.g. [abir.TensorType(np.int64, ())]"
            )
        return self._compiled_for_signature(main, sig, backend).lowered

    def lowered_for_args(self, name: str, args: Sequence[Any], backend: Backend | None = None) -> ModuleOp:
        """The vm program a call `name(*args)` would run."""
        return self._compiler.for_call(name, args, backend).lowered

    def _compiled_for_signature(self, main: str, sig: Sequence[Any], backend: Backend | None) -> CompiledProgram:
        return self._compiler.for_signature(main, sig, backend)

    def _entry(self, name: str) -> FunctionEntry:
        try:
            return self._functions[name]
        except KeyError:
            known = ", ".join(self._functions) or "none"
            raise KeyError(f"no batched function named '{name}' in this Context (known: {known})") from None

    def _builder(self) -> ProgramBuilder:
        return ProgramBuilder(self._functions, self._names, self._opaques, self._user_functions)

    def forget_programs(self) -> None:
        """Drop the lowered modules (an undecorated helper's result structure became known, so
        its calls lower differently); compiled programs were never made from them."""
        self._programs.clear()
        self._module = None


def _with_argument_structures(user: TypeInference, treedefs: Sequence[optree.PyTreeSpec]) -> TypeInference:
    """`user` called with the flat per-leaf types regrouped into the arguments' structures."""

    def structured(leaf_types: list[Any]) -> Any:
        types = iter(leaf_types)
        return user([optree.tree_unflatten(t, [next(types) for _ in range(t.num_leaves)]) for t in treedefs])

    return structured


def _looks_like_decorated_def(fn: Any) -> bool:
    """`@ctx.batch` without parentheses passes the decorated function itself."""
    try:
        first = inspect.getsourcelines(fn)[0][0].strip()
    except (OSError, TypeError):
        return False
    return first.startswith("@") and ".batch" in first and "(" not in first
