"""Differential check of one generated program: batched on abir's backends against plain Python.

The program's source is written to a real file (abir reads functions' source with `inspect`) and
executed as a module. The reference calls the undecorated entry once per member with that
member's arguments as Python scalars and NumPy arrays. It runs an instrumented copy of the module
in which every typed expression `e` reads `_fz_value(e)`, which rejects values no longer
comparable with int64/float64 arithmetic (ints past 2**62, infinities, NaNs, subnormals, which
TensorFlow flushes to zero), under a tracer that bounds the traced lines and the call depth:
such a program is invalid (`InvalidProgram`), not a failure.
The batched run decorates every batched function in one `abir.Context` and calls the entry on
the whole batch; any exception, or a member whose result differs (ints exactly, floats within
`RTOL`/`ATOL`), is a `Failure`. One kind of failure may be tolerated: a refusal (`REFUSED`), abir
declining with its own error (`abir.errors.AbirError`, not a member's run-time error) to compile
a program that makes library calls (`LIBRARY_CALLS`), as it does for calls it does not support;
`counts_as_failure` says which failures count under a strict or a tolerant policy.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dataclasses
import hashlib
import os
import re
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

import abir
from abir.backend_registry import backend_specs, spec_named
from abir.errors import AbirError, MemberRunError
from abir.testing.generate import LIBRARY_CALLS, PAIR, FuzzProgram, ValueType, tensor_types, type_of


@dataclass(frozen=True)
class Variant:
    """How one backend name runs a batched call: the registered backend, its options, call options."""

    backend: str
    options: tuple[tuple[str, Any], ...] = ()
    call_options: tuple[tuple[str, Any], ...] = ()

    def backend_class(self) -> type:
        spec = spec_named(self.backend)
        if spec is None:
            raise ValueError(f"variant backend {self.backend!r} is not registered; register it with abir.backend_registry.register_backend")
        return spec.backend_class()

    def make_backend(self) -> Any:
        return self.backend_class()(**dict(self.options))

    def backend_source(self) -> str:
        """The backend as Python source, e.g. `abir.JaxBackend(execution='switch')`."""
        cls = self.backend_class()
        name = f"abir.{cls.__name__}" if getattr(abir, cls.__name__, None) is cls else f"__import__({cls.__module__!r}, fromlist=['_']).{cls.__qualname__}"
        return f"{name}({', '.join(f'{k}={v!r}' for k, v in self.options)})"


_OTHER_EXECUTIONS = {
    "numpy-sweep": Variant("numpy", (("execution", "sweep"),)),
    "jax-switch": Variant("jax", (("execution", "switch"),)),
    "tf-xla": Variant("tensorflow", (("jit_compile", True),)),
    "stackless": Variant("numpy", (), (("stackless", True),)),
}


def default_backends() -> tuple[str, ...]:
    """The backends a campaign checks by default: every registered one, by its shortest name."""
    return tuple(min(spec.names, key=len) for spec in backend_specs())


def variants() -> dict[str, Variant]:
    """Every backend name a campaign accepts: each registered backend's names and aliases, and
    the other executions of the builtin ones."""
    return {name: Variant(spec.name) for spec in backend_specs() for name in spec.names} | _OTHER_EXECUTIONS


MAX_STACK_DEPTH = 15
MAX_REFERENCE_DEPTH = 12
"""Deepest plain-Python call chain a valid program may reach (below `MAX_STACK_DEPTH`)."""
MAX_REFERENCE_STEPS = 20_000
"""Traced lines per member a valid program may run."""
RTOL = 1e-9
ATOL = 1e-9
BATCHED_TIME_LIMIT = 120.0
"""Seconds of the process's CPU time a batched run may use before it counts as hanging
(interrupts Python-level loops, as the NumPy backend's; a compiled JAX or TF loop is not
interrupted). CPU time, not wall-clock time: on a core shared with other jobs a run gets a
fraction of each second, and a wall-clock limit reported a slow program as a hang
(docs/reliability.md)."""


class InvalidProgram(Exception):
    """The plain Python run failed or left the bounds: the program tests nothing."""


@dataclass
class Failure:
    """How a batched run disagreed with plain Python on one backend."""

    backend: str
    kind: str
    """"mismatch" (a member's result differs), "error" (the batched call raised) or `REFUSED`."""
    message: str
    error_type: str | None = None
    member: int | None = None
    expected: Any = None
    got: Any = None

    def signature(self) -> tuple[str, str | None, str]:
        """What a smaller program must reproduce to be the same bug (an error's message up to
        names and numbers)."""
        return (self.kind, self.error_type, message_shape(self.message) if self.kind != "mismatch" else "")


REFUSED = "refused"
"""The kind of failure of a program with library calls that abir declined to compile."""


def counts_as_failure(failure: Failure, tolerate_refusals: bool = True) -> bool:
    """Whether `failure` is one under the refusal policy: refusals are tolerated (counted apart
    by the campaign) unless `tolerate_refusals` is False."""
    return failure.kind != REFUSED or not tolerate_refusals


def is_refusal(program: FuzzProgram, error: BaseException) -> bool:
    """Whether `error`, raised by a batched call of `program`, is abir declining to compile it:
    an `AbirError` other than a member's run-time error, in a program making library calls."""
    return isinstance(error, AbirError) and not isinstance(error, MemberRunError) and bool(program.library_calls())


def refused_calls(program: FuzzProgram, message: str) -> list[str]:
    """The library calls of `program` a refusal's message names: by their source text (abir
    quotes the expression it refuses), else by their function's name (`np.trace`, or a helper's
    quoted name, `'trace'`); all of the program's calls when it names none."""
    tagged = [node for node in ast.walk(program.module) if hasattr(node, "fz_call")]
    quoted = sorted({node.fz_call for node in tagged if ast.unparse(node) in message})  # type: ignore[attr-defined]
    if quoted:
        return quoted
    made = program.library_calls()
    named = [c.name for c in LIBRARY_CALLS if c.name in made and _function_mentioned(c.template, message)]
    return named or made


def _function_mentioned(template: str, message: str) -> bool:
    head = template.split("(")[0]
    if not head.startswith("np."):
        return False
    return head in message or f"'{head.rsplit('.', 1)[-1]}'" in message


def message_shape(message: str) -> str:
    """`message` with numbers, quoted names, symbols and file positions (`path.py:line` and
    `path.py:line:column`: each candidate program is a file of its own) blanked out."""
    return re.sub(r"\S+\.py(?::\d+)*|\d+|'[^']*'|@\S+", "#", message)[:160]


LANES_SUFFIX = ":lanes="
"""`jax:lanes=2` is backend `jax` called with `lanes=2` (`with_lanes`)."""


def with_lanes(name: str, lanes: int) -> str:
    """The backend name whose calls run their members through `lanes` lanes."""
    return f"{name}{LANES_SUFFIX}{lanes}"


def variant_named(name: str) -> Variant:
    base, _, lanes = name.partition(LANES_SUFFIX)
    known = variants()
    if base not in known or (lanes and not lanes.isdigit()):
        raise ValueError(f"unknown backend '{name}'; choose from {', '.join(known)} (each may end in {LANES_SUFFIX}N)")
    variant = known[base]
    if lanes:
        variant = dataclasses.replace(variant, call_options=(*variant.call_options, ("lanes", int(lanes))))
    return variant


def make_backend(name: str) -> Any:
    return variant_named(name).make_backend()


def load(program: FuzzProgram, directory: str) -> dict[str, Any]:
    """Write the program to a file named by its content and run it as a module."""
    return _load_source(program.source(), directory, "abir_fuzz")


def _load_source(source: str, directory: str, prefix: str, names: dict[str, Any] | None = None) -> dict[str, Any]:
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    path = os.path.join(directory, f"{prefix}_{digest}.py")
    if not os.path.exists(path):
        with open(path, "w") as file:
            file.write(source)
    namespace: dict[str, Any] = {"__name__": f"{prefix}_{digest}", "__file__": path, **(names or {})}
    exec(compile(source, path, "exec"), namespace)
    return namespace


class _CheckValues(ast.NodeTransformer):
    """Wraps every typed compound expression `e` in `_fz_value(e)`."""

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        if isinstance(node, ast.expr) and type_of(node) is not None and not isinstance(node, ast.Name | ast.Constant):
            return ast.Call(ast.Name("_fz_value", ast.Load()), [node], [])
        return node


def reference_module(program: FuzzProgram, directory: str) -> dict[str, Any]:
    """The program instrumented to check every value it computes (`_fz_value`)."""
    module = _CheckValues().visit(copy.deepcopy(program.module))
    return _load_source(ast.unparse(module) + "\n", directory, "abir_fuzz_reference", {"_fz_value": _fz_value})


def _fz_value(value: Any) -> Any:
    check_value(value)
    return value


# ----- plain Python ---------------------------------------------------------------------------


def member_value(value: Any, t: ValueType, i: int, namespace: dict[str, Any]) -> Any:
    """Member `i` of a batched input as plain Python: scalars, NumPy arrays, tuples, `P`."""
    if isinstance(t, tuple):
        return tuple(member_value(v, part, i, namespace) for v, part in zip(value, t, strict=True))
    if t == PAIR:
        a, b = value
        return namespace["P"](int(_row(a, i)), float(_row(b, i)))
    row = _row(value, i)
    return row.copy() if row.ndim else row.item()


def _row(array: np.ndarray, i: int) -> np.ndarray:
    return array[0] if array.shape[0] == 1 else array[i]


def run_reference(program: FuzzProgram, directory: str) -> list[Any]:
    """The entry's plain Python result for every member."""
    namespace = reference_module(program, directory)
    function = namespace[program.entry]
    results = []
    for i in range(program.batch_size()):
        args = [member_value(v, t, i, namespace) for v, t in zip(program.inputs, program.input_types, strict=True)]
        with Tracer(namespace["__file__"]).active():
            try:
                result = function(*args)
            except InvalidProgram:
                raise
            except Exception as e:
                raise InvalidProgram(f"member {i}: plain Python raised {type(e).__name__}: {e}") from e
        check_value(result)
        results.append(result)
    return results


class Tracer:
    """A `sys.settrace` hook over one file: counts lines and call depth."""

    def __init__(self, filename: str):
        self.filename = filename
        self.steps = 0
        self.depth = 0

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        previous = sys.gettrace()
        sys.settrace(self.call)
        try:
            with np.errstate(all="raise"), warnings.catch_warnings():
                warnings.simplefilter("error")
                yield
        finally:
            sys.settrace(previous)

    def call(self, frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != self.filename:
            return None
        self.depth += 1
        if self.depth > MAX_REFERENCE_DEPTH:
            raise InvalidProgram(f"plain Python recursed deeper than {MAX_REFERENCE_DEPTH} calls")
        return self.local

    def local(self, frame: Any, event: str, arg: Any) -> Any:
        self.steps += 1
        if self.steps > MAX_REFERENCE_STEPS:
            raise InvalidProgram(f"plain Python ran more than {MAX_REFERENCE_STEPS} lines")
        if event == "return":
            self.depth -= 1
        return self.local


def check_value(value: Any) -> None:
    """Raise `InvalidProgram` for a value int64/float64 arithmetic would not reproduce."""
    if isinstance(value, tuple):
        for part in value:
            check_value(part)
    elif isinstance(value, bool | np.bool_):
        return
    elif isinstance(value, int | np.integer):
        if abs(int(value)) > 2**62:
            raise InvalidProgram(f"an integer left the int64 range: {value}")
    elif isinstance(value, float | np.floating | np.ndarray):
        array = np.asarray(value, dtype=float)
        tiny = (array != 0) & (np.abs(array) < 1e-290)
        if not np.all(np.isfinite(array)) or np.any(tiny):
            raise InvalidProgram(f"a float value is infinite, nan or subnormal: {value}")


# ----- batched --------------------------------------------------------------------------------


def batched_inputs(program: FuzzProgram, namespace: dict[str, Any]) -> list[Any]:
    def build(value: Any, t: ValueType) -> Any:
        if isinstance(t, tuple):
            return tuple(build(v, part) for v, part in zip(value, t, strict=True))
        if t == PAIR:
            return namespace["P"](*(v.copy() for v in value))
        return value.copy()

    return [build(v, t) for v, t in zip(program.inputs, program.input_types, strict=True)]


def batched_entry(program: FuzzProgram, namespace: dict[str, Any]) -> Any:
    """Every batched function decorated in one Context (some with a `type_inference`); the entry."""
    ctx = abir.Context()
    decorated = {}
    for name in program.batched:
        inference = None
        if name in program.declared_results:
            leaves = tensor_types(program.declared_results[name], program.vector_size)
            inference = _declared(leaves)
        decorated[name] = ctx.batch(type_inference=inference)(namespace[name])
    return decorated[program.entry]


def _declared(leaves: list[Any]) -> Any:
    return lambda arg_types: leaves[0] if len(leaves) == 1 else list(leaves)


def run_batched(program: FuzzProgram, namespace: dict[str, Any], backend: str, entry: Any = None,
                seconds: float = BATCHED_TIME_LIMIT) -> Any:  # fmt: skip
    entry = entry if entry is not None else batched_entry(program, namespace)
    with time_limit(seconds):
        options = dict(variant_named(backend).call_options)
        return entry(*batched_inputs(program, namespace), backend=make_backend(backend), max_stack_depth=MAX_STACK_DEPTH,
                     **options)  # fmt: skip


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise `TimeoutError` in the main thread once the process has used `seconds` of CPU time
    (all its threads: XLA compiles in its own) from here (elsewhere: no limit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"the batched run used more than {seconds:g} s of CPU time")

    previous = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def check(
    program: FuzzProgram,
    backends: tuple[str, ...],
    namespace: dict[str, Any],
    reference: list[Any] | None = None,
    seconds: float = BATCHED_TIME_LIMIT,
) -> list[Failure]:
    """The failures of the batched runs on `backends` (an empty list when all agree), each run
    limited to `seconds`."""
    expected = reference if reference is not None else run_reference(program, os.path.dirname(namespace["__file__"]))
    failures = []
    try:
        entry = batched_entry(program, namespace)
    except Exception as e:
        return [_error_failure(program, backend, e) for backend in backends]
    for backend in backends:
        try:
            result = run_batched(program, namespace, backend, entry, seconds)
        except Exception as e:
            failures.append(_error_failure(program, backend, e))
            continue
        mismatch = compare_members(expected, result)
        if mismatch is not None:
            member, got = mismatch
            failures.append(Failure(backend, "mismatch", f"member {member} differs", None, member, expected[member], got))
    return failures


def _error_failure(program: FuzzProgram, backend: str, error: Exception) -> Failure:
    """The failure of a batched call that raised `error`: a refusal, or an error (its message's
    first line; a refusal keeps its whole message, which may name the call further down)."""
    text = str(error).strip()
    if is_refusal(program, error):
        return Failure(backend, REFUSED, f"{type(error).__name__}: {text}", type(error).__name__)
    message = text.splitlines()[0] if text else ""
    return Failure(backend, "error", f"{type(error).__name__}: {message}", type(error).__name__)


def compare_members(expected: list[Any], result: Any) -> tuple[int, Any] | None:
    """The first member whose batched result differs from plain Python, with that result."""
    for i, want in enumerate(expected):
        got = batch_member(result, i)
        if not same_value(want, got):
            return i, got
    return None


def batch_member(value: Any, i: int) -> Any:
    """Member `i` of a batched result (tuples and namedtuples rebuilt), as NumPy values."""
    if isinstance(value, tuple):
        parts = [batch_member(v, i) for v in value]
        return type(value)(*parts) if hasattr(value, "_fields") else tuple(parts)
    array = np.asarray(value)
    row = array[0] if array.ndim and array.shape[0] == 1 else array[i] if array.ndim else array
    return row.item() if np.ndim(row) == 0 else row


def same_value(expected: Any, got: Any) -> bool:
    if isinstance(expected, tuple):
        if not isinstance(got, tuple) or len(got) != len(expected):
            return False
        if getattr(type(expected), "_fields", None) != getattr(type(got), "_fields", None):
            return False
        return all(same_value(e, g) for e, g in zip(expected, got, strict=True))
    if isinstance(got, tuple):
        return False
    want, have = np.asarray(expected, dtype=float), np.asarray(got, dtype=float)
    return want.shape == have.shape and bool(np.allclose(have, want, rtol=RTOL, atol=ATOL, equal_nan=True))


def describe_value(value: Any) -> str:
    """A value as Python source (arrays as `np.array([...])`)."""
    if isinstance(value, tuple):
        parts = ", ".join(describe_value(v) for v in value)
        if hasattr(value, "_fields"):
            return f"{type(value).__name__}({parts})"
        return f"({parts}{',' if len(value) == 1 else ''})"
    if isinstance(value, np.ndarray):
        return f"np.array({value.tolist()!r})"
    if isinstance(value, np.generic):
        return repr(value.item())
    return repr(value)
