"""The compiler pipeline: one textual pass-pipeline spec, its Python API and one named pass.

    typed = compile_functional(module, "fib", [i64])    # the functional stage (a new module)
    vm_module = lower_to_vm(typed, "fib")               # the stack and vm stages (a new module)

`DEFAULT_PIPELINE` is the whole pipeline as `abir-opt -p` reads it (xDSL's pipeline syntax, each
pass with its options), made of three stages: `FUNCTIONAL_STAGE` (typed, simplified functional
IR), `STACK_STAGE` (the allocated, optimized stack program) and `VM_STAGE` (the vm program).
`pipeline_specs` fills in the options a caller decides (entry, argument types, block order,
superblocks); `abir-lower` (`AbirLowerPass`), `compile_functional`, `lower_to_stack`,
`lower_to_vm` and `abir.calling.Compiler.typed_module` all build their passes from it.

Verification: each function verifies the module it returns (a batched call verifies the
frontend's module, its input, and the vm module the machine runs; the stack stage's module,
which the vm stage goes on transforming, only through the vm module's). Within
`verifying_each_pass` (or with `ABIR_VERIFY_EACH_PASS=1` in the environment) every pipeline
verifies its module after each pass instead, an error naming the pass that broke it, as
`abir-opt` does between the passes of its `-p` and `abir-lower` does always.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline
from xdsl.utils.exceptions import VerifyException

from abir.dialects import failing_op, mark_failing_op
from abir.passes import get_all_passes
from abir.passes.infer_types import default_entry, infer_types
from abir.passes.lower_calls import LowerCallsPass, lower_calls

FUNCTIONAL_STAGE = (
    "infer-types,simplify-functional,inline-calls{simplify=true},if-convert,simplify-functional"
)
"""Types from the entry, then simplification; inline-calls runs before if-convert, so that
inlined code is converted with its caller's, and simplify-functional runs again after if-convert
to share the arms' constants."""
STACK_STAGE = (
    "lower-calls,merge-blocks,stack-optimize,coalesce-copies{drop-saves=true},"
    "stack-optimize{dead-saves=false},allocate-storage"
)
"""The second stack-optimize drops the saves coalesced copies show no call changes."""
VM_STAGE = (
    "fuse-blocks,allocate-storage,schedule-blocks{order=priority},stack-to-vm,form-superblocks,"
    "merge-identical-blocks,summarize-descents"
)
"""fuse-blocks shapes the block list for the machine (fused blocks keep more variables
temporary, hence allocate-storage again); summarize-descents runs last, since the passes
before it see the self-call it summarizes. `pipeline_specs` adds order-sweeps after
merge-identical-blocks for the `flow` block order and drops form-superblocks without
superblocks."""
DEFAULT_PIPELINE = f"{FUNCTIONAL_STAGE},{STACK_STAGE},{VM_STAGE}"
"""The pipeline a batched call runs (block order `priority`, superblocks on), entry and
argument types left to infer-types."""
BLOCK_ORDERS = ("priority", "flow")
VERIFY_EACH_PASS_VARIABLE = "ABIR_VERIFY_EACH_PASS"
"""The environment variable that, set to `1`, turns `verifying_each_pass` on by default."""

_verify_each_pass: ContextVar[bool] = ContextVar(
    "abir_verify_each_pass", default=os.environ.get(VERIFY_EACH_PASS_VARIABLE) == "1"
)


@contextlib.contextmanager
def verifying_each_pass(on: bool = True) -> Iterator[None]:
    """Within (`on`): every pipeline of this module verifies its module after each pass, not only
    the module it returns, and a module a pass leaves invalid fails with that pass named."""
    token = _verify_each_pass.set(on)
    try:
        yield
    finally:
        _verify_each_pass.reset(token)


def verify_after_pass(previous: ModulePass | None, module: ModuleOp, _next: ModulePass | None) -> None:
    """An xDSL `PassPipeline` callback: `module` verified after pass `previous` (not before the
    first pass: the input was verified by whoever made it), the error naming `previous`."""
    if previous is None:
        return
    try:
        module.verify()
    except VerifyException as error:
        error.add_note(f"(the module stopped verifying after pass {previous.name})")
        raise


def pipeline_specs(
    stage: str = DEFAULT_PIPELINE,
    *,
    entry: str | None = None,
    arg_types: Sequence[str] = (),
    block_order: str = "priority",
    superblocks: bool = True,
) -> list[ArgSpec]:
    """The passes of `stage` (a part of `DEFAULT_PIPELINE`) with the caller's options: `entry`
    for infer-types and lower-calls, `arg_types` (as text) for infer-types, `block_order` for
    schedule-blocks (`flow` adds order-sweeps after merge-identical-blocks), and without
    `superblocks` no form-superblocks."""
    if block_order not in BLOCK_ORDERS:
        raise ValueError(f"block order must be one of {', '.join(BLOCK_ORDERS)}, got '{block_order}'")
    specs: list[ArgSpec] = []
    for spec in parse_pipeline(stage):
        options = dict(spec.parameters)
        if spec.name in ("infer-types", "lower-calls") and entry is not None:
            options["entry"] = (entry,)
        if spec.name == "infer-types" and arg_types:
            options["arg-types"] = tuple(arg_types)
        if spec.name == "schedule-blocks":
            options["order"] = (block_order,)
        if spec.name == "form-superblocks" and not superblocks:
            continue
        specs.append(ArgSpec(spec.name, options))
        if spec.name == "merge-identical-blocks" and block_order == "flow":
            specs.append(ArgSpec("order-sweeps", {}))
    return specs


def passes_of(specs: Iterable[ArgSpec], **instead: ModulePass) -> tuple[ModulePass, ...]:
    """The registered passes `specs` name, with their options; `instead` gives a pass object to
    use for a pass name (keyword with `_` for `-`), for inputs no textual option can carry; the
    spec of a pass given so must carry no options (they would be lost)."""
    passes = []
    for spec in specs:
        given = instead.get(spec.name.replace("-", "_"))
        if given is not None and spec.parameters:
            raise ValueError(f"'{spec}' has options, but a {type(given).__name__} replaces it; give them to that pass")
        passes.append(given if given is not None else pass_of(spec))
    return tuple(passes)


def pass_of(spec: ArgSpec) -> ModulePass:
    """The registered pass `spec` names, with its options."""
    return _made_pass(spec.name, tuple(sorted(spec.parameters.items())))


@functools.lru_cache(maxsize=256)
def _made_pass(name: str, options: tuple[tuple[str, Any], ...]) -> ModulePass:
    """One pass object per name and options, made once: passes are frozen dataclasses, and
    `from_pass_spec` reads the pass's fields and type hints each time it makes one."""
    return get_all_passes()[name]().from_pass_spec(ArgSpec(name, dict(options)))


@dataclass(frozen=True)
class TypeInferenceWithCallables(ModulePass):
    """infer-types with the inputs only Python gives: argument types as attributes, user
    type-inference callables by function name and which arguments are weak (Python numbers).
    Not registered: `passes_of(..., infer_types=...)` puts it where the spec says infer-types."""

    name = "infer-types"

    entry: str = ""
    arg_types: tuple[Attribute, ...] = ()
    user_type_inference: Mapping[str, Callable[..., Any]] | None = field(default=None, compare=False)
    weak_args: tuple[bool, ...] | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        infer_types(
            op, self.entry, list(self.arg_types), user_type_inference=self.user_type_inference, weak_args=self.weak_args
        )


def type_and_optimize(
    module: ModuleOp,
    entry: str,
    arg_types: Sequence[Attribute],
    *,
    user_type_inference: Mapping[str, Callable[..., Any]] | None = None,
    weak_args: Sequence[bool] | None = None,
    verify: bool = True,
) -> ModuleOp:
    """`module` after `FUNCTIONAL_STAGE` (in place), `entry` typed with `arg_types`; verified
    unless not `verify` (`run_passes`)."""
    infer = TypeInferenceWithCallables(
        entry, tuple(arg_types), user_type_inference, None if weak_args is None else tuple(weak_args)
    )
    return run_passes(module, passes_of(pipeline_specs(FUNCTIONAL_STAGE), infer_types=infer), verify=verify)


def compile_functional(
    module: ModuleOp,
    entry: str,
    arg_types: Sequence[Attribute],
    *,
    user_type_inference: Mapping[str, Callable[..., Any]] | None = None,
) -> ModuleOp:
    """A new functional module: `entry` typed with `arg_types`, every value typed by inference,
    simplified (constant folding, CSE, DCE), only functions reachable from `entry`; verified.
    An error that names the op it rejects (`failing_op`) names the op of `module` it was cloned
    from, so that a tool that read `module` from text can point at its line."""
    typed = module.clone()
    originals = dict(zip(typed.walk(), module.walk(), strict=True))
    try:
        type_and_optimize(typed, entry, arg_types, user_type_inference=user_type_inference)
    except Exception as error:
        if (op := failing_op(error)) in originals:
            mark_failing_op(error, originals[op])
        raise
    return typed


def run_passes(module: ModuleOp, passes: Sequence[ModulePass], *, verify: bool = True) -> ModuleOp:
    """`module` after `passes` (an xDSL `PassPipeline`, in place), verified after each pass
    within `verifying_each_pass`, else at the end unless not `verify` (a module the caller goes
    on transforming, whose result it verifies)."""
    each = _verify_each_pass.get() and len(passes) > 0
    PassPipeline(tuple(passes), verify_after_pass if each else None).apply(Context(), module)
    if verify and not each:
        module.verify()
    return module


def lower_to_stack(typed_module: ModuleOp, entry: str, verify: bool = True) -> ModuleOp:
    """The allocated, optimized stack module of a typed functional module (`STACK_STAGE`; a new
    module, the typed one is left as it is: lower-calls builds the stack module afresh);
    verified unless not `verify` (`run_passes`)."""
    first, *rest = pipeline_specs(STACK_STAGE, entry=entry)
    if first.name != LowerCallsPass.name:
        raise ValueError(f"STACK_STAGE must begin with {LowerCallsPass.name}, not {first.name}")
    stack_module = lower_calls(typed_module, entry)
    if _verify_each_pass.get():
        verify_after_pass(LowerCallsPass(entry), stack_module, None)
    return run_passes(stack_module, passes_of(rest), verify=verify)


def lower_to_vm(
    typed_module: ModuleOp, entry: str, block_order: str = "priority", superblocks: bool = True
) -> ModuleOp:
    """A new verified vm module (`STACK_STAGE`, then `VM_STAGE`): opaque declarations,
    `vm.var`s and one `vm.program @<entry>`, its blocks ordered by schedule-blocks with
    `block_order` (`priority` or `flow`), with `superblocks` branch arms merged into their blocks
    (form-superblocks)."""
    vm_specs = pipeline_specs(VM_STAGE, block_order=block_order, superblocks=superblocks)
    return run_passes(lower_to_stack(typed_module, entry, verify=False), passes_of(vm_specs))


@dataclass(frozen=True)
class AbirLowerPass(ModulePass):
    """The whole pipeline (`DEFAULT_PIPELINE`) from (typed or untyped) functional IR to vm.
    Options: entry (default: as for infer-types, the only function no other function calls when
    nothing else decides); arg-types, the entry's parameter types when the IR leaves them unknown
    (as for infer-types); block-order, the schedule-blocks policy (priority or flow);
    superblocks, whether to run form-superblocks. The module is verified after each pass
    (`verify_after_pass`), as abir-opt verifies between the passes of its `-p`."""

    name = "abir-lower"

    entry: str | None = None
    arg_types: tuple[str, ...] = ()
    block_order: str = "priority"
    superblocks: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        entry = self.entry or default_entry(op)
        attributes = dict(op.attributes)  # infer-types records `abir.entry`, which the vm module drops
        options = {"entry": entry, "arg_types": self.arg_types, "block_order": self.block_order}
        for stage in (FUNCTIONAL_STAGE, STACK_STAGE, VM_STAGE):
            specs = pipeline_specs(stage, **options, superblocks=self.superblocks)
            PassPipeline(passes_of(specs), verify_after_pass).apply(ctx, op)
        op.attributes = attributes
