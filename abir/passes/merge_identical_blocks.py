"""`merge-identical-blocks`: vm blocks that do exactly the same thing become one block.

`fuse-blocks` copies a small block into each block that jumps to it, so that a member runs both
in one step; when those predecessors later keep the copy apart (a side exit of a superblock
leads to it), the program ends up with several identical blocks. On the machine that splits the
members who run that code over several block runs, each masking all the others. This pass
merges them back (cross-jumping): every jump, branch, side exit, call or descent that leads to
a copy leads to the first one instead (`vm.BlockTargets`), and the copies go. Merging can make
more blocks identical (two blocks that jumped to two copies now jump to the same block), so it
repeats until nothing changes. Blocks are then renumbered in their order.

Two blocks are identical when their ops are, one by one (name, properties, attributes, result
types, and operands as the same positions among the block's values; value names play no part),
and so are their attributes (the function they belong to) but the source locations `abir.loc`
and `abir.call_loc` (copies made by `fuse-blocks` share them; a merged block keeps the first
one's); what a block does depends on nothing else. The entry block (0) is never dropped.

`fuse-blocks` leaves such copies, e.g. one per way out of a loop; what merging them gains:
docs/performance.md#merge-identical-blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, SSAValue
from xdsl.passes import ModulePass

from abir.dialects import vm
from abir.passes.analysis import CALL_LOCATION_ATTR, LOCATION_ATTR, the_vm_program
from abir.passes.form_superblocks import renumber


class AttributeTexts:
    """Each attribute's text (`str`), printed once per attribute object: the blocks' keys are
    computed again in every round of merging, mostly of the same attributes. The objects are
    kept, so that no other object can take a printed one's `id` while the texts are in use."""

    def __init__(self) -> None:
        self._texts: dict[int, tuple[Attribute, str]] = {}

    def __call__(self, attribute: Attribute) -> str:
        kept = self._texts.get(id(attribute))
        if kept is None:
            kept = self._texts[id(attribute)] = (attribute, str(attribute))
        return kept[1]

    def of(self, attributes: Mapping[str, Attribute]) -> tuple[tuple[str, str], ...]:
        """The (name, text) pairs of `attributes`, sorted by name."""
        return tuple(sorted((name, self(value)) for name, value in attributes.items()))


def block_key(block: vm.BlockOp, texts: AttributeTexts | None = None) -> tuple[object, ...]:
    """What the block does: its attributes, then per op its name, properties, attributes,
    operands (as positions of the block's earlier results) and result types. Names of values
    play no part. `texts` prints the attributes (a fresh `AttributeTexts` by default)."""
    texts = texts or AttributeTexts()
    positions: dict[SSAValue, int] = {}
    ops: list[tuple[object, ...]] = []
    for op in block.body.block.ops:
        if op.regions:  # not produced by the pipeline; compared by identity, never merged
            return (id(block),)
        operands = tuple(positions.get(operand, -1 - id(operand)) for operand in op.operands)
        attributes = {name: value for name, value in op.attributes.items() if name != CALL_LOCATION_ATTR}
        ops.append((op.name, texts.of(op.properties), texts.of(attributes), operands, tuple(map(texts, op.result_types))))
        for result in op.results:
            positions[result] = len(positions)
    attributes = {name: value for name, value in block.attributes.items() if name != LOCATION_ATTR}
    return (texts.of(attributes), *ops)


def redirect(program: vm.ProgramOp, replaced: dict[int, int]) -> None:
    """Point every block reference in `program` that names a key of `replaced` at its value."""
    vm.retarget_blocks(program.blocks, replaced)


def merge_once(program: vm.ProgramOp, texts: AttributeTexts) -> bool:
    """Merge every group of identical blocks into its first block; whether any merged."""
    first: dict[tuple[object, ...], int] = {}
    replaced: dict[int, int] = {}
    for block in program.blocks:
        key = block_key(block, texts)
        if key in first and block.number != 0:
            replaced[block.number] = first[key]
        else:
            first.setdefault(key, block.number)
    if not replaced:
        return False
    redirect(program, replaced)
    for block in list(program.blocks):
        if block.number in replaced:
            block.detach()
            block.erase()
    return True


def merge_identical_blocks(module: ModuleOp) -> None:
    """Merge identical vm blocks until none are left (see the module docstring)."""
    program = the_vm_program(module, MergeIdenticalBlocksPass.name)
    changed = False
    texts = AttributeTexts()
    while merge_once(program, texts):
        changed = True
    if changed:
        numbers = sorted(block.number for block in program.blocks)
        renumber(program, {old: new for new, old in enumerate(numbers)})


@dataclass(frozen=True)
class MergeIdenticalBlocksPass(ModulePass):
    """Merge vm blocks whose ops and attributes are the same; references go to the first."""

    name = "merge-identical-blocks"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        merge_identical_blocks(op)
