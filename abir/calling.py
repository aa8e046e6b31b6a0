"""Calling a batched function: argument checks, signatures, compile caches and execution.

A call flattens its (possibly nested) arguments into array leaves (a plain list or tuple of
numbers is one array, as `np.asarray` reads it: `is_number_list`), checks them, derives the
signature (per-member dtype and event shape of every leaf, never the batch size; Python numbers
are weak like literals, NEP 50), compiles the program for that signature once (frontend
specialization, type inference, lowering to the vm dialect, kernel construction) and runs it on
the chosen backend. An empty batch returns empty results of the inferred types; a failure of an
undecorated helper becomes an `abir.errors.HelperError` naming it.

`Compiler` does the compiling and calling for a `Context`, which it sees only as a
`ProgramSource`: this module does not import `abir.context`.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import optree
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute

from abir.backend_registry import BackendSpec, backend_names, spec_named
from abir.backends.base import Backend, BackendProtocol
from abir.backends.numpy_backend import NumpyBackend
from abir.errors import AbirError
from abir.frontend.program import FrontendProgram
from abir.lane_devices import lane_devices, run_lanes_on_devices, stream_devices, stream_lanes_on_devices
from abir.lru import LRUCache
from abir.opaque import CallBatch, HelperStructureLearned, calling_with_batch, failure_mark, helper_error
from abir.passes.pipeline import lower_to_vm, type_and_optimize
from abir.types import TensorType, ir_type
from abir.vm.inputs import batch_size_of, prepare_inputs
from abir.vm.lanes import (
    LaneWindow,
    lane_flag_keys,
    lane_flushes,
    lane_member_errors,
    pending_inputs,
    run_lanes,
)
from abir.vm.machine import Machine, check_max_steps, compile_machine
from abir.vm.stackless import execute_stackless
from abir.vm.state_ops import flag_normal_value, register_key

CALL_OPTIONS = (
    "backend", "max_stack_depth", "max_steps", "dry_run", "stackless", "block_code_cache", "pad_batch", "lanes", "progress",
)  # fmt: skip
MAX_HELPER_STRUCTURE_ROUNDS = 16
PARSED_OPTIONS = 64
"""How many distinct keyword sets of batched calls keep their parsed `CallOptions`."""
STEADY_CALLS = 16
"""How many argument signatures of repeated calls a `Compiler` keeps a `SteadyCall` for."""


@dataclass(frozen=True)
class CallOptions:
    """The keyword arguments a batched function accepts besides its own positional ones."""

    backend: Backend
    max_stack_depth: int = 15
    max_steps: int | None = None
    """At most this many blocks per member (None: no limit); see `Machine.run`."""
    dry_run: bool = False
    stackless: bool = False
    block_code_cache: dict[Any, Any] | None = None
    pad_batch: bool = False
    """Run the machine on the next power of two rows (`padded_size`), so that calls with
    nearby batch sizes share one compiled run."""
    lanes: int | None = None
    """Run the members through this many rows, each starting the next member when its own
    halts (`run_with_lanes`); None: one row per member."""
    progress: bool = False
    """Show a tqdm bar of the members finished (a run with lanes: `lanes=None` means as many
    lanes as members)."""


class ProgramKey(tuple[Any, ...]):
    """A compiled program's cache key (`Compiler.program_key`) that hashes once: it holds the
    argument types and structures, slow to hash, and every steady call looks its program up by
    it (`Compiler.still_steady`). Equal to, and hashing as, the plain tuple."""

    def __init__(self, _: Iterable[Any] = ()) -> None:
        self.hash = tuple.__hash__(self)

    def __hash__(self) -> int:
        return self.hash

    def __reduce__(self) -> tuple[Any, ...]:
        return (ProgramKey, (tuple(self),))


@dataclass(frozen=True)
class CompiledProgram:
    """Everything compiled for one (function, argument structure, signature, backend kind).
    `lowered` is verified; `typed` only through `lowered` (lowering goes on from it), and
    `verified_typed` verifies it where it is run or handed out itself."""

    frontend: FrontendProgram
    typed: ModuleOp
    lowered: ModuleOp
    machine: Machine

    @functools.cached_property
    def verified_typed(self) -> ModuleOp:
        """`typed`, verified (once)."""
        self.typed.verify()
        return self.typed


class SteadyCall:
    """What a call found for its arguments once they passed every check, reused by later calls
    whose arguments have the same `steady_signature` (so the same checks would pass again): the
    options, the compiled program and the key it is cached under (it is used only while that
    cache still holds it), and the batch size. Called on such arguments, it runs the program
    and returns the call's results, raising what the checked path raises."""

    __slots__ = (
        "options", "program", "program_key", "batch_size", "run", "batch", "output_treedef", "one_output", "on_host",
        "finished",
    )  # fmt: skip

    def __init__(
        self,
        options: CallOptions,
        program: CompiledProgram,
        program_key: Any,
        batch_size: int,
        run: Callable[[Sequence[Any]], list[Any]] | None = None,
        on_host: bool = False,
    ):
        self.options = options
        self.program = program
        self.program_key = program_key
        self.batch_size = batch_size
        self.run = run or functools.partial(run_machine, program, options=options, batch_size=batch_size)
        """The machine's run for such arguments without the checks they passed
        (`Machine.steady_run`), where it has one; else `run_machine`."""
        self.batch = CallBatch(batch_size, machine_rows(batch_size, options))
        self.output_treedef = program.frontend.output_treedef
        self.one_output = self.output_treedef.is_leaf()
        """Whether the call returns its one output leaf as it is (no structure around it)."""
        self.on_host = on_host
        """Whether the arguments are NumPy arrays (never sharded over devices)."""
        self.finished: Callable[[Sequence[Any]], list[Any] | None] | None = None
        """The `SteadyLauncher.finished_outputs` of the run's launcher, once the run has one
        (`finished_outputs`)."""

    def __call__(self, args: Sequence[Any]) -> Any:
        finished = self.finished or self.finished_outputs()
        if finished is not None:
            # one compiled program runs, no helper's Python: no helper error to explain
            with self.options.backend.scope():
                outputs = finished(args)
            if outputs is not None:
                self.program.machine.last_stats = None
                return outputs[0] if self.one_output else optree.tree_unflatten(self.output_treedef, outputs)
        return self.checked_run(args)

    def finished_outputs(self) -> Callable[[Sequence[Any]], list[Any] | None] | None:
        """The run's `SteadyLauncher.finished_outputs` where the run (`Machine.steady_run`) has a
        launcher, found once its first run made it: it gives the outputs of a run that
        finished unflagged without the machine's state (else None, and `checked_run` runs it
        again from its start, raising its errors)."""
        launch = getattr(self.run, "launch", None)
        if launch is not None:
            self.finished = launch.finished_outputs
        return self.finished

    def checked_run(self, args: Sequence[Any]) -> Any:
        """The call's results through the machine's run, a helper's error explained."""
        mark = failure_mark()
        # arguments of a steady signature are never traced: the scope of concrete ones; a
        # helper's error is explained within the batch's context, which it names
        with self.options.backend.scope(), calling_with_batch(self.batch):
            try:
                outputs = self.run(args)
            except Exception as err:
                explained = helper_error(err, since=mark)
                if explained is None:
                    raise
                raise explained from err
        if self.one_output:
            return outputs[0]
        return optree.tree_unflatten(self.output_treedef, outputs)


_PARSED_OPTIONS = LRUCache(PARSED_OPTIONS)


def keywords_key(kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
    """Each keyword's name, type and value (the types too: 1 == True, yet pad_batch=1 and
    max_stack_depth=True are errors); hashable when every value is."""
    return tuple([(name, type(value), value) for name, value in kwargs.items()])


def options_key(kwargs: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The key `parse_call_options` caches a keyword set's options by, or None when they are not
    reused (no backend named, or an unhashable value such as a `block_code_cache` dict)."""
    if kwargs.get("backend") is None:
        return None
    key = keywords_key(kwargs)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def parse_call_options(function_name: str, kwargs: Mapping[str, Any]) -> CallOptions:
    """Check the keyword arguments of a batched call and fill in defaults. Calls that name their
    backend reuse the options parsed for the same keywords before (a call without one gets a
    fresh NumPy backend, which is not shared)."""
    key = options_key(kwargs)
    if key is None:
        return _parse_call_options(function_name, kwargs)
    options = _PARSED_OPTIONS.get(key)
    if options is None:
        options = _PARSED_OPTIONS[key] = _parse_call_options(function_name, kwargs)
    return options


def _parse_call_options(function_name: str, kwargs: Mapping[str, Any]) -> CallOptions:
    unknown = sorted(set(kwargs) - set(CALL_OPTIONS))
    if unknown:
        raise TypeError(
            f"{function_name}() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}; batched "
            f"functions take their own arguments by position and accept only {', '.join(CALL_OPTIONS)}"
        )
    options = dict(kwargs)
    options["backend"] = resolve_backend(options.get("backend"))
    depth = options.get("max_stack_depth", 15)
    if isinstance(depth, bool) or not isinstance(depth, int | np.integer) or depth < 1:
        raise ValueError(f"max_stack_depth must be a positive integer, got {depth!r}")
    check_max_steps(options.get("max_steps"))
    if options.get("max_steps") is not None and options.get("stackless"):
        raise ValueError("max_steps= needs the machine; it cannot be combined with stackless=True")
    if not isinstance(options.get("pad_batch", False), bool):
        raise TypeError(f"pad_batch must be True or False, got {options['pad_batch']!r}")
    if options.get("pad_batch") and options.get("stackless"):
        raise ValueError("pad_batch=True pads the machine's batch; it cannot be combined with stackless=True")
    check_lane_options(options)
    cache = options.get("block_code_cache")
    if cache is not None and not isinstance(cache, dict):
        raise TypeError(f"block_code_cache must be a dict (or None), got {type(cache).__name__}")
    return CallOptions(**options)


def check_lane_options(options: Mapping[str, Any]) -> None:
    """`lanes` is None or a positive int, `progress` a bool, and neither is combined with an
    option that changes the rows the machine runs (`stackless`, `pad_batch`)."""
    lanes = options.get("lanes")
    if lanes is not None and (isinstance(lanes, bool) or not isinstance(lanes, int | np.integer)):
        raise TypeError(f"lanes must be None or a positive int (the rows members run on), got {type(lanes).__name__}")
    if lanes is not None and lanes < 1:
        raise ValueError(f"lanes must be a positive int (the rows members run on), got {lanes}; pass lanes=None for one row per member")
    if not isinstance(options.get("progress", False), bool):
        raise TypeError(f"progress must be True or False, got {options['progress']!r}")
    if lanes is None and not options.get("progress"):
        return
    for other in ("stackless", "pad_batch"):
        if options.get(other):
            given = "lanes=" if lanes is not None else "progress=True"
            raise ValueError(f"{given} runs members through lanes of the machine; it cannot be combined with {other}=True")


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


def is_structure(value: Any) -> bool:
    """Tuples, lists and namedtuples: the structures a batched function's arguments may have."""
    return type(value) in (tuple, list) or (isinstance(value, tuple) and hasattr(value, "_fields"))


def is_number(value: Any) -> bool:
    """A Python number (bool, int, float) or a NumPy number or bool."""
    return isinstance(value, bool | int | float | np.number | np.bool_)


def is_number_list(value: Any) -> bool:
    """A non-empty plain list or tuple (not a namedtuple) whose items are all numbers, or all
    such lists: an array, as `np.asarray` reads it, not a structure. (A structure's leaves are
    shared numbers or arrays with a batch axis each; a list of numbers has no batch axis to give
    its leaves, so it is the batch.) A list mixing numbers and lists is a structure."""
    if type(value) not in (tuple, list) or len(value) == 0:
        return False
    return all(is_number(item) for item in value) or all(is_number_list(item) for item in value)


def read_number_lists(function_name: str, where: str, value: Any) -> Any:
    """`value` (argument `where` of `function_name`) with every `is_number_list` in it read as
    an array by `np.asarray`, its first axis the batch; other structures kept."""
    if is_number_list(value):
        return number_list_as_array(function_name, where, value)
    if not is_structure(value):
        return value
    items = [read_number_lists(function_name, f"{where}[{index}]", item) for index, item in enumerate(value)]
    return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)


def number_list_as_array(function_name: str, where: str, value: list[Any] | tuple[Any, ...]) -> np.ndarray:
    """The array `np.asarray` reads from the list of numbers `value`, or an error at the call
    naming `where` when it reads none (ragged nesting, integers beyond 64 bits)."""
    kind = type(value).__name__
    try:
        array = np.asarray(value)
    except ValueError as err:  # ragged: rows of different lengths
        raise ValueError(
            f"{where} of {function_name}() is a {kind} of numbers, which abir reads as one array (the batch "
            f"axis first), as np.asarray does, but np.asarray cannot read it: {str(err).rstrip('.')}. Pass a rectangular "
            "nested list (every member's value of the same shape) or an array; for a structure, make its leaves "
            "arrays (np.asarray(...) each) or a namedtuple"
        ) from None
    if array.dtype == object:
        raise TypeError(
            f"{where} of {function_name}() is a {kind} of numbers that np.asarray reads only as Python "
            f"objects (an integer beyond 64 bits?); pass an array of the dtype you mean, e.g. "
            f"np.asarray({_shortened(value)}, dtype=np.float64)"
        )
    return array


def _shortened(value: list[Any] | tuple[Any, ...], items: int = 3) -> str:
    """`value` as Python shows it, its outer items after the first `items` elided."""
    if len(value) <= items:
        return repr(value)
    shown = ", ".join(repr(item) for item in value[:items])
    return f"[{shown}, ...]" if isinstance(value, list) else f"({shown}, ...)"


def flatten_arguments(function_name: str, args: Sequence[Any]) -> tuple[list[Any], list[optree.PyTreeSpec]]:
    """Flatten every argument into leaves (tuples, lists and namedtuples are structure, except
    that a list or tuple of numbers is one array: `is_number_list`)."""
    leaves: list[Any] = []
    treedefs: list[optree.PyTreeSpec] = []
    for position, arg in enumerate(args):
        where = f"argument {position}"
        arg = read_number_lists(function_name, where, arg)
        check_argument(function_name, where, arg)
        arg_leaves, treedef = optree.tree_flatten(arg)
        leaves.extend(arg_leaves)
        treedefs.append(treedef)
    return leaves, treedefs


def check_argument(function_name: str, where: str, value: Any) -> None:
    """Every leaf of an argument is an array or a Python number, inside tuples, lists and
    namedtuples only; anything else is a clear `TypeError` naming its position."""
    if is_structure(value):
        for index, item in enumerate(value):
            check_argument(function_name, f"{where}[{index}]", item)
        return
    if is_array_leaf(value):
        return
    if value is None:
        problem = "is None"
        fix = "pass an array for every argument (None cannot be batched)"
    elif isinstance(value, Mapping):
        problem = f"is a {type(value).__name__}"
        fix = "pass a tuple or a namedtuple instead of a dict (batched functions take tuples, lists and namedtuples)"
    else:
        problem = f"is a {type(value).__name__}"
        fix = (
            "abir batches arrays (NumPy, JAX or TensorFlow), lists of numbers (read as np.asarray reads them) "
            "and Python numbers, nested in tuples, lists or namedtuples"
        )
    raise TypeError(f"{where} of {function_name}() {problem}; {fix}")


def leaf_batch_size(
    function_name: str, leaves: Sequence[Any], treedefs: Sequence[optree.PyTreeSpec], args: Sequence[Any] = ()
) -> int:
    """The common leading dimension of a call's argument leaves (`flatten_arguments`); leaves of
    size 1 and scalars broadcast. With the call's `args`, an error says which leaves were lists
    of numbers read as batches, and how to share numbers with every member instead."""

    def names() -> list[str]:
        return [
            f"argument {position}" + "".join(f"[{entry}]" for entry in path) + _number_list_note(args, position, path)
            for position, treedef in enumerate(treedefs)
            for path in treedef.paths()
        ]

    return batch_size_of(f"{function_name}()", [leaf_shape(leaf) for leaf in leaves], names)


def _number_list_note(args: Sequence[Any], position: int, path: Sequence[Any]) -> str:
    """A note for the leaf at `path` in argument `position` when it was a list of numbers."""
    if position >= len(args):
        return ""
    value = args[position]
    for entry in path:
        value = value[entry]
    if not is_number_list(value):
        return ""
    return (
        f" (a {type(value).__name__} of numbers: a batch, as np.asarray reads it; to give every member the same "
        "numbers, pass them in a namedtuple or as size-1 arrays)"
    )


def signature_of(leaves: Sequence[Any]) -> tuple[TensorType, ...]:
    """Per-member types of the leaves: dtype and event shape, batch dimension stripped."""
    return tuple(TensorType(leaf_dtype(leaf), leaf_shape(leaf)[1:]) for leaf in leaves)


def steady_signature(args: Sequence[Any]) -> tuple[Any, ...] | None:
    """Each argument's type, shape and dtype when every argument is one array (NumPy's or a
    backend's), the only arguments whose checks depend on nothing else; None otherwise (a
    structure, a list of numbers, a Python or NumPy number, whose checks read more)."""
    signature = []
    for arg in args:
        if isinstance(arg, np.generic) or is_structure(arg) or not is_array_leaf(arg) or is_number(arg):
            return None
        signature.append((type(arg), tuple(arg.shape), arg.dtype))
    return tuple(signature)


def weak_leaves(leaves: Sequence[Any]) -> tuple[bool, ...]:
    """Which leaves are Python numbers: weak like literals (NEP 50), as in the per-member run."""
    return tuple(isinstance(leaf, bool | int | float) and not isinstance(leaf, np.generic) for leaf in leaves)


def backend_kind(backend: Backend) -> tuple[Any, ...]:
    """What about a backend changes compiled code (its class and configuration)."""
    return (type(backend).__name__, getattr(backend, "jit_compile", None), backend.block_order, backend.superblocks)


TypeInference = Callable[[list[Any]], Any]
"""A user's `type_inference`: one type per argument (in its structure) -> the result types."""


class ProgramSource(Protocol):
    """What compiling needs from the functions a program is built from (a `Context` is one)."""

    generation: int
    """Changes whenever a function is decorated (keys the compiled programs)."""

    def build_program(self, main: str, arg_treedefs: Sequence[optree.PyTreeSpec] | None = None) -> FrontendProgram:
        """`main` specialized to its arguments' structures: the frontend's module."""
        ...

    def type_inference_callables(self) -> dict[str, TypeInference]:
        """Function symbol -> the user's `type_inference` for it."""
        ...

    def forget_programs(self) -> None:
        """Drop the frontend's modules: a helper's result structure became known."""
        ...


class Compiler:
    """Compiles and runs the batched functions of one `ProgramSource` (each `Context` owns one).

    Compiled programs are kept in `cache` (the context's), or in the `block_code_cache=` dict a
    call passes, keyed by the source, its generation, the function, the argument structure and
    signature, which leaves are Python numbers, and the backend's kind; their typed modules, which
    do not depend on the backend, in `typed`, by the same key less the source and the backend."""

    def __init__(self, source: ProgramSource, cache: MutableMapping[Any, Any]):
        self.source = source
        self.cache = cache
        self.typed: MutableMapping[Any, tuple[FrontendProgram, ModuleOp]] = (
            LRUCache(cache.maxsize) if isinstance(cache, LRUCache) else {}
        )
        """The frontend program and typed module of each (generation, function, argument
        structure and signature, weak leaves), for every backend (`functional`); as many as
        `cache` holds programs."""
        self.steady: MutableMapping[Any, SteadyCall] = LRUCache(STEADY_CALLS)
        """The `SteadyCall` of each (function, generation, keywords, `steady_signature`) a
        plain run (one machine on concrete arrays) was called with."""

    def compile(
        self,
        name: str,
        treedefs: Sequence[optree.PyTreeSpec],
        signature: Sequence[TensorType],
        backend: Backend,
        weak: Sequence[bool] | None = None,
    ) -> CompiledProgram:
        """Frontend specialization, type inference (`functional`), lowering to vm, and the
        machine's plans."""
        frontend, typed = self.functional(name, treedefs, signature, weak)
        lowered = lower_to_vm(typed, frontend.entry, backend.block_order, backend.superblocks)
        return CompiledProgram(frontend, typed, lowered, compile_machine(lowered, verify=False))

    def functional(
        self,
        name: str,
        treedefs: Sequence[optree.PyTreeSpec],
        signature: Sequence[TensorType],
        weak: Sequence[bool] | None = None,
    ) -> tuple[FrontendProgram, ModuleOp]:
        """The frontend's program of `name` for the argument structure and its typed module for
        the signature: what every backend's compilation starts from, made once and kept in this
        compiler's `typed` (lowering to vm leaves the typed module as it is).

        Type inference may find that an undecorated helper returns a structure (a tuple, list or
        namedtuple) its call was not lowered for; the frontend then lowers the program again,
        keeping that structure."""
        weak = tuple(weak) if weak is not None else (False,) * len(signature)
        key = (self.source.generation, name, tuple(treedefs), tuple(signature), weak)
        found = self.typed.get(key)
        if found is not None:
            return found  # type: ignore[no-any-return]
        arg_types: list[Attribute] = [ir_type(t.dtype, t.shape) for t in signature]
        for _ in range(MAX_HELPER_STRUCTURE_ROUNDS):
            frontend = self.source.build_program(name, list(treedefs))
            try:
                typed = self.typed_module(frontend, arg_types, weak)
                break
            except HelperStructureLearned:
                self.source.forget_programs()
        else:
            raise AbirError(f"lowering '{name}' did not settle the structures its helpers return")
        self.typed[key] = (frontend, typed)
        return frontend, typed

    def typed_module(
        self, frontend: FrontendProgram, arg_types: Sequence[Attribute], weak: Sequence[bool] | None
    ) -> ModuleOp:
        """The frontend's module typed for `arg_types` (`weak`: which are Python numbers) and
        optimized: the pipeline's functional stage, as `abir.passes.pipeline.compile_functional`
        runs it, not verified (`CompiledProgram.verified_typed`)."""
        user_type_inference = self.source.type_inference_callables()
        return type_and_optimize(
            frontend.module.clone(), frontend.entry, arg_types, user_type_inference=user_type_inference, weak_args=weak,
            verify=False,
        )  # fmt: skip

    def compiled(
        self,
        name: str,
        treedefs: Sequence[optree.PyTreeSpec],
        signature: Sequence[TensorType],
        backend: Backend,
        weak: Sequence[bool] | None = None,
        cache: MutableMapping[Any, Any] | None = None,
        key: tuple[Any, ...] | None = None,
    ) -> CompiledProgram:
        """The compiled program from `cache` (default: this compiler's), compiled on a miss and
        stored under `key` (default: `program_key` of the arguments)."""
        cache = self.cache if cache is None else cache
        key = self.program_key(name, treedefs, signature, backend, weak) if key is None else key
        program = cache.get(key)
        if program is None:
            program = cache[key] = self.compile(name, treedefs, signature, backend, weak)
        return program

    def program_key(
        self,
        name: str,
        treedefs: Sequence[optree.PyTreeSpec],
        signature: Sequence[TensorType],
        backend: Backend,
        weak: Sequence[bool] | None = None,
    ) -> tuple[Any, ...]:
        """The key the compiled program of `compiled`'s arguments is cached under."""
        weak = tuple(weak) if weak is not None else (False,) * len(signature)
        return ProgramKey((
            "abir.program", id(self.source), self.source.generation, name, tuple(treedefs), tuple(signature), weak,
            backend_kind(backend),
        ))  # fmt: skip

    def for_call(self, name: str, args: Sequence[Any], backend: Backend | None) -> CompiledProgram:
        """The compiled program a call `name(*args)` on `backend` runs."""
        leaves, treedefs = flatten_arguments(name, args)
        with calling_with_batch(leaf_batch_size(name, leaves, treedefs, args)):
            return self.compiled(name, treedefs, signature_of(leaves), resolve_backend(backend), weak_leaves(leaves))

    def for_signature(self, name: str, sig: Sequence[Any], backend: Backend | None) -> CompiledProgram:
        """The compiled program for a signature given as one TensorType pattern per argument."""
        treedefs, leaf_types = signature_from_types(sig)
        return self.compiled(name, treedefs, leaf_types, resolve_backend(backend))

    def call(self, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """Run batched function `name` on `args` (the non-dry-run modes). A call whose arguments
        are arrays of the types, shapes and dtypes of an earlier plain run skips the checks and
        look-ups that run made (`SteadyCall`); every error the run itself finds is raised the same."""
        steady = self.steady_call(name, args, kwargs)
        if steady is not None:
            return steady(args)
        steady_key = self.steady_key(name, args, kwargs)
        options = parse_call_options(name, kwargs)
        leaves, treedefs = flatten_arguments(name, args)
        batch_size = leaf_batch_size(name, leaves, treedefs, args)
        signature = signature_of(leaves)
        weak = weak_leaves(leaves)
        # the key object the cache stores on a miss, which a `SteadyCall` then finds by identity
        key = self.program_key(name, treedefs, signature, options.backend, weak)
        with options.backend.scope(leaves), calling_with_batch(batch_size, machine_rows(batch_size, options)):
            program = self.compiled(name, treedefs, signature, options.backend, weak, options.block_code_cache, key)
            with explained_helper_errors():
                if runs_with_lanes(options, batch_size):
                    return run_with_lanes(name, program, leaves, batch_size, options)
                outputs = run_program(program, leaves, batch_size, options)
        if steady_key is not None and runs_plain(options, leaves, batch_size):
            on_host = all(type(arg) is np.ndarray for arg in args)
            run = steady_run(program, leaves, options)
            self.steady[steady_key] = SteadyCall(options, program, key, batch_size, run, on_host)
        return optree.tree_unflatten(program.frontend.output_treedef, list(outputs))

    def steady_key(self, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, ...] | None:
        """The key of a call's `SteadyCall`, or None when the call cannot have one (its options
        are not cached, or its arguments are not all arrays: `steady_signature`)."""
        keywords = options_key(kwargs)
        if keywords is None:
            return None
        signature = steady_signature(args)
        if signature is None:
            return None
        return (name, self.source.generation, keywords, signature)

    def steady_call(self, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> SteadyCall | None:
        """The `SteadyCall` of a call whose arguments and keywords are those of an earlier plain
        run's (`steady_key`) while it still holds (`still_steady`), else None. Looked up by a key
        made without checking the arguments: only checked keys are stored, and arguments that
        are not one array each make another key, or none (`steady_signature`)."""
        if kwargs.get("backend") is None:  # no backend named: no key (`options_key`)
            return None
        try:
            signature = tuple([(type(arg), tuple(arg.shape), arg.dtype) for arg in args])
            steady = self.steady.get((name, self.source.generation, keywords_key(kwargs), signature))
        except (AttributeError, TypeError, ValueError):  # no array, an unknown shape, a value not hashable
            return None
        if steady is None or not self.still_steady(steady, args):
            return None
        return steady

    def still_steady(self, steady: SteadyCall, args: Sequence[Any]) -> bool:
        """Whether `steady` holds for arguments of its signature: its program is still the one
        compiled (not evicted or recompiled), and arrays of the backend are not sharded over
        devices (a run per shard)."""
        if self.cache.get(steady.program_key) is not steady.program:
            return False
        return steady.on_host or steady.options.backend.batch_sharding(args) is None

    def imap(
        self, name: str, members: Iterable[Sequence[Any]], lanes: int, chunk_size: int | None, kwargs: Mapping[str, Any]
    ) -> Iterator[tuple[int, Any]]:
        """`(index, result)` of every member of `members` (each the tuple of one member's
        arguments, as `itertools.starmap` takes them), in the order they finish, run through
        `lanes` lanes; the members are read `chunk_size` at a time (default 4 * lanes), the next
        chunk once every member of the last has started (`abir.vm.lanes.lane_flushes`), so memory
        holds the lanes, two chunks and the results not consumed yet. Results are NumPy values.
        Members that fail (stack overflow, `max_steps`) raise once every other has finished,
        the error naming them by index. `kwargs` may name `devices` (JAX devices of this
        process): each runs its own `lanes` lanes, all reading the one stream
        (`abir.lane_devices.stream_lanes_on_devices`)."""
        devices = kwargs.get("devices")
        kwargs = {key: value for key, value in kwargs.items() if key != "devices"}
        options = parse_call_options(name, {**kwargs, "lanes": lanes})
        if options.dry_run:
            raise ValueError(f"{name}.imap() runs the batched program; for plain Python, call {name} per member")
        chunk = 4 * int(lanes) if chunk_size is None else chunk_size
        if isinstance(chunk, bool) or not isinstance(chunk, int | np.integer) or chunk < 1:
            raise ValueError(f"chunk_size must be a positive int (members read at a time), got {chunk_size!r}")
        blocks = member_blocks(name, members, int(chunk))
        first = next(blocks, None)
        if first is None:
            return
        leaves, treedefs, count = first
        backend = options.backend
        with backend.scope(leaves), calling_with_batch(count, int(lanes)):
            program = self.compiled(name, treedefs, signature_of(leaves), backend, None, options.block_code_cache)
        machine = program.machine

        def checked_blocks() -> Iterator[tuple[list[Any], int]]:
            for block_leaves, block_treedefs, block_count in itertools.chain([first], blocks):
                if block_treedefs != treedefs:
                    raise TypeError(
                        f"the members of {name}.imap() must all have the arguments' structure of the first: "
                        f"{list(block_treedefs)} is not {list(treedefs)}"
                    )
                yield block_leaves, block_count

        def windows() -> Iterator[LaneWindow]:
            for block_leaves, block_count in checked_blocks():
                arrays = pending_inputs(machine, block_leaves, backend)
                yield LaneWindow(arrays, block_count, (False,) * len(arrays))

        failed: dict[int, dict[str, int]] = {}
        flag_keys = lane_flag_keys(options.max_steps is not None)
        cache_key = ("abir.run", machine, int(lanes), int(options.max_stack_depth))
        with backend.scope(leaves):
            if devices is not None:  # each device runs its own lanes
                flushes = stream_lanes_on_devices(
                    machine, stream_devices(f"{name}.imap()", backend, devices), backend, checked_blocks(), int(lanes),
                    int(options.max_stack_depth), cache_key, options.max_steps,
                )  # fmt: skip
            else:
                flushes = lane_flushes(
                    machine, windows(), backend, int(lanes), int(options.max_stack_depth), cache_key, options.max_steps
                )
            outputs = [register_key(name) for name in machine.outputs]
            for finished in flushes:
                for j, member in enumerate(finished.members.tolist()):
                    flags = {key: int(finished.values[key][j]) for key in flag_keys}
                    if any(value != flag_normal_value(key) for key, value in flags.items()):
                        failed[member] = flags
                        continue
                    leaves_out = [finished.values[key][j] for key in outputs]
                    yield member, optree.tree_unflatten(program.frontend.output_treedef, leaves_out)
        if failed:
            error = failed_members_error(machine, backend, failed, flag_keys, options)
            if error is not None:
                raise error

    def empty_results(self, name: str, args: Sequence[Any]) -> Any:
        """What `name(*args)` returns for an empty batch, as NumPy arrays: the inferred result
        types with batch size 0 (compiling the program for the arguments' types)."""
        program = self.for_call(name, args, None)
        outputs = [np.zeros((0, *t.shape), t.dtype) for t in result_types(program)]
        return optree.tree_unflatten(program.frontend.output_treedef, outputs)


def failed_members_error(
    machine: Machine, backend: Backend, failed: Mapping[int, Mapping[str, int]], flag_keys: Sequence[str], options: CallOptions
) -> Exception | None:
    """The error of a stream's members that failed (`failed`: member index -> its error flags)."""
    size = max(failed) + 1
    arrays = {key: np.full(size, flag_normal_value(key), np.int32) for key in flag_keys}
    for member, flags in failed.items():
        for key, value in flags.items():
            arrays[key][member] = value
    return lane_member_errors(machine, backend, arrays, int(options.max_stack_depth), options.max_steps)


_NAMED_BACKENDS: dict[BackendSpec, Backend] = {}


def resolve_backend(backend: Any) -> Backend:
    """The backend a call asked for: a `Backend` (or any implementation of `BackendProtocol`), one
    of the names in `abir.backend_registry` (one shared instance per backend, so compiled code is reused
    between calls) or None (a NumPy backend)."""
    if backend is None:
        return NumpyBackend()
    if isinstance(backend, Backend | BackendProtocol) and not isinstance(backend, type):
        return backend  # a class has the protocol's attributes too: not a backend
    spec = spec_named(backend) if isinstance(backend, str) else None
    if spec is not None:
        if spec not in _NAMED_BACKENDS:
            _NAMED_BACKENDS[spec] = spec.new_backend()
        return _NAMED_BACKENDS[spec]
    hint = f"abir.{backend.__name__}()" if isinstance(backend, type) and issubclass(backend, Backend) else None
    raise TypeError(
        f"backend must be an abir backend (an implementation of abir.BackendProtocol) or one of the names {', '.join(map(repr, backend_names()))}, got "
        f"{backend!r}; pass " + (f"an instance: {hint}" if hint else "abir.NumpyBackend(), abir.JaxBackend() "
        "or abir.TensorFlowBackend(), or a name such as backend='jax'")
    )


def result_types(program: CompiledProgram) -> list[TensorType]:
    """The per-member types of the program's flat results."""
    machine = program.machine
    return [machine.variables[name].type for name in machine.outputs]


def run_program(program: CompiledProgram, leaves: Sequence[Any], batch_size: int, options: CallOptions) -> list[Any]:
    """The output leaves of one run (an empty batch: empty arrays of the result types)."""
    machine = program.machine
    if batch_size == 0:
        prepare_inputs(machine.inputs, [machine.variables[n].type for n in machine.inputs], leaves, options.backend)
        return [options.backend.zeros((0, *t.shape), t.dtype) for t in result_types(program)]
    if options.stackless:
        return list(execute_stackless(program.verified_typed, program.frontend.entry, leaves, options.backend))
    if any(options.backend.is_traced(leaf) for leaf in leaves):
        return options.backend.stage_run(lambda staged: run_machine(program, staged, options), leaves)
    if options.backend.batch_sharding(leaves) is not None:
        key = ("abir.sharded", options.max_stack_depth, options.max_steps, options.pad_batch)
        return options.backend.run_sharded(
            lambda shard: run_machine(program, shard, options), leaves, program.machine.run_cache, key
        )
    return run_machine(program, leaves, options, batch_size)


def steady_run(
    program: CompiledProgram, leaves: Sequence[Any], options: CallOptions
) -> Callable[[Sequence[Any]], list[Any]] | None:
    """`run_machine` for later leaves like `leaves` (those of a plain run just made), without the
    checks they passed (`Machine.steady_run`); None for a run with `max_steps` or `pad_batch`,
    which `run_machine` makes."""
    if options.max_steps is not None or options.pad_batch:
        return None
    machine = program.machine
    batch = int(leaves[0].shape[0]) if leaves else 0
    key = ("abir.run", machine, batch, int(options.max_stack_depth))
    return machine.steady_run(options.backend, leaves, int(options.max_stack_depth), key)


def run_machine(
    program: CompiledProgram, leaves: Sequence[Any], options: CallOptions, batch_size: int | None = None
) -> list[Any]:
    """The program's machine run on `leaves` (of `batch_size` members, found when None)."""
    machine = program.machine
    if batch_size is None:
        batch_size = batch_size_of(
            f"'{machine.name}'", [leaf_shape(leaf) for leaf in leaves], lambda: [f"input {n!r}" for n in machine.inputs]
        )
    rows = machine_rows(batch_size, options)
    return machine.run(
        leaves,
        options.backend,
        max_stack_depth=int(options.max_stack_depth),
        cache_key=("abir.run", machine, rows, int(options.max_stack_depth)),
        max_steps=options.max_steps,
        padded_batch=rows,
    )


@contextlib.contextmanager
def explained_helper_errors() -> Iterator[None]:
    """Within: a failure of an undecorated helper is raised as the `HelperError` naming it
    (`abir.opaque.helper_error`)."""
    mark = failure_mark()
    try:
        yield
    except Exception as err:
        explained = helper_error(err, since=mark)
        if explained is None:
            raise
        raise explained from err


def runs_plain(options: CallOptions, leaves: Sequence[Any], batch_size: int) -> bool:
    """Whether a call runs one machine on concrete arrays (`run_machine`, called by
    `run_program`): not an empty batch, stackless, with lanes, traced or sharded."""
    if batch_size == 0 or options.stackless or runs_with_lanes(options, batch_size):
        return False
    backend = options.backend
    return not any(backend.is_traced(leaf) for leaf in leaves) and backend.batch_sharding(leaves) is None


def runs_with_lanes(options: CallOptions, batch_size: int) -> bool:
    """Whether a call runs its members through lanes: `lanes=` fewer than its members, or
    `progress=True` (as many lanes as members)."""
    if batch_size == 0 or options.stackless:
        return False
    return options.progress or (options.lanes is not None and options.lanes < batch_size)


def run_with_lanes(
    name: str, program: CompiledProgram, leaves: Sequence[Any], batch_size: int, options: CallOptions
) -> Any:
    """The results of a call run through `options.lanes` lanes (`abir.vm.lanes.run_lanes`; on a batch
    sharded over devices, as many on each device: `abir.lane_devices.run_lanes_on_devices`), in
    input order. When the run stops early (KeyboardInterrupt) or some members fail (stack overflow,
    `max_steps`), the error raised carries what finished: `results` (the call's results, with
    zeros for the members in `unfinished`), `finished` and `unfinished` (member indices)."""
    backend = options.backend
    if any(backend.is_traced(leaf) for leaf in leaves):
        raise ValueError(
            f"{name}(..., lanes=...) runs outside traced functions: its arguments are traced "
            "(jax.jit, jax.vmap, tf.function); call it on concrete arrays, or drop lanes="
        )
    sharded = backend.batch_sharding(leaves) is not None
    placement = lane_devices(f"{name}()", leaves) if sharded else None
    members = batch_size if placement is None else max(len(placement.members), 1)
    lanes = members if options.lanes is None else min(int(options.lanes), members)
    bar = progress_bar(f"{name}(..., progress=True)", batch_size, "member") if options.progress else None
    on_progress = None if bar is None else lambda done: bar.update(done - bar.n)
    cache_key = ("abir.run", program.machine, lanes, int(options.max_stack_depth))
    try:
        if placement is not None:  # each device of the sharding runs its own lanes
            outcome = run_lanes_on_devices(
                program.machine, placement, backend, lanes, int(options.max_stack_depth), cache_key,
                options.max_steps, on_progress,
            )  # fmt: skip
        else:
            outcome = run_lanes(
                program.machine, leaves,
                backend,
                lanes,
                max_stack_depth=int(options.max_stack_depth),
                cache_key=cache_key,
                max_steps=options.max_steps,
                on_progress=on_progress,
            )
    finally:
        if bar is not None:
            bar.close()
    results = optree.tree_unflatten(program.frontend.output_treedef, list(outcome.outputs))
    if outcome.error is not None:
        succeeded = outcome.succeeded
        error = outcome.error
        error.results = results  # type: ignore[union-attr]
        error.finished = np.flatnonzero(succeeded).tolist()  # type: ignore[union-attr]
        error.unfinished = np.flatnonzero(~succeeded).tolist()  # type: ignore[union-attr]
        raise error
    return results


def member_blocks(
    name: str, members: Iterable[Sequence[Any]], size: int
) -> Iterator[tuple[list[Any], list[optree.PyTreeSpec], int]]:
    """`members` (each the tuple of one member's arguments) read `size` at a time: per block,
    (the flat argument leaves stacked along a new batch axis and padded to `size` rows with
    copies of the last member, the arguments' structures, the number of members)."""
    it = iter(members)
    start = 0
    while True:
        block = list(itertools.islice(it, size))
        if not block:
            return
        flat = []
        treedefs: list[optree.PyTreeSpec] | None = None
        for index, member in enumerate(block, start):
            if not isinstance(member, tuple):
                raise TypeError(
                    f"member {index} of {name}.imap() is a {type(member).__name__}; each member is the tuple of its "
                    f"arguments, as itertools.starmap takes them (for one argument: (x,))"
                )
            leaves, member_treedefs = flatten_arguments(name, [np.asarray(v) if is_number(v) else v for v in member])
            if treedefs is None:
                treedefs = member_treedefs
            elif member_treedefs != treedefs:
                raise TypeError(f"member {index} of {name}.imap() has another structure of arguments than member {start}")
            flat.append([np.asarray(leaf) for leaf in leaves])
        padded = flat + [flat[-1]] * (size - len(flat))
        stacked = [np.stack(column) for column in zip(*padded, strict=True)]
        yield stacked, list(treedefs or []), len(block)
        start += len(block)


def progress_bar(caller: str, total: int, unit: str) -> Any:
    """A tqdm bar of `total` `unit`s for `caller` (the call that asked for it, named in the
    error when tqdm is missing); tqdm is imported only when a bar is asked for."""
    try:
        from tqdm.auto import tqdm
    except ImportError as error:
        raise ImportError(
            f"{caller} shows its bar with tqdm, which is not installed: pip install tqdm, or call with progress=False"
        ) from error
    return tqdm(total=total, desc=caller.split("(")[0], unit=unit)


def machine_rows(batch_size: int, options: CallOptions) -> int:
    """How many rows the machine runs for `batch_size` members: `padded_size` with `pad_batch`."""
    return padded_size(batch_size) if options.pad_batch and batch_size > 0 else batch_size


def padded_size(batch_size: int) -> int:
    """The power of two at least `batch_size` (`pad_batch=True`): 100, 101 and 128 all run on 128."""
    return 1 << (batch_size - 1).bit_length()


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
