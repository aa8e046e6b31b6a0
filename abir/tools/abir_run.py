"""`abir-run`: run a functional or vm module from text on a batch, as `mlir-runner` does.

    abir-run fib.mlir --entry fib --arg '[3, 7, 10]'
    abir-run prog.mlir --backend jax --args inputs.npz --max-stack-depth 30
    abir-opt prog.mlir -p abir-lower{entry=f} | abir-run - --arg 'int32:[1, 2]'

Each `--arg` is one argument, a JSON batch (its first axis the members), optionally prefixed
with a dtype (`float32:[[1.5, 2.0]]`); `--args FILE.npz` appends the arrays of an `.npz` file in
order (`arr_0`, `arr_1`, ... as `np.savez` names them, else as stored). Results are printed one
per line: `result 0: int64 [2, 13, 55]`. Errors are printed as diagnostics (exit status 1),
never as tracebacks.

Opaque prims need `--opaque NAME=module:function`, only those the entry reaches. The callable is
called as the module's text of the prim records the call (`functional.opaque @uniform_1
"abir.random.uniform(key, n, shape=(3,))"`): its literal arguments (numbers, strings, tuples
and lists of them, read by `ast.literal_eval`, which runs no code) as written, positional or by
keyword, and each other argument one operand of the prim, in the order the frontend passes them
(positional arguments, then keyword arguments by name). A text that is not such a call passes
the operands positionally; one whose keyword arguments cannot be placed so is an error.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import itertools
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException

from abir.backend_registry import backend_names
from abir.dialects import functional, verify_error_text, vm
from abir.errors import AbirError
from abir.passes.analysis import call_graph, functions_of, reachable
from abir.running import ModuleRunError, callee_of, choose_entry, parse_module, run_module


def parse_arg(text: str) -> np.ndarray:
    """One `--arg`: `[3, 7, 10]` or `dtype:[...]`, read as JSON (never evaluated)."""
    dtype = None
    head, sep, rest = text.partition(":")
    if sep and head.strip().isidentifier():
        dtype, text = head.strip(), rest
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise ModuleRunError(f"--arg {text[:60]!r} is not JSON (write a list such as [3, 7, 10])") from None
    try:
        return np.asarray(value, dtype=np.dtype(dtype) if dtype else None)
    except (TypeError, ValueError) as e:
        raise ModuleRunError(f"--arg {text[:60]!r}: {e}") from None


def load_npz(path: str) -> list[np.ndarray]:
    """The arrays of an `.npz` file in positional order (no pickles)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            names = list(data.files)
            positional = sorted((n for n in names if n.startswith("arr_") and n[4:].isdigit()), key=lambda n: int(n[4:]))
            order = positional if len(positional) == len(names) else names
            return [data[n] for n in order]
    except (OSError, ValueError) as e:
        raise ModuleRunError(f"--args {path}: {e}") from None


def load_callable(spec: str) -> tuple[str, Callable[..., Any]]:
    """`NAME=module:function` (a dotted attribute path after the colon)."""
    name, sep, target = spec.partition("=")
    module_name, colon, attribute = target.partition(":")
    if not sep or not colon or not name or not module_name or not attribute:
        raise ModuleRunError(f"--opaque {spec!r}: write NAME=module:function, e.g. --opaque helper_0=mypkg.ops:helper")
    try:
        value: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as e:
        raise ModuleRunError(f"--opaque {spec!r}: {e}") from None
    except Exception as e:  # the module itself fails to import (a syntax error, an error it raises)
        raise ModuleRunError(f"--opaque {spec!r}: importing {module_name} raised {type(e).__name__}: {e}") from None
    if not callable(value):
        raise ModuleRunError(f"--opaque {spec!r}: {target} is a {type(value).__name__}, not a callable")
    return name, value


def prune_to_entry(module: ModuleOp, entry: str | None) -> None:
    """Erase what a run from `entry` never reaches, so that only the opaque prims it calls need
    callables: in a functional module the functions the entry does not call (directly or not),
    then the opaque declarations no remaining op calls. A functional module whose entry is not
    one of its functions is left whole (`run_module` says so)."""
    functions = functions_of(module)
    if functions and not any(isinstance(op, vm.ProgramOp) for op in module.ops):
        name = entry or choose_entry(module)
        if name not in functions:
            return
        kept = reachable(call_graph(module), name)
        for function_name, function in functions.items():
            if function_name not in kept:
                function.detach()
                function.erase()
    called = {callee_of(op) for op in module.walk()}
    for op in list(module.ops):
        if isinstance(op, functional.OpaqueOp) and op.sym_name.data not in called:
            op.detach()
            op.erase()


@dataclass(frozen=True)
class Operand:
    """The place of the prim's operand `index` in a recorded call."""

    index: int


@dataclass(frozen=True)
class RecordedCall:
    """The call an opaque prim's text records: its arguments with literals read and `Operand`
    placeholders for the rest."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    operand_count: int

    def __call__(self, fn: Callable[..., Any], operands: Sequence[Any]) -> Any:
        return fn(*fill(self.args, operands), **fill(self.kwargs, operands))


def recorded_call(text: str) -> RecordedCall | None:
    """The call `text` writes (`f(x, 2, shape=(3,))`), operands numbered as the frontend passes
    them: positional arguments in order, then keyword arguments by name. None when `text` is not
    a call or passes `*args` or `**kwargs`."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(node, ast.Call) or any(isinstance(arg, ast.Starred) for arg in node.args):
        return None
    if any(keyword.arg is None for keyword in node.keywords):
        return None
    numbers = itertools.count()
    args = tuple(placeholders(arg, numbers) for arg in node.args)
    keywords = sorted(node.keywords, key=lambda keyword: str(keyword.arg))
    kwargs = {str(keyword.arg): placeholders(keyword.value, numbers) for keyword in keywords}
    return RecordedCall(args, kwargs, next(numbers))


def placeholders(node: ast.expr, numbers: Iterator[int]) -> Any:
    """A literal argument's value (`ast.literal_eval`, which runs no code), a tuple or list of
    such values and placeholders, or the next `Operand`."""
    if isinstance(node, ast.Tuple | ast.List):
        items = [placeholders(item, numbers) for item in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return Operand(next(numbers))


def fill(value: Any, operands: Sequence[Any]) -> Any:
    """`value` with each `Operand` replaced by its operand."""
    if isinstance(value, Operand):
        return operands[value.index]
    if isinstance(value, tuple | list):
        return type(value)(fill(item, operands) for item in value)
    if isinstance(value, dict):
        return {key: fill(item, operands) for key, item in value.items()}
    return value


def operand_counts(module: ModuleOp, name: str) -> set[int]:
    """How many operands the prims calling the opaque prim `name` pass."""
    return {len(op.operands) for op in module.walk() if callee_of(op) == name}


def as_recorded(module: ModuleOp, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` called as the text of the opaque prim `name` records the call (see the module's
    docstring); `fn` itself when the module does not declare `name` or its text is no call."""
    declaration = next((op for op in module.ops if isinstance(op, functional.OpaqueOp) and op.sym_name.data == name), None)
    call = recorded_call(declaration.source.data) if declaration is not None else None
    if call is None:
        return fn
    counts = operand_counts(module, name)
    if counts == {call.operand_count}:
        return lambda *operands: call(fn, operands)
    if not call.kwargs:
        return fn
    passed = " or ".join(map(str, sorted(counts)))
    raise ModuleRunError(
        f"--opaque {name}: the text of @{name}, {declaration.source.data!r} (the call abir-run makes), has "
        f"{call.operand_count} argument(s) that are not literals, but the prim passes {passed} operand(s): abir-run "
        "cannot place the keyword arguments. Edit the text so that each compile-time argument is a literal "
        "(shape=(3,), not shape=(n,)) and each other argument one operand, in the prim's order (positional "
        "arguments, then keyword arguments by name)"
    )


def format_result(index: int, value: Any) -> str:
    array = np.asarray(value)
    return f"result {index}: {array.dtype} {json.dumps(array.tolist())}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="abir-run", description=__doc__.splitlines()[0])
    parser.add_argument("file", help="the module's text file (- for standard input)")
    parser.add_argument("--entry", help="the function to run (default: the module's only or uncalled one)")
    parser.add_argument("--backend", choices=backend_names(), default="numpy")
    parser.add_argument("--arg", action="append", default=[], metavar="JSON", help="one argument batch, e.g. '[3, 7]'")
    parser.add_argument("--args", metavar="FILE.npz", help="arguments from an .npz file (after any --arg)")
    parser.add_argument("--max-stack-depth", type=int, default=15)
    parser.add_argument("--max-steps", type=int, default=None, help="at most this many blocks per member")
    parser.add_argument("--opaque", action="append", default=[], metavar="NAME=module:function",
                        help="the callable of an opaque prim the entry reaches, called as the prim's text "
                             "records the call (its literal arguments kept)")  # fmt: skip
    return parser


def run(options: argparse.Namespace) -> list[str]:
    """The printed result lines of one run."""
    name = "<stdin>" if options.file == "-" else options.file
    try:
        text = sys.stdin.read() if options.file == "-" else open(options.file, encoding="utf-8").read()  # noqa: SIM115
    except (OSError, UnicodeDecodeError) as e:
        raise ModuleRunError(f"cannot read {name}: {e}") from None
    module = parse_module(text, name)
    prune_to_entry(module, options.entry)
    args = [parse_arg(a) for a in options.arg] + (load_npz(options.args) if options.args else [])
    callables = dict(load_callable(spec) for spec in options.opaque)
    opaque = {prim: as_recorded(module, prim, fn) for prim, fn in callables.items()}
    results = run_module(
        module, *args, backend=options.backend, entry=options.entry,
        max_stack_depth=options.max_stack_depth, max_steps=options.max_steps, opaque=opaque,
    )  # fmt: skip
    values = results if isinstance(results, tuple) else (results,)
    return [format_result(i, v) for i, v in enumerate(values)]


def main(argv: Sequence[str] | None = None) -> int:
    options = build_parser().parse_args(argv)
    try:
        lines = run(options)
    except (AbirError, TypeError, ValueError, KeyError) as e:
        print(f"abir-run: error: {e}", file=sys.stderr)
        return 1
    except DiagnosticException as e:  # a pass of the lowering fails
        print(f"abir-run: error: {verify_error_text(e)}", file=sys.stderr)
        return 1
    except RecursionError:
        print("abir-run: error: the module nests too deeply to compile", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
