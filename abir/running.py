"""Run a module read from text: `abir.run_module`, the core of the `abir-run` tool.

    results = abir.run_module(text, np.array([3, 7, 10]), backend="jax", entry="fib")

The module is either functional IR (what `Context.module()` prints, typed or not), lowered on
the fly for the arguments' types (each argument is a batch: its first axis is the batch axis),
or a vm module (what `abir-lower` prints), run as it is. Reading and running never executes
code named or written in the text: an opaque prim (`functional.opaque @name "source"`) runs only
if the caller supplies its callable (`opaque={"name": fn}`), its source text is never evaluated,
and a module that declares one the caller did not supply is an error. Malformed input (a parse
error, an unknown op, a failing verifier, a per-member type too large to allocate, text nested
too deeply to parse) raises `ModuleRunError` at its `file:line:column`, a verifier's error,
and the error of a pass lowering the module, at the op of the text it rejects.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp, SymbolRefAttr, TensorType
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Span

from abir.calling import resolve_backend
from abir.dialects import functional, make_context, verify_error_text, verify_module, vm
from abir.dialects.parsing import AbirParser, located_error_text
from abir.errors import AbirError
from abir.opaque import register_opaque
from abir.passes.analysis import ENTRY_ATTR, call_graph, functions_of, reachable
from abir.passes.pipeline import compile_functional, lower_to_vm
from abir.types import ir_type, is_value_type, oversized_message
from abir.vm.machine import DEFAULT_MAX_STACK_DEPTH, Machine, compile_machine


class ModuleRunError(AbirError, ValueError):
    """A module that cannot be run as given: malformed text, an unsupported module, an opaque
    prim without a callable, arguments that do not fit. The message says where and what to do."""


def parse_module(text: str, name: str = "<text>") -> ModuleOp:
    """The verified module of `text` (`name` is the file name diagnostics show). The parser
    refuses per-member types above `MAX_MEMBER_ELEMENTS` elements before allocating them; a
    verifier's error points at the op's line."""
    parser = AbirParser(make_context(), text, name)
    try:
        module = parser.parse_module()
    except ParseError as e:
        raise ModuleRunError(str(e)) from None
    except RecursionError:
        raise ModuleRunError(f"{name}: the text nests too deeply to parse; flatten it") from None
    try:
        verify_module(module)
    except VerifyException as e:
        what = "the module does not verify: "
        located = located_error_text(e, parser.op_spans, what)
        raise ModuleRunError(located or f"{name}: {what}{verify_error_text(e)}") from None
    _TEXT_SPANS.update(parser.op_spans)
    return module


_TEXT_SPANS: weakref.WeakKeyDictionary[Operation, Span] = weakref.WeakKeyDictionary()
"""Where each op `parse_module` read starts in its text, for errors found later. Keyed by the
ops themselves, weakly: a span holds only the text, so a module is freed with its last user."""


def check_sizes(module: ModuleOp, name: str = "<module>") -> None:
    """Refuse per-member tensor types with more than `MAX_MEMBER_ELEMENTS` elements (a module
    built in Python: the parser refuses them in text)."""
    for op in module.walk():
        types = [*op.result_types, *(arg.type for region in op.regions for block in region.blocks for arg in block.args)]
        types += [attr for attr in op.properties.values() if isinstance(attr, TensorType)]
        for type_ in types:
            if isinstance(type_, TensorType) and (message := oversized_message(str(type_), type_.get_shape())):
                raise ModuleRunError(f"{name}: a per-member type of {op.name} is too large: {message}")


def run_module(
    module_or_text: ModuleOp | str,
    *args: Any,
    backend: Any = None,
    entry: str | None = None,
    max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH,
    max_steps: int | None = None,
    opaque: Mapping[str, Callable[..., Any]] | None = None,
) -> Any:
    """Run a functional or vm module on a batch: one result as a NumPy array, several as a tuple.

    `args` are the entry's flat parameters, each with the batch as its first axis; `backend` an
    abir backend or a name (`numpy`, `jax`, `tf`); `entry` the function to run (default: the
    module's `abir.entry`, its only function, or its only function no other calls); `opaque` the
    callables of the module's opaque prims, by symbol name."""
    module = parse_module(module_or_text) if isinstance(module_or_text, str) else module_or_text
    check_sizes(module)
    supply_opaque(module, opaque or {}, entry)
    try:
        machine = machine_for(module, entry, args)
    except Exception as e:  # a pass's error at an op read from text: point at its line
        if located := located_error_text(e, _TEXT_SPANS):
            raise ModuleRunError(located) from None
        raise
    chosen = resolve_backend(backend)
    outputs = machine.run(list(args), chosen, max_stack_depth, max_steps=max_steps)
    results = tuple(chosen.to_numpy(out) for out in outputs)
    return results[0] if len(results) == 1 else results


def supply_opaque(module: ModuleOp, callables: Mapping[str, Callable[..., Any]], entry: str | None = None) -> None:
    """Register the caller's callables for the opaque prims a run from `entry` can call; an error
    naming every such prim the caller did not supply."""
    needed = called_opaque(module, entry)
    missing = [name for name in needed if name not in callables]
    if missing:
        listed = ", ".join(f"@{name}" for name in missing)
        raise ModuleRunError(
            f"the module declares the opaque prim(s) {listed}, whose Python callables text cannot carry (their "
            "source text is never run); supply each one: abir-run --opaque NAME=module:function, or "
            "run_module(..., opaque={'NAME': fn})"
        )
    for name in needed:
        register_opaque(name, callables[name])


def called_opaque(module: ModuleOp, entry: str | None) -> list[str]:
    """The declared opaque prims a run from `entry` can call: those called in the functions the
    entry reaches (in a vm module, in its program)."""
    declared = [op.sym_name.data for op in module.ops if isinstance(op, functional.OpaqueOp)]
    functions = functions_of(module)
    scope: list[Operation] = [module]
    if declared and functions and not any(isinstance(op, vm.ProgramOp) for op in module.ops):
        name = entry or choose_entry(module)
        if name in functions:
            scope = [functions[n] for n in reachable(call_graph(module), name) if n in functions]
    called = {callee_of(op) for root in scope for op in root.walk()}
    return [name for name in declared if name in called]


def callee_of(op: Operation) -> str | None:
    """The symbol an op calls (a function or an opaque prim), if any."""
    callee = op.properties.get("callee")
    return callee.string_value() if isinstance(callee, SymbolRefAttr) else None


def machine_for(module: ModuleOp, entry: str | None, args: Sequence[Any]) -> Machine:
    """The machine of a vm module, or of a functional module lowered for the arguments' types."""
    if any(isinstance(op, vm.ProgramOp) for op in module.ops):
        return compile_machine(module)
    if not functions_of(module):
        raise ModuleRunError("the module holds neither a functional.func nor a vm.program: nothing to run")
    name = entry or choose_entry(module)
    func = functions_of(module).get(name)
    if func is None:
        raise ModuleRunError(f"no function @{name} in the module (functions: {', '.join(functions_of(module))})")
    typed = compile_functional(module, name, entry_types(func, args))
    return compile_machine(lower_to_vm(typed, name), verify=False)


def choose_entry(module: ModuleOp) -> str:
    """The module's `abir.entry` attribute, its only function, or the only function no other
    function calls."""
    attr = module.attributes.get(ENTRY_ATTR)
    if attr is not None and hasattr(attr, "data"):
        return str(attr.data)
    names = list(functions_of(module))
    if len(names) == 1:
        return names[0]
    graph = call_graph(module)
    roots = [n for n in names if not any(n in callees for caller, callees in graph.items() if caller != n)]
    if len(roots) != 1:
        raise ModuleRunError(f"cannot choose the entry among {', '.join('@' + n for n in names)}; name it (--entry NAME)")
    return roots[0]


def entry_types(func: functional.FuncOp, args: Sequence[Any]) -> list[Attribute]:
    """The entry's parameter types: as declared when all are typed, else from the arguments
    (dtype and the shape after the batch axis)."""
    declared = list(func.function_type.inputs.data)
    if len(args) != len(declared):
        raise ModuleRunError(f"@{func.sym_name.data} takes {len(declared)} argument(s), got {len(args)}")
    if all(is_value_type(t) for t in declared):
        return declared
    types = []
    for index, arg in enumerate(args):
        array = np.asarray(arg)
        if array.ndim == 0:
            raise ModuleRunError(
                f"argument {index} of @{func.sym_name.data} is a scalar; every argument is a batch (its first axis "
                "the batch members), e.g. [3, 7, 10]"
            )
        try:
            types.append(ir_type(array.dtype, array.shape[1:]))
        except TypeError as e:
            raise ModuleRunError(f"argument {index} of @{func.sym_name.data}: {e}") from None
    return types

