"""The compiler pipeline as Python API and as one named pass (`abir-lower`).

    typed = compile_functional(module, "fib", [i64])    # infer types, simplify, if-convert (new module)
    vm_module = lower_to_vm(typed, "fib")               # functional -> stack -> vm (new module)

`compile_functional` runs infer-types, simplify-functional, inline-calls, simplify-functional,
if-convert, simplify-functional.
`lower_to_stack` runs lower-calls, merge-blocks, stack-optimize, coalesce-copies (to a fixed
point with stack-optimize's invariant saves), stack-optimize again (invariant saves only),
allocate-storage; `lower_to_vm` continues with fuse-blocks,
allocate-storage again, schedule-blocks, stack-to-vm, form-superblocks (when asked),
merge-identical-blocks and, for the `flow` order, order-sweeps, verifying the result of each
stage. Both are xDSL `PassPipeline`s of the registered passes (`stack_passes`, `vm_passes`);
`optimize_functional` stays a function: whether simplify-functional runs again depends on
whether inline-calls changed anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute
from xdsl.passes import ModulePass, PassPipeline

from abir.dialects import failing_op, mark_failing_op
from abir.passes.allocate_storage import AllocateStoragePass
from abir.passes.coalesce_copies import CoalesceCopiesPass
from abir.passes.form_superblocks import FormSuperblocksPass
from abir.passes.fuse_blocks import FuseBlocksPass
from abir.passes.if_convert import if_convert
from abir.passes.infer_types import default_entry, infer_types, parse_arg_types
from abir.passes.inline_calls import inline_calls
from abir.passes.lower_calls import LowerCallsPass, lower_calls, replace_module_body
from abir.passes.merge_identical_blocks import MergeIdenticalBlocksPass
from abir.passes.order_sweeps import OrderSweepsPass
from abir.passes.schedule_blocks import MergeBlocksPass, ScheduleBlocksPass
from abir.passes.simplify import simplify_functional
from abir.passes.stack_optimize import StackOptimizePass
from abir.passes.stack_to_vm import StackToVmPass
from abir.passes.summarize_descents import SummarizeDescentsPass


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
        infer_types(typed, entry, arg_types, user_type_inference=user_type_inference)
        optimize_functional(typed)
        typed.verify()
    except Exception as error:
        if (op := failing_op(error)) in originals:
            mark_failing_op(error, originals[op])
        raise
    return typed


def optimize_functional(typed: ModuleOp) -> None:
    """simplify-functional, inline-calls (non-recursive callees, before if-convert so their code is
    converted with the caller's) and simplify-functional again when something was inlined,
    if-convert, simplify-functional again (CSE of the arms' constants)."""
    simplify_functional(typed)
    if inline_calls(typed):
        simplify_functional(typed)
    if_convert(typed)
    simplify_functional(typed)


def stack_passes(entry: str) -> tuple[ModulePass, ...]:
    """The passes from typed functional IR to the allocated, optimized stack program."""
    return (
        LowerCallsPass(entry),
        MergeBlocksPass(),
        StackOptimizePass(),
        CoalesceCopiesPass(drop_saves=True),
        StackOptimizePass(dead_saves=False),  # coalesced copies show saves no call changes
        AllocateStoragePass(),
    )


def vm_passes(block_order: str = "priority", superblocks: bool = True) -> tuple[ModulePass, ...]:
    """The passes from the allocated stack program to the vm program (see `lower_to_vm`)."""
    return (
        FuseBlocksPass(),  # shapes the block list for the machine, like schedule-blocks
        AllocateStoragePass(),  # fused blocks keep more variables temporary
        ScheduleBlocksPass(block_order),
        StackToVmPass(),
        *((FormSuperblocksPass(),) if superblocks else ()),
        MergeIdenticalBlocksPass(),
        *((OrderSweepsPass(),) if block_order == "flow" else ()),
        SummarizeDescentsPass(),  # last: the passes before it see the self-call it summarizes
    )


def run_passes(module: ModuleOp, passes: Sequence[ModulePass]) -> ModuleOp:
    """`module` after `passes` (an xDSL `PassPipeline`, in place), verified."""
    PassPipeline(tuple(passes)).apply(Context(), module)
    module.verify()
    return module


def lower_to_stack(typed_module: ModuleOp, entry: str) -> ModuleOp:
    """The allocated, optimized stack module of a typed functional module (a new module; the typed
    one is left as it is). `lower-calls` builds the stack module afresh, so nothing is cloned."""
    lowered = lower_calls(typed_module, entry)
    return run_passes(lowered, stack_passes(entry)[1:])


def lower_to_vm(
    typed_module: ModuleOp, entry: str, block_order: str = "priority", superblocks: bool = True
) -> ModuleOp:
    """A new verified vm module: opaque declarations, `vm.var`s and one `vm.program @<entry>`,
    its blocks ordered by `schedule-blocks` with `block_order` (`priority` or `flow`), with
    `superblocks`, branch arms merged into their blocks (`form-superblocks`), identical blocks
    merged (`merge-identical-blocks`), and for the `flow`
    order renumbered by expected transitions (`order-sweeps`)."""
    return run_passes(lower_to_stack(typed_module, entry), vm_passes(block_order, superblocks))


@dataclass(frozen=True)
class AbirLowerPass(ModulePass):
    """The whole pipeline from (typed or untyped) functional IR to vm. Options: entry (default: as
    for infer-types, the only function no other function calls when nothing else decides); arg-types, the entry's
    parameter types when the IR leaves them unknown (as for infer-types); block-order, the
    schedule-blocks policy (priority or flow); superblocks, whether to run form-superblocks."""

    name = "abir-lower"

    entry: str | None = None
    arg_types: tuple[str, ...] = ()
    block_order: str = "priority"
    superblocks: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        entry = self.entry or default_entry(op)
        attributes = dict(op.attributes)  # infer-types records `abir.entry`, which the vm module drops
        infer_types(op, entry, parse_arg_types(ctx, self.arg_types))
        optimize_functional(op)
        replace_module_body(op, lower_to_vm(op, entry, self.block_order, self.superblocks))
        op.attributes = attributes
