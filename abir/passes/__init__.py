"""abir's passes (one per file) and the registry abir-opt and the Context use.

Each entry maps a pass's kebab-case name to a lazy factory returning the pass class.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every abir pass by name. Only real, working passes are listed here."""

    def infer_types() -> type[ModulePass]:
        from abir.passes.infer_types import InferTypesPass

        return InferTypesPass

    def simplify_functional() -> type[ModulePass]:
        from abir.passes.simplify import SimplifyFunctionalPass

        return SimplifyFunctionalPass

    def inline_calls() -> type[ModulePass]:
        from abir.passes.inline_calls import InlineCallsPass

        return InlineCallsPass

    def if_convert() -> type[ModulePass]:
        from abir.passes.if_convert import IfConvertPass

        return IfConvertPass

    def lower_calls() -> type[ModulePass]:
        from abir.passes.lower_calls import LowerCallsPass

        return LowerCallsPass

    def merge_blocks() -> type[ModulePass]:
        from abir.passes.schedule_blocks import MergeBlocksPass

        return MergeBlocksPass

    def stack_optimize() -> type[ModulePass]:
        from abir.passes.stack_optimize import StackOptimizePass

        return StackOptimizePass

    def coalesce_copies() -> type[ModulePass]:
        from abir.passes.coalesce_copies import CoalesceCopiesPass

        return CoalesceCopiesPass

    def fuse_blocks() -> type[ModulePass]:
        from abir.passes.fuse_blocks import FuseBlocksPass

        return FuseBlocksPass

    def allocate_storage() -> type[ModulePass]:
        from abir.passes.allocate_storage import AllocateStoragePass

        return AllocateStoragePass

    def schedule_blocks() -> type[ModulePass]:
        from abir.passes.schedule_blocks import ScheduleBlocksPass

        return ScheduleBlocksPass

    def stack_to_vm() -> type[ModulePass]:
        from abir.passes.stack_to_vm import StackToVmPass

        return StackToVmPass

    def form_superblocks() -> type[ModulePass]:
        from abir.passes.form_superblocks import FormSuperblocksPass

        return FormSuperblocksPass

    def abir_lower() -> type[ModulePass]:
        from abir.passes.pipeline import AbirLowerPass

        return AbirLowerPass

    return {
        "infer-types": infer_types,
        "simplify-functional": simplify_functional,
        "inline-calls": inline_calls,
        "if-convert": if_convert,
        "lower-calls": lower_calls,
        "merge-blocks": merge_blocks,
        "stack-optimize": stack_optimize,
        "coalesce-copies": coalesce_copies,
        "fuse-blocks": fuse_blocks,
        "allocate-storage": allocate_storage,
        "schedule-blocks": schedule_blocks,
        "stack-to-vm": stack_to_vm,
        "form-superblocks": form_superblocks,
        "abir-lower": abir_lower,
    }
