"""`abir-run`: run a functional or vm module from text on a batch, as `mlir-runner` does.

    abir-run fib.mlir --entry fib --arg '[3, 7, 10]'
    abir-run prog.mlir --backend jax --args inputs.npz --max-stack-depth 30
    abir-opt prog.mlir -p abir-lower{entry=f} | abir-run - --arg 'int32:[1, 2]'

Each `--arg` is one argument, a JSON batch (its first axis the members), optionally prefixed
with a dtype (`float32:[[1.5, 2.0]]`); `--args FILE.npz` appends the arrays of an `.npz` file in
order (`arr_0`, `arr_1`, ... as `np.savez` names them, else as stored). Results are printed one
per line: `result 0: int64 [2, 13, 55]`. Opaque prims need `--opaque NAME=module:function`;
errors are printed as diagnostics (exit status 1), never as tracebacks.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.utils.exceptions import DiagnosticException

from abir.dialects import verify_error_text
from abir.errors import AbirError
from abir.running import ModuleRunError, parse_module, run_module

BACKENDS = ("numpy", "jax", "tf")


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
    if not callable(value):
        raise ModuleRunError(f"--opaque {spec!r}: {target} is a {type(value).__name__}, not a callable")
    return name, value


def format_result(index: int, value: Any) -> str:
    array = np.asarray(value)
    return f"result {index}: {array.dtype} {json.dumps(array.tolist())}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="abir-run", description=__doc__.splitlines()[0])
    parser.add_argument("file", help="the module's text file (- for standard input)")
    parser.add_argument("--entry", help="the function to run (default: the module's only or uncalled one)")
    parser.add_argument("--backend", choices=BACKENDS, default="numpy")
    parser.add_argument("--arg", action="append", default=[], metavar="JSON", help="one argument batch, e.g. '[3, 7]'")
    parser.add_argument("--args", metavar="FILE.npz", help="arguments from an .npz file (after any --arg)")
    parser.add_argument("--max-stack-depth", type=int, default=15)
    parser.add_argument("--max-steps", type=int, default=None, help="at most this many blocks per member")
    parser.add_argument("--opaque", action="append", default=[], metavar="NAME=module:function",
                        help="the callable of an opaque prim")  # fmt: skip
    return parser


def run(options: argparse.Namespace) -> list[str]:
    """The printed result lines of one run."""
    name = "<stdin>" if options.file == "-" else options.file
    try:
        text = sys.stdin.read() if options.file == "-" else open(options.file, encoding="utf-8").read()  # noqa: SIM115
    except (OSError, UnicodeDecodeError) as e:
        raise ModuleRunError(f"cannot read {name}: {e}") from None
    module = parse_module(text, name)
    args = [parse_arg(a) for a in options.arg] + (load_npz(options.args) if options.args else [])
    opaque = dict(load_callable(spec) for spec in options.opaque)
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
