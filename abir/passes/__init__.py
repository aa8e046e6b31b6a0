"""abir's passes (one per file) and the registry abir-opt and the Context use.

Each entry maps a pass's kebab-case name to a lazy factory returning the pass class.
"""

import importlib
from collections.abc import Callable
from functools import partial

from xdsl.passes import ModulePass

PASSES: dict[str, tuple[str, str]] = {
    "infer-types": ("abir.passes.infer_types", "InferTypesPass"),
    "simplify-functional": ("abir.passes.simplify", "SimplifyFunctionalPass"),
    "inline-calls": ("abir.passes.inline_calls", "InlineCallsPass"),
    "if-convert": ("abir.passes.if_convert", "IfConvertPass"),
    "lower-calls": ("abir.passes.lower_calls", "LowerCallsPass"),
    "merge-blocks": ("abir.passes.schedule_blocks", "MergeBlocksPass"),
    "stack-optimize": ("abir.passes.stack_optimize", "StackOptimizePass"),
    "coalesce-copies": ("abir.passes.coalesce_copies", "CoalesceCopiesPass"),
    "fuse-blocks": ("abir.passes.fuse_blocks", "FuseBlocksPass"),
    "allocate-storage": ("abir.passes.allocate_storage", "AllocateStoragePass"),
    "schedule-blocks": ("abir.passes.schedule_blocks", "ScheduleBlocksPass"),
    "stack-to-vm": ("abir.passes.stack_to_vm", "StackToVmPass"),
    "form-superblocks": ("abir.passes.form_superblocks", "FormSuperblocksPass"),
    "merge-identical-blocks": ("abir.passes.merge_identical_blocks", "MergeIdenticalBlocksPass"),
    "order-sweeps": ("abir.passes.order_sweeps", "OrderSweepsPass"),
    "summarize-descents": ("abir.passes.summarize_descents", "SummarizeDescentsPass"),
    "abir-lower": ("abir.passes.pipeline", "AbirLowerPass"),
}
"""Every abir pass by name: (module, class). Only real, working passes are listed here."""


def _load(module: str, name: str) -> type[ModulePass]:
    return getattr(importlib.import_module(module), name)


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every abir pass by name, each as a factory that imports its module on first use."""
    return {name: partial(_load, module, cls) for name, (module, cls) in PASSES.items()}
