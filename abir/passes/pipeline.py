"""The compiler pipeline as Python API and as one named pass (`abir-lower`).

    typed = compile_functional(module, "fib", [i64])    # infer types, simplify, if-convert (new module)
    vm_module = lower_to_vm(typed, "fib")               # functional -> stack -> vm (new module)

`compile_functional` runs infer-types, simplify-functional, inline-calls, simplify-functional,
if-convert, simplify-functional.
`lower_to_stack` runs lower-calls, merge-blocks, stack-optimize, then coalesce-copies and
stack-optimize (invariant saves only) in turn until no copy coalesces, allocate-storage;
`lower_to_vm` continues with fuse-blocks, allocate-storage again, schedule-blocks, stack-to-vm,
form-superblocks (when asked), merge-identical-blocks and, for the `flow` order, order-sweeps,
verifying the result of each stage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute
from xdsl.passes import ModulePass

from abir.passes.allocate_storage import allocate_storage
from abir.passes.coalesce_copies import coalesce_copies
from abir.passes.form_superblocks import form_superblocks
from abir.passes.fuse_blocks import fuse_blocks
from abir.passes.if_convert import if_convert
from abir.passes.infer_types import default_entry, infer_types, parse_arg_types
from abir.passes.inline_calls import inline_calls
from abir.passes.lower_calls import lower_calls, replace_module_body
from abir.passes.merge_identical_blocks import merge_identical_blocks
from abir.passes.order_sweeps import order_sweeps
from abir.passes.schedule_blocks import merge_blocks, schedule_blocks
from abir.passes.simplify import simplify_functional
from abir.passes.stack_optimize import optimize_stack
from abir.passes.stack_to_vm import stack_to_vm


def compile_functional(
    module: ModuleOp,
    entry: str,
    arg_types: Sequence[Attribute],
    *,
    user_type_inference: Mapping[str, Callable[..., Any]] | None = None,
) -> ModuleOp:
    """A new functional module: `entry` typed with `arg_types`, every value typed by inference,
    simplified (constant folding, CSE, DCE), only functions reachable from `entry`; verified."""
    typed = module.clone()
    infer_types(typed, entry, arg_types, user_type_inference=user_type_inference)
    optimize_functional(typed)
    typed.verify()
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


def lower_to_stack(typed_module: ModuleOp, entry: str) -> ModuleOp:
    """The allocated, optimized stack module of a typed functional module (a new module)."""
    lowered = lower_calls(typed_module, entry)
    merge_blocks(lowered)
    optimize_stack(lowered)
    # Coalesced copies show saves no call changes; dropping those saves ends the interference
    # the restores made (NUTS: the sampler's key, energy and step then share one variable with
    # build_tree's parameters; one core, B=64, 16.3-17.0 -> 15.1-15.3 ms). Each round merges a
    # variable away, so this ends.
    while coalesce_copies(lowered):
        optimize_stack(lowered, dead_saves=False)
    allocate_storage(lowered)
    lowered.verify()
    return lowered


def lower_to_vm(
    typed_module: ModuleOp, entry: str, block_order: str = "priority", superblocks: bool = True
) -> ModuleOp:
    """A new verified vm module: opaque declarations, `vm.var`s and one `vm.program @<entry>`,
    its blocks ordered by `schedule-blocks` with `block_order` (`priority` or `flow`), with
    `superblocks`, branch arms merged into their blocks (`form-superblocks`), identical blocks
    merged (`merge-identical-blocks`), and for the `flow`
    order renumbered by expected transitions (`order-sweeps`)."""
    lowered = lower_to_stack(typed_module, entry)
    fuse_blocks(lowered)  # shapes the block list for the machine, like schedule-blocks
    allocate_storage(lowered)  # fused blocks keep more variables temporary
    schedule_blocks(lowered, block_order)
    result = stack_to_vm(lowered)
    if superblocks:
        form_superblocks(result)
    merge_identical_blocks(result)
    if block_order == "flow":
        order_sweeps(result)
    result.verify()
    return result


@dataclass(frozen=True)
class AbirLowerPass(ModulePass):
    """The whole pipeline from (typed or untyped) functional IR to vm. Options: entry (default:
    the module's `abir.entry` attribute, its only function, or its only fully typed one); arg-types, the entry's
    parameter types when the IR leaves them unknown (as for infer-types); block-order, the
    schedule-blocks policy (priority or flow); superblocks, whether to run form-superblocks."""

    name = "abir-lower"

    entry: str | None = None
    arg_types: tuple[str, ...] = ()
    block_order: str = "priority"
    superblocks: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        entry = self.entry or default_entry(op)
        typed = op.clone()
        infer_types(typed, entry, parse_arg_types(ctx, self.arg_types))
        optimize_functional(typed)
        replace_module_body(op, lower_to_vm(typed, entry, self.block_order, self.superblocks))
