"""The registry of opaque primitives: Python callables referenced from the IR by symbol.

`functional.prim @name(...)` names a callable registered here; `functional.opaque @name "src"`
records its source text in the module. Programs built by a `Context` register their callables
automatically; a program read from text can run only after `register_opaque` supplies them.

A call from a batched function to a whole-batch primitive registers a `Helper`: a function the
user declared with `Context.primitive`, or a library callable abir runs on whole batches (NumPy
functions it has no prim for, `abir.random`). An undecorated function of the user's is not one:
the frontend compiles it per member, as if it were decorated (`is_user_function`), or refuses it
(`UncompilableHelperError`). The `Helper` remembers where it is called, so that a failure (at
type inference on dummies, or at run time on any backend) becomes a `HelperError` naming the
helper, its line and the ways out, and it learns the structure the helper returns (tuples, lists,
namedtuples) so that the frontend can keep that structure. Array operations are not opaque: they
are builtin array prims (`abir.array_prims`) whose parameters are in the IR.
"""

from __future__ import annotations

import itertools
import re
import sys
import sysconfig
import types
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import optree

from abir.errors import AbirError, HelperError, UnsupportedSyntaxError

_REGISTRY: dict[str, Callable[..., Any]] = {}
_COUNTER = itertools.count()
_FAILED_HELPER = "__abir_failed_helper__"
_failures: list[tuple[Helper, list[tuple[int, ...] | None], BaseException]] = []
"""Every helper failure, newest last (kept to the last one): a backend running a helper inside
its own machinery (TF's `numpy_function`) reports a new error of its own instead."""
_failure_count = 0


def register_opaque(name: str, fn: Callable[..., Any]) -> str:
    """Register `fn` under symbol `name` (replacing any earlier one) and return the name."""
    if not callable(fn):
        raise TypeError(f"opaque primitive @{name} must be callable, got {type(fn).__name__}")
    _REGISTRY[name] = fn
    return name


def fresh_opaque_name(hint: str) -> str:
    """A symbol name not used by any registered callable, readable and derived from `hint`."""
    base = re.sub(r"[^A-Za-z0-9_]+", "_", hint).strip("_") or "opaque"
    while True:
        name = f"{base}_{next(_COUNTER)}"
        if name not in _REGISTRY:
            return name


def lookup_opaque(name: str) -> Callable[..., Any]:
    """The callable registered under `name`, or a clear error saying how to supply it."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"opaque primitive @{name} is not registered; call abir.opaque.register_opaque({name!r}, fn) "
            "before running a program read from text"
        ) from None


# ---------------------------------------------------------------------------------------------
# Where opaque prims come from
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CallSite:
    """The place in a batched function's source an opaque prim was lowered from."""

    function: str
    """The batched function's name."""
    filename: str
    lineno: int
    source_line: str | None = None

    @staticmethod
    def of(source: Any, node: Any) -> CallSite:
        """The site of AST `node` in `source` (an `abir.frontend.source.FunctionSource`)."""
        lineno = source.lineno(node)
        return CallSite(source.name, source.filename, lineno, source.source_line(lineno))

    def describe(self) -> str:
        """`file:line: in batched function 'f'` followed by the source line, for messages."""
        text = f"{self.filename}:{self.lineno}: in batched function '{self.function}'"
        return text if self.source_line is None else f"{text}\n    {self.source_line.strip()}\n"


def site_of(name: str) -> CallSite | None:
    """Where the opaque prim `name` comes from, if a Context lowered it (an undecorated helper)."""
    fn = _REGISTRY.get(name)
    return fn.site if isinstance(fn, Helper) else None


# ---------------------------------------------------------------------------------------------
# The batch the user passed, for messages
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CallBatch:
    """The batch of the call being compiled or run: `size` members as the user passed them, run
    on `rows` rows (more with `pad_batch=True`). Messages name it; nothing computes with it."""

    size: int
    rows: int

    def explain_rows(self, received: set[int]) -> str:
        """How the leading dimensions `received` by a helper relate to this batch ("" when
        they are the user's batch size)."""
        if not received or received == {self.size}:
            return ""
        if received == {self.rows} and self.rows > self.size:
            return f"; pad_batch=True runs your batch of {self.size} as {self.rows} rows, a power of two"
        members = "member" if self.size == 1 else "members"
        return f"; your call's batch has {self.size} {members}"


_CALL_BATCH: ContextVar[CallBatch | None] = ContextVar("abir_call_batch", default=None)


class calling_with_batch:  # noqa: N801 (used as a function: `with calling_with_batch(size):`)
    """Within: errors about helpers name `size`, the batch size the user's call passed (run on
    `rows` rows, default `size`), where the arrays a helper got have another leading dimension.
    (A class, not a generator: entered on every call, it costs a fraction of one.)"""

    __slots__ = ("batch", "token")

    def __init__(self, size: int | CallBatch, rows: int | None = None):
        if isinstance(size, CallBatch):  # made once by a caller entering it on every call
            self.batch = size
        else:
            self.batch = CallBatch(size, size if rows is None else rows)

    def __enter__(self) -> None:
        self.token = _CALL_BATCH.set(self.batch)

    def __exit__(self, *exception: Any) -> None:
        _CALL_BATCH.reset(self.token)


def call_batch() -> CallBatch | None:
    """The batch of the call being compiled or run (`calling_with_batch`), if any."""
    return _CALL_BATCH.get()


# ---------------------------------------------------------------------------------------------
# Undecorated helpers
# ---------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Helper:
    """An undecorated function called from a batched function, as an opaque prim.

    Called with the batched operands of one call site, it runs `run` (which puts them back among
    the call's compile-time arguments and calls `helper`). Once `result_structure` is known its
    result leaves come back flat (one array, or a tuple of them), as the machine expects. A
    failure is re-raised unchanged (backends may recover from some) and marked with this helper,
    so that `helper_error` can explain it where the error reaches the user."""

    run: Callable[..., Any]
    helper: Any
    """The user's callable."""
    site: CallSite
    result_structure: optree.PyTreeSpec | None = field(default=None)
    """What the helper returns (learned at type inference); None until known."""
    stood_in: bool = field(default=False)
    """Whether the frontend lowered the helper's result as a placeholder while its structure was
    unknown (`stand_in`): the program must be lowered again once the structure is known."""
    declared: bool = field(default=True)
    """Whether the user declared the callable a primitive (`Context.primitive`); False for a
    library callable abir itself runs on whole batches."""

    def __call__(self, *arrays: Any) -> Any:
        out = self.call_structured(*arrays)
        if self.result_structure is None:
            return out
        leaves = optree.tree_leaves(out)
        return leaves[0] if len(leaves) == 1 else tuple(leaves)

    def call_structured(self, *arrays: Any) -> Any:
        """The helper's result as it returns it (structure included); a result leaf whose leading
        dimension is not its arguments' (`check_result_rows`) fails as the helper's error."""
        try:
            out = self.run(*arrays)
            check_result_rows(out, arrays)
            return out
        except AbirError:
            raise
        except Exception as err:
            shapes = [_shape_of(a) for a in arrays]
            setattr(err, _FAILED_HELPER, (self, shapes))
            _record_failure(self, shapes, err)
            raise

    @property
    def name(self) -> str:
        return getattr(self.helper, "__qualname__", None) or getattr(self.helper, "__name__", None) or repr(self.helper)

    def definition(self) -> str:
        """Where the helper is defined (`file:line`), when Python knows."""
        code = getattr(self.helper, "__code__", None)
        if code is None:
            return ""
        return f" (defined at {code.co_filename}:{code.co_firstlineno})"

    def error(self, err: BaseException, shapes: Sequence[tuple[int, ...] | None], when: str = "") -> HelperError:
        """The user-facing error for `err`, raised by this helper on arrays of `shapes` (`when`:
        the phase, e.g. type inference on dummy arrays, said after the shapes)."""
        received = ", ".join(f"[{', '.join(map(str, s))}]" for s in shapes if s is not None) or "none"
        received += f", {when}" if when else ""
        if (batch := call_batch()) is not None:
            received += batch.explain_rows({s[0] for s in shapes if s})
        jax_hint = (
            " Under JAX its arguments are traced arrays: use jax.numpy functions, not NumPy's"
            if type(err).__name__ == "TracerArrayConversionError" else ""
        )  # fmt: skip
        return HelperError(
            f"{self.site.describe()}the helper '{self.name}'{self.definition()} failed: "
            f"{type(err).__name__}: {_first_line(err)}\n{self._contract()} (here {received}), not once "
            f"per example. {self._ways_out()}.{jax_hint}"
        )

    def _contract(self) -> str:
        """Why the helper got whole batches."""
        if self.declared:
            return (f"'{self.name}' is declared a primitive (`ctx.primitive`), so it is called once with "
                    "whole-batch arrays of shape [B, ...]")
        return f"'{self.name}' is a library function abir calls once with whole-batch arrays of shape [B, ...]"

    def _ways_out(self) -> str:
        """How to make the call work, in the user's terms."""
        batch_aware = ("whole-array operations along the leading batch axis (`axis=-1` for the member's last "
                       "axis), no Python `if`/`while` on its arguments")
        if self.declared:
            return (f"Either make '{self.name}' batch-aware: {batch_aware}; or drop its `ctx.primitive` "
                    f"declaration, so that abir compiles it per example (as `@ctx.batch()` does)")
        return (f"Either call it from a function of yours declared `@ctx.primitive` and make that batch-aware: "
                f"{batch_aware}; or compute the value with operations abir compiles per example")



def check_result_rows(out: Any, arrays: Sequence[Any]) -> None:
    """A helper's result leaves keep the leading (batch) dimension of the arrays it got: a
    `ValueError` saying which result does not. Unknown dimensions (symbolic ones in a TF graph),
    arguments of different leading dimensions and leaves without a shape are not checked here."""
    rows = {shape[0] for shape in map(_shape_of, arrays) if shape}
    if len(rows) != 1 or -1 in rows:
        return
    (want,) = rows
    leaves = optree.tree_leaves(out)
    for index, leaf in enumerate(leaves):
        shape = _shape_of(leaf)
        if shape is None or (shape and shape[0] in (want, -1)):
            continue
        which = "its result" if len(leaves) == 1 else f"its result #{index}"
        raise ValueError(
            f"{which} has shape [{', '.join(map(str, shape))}] for arguments with {want} rows; a helper returns "
            f"arrays with the leading (batch) dimension of its arguments: [{want}, ...] here"
        )


def helper_result_structure(name: str) -> optree.PyTreeSpec | None:
    """The structure the helper registered as `name` returns, once type inference learned it."""
    fn = _REGISTRY.get(name)
    return fn.result_structure if isinstance(fn, Helper) else None


def pending_helper(name: str) -> Helper | None:
    """The helper registered as `name` while the structure it returns is not known yet (the
    frontend lowers its results as stand-ins: `abir.frontend.values.stand_in`)."""
    fn = _REGISTRY.get(name)
    return fn if isinstance(fn, Helper) and fn.result_structure is None else None


class HelperStructureLearned(AbirError):
    """Type inference found that a helper returns a structure its call was not lowered for; the
    helper now knows it, and lowering the program again keeps the structure (a `Context` does)."""

    def __init__(self, helper: Helper):
        super().__init__(
            f"{helper.site.describe()}the helper '{helper.name}' returns {helper.result_structure}; "
            "lower the program again so that its call keeps that structure"
        )
        self.helper = helper


def failure_mark() -> int:
    """A mark to pass to `helper_error(..., since=mark)`: helper failures after it count."""
    return _failure_count


def _record_failure(helper: Helper, shapes: list[tuple[int, ...] | None], err: BaseException) -> None:
    global _failure_count
    _failure_count += 1
    _failures[:] = [(helper, shapes, err)]


def helper_error(err: BaseException, since: int | None = None, when: str = "") -> HelperError | None:
    """The `HelperError` explaining `err` when an undecorated helper raised it (or an exception
    `err` was raised from). With `since` (a `failure_mark()`), also when a backend reported a
    helper's failure as an error of its own: TF runs NumPy helpers in a `numpy_function`, whose
    errors name the helper's exception, and which XLA cannot compile (a `PyFunc` op; a retrace
    reuses it without calling the helper again, so that failure may precede the mark). None when
    no helper is involved or `err` is abir's own error."""
    if isinstance(err, AbirError):
        return None
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        marked = getattr(current, _FAILED_HELPER, None)
        if marked is not None:
            helper, shapes = marked
            return helper.error(current, shapes, when)
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    if since is None or not _failures:
        return None
    helper, shapes, failure = _failures[-1]
    text = str(err)
    reported = _failure_count > since and f"{type(failure).__name__}: {_first_line(failure)}" in text
    return helper.error(failure, shapes, when) if reported or "PyFunc" in text else None


def _shape_of(value: Any) -> tuple[int, ...] | None:
    shape = getattr(value, "shape", None)
    if shape is None:
        return None
    return tuple(-1 if d is None else int(d) for d in shape)


def _first_line(err: BaseException) -> str:
    """The first line of an error's message (the whole error stays chained as the cause)."""
    lines = str(err).strip().splitlines()
    return lines[0] if lines else ""


# ---------------------------------------------------------------------------------------------
# Which callables are the user's own functions
# ---------------------------------------------------------------------------------------------

LIBRARY_PACKAGES = frozenset({
    "abir", "numpy", "scipy", "jax", "jaxlib", "tensorflow", "keras", "optree", "xdsl", "torch", "pandas",
    "sklearn", "numba", "blackjax", "tensorflow_probability",
})  # fmt: skip
"""Top-level packages whose functions are never compiled per member, wherever they are installed."""

_LIBRARY_DIRECTORIES = tuple(
    {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
)


def library_package(fn: object) -> str | None:
    """The library `fn` belongs to: abir, NumPy, JAX, TensorFlow, SciPy (`LIBRARY_PACKAGES`),
    Python's standard library (builtins included), or any package installed where Python keeps
    its libraries (site-packages); None for a callable of the user's own code."""
    module = getattr(fn, "__module__", None) or getattr(type(fn), "__module__", None) or ""
    top = module.partition(".")[0]
    if top in LIBRARY_PACKAGES or top == "builtins":
        return top
    code = getattr(fn, "__code__", None)
    if code is not None:  # a Python function: where its file is (a user's package may share a stdlib name)
        filename = code.co_filename
        return (top or filename) if filename.startswith(_LIBRARY_DIRECTORIES) or "site-packages" in filename else None
    if top in sys.stdlib_module_names or isinstance(fn, types.BuiltinFunctionType | types.BuiltinMethodType):
        return top or "builtins"
    return None


def is_user_function(fn: object) -> bool:
    """Whether `fn` is a plain Python function of the user's (a `def` or a lambda, not a builtin,
    a class, a method, a C function, nor a function of a library): the frontend compiles a call
    to one per member, as if it were decorated in the Context."""
    return isinstance(fn, types.FunctionType) and library_package(fn) is None


def qualified_name(fn: object) -> str:
    """How a fix names a callable: `scipy.special.logsumexp`, `math.lgamma`, `my_helper`."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    if "<" in name:  # `test.<locals>.f`: a function defined inside another goes by its own name
        name = getattr(fn, "__name__", None) or name
    module = getattr(fn, "__module__", None)
    if not module or module in ("builtins", "__main__") or library_package(fn) is None:
        return str(name)
    public = module.split(".")
    while len(public) > 1 and public[-1].startswith("_"):  # `scipy.special._logsumexp` -> `scipy.special`
        public.pop()
    return f"{'.'.join(public)}.{name}"


class UncompilableHelperError(UnsupportedSyntaxError):
    """A call from a batched function to a callable abir can neither compile per member nor
    treat as a primitive (an undecorated function whose source it cannot read or lower, a
    library callable not declared `ctx.primitive`): refused at compile time with the reason and
    the fixes, never run on the whole batch silently."""
