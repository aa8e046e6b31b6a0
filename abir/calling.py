"""Calling a batched function: argument checks, signatures, compile caches and execution.

A call flattens its (possibly nested) arguments into array leaves, checks them, derives the
signature (per-member dtype and event shape of every leaf, never the batch size), compiles the
program for that signature once (frontend specialization, type inference, lowering to the vm
dialect, kernel construction) and runs it on the chosen backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import optree
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute

from abir.types import TensorType, ir_type

if TYPE_CHECKING:
    from abir.backends.base import Backend
    from abir.context import Context, FrontendProgram
    from abir.vm.machine import Machine

CALL_OPTIONS = ("backend", "max_stack_depth", "dry_run", "stackless", "block_code_cache")


@dataclass(frozen=True)
class CallOptions:
    """The keyword arguments a batched function accepts besides its own positional ones."""

    backend: Backend
    max_stack_depth: int = 15
    dry_run: bool = False
    stackless: bool = False
    block_code_cache: dict[Any, Any] | None = None


@dataclass(frozen=True)
class CompiledProgram:
    """Everything compiled for one (function, argument structure, signature, backend kind)."""

    frontend: FrontendProgram
    typed: ModuleOp
    lowered: ModuleOp
    machine: Machine


def parse_call_options(function_name: str, kwargs: Mapping[str, Any]) -> CallOptions:
    """Check the keyword arguments of a batched call and fill in defaults."""
    unknown = sorted(set(kwargs) - set(CALL_OPTIONS))
    if unknown:
        raise TypeError(
            f"{function_name}() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}; batched "
            f"functions take their own arguments by position and accept only {', '.join(CALL_OPTIONS)}"
        )
    options = dict(kwargs)
    options["backend"] = default_backend(options.get("backend"))
    depth = options.get("max_stack_depth", 15)
    if isinstance(depth, bool) or not isinstance(depth, int | np.integer) or depth < 1:
        raise ValueError(f"max_stack_depth must be a positive integer, got {depth!r}")
    cache = options.get("block_code_cache")
    if cache is not None and not isinstance(cache, dict):
        raise TypeError(f"block_code_cache must be a dict (or None), got {type(cache).__name__}")
    return CallOptions(**options)


def is_array_leaf(value: Any) -> bool:
    """NumPy/JAX/TF arrays and Python/NumPy numbers are batchable leaves; nothing else is."""
    if isinstance(value, bool | int | float | np.ndarray | np.generic):
        return True
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, str | bytes)


def leaf_dtype(value: Any) -> np.dtype:
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return np.asarray(value).dtype
    return np.dtype(getattr(dtype, "as_numpy_dtype", dtype))


def leaf_shape(value: Any) -> tuple[int, ...]:
    shape = getattr(value, "shape", ())
    return tuple(int(d) for d in shape)


def flatten_arguments(function_name: str, args: Sequence[Any]) -> tuple[list[Any], list[optree.PyTreeSpec]]:
    """Flatten every argument into leaves (tuples, lists and namedtuples are structure)."""
    leaves: list[Any] = []
    treedefs: list[optree.PyTreeSpec] = []
    for position, arg in enumerate(args):
        arg_leaves, treedef = optree.tree_flatten(arg)
        for path, leaf in zip(treedef.paths(), arg_leaves, strict=True):
            if not is_array_leaf(leaf):
                where = f"argument {position}" + "".join(f"[{p!r}]" for p in path)
                raise TypeError(
                    f"{where} of {function_name}() is a {type(leaf).__name__}; abir batches arrays (NumPy, JAX "
                    "or TensorFlow) and Python numbers, nested in tuples, lists or namedtuples"
                )
        leaves.extend(arg_leaves)
        treedefs.append(treedef)
    return leaves, treedefs


def batch_size_of(function_name: str, leaves: Sequence[Any]) -> int:
    """The common leading dimension; leaves of size 1 and scalars broadcast."""
    sizes = {leaf_shape(leaf)[0] if leaf_shape(leaf) else 1 for leaf in leaves}
    sizes.discard(1)
    if len(sizes) > 1:
        described = ", ".join(str(s) for s in sorted(sizes))
        raise ValueError(
            f"{function_name}() got arguments with mismatched batch sizes {described}; every argument's "
            "leading (batch) dimension must be the same or 1"
        )
    return sizes.pop() if sizes else 1


def signature_of(leaves: Sequence[Any]) -> tuple[TensorType, ...]:
    """Per-member types of the leaves: dtype and event shape, batch dimension stripped."""
    return tuple(TensorType(leaf_dtype(leaf), leaf_shape(leaf)[1:]) for leaf in leaves)


def backend_kind(backend: Backend) -> tuple[Any, ...]:
    """What about a backend changes compiled code (its class and configuration)."""
    return (type(backend).__name__, getattr(backend, "jit_compile", None), backend.block_order)


def compile_program(
    context: Context, name: str, treedefs: Sequence[optree.PyTreeSpec], signature: Sequence[TensorType], backend: Backend
) -> CompiledProgram:
    """Frontend specialization, type inference, lowering to vm, and the machine's kernels."""
    from abir.passes.pipeline import compile_functional, lower_to_vm
    from abir.vm.machine import compile_machine

    frontend = context.build_program(name, list(treedefs))
    arg_types: list[Attribute] = [ir_type(t.dtype, t.shape) for t in signature]
    typed = compile_functional(
        frontend.module,
        frontend.entry,
        arg_types,
        user_type_inference=context.type_inference_callables(),
    )
    lowered = lower_to_vm(typed, frontend.entry, backend.block_order)
    return CompiledProgram(frontend, typed, lowered, compile_machine(lowered))


def compiled_for(
    context: Context,
    cache: dict[Any, Any],
    name: str,
    treedefs: Sequence[optree.PyTreeSpec],
    signature: Sequence[TensorType],
    backend: Backend,
) -> CompiledProgram:
    key = ("abir.program", id(context), context.generation, name, tuple(treedefs), tuple(signature), backend_kind(backend))
    if key not in cache:
        cache[key] = compile_program(context, name, treedefs, signature, backend)
    return cache[key]


def default_backend(backend: Backend | None) -> Backend:
    if backend is not None:
        return backend
    from abir.backends.numpy_backend import NumpyBackend

    return NumpyBackend()


def compiled_for_call(context: Context, name: str, args: Sequence[Any], backend: Backend | None) -> CompiledProgram:
    """The compiled program a call `name(*args)` on `backend` runs."""
    leaves, treedefs = flatten_arguments(name, args)
    batch_size_of(name, leaves)
    backend = default_backend(backend)
    return compiled_for(context, context.compile_cache, name, treedefs, signature_of(leaves), backend)


def compiled_for_signature(context: Context, name: str, sig: Sequence[Any], backend: Backend | None) -> CompiledProgram:
    """The compiled program for a signature given as one TensorType pattern per argument."""
    treedefs, leaf_types = signature_from_types(sig)
    return compiled_for(context, context.compile_cache, name, treedefs, leaf_types, default_backend(backend))


def call_batched(context: Context, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """Run batched function `name` of `context` on `args` (the non-dry-run modes)."""
    options = parse_call_options(name, kwargs)
    leaves, treedefs = flatten_arguments(name, args)
    batch_size = batch_size_of(name, leaves)
    signature = signature_of(leaves)
    cache = options.block_code_cache if options.block_code_cache is not None else context.compile_cache
    program = compiled_for(context, cache, name, treedefs, signature, options.backend)
    if options.stackless:
        from abir.vm.stackless import execute_stackless

        outputs = execute_stackless(program.typed, program.frontend.entry, leaves, options.backend)
    else:
        outputs = program.machine.run(
            leaves,
            options.backend,
            max_stack_depth=int(options.max_stack_depth),
            cache_key=("abir.run", program.machine, batch_size, int(options.max_stack_depth)),
        )
    return optree.tree_unflatten(program.frontend.output_treedef, list(outputs))


def signature_from_types(sig: Sequence[Any]) -> tuple[list[optree.PyTreeSpec], tuple[TensorType, ...]]:
    """Split a user signature (one TensorType pattern per argument) into structures and leaf types."""
    treedefs: list[optree.PyTreeSpec] = []
    leaf_types: list[TensorType] = []
    for pattern in sig:
        leaves, treedef = optree.tree_flatten(pattern, is_leaf=lambda x: isinstance(x, TensorType))
        for leaf in leaves:
            if not isinstance(leaf, TensorType):
                raise TypeError(f"a signature holds abir.TensorType(dtype, shape) leaves, got {leaf!r}")
            leaf_types.append(TensorType(np.dtype(leaf.dtype), tuple(leaf.shape)))
        treedefs.append(_argument_structure(treedef))
    return treedefs, tuple(leaf_types)


def _argument_structure(treedef: optree.PyTreeSpec) -> optree.PyTreeSpec:
    """The structure of arguments shaped like a signature pattern (TensorType leaves -> array leaves)."""
    return optree.tree_structure(optree.tree_unflatten(treedef, [0] * treedef.num_leaves))
